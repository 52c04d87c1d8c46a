#!/usr/bin/env bash
# bench-cluster.sh measures Baton with several nodes on one PostgreSQL
# (bench/README.md, "Several nodes"): loadgen's round trips against 1 node,
# 2 and 3 nodes with requests round-robin over them (most are forwarded to
# the session's owner), and 2 and 3 nodes with each session's requests
# pinned to its owner (none is). Every configuration runs ROUNDS times,
# interleaved (1, 2, 3, 2pin, 3pin, 1, 2, …), each run on a fresh schema
# with freshly started nodes. It prints one line per run and a table of
# medians with their range. Reports also give the CPU of PostgreSQL when it
# runs on this machine and `ss -ltnp` shows its pid.
#
#   BATON_BENCH_POSTGRES_DSN=postgres://… scripts/bench-cluster.sh
#
# The DSN is BATON_BENCH_POSTGRES_DSN, else BATON_TEST_POSTGRES_DSN
# (scripts/pg.sh start <dir> prints one); the role must be allowed to
# create schemas. Settings, from the environment:
#
#   ROUNDS=3                     runs of each configuration
#   CONFIGS="1 2 3 2pin 3pin"    N nodes round-robin, or N nodes pinned
#   SESSIONS=100 ROUND_TRIPS=20  loadgen's -sessions and -round-trips
#   LOADGEN_FLAGS=               more loadgen flags, e.g. -scripted
#   BAE_LOG=info                 the nodes' log level (their logs go to OUT)
#   OUT=<temp dir>               binaries, logs and each run's report (kept)
#   BATON_BIN, LOADGEN_BIN       prebuilt binaries (default: go build into OUT)
#
# Every process it starts is stopped on exit, and every schema dropped.
set -euo pipefail
cd "$(dirname "$0")/.."

die() {
	echo "bench-cluster.sh: $*" >&2
	exit 1
}

DSN=${BATON_BENCH_POSTGRES_DSN:-${BATON_TEST_POSTGRES_DSN:-}}
[[ -n $DSN ]] || die "set BATON_BENCH_POSTGRES_DSN or BATON_TEST_POSTGRES_DSN (scripts/pg.sh start <dir> prints one)"
ROUNDS=${ROUNDS:-3}
CONFIGS=${CONFIGS:-"1 2 3 2pin 3pin"}
SESSIONS=${SESSIONS:-100}
ROUND_TRIPS=${ROUND_TRIPS:-20}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/bench-cluster.XXXXXX")}
mkdir -p "$OUT"

psql_bin() {
	if command -v psql >/dev/null 2>&1; then
		command -v psql
		return
	fi
	local d
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
		if [[ -x $d/psql ]]; then
			echo "$d/psql"
			return
		fi
	done
	die "no psql found"
}
PSQL=$(psql_bin)

sql() {
	PGOPTIONS='-c client_min_messages=warning' "$PSQL" "$DSN" -qtAX -v ON_ERROR_STOP=1 -c "$1" >/dev/null
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

# with_search_path adds search_path=$1 to the DSN's query.
with_search_path() {
	case $DSN in
	*\?*) echo "$DSN&search_path=$1" ;;
	*) echo "$DSN?search_path=$1" ;;
	esac
}

# postmaster prints the pid of the PostgreSQL server listening on the DSN's
# port, when it runs on this machine (reached over loopback or a unix
# socket) and ss can tell (as root, or as its user), or nothing.
postmaster() {
	local port addr
	addr=$("$PSQL" "$DSN" -qtAX -c 'SELECT inet_server_addr()' 2>/dev/null) || return 0
	case $addr in
	'' | 127.* | ::1) ;;
	*) return 0 ;;
	esac
	port=$("$PSQL" "$DSN" -qtAX -c 'SHOW port' 2>/dev/null) || return 0
	command -v ss >/dev/null 2>&1 || return 0
	ss -Hltnp "sport = :$port" 2>/dev/null | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -1
}
DB_PID=$(postmaster)

# ready_field reads a string or number field of a BATON_READY_FILE.
ready_field() {
	sed -n "s/.*\"$2\":\"\{0,1\}\([^\",}]*\).*/\1/p" "$1"
}

PIDS=()   # nodes of the current run
SCHEMA='' # schema of the current run

stop_nodes() {
	local pid
	for pid in "${PIDS[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${PIDS[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	PIDS=()
	if [[ -n $SCHEMA ]]; then
		sql "DROP SCHEMA IF EXISTS $SCHEMA CASCADE" || echo "bench-cluster.sh: could not drop schema $SCHEMA" >&2
		SCHEMA=''
	fi
}
trap stop_nodes EXIT
trap 'exit 130' INT TERM

if [[ -z ${BATON_BIN:-} ]]; then
	BATON_BIN=$OUT/baton
	go build -o "$BATON_BIN" ./cmd/baton
fi
if [[ -z ${LOADGEN_BIN:-} ]]; then
	LOADGEN_BIN=$OUT/loadgen
	go build -o "$LOADGEN_BIN" ./bench/loadgen
fi

# run_one <nodes> <pin:0|1> <report file>
run_one() {
	local n=$1 pin=$2 report=$3 dir mock i urls='' admin='' pids='' ready waited
	dir=$(mktemp -d "$OUT/run.XXXXXX")
	SCHEMA=bench_$(basename "$dir" | tr -cd 'a-zA-Z0-9' | tr 'A-Z' 'a-z')
	sql "CREATE SCHEMA $SCHEMA"
	mock=127.0.0.1:$(free_port)
	"$LOADGEN_BIN" -print-config -mock-addr "$mock" >"$dir/bae-config.toml"
	for ((i = 1; i <= n; i++)); do
		ready=$dir/node$i.ready
		mkdir -p "$dir/node$i"
		# The first node writes the admin key; the others read the same files.
		BATON_DATABASE_URL=$(with_search_path "$SCHEMA") BAE_CONFIG=$dir/bae-config.toml \
			BAE_ADDR=127.0.0.1:0 BAE_ADMIN_ADDR=127.0.0.1:0 BATON_READY_FILE=$ready \
			BAE_DB_PATH=$dir/node$i/bae.db BAE_ADMIN_KEY_FILE=$dir/admin-key.pem \
			BAE_ADMIN_KEY_HASH_FILE=$dir/admin-key-hash.pem BAE_LOG=${BAE_LOG:-info} \
			"$BATON_BIN" serve 2>"$dir/node$i.log" &
		PIDS+=($!)
		for ((waited = 0; ; waited++)); do
			[[ -s $ready ]] && break
			kill -0 "${PIDS[-1]}" 2>/dev/null || die "node $i exited; see $dir/node$i.log"
			((waited < 600)) || die "node $i not ready after 60s; see $dir/node$i.log"
			sleep 0.1
		done
		urls+=${urls:+,}$(ready_field "$ready" client_url)
		pids+=${pids:+,}$(ready_field "$ready" pid)
		[[ -n $admin ]] || admin=$(ready_field "$ready" admin_url)
	done
	local flags=(-url "$urls" -admin-url "$admin" -admin-key-file "$dir/admin-key.pem"
		-server-pid "$pids" -mock-addr "$mock" -sessions "$SESSIONS" -round-trips "$ROUND_TRIPS")
	((pin)) && flags+=(-pin)
	[[ -n $DB_PID ]] && flags+=(-db-pid "$DB_PID")
	# shellcheck disable=SC2086 # LOADGEN_FLAGS is a list of flags
	"$LOADGEN_BIN" "${flags[@]}" ${LOADGEN_FLAGS:-} >"$report" 2>"$dir/loadgen.log" ||
		die "loadgen failed; see $report and $dir/loadgen.log"
	stop_nodes
}

# figures prints, from a report: round trips/s, p50 and p99 ms, CPU µs per
# round trip of the servers, the database ("-" if unknown), loadgen and the
# whole machine, the rest (the machine minus the three: other work, and
# kernel time charged to no process), the share of requests forwarded and
# the machine's busy percentage.
figures() {
	awk '
		function pct(s) { sub(/%\).*/, "", s); sub(/.*\(/, "", s); return s }
		function us(   i) { for (i = 1; i <= NF; i++) if ($i == "µs") return $(i-1) }
		function dur(s) { # a Go duration rounded to ms: 870ms, 1.234s, 1m2.5s
			if (s ~ /ms$/) return s * 1000
			if (s ~ /m/) { split(s, p, "m"); return (p[1] * 60 + p[2]) * 1e6 }
			return s * 1e6
		}
		/^round trips / { n = $3; for (i = 1; i <= NF; i++) if ($i == "round" && $(i+1) == "trips/s,") rate = $(i-1) }
		/^latency / { p50 = $3; p99 = $9 }
		/^server/ && /µs per round trip/ { cpu = us() }
		/^database pid/ { db = us() }
		/^loadgen CPU/ { lg = dur($3) }
		/^machine CPU/ { mach = us(); busy = pct($0) }
		/^nodes / && /%\)/ { fwd = pct($0) }
		END {
			lg = (n > 0) ? lg / n : 0
			printf "%s %s %s %s %s %.0f %s %.0f %s %s\n", rate, p50, p99, cpu, (db == "" ? "-" : db), lg, mach,
				mach - cpu - db - lg, (fwd == "" ? 0 : fwd), busy
		}
	' "$1"
}

echo "bench-cluster: $ROUNDS rounds of {$CONFIGS}, $SESSIONS sessions x $ROUND_TRIPS round trips; reports in $OUT" >&2
FORMAT='%-6s %-5s %8s %7s %7s %9s %6s %7s %8s %6s %6s %5s\n'
# shellcheck disable=SC2059 # the format is a constant
printf "$FORMAT" config round "rt/s" "p50 ms" "p99 ms" "server µs" "db µs" "lg µs" "mach µs" "rest" "fwd %" "busy" | tee "$OUT/runs.txt"
for ((r = 1; r <= ROUNDS; r++)); do
	for c in $CONFIGS; do
		n=${c%pin}
		pin=0
		[[ $c == *pin ]] && pin=1
		[[ $n =~ ^[1-9]$ ]] || die "bad configuration $c (want N or Npin)"
		report=$OUT/report-$c-$r.txt
		run_one "$n" "$pin" "$report"
		read -r rate p50 p99 cpu db lg mach rest fwd busy < <(figures "$report")
		# shellcheck disable=SC2059
		printf "$FORMAT" "$c" "$r" "$rate" "$p50" "$p99" "$cpu" "$db" "$lg" "$mach" "$rest" "$fwd" "$busy" | tee -a "$OUT/runs.txt"
	done
done

# The medians, with the lowest and highest run.
echo
awk '
	NR == 1 { next }
	{ key = $1; if (!(key in n)) order[++k] = key
	  for (f = 3; f <= 12; f++) v[key, f, ++cnt[key, f]] = $f; n[key]++ }
	function med(key, f,   i, j, t, a, c) {
		c = cnt[key, f]
		for (i = 1; i <= c; i++) a[i] = v[key, f, i] + 0
		for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		lo = a[1]; hi = a[c]
		return (c % 2) ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2
	}
	function cell(key, f, digits,   m) {
		m = med(key, f)
		return sprintf("%." digits "f (%." digits "f–%." digits "f)", m, lo, hi)
	}
	END {
		print "| config | runs | round trips/s | p50 ms | p99 ms | CPU µs per round trip: servers | PostgreSQL | loadgen | rest of the machine | forwarded |"
		print "|---|---|---|---|---|---|---|---|---|---|"
		for (i = 1; i <= k; i++) {
			key = order[i]
			db = (v[key, 7, 1] == "-") ? "–" : cell(key, 7, 0)
			printf "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %.0f%% |\n", key, n[key],
				cell(key, 3, 0), cell(key, 4, 1), cell(key, 5, 1), cell(key, 6, 0), db, cell(key, 8, 0),
				cell(key, 10, 0), med(key, 11)
		}
	}
' "$OUT/runs.txt" | tee "$OUT/summary.md"
