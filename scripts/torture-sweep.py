#!/usr/bin/env python3
"""Randomised power-cut sweep of the FMS: many `flashkit torture` runs, each cutting
power at every program and erase of its workload, over a seeded random choice of
devices, page and block sizes, segment counts, NOP / page-order / spare overrides,
policies, redistribution, DAC regions and thresholds, wear levelling, index-log moves,
fill writes and injected program/erase failures.

    scripts/torture-sweep.py --seed 12 --runs 120            # build first: cargo build --release
    scripts/torture-sweep.py --seed 13 --runs 100 --long     # longer workloads, more segments
    scripts/torture-sweep.py --seed 14 --runs 100 --flips    # half the runs with ECC and bit flips
    scripts/torture-sweep.py --seed 15 --runs 100 --traces   # half the runs replay a block trace
    scripts/torture-sweep.py --seed 16 --runs 100 --formats  # a quarter cut the format instead
    scripts/torture-sweep.py --seed 17 --runs 100 --chains   # half cut again after recoveries

Each run prints one line: `ok CUTS VIOLATIONS ARGS`, `refused ARGS | ERROR` (the one-line
refusal of an impossible configuration: an FMS configuration error, or more failures than
the segments can absorb) or `FAIL ...` (a violation, a crash, a panic, or any other
error). With `--flips` (half the runs then use ECC: SEC-DED at SLC-like flip rates, or a
BCH code of 2, 4 or 6 bits at MLC-like ones), a run whose every violation came in a run
that read more flipped bits in one 512-byte chunk than its code corrects prints
`ECC-LIMIT ...` instead (docs/fms.md, "Bit flips and ECC"). The last
line sums them, after a line summing how many cut points' mounts met each recovery path
(torn records, stale live copies, dirty segments, ...); the exit status is 1 when any run
failed. A failing run is replayed with
the arguments it prints, and `--cuts at:K` for the cut its violation names.

With `--traces`, half the runs replay a block trace instead of the random operations
(`torture --trace`): `--trace @gen:W:F:S` in a printed line stands for the file `flashkit
trace generate --workload W --format F --seed S --requests N --space 4MiB --read-fraction
0.2` writes (N: the run's `--ops`; rootdisk keeps its own read share), made afresh for the
run in a temporary directory. Trace runs cut at every point, or at 1 500 sampled points
(all of them when there are fewer) when they inject failures, which replay the workload
for every cut (`flashkit torture --replay`). `--cross-check` also runs each configuration
without failures at 100 sampled cut points both ways, forked and replayed, and fails it
when the two reports differ.

With `--formats`, a quarter of the runs cut power in the format over the medium their
workload left instead (`torture --target fms-format`, stop 25): their failures are the
format's (stop 28; dropped before, when the target refused them), and they are not
cross-checked (their cuts never replay a workload).

With `--chains`, half the runs cut power again after each recovery (`torture --chain N
--chain-within W`, stop 30; the format runs too since stop 31): N of 2, 4 or 8 more cuts, each among the first W of
1, 3, 5 or 10 programs/erases after the recovery before it; their mounts are cut too where
they program (stop 31). The last line then also counts the chained cuts made, the mounts
cut, and the chains that ended with the medium full (`chains_full`: the erased slots used
up by copies the cuts tore, when no cleaning could finish; not a violation, docs/fms.md
"Power cuts a few operations apart").

This is the sweep behind the figures in the session notes (docs/fms.md, "Torture"); the
test suite runs fixed configurations (crates/sim/tests/torture.rs) and, from
scripts/test.sh, eight runs of this script (seed 6) to keep it working.
"""

import argparse
import concurrent.futures
import json
import os
import random
import subprocess
import sys

DEVICES = ["mlc2-2g", "nandsim-256m", "intel-series2plus-24m", "chang-kuo-16g", "slc-large-1g"]
ECC_DEVICES = ["mlc2-2g", "slc-large-1g"]
SETUPS = [
    [],
    ["--policy", "greedy", "--redistribution", "m1"],
    ["--policy", "cost-benefit", "--redistribution", "m4"],
    ["--policy", "adaptive", "--regions", "3"],
    ["--policy", "cat", "--regions", "2", "--region-select", "most-segments"],
    ["--policy", "greedy", "--regions", "4", "--region-threshold", "1s"],
    ["--policy", "cost-benefit", "--regions", "2", "--region-select", "most-garbage"],
    ["--policy", "cost-benefit", "--redistribution", "m2"],
    ["--policy", "cat", "--redistribution", "m3"],
]


TRACE_WORKLOADS = ["rootdisk", "multimedia", "hotcold:80/20", "random", "sequential",
                   "phases:sequential,hotcold:90/10"]
TRACE_FORMATS = ["msr", "spc", "blkparse", "disksim", "fio"]


def configs(seed, runs, long, flips=False, traces=False, formats=False, chains=False):
    rng = random.Random(seed)
    # Drawn apart, so that --flips leaves every other choice of a seed as it was.
    frng = random.Random(seed ^ 0xECC)
    trng = random.Random(seed ^ 0x7ACE)
    # Index-log moves (stop 20), drawn apart too.
    irng = random.Random(seed ^ 0x1DE5)
    # Format cuts (stop 25), drawn apart too.
    grng = random.Random(seed ^ 0xF0A7)
    # Chained cuts (stop 30), drawn apart too; those of format runs (stop 31) from their
    # own generator, so that a seed's workload runs keep the chains they had.
    crng = random.Random(seed ^ 0xC4A1)
    cfrng = random.Random(seed ^ 0xC4A2)
    # The failure reserve (stop 33), drawn apart too, for runs with failures.
    rrng = random.Random(seed ^ 0xFA11)
    # The reserve from the start (stop 34), drawn apart too, for any run: it raises the
    # marks of media that never fail.
    srng = random.Random(seed ^ 0xFA12)
    ops = [200, 400, 600] + ([1000] if long else [])
    segments = [10, 12, 16, 20, 24] + ([32] if long else [])
    for _ in range(runs):
        dev = rng.choice(DEVICES)
        args = ["torture", "--device", dev, "--seed", str(rng.randrange(1000)),
                "--ops", str(rng.choice(ops)),
                "--failures", str(rng.choice([0, 0, 1, 2, 3, 4])),
                "--segments", str(rng.choice(segments))]
        page = rng.choice([None, 64, 128, 256, 512])
        if page:
            args += ["--page-size", str(page), "--block-size", str(rng.choice([512, 1024]))]
        if rng.random() < 0.6:
            args += ["--wear-threshold", str(rng.choice([1, 2, 4]))]
        if rng.random() < 0.3:
            args += ["--fill-writes", "false"]
        args += rng.choice(SETUPS)
        if rng.random() < 0.25:
            args += ["--nop", str(rng.choice([1, 2, 4]))]
        if dev != "intel-series2plus-24m":
            if rng.random() < 0.2:
                args += ["--in-order", rng.choice(["true", "false"])]
            if rng.random() < 0.15:
                args += ["--spare-size", str(rng.choice([0, 8, 16, 64]))]
        if args[args.index("--failures") + 1] != "0" and rrng.random() < 0.3:
            args += ["--failure-reserve", rrng.choice(["0", "2"])]
        # (Not with reserve 0, which torture refuses it with: it has no effect.)
        no_reserve = "--failure-reserve" in args and args[args.index("--failure-reserve") + 1] == "0"
        if srng.random() < 0.2 and not no_reserve:
            args += ["--failure-reserve-from", "start"]
        if irng.random() < 0.3:
            # Segments of few pages make an index cycle shorter than the segment count.
            args += ["--index-wear-gap", irng.choice(["0", "1", "none"])]
            if irng.random() < 0.5 and "--pages-per-block" not in args:
                args += ["--pages-per-block", irng.choice(["8", "16"])]
        if flips and frng.random() < 0.5:
            # ECC with SLC-like flips, on a device whose spare area holds the codes: 2 KiB
            # pages with 64-byte spares, as the device has them (others are refused).
            if dev not in ECC_DEVICES:
                args[2] = frng.choice(ECC_DEVICES)
            for opt in ("--page-size", "--block-size", "--spare-size"):
                if opt in args:
                    i = args.index(opt)
                    del args[i:i + 2]
            if frng.random() < 0.5:
                # SEC-DED at SLC-like rates.
                args += ["--ecc", "--bitflip-rate", frng.choice(["1e-7", "3e-7", "1e-6"])]
            else:
                # BCH at rates each strength is made for (stop 21): up to 1e-5, where the
                # CRC-checked records and headers (three reads each) are still safe.
                bits, rate = frng.choice([("2", "1e-6"), ("2", "3e-6"), ("4", "3e-6"),
                                          ("4", "1e-5"), ("6", "1e-5")])
                args += ["--ecc-bits", bits, "--bitflip-rate", rate]
        if traces and trng.random() < 0.5:
            if "--fill-writes" in args:
                i = args.index("--fill-writes")
                del args[i:i + 2]
            gen = "@gen:%s:%s:%d" % (trng.choice(TRACE_WORKLOADS), trng.choice(TRACE_FORMATS),
                                     trng.randrange(1000))
            # A trace's requests can be large (multimedia's are), so a replay can have far
            # more programs than a random workload of as many operations. Forked cuts
            # (stop 20) cost each cut its own operation; with failures every cut replays
            # the workload, which grows with the square of its programs: a sample keeps
            # such a run to seconds.
            args += ["--trace", gen, "--flush-every", str(trng.choice([0, 1, 4, 8, 32]))]
            if args[args.index("--failures") + 1] != "0":
                args += ["--cuts", "1500"]
            if trng.random() < 0.3:
                args += ["--trace-map", "compact"]
        if formats and grng.random() < 0.25:
            for opt in ("--cuts",):
                if opt in args:
                    i = args.index(opt)
                    del args[i:i + 2]
            args[1:1] = ["--target", "fms-format"]
        if chains and crng.random() < 0.5:
            r = cfrng if "fms-format" in args else crng
            args += ["--chain", r.choice(["2", "4", "8"]),
                     "--chain-within", r.choice(["1", "3", "5", "10"])]
        yield args


def generated(flashkit, args, tmp):
    """`args` with a `--trace @gen:W:F:S` replaced by a trace file written into `tmp`."""
    if "--trace" not in args:
        return args
    i = args.index("--trace") + 1
    # The workload may hold colons of its own (hotcold:80/20, phases:...).
    head, fmt, seed = args[i].rsplit(":", 2)
    w = head[len("@gen:"):]
    ops = args[args.index("--ops") + 1]
    path = os.path.join(tmp, "t." + fmt)
    cmd = [flashkit, "trace", "generate", "--workload", w, "--format", fmt, "--seed", seed,
           "--requests", ops, "--space", "4MiB", path]
    if w != "rootdisk":
        cmd[-1:-1] = ["--read-fraction", "0.2"]
    subprocess.run(cmd, check=True, capture_output=True)
    return args[:i] + [path] + args[i + 1:]


def cross_check(flashkit, args):
    """None when forked and replayed cuts give the same report on `args` at 100 sampled
    cut points (runs with --failures always replay: nothing to compare), else what
    differs."""
    if args[args.index("--failures") + 1] != "0" or "fms-format" in args:
        return None
    base = list(args)
    if "--cuts" in base:
        i = base.index("--cuts")
        del base[i:i + 2]
    base += ["--cuts", "100", "--json", "--threads", "1"]
    out = []
    for extra in ([], ["--replay"]):
        p = subprocess.run([flashkit, *base, *extra], capture_output=True, text=True)
        try:
            v = json.loads(p.stdout)
            v.pop("elapsed_s", None)
        except ValueError:
            v = p.stderr.strip()[-300:]
        out.append(v)
    if out[0] == out[1]:
        return None
    if isinstance(out[0], dict) and isinstance(out[1], dict):
        keys = [k for k in out[0] if out[0].get(k) != out[1].get(k)]
        return "forked and replayed cuts differ in " + ", ".join(keys)
    return f"forked and replayed cuts differ: {out[0]!r} / {out[1]!r}"


def run(flashkit, args, cross=False):
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        full = generated(flashkit, args, tmp)
        p = subprocess.run([flashkit, *full, "--json", "--threads", "1"],
                           capture_output=True, text=True)
        differ = cross_check(flashkit, full) if cross else None
    shown = " ".join(args)
    if differ:
        return "fail", 0, 0, f"FAIL {shown} | {differ}", {}
    err = p.stderr.strip()
    lines = [l for l in err.splitlines() if not l.startswith("flashkit: note:")]
    try:
        v = json.loads(p.stdout)
        c, n = v["cut_points"], v["violations"]
    except (ValueError, KeyError, TypeError):
        v = None
    if v is not None:
        kind = "ok" if p.returncode == 0 and n == 0 else "fail"
        # Every violation in a run whose reads flipped more bits in one chunk than the code
        # corrects (3+ for SEC-DED, whose odd counts are miscorrected; t+1 for BCH-t) is the
        # code's limit, shown apart.
        fails = v.get("failures") or []
        if kind == "fail" and fails and all("than the code corrects" in f for f in fails):
            return "ecc-limit", c, 0, f"ECC-LIMIT {c} {n} {shown}", {}
        rec = dict(v.get("recovery") or {})
        for k, m in (v.get("reads") or {}).items():
            rec[k] = m
        for k in ("chained_cuts", "mount_cuts", "chains_full"):
            if v.get(k):
                rec[k] = v[k]
        return kind, c, n, f"{'ok' if kind == 'ok' else 'FAIL'} {c} {n} {shown}", rec
    # Only a refusal of the configuration itself counts as refused. Any other error (a
    # fault-free run that cannot finish, say) is a failure: nothing in this space should
    # make one.
    if (p.returncode == 1 and len(lines) == 1
            and lines[0].startswith(("flashkit: torture: FMS: configuration:", "flashkit: torture: failures:",
                                     "flashkit: torture: failure_reserve:",
                                     "flashkit: --pages-per-block: the derived device keeps at most"))):
        return "refused", 0, 0, f"refused {shown} | {lines[0]}", {}
    tail = err[-600:].replace("\n", " / ")
    return "fail", 0, 0, f"FAIL rc={p.returncode} {shown} | {tail}", {}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1, help="seed of the random configurations")
    ap.add_argument("--runs", type=int, default=60, help="number of configurations")
    ap.add_argument("--long", action="store_true", help="also 1000-operation workloads and 32 segments")
    ap.add_argument("--flips", action="store_true", help="half the runs format with --ecc and flip bits in reads")
    ap.add_argument("--traces", action="store_true", help="half the runs replay a generated block trace (torture --trace)")
    ap.add_argument("--formats", action="store_true",
                    help="a quarter of the runs cut the format instead (torture --target fms-format)")
    ap.add_argument("--chains", action="store_true",
                    help="half the workload runs cut again after each recovery (torture --chain)")
    ap.add_argument("--cross-check", action="store_true",
                    help="also run each configuration without failures at 100 sampled cuts "
                         "forked and replayed (torture --replay) and fail it if the reports differ")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="runs at a time (one core each)")
    here = os.path.dirname(os.path.abspath(__file__))
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(here, "..", "target")
    ap.add_argument("--flashkit", default=os.path.join(target, "release", "flashkit"))
    a = ap.parse_args()
    if not os.access(a.flashkit, os.X_OK):
        sys.exit(f"torture-sweep: {a.flashkit}: no flashkit binary (cargo build --release, or --flashkit PATH)")
    counts = {"ok": 0, "refused": 0, "fail": 0, "ecc-limit": 0}
    cuts = violations = 0
    # Cut points whose mount met each recovery path (`flashkit torture`'s `recovery`).
    recovery = {}
    chained = {"chained_cuts": 0, "mount_cuts": 0, "chains_full": 0}
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        for kind, c, v, line, rec in pool.map(lambda args: run(a.flashkit, args, a.cross_check), configs(a.seed, a.runs, a.long, a.flips, a.traces, a.formats, a.chains)):
            print(line, flush=True)
            counts[kind] += 1
            cuts += c
            violations += v
            for k, n in rec.items():
                if k in chained:
                    chained[k] += n
                else:
                    recovery[k] = recovery.get(k, 0) + n
    print(f"recovery paths met (cut points), and reads: "
          + ", ".join(f"{k.replace('_', ' ')} {n}" for k, n in recovery.items()))
    print(f"total: {a.runs} runs, {counts['ok']} ran, {counts['refused']} refused, "
          f"{cuts} cut points, {violations} violations, {counts['fail']} failed"
          + (f", {chained['chained_cuts']} chained cuts, {chained['mount_cuts']} mounts cut, "
             f"{chained['chains_full']} chains ended with the medium full" if a.chains else "")
          + (f", {counts['ecc-limit']} beyond the ECC's strength" if counts["ecc-limit"] else ""))
    sys.exit(1 if counts["fail"] else 0)


if __name__ == "__main__":
    main()
