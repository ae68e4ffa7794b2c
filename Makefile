# hookflow: one Makefile for the service, its tests and its local runs.
#
#   make            build build/hookflow
#   make run        build and serve (embedded PostgreSQL under .hookflow/ unless
#                   HOOKFLOW_DATABASE_URL is set)
#   make check      the fast loop: static checks, unit tests (ASan+UBSan) and
#                   integration tests (real Postgres, real binary, real webhook
#                   servers); no Docker, no browser, no benchmark
#   make test       the full suite that .ci/run calls: make check, then part
#                   of the integration suite through PgBouncer, chaos,
#                   failover (ha-test), ThreadSanitizer, valgrind, contract,
#                   SDKs, dashboard, examples, fuzz, Docker and bench smoke tests
#   make sdk        write the SDKs' code generated from openapi/openapi.yaml
#   make format     rewrite the C sources to .clang-format
#   make SANITIZE=address,undefined   build everything with sanitizers

CC       ?= cc
PKGS     := libmicrohttpd libcurl jansson libpq libssl libcrypto
SANITIZE ?=
BUILD    ?= build

WARN     := -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wstrict-prototypes \
            -Wmissing-prototypes -Wvla
CFLAGS   ?= -O2 -g
CFLAGS   += -std=c11 -D_GNU_SOURCE -pthread $(WARN) -I. \
            $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LDLIBS   += $(shell pkg-config --libs $(PKGS) 2>/dev/null) -pthread -lm
ifneq ($(SANITIZE),)
CFLAGS   += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer
LDFLAGS  += -fsanitize=$(SANITIZE)
endif

LIB_SRC  := $(wildcard base/*.c db/*.c service/*.c handlers/*.c)
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/migrations.o $(BUILD)/gen/engine.o \
            $(BUILD)/gen/openapi.o $(BUILD)/gen/dashboard.o
MIGRATIONS := $(sort $(wildcard migrations/*.sql))
ENGINE_SQL := $(sort $(wildcard db/engine/*.sql))
MAIN_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(wildcard cmd/*.c))
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
DEPS     := $(LIB_OBJ:.o=.d) $(MAIN_OBJ:.o=.d)

.PHONY: check lint format format-check layers migrations-check examples-test sdk sdk-check sdk-test all asan tsan tsan-test valgrind-test run test unit integration integration-pgbouncer contract e2e fuzz fuzz-build fuzz-bins fuzz-smoke docker-smoke bench \
        bench-smoke soak chaos chaos-short ha-test deps clean migrate

all: $(BUILD)/hookflow

# V=1 shows the full compiler command lines.
ifeq ($(V),1)
Q :=
else
Q := @
endif

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/gen/migrations.c: $(MIGRATIONS) scripts/embed-sql.sh
	@mkdir -p $(dir $@)
	$(Q)scripts/embed-sql.sh db_migrations $(MIGRATIONS) > $@

$(BUILD)/gen/engine.c: $(ENGINE_SQL) scripts/embed-sql.sh
	@mkdir -p $(dir $@)
	$(Q)scripts/embed-sql.sh db_engine_files $(ENGINE_SQL) > $@

$(BUILD)/gen/openapi.c: openapi/openapi.yaml scripts/embed-text.sh
	@mkdir -p $(dir $@)
	scripts/embed-text.sh hookflow_openapi openapi/openapi.yaml > $@

$(BUILD)/gen/dashboard.c: dashboard/index.html scripts/embed-text.sh
	@mkdir -p $(dir $@)
	scripts/embed-text.sh hookflow_dashboard dashboard/index.html > $@

$(BUILD)/gen/%.o: $(BUILD)/gen/%.c
	$(Q)$(CC) $(CFLAGS) -Wno-missing-variable-declarations -c $< -o $@

$(BUILD)/libhookflow.a: $(LIB_OBJ)
	@rm -f $@
	$(Q)ar rcs $@ $^

$(BUILD)/hookflow: $(MAIN_OBJ) $(BUILD)/libhookflow.a
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libhookflow.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  TEST    $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libhookflow.a $(LDLIBS) -lcmocka

-include $(DEPS)

# Installs the Debian packages the build and the tests need, when run as root and
# something is missing. Harmless otherwise.
deps:
	@scripts/deps.sh

run: deps all
	@scripts/run.sh

migrate: all
	$(BUILD)/hookflow migrate

# Unit tests run in a sanitizer build of their own, so `make test` proves them
# under ASan and UBSan whatever the main build is.
unit:
	@$(MAKE) --no-print-directory BUILD=build/san SANITIZE=address,undefined \
	    $(patsubst $(BUILD)/%,build/san/%,$(UNIT_BIN))
	@set -e; for t in $(patsubst $(BUILD)/%,build/san/%,$(UNIT_BIN)); do \
	    echo "== $$t"; ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1 $$t; done

# The integration suite runs against an AddressSanitizer + UBSan build of the
# binary (build/asan/hookflow), so every scenario also proves the absence of
# memory errors, undefined behaviour and leaks (a report fails the run: the
# process exits non-zero and the suite checks exit codes and logs).
asan:
	@CFLAGS="-O1 -g -fno-sanitize-recover=undefined" $(MAKE) --no-print-directory \
	    BUILD=build/asan SANITIZE=address,undefined build/asan/hookflow

# The concurrent paths against a ThreadSanitizer build: the dispatcher's
# scenarios (concurrent calls, cancel, retries, callbacks, two instances, the
# egress proxy's resolver threads), the long-polls (tests/unit/test_longpoll.c,
# the wait_ms and group tests, the stress of tests/integration/test_races.py),
# the connection pool under contention, and the request deadlines and /metrics
# snapshot under load (test_http_limits, test_small_leaks), TLS to webhooks (the
# CA certificates shared by the workers, test_tls), and the span queue that
# every worker thread feeds and the exporter drains (test_traces). A data race
# aborts the process (halt_on_error) and fails its test.
tsan:
	@CFLAGS="-O1 -g" $(MAKE) --no-print-directory BUILD=build/tsan SANITIZE=thread \
	    build/tsan/hookflow build/tsan/tests/test_longpoll

TSAN_TESTS := test_cancel or test_retries or test_callbacks or test_multi_instance or \
              test_outcomes or test_egress_proxy or test_races or test_wait_ms or test_long_poll or \
              test_http_limits or test_small_leaks or test_delivery_tokens or \
              test_engine or test_tls or test_traces

tsan-test: tsan
	@echo "== build/tsan/tests/test_longpoll"
	@TSAN_OPTIONS="halt_on_error=1 exitcode=66" build/tsan/tests/test_longpoll
	@TSAN_OPTIONS="halt_on_error=1 exitcode=66" HOOKFLOW_BIN=build/tsan/hookflow \
	    scripts/integration.sh -k "$(TSAN_TESTS)"

# One full scenario with the binary under valgrind memcheck (any memory error
# or definite leak fails it).
valgrind-test: all
	@/usr/bin/python3 tests/valgrind/scenario.py

integration: asan
	@HOOKFLOW_BIN=$${HOOKFLOW_BIN:-build/asan/hookflow} scripts/integration.sh

# A representative part of the integration suite once more, with every
# instance behind PgBouncer in transaction pooling mode (README "PgBouncer";
# HOOKFLOW_TEST_PGBOUNCER=1 in tests/integration/conftest.py): runs, steps and
# their outcomes, retries, signals, cancel, callbacks, groups, asynchronous
# steps, child runs, schedules, flow control's claims, KV, memo, reruns, dead
# letters, traces, and tests/integration/test_pgbouncer.py.
PGBOUNCER_TESTS := test_runs_submit or test_runs_read or test_outcomes or test_retries or \
                   test_signals or test_wait_any or test_cancel or test_callbacks or \
                   test_groups or test_async_steps or test_child_runs or test_schedules or \
                   test_flow_claim or test_kv or test_memo or test_rerun or test_dead_letters or \
                   test_traces or test_pgbouncer

integration-pgbouncer: asan
	@HOOKFLOW_TEST_PGBOUNCER=1 HOOKFLOW_BIN=$${HOOKFLOW_BIN:-build/asan/hookflow} \
	    scripts/integration.sh -k "$(PGBOUNCER_TESTS)"

# The OpenAPI contract: lint, generated TypeScript client, responses checked
# against the schemas (tests/contract, pinned npm packages).
contract: all
	@tests/contract/run.sh

# The SDKs (sdk/typescript, sdk/python; sdk/README.md). `make sdk` writes their code
# generated from openapi/openapi.yaml (openapi-typescript and sdk/generate.py: types and
# one method per operation); `make sdk-check` fails when the committed code is not what
# the spec gives; `make sdk-test` (part of make test) runs that check, builds the
# TypeScript SDK and runs both SDKs' tests against the running service (tests/sdk).
sdk:
	@sdk/generate.sh

sdk-check:
	@sdk/generate.sh --check

sdk-test: all
	@tests/sdk/run.sh

# The dashboard in headless Chromium (tests/e2e).
e2e: all
	@tests/e2e/run.sh

# libFuzzer targets (tests/fuzz/fuzz_<name>.c): `make fuzz-build` compiles
# the library with clang and -fsanitize=fuzzer-no-link,address,undefined into
# build/fuzz/ and links build/fuzz/fuzz_<name>; `make fuzz` runs each for
# FUZZ_SECONDS (default 60); `make fuzz-smoke` (part of make test) runs each
# briefly from its checked-in corpus (tests/fuzz/run.sh).
FUZZ_CC  ?= $(firstword $(shell command -v clang-14 clang 2>/dev/null) clang)
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)

# CFLAGS goes through the environment, so this Makefile's own flags are added
# to it; UBSan findings abort, so libFuzzer sees them as crashes.
fuzz-build:
	@CFLAGS="-g -O1 -fno-sanitize-recover=undefined" $(MAKE) --no-print-directory \
	    BUILD=build/fuzz CC=$(FUZZ_CC) SANITIZE=fuzzer-no-link,address,undefined fuzz-bins

fuzz-bins: $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/%)
	@:

$(BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(BUILD)/libhookflow.a
	@$(if $(Q),echo "  FUZZ    $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -fsanitize=fuzzer -o $@ $< $(BUILD)/libhookflow.a $(LDLIBS)

fuzz:
	@tests/fuzz/run.sh $${FUZZ_SECONDS:-60}

fuzz-smoke:
	@tests/fuzz/run.sh 5

# The benchmark (tests/bench, BENCHMARKS.md): a throwaway durable PostgreSQL, a C
# webhook and a C load generator; prints one table of figures against targets
# and draws the charts (gnuplot) into build/bench/charts/; BENCH_SWEEP=1 adds
# the cost sweeps, BENCH_SAVE_CHARTS=1 copies the charts to docs/bench/.
# `make bench-smoke` (part of make test) is a small version that only fails on
# correctness: runs lost or a step settled twice.
bench: deps all
	@tests/bench/bench.sh

bench-smoke: all
	@BENCH_SCALE=smoke tests/bench/bench.sh

# The soak (tests/bench/soak.sh): 10 minutes of 10-step runs submitted open
# loop at 70% of the peak (measured first over 60,000 runs), with
# HOOKFLOW_RETENTION_MS set so that old runs are deleted as new ones come;
# compares the first and the last minute (throughput, p99, database size,
# RSS), records the machine's CPU and the checkpoints, and draws
# build/bench/charts/soak.png.
# Fails only on correctness. SOAK_SECONDS, SOAK_RATE: see the script.
soak: deps all
	@tests/bench/soak.sh

# The chaos test (tests/chaos): runs of 5 steps while hookflow is SIGKILLed and
# restarted, PostgreSQL is restarted under it and the webhook answers 500s,
# timeouts and connection resets; every run must end exactly once, as the
# webhook decided, with its callback. `make chaos` is the long version (1,000
# runs, 3 SIGKILLs); `make chaos-short` (part of make test) runs 200 against the
# ASan build.
chaos: all
	@HOOKFLOW_BIN=$${HOOKFLOW_BIN:-$(BUILD)/hookflow} tests/chaos/run.sh long

chaos-short: asan
	@HOOKFLOW_BIN=$${HOOKFLOW_BIN:-build/asan/hookflow} tests/chaos/run.sh short

# The high-availability tests (tests/ha, README "High availability"): a
# pg_auto_failover formation on loopback (a monitor, a primary and its
# synchronous standby), two hookflow instances on its multi-host URL and 300
# runs in flight while the primary node is SIGKILLed, then during a planned
# switchover; nothing may be lost or settled twice, no request may get a 500
# or hang. About 1.5 minutes; part of make test, against the ASan build.
ha-test: asan
	@HOOKFLOW_BIN=$${HOOKFLOW_BIN:-build/asan/hookflow} tests/ha/run.sh

# The example webhooks of examples/, walked through end to end.
examples-test: all
	@examples/test-examples.sh

# The Docker deployment path, when this machine can run a Docker engine.
docker-smoke: all
	@docker/smoke-test.sh

# Static checks: formatting, the one-way layering of the folders, and the
# migrations shipped in a release left byte-identical (migrations/RELEASES,
# scripts/check-migrations.sh, proved by tests/release/test_check_migrations.sh).
FORMAT_SRC := $(wildcard base/*.[ch] db/*.[ch] service/*.[ch] handlers/*.[ch] cmd/*.[ch] \
                tests/unit/*.c tests/fuzz/*.[ch] tests/bench/*.c)

format:
	clang-format -i $(FORMAT_SRC)

format-check:
	@clang-format --dry-run --Werror $(FORMAT_SRC)
	@echo "format-check: $(words $(FORMAT_SRC)) files match .clang-format"

layers:
	@scripts/check-layers.sh

migrations-check:
	@scripts/check-migrations.sh
	@tests/release/test_check_migrations.sh

lint: format-check layers migrations-check

check: deps
	@$(MAKE) --no-print-directory lint
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory integration

test: deps
	@$(MAKE) --no-print-directory check
	@$(MAKE) --no-print-directory integration-pgbouncer
	@$(MAKE) --no-print-directory chaos-short
	@$(MAKE) --no-print-directory ha-test
	@$(MAKE) --no-print-directory tsan-test
	@$(MAKE) --no-print-directory valgrind-test
	@$(MAKE) --no-print-directory contract
	@$(MAKE) --no-print-directory sdk-test
	@$(MAKE) --no-print-directory e2e
	@$(MAKE) --no-print-directory examples-test
	@$(MAKE) --no-print-directory fuzz-smoke
	@$(MAKE) --no-print-directory docker-smoke
	@$(MAKE) --no-print-directory bench-smoke

clean:
	rm -rf build
