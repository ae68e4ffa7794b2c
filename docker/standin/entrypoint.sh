#!/bin/bash
# The stand-in image's entrypoint (docker/standin/Dockerfile).
#
# `postgres [ARGS...]`: like the official postgres image's entrypoint. As root, it
# prepares PGDATA and re-executes itself as the user postgres. On first start
# (no PGDATA/PG_VERSION) it runs initdb with the superuser POSTGRES_USER (default
# postgres) and the password POSTGRES_PASSWORD (required, unless
# POSTGRES_HOST_AUTH_METHOD=trust), allows TCP clients from anywhere with that
# password (scram-sha-256) and creates the database POSTGRES_DB (default: the
# user's name). Then it execs the server in the foreground: `postgres ARGS...`,
# which honours PGPORT.
#
# Any other command is executed as given (python3 /app/webhook.py, say).
set -euo pipefail

if [ "${1:-}" != postgres ]; then
	exec "$@"
fi
shift

: "${PGDATA:=/var/lib/postgresql/data}"
export PGDATA

if [ "$(id -u)" = 0 ]; then
	mkdir -p "$PGDATA" /var/run/postgresql
	chown postgres:postgres "$PGDATA" /var/run/postgresql
	chmod 700 "$PGDATA"
	exec runuser -u postgres -- "$0" postgres "$@"
fi

user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}
auth=${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}

if [ ! -s "$PGDATA/PG_VERSION" ]; then
	if [ -z "${POSTGRES_PASSWORD:-}" ] && [ "$auth" != trust ]; then
		echo "entrypoint: POSTGRES_PASSWORD is required (or POSTGRES_HOST_AUTH_METHOD=trust)" >&2
		exit 1
	fi
	echo "entrypoint: initialising the cluster in $PGDATA"
	pwfile=$(mktemp)
	printf '%s\n' "${POSTGRES_PASSWORD:-}" >"$pwfile"
	initdb --pgdata="$PGDATA" --username="$user" --pwfile="$pwfile" \
		--auth-local=trust --auth-host="$auth" --encoding=UTF8 --no-locale >/dev/null
	rm -f "$pwfile"
	printf "listen_addresses = '*'\n" >>"$PGDATA/postgresql.conf"
	printf 'host all all all %s\n' "$auth" >>"$PGDATA/pg_hba.conf"
	# A server on the unix socket only, to create the database.
	pg_ctl --pgdata="$PGDATA" --options="-c listen_addresses=''" --wait --silent start
	if [ "$db" != postgres ]; then
		psql -X -q -v ON_ERROR_STOP=1 --username="$user" --dbname=postgres \
			--set=db="$db" <<<'CREATE DATABASE :"db";'
	fi
	pg_ctl --pgdata="$PGDATA" --mode=fast --wait --silent stop
	echo "entrypoint: cluster ready (user $user, database $db)"
fi

exec postgres "$@"
