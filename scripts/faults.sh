#!/usr/bin/env bash
# The fault runs of issue #29, one line per case: bad input and failures
# fed to tandem as a user would meet them, each with what tandem answered
# and whether that answer is the one it must give (a clear error that
# names what is wrong, nothing lost, nothing counted that did not happen).
#
#   sst-flip        a byte flipped in a capture's .sst
#   sst-skip        that capture replayed with --skip-damaged
#   wal-emptied     a crashed capture whose middle WAL was emptied
#   crashed-pack    that capture sealed and packed (pack --crashed), then
#                   replayed from the archive
#   archive-flip    3 bytes flipped in a packed capture (.tar.zst)
#   replay-sigkill  a replay killed with SIGKILL, then 'tandem report' on it
#   replay-sigint   a replay stopped with SIGINT
#   target-killed   one of two targets stopped in the middle of a replay
#   connect-burst   120 clients connecting at once through the proxy
#
# Usage: scripts/faults.sh [bin/tandem]   (make faults). Starts its own
# sandboxed servers in a temporary directory and removes them at the end.
# Exit status 1 if any case failed.
set -uo pipefail
tandem=$(realpath "${1:-bin/tandem}")
work=$(mktemp -d /tmp/tandem-faults.XXXXXX)
cleanup() {
  "$tandem" sandbox down --dir "$work/sandbox" --purge >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
[ -n "${FAULTS_KEEP:-}" ] && trap - EXIT && echo "keeping $work"
failed=0
# result CASE OK WHAT: one line per case.
result() {
  local verdict=PASS
  if [ "$2" != 1 ]; then verdict=FAIL; failed=1; fi
  printf '%-15s %s  %s\n' "$1" "$verdict" "$(tr '\n' ' ' <<<"$3" | cut -c1-220)"
}
# flip FILE N: flip N bytes in the middle of FILE.
flip() {
  python3 - "$1" "$2" <<'EOF'
import os, sys
p, n = sys.argv[1], int(sys.argv[2])
size = os.path.getsize(p)
with open(p, 'r+b') as f:
    for i in range(n):
        f.seek(size // 2 + 97 * i)
        b = f.read(1)
        f.seek(size // 2 + 97 * i)
        f.write(bytes([b[0] ^ 0xFF]))
EOF
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

"$tandem" sandbox up innodb rocksdb --dir "$work/sandbox" >/dev/null || { echo "faults: the sandbox did not start"; exit 1; }
eval "$("$tandem" sandbox env --dir "$work/sandbox")"
a="a=${TANDEM_INNODB_DSN}faults"
b="b=${TANDEM_ROCKSDB_DSN}faults,engine=rocksdb"
for dsn in "$TANDEM_INNODB_MARIADB" "$TANDEM_ROCKSDB_MARIADB"; do
  # shellcheck disable=SC2086
  mariadb $dsn -e 'CREATE DATABASE faults'
done
"$tandem" prepare --tables 2 --table-size 2000 --target "$a" --target "$b" >/dev/null

# A capture to damage: synthesized sysbench read-write, closed cleanly.
"$tandem" synth oltp_read_write --out "$work/good" --tables 2 --table-size 2000 --threads 4 --events 20000 >/dev/null 2>&1

# sst-flip: inspect, inspect --verify and replay each give one line naming
# the damaged file; none panics (exit 2 with a stack, before).
cp -r "$work/good" "$work/sst"
sst=$(ls -S "$work"/sst/*.sst | head -1)
flip "$sst" 1
"$tandem" inspect "$work/sst" >/dev/null 2>"$work/e1"; c1=$?
"$tandem" inspect --verify "$work/sst" >"$work/o2" 2>&1; c2=$?
"$tandem" replay "$work/sst" --target "$a" --run "$work/run-sst" --metrics-addr off >/dev/null 2>"$work/e3"; c3=$?
ok=0
if [ $c1 = 1 ] && [ "$(wc -l <"$work/e1")" = 1 ] && grep -q "$(basename "$sst")" "$work/e1" && ! grep -q panic "$work/e1" "$work/o2" "$work/e3" &&
  [ $c3 != 0 ] && [ $c3 != 2 ] && grep -q "$(basename "$sst")" "$work/o2"; then ok=1; fi
result sst-flip $ok "inspect exit $c1: $(cat "$work/e1") | replay exit $c3: $(head -1 "$work/e3")"

# sst-skip: replay --skip-damaged passes over the damaged file, replays the
# records before and after it, and its note names the file and what is
# missing.
"$tandem" replay "$work/sst" --skip-damaged --speed 0 --target "$a" --run "$work/run-sst2" --metrics-addr off >"$work/o13" 2>&1; c13=$?
ok=0
if [ $c13 = 0 ] && grep -q "$(basename "$sst") is damaged" "$work/o13" && grep -q "passed over" "$work/o13" && grep -q "records lost" "$work/o13"; then ok=1; fi
result sst-skip $ok "replay --skip-damaged exit $c13: $(grep -o "the capture lacks records ([^;]*" "$work/o13" | head -1)"

# wal-emptied: a synth killed while writing leaves its WALs; the middle one
# emptied loses records, which inspect counts and replay refuses to skip
# silently.
"$tandem" synth oltp_read_write --out "$work/crashed" --tables 2 --table-size 2000 --threads 4 --events 2000000 >/dev/null 2>&1 &
pid=$!
for _ in $(seq 100); do
  [ "$(ls "$work"/crashed/*.log 2>/dev/null | wc -l)" -ge 3 ] && break
  sleep 0.1
done
kill -KILL $pid 2>/dev/null; wait $pid 2>/dev/null
rm -f "$work/crashed/LOCK"
mapfile -t wals < <(ls "$work"/crashed/*.log 2>/dev/null | sort)
if [ "${#wals[@]}" -ge 3 ]; then
  truncate -s 0 "${wals[1]}"
  "$tandem" inspect "$work/crashed" >"$work/o4" 2>&1; c4=$?
  "$tandem" replay "$work/crashed" --target "$a" --run "$work/run-wal" --metrics-addr off >/dev/null 2>"$work/e5"; c5=$?
  ok=0
  if grep -qi "lack\|lost\|missing" "$work/o4" && [ $c5 != 0 ] && grep -q -- "--skip-damaged" "$work/e5"; then ok=1; fi
  result wal-emptied $ok "inspect: $(grep -i "lack\|lost\|missing" "$work/o4" | head -1) | replay exit $c5: $(head -1 "$work/e5")"
  # crashed-pack: plain pack refuses the crashed capture and names
  # --crashed; pack --crashed seals it, saying what it lost; the archive's
  # replay refuses it unless --skip-damaged, like the directory's.
  "$tandem" pack "$work/crashed" -o "$work/crashed.tar.zst" >/dev/null 2>"$work/e9"; c9=$?
  "$tandem" pack --crashed "$work/crashed" -o "$work/crashed.tar.zst" >"$work/o10" 2>&1; c10=$?
  # Unpacked under $work: the default ($TMPDIR) keeps the copy for reuse
  # and would outlive this run.
  "$tandem" replay "$work/crashed.tar.zst" --unpack-dir "$work/unpack-crashed" --target "$a" --run "$work/run-packed" --metrics-addr off >/dev/null 2>"$work/e11"; c11=$?
  "$tandem" inspect "$work/crashed.tar.zst" --unpack-dir "$work/unpack-crashed" >"$work/o12" 2>&1
  ok=0
  if [ $c9 = 1 ] && grep -q -- "--crashed" "$work/e9" && [ $c10 = 0 ] && grep -q "sealed .*LOST" "$work/o10" &&
    [ $c11 = 1 ] && grep -q -- "--skip-damaged" "$work/e11" && grep -q "sealed at" "$work/o12"; then ok=1; fi
  result crashed-pack $ok "pack exit $c9; pack --crashed: $(head -1 "$work/o10") | replay of the archive exit $c11"
else
  result wal-emptied 0 "the killed synth left ${#wals[@]} WALs, not 3: nothing to empty"
  result crashed-pack 0 "no crashed capture to pack"
fi

# archive-flip: the archive's checksums catch 3 flipped bytes, and a failed
# unpack leaves nothing in --unpack-dir.
"$tandem" pack "$work/good" -o "$work/good.tar.zst" >/dev/null
flip "$work/good.tar.zst" 3
mkdir -p "$work/unpack"
"$tandem" inspect "$work/good.tar.zst" --unpack-dir "$work/unpack" >/dev/null 2>"$work/e6"; c6=$?
left=$(find "$work/unpack" -mindepth 1 | wc -l)
ok=0
if [ $c6 != 0 ] && [ $c6 != 2 ] && [ "$left" = 0 ] && ! grep -q panic "$work/e6"; then ok=1; fi
result archive-flip $ok "exit $c6, $left files left in --unpack-dir: $(head -1 "$work/e6")"

# replay-sigkill: the run directory of a killed replay is reported, with
# what it stored, and says it did not finish.
"$tandem" replay "$work/good" --target "$a" --target "$b" --speed 1 --run "$work/run-kill" --metrics-addr off >/dev/null 2>&1 &
pid=$!
sleep 3
kill -KILL $pid; wait $pid 2>/dev/null
rm -f "$work/run-kill/LOCK"
"$tandem" report "$work/run-kill" >"$work/o7" 2>&1; c7=$?
ok=0
if [ $c7 = 0 ] && grep -qi "interrupted\|did not finish\|killed" "$work/o7" && ! grep -q "nothing ran" "$work/o7"; then ok=1; fi
result replay-sigkill $ok "report exit $c7: $(head -1 "$work/o7")"

# replay-sigint: an interrupted replay counts no cancellation as an error,
# its report begins by saying it was interrupted, and it exits with 130.
"$tandem" replay "$work/good" --target "$a" --target "$b" --speed 1 --run "$work/run-int" --metrics-addr off >"$work/o8" 2>&1 &
pid=$!
sleep 3
kill -INT $pid; wait $pid; c8=$?
"$tandem" report "$work/run-int" --format json >"$work/j8" 2>/dev/null
# Deadlocks between the synthesized sessions are real errors; a statement
# the interruption stopped is not one (2013 cancelled, before).
read -r cancelled stopped < <(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
ts = [t for p in r["points"] for t in p["targets"]]
print(sum(t.get("error_codes", {}).get("2013", 0) for t in ts),
      sum(t.get("skipped_by_reason", {}).get("not run to its end: the replay was stopped", 0) for t in ts))' "$work/j8" 2>/dev/null || echo "? ?")
ok=0
"$tandem" report "$work/run-int" >"$work/o8r" 2>&1
if [ "$c8" = 130 ] && head -3 "$work/o8r" | grep -qi "interrupted" && [ "$cancelled" = 0 ] && [ "$stopped" != "?" ] && [ "$stopped" -gt 0 ]; then ok=1; fi
result replay-sigint $ok "replay exit $c8, 2013 errors $cancelled, $stopped skipped as stopped: $(head -1 "$work/o8r")"

# target-killed: the target whose server stops is marked failed; it is not
# the fastest, the other target's figures stand, and replay exits with 2.
"$tandem" replay "$work/good" --target "$a" --target "$b" --speed 1 --target-timeout 3s --run "$work/run-dead" --metrics-addr off --json >"$work/j9" 2>"$work/e9" &
pid=$!
sleep 3
"$tandem" sandbox down rocksdb --dir "$work/sandbox" >/dev/null 2>&1
wait $pid; c9=$?
read -r fa fb < <(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); t=r["points"][0]["targets"]; print(repr(t[0].get("failed","")), repr(t[1].get("failed","")))' "$work/j9" 2>/dev/null || echo "? ?")
ok=0
if [ "$c9" = 2 ] && [ "$fa" = "''" ] && [ "$fb" != "''" ] && [ "$fb" != "?" ]; then ok=1; fi
result target-killed $ok "replay exit $c9; a failed=$fa, b failed=$fb"
"$tandem" sandbox up rocksdb --dir "$work/sandbox" >/dev/null 2>&1

# connect-burst: 120 clients connecting at once get through the proxy as
# they do directly (a pool warming up); none is refused with 1040.
port=$(free_port)
"$tandem" proxy --listen "127.0.0.1:$port" --backend "127.0.0.1:$TANDEM_INNODB_PORT" --metrics-addr off --log-level warn >"$work/proxy.log" 2>&1 &
ppid=$!
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
burst() { # PORT: how many of 120 clients got SELECT 1 back
  local n=0 pids=()
  for i in $(seq 120); do
    mariadb -h 127.0.0.1 -P "$1" -u root --skip-ssl -N -e 'SELECT SLEEP(0.5)' >"$work/burst.$i" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" && n=$((n + 1)); done
  echo $n
}
direct=$(burst "$TANDEM_INNODB_PORT")
proxied=$(burst "$port")
kill -TERM $ppid; wait $ppid 2>/dev/null
ok=0
if [ "$proxied" = "$direct" ] && [ "$direct" = 120 ]; then ok=1; fi
result connect-burst $ok "direct $direct of 120, through the proxy $proxied of 120"

exit $failed
