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
