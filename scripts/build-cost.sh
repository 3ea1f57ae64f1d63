#!/usr/bin/env bash
# What depending on lkcs costs a library user: builds a scratch program
#     fn main() { let _ = lkcs::Topology::ring(3); }
# against an lkcs checkout with a given feature set, from a clean target directory, and prints
# the number of crates it pulls in and the wall and CPU time of its release build.
#
# usage: scripts/build-cost.sh [FEATURES] [LKCS_DIR]
#   FEATURES  default       lkcs = { path = ... }                        (what `cargo add` gives)
#             none          lkcs = { path = ..., default-features = false }
#             a,b,...       lkcs = { path = ..., default-features = false, features = [a, b] }
#             (default: none)
#   LKCS_DIR  the lkcs checkout to depend on (default: this repository)
#
# The scratch crate and its target directory live in a fresh temporary directory (removed at the
# end; KEEP=1 keeps it), so nothing in the repository's target/ is touched. The lkcs Cargo.lock is
# copied in, so the same dependency versions are built. Dependencies are fetched before the clock
# starts. CPU time (user + sys) is the figure least sensitive to other load on the machine.
set -euo pipefail

features="${1:-none}"
lkcs_dir="$(cd "${2:-$(dirname "$0")/..}" && pwd)"
export CARGO_TERM_COLOR=never

case "$features" in
default) dep="{ path = \"$lkcs_dir\" }" ;;
none) dep="{ path = \"$lkcs_dir\", default-features = false }" ;;
*)
    list="$(printf '%s' "$features" | sed 's/[^,][^,]*/"&"/g; s/,/, /g')"
    dep="{ path = \"$lkcs_dir\", default-features = false, features = [$list] }"
    ;;
esac

scratch="$(mktemp -d "${TMPDIR:-/tmp}/lkcs-build-cost.XXXXXX")"
if [ "${KEEP:-0}" = 1 ]; then
    echo "scratch crate kept in $scratch"
else
    trap 'rm -rf "$scratch"' EXIT
fi
mkdir -p "$scratch/src"
cat >"$scratch/Cargo.toml" <<EOF
[package]
name = "lkcs-build-cost"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
lkcs = $dep

[workspace]
EOF
echo 'fn main() { let _ = lkcs::Topology::ring(3); }' >"$scratch/src/main.rs"
if [ -f "$lkcs_dir/Cargo.lock" ]; then
    cp "$lkcs_dir/Cargo.lock" "$scratch/Cargo.lock"
fi
export CARGO_TARGET_DIR="$scratch/target"
cd "$scratch"
cargo fetch --quiet

# distinct packages in the program's normal dependency graph (the program itself excluded)
crates="$(cargo tree -e normal --prefix none \
    | sed 's/ (\*)$//; s/ (proc-macro)$//; s/ (\/.*)$//' \
    | sort -u | grep -vc '^lkcs-build-cost ')"

log="$scratch/build.log"
timing="$scratch/time.txt"
/usr/bin/time -f '%e %U %S' -o "$timing" cargo build --release >"$log" 2>&1 || {
    cat "$log" >&2
    exit 1
}
read -r wall user sys <"$timing"
compiled="$(grep -c '^ *Compiling ' "$log")"
cpu="$(echo "$user $sys" | awk '{ printf "%.2f", $1 + $2 }')"

echo "lkcs:         $lkcs_dir ($(git -C "$lkcs_dir" describe --always --dirty 2>/dev/null || echo '?'))"
echo "dependency:   lkcs = $dep"
echo "crates:       $crates in the dependency graph (cargo tree -e normal), $compiled compiled (clean build, build deps included)"
echo "release build: wall ${wall}s, CPU ${cpu}s (user ${user}s + sys ${sys}s) on $(nproc) cores"
