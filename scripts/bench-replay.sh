#!/usr/bin/env bash
# Replay benchmark, three parts, against sandboxed servers:
#  1. Replay as a load generator: sysbench oltp_point_select at THREADS threads
#     vs `tandem replay --speed 0 --concurrency THREADS` of a point-select
#     capture, same server, alternating ROUNDS times; replay runs with
#     --io blocking (the default), with --io poller, and with --order capture
#     (the order gate on: a synthesized capture replays with --order none by
#     default); each with metrics on (served, scraped every second) and, once
#     more, the blocking run with --metrics-addr off; prints QPS and the ratios.
#  2. Memory: a MEM_RECORDS-record capture replayed against two targets
#     (InnoDB and MyRocks) as fast as they go; prints peak RSS (target < 300 MB).
#  3. Pacing: the invariant workloads captured through the proxy, replayed at
#     --speed 1 onto two identical InnoDB copies (BenchmarkPacedReplayKeepsUp):
#     replay time over the capture's span, lag p95, releases per 10,000.
#   SECS (default 10), ROUNDS (default 3), THREADS (default 8),
#   MEM_RECORDS (default 5000000; 0 skips part 2), PACE_SECS (default 10)
set -euo pipefail
tandem=${1:-bin/tandem}
SECS=${SECS:-10}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-8}
MEM_RECORDS=${MEM_RECORDS:-5000000}
work=$(mktemp -d /tmp/tandem-bench-replay.XXXXXX)
cleanup() {
  "$tandem" sandbox down --dir "$work/sandbox" --purge >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

"$tandem" sandbox up innodb rocksdb --dir "$work/sandbox" >/dev/null
eval "$("$tandem" sandbox env --dir "$work/sandbox")"
inno="root@tcp(127.0.0.1:$TANDEM_INNODB_PORT)/sbtest"
rocks="root@tcp(127.0.0.1:$TANDEM_ROCKSDB_PORT)/sbtest"
mariadb $TANDEM_INNODB_MARIADB -e "CREATE DATABASE sbtest"
mariadb $TANDEM_ROCKSDB_MARIADB -e "CREATE DATABASE sbtest"
"$tandem" prepare --tables 4 --table-size 20000 --threads 4 --target "innodb=$inno" --target "myrocks=$rocks,engine=rocksdb" >/dev/null

echo "== 1. load generator: oltp_point_select, $THREADS threads, ${SECS}s per run, $ROUNDS rounds"
"$tandem" synth oltp_point_select --out "$work/ps" --tables 4 --table-size 20000 --threads "$THREADS" --events 200000 >/dev/null
sb=() tr=() tp=() to=() tm=()
mport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
replay_qps() { # io mode, order, metrics (on: served and scraped every second, as Prometheus would; off)
  rm -rf "$work/run-ps"
  local maddr=off scraper=
  if [ "${3:-on}" = on ]; then
    maddr="127.0.0.1:$mport"
    (while sleep 1; do curl -s "http://$maddr/metrics" >/dev/null || true; done) & scraper=$!
  fi
  "$tandem" replay "$work/ps" --speed 0 --concurrency "$THREADS" --duration "${SECS}s" --run "$work/run-ps" --json --io "$1" \
    --order "$2" --metrics-addr "$maddr" --target "innodb=$inno" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["points"][0]["targets"][0]["qps"])'
  if [ -n "$scraper" ]; then kill "$scraper" 2>/dev/null; wait "$scraper" 2>/dev/null || true; fi
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f", a/b}'; }
for round in $(seq "$ROUNDS"); do
  out=$(sysbench oltp_point_select --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$TANDEM_INNODB_PORT" \
    --mysql-user=root --mysql-db=sbtest --tables=4 --table-size=20000 --threads="$THREADS" --time="$SECS" --report-interval=0 run)
  q=$(sed -n 's/.*queries:.*(\([0-9.]*\) per sec.)/\1/p' <<<"$out")
  sb+=("$q")
  # metrics off and on back to back, in alternating order (the machine drifts)
  if [ $((round % 2)) -eq 1 ]; then
    m=$(replay_qps blocking none off); r=$(replay_qps blocking none)
  else
    r=$(replay_qps blocking none); m=$(replay_qps blocking none off)
  fi
  tr+=("$r"); tm+=("$m")
  p=$(replay_qps poller none); tp+=("$p")
  o=$(replay_qps blocking capture); to+=("$o")
  printf 'round %d  sysbench %8.0f qps   replay --io blocking %8.0f (%s)   --io poller %8.0f (%s)   --order capture %8.0f (%s)   metrics off %8.0f (on/off %s)\n' \
    "$round" "$q" "$r" "$(ratio "$r" "$q")" "$p" "$(ratio "$p" "$q")" "$o" "$(ratio "$o" "$q")" "$m" "$(ratio "$r" "$m")"
done
mean() { printf '%s\n' "$@" | awk '{s+=$1} END {printf "%.1f", s/NR}'; }
msb=$(mean "${sb[@]}"); mtr=$(mean "${tr[@]}"); mtp=$(mean "${tp[@]}"); mto=$(mean "${to[@]}"); mtm=$(mean "${tm[@]}")
printf 'mean     sysbench %8.0f qps   replay --io blocking %8.0f (%s)   --io poller %8.0f (%s)   --order capture %8.0f (%s)   metrics off %8.0f (on/off %s)   (target >= 0.95)\n' \
  "$msb" "$mtr" "$(ratio "$mtr" "$msb")" "$mtp" "$(ratio "$mtp" "$msb")" "$mto" "$(ratio "$mto" "$msb")" "$mtm" "$(ratio "$mtr" "$mtm")"

if [ "$MEM_RECORDS" -gt 0 ]; then
  echo
  echo "== 2. memory: $MEM_RECORDS-record capture against InnoDB and MyRocks at once"
  "$tandem" synth oltp_point_select --out "$work/big" --tables 4 --table-size 20000 --threads 16 --events "$MEM_RECORDS" >/dev/null
  "$tandem" inspect "$work/big" | sed -n '1,4p'
  /usr/bin/time -f '%M %e' -o "$work/time" "$tandem" replay "$work/big" --speed 0 --concurrency 16 --run "$work/run-big" \
    --target "innodb=$inno" --target "myrocks=$rocks,engine=rocksdb" --report-interval 60s | sed -n '1,/^$/p;/compared with/p;/divergent: row-content/p'
  read -r rss secs <"$work/time"
  printf 'peak RSS %.1f MB over %.0f s (target < 300 MB)\n' "$(awk -v k="$rss" 'BEGIN{print k/1024}')" "$secs"
fi

echo
echo "== 3. pacing: the invariant workloads (bank, order entry) captured through the proxy from 8 connections for ${PACE_SECS:-10} s,"
echo "   replayed at --speed 1 onto two identical InnoDB copies: replay time / capture span (target <= 1.10), lag p95 (target < 1000 ms),"
echo "   releases at --order-timeout per 10,000 records (target <= 1)"
BENCH_SECS="${PACE_SECS:-10}" go test -run '^$' -bench BenchmarkPacedReplayKeepsUp -benchtime=1x -timeout 20m ./replay 2>&1 |
  awk '/^BenchmarkPacedReplayKeepsUp\// {
    name=$1; sub(/^BenchmarkPacedReplayKeepsUp\//, "", name); sub(/-[0-9]+$/, "", name)
    for (i = 3; i < NF; i += 2) v[$(i+1)] = $i
    ok = (v["replay/span-a"] <= 1.10 && v["replay/span-b"] <= 1.10 && v["lag-p95-ms-a"] < 1000 && v["lag-p95-ms-b"] < 1000 && v["released/10k-a"] <= 1 && v["released/10k-b"] <= 1)
    printf "%-8s replay/span %.3f / %.3f   lag p95 %.0f / %.0f ms   reruns %d / %d   released/10k %.2f / %.2f   %s\n", name,
      v["replay/span-a"], v["replay/span-b"], v["lag-p95-ms-a"], v["lag-p95-ms-b"], v["reruns-a"], v["reruns-b"], v["released/10k-a"], v["released/10k-b"], ok ? "meets the targets" : "MISSES a target"
  } /FAIL|panic/ { print }'
