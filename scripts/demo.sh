#!/usr/bin/env bash
# The demo: start an InnoDB and a MyRocks server, load the same sysbench
# tables into both with tandem prepare, write a sysbench oltp_read_write
# capture with tandem synth, summarize it with tandem inspect, and replay it
# against InnoDB, compressed InnoDB and MyRocks at once; then the production
# path: a GTID primary and replicas, a capture with start and end points,
# align, and a replay checked against production's end state. As root,
# tcpdump records the proxy's capture too, and tandem capture --from-pcap
# decodes it into the same records.
set -euo pipefail
tandem=${1:-bin/tandem}
dir=${TANDEM_DEMO_DIR:-.tandem/sandbox}
capture=${TANDEM_DEMO_CAPTURE:-.tandem/demo-capture}

echo "== tandem sandbox up: MariaDB with InnoDB and with MyRocks, on free loopback ports"
"$tandem" sandbox up --dir "$dir"
trap 'echo; echo "== tandem sandbox down"; "$tandem" sandbox down --dir "$dir"' EXIT
eval "$("$tandem" sandbox env --dir "$dir")"
innodb="innodb=${TANDEM_INNODB_DSN}sbtest,engine=innodb"
compressed="innodb-compressed=${TANDEM_INNODB_DSN}sbtest_compressed,engine=innodb,options=ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE=8"
myrocks="myrocks=${TANDEM_ROCKSDB_DSN}sbtest,engine=rocksdb"

echo
echo "== tandem prepare: the same 4 sbtest tables x 20,000 rows on three targets at once"
"$tandem" prepare --cleanup --tables 4 --target "$innodb" --target "$compressed" --target "$myrocks" >/dev/null
"$tandem" prepare --tables 4 --table-size 20000 --threads 4 --target "$innodb" --target "$compressed" --target "$myrocks"

echo
echo "== tandem prepare with an engine the server lacks fails before touching anything:"
"$tandem" prepare --tables 4 --target "tokudb=${TANDEM_INNODB_DSN}sbtest_toku,engine=tokudb" || true

echo
echo "== tandem synth: 2,000 oltp_read_write transactions from 8 sessions, no server needed"
rm -rf "$capture"
"$tandem" synth oltp_read_write --out "$capture" --tables 4 --table-size 20000 --threads 8 --events 2000 --seed 1

echo
echo "== tandem inspect"
"$tandem" inspect "$capture" --top 6

echo
echo "== tandem replay: the synthesized capture against all three at once, as fast as they go"
echo "   (a synthesized capture has no real order between its sessions: they run freely, as sysbench's threads do)"
run=.tandem/runs/demo-$(date +%Y%m%d-%H%M%S)
"$tandem" replay "$capture" --speed 0 --run "$run-synth" --target "$innodb" --target "$compressed" --target "$myrocks"

echo
echo "== tandem prepare again: the same starting rows (prepare is seeded) on all three"
"$tandem" prepare --cleanup --tables 4 --target "$innodb" --target "$compressed" --target "$myrocks" >/dev/null
"$tandem" prepare --tables 4 --table-size 20000 --threads 4 --target "$innodb" --target "$compressed" --target "$myrocks" >/dev/null

echo
echo "== tandem proxy: sysbench oltp_read_write, 8 threads for 5 s, through a capturing proxy in front of InnoDB;"
echo "   the capture is encrypted at rest (--encrypt-key-file: AES-256-GCM, a new 32-byte key, mode 600)"
proxy_capture=${capture}-proxy
rm -rf "$proxy_capture"
key_file=${capture}-proxy.key
(umask 077; head -c 32 /dev/urandom >"$key_file")
proxy_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# tcpdump records InnoDB's port meanwhile (root only): the packet capture below
pcap=${capture}-traffic.pcap
tcpdump_pid=
if [ "$(id -u)" = 0 ] && command -v tcpdump >/dev/null; then
  rm -f "$pcap"
  tcpdump -i lo -s 0 -B 65536 --immediate-mode -w "$pcap" "tcp port $TANDEM_INNODB_PORT" 2>"$pcap.log" &
  tcpdump_pid=$!
  until grep -q "listening on" "$pcap.log" 2>/dev/null; do sleep 0.1; done
fi
"$tandem" proxy --listen "127.0.0.1:$proxy_port" --backend "127.0.0.1:$TANDEM_INNODB_PORT" --capture "$proxy_capture" \
  --capture-results checksum --metrics-addr off --log-level warn --encrypt-key-file "$key_file" &
proxy_pid=$!
for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$proxy_port") 2>/dev/null && break; sleep 0.1; done
sysbench oltp_read_write --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$proxy_port" --mysql-user=root \
  --mysql-db=sbtest --tables=4 --table-size=20000 --threads=8 --time=5 --report-interval=0 run | sed -n '/SQL statistics/,/Throughput/p'
kill -TERM "$proxy_pid"; wait "$proxy_pid" || true   # flushes and closes the capture
"$tandem" inspect "$proxy_capture" --top 3 --encrypt-key-file "$key_file" | sed -n '1,9p'
if [ -n "$tcpdump_pid" ]; then
  sleep 1; kill -INT "$tcpdump_pid"; wait "$tcpdump_pid" || true
  echo
  echo "== tandem capture --from-pcap: no proxy needed. tcpdump recorded InnoDB's port meanwhile; the packets decode,"
  echo "   by the proxy's own recorder, into the same records (statements, parameters, row counts, checksums)"
  rm -rf "${capture}-pcap"
  "$tandem" capture --from-pcap "$pcap" --port "$TANDEM_INNODB_PORT" "${capture}-pcap" | sed -n '1,2p'
  echo "   the proxy's capture: $("$tandem" inspect "$proxy_capture" --encrypt-key-file "$key_file" | grep -m1 '^records ')"
  echo "   the packets':        $("$tandem" inspect "${capture}-pcap" | grep -m1 '^records ')"
fi

echo
echo "== tandem prepare again: the capture's starting rows on all three (InnoDB's changed while sysbench ran)"
"$tandem" prepare --cleanup --tables 4 --target "$innodb" --target "$compressed" --target "$myrocks" >/dev/null
"$tandem" prepare --tables 4 --table-size 20000 --threads 4 --target "$innodb" --target "$compressed" --target "$myrocks" >/dev/null

echo
echo "== tandem replay: the recorded read-write traffic against InnoDB, compressed InnoDB and MyRocks,"
echo "   in the capture's order between sessions, compared with each other and with the captured responses;"
echo "   Prometheus metrics are served while it runs (the URL is on the first line; grafana/README.md says how to scrape it)"
"$tandem" replay "$proxy_capture" --speed 0 --run "$run-proxy" --target "$innodb" --target "$compressed" --target "$myrocks" \
  --encrypt-key-file "$key_file"
echo
echo "   The same run again, from its run directory (encrypted too): tandem report $run-proxy --encrypt-key-file $key_file"

echo
echo "== tandem footprint: the tables' sizes on each target, now"
"$tandem" footprint --target "$innodb" --target "$compressed" --target "$myrocks"

echo
echo "== tandem sweep: the synthesized capture at 1, 2 and 4 threads, one target at a time, 3 s each,"
echo "   the tables loaded again before every point"
"$tandem" sweep "$capture" --threads 1,2,4 --duration 3s --run "$run-sweep" --target "$innodb" --target "$myrocks" \
  --prepare-tables 4 --prepare-table-size 20000 2>/dev/null | sed -n '/^sweep of/,$p'

echo
echo "== tandem report --format html: one self-contained file each (charts inline, nothing fetched)"
"$tandem" report "$run-proxy" --format html -o "$run-proxy.html" --encrypt-key-file "$key_file"
"$tandem" report "$run-sweep" --format html -o "$run-sweep.html" --charts "$run-sweep-charts"
echo "   replay: $run-proxy.html"
echo "   sweep:  $run-sweep.html (charts also as SVG and PNG in $run-sweep-charts)"

echo
echo "== tandem proxy --shadow: sysbench for 5 s through the proxy in front of InnoDB, while compressed InnoDB"
echo "   and MyRocks replay the capture live and compare every statement with InnoDB's answer"
"$tandem" prepare --cleanup --tables 4 --target "$innodb" --target "$compressed" --target "$myrocks" >/dev/null
"$tandem" prepare --tables 4 --table-size 20000 --threads 4 --target "$innodb" --target "$compressed" --target "$myrocks" >/dev/null
shadow_capture=${capture}-shadows
rm -rf "$shadow_capture" "$shadow_capture.shadows"
"$tandem" proxy --listen "127.0.0.1:$proxy_port" --backend "127.0.0.1:$TANDEM_INNODB_PORT" --capture "$shadow_capture" \
  --shadow "${compressed}" --shadow "${myrocks}" --metrics-addr off --log-level warn &
proxy_pid=$!
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$proxy_port") 2>/dev/null && break; sleep 0.1; done
sysbench oltp_read_write --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$proxy_port" --mysql-user=root \
  --mysql-db=sbtest --tables=4 --table-size=20000 --threads=8 --time=5 --rate=100 --report-interval=0 run | sed -n '/transactions:/p'
kill -TERM "$proxy_pid"; wait "$proxy_pid" || true   # the shadows finish what the capture holds, then print a line each

echo
echo "== the production path: an InnoDB primary with a binary log and GTIDs, and replicas of it on InnoDB, MyRocks and"
echo "   MyRocks with zstd column families, plus a reference replica (tandem sandbox up --topology replication)"
"$tandem" sandbox up --dir "$dir" --topology replication >/dev/null
eval "$("$tandem" sandbox env --dir "$dir")"
"$tandem" prepare --cleanup --tables 4 --target "primary=${TANDEM_PRIMARY_DSN}sbtest" >/dev/null
"$tandem" prepare --tables 4 --table-size 20000 --threads 4 --target "primary=${TANDEM_PRIMARY_DSN}sbtest" >/dev/null
"$tandem" sandbox replicate --dir "$dir" --databases sbtest
r_innodb="innodb=${TANDEM_REPLICA_INNODB_DSN}sbtest"
r_rocks="myrocks=${TANDEM_REPLICA_ROCKSDB_DSN}sbtest"
r_zstd="myrocks-zstd=${TANDEM_REPLICA_ZSTD_DSN}sbtest"
r_ref="production=${TANDEM_REFERENCE_DSN}sbtest"
echo
echo "== tandem align --hold: the replicas stop applying (they keep receiving the binary log), so none passes the capture's start"
"$tandem" align --hold "$r_innodb" "$r_rocks" "$r_zstd" "$r_ref"
echo
echo "== a writer that bypasses the proxy (2 sysbench threads straight to the primary, like a cron job), and"
echo "   tandem proxy --binlog-user, in the path and relaying: sysbench, 8 threads for 9 s, through it; 2 s in,"
echo "   tandem capture start takes 5 s of that traffic, the 8 sessions already open joining it with their state"
sysbench oltp_read_write --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$TANDEM_PRIMARY_PORT" --mysql-user=root \
  --mysql-db=sbtest --tables=4 --table-size=20000 --threads=2 --time=12 --rate=50 --report-interval=0 run >/dev/null &
bypass_pid=$!
prod_capture=${capture}-production
rm -rf "$prod_capture"
admin_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$tandem" proxy --listen "127.0.0.1:$proxy_port" --backend "127.0.0.1:$TANDEM_PRIMARY_PORT" \
  --binlog-user root --metrics-addr "127.0.0.1:$admin_port" --log-level warn &
proxy_pid=$!
for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$proxy_port") 2>/dev/null && break; sleep 0.1; done
sysbench oltp_read_write --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$proxy_port" --mysql-user=root \
  --mysql-db=sbtest --tables=4 --table-size=20000 --threads=8 --time=9 --report-interval=0 run | sed -n '/transactions:/p;/reconnects:/p' &
sysbench_pid=$!
sleep 2
"$tandem" capture start "$prod_capture" --proxy "127.0.0.1:$admin_port" --capture-results checksum
sleep 5
"$tandem" capture stop --proxy "127.0.0.1:$admin_port"
wait "$sysbench_pid" || true
kill -TERM "$proxy_pid"; wait "$proxy_pid" || true
wait "$bypass_pid" || true
"$tandem" inspect "$prod_capture" | sed -n '/^sessions began/,/^sessions ended/p'
"$tandem" inspect "$prod_capture" | sed -n '/^start point/,/stored with/p'
echo
echo "== tandem align: the replicas exactly at the capture's start, the reference at its end (production's end state)"
"$tandem" align --capture "$prod_capture" "$r_innodb" "$r_rocks" "$r_zstd"
"$tandem" align --capture "$prod_capture" --end "$r_ref"
echo
echo "== tandem replay --apply-bypassed --reference: the capture, and the writes that bypassed the proxy where the primary"
echo "   ran them, on InnoDB, MyRocks and MyRocks zstd; each end state checked against production's"
"$tandem" replay "$prod_capture" --speed 0 --run "$run-production" --apply-bypassed --reference "$r_ref" \
  --target "$r_innodb" --target "${r_rocks},engine=rocksdb" --target "${r_zstd},engine=rocksdb" --metrics-addr off \
  | sed -n '1,/before the replay/p' | grep -v -E 'latency ms|divergent: '
"$tandem" report "$run-production" | grep -E '^end state of .*production|^note: commits kept' || true
