#!/usr/bin/env bash
# Synth and prepare benchmarks: synth statements/s into a capture (target
# >= 1,000,000), and tandem prepare against sysbench prepare with the same
# tables, size and threads on one sandboxed InnoDB server, alternating.
#   TABLES (4), SIZE (100000), THREADS (4), ROUNDS (2)
set -euo pipefail
tandem=${1:-bin/tandem}
TABLES=${TABLES:-4}; SIZE=${SIZE:-100000}; THREADS=${THREADS:-4}; ROUNDS=${ROUNDS:-2}
work=$(mktemp -d /tmp/tandem-bench-synth.XXXXXX)
trap '"$tandem" sandbox down --dir "$work/sandbox" --purge >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

synth_rate=$(go test ./capture/synth/ -run '^$' -bench 'Synth$' -benchtime 5000000x -count 1 | awk '/BenchmarkSynth/ {for (i=1;i<=NF;i++) if ($(i+1)=="statements/s") print $i}')

"$tandem" sandbox up innodb --dir "$work/sandbox" >/dev/null
eval "$("$tandem" sandbox env --dir "$work/sandbox")"
mariadb $TANDEM_INNODB_MARIADB -e "CREATE DATABASE sbtest"
sb=(oltp_read_write --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$TANDEM_INNODB_PORT" --mysql-user=root --mysql-db=sbtest --tables="$TABLES" --table-size="$SIZE" --threads="$THREADS")
tg="innodb=root@tcp(127.0.0.1:$TANDEM_INNODB_PORT)/sbtest"
now() { date +%s.%N; }
sys_total=0; tan_total=0
for r in $(seq "$ROUNDS"); do
  t0=$(now); sysbench "${sb[@]}" prepare >/dev/null; t1=$(now)
  sysbench "${sb[@]}" cleanup >/dev/null
  t2=$(now); "$tandem" prepare --tables "$TABLES" --table-size "$SIZE" --threads "$THREADS" --target "$tg" >/dev/null; t3=$(now)
  "$tandem" prepare --cleanup --tables "$TABLES" --target "$tg" >/dev/null
  s=$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}'); t=$(awk -v a="$t2" -v b="$t3" 'BEGIN{print b-a}')
  printf 'round %d: sysbench prepare %.2fs, tandem prepare %.2fs\n' "$r" "$s" "$t"
  sys_total=$(awk -v a="$sys_total" -v b="$s" 'BEGIN{print a+b}'); tan_total=$(awk -v a="$tan_total" -v b="$t" 'BEGIN{print a+b}')
done
echo
printf '%-44s %14s %12s %8s\n' measure measured target ratio
printf '%-44s %14.0f %12s %8.2f\n' "synth statements/s (oltp_read_write)" "$synth_rate" ">=1000000" "$(awk -v a="$synth_rate" 'BEGIN{print a/1000000}')"
printf '%-44s %14.2f %12s %8.2f\n' "prepare seconds, sysbench / tandem ($TABLES x $SIZE, $THREADS thr)" "$(awk -v a="$tan_total" -v n="$ROUNDS" 'BEGIN{print a/n}')" ">=1.00x" "$(awk -v a="$sys_total" -v b="$tan_total" 'BEGIN{print a/b}')"
