#!/usr/bin/env bash
# Capture from packets: how fast tandem capture --from-pcap decodes, and
# how much memory it takes against the file's size.
#  1. tcpdump records sysbench oltp_point_select (8 threads, STMTS
#     statements) on a sandboxed server; tandem capture --from-pcap decodes
#     it, against tandem synth writing a capture of as many statements
#     (the same store, no decoding), alternating ROUNDS times: statements
#     per second each, and the ratio.
#  2. tcpdump records sysbench oltp_read_write until the file holds BIG_MB
#     MiB; decoding it and its first half gives each one's peak RSS:
#     memory goes with the sessions open (8) and the capture store's own
#     buffers (a 64 MiB memtable, at most 64 MiB of records waiting),
#     not with the file.
#   STMTS (1000000), BIG_MB (1024), ROUNDS (2)
set -euo pipefail
tandem=${1:-bin/tandem}
tandem=$(realpath "$tandem")
STMTS=${STMTS:-1000000}; BIG_MB=${BIG_MB:-1024}; ROUNDS=${ROUNDS:-2}
. "$(dirname "$0")/bench-lib.sh"
bench_work pcap
command -v tcpdump >/dev/null || { echo "bench-pcap: tcpdump is not installed (make deps)" >&2; exit 1; }

"$tandem" sandbox up innodb --dir "$work/sandbox" >/dev/null
eval "$("$tandem" sandbox env --dir "$work/sandbox")"
port=$TANDEM_INNODB_PORT
mariadb $TANDEM_INNODB_MARIADB -e "CREATE DATABASE sbtest"
sb=(--db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$port" --mysql-user=root --mysql-db=sbtest --tables=4 --table-size=10000)
sysbench oltp_read_write "${sb[@]}" prepare >/dev/null

# dump FILE CMD…: records the server's port into FILE while CMD runs, and
# waits for tcpdump to write everything before stopping it.
dump() {
  local file=$1; shift
  tcpdump -i lo -s 0 -B 262144 -w "$file" "tcp port $port" 2>"$file.log" &
  local td=$!
  until grep -q "listening on" "$file.log" 2>/dev/null; do sleep 0.1; done
  "$@" >/dev/null
  local last=-1 still=0
  while [ "$still" -lt 15 ]; do
    sleep 0.1
    local size; size=$(stat -c %s "$file")
    if [ "$size" = "$last" ]; then still=$((still + 1)); else last=$size; still=0; fi
  done
  kill -INT "$td"; wait "$td" || true
  grep -E "dropped by kernel" "$file.log" | sed 's/^/  tcpdump: /' >&2
}

# peak FILE DIR: decodes FILE into DIR; prints "seconds peak-RSS-KiB".
peak() {
  rm -rf "$2"
  /usr/bin/time -f "%e %M" -o "$work/time" "$tandem" capture --from-pcap "$1" --port "$port" "$2" >"$work/capture.out"
  cat "$work/time"
}

echo "recording $STMTS point selects (8 threads)..." >&2
dump "$work/ps.pcap" sysbench oltp_point_select "${sb[@]}" --threads=8 --events="$STMTS" --time=0 run
ps_mb=$(( $(stat -c %s "$work/ps.pcap") / 1048576 ))
dec_total=0; syn_total=0
for r in $(seq "$ROUNDS"); do
  read -r dsec _ < <(peak "$work/ps.pcap" "$work/cap")
  stmts=$("$tandem" inspect "$work/cap" --json | python3 -c 'import json,sys; r=json.load(sys.stdin); print(sum(k["count"] for k in r["by_kind"] if k["kind"] in ("query","execute")))')
  rm -rf "$work/syn"
  t0=$(date +%s.%N)
  "$tandem" synth oltp_point_select --threads 8 --events "$stmts" --out "$work/syn" >/dev/null
  t1=$(date +%s.%N)
  ssec=$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')
  printf 'round %d: --from-pcap %d statements (%d MiB) in %.2fs, synth the same number in %.2fs\n' "$r" "$stmts" "$ps_mb" "$dsec" "$ssec" >&2
  dec_total=$(awk -v a="$dec_total" -v b="$dsec" 'BEGIN{print a+b}'); syn_total=$(awk -v a="$syn_total" -v b="$ssec" 'BEGIN{print a+b}')
done
dec_rate=$(awk -v n="$stmts" -v t="$dec_total" -v r="$ROUNDS" 'BEGIN{print n*r/t}')
syn_rate=$(awk -v n="$stmts" -v t="$syn_total" -v r="$ROUNDS" 'BEGIN{print n*r/t}')

echo "recording oltp_read_write until the file holds $BIG_MB MiB..." >&2
big=$work/rw.pcap
rw_loop() {
  while [ "$(stat -c %s "$big" 2>/dev/null || echo 0)" -lt $((BIG_MB * 1048576)) ]; do
    sysbench oltp_read_write "${sb[@]}" --threads=8 --time=5 run >/dev/null
  done
}
dump "$big" rw_loop
big_mb=$(( $(stat -c %s "$big") / 1048576 ))
half=$work/rw-half.pcap
python3 - "$big" "$half" <<'EOF'
import sys
src, dst = sys.argv[1], sys.argv[2]
with open(src, 'rb') as f, open(dst, 'wb') as g:
    hdr = f.read(24); g.write(hdr)
    import os
    limit = os.path.getsize(src) // 2
    end = '<' if hdr[:4] in (b'\xd4\xc3\xb2\xa1', b'\x4d\x3c\xb2\xa1') else '>'
    import struct
    n = 24
    while n < limit:
        ph = f.read(16)
        if len(ph) < 16: break
        incl = struct.unpack(end + 'IIII', ph)[2]
        g.write(ph); g.write(f.read(incl)); n += 16 + incl
EOF
h_mb=$(( $(stat -c %s "$half") / 1048576 ))
read -r bsec bkib < <(peak "$big" "$work/capbig")
read -r hsec hkib < <(peak "$half" "$work/caph")

echo
printf '%-58s %14s %12s %8s\n' measure measured target ratio
printf '%-58s %14.0f %12s %8s\n' "tandem synth, statements/s into a capture (reference)" "$syn_rate" "" ""
printf '%-58s %14.0f %12s %8.2f\n' "capture --from-pcap, statements/s ($stmts point selects)" "$dec_rate" "" "$(awk -v a="$dec_rate" -v b="$syn_rate" 'BEGIN{print a/b}')"
printf '%-58s %14s %12s %8.2f\n' "peak RSS MiB, ${big_mb} MiB pcap / ${h_mb} MiB (its first half)" "$((bkib / 1024)) / $((hkib / 1024))" "flat" "$(awk -v a="$bkib" -v b="$hkib" 'BEGIN{print a/b}')"
printf '%-58s %14.1f %12s %8s\n' "capture --from-pcap, MiB/s read (read/write pcap)" "$(awk -v m="$big_mb" -v t="$bsec" 'BEGIN{print m/t}')" "" ""
