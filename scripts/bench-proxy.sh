#!/usr/bin/env bash
# Proxy benchmark: sysbench oltp_point_select and oltp_read_write at 8 threads
# against one sandboxed InnoDB server, direct, through HAProxy in TCP mode (the
# plain-relay reference), through tandem proxy without capture, with it, and
# with capture and two shadows (an InnoDB copy and a MyRocks copy, replaying
# live on servers that share this machine's CPUs).
# Runs alternate, ROUNDS times (every other round in reverse order), in one session; prints mean QPS, p95 and ratios,
# and CPU per statement, capture on with shadows against without: the proxy
# process's (exact, from /proc: the shadows run in worker processes of their
# own), its client path's (from a CPU profile: the goroutines serving
# clients), and the shadows' workers'. Then both capturing proxies serve
# sysbench at the same time, half the threads each, so that they share the
# machine's load: the ratio of their CPU per statement is the shadows' own.
# For every target, where each statement's time goes on the machine: the
# proxy's CPU, the server's, the rest's, and the CPUs' idle time (a proxy
# that makes the others wait shows as idle time, not as its own CPU).
# Ends with one verdict line per target of issue #30: tandem+capture >= 1.0x
# HAProxy's QPS and <= its CPU per statement on both workloads, shadows
# <= 1.05x on the client path.
#   SECS (default 5) seconds per run, ROUNDS (default 6), THREADS (default 8):
#   on 2 CPUs single runs vary by 10-20 % as the machine drifts, so many
#   short alternating rounds pair each run with a close neighbour and narrow
#   the intervals more than a few long ones (about 13 minutes with REF).
#   REF=<git revision> builds that revision's tandem (git archive into the
#   temp dir) and adds target tandem@REF: its relay-only proxy, flags as
#   tandem's, measured alternately with the others (every other round runs
#   the targets in reverse order). Prints the CPU per statement of every
#   proxy process, and tandem / tandem@REF for QPS and CPU per statement
#   with a verdict against >= 0.98 (CPU <= 1/0.98).
#   TARGETS="haproxy tandem tandem@REF" (space-separated; direct is always
#   measured too, for the machine's figure) runs only those targets; default
#   all. The capturing proxies, their shadows' servers and the side-by-side
#   phase start only when selected. REF=HEAD measures the noise floor.
#   TARGETS="tandem+capture tandem+capture+2shadows" measures the shadows'
#   verdict alone.
#   Target tandem+capture@procs2 (only when named in TARGETS) is
#   tandem+capture with --procs 2: on 2 CPUs the default runs the proxy's
#   Go code on one, and with capture that one CPU is the bottleneck, e.g.
#   TARGETS="haproxy tandem+capture tandem+capture@procs2".
set -euo pipefail
tandem=${1:-bin/tandem}
SECS=${SECS:-5}
ROUNDS=${ROUNDS:-6}
THREADS=${THREADS:-8}
REF=${REF:-}
repo=$(cd "$(dirname "$0")/.." && pwd)
# In the order they run (reversed every other round): each verdict's two
# targets next to each other (HAProxy and tandem+capture, tandem and
# tandem@REF), so that the machine's drift between them is the least.
all_targets=(direct haproxy tandem+capture tandem)
[ -z "$REF" ] || all_targets+=(tandem@REF)
all_targets+=(tandem-blocking tandem+capture+2shadows)
extra_targets=(tandem+capture@procs2) # only when TARGETS names them
if [ -n "${TARGETS:-}" ]; then
  targets=(direct)
  for t in $TARGETS; do
    [ "$t" != direct ] || continue
    known=""; for a in "${all_targets[@]}" "${extra_targets[@]}"; do [ "$a" != "$t" ] || known=1; done
    if [ -z "$known" ]; then
      echo "bench-proxy: unknown target $t (known: ${all_targets[*]} ${extra_targets[*]}; tandem@REF needs REF=<revision>)" >&2
      exit 2
    fi
    targets+=("$t")
  done
else
  targets=("${all_targets[@]}")
fi
# want TARGET: whether TARGET is measured.
want() { local t; for t in "${targets[@]}"; do [ "$t" != "$1" ] || return 0; done; return 1; }
want tandem+capture+2shadows && shadows=1 || shadows=""
want tandem+capture && want tandem+capture+2shadows && pair=1 || pair=""
if want tandem@REF; then
  ref_rev=$(git -C "$repo" rev-parse --short "$REF^{commit}") || { echo "bench-proxy: REF=$REF: no such revision" >&2; exit 2; }
fi
. "$(dirname "$0")/bench-lib.sh"
bench_work proxy


if want tandem@REF; then
  # The reference revision's own source and build, apart from this tree.
  mkdir "$work/ref-src"
  git -C "$repo" archive "$ref_rev" | tar -x -C "$work/ref-src"
  (cd "$work/ref-src" && go build -o "$work/ref-tandem" ./cmd/tandem)
  echo "tandem@REF: REF=$REF ($ref_rev), built from git archive; tandem: $tandem ($("$tandem" --version 2>/dev/null || true))"
fi

# The MyRocks server only for the shadows: an idle server still shares the CPUs.
if [ -n "$shadows" ]; then
  "$tandem" sandbox up innodb rocksdb --dir "$work/sandbox" >/dev/null
else
  "$tandem" sandbox up innodb --dir "$work/sandbox" >/dev/null
fi
eval "$("$tandem" sandbox env --dir "$work/sandbox")"
db_port=$TANDEM_INNODB_PORT
mariadb $TANDEM_INNODB_MARIADB -e "CREATE DATABASE sbtest; CREATE DATABASE sbtest_copy; CREATE DATABASE sbtest_b"
sb_common=(--db-driver=mysql --mysql-host=127.0.0.1 --mysql-user=root --mysql-db=sbtest --tables=4 --table-size=20000)
copy_dsn="root@tcp(127.0.0.1:$TANDEM_INNODB_PORT)/sbtest_copy"
prep=(--target "primary=root@tcp(127.0.0.1:$db_port)/sbtest")
if [ -n "$shadows" ]; then
  mariadb $TANDEM_ROCKSDB_MARIADB -e "CREATE DATABASE sbtest"
  rocks_dsn="root@tcp(127.0.0.1:$TANDEM_ROCKSDB_PORT)/sbtest,engine=rocksdb"
  prep+=(--target "copy=$copy_dsn" --target "rocks=$rocks_dsn")
fi
[ -z "$pair" ] || prep+=(--target "b=root@tcp(127.0.0.1:$db_port)/sbtest_b")
# The same rows everywhere: the shadows start as copies of the primary.
# sbtest_b is the capture-only proxy's in the side-by-side runs.
"$tandem" prepare --tables 4 --table-size 20000 --threads 2 "${prep[@]}" >/dev/null

declare -A port=([direct]=$db_port) pid_of=()
if want haproxy; then
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
haproxy -f "$work/haproxy.cfg" -db >"$work/haproxy.log" 2>&1 & pid_of[haproxy]=$!; pids+=($!)
port[haproxy]=$ha_port
fi

if want tandem; then
t_port=$(free_port)
"$tandem" proxy --listen 127.0.0.1:$t_port --backend 127.0.0.1:$db_port --metrics-addr off --log-level warn >"$work/proxy.log" 2>&1 & pid_of[tandem]=$!; pids+=($!)
port[tandem]=$t_port
fi
if want tandem@REF; then
r_port=$(free_port)
"$work/ref-tandem" proxy --listen 127.0.0.1:$r_port --backend 127.0.0.1:$db_port --metrics-addr off --log-level warn >"$work/proxy-ref.log" 2>&1 & pid_of[tandem@REF]=$!; pids+=($!)
port[tandem@REF]=$r_port
fi
if want tandem-blocking; then
p_port=$(free_port)
"$tandem" proxy --io blocking --listen 127.0.0.1:$p_port --backend 127.0.0.1:$db_port --metrics-addr off --log-level warn >"$work/proxy-blocking.log" 2>&1 & pid_of[tandem-blocking]=$!; pids+=($!)
port[tandem-blocking]=$p_port
fi
if want tandem+capture@procs2; then
q_port=$(free_port)
"$tandem" proxy --procs 2 --listen 127.0.0.1:$q_port --backend 127.0.0.1:$db_port --capture "$work/capture-procs2" --metrics-addr off --log-level warn >"$work/proxy-capture-procs2.log" 2>&1 & pid_of[tandem+capture@procs2]=$!; pids+=($!)
port[tandem+capture@procs2]=$q_port
fi
declare -A prof=() ppid_of=()
if want tandem+capture; then
c_port=$(free_port); c_metrics=$(free_port)
"$tandem" proxy --listen 127.0.0.1:$c_port --backend 127.0.0.1:$db_port --capture "$work/capture" --metrics-addr 127.0.0.1:$c_metrics --pprof --log-level warn >"$work/proxy-capture.log" 2>&1 & capture_pid=$!; pids+=($capture_pid)
port[tandem+capture]=$c_port; prof[tandem+capture]=$c_metrics; ppid_of[tandem+capture]=$capture_pid; pid_of[tandem+capture]=$capture_pid
fi
if [ -n "$shadows" ]; then
# Row summaries as tandem+capture records them, so that the shadows are the
# only difference (with checksums the shadows would compare row content too).
s_port=$(free_port); s_metrics=$(free_port)
"$tandem" proxy --listen 127.0.0.1:$s_port --backend 127.0.0.1:$db_port --capture "$work/capture-shadows" --capture-results summary \
  --shadow "copy=$copy_dsn" --shadow "rocks=$rocks_dsn" --shadow-drain-timeout 1s \
  --metrics-addr 127.0.0.1:$s_metrics --pprof --log-level warn >"$work/proxy-shadows.log" 2>&1 & shadows_pid=$!; pids+=($shadows_pid)
port[tandem+capture+2shadows]=$s_port; prof[tandem+capture+2shadows]=$s_metrics; ppid_of[tandem+capture+2shadows]=$shadows_pid; pid_of[tandem+capture+2shadows]=$shadows_pid
fi
sleep 1

declare -A cpu pcpu wcpu proc srv idle busy

# The primary server's process, for where each statement's time goes.
db_pid=$(cat "$work/sandbox/innodb/mysqld.pid")
# machine_ticks: the machine's busy (steal included: time a hypervisor took)
# and idle (with iowait) clock ticks, all CPUs.
machine_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6 }' /proc/stat; }

hz=$(getconf CLK_TCK)
# wait_shadows waits until the shadows have replayed everything captured.
wait_shadows() {
  for _ in $(seq 600); do
    behind=$(curl -s "http://127.0.0.1:$s_metrics/metrics" | awk '/^tandem_shadow_lag_records/ {n += $2} END {print n + 0}')
    [ "$behind" = 0 ] && break
    sleep 0.5
  done
}

# The client path is the goroutines that serve clients (the session loop:
# relaying, parsing, recording into the capture queue), found by their
# stacks in a CPU profile of the proxy.
client_focus='proxy\.\(\*session\)|proxy\.\(\*Proxy\)\.handle'

# secs turns pprof's "1.23s" or "450ms" into seconds (awk).
awk_secs='function secs(v) { if (v ~ /ms$/) { sub(/ms$/, "", v); return v/1000 } sub(/s$/, "", v); return v }'

# client_cpu PROFILE: "C K": CPU seconds of the client path's samples, and
# of them those that landed in system calls (flat in the syscall stubs,
# epoll_wait, futex): kernel time, which grows with the machine's load (the
# shadows' servers), not with the proxy's own work.
client_cpu() {
  go tool pprof -top -nodefraction=0 -edgefraction=0 -focus="$client_focus" "$1" 2>/dev/null | awk "$awk_secs"'
    /^Showing nodes accounting for / { v = $5; sub(/,$/, "", v); c = secs(v) }
    $NF ~ /linux\.Syscall6$|^syscall\.(Raw)?Syscall6?$|linux\.EpollWait$|^runtime\.(futex|usleep|osyield)$/ { k += secs($1) }
    END { printf "%.3f %.3f\n", c, k }'
}

# other_cpu PROFILE C: CPU seconds of every other sample (C: the client
# path's): the capture's commits, the shadows' feeders (labelled
# tandem=shadow-feed), Go's scheduler and GC, metrics.
other_cpu() {
  go tool pprof -top "$1" 2>/dev/null | head -8 | awk -v c="$2" "$awk_secs"'
    /Total samples = / { for (i = 1; i <= NF; i++) if ($i == "=") total = secs($(i+1)) }
    END { printf "%.3f", total - c }'
}
# feed_cpu PROFILE: CPU seconds of the shadows' feeders (labelled
# tandem=shadow-feed): all the shadow work the proxy process does.
feed_cpu() {
  go tool pprof -top -tagfocus='tandem=shadow-feed' "$1" 2>/dev/null | awk "$awk_secs"'
    /^Showing nodes accounting for / { v = $5; sub(/,$/, "", v); c = secs(v) }
    END { printf "%.3f\n", c + 0 }'
}
workloads=(oltp_point_select oltp_read_write)
declare -A qps p95 ucpu ocpu fcpu

for round in $(seq "$ROUNDS"); do
  # Every other round runs the targets in reverse order, so that no target
  # always runs before another (tandem+capture after HAProxy, tandem before
  # tandem@REF): the machine drifts within a round, by up to 50 % within a
  # minute here.
  order=("${targets[@]}")
  if [ $((round % 2)) = 0 ]; then
    order=()
    for ((i = ${#targets[@]} - 1; i >= 0; i--)); do order+=("${targets[$i]}"); done
  fi
  for w in "${workloads[@]}"; do
    for tgt in "${order[@]}"; do
      ppid=""
      x0=""; [ -z "${pid_of[$tgt]:-}" ] || x0=$(ticks "${pid_of[$tgt]}")
      d0=$(ticks "$db_pid"); read -r m0 i0 < <(machine_ticks)
      if [ -n "${prof[$tgt]:-}" ]; then
        workers=($(pgrep -P "${ppid_of[$tgt]}" || true))
        t0=$(ticks "${ppid_of[$tgt]}"); w0=$(ticks "${workers[@]}")
        curl -s -o "$work/cpu-$tgt.pb.gz" "http://127.0.0.1:${prof[$tgt]}/debug/pprof/profile?seconds=$((SECS - 1))" & ppid=$!
      fi
      out=$(sysbench "$w" "${sb_common[@]}" --mysql-port="${port[$tgt]}" --threads="$THREADS" --time="$SECS" --report-interval=0 run)
      d1=$(ticks "$db_pid"); read -r m1 i1 < <(machine_ticks)
      qn=$(sed -n 's/.*queries:[[:space:]]*\([0-9]*\) .*/\1/p' <<<"$out")
      # The server's CPU and the machine's idle time per statement (busy
      # and idle add up to the CPUs times the run's length).
      srv[$w,$tgt]="${srv[$w,$tgt]:-} $(awk -v t=$((d1 - d0)) -v h="$hz" -v q="$qn" 'BEGIN{printf "%.2f", t/h*1e6/q}')"
      idle[$w,$tgt]="${idle[$w,$tgt]:-} $(awk -v t=$((i1 - i0)) -v h="$hz" -v q="$qn" 'BEGIN{printf "%.2f", t/h*1e6/q}')"
      busy[$w,$tgt]="${busy[$w,$tgt]:-} $(awk -v t=$((m1 - m0)) -v h="$hz" -v q="$qn" 'BEGIN{printf "%.2f", t/h*1e6/q}')"
      if [ -n "$x0" ]; then
        # CPU per statement of the proxy process, exactly, over the whole run.
        x1=$(ticks "${pid_of[$tgt]}")
        proc[$w,$tgt]="${proc[$w,$tgt]:-} $(awk -v t=$((x1 - x0)) -v h="$hz" -v q="$qn" 'BEGIN{printf "%.2f", t/h*1e6/q}')"
      fi
      if [ -n "$ppid" ]; then
        t1=$(ticks "${ppid_of[$tgt]}"); w1=$(ticks "${workers[@]}")
        wait "$ppid"
        # The whole proxy process, exactly, over the whole run; and the
        # shadows' workers over the same time (they go on after it).
        pcpu[$w,$tgt]="${pcpu[$w,$tgt]:-} $(awk -v t=$((t1 - t0)) -v h="$hz" -v q="$qn" 'BEGIN{printf "%.2f", t/h*1e6/q}')"
        wcpu[$w,$tgt]="${wcpu[$w,$tgt]:-} $(awk -v t=$((w1 - w0)) -v h="$hz" -v q="$qn" 'BEGIN{printf "%.2f", t/h*1e6/q}')"
        read -r c k < <(client_cpu "$work/cpu-$tgt.pb.gz")
        o=$(other_cpu "$work/cpu-$tgt.pb.gz" "$c")
        fd=$(feed_cpu "$work/cpu-$tgt.pb.gz")
        fcpu[$w,$tgt]="${fcpu[$w,$tgt]:-} $(awk -v f="${fd:-0}" -v q="$qn" -v s="$SECS" 'BEGIN{printf "%.2f", f*1e6/(q*(s-1)/s)}')"
        # CPU per statement, µs: the profile spans SECS-1 of the SECS run.
        cpu[$w,$tgt]="${cpu[$w,$tgt]:-} $(awk -v c="${c:-0}" -v q="$qn" -v s="$SECS" 'BEGIN{printf "%.2f", c*1e6/(q*(s-1)/s)}')"
        ucpu[$w,$tgt]="${ucpu[$w,$tgt]:-} $(awk -v c="${c:-0}" -v k="${k:-0}" -v q="$qn" -v s="$SECS" 'BEGIN{printf "%.2f", (c-k)*1e6/(q*(s-1)/s)}')"
        ocpu[$w,$tgt]="${ocpu[$w,$tgt]:-} $(awk -v o="${o:-0}" -v q="$qn" -v s="$SECS" 'BEGIN{printf "%.2f", o*1e6/(q*(s-1)/s)}')"
      fi
      q=$(sed -n 's/.*queries:.*(\([0-9.]*\) per sec.)/\1/p' <<<"$out")
      l=$(sed -n 's/.*95th percentile:[[:space:]]*\([0-9.]*\)/\1/p' <<<"$out")
      e=$(sed -n 's/.*ignored errors:[[:space:]]*\([0-9]*\).*/\1/p' <<<"$out")
      qps[$w,$tgt]="${qps[$w,$tgt]:-} $q"
      p95[$w,$tgt]="${p95[$w,$tgt]:-} $l"
      # sysbench's "ignored errors" are deadlocks and lock waits it retried.
      printf 'round %d  %-18s %-15s %10.0f qps  p95 %6.2f ms  retried errors %s\n' "$round" "$w" "$tgt" "$q" "$l" "${e:-0}"
      if [ "$tgt" = tandem+capture+2shadows ]; then
        # The shadows finish their backlog before the next run, so that no
        # run shares the CPUs with them but their own.
        wait_shadows
      fi
    done
  done
done

# Side by side: both capturing proxies serve sysbench at the same time,
# THREADS/2 threads each (the capture-only proxy's on a copy of the tables,
# sbtest_b), so that both share one machine's load — the shadows' servers
# and workers included — and the only difference between them is the
# shadows in one. CPU per statement of each proxy process (exact) and of
# its client path (profile).
half=$(( THREADS / 2 > 0 ? THREADS / 2 : 1 ))
sb_b=("${sb_common[@]/--mysql-db=sbtest/--mysql-db=sbtest_b}")
declare -A side_p side_c side_q
for round in $(seq "$([ -n "$pair" ] && echo "$ROUNDS" || echo 0)"); do
  for w in "${workloads[@]}"; do
    wait_shadows
    a0=$(ticks "$capture_pid"); b0=$(ticks "$shadows_pid")
    curl -s -o "$work/pair-a.pb.gz" "http://127.0.0.1:$c_metrics/debug/pprof/profile?seconds=$((SECS - 1))" & pa=$!
    curl -s -o "$work/pair-b.pb.gz" "http://127.0.0.1:$s_metrics/debug/pprof/profile?seconds=$((SECS - 1))" & pb=$!
    sysbench "$w" "${sb_b[@]}" --mysql-port="$c_port" --threads="$half" --time="$SECS" --report-interval=0 run >"$work/pair-a.out" & sa=$!
    sysbench "$w" "${sb_common[@]}" --mysql-port="$s_port" --threads="$half" --time="$SECS" --report-interval=0 run >"$work/pair-b.out" & sbp=$!
    wait "$sa" "$sbp"
    a1=$(ticks "$capture_pid"); b1=$(ticks "$shadows_pid")
    wait "$pa" "$pb"
    for side in a b; do
      qn=$(sed -n 's/.*queries:[[:space:]]*\([0-9]*\) .*/\1/p' "$work/pair-$side.out")
      if [ "$side" = a ]; then t=$((a1 - a0)); else t=$((b1 - b0)); fi
      read -r c k < <(client_cpu "$work/pair-$side.pb.gz")
      side_q[$w,$side]="${side_q[$w,$side]:-} $(sed -n 's/.*queries:.*(\([0-9.]*\) per sec.)/\1/p' "$work/pair-$side.out")"
      side_p[$w,$side]="${side_p[$w,$side]:-} $(awk -v t="$t" -v h="$hz" -v q="$qn" 'BEGIN{printf "%.2f", t/h*1e6/q}')"
      side_c[$w,$side]="${side_c[$w,$side]:-} $(awk -v c="${c:-0}" -v q="$qn" -v s="$SECS" 'BEGIN{printf "%.2f", c*1e6/(q*(s-1)/s)}')"
    done
    printf 'side by side round %d  %-18s  capture only %s qps, capture+2shadows %s qps\n' "$round" "$w" "${side_q[$w,a]##* }" "${side_q[$w,b]##* }"
  done
done

mean() { awk '{s=0; for (i=1;i<=NF;i++) s+=$i; if (NF) printf "%.2f", s/NF; else printf "0"}' <<<"${1:-}"; }
# div A B: A/B to 3 places, or - without a B.
div() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b > 0) printf "%.3f", a/b; else print "-" }'; }
echo
printf '%-18s %-15s %10s %8s %10s %11s\n' workload target qps p95_ms vs_haproxy vs_tandem
for w in "${workloads[@]}"; do
  ha=$(mean "${qps[$w,haproxy]:-}")
  tq=$(mean "${qps[$w,tandem]:-}")
  for tgt in "${targets[@]}"; do
    q=$(mean "${qps[$w,$tgt]}")
    l=$(mean "${p95[$w,$tgt]}")
    printf '%-18s %-15s %10.0f %8.2f %10s %11s\n' "$w" "$tgt" "$q" "$l" "$(div "$q" "$ha")" "$(div "$q" "$tq")"
  done
done
echo
echo "CPU per statement of each proxy process, µs (exact, from /proc, user + system over the whole run)"
printf '%-18s' workload
for tgt in "${targets[@]}"; do [ -z "${pid_of[$tgt]:-}" ] || printf ' %15s' "$tgt"; done
echo
for w in "${workloads[@]}"; do
  printf '%-18s' "$w"
  for tgt in "${targets[@]}"; do [ -z "${pid_of[$tgt]:-}" ] || printf ' %15s' "$(mean "${proc[$w,$tgt]}")"; done
  echo
done
echo
echo "Where each statement's time goes on this machine ($(nproc) CPUs: busy + idle = CPUs x the run's length / statements), µs:"
echo "the proxy process, the server, everything else busy (sysbench, the kernel's threads, idle servers, a hypervisor's steal), and idle"
echo "CPU time; a proxy that lets the server and sysbench wait leaves the CPUs idle, and QPS falls though its own CPU may not"
printf '%-18s %-24s %8s %8s %8s %8s %8s\n' workload target proxy server rest idle total
for w in "${workloads[@]}"; do
  for tgt in "${targets[@]}"; do
    px=0; [ -z "${pid_of[$tgt]:-}" ] || px=$(mean "${proc[$w,$tgt]}")
    sv=$(mean "${srv[$w,$tgt]}"); bz=$(mean "${busy[$w,$tgt]}"); il=$(mean "${idle[$w,$tgt]}")
    printf '%-18s %-24s %8s %8s %8.2f %8s %8.2f\n' "$w" "$tgt" "$([ -n "${pid_of[$tgt]:-}" ] && echo "$px" || echo -)" "$sv" \
      "$(awk -v b="$bz" -v p="$px" -v s="$sv" 'BEGIN{print b - p - s}')" "$il" "$(awk -v b="$bz" -v i="$il" 'BEGIN{print b + i}')"
  done
done
if want tandem && want tandem@REF; then
  echo
  echo "tandem ($tandem) against tandem@REF (REF=$REF, $ref_rev), both relaying without capture:"
  echo "QPS and the proxy process's CPU per statement (µs), means of $ROUNDS rounds; per-round ratios"
  printf '%-18s %9s %9s %7s   %7s %7s %7s   %-23s %s\n' workload qps qps@REF ratio cpu cpu@REF ratio "qps ratio per round" "cpu ratio per round"
  # per_round A B: the ratio of each pair of A's and B's values.
  per_round() { awk -v a="$1" -v b="$2" 'BEGIN{ n = split(a, x, " "); split(b, y, " "); for (i = 1; i <= n; i++) printf "%s%.3f", (i > 1 ? " " : ""), x[i]/y[i] }'; }
  declare -A vq vc
  for w in "${workloads[@]}"; do
    a=$(mean "${qps[$w,tandem]}"); b=$(mean "${qps[$w,tandem@REF]}")
    ca=$(mean "${proc[$w,tandem]}"); cb=$(mean "${proc[$w,tandem@REF]}")
    vq[$w]=$(div "$a" "$b"); vc[$w]=$(div "$ca" "$cb")
    printf '%-18s %9.0f %9.0f %7s   %7s %7s %7s   %-23s %s\n' "$w" "$a" "$b" "${vq[$w]}" "$ca" "$cb" "${vc[$w]}" "$(per_round "${qps[$w,tandem]}" "${qps[$w,tandem@REF]}")" "$(per_round "${proc[$w,tandem]}" "${proc[$w,tandem@REF]}")"
  done
  echo
  for w in "${workloads[@]}"; do
    awk -v w="$w" -v q="${vq[$w]}" -v c="${vc[$w]}" 'BEGIN{
      mq = (q >= 0.98); mc = (c <= 1/0.98)
      printf "verdict %-18s qps tandem/tandem@REF %s %s 0.98, cpu per statement %s %s %.3f: %s\n", w, q, (mq ? ">=" : "<"), c, (mc ? "<=" : ">"), 1/0.98, (mq && mc ? "MET" : "NOT MET")
    }'
  done
fi
if [ -n "$pair" ]; then
echo
echo "CPU per statement, µs, capture on without and with 2 shadows: the whole proxy process (exact,"
echo "from /proc; the shadows run in worker processes), and the shadows' workers during the run"
printf '%-18s %8s %9s %6s   %8s\n' workload proxy "+shadows" ratio workers
for w in "${workloads[@]}"; do
  a=$(mean "${pcpu[$w,tandem+capture]}"); b=$(mean "${pcpu[$w,tandem+capture+2shadows]}")
  printf '%-18s %8s %9s %6s   %8s\n' "$w" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN{ if (a > 0) printf "%.3f", b/a; else print "-" }')" "$(mean "${wcpu[$w,tandem+capture+2shadows]}")"
done
echo
echo "Of the proxy process, from its CPU profile (sampled at 100 Hz: a run of SECS holds a few hundred"
echo "samples at most, so each figure is good to about ±5 % over the rounds): the client path (the goroutines serving"
echo "clients), of it the part outside system calls, and the rest of the process (capture commits,"
echo "the shadows' feeders, Go's scheduler and GC: an idle scheduler polls the network, so this grows"
echo "per statement as QPS falls), and of it the shadows' feeders: all the shadow work in the proxy"
printf '%-18s %8s %9s %6s   %8s %9s %6s   %8s %9s %6s   %8s\n' workload client "+shadows" ratio own "+shadows" ratio rest "+shadows" ratio feeders
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (a > 0) printf "%.3f", b/a; else print "-" }'; }
for w in "${workloads[@]}"; do
  a=$(mean "${cpu[$w,tandem+capture]}"); b=$(mean "${cpu[$w,tandem+capture+2shadows]}")
  ua=$(mean "${ucpu[$w,tandem+capture]}"); ub=$(mean "${ucpu[$w,tandem+capture+2shadows]}")
  oa=$(mean "${ocpu[$w,tandem+capture]}"); ob=$(mean "${ocpu[$w,tandem+capture+2shadows]}")
  printf '%-18s %8s %9s %6s   %8s %9s %6s   %8s %9s %6s   %8s\n' "$w" "$a" "$b" "$(ratio "$a" "$b")" "$ua" "$ub" "$(ratio "$ua" "$ub")" "$oa" "$ob" "$(ratio "$oa" "$ob")" "$(mean "${fcpu[$w,tandem+capture+2shadows]}")"
done
echo
echo "Side by side, at the same time on the same machine ($half threads each), CPU per statement, µs:"
echo "the capture-only proxy and the one with 2 shadows; the whole process (exact) and its client path"
printf '%-18s %8s %9s %6s   %8s %9s %6s\n' workload proxy "+shadows" ratio client "+shadows" ratio
for w in "${workloads[@]}"; do
  a=$(mean "${side_p[$w,a]}"); b=$(mean "${side_p[$w,b]}")
  ca=$(mean "${side_c[$w,a]}"); cb=$(mean "${side_c[$w,b]}")
  printf '%-18s %8s %9s %6s   %8s %9s %6s\n' "$w" "$a" "$b" "$(ratio "$a" "$b")" "$ca" "$cb" "$(ratio "$ca" "$cb")"
done
fi
# Issue #30's targets, one line each, against the references measured in
# this run: tandem+capture at least HAProxy's QPS and at most its CPU per
# statement (the whole process, from /proc), on both workloads; shadows add
# at most 5 % to the client path's CPU per statement (side by side: their
# servers share these CPUs, so QPS alone misleads).
# verdict NAME VALUE OP LIMIT: "verdict NAME VALUE OP LIMIT: MET" or NOT MET
# (or "not measured" without a VALUE).
verdict() {
  awk -v n="$1" -v v="$2" -v op="$3" -v l="$4" 'BEGIN{
    if (v !~ /^[0-9.]+$/) { printf "verdict %-60s not measured\n", n; exit }
    ok = (op == ">=" ? v + 0 >= l + 0 : v + 0 <= l + 0)
    printf "verdict %-60s %6.3f %s %s: %s\n", n, v, (ok ? op : (op == ">=" ? "<" : ">")), l, (ok ? "MET" : "NOT MET") }'
}
# The shadows' verdict needs only the two capturing proxies (TARGETS=
# "tandem+capture tandem+capture+2shadows" measures it alone).
if want tandem+capture && { want haproxy || [ -n "$pair" ]; }; then
  echo
  echo "Verdicts (issue #30; means of $ROUNDS rounds, references from this run; the direct figure is the machine's):"
  for w in "${workloads[@]}"; do
    printf '  %s direct: %.0f qps\n' "$w" "$(mean "${qps[$w,direct]}")"
  done
  # per_round_ratio A B: the ratio of each round's A to its B.
  per_round_ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ n = split(a, x, " "); split(b, y, " "); for (i = 1; i <= n; i++) printf "%s%.3f", (i > 1 ? " " : ""), x[i]/y[i] }'; }
  want haproxy && for w in "${workloads[@]}"; do
    verdict "$w qps tandem+capture / haproxy" "$(div "$(mean "${qps[$w,tandem+capture]}")" "$(mean "${qps[$w,haproxy]}")")" ">=" 1.0
    printf '  per round: %s\n' "$(per_round_ratio "${qps[$w,tandem+capture]}" "${qps[$w,haproxy]}")"
    noise 1.0 $(per_round_ratio "${qps[$w,tandem+capture]}" "${qps[$w,haproxy]}")
    verdict "$w cpu/stmt tandem+capture / haproxy" "$(div "$(mean "${proc[$w,tandem+capture]}")" "$(mean "${proc[$w,haproxy]}")")" "<=" 1.0
    printf '  per round: %s\n' "$(per_round_ratio "${proc[$w,tandem+capture]}" "${proc[$w,haproxy]}")"
    noise 1.0 $(per_round_ratio "${proc[$w,tandem+capture]}" "${proc[$w,haproxy]}")
  done
  if want tandem+capture@procs2 && want haproxy; then
    echo "  tandem+capture with --procs 2 (no target: the default is --procs 1 on 2 CPUs), against HAProxy and against --procs 1:"
    for w in "${workloads[@]}"; do
      printf '  %-18s qps %s (per round %s), cpu/stmt %s; against --procs 1: qps %s, cpu/stmt %s\n' "$w" \
        "$(div "$(mean "${qps[$w,tandem+capture@procs2]}")" "$(mean "${qps[$w,haproxy]}")")" "$(per_round_ratio "${qps[$w,tandem+capture@procs2]}" "${qps[$w,haproxy]}")" \
        "$(div "$(mean "${proc[$w,tandem+capture@procs2]}")" "$(mean "${proc[$w,haproxy]}")")" \
        "$(div "$(mean "${qps[$w,tandem+capture@procs2]}")" "$(mean "${qps[$w,tandem+capture]}")")" \
        "$(div "$(mean "${proc[$w,tandem+capture@procs2]}")" "$(mean "${proc[$w,tandem+capture]}")")"
    done
  fi
  if [ -n "$pair" ]; then
    for w in "${workloads[@]}"; do
      verdict "$w client cpu/stmt +2 shadows / capture only" "$(ratio "$(mean "${side_c[$w,a]}")" "$(mean "${side_c[$w,b]}")")" "<=" 1.05
      printf '  per round: %s\n' "$(per_round_ratio "${side_c[$w,b]}" "${side_c[$w,a]}")"
      noise 1.05 $(per_round_ratio "${side_c[$w,b]}" "${side_c[$w,a]}")
    done
  fi
fi
if want tandem+capture; then
echo
[ -z "$shadows" ] || curl -s "http://127.0.0.1:$s_metrics/metrics" | grep -E '^tandem_shadow_(lag_seconds|compared_total|up)' || true
kill -TERM "$capture_pid" && wait "$capture_pid" || true   # flushes and closes the capture
echo
"$tandem" inspect "$work/capture" | sed -n '1,9p'
fi
