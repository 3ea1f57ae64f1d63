#!/bin/sh
# The configurations FIRST..FIRST+COUNT-1 of the LKCS liveness sweep under the design model
# (examples/lkcs_model.rs) in MODE (plain, restore or inherit), 20,000 steps each: one CSV
# row per configuration on stdout, a summary on stderr. A request still waiting after 2,000
# steps at the end counts as starved.
#
#   cargo build --release --example lkcs_liveness --example lkcs_model
#   scripts/lkcs-model.sh 0 2000 inherit > model.csv
set -eu
first=${1:?usage: scripts/lkcs-model.sh FIRST COUNT MODE}
count=${2:?usage: scripts/lkcs-model.sh FIRST COUNT MODE}
mode=${3:?usage: scripts/lkcs-model.sh FIRST COUNT MODE}
bin=${BIN:-target/release/examples}
i=$first
while [ "$i" -lt $((first + count)) ]; do
    command=$("$bin/lkcs_liveness" replay "$i") # writes /tmp/lkcs-$i.json
    topology=$(echo "$command" | sed 's/.*--topology \([^ ]*\).*/\1/')
    out=$("$bin/lkcs_model" "$topology" "/tmp/lkcs-$i.json" 20000 "$mode" | tail -1 | tr ',' ';')
    echo "$i,$topology,$out"
    i=$((i + 1))
done | awk -F, '
    { print }
    $3 ~ /^refused/ { refused++; next }
    { split($2, t, ":"); run[t[1]]++ }
    $3 ~ /^no move/ { stuck++; bad[t[1]]++; next }
    {
        match($3, /oldest request waiting [0-9]+/)
        w = substr($3, RSTART + 23, RLENGTH - 23) + 0
        if (w > 2000) { starved++; bad[t[1]]++ } else { live++ }
    }
    END {
        printf "live %d, starved %d, no move %d, refused %d\n", live, starved, stuck, refused > "/dev/stderr"
        for (f in run) printf "  %s: %d of %d starved or stuck\n", f, bad[f], run[f] > "/dev/stderr"
    }'
