#!/usr/bin/env bash
# The channel's cost like for like (issue 33, item 7): `examples/net_bench.rs` of the last
# commit before the Noise channel (plain links, 04dbeb9) and of this tree, built each from its
# own work tree and run alternately on the same machine, RUNS times each (default 4), with
# NET_BENCH_ROUNDS=3. Then scripts/net-bench-plain.py pools every round's `nodes` and
# `ceiling` rows per build and prints the table of docs/measurements/net.md.
#
# usage: scripts/net-bench-plain.sh [RUNS] [OUT_DIR]
#   OUT_DIR  default target/net-bench-plain (the plain work tree goes in OUT_DIR/plain, and
#            is reused by the next run; `git worktree remove OUT_DIR/plain` drops it)
#
# About 25 minutes for 4 runs each on 2 cores, after the two builds. Run it on an otherwise
# idle machine: every ratio is taken within a round, but the two builds run minutes apart.
set -euo pipefail

runs="${1:-4}"
repo="$(cd "$(dirname "$0")/.." && pwd)"
out="${2:-$repo/target/net-bench-plain}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
plain_commit=04dbeb9
export CARGO_TERM_COLOR=never

if [ ! -d "$out/plain" ]; then
    git -C "$repo" worktree add --detach "$out/plain" "$plain_commit" >/dev/null
fi
(cd "$out/plain" && cargo build --release --example net_bench)
(cd "$repo" && cargo build --release --example net_bench)

for i in $(seq 1 "$runs"); do
    for build in plain channel; do
        case "$build" in
        plain) bin="$out/plain/target/release/examples/net_bench" ;;
        channel) bin="$repo/target/release/examples/net_bench" ;;
        esac
        echo "run $i: $build" >&2
        NET_BENCH_ROUNDS=3 "$bin" >"$out/$build-$i.log" 2>"$out/$build-$i.err"
    done
done
python3 "$repo/scripts/net-bench-plain.py" "$out"
