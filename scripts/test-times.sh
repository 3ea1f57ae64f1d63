#!/usr/bin/env bash
# The fast tier's time per test binary: wall clock and CPU (user + system), one binary after
# the other as `cargo test --release` runs them, from a warm build. Prints a Markdown table,
# the longest binary first, then the totals and the floor the CPU sets on this machine's
# cores (CPU / cores: no schedule of these tests can be shorter).
#
#   scripts/test-times.sh > times.md
#
# Needs only bash and cargo.
set -euo pipefail
cd "$(dirname "$0")/.."
export LC_ALL=C   # `time` prints 30.5, not 30,5

build="$(cargo test --release --no-run --color never 2>&1)" || { printf '%s\n' "$build" >&2; exit 1; }
binaries="$(printf '%s\n' "$build" | sed -nE 's/^ *Executable (.*) \((.*)\)$/\2 \1/p')"
[ -n "$binaries" ] || { echo "error: cargo listed no test binary" >&2; exit 1; }
cores="$(getconf _NPROCESSORS_ONLN)"
TIMEFORMAT='%R %U %S'
rows=""
while read -r path name; do
  t="$( { time "$path" -q < /dev/null > /dev/null 2>&1; } 2>&1 )" || { echo "error: $name failed" >&2; exit 1; }
  rows+="$t ${name// /_}"$'\n'
done <<< "$binaries"
t="$( { time cargo test --release --doc -q > /dev/null 2>&1; } 2>&1 )" || { echo "error: the doc tests failed" >&2; exit 1; }
rows+="$t doc-tests"$'\n'

echo "| binary | wall (s) | CPU (s) |"
echo "|---|---:|---:|"
printf '%s' "$rows" | sort -rn | awk '$1 >= 0.5 { printf "| %s | %.1f | %.1f |\n", $4, $1, $2 + $3 }'
printf '%s' "$rows" | awk -v cores="$cores" '
  { wall += $1; cpu += $2 + $3; if ($1 < 0.5) small++ }
  END {
    printf "\n%d binaries under 0.5 s not listed. Total: %.0f s wall, %.0f s CPU; ", small, wall, cpu
    printf "the CPU alone needs %.0f s on %d cores.\n", cpu / cores, cores
  }'
