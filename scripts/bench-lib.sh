# Sourced by the bench scripts: a work directory under /tmp for bench NAME,
# removed on exit with the sandbox in it and every process in pids; and
# free_port, a loopback port nothing listens on. Needs $tandem.
bench_work() {
  work=$(mktemp -d "/tmp/tandem-bench-$1.XXXXXX")
  pids=()
  trap bench_cleanup EXIT
}

bench_cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  "$tandem" sandbox down --dir "$work/sandbox" --purge >/dev/null 2>&1 || true
  rm -rf "$work"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# ticks PID...: CPU time (user + system) of the processes, in clock ticks
# (a process gone counts 0). The fields after the command's name, which
# may hold spaces.
ticks() { local n=0 p f; for p in "$@"; do f=($(sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null)) || continue; n=$((n + f[11] + f[12])); done; echo "$n"; }

# noise LIMIT V...: one line under a verdict on the mean of V... (ratios
# measured side by side, one a round or a pair): the 95 % interval of that
# mean (Student's t on their spread) and whether the interval holds LIMIT.
# These machines drift by half within a minute; a verdict whose interval
# holds its target is not settled by the run that printed it, either way.
noise() {
  local limit=$1; shift
  printf '%s\n' "$@" | awk -v l="$limit" '{ v[NR] = $1; s += $1 } END {
    n = NR
    if (n < 2) { printf "  (one measurement: no interval)\n"; exit }
    m = s / n
    for (i = 1; i <= n; i++) ss += (v[i] - m) ^ 2
    split("12.706 4.303 3.182 2.776 2.571 2.447 2.365 2.306 2.262 2.228 2.201 2.179 2.160 2.145 2.131", t, " ")
    h = (n - 1 <= 15 ? t[n - 1] : 2.0) * sqrt(ss / (n - 1) / n)
    printf "  95 %% interval of the mean of these %d ratios: %.3f to %.3f: %s\n", n, m - h, m + h,
      (m - h <= l && l <= m + h ? "holds " l ", not settled by this run" : "settled") }'
}
