#!/usr/bin/env bash
# Run every check the project relies on: formatting, lints, and the whole test suite.
# Installs the test-only system packages it needs when they are missing (as root, via
# apt-get), and the rustfmt/clippy components via rustup.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n==> %s\n' "$*"; }

# System packages the tests need, as "command:package" (command may be empty for a
# library-only package, which is then checked with dpkg). python3 runs the smoke run of
# scripts/torture-sweep.py; the `blockdev mount` tests (crates/cli/tests/blockdev.rs)
# mount with FUSE (fusermount3 unmounts) and run mkfs.fat/fsck.fat, mtools and fio on the
# served image (fallocate comes with util-linux).
TEST_PACKAGES=("python3:python3" "fusermount3:fuse3" "mkfs.fat:dosfstools" "mcopy:mtools"
    "fio:fio" "fallocate:util-linux")

apt_updated=0
# need_pkg COMMAND PACKAGE: install PACKAGE unless COMMAND (or, without one, the package)
# is already present.
need_pkg() {
    local cmd=$1 pkg=$2
    if [ -n "$cmd" ] && command -v "$cmd" >/dev/null 2>&1; then
        return 0
    fi
    if command -v dpkg >/dev/null 2>&1 && dpkg -s "$pkg" >/dev/null 2>&1; then
        return 0
    fi
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "test.sh: missing system package '$pkg'; install it (e.g. sudo apt-get install -y $pkg) and rerun" >&2
        exit 1
    fi
    echo "installing $pkg"
    if [ "$apt_updated" -eq 0 ]; then
        apt-get update
        apt_updated=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y "$pkg"
}

step "checking prerequisites"
if ! command -v cargo >/dev/null 2>&1; then
    echo "test.sh: cargo not found; install Rust from https://rustup.rs and rerun" >&2
    exit 1
fi
for entry in "${TEST_PACKAGES[@]+"${TEST_PACKAGES[@]}"}"; do
    need_pkg "${entry%%:*}" "${entry#*:}"
done
# Plots (--plot FILE.svg|.png) lay text out with a TrueType font read at run time; the
# tests draw some. DejaVu Sans from fonts-dejavu-core unless $FLASHKIT_FONT names one.
if [ -z "${FLASHKIT_FONT:-}" ] && [ ! -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ]; then
    need_pkg "" fonts-dejavu-core
fi
missing=()
cargo fmt --version >/dev/null 2>&1 || missing+=(rustfmt)
cargo clippy --version >/dev/null 2>&1 || missing+=(clippy)
if [ "${#missing[@]}" -gt 0 ]; then
    if ! command -v rustup >/dev/null 2>&1; then
        echo "test.sh: missing Rust component(s) ${missing[*]} and no rustup to add them" >&2
        exit 1
    fi
    echo "adding Rust component(s): ${missing[*]}"
    rustup component add "${missing[@]}"
fi
cargo --version

step "cargo fmt --all -- --check"
cargo fmt --all -- --check

step "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo doc --workspace --no-deps (warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet

step "cargo test --workspace --release"
cargo test --workspace --release

# The randomised power-cut sweep (docs/fms.md, "Torture"), a few seconds of it: keeps the
# script working as the CLI changes (seed 6: 6 runs, 2 one-line refusals, ~16 000 cuts;
# with --formats, some of them cut the format instead; with --chains, half the others cut
# again after each recovery), and cross-checks forked cuts against replayed ones on its
# runs without failures.
step "scripts/torture-sweep.py --seed 6 --runs 8 --cross-check --formats --chains"
cargo build --release --quiet --bin flashkit
python3 scripts/torture-sweep.py --seed 6 --runs 8 --jobs 2 --cross-check --formats --chains

# The on-flash format docs against the binary (docs/format/fms.md, nand-image.md): an
# independent reader written from the docs alone must read every image the FMS writes
# (and crafted damaged ones) exactly as `fms read` / `fms info` do; about 45 s.
step "scripts/fms-spec-check.py"
python3 scripts/fms-spec-check.py "${CARGO_TARGET_DIR:-target}/release/flashkit"

# The profile-guided build's training runs (scripts/pgo-build.sh), with the plain
# binary: about a second; keeps them working as the CLI changes.
fk="${CARGO_TARGET_DIR:-target}/release/flashkit"
step "scripts/pgo-build.sh --train-with $fk"
./scripts/pgo-build.sh --train-with "$fk" >/dev/null 2>&1 ||
    ./scripts/pgo-build.sh --train-with "$fk"

step "all checks passed"
