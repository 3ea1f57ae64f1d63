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
        left = substr($3, RSTART + 23, RLENGTH - 23) + 0
        match($3, /worst wait [0-9]+/)
        worst = substr($3, RSTART + 11, RLENGTH - 11) + 0
        match($3, /^[0-9]+ processes/)
        n = substr($3, 1, RLENGTH - 10) + 0
        accepted = ($3 ~ /Lkcs::build accepts/)
        ok = (left <= 2000)
        if (ok) { live++ } else { starved++; bad[t[1]]++ }
        if (accepted) { acc++; if (!ok) accbad++ }
        if (ok && worst > maxwait) maxwait = worst
        if (ok && worst / n > maxrel) maxrel = worst / n
    }
    END {
        printf "live %d, starved %d, no move %d, refused %d\n", live, starved, stuck, refused > "/dev/stderr"
        for (f in run) printf "  %s: %d of %d starved or stuck\n", f, bad[f], run[f] > "/dev/stderr"
        printf "  accepted by Lkcs::build: %d, of them starved or stuck %d\n", acc, accbad > "/dev/stderr"
        printf "  worst wait of a served run: %d steps, %.1f n\n", maxwait, maxrel > "/dev/stderr"
    }'
