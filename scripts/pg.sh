#!/usr/bin/env bash
# pg.sh runs a throwaway PostgreSQL cluster for tests.
#
#   scripts/pg.sh start <dir>   initdb into <dir> (if needed), start the server on
#                               127.0.0.1 and a free port, create the database and
#                               print its DSN on stdout
#   scripts/pg.sh stop <dir>    stop the server (the files stay; rm -rf <dir>)
#   scripts/pg.sh dsn <dir>     print the DSN of a running cluster
#
# The server listens on 127.0.0.1 only, with trust authentication and its unix
# socket inside <dir>. Server binaries come from $PG_BINDIR, else the newest
# /usr/lib/postgresql/*/bin, else `pg_config --bindir`, else $PATH. Extra server
# settings can be passed in $PG_OPTS (e.g. "-c fsync=off").
#
# initdb refuses to run as root; as root the cluster runs as the `postgres`
# user (or $PG_USER), so <dir> must be reachable by that user.
#
# Typical use:
#   export BATON_TEST_POSTGRES_DSN=$(scripts/pg.sh start /var/tmp/baton-pg)
#   go test ./store/...
#   scripts/pg.sh stop /var/tmp/baton-pg
set -euo pipefail

readonly DBNAME=baton_test
readonly SUPERUSER=postgres

die() {
	echo "pg.sh: $*" >&2
	exit 1
}

bindir() {
	if [[ -n ${PG_BINDIR:-} ]]; then
		[[ -x $PG_BINDIR/initdb ]] || die "no initdb in PG_BINDIR=$PG_BINDIR"
		echo "$PG_BINDIR"
		return
	fi
	local d
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
		if [[ -x $d/initdb && -x $d/pg_ctl ]]; then
			echo "$d"
			return
		fi
	done
	if command -v pg_config >/dev/null 2>&1; then
		d=$(pg_config --bindir)
		if [[ -x $d/initdb && -x $d/pg_ctl ]]; then
			echo "$d"
			return
		fi
	fi
	if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
		dirname "$(command -v initdb)"
		return
	fi
	die "no PostgreSQL server binaries found (apt-get install -y postgresql)"
}

# as runs a command as the cluster owner: the current user, or $PG_USER
# (default postgres) when running as root.
as() {
	if [[ $(id -u) -ne 0 ]]; then
		"$@"
		return
	fi
	local user=${PG_USER:-postgres}
	if command -v runuser >/dev/null 2>&1; then
		runuser -u "$user" -- "$@"
	else
		su -s /bin/sh "$user" -c "$(printf '%q ' "$@")"
	fi
}

free_port() {
	if command -v python3 >/dev/null 2>&1; then
		python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
	else
		echo $((20000 + RANDOM % 40000))
	fi
}

dsn_of() {
	echo "postgres://$SUPERUSER@127.0.0.1:$1/$DBNAME?sslmode=disable"
}

cmd_start() {
	local dir=$1 bin port tries
	bin=$(bindir)
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	if [[ $(id -u) -eq 0 ]]; then
		local user=${PG_USER:-postgres}
		id "$user" >/dev/null 2>&1 || die "running as root needs the unprivileged user '$user' (set PG_USER)"
		chown "$user" "$dir"
		as test -w "$dir" || die "user '$user' cannot write $dir; use a directory it can reach (e.g. under /var/tmp)"
	fi

	if [[ -f $dir/port ]] && as "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
		dsn_of "$(cat "$dir/port")"
		return
	fi

	if [[ ! -f $dir/data/PG_VERSION ]]; then
		as "$bin/initdb" -D "$dir/data" -U "$SUPERUSER" -A trust -E UTF8 --locale=C --no-sync \
			>"$dir/initdb.log" 2>&1 || die "initdb failed; see $dir/initdb.log"
	fi

	for tries in 1 2 3 4 5; do
		port=$(free_port)
		# shellcheck disable=SC2086 # PG_OPTS is a list of server options
		if as "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
			-o "-c listen_addresses=127.0.0.1 -p $port -k '$dir' -c max_connections=300 ${PG_OPTS:-}" \
			start >/dev/null; then
			echo "$port" >"$dir/port"
			break
		fi
		echo "pg.sh: start on port $port failed (attempt $tries), retrying" >&2
		port=
	done
	[[ -n $port ]] || die "could not start the server; see $dir/server.log"

	if ! as "$bin/psql" -h 127.0.0.1 -p "$port" -U "$SUPERUSER" -d postgres -tAc \
		"SELECT 1 FROM pg_database WHERE datname = '$DBNAME'" | grep -q 1; then
		as "$bin/createdb" -h 127.0.0.1 -p "$port" -U "$SUPERUSER" "$DBNAME" ||
			die "createdb failed"
	fi
	dsn_of "$port"
}

cmd_stop() {
	local dir=$1 bin
	bin=$(bindir)
	[[ -d $dir/data ]] || die "no cluster in $dir"
	if as "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
		as "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
	fi
	rm -f "$dir/port"
}

cmd_dsn() {
	local dir=$1
	[[ -f $dir/port ]] || die "no running cluster in $dir"
	dsn_of "$(cat "$dir/port")"
}

main() {
	[[ $# -eq 2 ]] || die "usage: pg.sh start|stop|dsn <dir>"
	case $1 in
	start) cmd_start "$2" ;;
	stop) cmd_stop "$2" ;;
	dsn) cmd_dsn "$2" ;;
	*) die "usage: pg.sh start|stop|dsn <dir>" ;;
	esac
}

main "$@"
