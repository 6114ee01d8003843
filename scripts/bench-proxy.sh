#!/usr/bin/env bash
# Proxy benchmark: sysbench oltp_point_select and oltp_read_write at 8 threads
# against one sandboxed InnoDB server, direct, through HAProxy in TCP mode (the
# plain-relay reference), through tandem proxy without capture and with it.
# Runs alternate, ROUNDS times, in one session; prints mean QPS, p95 and ratios.
#   SECS (default 10) seconds per run, ROUNDS (default 2), THREADS (default 8)
set -euo pipefail
tandem=${1:-bin/tandem}
SECS=${SECS:-10}
ROUNDS=${ROUNDS:-2}
THREADS=${THREADS:-8}
work=$(mktemp -d /tmp/tandem-bench-proxy.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  "$tandem" sandbox down --dir "$work/sandbox" --purge >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

"$tandem" sandbox up innodb --dir "$work/sandbox" >/dev/null
eval "$("$tandem" sandbox env --dir "$work/sandbox")"
db_port=$TANDEM_INNODB_PORT
mariadb $TANDEM_INNODB_MARIADB -e "CREATE DATABASE sbtest"
sb_common=(--db-driver=mysql --mysql-host=127.0.0.1 --mysql-user=root --mysql-db=sbtest --tables=4 --table-size=20000)
sysbench oltp_read_write "${sb_common[@]}" --mysql-port="$db_port" --threads=4 prepare >/dev/null

ha_port=$(free_port)
cat > "$work/haproxy.cfg" <<CFG
global
  maxconn 4096
defaults
  mode tcp
  timeout connect 5s
  timeout client 1h
  timeout server 1h
listen mysql
  bind 127.0.0.1:$ha_port
  server db 127.0.0.1:$db_port
CFG
haproxy -f "$work/haproxy.cfg" -db >"$work/haproxy.log" 2>&1 & pids+=($!)

t_port=$(free_port)
"$tandem" proxy --listen 127.0.0.1:$t_port --backend 127.0.0.1:$db_port --metrics-addr off --log-level warn >"$work/proxy.log" 2>&1 & pids+=($!)
p_port=$(free_port)
"$tandem" proxy --io blocking --listen 127.0.0.1:$p_port --backend 127.0.0.1:$db_port --metrics-addr off --log-level warn >"$work/proxy-blocking.log" 2>&1 & pids+=($!)
c_port=$(free_port)
"$tandem" proxy --listen 127.0.0.1:$c_port --backend 127.0.0.1:$db_port --capture "$work/capture" --metrics-addr off --log-level warn >"$work/proxy-capture.log" 2>&1 & capture_pid=$!; pids+=($capture_pid)
sleep 1

declare -A port=([direct]=$db_port [haproxy]=$ha_port [tandem]=$t_port [tandem-blocking]=$p_port [tandem+capture]=$c_port)
targets=(direct haproxy tandem tandem-blocking tandem+capture)
workloads=(oltp_point_select oltp_read_write)
declare -A qps p95

for round in $(seq "$ROUNDS"); do
  for w in "${workloads[@]}"; do
    for tgt in "${targets[@]}"; do
      out=$(sysbench "$w" "${sb_common[@]}" --mysql-port="${port[$tgt]}" --threads="$THREADS" --time="$SECS" --report-interval=0 run)
      q=$(sed -n 's/.*queries:.*(\([0-9.]*\) per sec.)/\1/p' <<<"$out")
      l=$(sed -n 's/.*95th percentile:[[:space:]]*\([0-9.]*\)/\1/p' <<<"$out")
      e=$(sed -n 's/.*ignored errors:[[:space:]]*\([0-9]*\).*/\1/p' <<<"$out")
      qps[$w,$tgt]="${qps[$w,$tgt]:-} $q"
      p95[$w,$tgt]="${p95[$w,$tgt]:-} $l"
      # sysbench's "ignored errors" are deadlocks and lock waits it retried.
      printf 'round %d  %-18s %-15s %10.0f qps  p95 %6.2f ms  retried errors %s\n' "$round" "$w" "$tgt" "$q" "$l" "${e:-0}"
    done
  done
done

mean() { awk '{s=0; for (i=1;i<=NF;i++) s+=$i; printf "%.2f", s/NF}' <<<"$1"; }
echo
printf '%-18s %-15s %10s %8s %10s %11s\n' workload target qps p95_ms vs_haproxy vs_tandem
for w in "${workloads[@]}"; do
  ha=$(mean "${qps[$w,haproxy]}")
  tq=$(mean "${qps[$w,tandem]}")
  for tgt in "${targets[@]}"; do
    q=$(mean "${qps[$w,$tgt]}")
    l=$(mean "${p95[$w,$tgt]}")
    printf '%-18s %-15s %10.0f %8.2f %10.3f %11.3f\n' "$w" "$tgt" "$q" "$l" "$(awk -v a="$q" -v b="$ha" 'BEGIN{print a/b}')" "$(awk -v a="$q" -v b="$tq" 'BEGIN{print a/b}')"
  done
done
echo
echo "targets: tandem+capture >= 0.90 x haproxy; capture costs <= 5% (tandem+capture >= 0.95 x tandem)"
kill -TERM "$capture_pid" && wait "$capture_pid" || true   # flushes and closes the capture
echo
"$tandem" inspect "$work/capture" | sed -n '1,9p'
