#!/usr/bin/env bash
# Installs the Debian 12 packages that hookflow's build and tests need, when some
# are missing. `make run`, `make test` and .ci/run call it.
#
# - Everything present: does nothing (no apt-get update), silently.
# - Something missing, as root: apt-get update, then installs what is missing.
# - Something missing, not root: prints the missing packages and the command to
#   run, and exits 1.
#
# PostgreSQL comes as postgresql-15 (server binaries in /usr/lib/postgresql/15/bin),
# not the `postgresql` meta-package, and without the "main" cluster that
# postgresql-common would otherwise create and start on port 5432: hookflow runs
# clusters of its own (scripts/run.sh, the integration tests).
set -euo pipefail

packages=(
	build-essential pkg-config
	libmicrohttpd-dev libcurl4-openssl-dev libjansson-dev libpq-dev libssl-dev
	libcmocka-dev
	postgresql-15
	postgresql-15-auto-failover pg-auto-failover-cli # the failover tests (tests/ha)
	python3 python3-pytest python3-pytest-xdist
	python3-yaml # sdk/generate.py reads openapi/openapi.yaml (make sdk, make sdk-check)
	curl valgrind clang-format git
	gnuplot-nox # the benchmark's charts (tests/bench/charts.sh)
	tzdata      # /usr/share/zoneinfo: schedules' time zones (base/tz.c)
	openssl     # the command line: test CAs and certificates (tests/integration/test_tls.py)
	pgbouncer   # `make integration-pgbouncer` and the bench's PgBouncer scenario run private ones
)
# The contract, dashboard and examples tests run on Node.js (20 on these
# machines); Debian's nodejs and npm stand in only where none is installed.
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)

if ! command -v dpkg-query >/dev/null 2>&1; then
	echo "deps: no dpkg-query: not a Debian system, cannot check packages." >&2
	echo "deps: hookflow needs the equivalents of: ${packages[*]}" >&2
	exit 0
fi

missing=()
for p in "${packages[@]}"; do
	status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[ "$status" = installed ] || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

install_cmd="DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}"

if [ "$(id -u)" -ne 0 ]; then
	echo "deps: missing Debian packages: ${missing[*]}" >&2
	echo "deps: install them as root with:" >&2
	echo "  apt-get update && $install_cmd" >&2
	exit 1
fi

# Keep postgresql-common from creating (and starting) the default "main" cluster
# while postgresql-15 installs. createcluster.conf includes createcluster.d/, so a
# drop-in does it without touching the ucf-managed file; it is removed again
# afterwards so later installs by the administrator behave as usual. An existing
# cluster is left alone: the setting only matters when none exists yet.
dropin=/etc/postgresql-common/createcluster.d/00-hookflow-no-main-cluster.conf
dropin_dir=$(dirname "$dropin")
made_dropin=0 made_dir=0
cleanup() {
	[ "$made_dropin" = 1 ] && rm -f "$dropin"
	[ "$made_dir" = 1 ] && rmdir "$dropin_dir" 2>/dev/null
	return 0
}
trap cleanup EXIT
if [[ " ${missing[*]} " == *" postgresql-15 "* ]] && [ ! -e "$dropin" ]; then
	[ -d "$dropin_dir" ] || { mkdir -p "$dropin_dir" && made_dir=1; }
	echo "create_main_cluster = false" >"$dropin"
	made_dropin=1
fi

echo "deps: installing ${missing[*]}"
echo "+ apt-get update"
apt-get update
echo "+ $install_cmd"
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
