#!/usr/bin/env bash
# Replay benchmark, two parts, against sandboxed servers:
#  1. Replay as a load generator: sysbench oltp_point_select at THREADS threads
#     vs `tandem replay --speed 0 --concurrency THREADS` of a point-select
#     capture, same server, alternating ROUNDS times; replay runs with
#     --io blocking (the default), with --io poller, and with --order capture
#     (the order gate on: a synthesized capture replays with --order none by
#     default); prints QPS and the ratios.
#  2. Memory: a MEM_RECORDS-record capture replayed against two targets
#     (InnoDB and MyRocks) as fast as they go; prints peak RSS (target < 300 MB).
#   SECS (default 10), ROUNDS (default 3), THREADS (default 8),
#   MEM_RECORDS (default 5000000; 0 skips part 2)
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
sb=() tr=() tp=() to=()
replay_qps() { # io mode, order
  rm -rf "$work/run-ps"
  "$tandem" replay "$work/ps" --speed 0 --concurrency "$THREADS" --duration "${SECS}s" --run "$work/run-ps" --json --io "$1" \
    --order "$2" --target "innodb=$inno" | python3 -c 'import json,sys; print(json.load(sys.stdin)["points"][0]["targets"][0]["qps"])'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f", a/b}'; }
for round in $(seq "$ROUNDS"); do
  out=$(sysbench oltp_point_select --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$TANDEM_INNODB_PORT" \
    --mysql-user=root --mysql-db=sbtest --tables=4 --table-size=20000 --threads="$THREADS" --time="$SECS" --report-interval=0 run)
  q=$(sed -n 's/.*queries:.*(\([0-9.]*\) per sec.)/\1/p' <<<"$out")
  sb+=("$q")
  r=$(replay_qps blocking none); tr+=("$r")
  p=$(replay_qps poller none); tp+=("$p")
  o=$(replay_qps blocking capture); to+=("$o")
  printf 'round %d  sysbench %8.0f qps   replay --io blocking %8.0f (%s)   --io poller %8.0f (%s)   --order capture %8.0f (%s)\n' \
    "$round" "$q" "$r" "$(ratio "$r" "$q")" "$p" "$(ratio "$p" "$q")" "$o" "$(ratio "$o" "$q")"
done
mean() { printf '%s\n' "$@" | awk '{s+=$1} END {printf "%.1f", s/NR}'; }
msb=$(mean "${sb[@]}"); mtr=$(mean "${tr[@]}"); mtp=$(mean "${tp[@]}"); mto=$(mean "${to[@]}")
printf 'mean     sysbench %8.0f qps   replay --io blocking %8.0f (%s)   --io poller %8.0f (%s)   --order capture %8.0f (%s)   (target >= 0.95)\n' \
  "$msb" "$mtr" "$(ratio "$mtr" "$msb")" "$mtp" "$(ratio "$mtp" "$msb")" "$mto" "$(ratio "$mto" "$msb")"

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
