#!/usr/bin/env bash
# The Docker deployment path, proved on this machine (`make docker-smoke`, part of
# `make test`):
#
#   1. the Docker engine: the one running (DOCKER_HOST or the default socket), or
#      else a private `dockerd --iptables=false --bridge=none` with its data-root,
#      exec-root and socket in a temp dir, stopped at the end. docker.io,
#      docker-compose and debootstrap are installed from Debian when missing.
#   2. a Debian 12 base image made here, as no image registry is reachable:
#      `debootstrap --variant=minbase bookworm` from the Debian mirror configured
#      in /etc/apt/sources.list*, slimmed like debian:bookworm-slim and imported
#      with `docker import` as hookflow-base:bookworm.
#   3. hookflow's image (docker/Dockerfile, BASE_IMAGE=hookflow-base:bookworm) and
#      the stand-in for postgres:15 and python:3.12-slim (docker/standin), built
#      side by side with --network host so that apt reaches the mirror.
#   4. docker/compose.yaml + docker/compose.host.yaml (host networking, loopback
#      only, free ports) with those images: PostgreSQL, hookflow with an API
#      token, examples/python/webhook.py with the Python SDK (sdk/python).
#   5. through the API with the token: 401 without it; register a signed
#      workflow; submit a run whose first attempt fails after memoizing; wait for
#      its signal; signal; long-poll the run to `succeeded`; the callback arrives;
#      the container's HEALTHCHECK turns healthy; it runs as uid 10001; `stop`
#      drains and exits 0.
#   6. clean-up, whatever happened: the compose project with its volume, the
#      images built, the temp dir, the dockerd started here.
#
# Skipped (exit 0, "docker smoke test skipped: <reason>") when not root, not on
# Debian, when the packages cannot be installed or when no engine can be started.
# Any failure once the engine runs is a failure (exit 1), with the logs printed.
#
# Caches, kept between runs in $HOOKFLOW_DOCKER_CACHE (default
# /var/cache/hookflow/docker-smoke: outside the checkout, so that a fresh clone on
# the same machine, CI's, finds them), each used for HOOKFLOW_DOCKER_CACHE_DAYS
# days (default 7), then made afresh:
#   base-bookworm.tar  the debootstrapped root file system (saves ~2.5 minutes)
#   images.tar         `docker save` of the base, build and stand-in images, loaded
#                      and given to `docker build --cache-from` so that their apt
#                      layers are not installed again (saves ~3 minutes); written
#                      again when a Dockerfile changes. The engine's own storage
#                      is always thrown away.
# Remove the directory to start cold. HOOKFLOW_DOCKER_SMOKE=0 skips the test;
# HOOKFLOW_DEBIAN_MIRROR overrides the mirror read from apt's configuration.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
t0=$(date +%s)

say() { printf 'docker-smoke: [%3ss] %s\n' "$(($(date +%s) - t0))" "$*"; }
skip() { printf 'docker smoke test skipped: %s\n' "$*"; exit 0; }
die() { printf 'docker-smoke: FAIL: %s\n' "$*" >&2; exit 1; }

[ "${HOOKFLOW_DOCKER_SMOKE:-1}" != 0 ] || skip "HOOKFLOW_DOCKER_SMOKE=0"
[ "$(id -u)" -eq 0 ] || skip "not root (dockerd and debootstrap need root)"
command -v dpkg-query >/dev/null && command -v apt-get >/dev/null ||
	skip "not a Debian system (no apt-get)"

# --- Packages ----------------------------------------------------------------
installed() { [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = installed ]; }
missing=()
for p in docker.io docker-compose debootstrap curl; do installed "$p" || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
	say "installing ${missing[*]}"
	apt_install() {
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
			-o DPkg::Lock::Timeout=300 "${missing[@]}" >/tmp/hookflow-docker-apt.log 2>&1
	}
	# apt-get update only when the package lists do not have them.
	if ! apt_install; then
		apt-get update -q -o DPkg::Lock::Timeout=300 >/tmp/hookflow-docker-apt.log 2>&1 &&
			apt_install || skip "could not install ${missing[*]} (see /tmp/hookflow-docker-apt.log)"
	fi
	rm -f /tmp/hookflow-docker-apt.log
fi

# The CLI that comes with the engine when Debian's is installed (another one on
# PATH may be far newer than the daemon); the classic builder, whose
# --cache-from works with `docker load`ed images.
docker_bin=/usr/bin/docker
[ -x "$docker_bin" ] || docker_bin=$(command -v docker) || skip "no docker CLI"
dk() { "$docker_bin" "$@"; }
export DOCKER_BUILDKIT=0
if "$docker_bin" compose version >/dev/null 2>&1; then
	compose_bin=("$docker_bin" compose)
elif command -v docker-compose >/dev/null; then
	compose_bin=(docker-compose)
else
	skip "neither docker compose nor docker-compose is available"
fi

# --- State and clean-up ------------------------------------------------------
tmp=$(mktemp -d /tmp/hookflow-docker.XXXXXX)
chmod 755 "$tmp"
cache=${HOOKFLOW_DOCKER_CACHE:-/var/cache/hookflow/docker-smoke}
cache_days=${HOOKFLOW_DOCKER_CACHE_DAYS:-7}
tag=smoke-$$
img_hookflow=hookflow-smoke:$tag
img_build=hookflow-smoke-build:$tag
img_standin=hookflow-standin:$tag
img_base=hookflow-base:bookworm
project=hookflow-smoke-$$
own_engine=0
compose_up=0
created_images=()
dockerd_pid=
save_pid=

stop_dockerd() {
	[ -n "$dockerd_pid" ] || return 0
	kill -TERM "$dockerd_pid" 2>/dev/null || true
	local i
	for ((i = 0; i < 100; i++)); do
		kill -0 "$dockerd_pid" 2>/dev/null || break
		sleep 0.2
	done
	kill -KILL "$dockerd_pid" 2>/dev/null || true
	wait "$dockerd_pid" 2>/dev/null || true
	# Its containerd, should it have outlived it.
	local cpid
	cpid=$(cat "$tmp/exec/containerd/containerd.pid" 2>/dev/null || true)
	if [ -n "$cpid" ] && kill -0 "$cpid" 2>/dev/null; then
		kill -TERM "$cpid" 2>/dev/null || true
		sleep 1
		kill -KILL "$cpid" 2>/dev/null || true
	fi
	dockerd_pid=
}

cleanup() {
	local rc=$?
	set +e
	trap - INT TERM
	if [ "$rc" -ne 0 ]; then
		for f in "$tmp"/*.log; do
			[ -s "$f" ] || continue
			printf -- '---- %s (last 40 lines)\n' "$(basename "$f")" >&2
			tail -n 40 "$f" >&2
		done
		if [ "$compose_up" = 1 ]; then
			echo "---- compose logs (last 60 lines)" >&2
			compose logs --no-color --tail=60 >&2 2>&1
		fi
	fi
	if [ -n "$save_pid" ] && kill -0 "$save_pid" 2>/dev/null; then
		kill "$save_pid" 2>/dev/null
		wait "$save_pid" 2>/dev/null
		rm -f "$cache/images.tar.tmp"
	fi
	if [ "$own_engine" = 1 ]; then
		# The whole engine goes: its containers need no graceful stop.
		dk ps -aq | xargs -r "$docker_bin" rm -f -v >/dev/null 2>&1
	elif [ "$compose_up" = 1 ]; then
		compose down -v --remove-orphans --timeout 20 >"$tmp/down.log" 2>&1 ||
			cat "$tmp/down.log" >&2
	fi
	if [ "$own_engine" = 1 ]; then
		stop_dockerd
	elif [ ${#created_images[@]} -gt 0 ]; then
		dk rmi -f "${created_images[@]}" >/dev/null 2>&1
	fi
	# Whatever is still mounted below the temp dir (overlays, the engine's netns,
	# debootstrap's /proc), deepest first, before removing it.
	awk -v d="$tmp/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r |
		while read -r m; do umount "$m" 2>/dev/null || umount -l "$m"; done
	rm -rf "$tmp"
	if [ "$rc" -eq 0 ]; then
		say "cleaned up"
	else
		printf 'docker-smoke: failed after %ss (exit %s)\n' "$(($(date +%s) - t0))" "$rc" >&2
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The engine's storage and debootstrap's root file system go to a tmpfs when
# memory allows (HOOKFLOW_DOCKER_TMPFS=0 to keep them on disk): no fsync cost for
# dpkg and overlayfs, and the clean-up is an umount. It takes ~3 GB at most.
ram=
avail_kb=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo)
if [ "${HOOKFLOW_DOCKER_TMPFS:-1}" != 0 ] && [ "${avail_kb:-0}" -gt $((8 * 1024 * 1024)) ]; then
	mkdir -m 755 "$tmp/ram"
	if mount -t tmpfs -o size=12g,mode=755 hookflow-docker-smoke "$tmp/ram"; then
		ram=$tmp/ram
	fi
fi

# --- The engine ----------------------------------------------------------------
if dk info >/dev/null 2>&1; then
	say "using the running Docker engine ($(dk version -f '{{.Server.Version}}' 2>/dev/null))"
else
	command -v dockerd >/dev/null || skip "no dockerd"
	mkdir -p "$tmp/exec"
	data_root=$tmp/data
	[ -n "$ram" ] && data_root=$ram/data
	mkdir -p "$data_root"
	export DOCKER_HOST=unix://$tmp/docker.sock
	setsid dockerd --iptables=false --ip6tables=false --bridge=none \
		--data-root "$data_root" --exec-root "$tmp/exec" --pidfile "$tmp/dockerd.pid" \
		--host "$DOCKER_HOST" >"$tmp/dockerd.log" 2>&1 </dev/null &
	dockerd_pid=$!
	own_engine=1
	for ((i = 0; i < 150; i++)); do
		dk info >/dev/null 2>&1 && break
		kill -0 "$dockerd_pid" 2>/dev/null || break
		sleep 0.2
	done
	if ! dk info >/dev/null 2>&1; then
		reason=$(grep -E 'level=(error|fatal)|failed' "$tmp/dockerd.log" | tail -n 1 | cut -c1-300)
		: >"$tmp/dockerd.log" # a skip, not a failure: no log dump
		skip "the Docker engine could not start: ${reason:-no answer on $DOCKER_HOST}"
	fi
	say "started dockerd $(dk version -f '{{.Server.Version}}') (data in $tmp)"
fi

# --- The base image --------------------------------------------------------------
# The Debian archive apt uses for bookworm, from sources.list (one-line style) or
# *.sources (deb822), never a host name of our own.
debian_mirror() {
	local f
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		awk '$1 == "deb" {
			i = 2
			if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
			if ($(i + 1) == "bookworm") { print $i; exit }
		}' "$f"
	done
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		awk 'BEGIN { RS = ""; FS = "\n" }
		{
			types = uris = suites = ""; enabled = 1
			for (n = 1; n <= NF; n++) {
				line = $n
				if (line ~ /^#/) continue
				key = tolower(line); sub(/:.*/, "", key)
				val = line; sub(/^[^:]*:[ \t]*/, "", val)
				if (key == "types") types = " " val " "
				else if (key == "uris") uris = val
				else if (key == "suites") suites = " " val " "
				else if (key == "enabled" && tolower(val) == "no") enabled = 0
			}
			if (enabled && types ~ / deb / && suites ~ / bookworm /) {
				split(uris, u, /[ \t]+/); print u[1]; exit
			}
		}' "$f"
	done
}

fresh() { [ -s "$1" ] && [ -n "$(find "$1" -mtime -"$cache_days" 2>/dev/null)" ]; }

mkdir -p "$cache"
base_tar=$cache/base-bookworm.tar
if ! fresh "$base_tar"; then
	mirror=${HOOKFLOW_DEBIAN_MIRROR:-$(debian_mirror | head -n 1)}
	[ -n "$mirror" ] || die "no Debian mirror for bookworm in /etc/apt/sources.list*; set HOOKFLOW_DEBIAN_MIRROR"
	say "debootstrap --variant=minbase bookworm from $mirror (cached afterwards in $cache)"
	rootfs=${ram:-$tmp}/rootfs
	debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$tmp/debootstrap.log" 2>&1 ||
		die "debootstrap failed"
	# Slim it like debian:bookworm-slim: no documentation, no apt caches, fast dpkg.
	rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
		"$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
		"$rootfs"/usr/share/locale/*
	echo force-unsafe-io >"$rootfs/etc/dpkg/dpkg.cfg.d/docker-apt-speedup"
	printf '%s\n' 'path-exclude /usr/share/doc/*' 'path-include /usr/share/doc/*/copyright' \
		'path-exclude /usr/share/man/*' 'path-exclude /usr/share/info/*' \
		'path-exclude /usr/share/locale/*' 'path-include /usr/share/locale/locale.alias' \
		'path-exclude /usr/share/groff/*' 'path-exclude /usr/share/lintian/*' \
		>"$rootfs/etc/dpkg/dpkg.cfg.d/docker-slim"
	echo 'Acquire::Languages "none";' >"$rootfs/etc/apt/apt.conf.d/docker-no-languages"
	echo 'Acquire::GzipIndexes "true";' >"$rootfs/etc/apt/apt.conf.d/docker-gzip-indexes"
	printf '%s\n' \
		'DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };' \
		'APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };' \
		'Dir::Cache::pkgcache ""; Dir::Cache::srcpkgcache "";' \
		>"$rootfs/etc/apt/apt.conf.d/docker-clean"
	: >"$rootfs/etc/hostname"
	tar --numeric-owner -C "$rootfs" -cf "$base_tar.tmp" .
	mv "$base_tar.tmp" "$base_tar"
	rm -f "$cache/images.tar" "$cache/images.key" # made on another base
	rm -rf "$rootfs"
fi

# The layer cache is valid for this base and these Dockerfiles.
images_key=$({
	stat -c '%s %Y' "$base_tar"
	cat docker/Dockerfile docker/standin/Dockerfile docker/standin/entrypoint.sh
} | sha256sum | cut -c1-16)
cache_from_build=() cache_from_runtime=() cache_from_standin=()
if fresh "$cache/images.tar" && [ "$(cat "$cache/images.key" 2>/dev/null)" = "$images_key" ]; then
	say "loading the cached images ($(du -h "$cache/images.tar" | cut -f1))"
	if dk load -i "$cache/images.tar" >"$tmp/load.log" 2>&1; then
		cache_from_build=(--cache-from hookflow-smoke-cache:build)
		cache_from_runtime=(--cache-from hookflow-smoke-cache:runtime)
		cache_from_standin=(--cache-from hookflow-smoke-cache:standin)
		created_images+=(hookflow-smoke-cache:build hookflow-smoke-cache:runtime hookflow-smoke-cache:standin)
	else
		say "could not load $cache/images.tar: building without it"
		rm -f "$cache/images.tar" "$cache/images.key"
	fi
fi
if ! dk image inspect "$img_base" >/dev/null 2>&1 || [ ${#cache_from_build[@]} -eq 0 ]; then
	dk import - "$img_base" <"$base_tar" >/dev/null
fi
[ "$own_engine" = 1 ] || created_images+=("$img_base")

# --- The images ------------------------------------------------------------------
# The context: the files git knows of (tracked, or untracked and not ignored), so
# that build output and local state stay out whatever .dockerignore says.
ctx=$tmp/context
mkdir -p "$ctx"
if git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	git -C "$top" ls-files -z --cached --others --exclude-standard |
		tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -C "$ctx" -xf -
else
	tar --exclude=./build --exclude=./.hookflow --exclude=./.git --exclude=node_modules \
		-C "$top" -cf - . | tar -C "$ctx" -xf -
fi

say "building $img_hookflow and $img_standin (--network host)"
created_images+=("$img_hookflow" "$img_build" "$img_standin")
build_args=(--network host --build-arg "BASE_IMAGE=$img_base")
(
	timeout 900 "$docker_bin" build "${build_args[@]}" "${cache_from_build[@]}" "${cache_from_runtime[@]}" \
		-f "$ctx/docker/Dockerfile" -t "$img_hookflow" "$ctx" &&
		timeout 300 "$docker_bin" build "${build_args[@]}" "${cache_from_build[@]}" \
			--target build -f "$ctx/docker/Dockerfile" -t "$img_build" "$ctx"
) >"$tmp/build-hookflow.log" 2>&1 &
build1=$!
timeout 900 "$docker_bin" build "${build_args[@]}" "${cache_from_standin[@]}" \
	-t "$img_standin" "$ctx/docker/standin" >"$tmp/build-standin.log" 2>&1 &
build2=$!
wait "$build1" || die "building hookflow's image failed (build-hookflow.log)"
wait "$build2" || die "building the stand-in image failed (build-standin.log)"
say "images built: hookflow $(dk image inspect -f '{{.Size}}' "$img_hookflow" | awk '{ printf "%.0f MB", $1 / 1e6 }'), $(cat "$tmp"/build-*.log | grep -c 'Using cache') steps from the cache"

# Save the layer cache when there is none for these Dockerfiles (in the
# background: it overlaps the stack's test).
if [ "$(cat "$cache/images.key" 2>/dev/null)" != "$images_key" ] || ! fresh "$cache/images.tar"; then
	dk tag "$img_build" hookflow-smoke-cache:build
	dk tag "$img_hookflow" hookflow-smoke-cache:runtime
	dk tag "$img_standin" hookflow-smoke-cache:standin
	created_images+=(hookflow-smoke-cache:build hookflow-smoke-cache:runtime hookflow-smoke-cache:standin)
	(
		dk save -o "$cache/images.tar.tmp" "$img_base" hookflow-smoke-cache:build \
			hookflow-smoke-cache:runtime hookflow-smoke-cache:standin &&
			mv "$cache/images.tar.tmp" "$cache/images.tar" &&
			echo "$images_key" >"$cache/images.key"
	) >"$tmp/save.log" 2>&1 &
	save_pid=$!
fi

# --- The stack ---------------------------------------------------------------------
# Below the ephemeral range (32768-60999 here): a client socket there can hold the
# port by the time the server binds it.
free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 12000))
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
	done
}
pg_port=$(free_port)
api_port=$(free_port)
wh_port=$(free_port)
token=smoke-$(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
secret=whsec_$(head -c 24 /dev/urandom | base64)
# The webhook runs as uid 65534: give it a copy it can read whatever the checkout's modes.
mkdir -m 755 "$tmp/webhook" "$tmp/sdk" "$tmp/sdk/hookflow"
install -m 644 examples/python/webhook.py "$tmp/webhook/webhook.py"
install -m 644 sdk/python/hookflow/*.py sdk/python/hookflow/py.typed "$tmp/sdk/hookflow/"

export HOOKFLOW_IMAGE=$img_hookflow HOOKFLOW_PG_IMAGE=$img_standin \
	HOOKFLOW_PYTHON_IMAGE=$img_standin HOOKFLOW_BASE_IMAGE=$img_base \
	HOOKFLOW_API_TOKEN=$token HOOKFLOW_WEBHOOK_SECRET=$secret \
	HOOKFLOW_PG_PASSWORD=pg-$RANDOM$RANDOM HOOKFLOW_WEBHOOK_DIR=$tmp/webhook \
	HOOKFLOW_SDK_PYTHON_DIR=$tmp/sdk \
	HOOKFLOW_PG_PORT=$pg_port HOOKFLOW_PORT=$api_port HOOKFLOW_WEBHOOK_PORT=$wh_port
compose_files=(-f "$top/docker/compose.yaml" -f "$top/docker/compose.host.yaml")
compose() {
	"${compose_bin[@]}" --project-name "$project" --project-directory "$top/docker" \
		"${compose_files[@]}" "$@"
}
if [ "${compose_bin[0]}" = docker-compose ]; then
	# docker-compose v1 refuses published ports with the host's network, and
	# cannot unset a list in an override: resolve both files, drop the ports.
	compose config >"$tmp/compose.resolved.yaml" 2>"$tmp/compose-config.log" ||
		die "docker-compose config failed (compose-config.log)"
	/usr/bin/python3 - "$tmp/compose.resolved.yaml" <<'EOF'
import sys, yaml
path = sys.argv[1]
doc = yaml.safe_load(open(path))
for svc in doc["services"].values():
    if svc.get("network_mode") == "host":
        svc.pop("ports", None)
yaml.safe_dump(doc, open(path, "w"), sort_keys=False)
EOF
	compose_files=(-f "$tmp/compose.resolved.yaml")
fi
say "docker compose up (${compose_bin[*]}): postgres :$pg_port, hookflow :$api_port, webhook :$wh_port"
compose_up=1
compose up -d --no-build >"$tmp/compose-up.log" 2>&1 || die "compose up failed (compose-up.log)"

base=http://127.0.0.1:$api_port
for ((i = 0; i < 300; i++)); do
	curl -fsS -o /dev/null "$base/readyz" 2>/dev/null && break
	sleep 0.2
done
curl -fsS -o /dev/null "$base/readyz" || die "hookflow is not ready on $base after 60 s"
say "hookflow ready on $base"

py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
json() { "$py" -c 'import json, sys; j = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }
api() { # METHOD PATH [BODY]: the answer in $tmp/out.json, the status in $status
	local args=(-sS -o "$tmp/out.json" -w '%{http_code}' -X "$1" -H "Authorization: Bearer $token")
	[ $# -ge 3 ] && args+=(-H 'Content-Type: application/json' -d "$3")
	status=$(curl "${args[@]}" "$base$2")
}

code=$(curl -sS -o /dev/null -w '%{http_code}' "$base/v1/workflows")
[ "$code" = 401 ] || die "GET /v1/workflows without the token answered $code, not 401"

run=smoke-$$
api PUT /v1/workflows/order "{\"url\": \"http://127.0.0.1:$wh_port/steps\",
	\"callback_url\": \"http://127.0.0.1:$wh_port/done\", \"secret\": \"$secret\",
	\"retry_backoff\": {\"base_ms\": 200, \"max_ms\": 1000}}"
[ "$status" = 201 ] || die "PUT /v1/workflows/order answered $status: $(cat "$tmp/out.json")"
api POST /v1/runs "{\"workflow\": \"order\", \"run_id\": \"$run\", \"input\": {\"customer\": \"ada\",
	\"items\": [{\"sku\": \"book\", \"qty\": 2, \"price_cents\": 1250}], \"fail_first_attempt\": true}}"
[ "$status" = 201 ] || die "POST /v1/runs answered $status: $(cat "$tmp/out.json")"
st=
for ((i = 0; i < 150; i++)); do
	api GET "/v1/runs/$run"
	st=$(json "$tmp/out.json" 'j["status"]')
	[ "$st" = waiting ] && break
	case $st in succeeded | failed | cancelled) break ;; esac
	sleep 0.2
done
[ "$st" = waiting ] || die "the run is $st, not waiting for its signal: $(cat "$tmp/out.json")"
api POST "/v1/signals/approval:$run" '{"payload": {"approved_by": "grace"}}'
[ "$status" = 200 ] || die "the signal answered $status: $(cat "$tmp/out.json")"
api GET "/v1/runs/$run?wait_ms=30000"
[ "$(json "$tmp/out.json" 'j["status"]')" = succeeded ] &&
	[ "$(json "$tmp/out.json" 'j["result"]["approval"]["approved_by"]')" = grace ] &&
	[ "$(json "$tmp/out.json" 'j["result"]["quote_reused"]')" = True ] ||
	die "the run did not succeed as expected: $(cat "$tmp/out.json")"
say "run $run succeeded (signed steps, memo across a retry, signal)"

for ((i = 0; i < 50; i++)); do
	compose logs --no-color webhook 2>/dev/null | grep -q "callback: run $run succeeded" && break
	sleep 0.2
done
compose logs --no-color webhook | grep -q "callback: run $run succeeded" ||
	die "the webhook got no terminal callback"

cid=$(compose ps -q hookflow)
[ "$(dk inspect -f '{{.Config.User}}' "$cid")" = 10001:10001 ] || die "hookflow does not run as 10001:10001"
health=
for ((i = 0; i < 60; i++)); do
	health=$(dk inspect -f '{{.State.Health.Status}}' "$cid")
	[ "$health" = healthy ] && break
	sleep 1
done
[ "$health" = healthy ] || die "the HEALTHCHECK says $health, not healthy"
say "HEALTHCHECK healthy; hookflow runs as uid 10001"

compose stop -t 30 hookflow >"$tmp/compose-stop.log" 2>&1
[ "$(dk inspect -f '{{.State.ExitCode}}' "$cid")" = 0 ] ||
	die "hookflow exited with $(dk inspect -f '{{.State.ExitCode}}' "$cid") on SIGTERM, not 0"
say "docker stop: hookflow drained and exited 0"

if [ -n "$save_pid" ]; then
	wait "$save_pid" || say "could not save the image cache (ignored): $(tail -n 1 "$tmp/save.log")"
fi
[ -z "$ram" ] || say "tmpfs used: $(df -h --output=used "$ram" | tail -n 1 | tr -d ' ')"
say "passed in $(($(date +%s) - t0)) s"
