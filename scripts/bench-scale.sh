#!/usr/bin/env bash
# Replay at production width (issue #30): for each session count N in
# SESSIONS, sysbench oltp_read_write at N threads (--rate=200, so the same
# statement rate at every width) is captured through tandem proxy in front of
# a sandboxed InnoDB server for CAPTURE_SECS, then replayed at --speed 0 with
# --order capture and with --order none, each onto a fresh copy of the tables
# as the capture found them, under /usr/bin/time -v. Prints per N and mode:
# records, replay elapsed, statements/s, peak RSS, CPU, errors and
# divergences from the capture; the ordering gate's CPU per statement and
# per record replayed (every record takes a ticket at the gate) (the
# samples with replay/order on their stack: from perf, sampling every thread
# in the kernel, user and system time, when perf works here; from the
# --order capture replay's Go CPU profile, which at a thousand sessions
# keeps a fraction of its samples; and, as an estimate, CPU of --order
# capture minus --order none over the statements replayed); peak RSS against capture length (N=64 captured for LONG_SECS
# too, with the peak RSS so far at each quarter of its replays: whether it
# levels off); and how each figure grows from the first to the last N (ratio to the
# first N's figure), with the waits that parked per statement and the gate's
# CPU per such wait. Then the gate alone, without servers:
# BenchmarkGateSessions (go test -bench, replay/order) at 16 to 1,024
# sessions, wall time per ticket, and BenchmarkGateSessionsTrx (the same,
# every session in a transaction, so that its waits check for stalls). Ends with one verdict line per target of
# issue #30: peak RSS flat with capture length (<= 1.10x for 10x the
# records) and the gate's cost per record growing with N by at most
# log N / log first N, in the replay (perf, else the CPU profile) and alone;
# and, last, replay's CPU per statement against the width of a transaction
# (one session, transactions of TRX_SIZES single-row UPDATEs): flat, within
# 1.5x from the narrowest to the widest.
#   SESSIONS (default "16 64 256 1024"), CAPTURE_SECS (default 5),
#   LONG_SECS (default CAPTURE_SECS x 10; 0 skips the long capture),
#   LONG_N (default 64: the session count captured long too),
#   REPLAY_TIMEOUT (default 600: seconds a replay may take before it is
#   interrupted, SIGINT, and reported as timed out)
#   TRX_SIZES (default "10 100 1000 10000": the transaction widths of the
#   last part, one session's transactions of that many single-row UPDATEs;
#   empty skips it), TRX_STMTS (default 40000: about how many statements
#   each width's capture holds)
#   PERF_HZ (default 4999: perf's sampling rate; PERF=0 does without perf),
#   REF=<git revision> also replays each capture with --order capture by
#   that revision's build (mode capture@REF), side by side, and prints
#   statements/s of this tree over REF's.
set -euo pipefail
tandem=${1:-bin/tandem}
SESSIONS=${SESSIONS:-16 64 256 1024}
CAPTURE_SECS=${CAPTURE_SECS:-5}
LONG_SECS=${LONG_SECS:-$((CAPTURE_SECS * 10))}
LONG_N=${LONG_N:-64}
REPLAY_TIMEOUT=${REPLAY_TIMEOUT:-600}
TRX_SIZES=${TRX_SIZES-10 100 1000 10000}
TRX_STMTS=${TRX_STMTS:-40000}
sessions=($SESSIONS)
REF=${REF:-}
repo=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "$REF" ]; then
  ref_rev=$(git -C "$repo" rev-parse --short "$REF^{commit}") || { echo "bench-scale: REF=$REF: no such revision" >&2; exit 2; }
fi
. "$(dirname "$0")/bench-lib.sh"
bench_work scale
if [ -n "$REF" ]; then
  mkdir "$work/ref-src"
  git -C "$repo" archive "$ref_rev" | tar -x -C "$work/ref-src"
  (cd "$work/ref-src" && go build -o "$work/ref-tandem" ./cmd/tandem)
  echo "tandem@REF: REF=$REF ($ref_rev), built from git archive; tandem: $tandem"
fi

# back_log: the server's listen queue (80 by default). A thousand
# sessions logging in at once at --speed 0 overflowed it: the kernel
# fell back to SYN cookies, some logins were refused (2003), and the
# records of their sessions were let go at --order-timeout, in this
# tree and the reference build alike (39 refused, 841 released, twice
# the time of the next run).
"$tandem" sandbox up innodb --dir "$work/sandbox" --server-option innodb:back-log=4096 >/dev/null
eval "$("$tandem" sandbox env --dir "$work/sandbox")"
dbq() { mariadb $TANDEM_INNODB_MARIADB "$@"; }
dbq -e "CREATE DATABASE sbtest"
"$tandem" prepare --tables 4 --table-size 20000 --threads 4 --target "innodb=root@tcp(127.0.0.1:$TANDEM_INNODB_PORT)/sbtest" >/dev/null
# sysbench prepares ~40 statements per connection; 1,024 of them need more
# than the default 16,382 prepared statements and 151 connections (the
# proxy's backend connections and the replay's, one per session).
dbq -e "SET GLOBAL max_prepared_stmt_count=1000000; SET GLOBAL max_connections=3000"

# copy_db FROM TO: TO becomes a copy of FROM's sbtest1..4.
copy_db() {
  local sql="DROP DATABASE IF EXISTS $2; CREATE DATABASE $2;" i
  for i in 1 2 3 4; do sql+="CREATE TABLE $2.sbtest$i LIKE $1.sbtest$i; INSERT INTO $2.sbtest$i SELECT * FROM $1.sbtest$i;"; done
  dbq -e "$sql"
}

if [ -x /usr/bin/time ]; then timer=gnu; else timer=proc; fi
hz=$(getconf CLK_TCK)
# perf samples every thread from the kernel (user and system time, no
# signal per sample); the gate's figure comes from it when it works here
# (linux-perf; system-wide sampling needs root or perf_event_paranoid <= 0).
PERF_HZ=${PERF_HZ:-4999}
use_perf=0
if [ "${PERF:-1}" != 0 ] && command -v perf >/dev/null && perf record -q -a -o /dev/null -- true >/dev/null 2>&1; then use_perf=1; fi
pport=$(free_port)

# capture KEY N SECS: sysbench oltp_read_write at N threads through the proxy
# for SECS into $work/cap-KEY; the tables as the capture found them are kept
# in sbtest0_KEY. Prints a line about the capture.
capture() {
  local key=$1 n=$2 secs=$3 ppid out
  copy_db sbtest "sbtest0_$key"
  "$tandem" proxy --listen "127.0.0.1:$pport" --backend "127.0.0.1:$TANDEM_INNODB_PORT" --capture "$work/cap-$key" \
    --metrics-addr off --log-level warn --max-connections 2000 >"$work/proxy-$key.log" 2>&1 & ppid=$!; pids=("$ppid")
  for _ in $(seq 100); do [ -z "$(ss -Hltn "sport = :$pport")" ] || break; sleep 0.1; done
  sysbench oltp_read_write --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$pport" --mysql-user=root --mysql-db=sbtest \
    --tables=4 --table-size=20000 --threads="$n" --rate=200 --time="$secs" --report-interval=0 \
    --mysql-ignore-errors=1213,1205 run >"$work/sysbench-$key.log" 2>&1 || echo "sysbench at $n threads exited $?: $(tail -3 "$work/sysbench-$key.log")"
  kill -TERM "$ppid"; wait "$ppid" || echo "proxy for $key exited $?: $(tail -3 "$work/proxy-$key.log")"
  pids=()
  out=$(sed -n 's/.*transactions:.*(\([0-9.]*\) per sec.)/\1/p;s/.*queries:.*(\([0-9.]*\) per sec.)/\1/p;s/.*ignored errors:[[:space:]]*\([0-9]*\).*/\1/p' "$work/sysbench-$key.log" | paste -sd' ')
  "$tandem" inspect "$work/cap-$key" --json | python3 -c '
import json, sys
d = json.load(sys.stdin); key, n, secs = sys.argv[1:4]; s = (sys.argv[4].split() + ["?", "?", "?"])[:3]
open(sys.argv[5], "w").write(str(d["records"]))
print("capture N=%-5s %3s s: %8d records, %5d sessions over %5.1f s, closed cleanly: %s   (sysbench through the proxy: %s tps, %s qps, %s ignored errors)" % (
    n, secs, d["records"], d["sessions"], d["span_seconds"], d["closed_cleanly"], s[0], s[1], s[2]))
' "$key" "$n" "$secs" "$out" "$work/records-$key"
}

# replay KEY ORDER: one replay of $work/cap-KEY onto a fresh copy of
# sbtest0_KEY (sbtest_r); sets r_* for the caller.
replay() {
  local key=$1 order=$2 rc=0 rpid line peak=0 t0 t1 v bin=$tandem
  if [ "$order" = capture@REF ]; then order=capture; bin=$work/ref-tandem; fi
  copy_db "sbtest0_$key" sbtest_r
  rm -rf "$work/run"
  local cmd=("$bin" replay "$work/cap-$key" --speed 0 --order "$order" --metrics-addr off --json --run "$work/run"
    --target "innodb=root@tcp(127.0.0.1:$TANDEM_INNODB_PORT)/sbtest_r")
  rm -f "$work/cpu.pb.gz" "$work/perf.data"
  [ "$order" != capture ] || cmd+=(--cpuprofile "$work/cpu.pb.gz")
  # perf, system-wide (so its own memory is not the replay's peak RSS);
  # the replay's samples are picked by command name. REF's replays run
  # under perf too: perf costs CPU, and the two are compared.
  local perfpid=
  if [ "$order" = capture ] && [ "$use_perf" = 1 ]; then
    perf record -q -a -g -F "$PERF_HZ" -o "$work/perf.data" >/dev/null 2>"$work/perf.err" & perfpid=$!; pids=("$perfpid")
    sleep 0.5
  fi
  # The resident set over the replay (VmRSS every 0.2 s), for the long
  # capture: whether it levels off or grows with the records replayed.
  local sampler=
  rm -f "$work/rss-trace"
  if [ "$key" = long ]; then
    (while :; do
      p=$(pgrep -f -- "^$bin replay .*--run $work/run" | head -1 || true)
      [ -z "$p" ] || awk -v t="$(date +%s.%N)" '/^VmRSS:/ {print t, $2}' "/proc/$p/status" 2>/dev/null >>"$work/rss-trace" || true
      sleep 0.2
    done) & sampler=$!
  fi
  # The binary's own pages count in its resident set as far as the page
  # cache holds them (36 to 49 MB of a 64-session replay's, more for a
  # fresh build): dropped first, so that they count as the replay touches
  # them, alike in every run.
  dd if="$bin" iflag=nocache count=0 status=none 2>/dev/null || true
  if [ "$timer" = gnu ]; then
    /usr/bin/time -v -o "$work/time" timeout -s INT -k 30 "$REPLAY_TIMEOUT" "${cmd[@]}" >"$work/replay.json" 2>"$work/replay.err" || rc=$?
    r_rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$work/time")
    r_cpu=$(awk -F': ' '/User time \(seconds\)/ {u=$2} /System time \(seconds\)/ {s=$2} END {printf "%.2f", u+s}' "$work/time")
  else
    # No GNU time: VmHWM and the CPU ticks from /proc, polled until it exits.
    timeout -s INT -k 30 "$REPLAY_TIMEOUT" "${cmd[@]}" >"$work/replay.json" 2>"$work/replay.err" & rpid=$!
    local ticks=0
    while kill -0 "$rpid" 2>/dev/null; do
      v=$(awk '/^VmHWM:/ {print $2}' "/proc/$rpid/status" 2>/dev/null || true); [ -z "$v" ] || [ "$v" -le "$peak" ] || peak=$v
      v=$(sed 's/^.*) //' "/proc/$rpid/stat" 2>/dev/null | awk '{print $12 + $13}' || true); [ -z "$v" ] || ticks=$v
      sleep 0.05
    done
    wait "$rpid" || rc=$?
    r_rss=$peak; r_cpu=$(awk -v t="$ticks" -v h="$hz" 'BEGIN{printf "%.2f", t/h}')
  fi
  r_trace=
  if [ -n "$sampler" ]; then
    kill "$sampler" 2>/dev/null || true; wait "$sampler" 2>/dev/null || true
    # The peak so far at each quarter of the replay's time, MB.
    r_trace=$(awk 'NR == 1 { t0 = $1 } { t[NR] = $1 - t0; r[NR] = $2 } END {
      if (NR < 4) exit
      for (q = 1; q <= 4; q++) { lim = t[NR] * q / 4; m = 0; for (i = 1; i <= NR; i++) if (t[i] <= lim && r[i] > m) m = r[i]; printf "%s%.1f", (q > 1 ? " / " : ""), m / 1024 } }' "$work/rss-trace")
  fi
  r_perf=-
  if [ -n "$perfpid" ]; then
    kill -INT "$perfpid"; wait "$perfpid" || true; pids=()
    # The replay's samples (command name tandem), and those with
    # replay/order on their stack: CPU seconds, from the sample periods (ns).
    r_perf=$(perf script -i "$work/perf.data" -F comm,period,ip,sym 2>/dev/null | awk -v comm="$(basename "$bin" | cut -c1-15)" '
      function flush() { if (n && mine) { all += per; if (hit) gate += per } n = 0 }
      /^[^ \t]/ { flush(); n = 1; hit = 0; mine = ($1 == comm); per = $2; next }
      /^[ \t]/ { if ($0 ~ /tandem\/replay\/order[.]/) hit = 1; next }
      /^$/ { flush() }
      END { flush(); if (all > 0) printf "%.3f/%.3f", gate / 1e9, all / 1e9; else print "-" }')
  fi
  read -r r_elapsed r_stmts r_errors r_div r_counts < <(python3 - "$work/replay.json" "$rc" <<'PY'
import json, sys
path, rc = sys.argv[1:3]
try:
    d = json.load(open(path))
except Exception as e:
    print("nan 0 nan nan", f"exit {rc}, no report ({e})".replace(" ", "_")); sys.exit()
t = d["points"][0]["targets"][0]
dv = t.get("divergences_from_capture") or {}
div = sum((dv.get("by_class") or {}).values())
stmts = t.get("reads", 0) + t.get("writes", 0) + t.get("other", 0)
extra = (f"ambiguous={dv.get('order_ambiguous', 0)},compared={dv.get('compared', 0)},waits={t.get('order_waits', 0)},"
         f"reruns={t.get('order_reruns', 0)},released={t.get('order_released', 0)},deadlocks={t.get('deadlocks_and_lock_waits', 0)},"
         f"failed_trx={t.get('failed_transactions', 0)}")
if int(rc): extra += f",exit={rc}"
if t.get("error_codes"): extra += ",codes=" + ";".join(f"{k}:{v}" for k, v in t["error_codes"].items()).replace(" ", "_")
if div: extra += ",by_class=" + ";".join(f"{k}:{v}" for k, v in dv["by_class"].items())
if t.get("failed"): extra += ",failed=" + t["failed"].replace(" ", "_")
print(f"{t['elapsed_seconds']:.3f}", stmts, t.get("errors", 0), div, extra)
PY
)
  if [ "$rc" = 124 ]; then
    r_elapsed=timeout; r_counts="interrupted_after_${REPLAY_TIMEOUT}s"
    echo "replay $key --order $order: still running after ${REPLAY_TIMEOUT}s (REPLAY_TIMEOUT), interrupted: $(grep -m1 -E '^(panic|fatal)' "$work/replay.err" || tail -1 "$work/replay.err")"
  elif [ "$rc" != 0 ]; then
    echo "replay $key --order $order exited $rc: $(grep -m1 -E '^(panic|fatal)' "$work/replay.err" || tail -3 "$work/replay.err")"
  fi
}

declare -A rec el st sps rss cpu err dv gate gatep gatef gatefr gatepr rps gsel wps gpw trace
# secs turns pprof's "1.23s" or "450ms" into seconds (awk).
awk_secs='function secs(v) { if (v ~ /ms$/) { sub(/ms$/, "", v); return v/1000 } sub(/s$/, "", v); return v }'
# run_n KEY N SECS I: capture, then replay in both modes (their order swaps
# with I, as the machine drifts).
run_n() {
  local key=$1 n=$2 secs=$3 i=$4 modes m
  capture "$key" "$n" "$secs"
  rec[$key]=$(cat "$work/records-$key")
  if [ $((i % 2)) = 0 ]; then modes=(capture none); else modes=(none capture); fi
  [ -z "$REF" ] || modes+=(capture@REF)
  for m in "${modes[@]}"; do
    replay "$key" "$m"
    if [ "$m" = capture ]; then
      # The gate's own CPU, from the replay's CPU profile (100 Hz): the
      # samples with package replay/order on their stack, per statement.
      gatep_run=$(go tool pprof -top -focus='tandem/replay/order\.' "$work/cpu.pb.gz" 2>/dev/null | awk -v n="$r_stmts" "$awk_secs"'
        /^Showing nodes accounting for / { v = $5; sub(/,$/, "", v); c = secs(v) }
        END { if (n > 0) printf "%.2f", c * 1e6 / n; else print "-" }')
      # The same from perf (all of the replay's threads, user and system).
      gatef_run=$(awk -v p="$r_perf" -v n="$r_stmts" 'BEGIN{ split(p, a, "/"); if (p != "-" && n > 0) printf "%.2f", a[1] * 1e6 / n; else print "-" }')
      # Per record: every record replayed (connects, prepares, closes and
      # quits as well as statements) takes a ticket at the gate. A 5 s
      # capture at --rate=200 gives each of a thousand sessions about one
      # transaction and its ~40 prepares, so records per statement grow
      # with the sessions (about 1 at 16, 5 at 1,024): the per-record
      # figure is the gate's cost the issue bounds, the per-statement one
      # also counts that change of workload.
      gatefr_run=$(awk -v p="$r_perf" -v n="${rec[$key]}" 'BEGIN{ split(p, a, "/"); if (p != "-" && n > 0) printf "%.2f", a[1] * 1e6 / n; else print "-" }')
      gatepr_run=$(awk -v g="$gatep_run" -v s="$r_stmts" -v n="${rec[$key]}" 'BEGIN{ if (g ~ /^[0-9.]+$/ && n > 0) printf "%.2f", g * s / n; else print "-" }')
      # Waits that parked, per statement, and the gate's CPU per such wait.
      waits_run=$(sed -n 's/.*waits=\([0-9]*\).*/\1/p' <<<"$r_counts")
      wps_run=$(awk -v w="$waits_run" -v n="$r_stmts" 'BEGIN{ if (n > 0 && w != "") printf "%.2f", w/n; else print "-" }')
      gpw_run=$(awk -v g="$gatep_run" -v f="$gatef_run" -v w="$waits_run" -v n="$r_stmts" 'BEGIN{ if (f ~ /^[0-9.]+$/) g = f; if (g ~ /^[0-9.]+$/ && w > 0) printf "%.2f", g*n/w; else print "-" }')
    fi
    el[$key,$m]=$r_elapsed; st[$key,$m]=$r_stmts; rss[$key,$m]=$(awk -v k="$r_rss" 'BEGIN{printf "%.1f", k/1024}')
    cpu[$key,$m]=$r_cpu; err[$key,$m]=$r_errors; dv[$key,$m]=$r_div
    sps[$key,$m]=$(awk -v s="$r_stmts" -v e="$r_elapsed" 'BEGIN{ if (e ~ /^[0-9.]+$/ && e + 0 > 0) printf "%.0f", s/e; else print "-" }')
    printf '  N=%-5s %3s s  --order %-7s %8s records  %9s statements  elapsed %8s s  %8s stmt/s  peak RSS %7s MB  CPU %7s s  errors %s  divergent %s  (%s)\n' \
      "$n" "$secs" "$m" "${rec[$key]}" "$r_stmts" "$r_elapsed" "${sps[$key,$m]}" "${rss[$key,$m]}" "$r_cpu" "$r_errors" "$r_div" "${r_counts//,/ }"
    if [ -n "$r_trace" ]; then
      trace[$m]=$r_trace
      echo "    peak RSS so far at 1/4, 1/2, 3/4 and all of that replay's time: $r_trace MB"
    fi
  done
  gate[$key]=$(awk -v a="${cpu[$key,capture]}" -v b="${cpu[$key,none]}" -v s="${st[$key,capture]}" -v e="${el[$key,capture]}" \
    'BEGIN{ if (s > 0 && e ~ /^[0-9.]+$/) printf "%.2f", (a-b)*1e6/s; else print "-" }')
  gatep[$key]=${gatep_run:--}; gatef[$key]=${gatef_run:--}; wps[$key]=${wps_run:--}; gpw[$key]=${gpw_run:--}
  gatefr[$key]=${gatefr_run:--}; gatepr[$key]=${gatepr_run:--}
  rps[$key]=$(awk -v r="${rec[$key]}" -v s="${st[$key,capture]}" 'BEGIN{ if (s > 0) printf "%.2f", r/s; else print "-" }')
  gsel[$key]=${gatef[$key]}; [ "$use_perf" = 1 ] || gsel[$key]=${gatep[$key]}
}

echo "== replay at production width: sysbench oltp_read_write through tandem proxy at --rate=200 for ${CAPTURE_SECS}s per capture,"
echo "   sessions: ${sessions[*]}; each capture replayed at --speed 0 with --order capture and none onto a fresh copy of its tables"
echo "   (peak RSS and CPU from $([ "$timer" = gnu ] && echo "/usr/bin/time -v" || echo "/proc VmHWM and stat, polled"))"
i=0
for n in "${sessions[@]}"; do
  run_n "$n" "$n" "$CAPTURE_SECS" "$i"; i=$((i + 1))
  if [ "$n" = "$LONG_N" ] && [ "$LONG_SECS" -gt 0 ]; then
    run_n "long" "$n" "$LONG_SECS" "$i"; i=$((i + 1))
  fi
done

first=${sessions[0]}
# grow A B: B/A to 2 places, or - .
grow() { awk -v a="$1" -v b="$2" 'BEGIN{ if (a ~ /^-?[0-9.]+$/ && b ~ /^-?[0-9.]+$/ && a + 0 != 0) printf "%.2f", b/a; else print "-" }'; }
echo
echo "Summary (one run each; statements/s = statements replayed / the target's elapsed_seconds; gate µs/st: the CPU of the samples"
echo "with replay/order on their stack in the --order capture replay, per statement: (perf) from perf, every thread, user and"
echo "system time, $([ "$use_perf" = 1 ] && echo "at $PERF_HZ Hz, system-wide, beside that replay" || echo "NOT MEASURED: perf is missing or may not sample here (PERF=0, no linux-perf, or not root)"); (prof) from"
echo "its Go CPU profile, which at a thousand sessions keeps a fraction of its samples; (est.) is an ESTIMATE: the difference of two"
echo "runs' CPU (user + sys), --order capture minus --order none, per statement replayed; waits/st: the waits that parked, per"
echo "statement; gate µs/wait: the gate's CPU (perf, else the profile's) per such wait; rec/st: records replayed per statement"
echo "(every record takes a ticket at the gate); gate µs/rec: the gate's CPU per record, (perf) and (prof) as above)"
printf '%-7s %9s %11s %11s %11s %11s %11s %11s %11s %11s %11s %9s %11s %7s %11s %11s %11s %11s\n' sessions records "stmt/s cap" "stmt/s none" "RSS MB cap" "RSS MB none" "CPU s cap" "CPU s none" "gate (perf)" "gate (prof)" "gate (est.)" "waits/st" "gate µs/wait" "rec/st" "µs/rec perf" "µs/rec prof" "errors c/n" "diverg c/n"
for n in "${sessions[@]}"; do
  printf '%-7s %9s %11s %11s %11s %11s %11s %11s %11s %11s %11s %9s %11s %7s %11s %11s %11s %11s\n' "$n" "${rec[$n]}" "${sps[$n,capture]}" "${sps[$n,none]}" "${rss[$n,capture]}" "${rss[$n,none]}" \
    "${cpu[$n,capture]}" "${cpu[$n,none]}" "${gatef[$n]}" "${gatep[$n]}" "${gate[$n]}" "${wps[$n]}" "${gpw[$n]}" "${rps[$n]}" "${gatefr[$n]}" "${gatepr[$n]}" "${err[$n,capture]}/${err[$n,none]}" "${dv[$n,capture]}/${dv[$n,none]}"
done
if [ -n "$REF" ]; then
  echo
  echo "--order capture, this tree against REF=$REF ($ref_rev), same captures"
  printf '%-7s %13s %13s %9s %13s %13s\n' sessions "stmt/s" "stmt/s REF" "ratio" "elapsed s" "elapsed REF"
  for n in "${sessions[@]}"; do
    printf '%-7s %13s %13s %9s %13s %13s\n' "$n" "${sps[$n,capture]}" "${sps[$n,capture@REF]}" "$(grow "${sps[$n,capture@REF]}" "${sps[$n,capture]}")" \
      "${el[$n,capture]}" "${el[$n,capture@REF]}"
  done
fi
echo
echo "Growth with sessions: each figure over the $first-session one"
printf '%-7s %11s %11s %11s %11s %11s %11s %11s %13s %7s %11s %11s\n' sessions "stmt/s cap" "stmt/s none" "RSS cap" "RSS none" "gate (perf)" "gate (prof)" "waits/st" "gate CPU/wait" "rec/st" "µs/rec perf" "µs/rec prof"
for n in "${sessions[@]}"; do
  printf '%-7s %11s %11s %11s %11s %11s %11s %11s %13s %7s %11s %11s\n' "$n" "$(grow "${sps[$first,capture]}" "${sps[$n,capture]}")" "$(grow "${sps[$first,none]}" "${sps[$n,none]}")" \
    "$(grow "${rss[$first,capture]}" "${rss[$n,capture]}")" "$(grow "${rss[$first,none]}" "${rss[$n,none]}")" "$(grow "${gatef[$first]}" "${gatef[$n]}")" \
    "$(grow "${gatep[$first]}" "${gatep[$n]}")" "$(grow "${wps[$first]}" "${wps[$n]}")" "$(grow "${gpw[$first]}" "${gpw[$n]}")" \
    "$(grow "${rps[$first]}" "${rps[$n]}")" "$(grow "${gatefr[$first]}" "${gatefr[$n]}")" "$(grow "${gatepr[$first]}" "${gatepr[$n]}")"
done

# The gate alone, without servers or connections: BenchmarkGateSessions
# (replay/order) replays a timeline of N sessions' changes at --speed 0
# through a real Gate, each session a goroutine, and reports the wall time
# per ticket on this machine's cores.
echo
# Each session plain (no transaction: BenchmarkGateSessions), then inside a
# transaction whose locks its waits check for stalls (...Trx).
declare -A gb_first gb_firstn gb_last gb_lastn
for bench in BenchmarkGateSessions BenchmarkGateSessionsTrx; do
  echo
  case $bench in
    BenchmarkGateSessions) echo "The gate alone (go test -bench $bench ./replay/order: every statement a change, 200,000 tickets per width)" ;;
    *) echo "The gate alone, every session in a transaction that holds its rows, its waits checking for stalls (go test -bench $bench)" ;;
  esac
  gate_bench=$(cd "$repo" && go test -run '^$' -bench "^$bench\$" -benchtime 200000x ./replay/order 2>&1 |
    awk -v b="$bench" 'index($1, b "/sessions=") == 1 { n=$1; sub(/^.*sessions=/, "", n); sub(/-[0-9]+$/, "", n)
      for (i = 3; i < NF; i += 2) { if ($(i+1) == "ns/ticket") t = $i; if ($(i+1) == "waits/ticket") w = $i; if ($(i+1) == "walks/ticket") k = $i }
      print n, t, w, k }')
  # walks/ticket: looks that walked the backlog for a stalled statement.
  printf '%-7s %11s %13s %13s %11s\n' sessions "ns/ticket" "waits/ticket" "walks/ticket" growth
  gb_first[$bench]=$(awk 'NR==1 {print $2}' <<<"$gate_bench"); gb_firstn[$bench]=$(awk 'NR==1 {print $1}' <<<"$gate_bench")
  gb_last[$bench]=$(awk 'END {print $2}' <<<"$gate_bench"); gb_lastn[$bench]=$(awk 'END {print $1}' <<<"$gate_bench")
  while read -r n t w k; do
    [ -n "$n" ] || continue
    printf '%-7s %11s %13s %13s %11s\n' "$n" "$t" "$w" "$k" "$(grow "${gb_first[$bench]}" "$t")"
  done <<<"$gate_bench"
done
if [ -n "${rec[long]:-}" ]; then
  echo
  echo "Growth with capture length: N=$LONG_N captured for ${CAPTURE_SECS}s and ${LONG_SECS}s"
  printf '%-10s %9s %11s %11s %11s %11s %11s %11s %11s\n' capture records "stmt/s cap" "stmt/s none" "RSS MB cap" "RSS MB none" "gate µs/st" "errors c/n" "diverg c/n"
  for k in "$LONG_N" long; do
    s=$CAPTURE_SECS; [ "$k" != long ] || s=$LONG_SECS
    printf '%-10s %9s %11s %11s %11s %11s %11s %11s %11s\n' "${s}s" "${rec[$k]}" "${sps[$k,capture]}" "${sps[$k,none]}" "${rss[$k,capture]}" "${rss[$k,none]}" "${gsel[$k]}" \
      "${err[$k,capture]}/${err[$k,none]}" "${dv[$k,capture]}/${dv[$k,none]}"
  done
  printf '%-10s %9s %11s %11s %11s %11s %11s\n' "long/short" "$(grow "${rec[$LONG_N]}" "${rec[long]}")" "$(grow "${sps[$LONG_N,capture]}" "${sps[long,capture]}")" \
    "$(grow "${sps[$LONG_N,none]}" "${sps[long,none]}")" "$(grow "${rss[$LONG_N,capture]}" "${rss[long,capture]}")" "$(grow "${rss[$LONG_N,none]}" "${rss[long,none]}")" \
    "$(grow "${gsel[$LONG_N]}" "${gsel[long]}")"
  for m in capture none; do
    [ -z "${trace[$m]:-}" ] || echo "  ${LONG_SECS}s --order $m, peak RSS so far at 1/4, 1/2, 3/4 and all of its replay: ${trace[$m]} MB (a rise that stops is warm-up; one that goes on grows with the records)"
  done
fi

# Growth with the width of a transaction: one session, transactions of
# W single-row UPDATEs (a synthetic capture of about TRX_STMTS statements,
# so that no two transactions overlap), replayed at --speed 0 with
# --order capture and none, replay's CPU per statement (user + system,
# /usr/bin/time or /proc). A transaction's lock set and its unit's
# footprint grow with each statement: each statement's share must not.
if [ -n "$TRX_SIZES" ]; then
  trx_sizes=($TRX_SIZES)
  declare -A tw_stmts tw_sps tw_cpu
  echo
  echo "Growth with transaction width: 1 session, transactions of W single-row UPDATEs, about $TRX_STMTS statements"
  printf '%-8s %9s %12s %12s %14s %14s %9s %9s
' W statements "stmt/s cap" "stmt/s none" "CPU µs/st cap" "CPU µs/st none" "growth c" "growth n"
  for w in "${trx_sizes[@]}"; do
    rm -rf "$work/cap-trx"
    "$tandem" synth oltp_read_write --out "$work/cap-trx" --seed 7 --tables 4 --table-size 20000 --threads 1 \
      --events $(( TRX_STMTS / w > 2 ? TRX_STMTS / w : 2 )) --point-selects 0 --range-selects=off --index-updates 0 \
      --non-index-updates "$w" --delete-inserts 0 --rand-type uniform >/dev/null
    for m in capture none; do
      rm -rf "$work/run"
      cmd=("$tandem" replay "$work/cap-trx" --speed 0 --concurrency 1 --order "$m" --metrics-addr off --json --run "$work/run"
        --target "innodb=root@tcp(127.0.0.1:$TANDEM_INNODB_PORT)/sbtest")
      if [ "$timer" = gnu ]; then
        /usr/bin/time -f '%U %S' -o "$work/time" timeout -s INT -k 30 "$REPLAY_TIMEOUT" "${cmd[@]}" >"$work/replay.json" 2>"$work/replay.err" || true
        cpu=$(awk '{printf "%.3f", $1 + $2}' "$work/time")
      else
        # The children this shell waited for: their CPU, before and after
        # (the shell's own pid: $$ and a $(...)'s BASHPID are others').
        me=$BASHPID
        c0=$(sed 's/^.*) //' "/proc/$me/stat" | awk '{print $14 + $15}')
        timeout -s INT -k 30 "$REPLAY_TIMEOUT" "${cmd[@]}" >"$work/replay.json" 2>"$work/replay.err" || true
        cpu=$(sed 's/^.*) //' "/proc/$me/stat" | awk -v c0="$c0" -v h="$hz" '{printf "%.3f", ($14 + $15 - c0) / h}')
      fi
      read -r tw_n tw_q < <(python3 -c '
import json, sys
try:
    t = json.load(open(sys.argv[1]))["points"][0]["targets"][0]
    print(t["reads"] + t["writes"] + t["other"], round(t["qps"]))
except Exception:
    print("- -")' "$work/replay.json")
      tw_stmts[$w]=$tw_n; tw_sps[$w,$m]=$tw_q
      tw_cpu[$w,$m]=$(awk -v c="$cpu" -v n="$tw_n" 'BEGIN { if (n + 0 > 0) printf "%.2f", c / n * 1e6; else print "-" }')
    done
    printf '%-8s %9s %12s %12s %14s %14s %9s %9s\n' "$w" "${tw_stmts[$w]}" "${tw_sps[$w,capture]}" "${tw_sps[$w,none]}" "${tw_cpu[$w,capture]}" "${tw_cpu[$w,none]}" \
      "$(grow "${tw_cpu[${trx_sizes[0]},capture]}" "${tw_cpu[$w,capture]}")" "$(grow "${tw_cpu[${trx_sizes[0]},none]}" "${tw_cpu[$w,none]}")"
  done
fi

# Issue #30's targets, one line each: peak RSS flat with capture length (10x
# the records within 10 %), and the gate's CPU per record growing with the
# number of sessions by no more than a log factor (log2 N / log2 first N).
# verdict NAME VALUE OP LIMIT
verdict() {
  awk -v n="$1" -v v="$2" -v op="$3" -v l="$4" 'BEGIN{
    if (v !~ /^-?[0-9.]+$/) { printf "verdict %-56s not measured\n", n; exit }
    ok = (op == ">=" ? v + 0 >= l + 0 : v + 0 <= l + 0)
    printf "verdict %-56s %6.2f %s %s: %s\n", n, v, (ok ? op : (op == ">=" ? "<" : ">")), l, (ok ? "MET" : "NOT MET") }'
}
echo
echo "Verdicts (issue #30; one run each):"
if [ -n "${rec[long]:-}" ]; then
  for m in capture none; do
    verdict "peak RSS, ${LONG_SECS}s capture / ${CAPTURE_SECS}s (N=$LONG_N) --order $m" "$(grow "${rss[$LONG_N,$m]}" "${rss[long,$m]}")" "<=" 1.10
  done
fi
last=${sessions[$((${#sessions[@]} - 1))]}
logf() { awk -v a="$1" -v b="$2" 'BEGIN{ printf "%.2f", (a > 1 ? log(b)/log(a) : log(b)/log(2)) }'; }
if [ "$last" != "$first" ]; then
  # perf's figure when there is one: Go's profiler takes a signal per
  # sample and, at a thousand sessions, keeps a fraction of them.
  # Per record, as the issue bounds it: every record takes a ticket.
  if [ "$use_perf" = 1 ]; then
    verdict "gate CPU per record (perf), N=$last / N=$first" "$(grow "${gatefr[$first]}" "${gatefr[$last]}")" "<=" "$(logf "$first" "$last")"
    echo "  (not verdicts: the same from the Go CPU profile $(grow "${gatepr[$first]}" "${gatepr[$last]}"); per statement, perf $(grow "${gatef[$first]}" "${gatef[$last]}"),"
    echo "  profile $(grow "${gatep[$first]}" "${gatep[$last]}"), with records per statement $(grow "${rps[$first]}" "${rps[$last]}")x as many: the ${CAPTURE_SECS}s captures give"
    echo "  each of $last sessions its connect and prepares but few transactions)"
  else
    verdict "gate CPU per record (Go profile), N=$last / N=$first" "$(grow "${gatepr[$first]}" "${gatepr[$last]}")" "<=" "$(logf "$first" "$last")"
    echo "  (not a verdict: per statement $(grow "${gatep[$first]}" "${gatep[$last]}"), with records per statement $(grow "${rps[$first]}" "${rps[$last]}")x as many)"
  fi
fi
if [ -n "$TRX_SIZES" ] && [ "${#trx_sizes[@]}" -gt 1 ]; then
  # Replay's work per statement does not depend on how many came before
  # it in its transaction: 1.5 leaves room for the statement mix (BEGIN
  # and COMMIT are a sixth of the narrowest) and the machine's noise.
  wf=${trx_sizes[0]} wl=${trx_sizes[$((${#trx_sizes[@]} - 1))]}
  for m in capture none; do
    verdict "replay CPU per statement, W=$wl / W=$wf, --order $m" "$(grow "${tw_cpu[$wf,$m]}" "${tw_cpu[$wl,$m]}")" "<=" 1.5
  done
fi
for bench in BenchmarkGateSessions BenchmarkGateSessionsTrx; do
  f=${gb_first[$bench]} fn=${gb_firstn[$bench]} l=${gb_last[$bench]} ln=${gb_lastn[$bench]}
  [ -n "$f" ] && [ "$ln" != "$fn" ] || continue
  name="gate alone, ns per ticket, N=$ln / N=$fn"; [ "$bench" = BenchmarkGateSessions ] || name="gate alone, in transactions, N=$ln / N=$fn"
  verdict "$name" "$(grow "$f" "$l")" "<=" "$(logf "$fn" "$ln")"
done
