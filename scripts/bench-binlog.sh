#!/usr/bin/env bash
# The cost of knowing the capture's points: sysbench oltp_read_write and
# oltp_point_select at THREADS threads against a sandboxed primary (binary
# log, GTIDs), direct, through tandem proxy capturing, and through it
# capturing with --binlog-user (a SELECT @@last_gtid after each transaction
# that wrote, and the binary log read at the capture's end). Runs alternate,
# ROUNDS times, in one session; prints each run's QPS, the mean per mode,
# and the ratios side by side, and the time the proxy took to close each
# capture (reading the binary log between its points).
#   SECS (default 10) seconds per run, ROUNDS (default 3), THREADS (default 8),
#   WORKLOADS (default "oltp_read_write oltp_point_select").
set -euo pipefail
tandem=${1:-bin/tandem}
SECS=${SECS:-10}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-8}
work=$(mktemp -d /tmp/tandem-bench-binlog.XXXXXX)
cleanup() {
  "$tandem" sandbox down --dir "$work/sandbox" --purge >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

"$tandem" sandbox up primary --dir "$work/sandbox" >/dev/null
eval "$("$tandem" sandbox env --dir "$work/sandbox")"
"$tandem" prepare --tables 4 --table-size 20000 --threads 2 --target "primary=${TANDEM_PRIMARY_DSN}sbtest" >/dev/null

qps() { # PORT WORKLOAD
  sysbench "$2" --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$1" --mysql-user=root --mysql-db=sbtest \
    --tables=4 --table-size=20000 --threads="$THREADS" --time="$SECS" --report-interval=0 run |
    sed -n 's/.*queries: *[0-9]* *(\([0-9.]*\) per sec.*/\1/p'
}
run_proxy() { # WORKLOAD EXTRA-FLAGS...
  local wl=$1; shift
  local port cap; port=$(free_port); cap="$work/cap-$RANDOM$RANDOM"
  "$tandem" proxy --listen "127.0.0.1:$port" --backend "127.0.0.1:$TANDEM_PRIMARY_PORT" --capture "$cap" \
    --metrics-addr off --log-level warn "$@" >"$work/proxy.log" 2>&1 &
  local pid=$!
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
  local q; q=$(qps "$port" "$wl")
  local t0; t0=$(date +%s.%N)
  kill -TERM "$pid"; wait "$pid" || true
  local t1; t1=$(date +%s.%N)
  echo "$q $(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')"
  rm -rf "$cap"
}

for wl in ${WORKLOADS:-oltp_read_write oltp_point_select}; do
  echo "$wl, $THREADS threads, ${SECS}s runs, $ROUNDS rounds alternating:"
  for r in $(seq "$ROUNDS"); do
    d=$(qps "$TANDEM_PRIMARY_PORT" "$wl")
    read -r c cc <<<"$(run_proxy "$wl")"
    read -r b bc <<<"$(run_proxy "$wl" --binlog-user root)"
    printf '  round %d: direct %8.1f  capture %8.1f (closed in %.2fs)  capture+binlog-user %8.1f (closed in %.2fs)\n' "$r" "$d" "$c" "$cc" "$b" "$bc"
    sd=$(awk -v a="${sd:-0}" -v b="$d" 'BEGIN { print a + b }'); sc=$(awk -v a="${sc:-0}" -v b="$c" 'BEGIN { print a + b }'); sbl=$(awk -v a="${sbl:-0}" -v b="$b" 'BEGIN { print a + b }')
  done
  awk -v d="$sd" -v c="$sc" -v b="$sbl" -v n="$ROUNDS" 'BEGIN {
    printf "  mean QPS: direct %.1f, capture %.1f (%.3fx direct), capture+binlog-user %.1f (%.3fx direct, %.3fx capture)\n", d/n, c/n, c/d, b/n, b/d, b/c }'
  sd=0; sc=0; sbl=0
done
