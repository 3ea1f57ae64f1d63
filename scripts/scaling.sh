#!/usr/bin/env bash
# The scaling table of docs/measurements/scale.md: GCS (grid and majority coteries) from
# n = 16 to 10,000 and LMUTIN on tori from 16 to 99,856 processes, one `lkcs simulate` per
# run, with its wall time and peak memory (GNU time's maximum resident set size).
#
#   scripts/scaling.sh            # every row (about half an hour on 2 cores: GCS at 4,096
#                                 # and 10,000 processes, LMUTIN up to torus:316x316)
#   scripts/scaling.sh quick      # n <= 1,024 only (about 3 minutes)
# The majority coterie's |Q| = n/2 + 1: at 4,096 processes only the sequential run is made
# (the concurrent one at 1,024 takes about 2 minutes and grew about 90x from 256), and at
# 10,000 the coterie is refused (n·|Q| above the limit): the row prints the error.
# A run that takes more than LIMIT seconds (default 1800) is stopped and its row says so; a
# run that fails (refused, unsafe, stalled) prints its first line of stderr in its row.
# COTERIES (default "grid majority") and SIDES (default "4 8 16 32 100 200 300 316"; empty:
# no LMUTIN rows) select rows, e.g. COTERIES=majority SIDES= scripts/scaling.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
lkcs="${CARGO_TARGET_DIR:-target}/release/lkcs"
quick="${1:-}"
limit="${LIMIT:-1800}"
timer=""
if [ -x /usr/bin/time ]; then timer="/usr/bin/time -f %e:%M -o target/scaling.time"; fi

# runs lkcs with the given arguments; prints "json<TAB>seconds<TAB>MiB", or
# "error: ...<TAB>-<TAB>-" when lkcs refuses the input or runs out of time
run() {
  local start end json code=0
  start=$(date +%s.%N)
  json=$($timer timeout "$limit" "$lkcs" simulate "$@" --json 2>target/scaling.err) || code=$?
  end=$(date +%s.%N)
  if [ "$code" = 124 ]; then
    printf 'error: not finished within %s s\t-\t-\n' "$limit"
    return
  elif [ "$code" != 0 ]; then
    # refused (exit 2: "error: ..."), or unsafe, deadlocked or stalled (exit 1)
    local secs="-" mib="-"
    if [ -n "$timer" ]; then
      IFS=: read -r secs kib < <(tail -n 1 target/scaling.time)
      mib=$((kib / 1024))
    fi
    printf 'error: %s\t%s\t%s\n' "$(head -n 1 target/scaling.err | sed 's/^error: //')" "$secs" "$mib"
    return
  fi
  if [ -n "$timer" ]; then
    IFS=: read -r secs kib < target/scaling.time
    printf '%s\t%s\t%s\n' "$json" "$secs" "$((kib / 1024))"
  else
    printf '%s\t%s\t%s\n' "$json" "$(echo "$end - $start" | bc)" "n/a"
  fi
}

# a field of a JSON report (through stdin: a large run's report exceeds an argument's limit)
field() { printf '%s' "$1" | python3 -c "import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))" "$2"; }

echo "### GCS, l = n/4, k = 3n/4, Maekawa as mx, unit delays"
echo
echo "| coterie | n | max |Q| | sequential msgs/pair | ÷ |Q| | concurrent msgs/pair mean / max | wall s (seq / conc) | peak MiB (seq / conc) | safe |"
echo "|---|---|---|---|---|---|---|---|---|"
for coterie in ${COTERIES:-grid majority}; do
  for n in 16 64 256 1024 4096 10000; do
    if [ -n "$quick" ] && [ "$n" -gt 1024 ]; then continue; fi
    if [ "$coterie" = grid ]; then
      r=$(python3 -c "import math; print(math.ceil(math.sqrt($n)))")
      q=$((2 * r - 1))
    else
      q=$((n / 2 + 1))
    fi
    args=(--algorithm gcs --topology "complete:$n" --l $((n / 4)) --k $((3 * n / 4)) --coterie "$coterie" --delay unit)
    IFS=$'\t' read -r seq s_secs s_mib < <(run "${args[@]}" --workload sequential --pairs 1)
    if [[ "$seq" == error:* ]]; then
      echo "| $coterie | $n | $q | \`${seq#error: }\` | | | $s_secs / – | $s_mib / – | |"
      continue
    fi
    conc_pairs=2
    if [ "$n" -ge 4096 ]; then conc_pairs=1; fi
    if [ "$coterie" = majority ] && [ "$n" -gt 1024 ]; then
      conc="not run"; c_secs="–"; c_mib="–"
    else
      IFS=$'\t' read -r conc c_secs c_mib < <(run "${args[@]}" --workload concurrent --pairs "$conc_pairs")
    fi
    mpp=$(field "$seq" "d['messages_per_pair']['mean']")
    ratio=$(python3 -c "print(f'{$mpp / $q:.2f}')")
    safe=$(field "$seq" "'yes' if d['safety_violations'] == 0 else 'NO'")
    if [[ "$conc" == "not run" ]]; then
      cm="not run"; safe2="–"
    elif [[ "$conc" == error:* ]]; then
      cm="\`${conc#error: }\`"; safe2="–"
    else
      cm=$(field "$conc" "f\"{d['messages_per_pair']['mean']:.0f} / {d['messages_per_pair']['max']:.0f}\"")
      safe2=$(field "$conc" "'yes' if d['safety_violations'] == 0 else 'NO'")
    fi
    echo "| $coterie | $n | $q | $mpp | $ratio | $cm | $s_secs / $c_secs | $s_mib / $c_mib | $safe / $safe2 |"
  done
done
echo
echo "### LMUTIN, l = 2, concurrent, unit delays, 2 pairs per process (torus:4x4 to 316x316)"
echo
echo "| torus | n | events | wall s | events/s | peak MiB | safe |"
echo "|---|---|---|---|---|---|---|"
for side in ${SIDES-4 8 16 32 100 200 300 316}; do
  if [ -n "$quick" ] && [ "$side" -gt 32 ]; then continue; fi
  IFS=$'\t' read -r out secs mib < <(run --algorithm lmutin --topology "torus:${side}x${side}" --l 2 --pairs 2)
  if [[ "$out" == error:* ]]; then
    echo "| ${side}x${side} | $((side * side)) | ${out#error: } | | | | |"
    continue
  fi
  events=$(field "$out" "d['events']")
  rate=$(python3 -c "print(f'{$events / max($secs, 0.01) / 1e6:.2f} M')")
  safe=$(field "$out" "'yes' if d['safety_violations'] == 0 else 'NO'")
  echo "| ${side}x${side} | $((side * side)) | $events | $secs | $rate | $mib | $safe |"
done
