# hookflow: one Makefile for the service, its tests and its local runs.
#
#   make            build build/hookflow
#   make run        build and serve (embedded PostgreSQL under .hookflow/ unless
#                   HOOKFLOW_DATABASE_URL is set)
#   make test       unit tests (ASan+UBSan) and integration tests (real Postgres,
#                   real binary, real webhook servers)
#   make SANITIZE=address,undefined   build everything with sanitizers

CC       ?= cc
PKGS     := libmicrohttpd libcurl jansson libpq libcrypto
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

LIB_SRC  := $(wildcard service/*.c handlers/*.c db/*.c)
LIB_SRC  := $(filter-out service/main.c,$(LIB_SRC))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/migrations.o \
            $(BUILD)/gen/openapi.o
MIGRATIONS := $(sort $(wildcard migrations/*.sql))
MAIN_OBJ := $(BUILD)/service/main.o
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
DEPS     := $(LIB_OBJ:.o=.d) $(MAIN_OBJ:.o=.d)

.PHONY: all run test unit integration deps clean migrate format-check

all: $(BUILD)/hookflow

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/gen/migrations.c: $(MIGRATIONS) scripts/embed-migrations.sh
	@mkdir -p $(dir $@)
	scripts/embed-migrations.sh $(MIGRATIONS) > $@

$(BUILD)/gen/openapi.c: openapi/openapi.yaml scripts/embed-text.sh
	@mkdir -p $(dir $@)
	scripts/embed-text.sh hookflow_openapi openapi/openapi.yaml > $@

$(BUILD)/gen/%.o: $(BUILD)/gen/%.c
	$(CC) $(CFLAGS) -Wno-missing-variable-declarations -c $< -o $@

$(BUILD)/libhookflow.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/hookflow: $(MAIN_OBJ) $(BUILD)/libhookflow.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libhookflow.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libhookflow.a $(LDLIBS) -lcmocka

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

integration: all
	@scripts/integration.sh

test: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory integration

clean:
	rm -rf build
