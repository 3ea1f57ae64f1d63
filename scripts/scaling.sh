#!/usr/bin/env bash
# The scaling table of docs/measurements/scale.md: GCS (grid and majority coteries) from
# n = 16 to 10,000 and LMUTIN on tori from 16 to 90,000 processes, one `lkcs simulate` per
# row, with its wall time and peak memory (GNU time's maximum resident set size).
#
#   scripts/scaling.sh            # every row (tens of minutes on 2 cores: GCS at 4,096 and
#                                 # 10,000 processes, LMUTIN up to 90,000)
#   scripts/scaling.sh quick      # n <= 1,024 only (about 2 minutes)
# The majority coterie stops at 1,024 processes: its |Q| = n/2 + 1 makes a concurrent run at
# 1,024 take about 2 minutes already, and it grows with n^2.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
lkcs=target/release/lkcs
quick="${1:-}"
timer=""
if [ -x /usr/bin/time ]; then timer="/usr/bin/time -f %e:%M -o target/scaling.time"; fi

# runs lkcs with the given arguments; prints "json<TAB>seconds<TAB>MiB"
run() {
  local start end json
  start=$(date +%s.%N)
  json=$($timer "$lkcs" simulate "$@" --json)
  end=$(date +%s.%N)
  if [ -n "$timer" ]; then
    IFS=: read -r secs kib < target/scaling.time
    printf '%s\t%s\t%s\n' "$json" "$secs" "$((kib / 1024))"
  else
    printf '%s\t%s\t%s\n' "$json" "$(echo "$end - $start" | bc)" "n/a"
  fi
}

field() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print(eval(sys.argv[2]))" "$1" "$2"; }

echo "### GCS, l = n/4, k = 3n/4, Maekawa as mx, unit delays"
echo
echo "| coterie | n | max |Q| | sequential msgs/pair | ÷ |Q| | concurrent msgs/pair mean / max | wall s (seq / conc) | peak MiB (seq / conc) | safe |"
echo "|---|---|---|---|---|---|---|---|---|"
for coterie in grid majority; do
  for n in 16 64 256 1024 4096 10000; do
    if [ -n "$quick" ] && [ "$n" -gt 1024 ]; then continue; fi
    if [ "$coterie" = majority ] && [ "$n" -gt 1024 ]; then continue; fi
    if [ "$coterie" = grid ]; then
      r=$(python3 -c "import math; print(math.ceil(math.sqrt($n)))")
      q=$((2 * r - 1))
    else
      q=$((n / 2 + 1))
    fi
    args=(--algorithm gcs --topology "complete:$n" --l $((n / 4)) --k $((3 * n / 4)) --coterie "$coterie" --delay unit)
    IFS=$'\t' read -r seq s_secs s_mib < <(run "${args[@]}" --workload sequential --pairs 1)
    conc_pairs=2
    if [ "$n" -ge 4096 ]; then conc_pairs=1; fi
    IFS=$'\t' read -r conc c_secs c_mib < <(run "${args[@]}" --workload concurrent --pairs "$conc_pairs")
    mpp=$(field "$seq" "d['messages_per_pair']['mean']")
    ratio=$(python3 -c "print(f'{$mpp / $q:.2f}')")
    cm=$(field "$conc" "f\"{d['messages_per_pair']['mean']:.0f} / {d['messages_per_pair']['max']:.0f}\"")
    safe=$(field "$seq" "'yes' if d['safety_violations'] == 0 else 'NO'")
    safe2=$(field "$conc" "'yes' if d['safety_violations'] == 0 else 'NO'")
    echo "| $coterie | $n | $q | $mpp | $ratio | $cm | $s_secs / $c_secs | $s_mib / $c_mib | $safe / $safe2 |"
  done
done
echo
echo "### LMUTIN, l = 2, concurrent, unit delays, 2 pairs per process"
echo
echo "| torus | n | events | wall s | events/s | peak MiB | safe |"
echo "|---|---|---|---|---|---|---|"
for side in 4 8 16 32 100 200 300; do
  if [ -n "$quick" ] && [ "$side" -gt 32 ]; then continue; fi
  IFS=$'\t' read -r out secs mib < <(run --algorithm lmutin --topology "torus:${side}x${side}" --l 2 --pairs 2)
  events=$(field "$out" "d['events']")
  rate=$(python3 -c "print(f'{$events / max($secs, 0.01) / 1e6:.2f} M')")
  safe=$(field "$out" "'yes' if d['safety_violations'] == 0 else 'NO'")
  echo "| ${side}x${side} | $((side * side)) | $events | $secs | $rate | $mib | $safe |"
done
