#!/usr/bin/env bash
# Builds the libFuzzer targets (make fuzz-build) and runs each one for SECONDS
# seconds from a copy of its checked-in corpus, so a run never grows
# tests/fuzz/corpus. Fails when any target crashes, leaks, times out or gets a
# sanitizer report, naming the target and the reproducer.
#
#   tests/fuzz/run.sh SECONDS [TARGET...]      e.g. tests/fuzz/run.sh 60 outcome path
#
# Environment:
#   FUZZ_KEEP_CORPUS   a directory: the grown corpora are copied there
#                      (<dir>/<target>/), to review and check in by hand
#
# Reproducers are kept in build/fuzz/crashes/<target>/; replay one with
#   build/fuzz/fuzz_<target> build/fuzz/crashes/<target>/crash-...
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"

secs="${1:-60}"
shift || true
[[ "$secs" =~ ^[0-9]+$ && "$secs" -gt 0 ]] || { echo "usage: tests/fuzz/run.sh SECONDS [TARGET...]" >&2; exit 2; }

# Longest input per target: a body a few KiB long reaches every rule of a
# parser; a header value, timestamp or cursor needs far less.
max_len() {
	case "$1" in
	retry_after | timefmt) echo 128 ;;
	cursor | path | ids | trace) echo 1200 ;;
	group) echo 8192 ;;
	*) echo 4096 ;;
	esac
}

# ---- toolchain: clang and libFuzzer's runtime --------------------------------

find_cc() { command -v clang-14 || command -v clang || true; }

# True when $cc can link a libFuzzer program with ASan and UBSan.
can_fuzz() {
	[[ -n "$cc" ]] || return 1
	local d
	d="$(mktemp -d)"
	printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$d/t.c"
	local ok=1
	"$cc" -fsanitize=fuzzer,address,undefined "$d/t.c" -o "$d/t" >/dev/null 2>&1 || ok=0
	rm -rf "$d"
	[[ $ok -eq 1 ]]
}

cc="$(find_cc)"
if ! can_fuzz; then
	if [[ "$(id -u)" -ne 0 ]]; then
		echo "fuzz: SKIPPED: clang-14 with libFuzzer (libclang-rt-14-dev) is not installed and" \
			"this user cannot install it; as root: apt-get install clang-14 libclang-rt-14-dev"
		exit 0
	fi
	echo "fuzz: installing clang-14 and libclang-rt-14-dev"
	pkgs=(clang-14 libclang-rt-14-dev)
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${pkgs[@]}" >/dev/null; then
		apt-get update -q >/dev/null
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${pkgs[@]}" >/dev/null
	fi
	cc="$(find_cc)"
	can_fuzz || { echo "fuzz: clang cannot link -fsanitize=fuzzer even after installing ${pkgs[*]}" >&2; exit 1; }
fi

# ---- build -------------------------------------------------------------------

jobs="$(nproc 2>/dev/null || echo 2)"
make --no-print-directory -j"$jobs" fuzz-build FUZZ_CC="$cc"

if [[ $# -gt 0 ]]; then
	targets=("$@")
else
	targets=()
	for f in tests/fuzz/fuzz_*.c; do
		t="${f#tests/fuzz/fuzz_}"
		targets+=("${t%.c}")
	done
fi

# ---- run ---------------------------------------------------------------------

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=1:check_initialization_order=1:strict_string_checks=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"

passed=0
failed=0
failures=()
for t in "${targets[@]}"; do
	bin="build/fuzz/fuzz_$t"
	[[ -x "$bin" ]] || { echo "fuzz: no target $t ($bin)" >&2; failed=$((failed + 1)); failures+=("$t"); continue; }
	work="$tmp/$t"
	mkdir -p "$work/corpus" "$work/artifacts"
	if [[ -d "tests/fuzz/corpus/$t" ]]; then
		cp -R "tests/fuzz/corpus/$t/." "$work/corpus/"
	fi
	args=(-max_total_time="$secs" -max_len="$(max_len "$t")" -detect_leaks=1 -timeout=10
		-rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$work/artifacts/")
	[[ -f "tests/fuzz/$t.dict" ]] && args+=(-dict="tests/fuzz/$t.dict")
	log="$work/log"
	rc=0
	"$bin" "${args[@]}" "$work/corpus" >"$log" 2>&1 || rc=$?

	artifacts=("$work"/artifacts/*)
	[[ -e "${artifacts[0]}" ]] || artifacts=()
	if [[ $rc -eq 0 && ${#artifacts[@]} -eq 0 ]] && ! grep -qE '^(==[0-9]+==ERROR|SUMMARY: (Address|Leak|UndefinedBehavior)Sanitizer)|runtime error:' "$log"; then
		passed=$((passed + 1))
		execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")"
		rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")"
		cov="$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1)"
		units="$(find "$work/corpus" -type f | wc -l)"
		printf 'fuzz: %-12s ok    %s runs, %s/s, %s, corpus %s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-cov: ?}" "$units"
		if [[ -n "${FUZZ_KEEP_CORPUS:-}" ]]; then
			mkdir -p "$FUZZ_KEEP_CORPUS/$t"
			cp -R "$work/corpus/." "$FUZZ_KEEP_CORPUS/$t/"
		fi
	else
		failed=$((failed + 1))
		failures+=("$t")
		keep="build/fuzz/crashes/$t"
		mkdir -p "$keep"
		cp "$log" "$keep/log"
		echo "fuzz: $t FAILED (exit $rc); last lines of its log ($keep/log):"
		grep -vE '^(#[0-9]+|INFO:|\s*NEW_FUNC|"|###|Done )' "$log" | tail -40 | sed 's/^/    /'
		for a in "${artifacts[@]}"; do
			cp "$a" "$keep/"
			echo "fuzz: $t reproducer: $keep/$(basename "$a")  (replay: $bin $keep/$(basename "$a"))"
		done
	fi
done

echo "fuzz: $passed passed, $failed failed${failures[*]:+ (${failures[*]})}"
[[ $failed -eq 0 ]]
