#!/usr/bin/env bash
# The demo: start an InnoDB and a MyRocks server, create the same table on
# each, and show what each server reports. Grows as Tandem's features land.
set -euo pipefail
tandem=${1:-bin/tandem}
dir=${TANDEM_DEMO_DIR:-.tandem/sandbox}

echo "== tandem sandbox up (InnoDB and MyRocks servers on free loopback ports)"
"$tandem" sandbox up --dir "$dir"
trap 'echo "== tandem sandbox down"; "$tandem" sandbox down --dir "$dir"' EXIT
eval "$("$tandem" sandbox env --dir "$dir")"

ddl="CREATE DATABASE IF NOT EXISTS demo; DROP TABLE IF EXISTS demo.t;
CREATE TABLE demo.t (id INT PRIMARY KEY, k INT, c CHAR(120), KEY k_1 (k));"
for p in INNODB ROCKSDB; do
  var="TANDEM_${p}_MARIADB"
  # shellcheck disable=SC2086 # the variable holds several arguments
  mariadb ${!var} -e "$ddl"
  echo
  echo "== the same CREATE TABLE (no ENGINE=) on the ${p,,} server:"
  # shellcheck disable=SC2086
  mariadb ${!var} -t -e "SELECT @@port AS port, VERSION() AS version, TABLE_NAME AS \`table\`, ENGINE AS engine, ROW_FORMAT AS row_format
    FROM information_schema.TABLES WHERE TABLE_SCHEMA='demo' AND TABLE_NAME='t'"
done
