#!/bin/sh
# For every failed run of a liveness sweep (the CSV of examples/lkcs_liveness.rs) whose
# instance has at most 24 processes: the exact configuration graph of the instance and where
# the run went in it (examples/lkcs_oracle.rs). One markdown row per run.
#
#   cargo build --release --example lkcs_liveness --example lkcs_oracle
#   scripts/lkcs-oracle.sh runs.csv
set -eu
csv=${1:?usage: scripts/lkcs-oracle.sh runs.csv}
bin=${BIN:-target/release/examples}
echo "| index | topology | bounds | delay | leader | census | run |"
echo "|---|---|---|---|---|---|---|"
# index,family,topology,bounds,delay,leader,outcome,... (the command, with the run's
# --max-events, is the last column)
awk -F, 'NR > 1 && $7 == "failed" { print $1, $3, $4, $5, $6, $NF }' "$csv" |
while read -r index topology bounds delay leader command; do
    n=$(echo "$topology" | awk -F'[:x]' '
        $1 == "random" || $1 == "complete" { print $2; next }
        { print $2 * $3 }')
    [ "$n" -le 24 ] || continue
    "$bin/lkcs_liveness" replay "$index" > /dev/null # writes /tmp/lkcs-$index.json
    seed=$(echo "$command" | sed 's/.*--seed \([0-9]*\).*/\1/')
    max=$(echo "$command" | sed 's/.*--max-events \([0-9]*\).*/\1/')
    out=$("$bin/lkcs_oracle" "$topology" "/tmp/lkcs-$index.json" "$leader" "$delay" "$seed" "$max")
    census=$(echo "$out" | sed -n 1p | sed 's/^[^ ]*: //')
    run=$(echo "$out" | sed -n 2p | sed 's/^run: //')
    echo "| $index | $topology | $bounds | $delay | $leader | $census | $run |"
done
