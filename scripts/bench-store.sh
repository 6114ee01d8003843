#!/usr/bin/env bash
# Store benchmarks against the targets: sustained appends of a
# sysbench oltp_read_write mix with synced group commit (>= 300k records/s),
# bytes on disk per record (<= 40), full scan (>= 1M records/s); and what
# encryption at rest (--encrypt-key-file) costs appends and the scan,
# measured side by side (a capture in clear and an encrypted one, in
# alternation, on the same machine at the same time): >= 0.9x.
set -euo pipefail
go test ./store/ -run '^$' -bench 'Append$' -benchtime 5000000x -count 1 | tee /tmp/tandem-bench-store.txt
go test ./store/ -run '^$' -bench 'AppendParallel' -benchtime 5000000x -count 1 | tee -a /tmp/tandem-bench-store.txt
go test ./store/ -run '^$' -bench '^BenchmarkScan$' -benchtime 5x -count 1 | tee -a /tmp/tandem-bench-store.txt
go test ./store/ -run '^$' -bench 'EncryptedAppend' -benchtime 2000000x -count 1 | tee -a /tmp/tandem-bench-store.txt
go test ./store/ -run '^$' -bench 'EncryptedScan' -benchtime 5x -count 1 | tee -a /tmp/tandem-bench-store.txt
awk '
  function field(unit,   i) { for (i=1;i<=NF;i++) if ($(i+1)==unit) return $i }
  /BenchmarkAppend\/sync/ { a=field("records/s"); d=field("disk-B/record") }
  /BenchmarkAppendParallel/ { p=field("records/s") }
  /BenchmarkScan-/ { s=field("records/s") }
  /BenchmarkEncryptedAppend/ { ap=field("plain-records/s"); ae=field("encrypted-records/s"); de=field("encrypted-disk-B/record") }
  /BenchmarkEncryptedScan/ { sp=field("plain-records/s"); se=field("encrypted-records/s") }
  END {
    printf "\n%-34s %14s %10s %8s\n", "store", "measured", "target", "ratio"
    printf "%-34s %14.0f %10s %8.2f\n", "append records/s (sync)", a, ">=300000", a/300000
    printf "%-34s %14.0f %10s %8.2f\n", "append records/s (8/core producers)", p, ">=300000", p/300000
    printf "%-34s %14.1f %10s %8.2f\n", "bytes on disk per record", d, "<=40", 40/d
    printf "%-34s %14.0f %10s %8.2f\n", "scan records/s", s, ">=1000000", s/1000000
    printf "\n%-34s %14s %14s %8s %8s\n", "encrypted at rest (side by side)", "in clear", "encrypted", "ratio", "target"
    printf "%-34s %14.0f %14.0f %8.2f %8s\n", "append records/s (sync)", ap, ae, ae/ap, ">=0.90"
    printf "%-34s %14.0f %14.0f %8.2f %8s\n", "scan records/s", sp, se, se/sp, ">=0.90"
    printf "%-34s %14.1f %14.1f %8.2f\n", "bytes on disk per record", d, de, de/d
  }' /tmp/tandem-bench-store.txt
