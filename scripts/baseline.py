#!/usr/bin/env python3
"""Pin what a build simulates, so a speed change can prove it changed nothing.

    python3 scripts/baseline.py record DIR [--flashkit BIN]
    python3 scripts/baseline.py compare DIR [--flashkit BIN] [--ignore KEY,...]

`record` runs a fixed set of simulations, reproductions and torture runs (about a minute
on the 2-core machine) and keeps each one's output in DIR. `compare` runs them again with
another binary and prints, for each, `identical` or the first difference; it exits 1 when
any differs. Keys that depend on the wall clock (bench rates, elapsed times) are dropped
from JSON before comparing; `--ignore ram_bytes` also drops a key that a change of the
RAM accounting alone moves.

The set covers every policy, redistribution, DAC region count, threshold, promotion and
demotion rule, region selection, wear levelling, read-only data, arrival process, every
preset (NOR-style and NAND, spare and header mode), traces of each format, storage mode on
image files and power-cut torture with and without ECC and bit flips. A speed change that
claims "results byte-identical" runs `record` with the old build and `compare` with the
new one and gets 0 differences.
"""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

# Keys whose values come from the wall clock or the machine.
VOLATILE = {
    "elapsed_s",
    "wall_s",
    "wall_time_s",
    "user_writes_per_s",
    "flash_writes_per_s",
    "ns_per_user_write",
    "build",
}


def cases(work):
    """(name, argv, needs) with argv relative to the binary; `work` is a scratch dir."""
    trace = lambda f: os.path.join(work, f)  # noqa: E731
    img = os.path.join(work, "img.fms")
    data = os.path.join(work, "data.bin")
    if work:
        # 600 KiB of a fixed pseudo-random pattern: about 37 % of the FMS, written twice
        # at overlapping offsets, so the second write overwrites and the cleaner runs.
        x, out = 12345, bytearray()
        while len(out) < 600 * 1024:
            x = (x * 6364136223846793005 + 1442695040888963407) % 2**64
            out += (x >> 32).to_bytes(4, "little")
        with open(data, "wb") as f:
            f.write(out)
    all4 = "greedy,cost-benefit,cat,adaptive"
    return [
        ("flagship", ["sim", "--json"]),
        ("table4-text", ["reproduce", "chiang1999-table4"]),
        ("table4", ["reproduce", "chiang1999-table4", "--json"]),
        ("dac-fig12", ["reproduce", "dac-fig12", "--json"]),
        ("chiang1999-fig12", ["reproduce", "chiang1999-fig12", "--json"]),
        ("chiang1999-fig13", ["reproduce", "chiang1999-fig13", "--json"]),
        ("chiang1999-fig18", ["reproduce", "chiang1999-fig18", "--json"]),
        ("dac-fig11", ["reproduce", "dac-fig11", "--json"]),
        (
            "redistributions",
            ["sim", "--json", "--policy", all4, "--redistribution", "m1,m2,m3,m4,m5,m6",
             "--written", "48MiB", "--arrival", "poisson:50"],
        ),
        (
            "dac-grid",
            ["sim", "--json", "--policy", all4, "--regions", "1,2,4,8",
             "--region-threshold", "30s", "--arrival", "poisson:100", "--written", "48MiB",
             "--workload", "phases:hotcold:90/10,random,hotcold:80/20,sequential"],
        ),
        (
            "dac-rules",
            ["sim", "--json", "--policy", "greedy,cat", "--regions", "4",
             "--region-select", "all,most-segments,most-garbage",
             "--promotion", "threshold,region-average", "--demotion", "threshold,region-average", "--region-threshold", "20s",
             "--arrival", "poisson:100", "--written", "32MiB"],
        ),
        (
            "wear-readonly",
            ["sim", "--json", "--policy", all4, "--wear-threshold", "5,20",
             "--readonly-fraction", "0.3", "--written", "96MiB"],
        ),
        (
            "m4-average",
            ["sim", "--json", "--policy", "greedy,cost-benefit", "--redistribution", "m4",
             "--m4-average", "device,data", "--written", "48MiB", "--workload",
             "hotcold:90/10", "--workload", "hotcold:95/5"],
        ),
        (
            "ages-waters",
            ["sim", "--json", "--policy", "cost-benefit,cat", "--cat-age", "saturating,log,linear,clamp:2",
             "--cb-age", "written,invalidation", "--low-water", "2,4", "--high-water", "6",
             "--written", "32MiB", "--block-size", "1KiB", "--unit", "1KiB"],
        ),
        (
            "adaptive-knobs",
            ["sim", "--json", "--policy", "adaptive", "--adaptive-window", "500,5000",
             "--adaptive-threshold", "1.2,3", "--hot-half-life", "1000",
             "--workload", "phases:random,hotcold:95/5", "--written", "48MiB"],
        ),
        (
            "nandsim",
            ["sim", "--json", "--device", "nandsim-256m", "--policy", all4,
             "--written", "96MiB", "--regions", "1,4", "--block-size", "1KiB", "--unit", "1KiB"],
        ),
        (
            "slc-large",
            ["sim", "--json", "--device", "slc-large-1g", "--policy", all4,
             "--written", "256MiB", "--fill", "0.8"],
        ),
        (
            "mlc2",
            ["sim", "--json", "--device", "mlc2-2g", "--policy", all4, "--blocks", "512",
             "--written", "256MiB", "--workload", "hotcold:90/10"],
        ),
        (
            "chang-kuo",
            ["sim", "--json", "--device", "chang-kuo-16g", "--blocks", "2048",
             "--block-size", "512", "--fill", "0.8", "--policy", all4, "--written", "32MiB"],
        ),
        ("trace-gen-msr", ["trace", "generate", "--format", "msr", "--requests", "3000",
                           "--seed", "4", trace("t.msr")]),
        ("trace-gen-spc", ["trace", "generate", "--format", "spc", "--requests", "3000",
                           "--seed", "5", trace("t.spc")]),
        ("trace-gen-blk", ["trace", "generate", "--format", "blkparse", "--requests", "3000",
                           "--seed", "6", trace("t.blk")]),
        ("trace-msr", ["sim", "--json", "--policy", all4, "--workload", f"trace:{trace('t.msr')}"]),
        ("trace-spc", ["sim", "--json", "--policy", all4, "--trace-map", "compact",
                       "--workload", f"trace:{trace('t.spc')}"]),
        ("trace-blk", ["sim", "--json", "--policy", "greedy,cat", "--device", "mlc2-2g",
                       "--blocks", "256", "--workload", f"trace:{trace('t.blk')}"]),
        ("nand-format", ["nand", "format", img, "--device", "nandsim-256m", "--blocks", "64",
                         "--bad-blocks", "5,9"]),
        ("fms-format", ["fms", "format", img, "--block-size", "1KiB", "--json"]),
        ("fms-write", ["fms", "write", img, "--offset", "4096", "--input", data]),
        ("fms-write-again", ["fms", "write", img, "--offset", "65536", "--input", data]),
        ("fms-trim", ["fms", "trim", img, "--offset", "8192", "--length", "16KiB"]),
        ("fms-read", ["fms", "read", img, "--offset", "0", "--length", "640KiB",
                      "--output", os.path.join(work, "read.bin")]),
        ("fms-read-bytes", ["@sha256", os.path.join(work, "read.bin")]),
        ("fms-info", ["fms", "info", img, "--json"]),
        ("fms-image-bytes", ["@sha256", img]),
        (
            "torture-intel",
            ["torture", "--json", "--device", "intel-series2plus-24m", "--cuts", "300",
             "--seed", "7", "--policy", "greedy"],
        ),
        (
            "torture-nandsim",
            ["torture", "--json", "--device", "nandsim-256m", "--cuts", "300", "--seed", "8",
             "--regions", "4", "--region-threshold", "1s"],
        ),
        (
            "torture-mlc-ecc",
            ["torture", "--json", "--device", "mlc2-2g", "--cuts", "200", "--seed", "3",
             "--ecc", "--bitflip-rate", "1e-6"],
        ),
    ]


def scrub(text):
    """Drop the volatile keys of JSON output; leave other text as it is."""
    try:
        value = json.loads(text)
    except ValueError:
        return text

    def walk(v):
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items() if k not in VOLATILE}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return json.dumps(walk(value), indent=1, sort_keys=True) + "\n"


def run(binary, argv):
    if argv[0] == "@sha256":
        try:
            with open(argv[1], "rb") as f:
                return "sha256 " + hashlib.sha256(f.read()).hexdigest() + "\n"
        except OSError as e:
            return f"missing: {e.strerror}\n"
    p = subprocess.run([binary] + argv, capture_output=True, text=True)
    return f"exit {p.returncode}\n" + scrub(p.stdout) + p.stderr


def drop(text, keys):
    if not keys:
        return text
    lines = text.split("\n", 1)
    try:
        value = json.loads(lines[1])
    except (ValueError, IndexError):
        return text

    def walk(v):
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items() if k not in keys}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return lines[0] + "\n" + json.dumps(walk(value), indent=1, sort_keys=True) + "\n"


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a.splitlines(), b.splitlines())):
        if x != y:
            return f"line {i + 1}: {x.strip()[:90]!r} -> {y.strip()[:90]!r}"
    return "one output is longer"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("action", choices=["record", "compare"])
    ap.add_argument("dir")
    ap.add_argument("--flashkit", default="target/release/flashkit")
    ap.add_argument("--ignore", default="", help="comma-separated JSON keys to leave out")
    a = ap.parse_args()
    binary = os.path.abspath(a.flashkit)
    if not os.access(binary, os.X_OK):
        sys.exit(f"baseline: {a.flashkit}: not an executable")
    ignore = {k for k in a.ignore.split(",") if k}
    if a.action == "record":
        os.makedirs(a.dir, exist_ok=True)
    elif not os.path.isdir(a.dir):
        sys.exit(f"baseline: {a.dir}: no such directory (run `record` first)")
    differ = 0
    # A fixed scratch path: outputs name their files, and job ids hash the options.
    work = os.path.join(tempfile.gettempdir(), "flashkit-baseline-work")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    for name, argv in cases(work):
        out = run(binary, argv)
        path = os.path.join(a.dir, name + ".out")
        if a.action == "record":
            with open(path, "w") as f:
                f.write(out)
            print(f"{name}: recorded ({out.splitlines()[0]})")
            continue
        try:
            with open(path) as f:
                old = f.read()
        except FileNotFoundError:
            print(f"{name}: not recorded")
            differ += 1
            continue
        if drop(old, ignore) == drop(out, ignore):
            print(f"{name}: identical")
        else:
            differ += 1
            print(f"{name}: DIFFERS, {first_difference(drop(old, ignore), drop(out, ignore))}")
    shutil.rmtree(work, ignore_errors=True)
    if a.action == "compare":
        print(f"{differ} of {len(cases(''))} differ")
        sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
