#!/usr/bin/env bash
# Build a profile-guided (PGO) flashkit: an instrumented build runs a training set of
# simulations and storage-mode commands, LLVM merges the profiles, and a second build
# lays the code out by them. Simulation results are unchanged (PGO reorders and inlines;
# it does not change what the code computes: scripts/pgo-build.sh --check compares the
# `sim --json` and `reproduce` outputs of both builds); the simulator runs faster
# (docs/results.md, "Profile-guided build").
#
#   scripts/pgo-build.sh            # -> target/pgo/flashkit
#   scripts/pgo-build.sh --check    # also compare results with a plain release build
#   scripts/pgo-build.sh --native   # also -C target-cpu=native: runs only on CPUs like this one
#   scripts/pgo-build.sh --train-with target/release/flashkit   # only the training runs
#
# The training set is deliberately not `flashkit bench`'s own run: it is the flagship
# `sim` at a smaller size, Table 4 and the DAC figure at reduced scale, a NAND preset in
# simulation mode, and the FMS in storage mode on an image file with a short torture.
# Needs llvm-profdata matching rustc's LLVM: the `llvm-tools` rustup component, which
# this script adds when it is missing (rustup must reach its distribution server once).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
check=0
native=
train_with=
while [ $# -gt 0 ]; do
    a=$1
    shift
    case "$a" in
        --check) check=1 ;;
        --native) native="-Ctarget-cpu=native " ;;
        --train-with)
            train_with=${1:?--train-with needs a flashkit binary}
            shift
            ;;
        -h | --help)
            sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *)
            echo "pgo-build.sh: unknown argument '$a' (expected --check, --native, --train-with BINARY or --help)" >&2
            exit 2
            ;;
    esac
done

step() { printf '\n==> %s\n' "$*"; }

# The training set: run every command with the flashkit binary $1 in directory $2.
train() {
    local fk=$1 dir=$2
    (
        cd "$dir"
        set -x
        "$fk" sim --written 48MiB >/dev/null
        "$fk" sim --workload random --workload sequential --written 24MiB --policy greedy,cat >/dev/null
        "$fk" sim --regions 1,4 --region-threshold none,30m --written 24MiB --policy adaptive,greedy >/dev/null
        "$fk" reproduce chiang1999-table4 --scale 0.05 >/dev/null
        "$fk" reproduce dac-fig12 --scale 0.05 >/dev/null
        "$fk" sim --device mlc2-2g --block-size 2KiB --written 64MiB --policy greedy,cat >/dev/null
        "$fk" trace generate --format fio --workload multimedia --requests 3000 --space 20MiB mm.fio >/dev/null
        "$fk" sim --device nandsim-256m --block-size 1KiB --workload trace:mm.fio --policy greedy >/dev/null
        rm -f card.img
        "$fk" nand format card.img --device intel-series2plus-24m >/dev/null
        "$fk" fms format card.img >/dev/null
        head -c 4194304 /dev/urandom >in.bin
        for off in 0 1048576 2097152 0 3145728 1048576; do
            "$fk" fms write card.img --offset "$off" --input in.bin >/dev/null
        done
        "$fk" fms read card.img --offset 0 --length 4MiB --output out.bin >/dev/null
        "$fk" torture --target fms --device nandsim-256m --cuts 200 --seed 3 >/dev/null
    )
}


if [ -n "$train_with" ]; then
    if [ ! -x "$train_with" ]; then
        echo "pgo-build.sh: --train-with: $train_with: no flashkit binary there" >&2
        exit 1
    fi
    # Only the training runs, with a given binary (scripts/test.sh keeps them working).
    dir=$(mktemp -d)
    trap 'rm -rf "$dir"' EXIT
    train "$(realpath "$train_with")" "$dir"
    echo "pgo-build.sh: the training runs passed with $train_with"
    exit 0
fi

host=$(rustc -vV | sed -n 's/^host: //p')
sysroot=$(rustc --print sysroot)
profdata="$sysroot/lib/rustlib/$host/bin/llvm-profdata"
if [ ! -x "$profdata" ]; then
    if ! command -v rustup >/dev/null 2>&1; then
        echo "pgo-build.sh: $profdata is missing and there is no rustup to add the llvm-tools component" >&2
        exit 1
    fi
    step "adding the llvm-tools rustup component (llvm-profdata)"
    if ! rustup component add llvm-tools; then
        echo "pgo-build.sh: could not add the llvm-tools component; PGO needs llvm-profdata for rustc's LLVM ($(rustc -vV | sed -n 's/^LLVM version: //p'))" >&2
        exit 1
    fi
fi

work="$root/target/pgo-work"
out="$root/target/pgo"
rm -rf "$work"
mkdir -p "$work/raw" "$out"

step "instrumented build"
RUSTFLAGS="$native-Cprofile-generate=$work/raw" CARGO_TARGET_DIR="$work/target" \
    cargo build --release -p flashkit
fk="$work/target/release/flashkit"

step "training runs"
train "$fk" "$work"

step "merging the profiles"
"$profdata" merge -o "$work/merged.profdata" "$work/raw"

step "optimised build"
RUSTFLAGS="$native-Cprofile-use=$work/merged.profdata -Cllvm-args=-pgo-warn-missing-function=false" \
    CARGO_TARGET_DIR="$work/target-use" cargo build --release -p flashkit
cp "$work/target-use/release/flashkit" "$out/flashkit"
echo "pgo-build.sh: built $out/flashkit"

if [ "$check" -eq 1 ]; then
    step "comparing results with a plain release build"
    cargo build --release -p flashkit
    plain="$root/target/release/flashkit"
    for args in "sim --json" "reproduce chiang1999-table4 --scale 0.05 --json" "reproduce dac-fig12 --scale 0.05 --json"; do
        # shellcheck disable=SC2086
        a=$("$plain" $args | grep -v '"ram_bytes"')
        # shellcheck disable=SC2086
        b=$("$out/flashkit" $args | grep -v '"ram_bytes"')
        if [ "$a" != "$b" ]; then
            echo "pgo-build.sh: 'flashkit $args' differs between the plain and the PGO build" >&2
            exit 1
        fi
        echo "identical: flashkit $args"
    done
fi
