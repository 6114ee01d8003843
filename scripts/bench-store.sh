#!/usr/bin/env bash
# Store benchmarks against the targets: sustained appends of a
# sysbench oltp_read_write mix with synced group commit (>= 300k records/s),
# bytes on disk per record (<= 40), full scan (>= 1M records/s).
set -euo pipefail
go test ./store/ -run '^$' -bench 'Append$' -benchtime 5000000x -count 1 | tee /tmp/tandem-bench-store.txt
go test ./store/ -run '^$' -bench 'AppendParallel' -benchtime 5000000x -count 1 | tee -a /tmp/tandem-bench-store.txt
go test ./store/ -run '^$' -bench 'Scan' -benchtime 5x -count 1 | tee -a /tmp/tandem-bench-store.txt
awk '
  /BenchmarkAppend\/sync/ { for (i=1;i<=NF;i++) { if ($(i+1)=="records/s") a=$i; if ($(i+1)=="disk-B/record") d=$i } }
  /BenchmarkAppendParallel/ { for (i=1;i<=NF;i++) if ($(i+1)=="records/s") p=$i }
  /BenchmarkScan/ { for (i=1;i<=NF;i++) if ($(i+1)=="records/s") s=$i }
  END {
    printf "\n%-34s %14s %10s %8s\n", "store", "measured", "target", "ratio"
    printf "%-34s %14.0f %10s %8.2f\n", "append records/s (sync)", a, ">=300000", a/300000
    printf "%-34s %14.0f %10s %8.2f\n", "append records/s (8/core producers)", p, ">=300000", p/300000
    printf "%-34s %14.1f %10s %8.2f\n", "bytes on disk per record", d, "<=40", 40/d
    printf "%-34s %14.0f %10s %8.2f\n", "scan records/s", s, ">=1000000", s/1000000
  }' /tmp/tandem-bench-store.txt
