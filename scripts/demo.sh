#!/usr/bin/env bash
# The demo: start an InnoDB and a MyRocks server, load the same sysbench
# tables into both with tandem prepare, write a sysbench oltp_read_write
# capture with tandem synth, summarize it with tandem inspect, and replay it
# against InnoDB, compressed InnoDB and MyRocks at once.
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
echo "== tandem replay: the capture against all three at once, each session on its own connection, no waiting"
run=.tandem/runs/demo-$(date +%Y%m%d-%H%M%S)
"$tandem" replay "$capture" --speed 0 --run "$run" --target "$innodb" --target "$compressed" --target "$myrocks"

echo
echo "== tandem prepare again: the read-write replay changed each engine's rows in its own order; start equal"
"$tandem" prepare --cleanup --tables 4 --target "$innodb" --target "$myrocks" >/dev/null
"$tandem" prepare --tables 4 --table-size 20000 --threads 4 --target "$innodb" --target "$myrocks" >/dev/null

echo
echo "== tandem proxy: sysbench oltp_read_only (prepared statements) through a capturing proxy in front of InnoDB"
proxy_capture=${capture}-proxy
rm -rf "$proxy_capture"
proxy_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$tandem" proxy --listen "127.0.0.1:$proxy_port" --backend "127.0.0.1:$TANDEM_INNODB_PORT" --capture "$proxy_capture" \
  --capture-results checksum --metrics-addr off --log-level warn &
proxy_pid=$!
for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$proxy_port") 2>/dev/null && break; sleep 0.1; done
sysbench oltp_read_only --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$proxy_port" --mysql-user=root \
  --mysql-db=sbtest --tables=4 --table-size=20000 --threads=4 --events=500 --time=0 run | sed -n '/SQL statistics/,/Throughput/p'
kill -TERM "$proxy_pid"; wait "$proxy_pid" || true   # flushes and closes the capture

echo
echo "== tandem replay: the proxy capture against InnoDB and MyRocks, 2 connections each, compared with each other and with the captured responses"
"$tandem" replay "$proxy_capture" --speed 0 --concurrency 2 --run "$run-proxy" --target "$innodb" --target "$myrocks"
