//! End-to-end tests of `flashkit torture`.

mod common;
use common::*;

use serde_json::Value;

#[test]
fn every_cut_point_on_a_tiny_intel_device_as_json() {
    let o = flashkit([
        "torture",
        "--target",
        "fms",
        "--device",
        "intel-series2plus-24m",
        "--segments",
        "12",
        "--cuts",
        "every",
        "--seed",
        "3",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    for key in [
        "cut_points",
        "violations",
        "ops",
        "device",
        "target",
        "seed",
    ] {
        assert!(v.get(key).is_some(), "missing key {key}: {v}");
    }
    assert_eq!(v["target"], "fms");
    assert_eq!(v["device"], "intel-series2plus-24m");
    assert_eq!(v["seed"], 3);
    assert_eq!(v["violations"], 0);
    assert_eq!(v["cut_points"], v["ops"], "every program and erase is cut");
    assert!(v["ops"].as_u64().unwrap() > 1000);
}

/// `--chain N`: N more cuts after each recovery, each within `--chain-within` programs
/// and erases, and cuts in the mounts' repairs; the table and the JSON say how many were
/// made and what their mounts found. (Intel, header mode: mounts clear live bits.)
#[test]
fn chained_cuts_are_reported() {
    let args = "torture --device intel-series2plus-24m --cuts 30 --ops 120 --seed 2 --chain 3 --chain-within 4";
    let o = flashkit(args.split(' ').chain(["--json"]));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    assert_eq!(v["violations"], 0, "{v}");
    assert_eq!(v["chain"], 3);
    assert_eq!(v["chain_within"], 4);
    assert_eq!(
        v["chained_cuts"], 90,
        "three after each of 30 cut points: {v}"
    );
    assert!(
        v["chain_recovery"]["dirty_segments"].as_u64().unwrap() > 0,
        "{v}"
    );
    let mount_cuts = v["mount_cuts"].as_u64().unwrap();
    assert!(mount_cuts > 0, "{v}");
    let o = flashkit(args.split(' '));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.lines().any(|l| l.starts_with("chained cuts")
            && l.contains("90 (3 after each recovery, within 4 programs/erases)")
            && l.contains(&format!("; {mount_cuts} mount(s) cut in their repairs;"))),
        "{out}"
    );
    assert!(out.contains("chained mounts that found"), "{out}");
    // Without --chain, neither line.
    let o = flashkit("torture --device nandsim-256m --cuts 5 --ops 60".split(' '));
    assert!(!text(&o.stdout).contains("chained"), "{}", text(&o.stdout));
    // After the cuts in a format too (refused until stop 31).
    let args = "torture --target fms-format --device nandsim-256m --ops 60 --chain 2 --json";
    let o = flashkit(args.split(' '));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    assert_eq!(v["target"], "fms-format");
    assert_eq!(v["violations"], 0, "{v}");
    assert_eq!(
        v["chained_cuts"].as_u64(),
        v["cut_points"].as_u64().map(|n| 2 * n),
        "{v}"
    );
}

#[test]
fn sampled_cut_points_table() {
    let o = flashkit([
        "torture", "--device", "mlc2-2g", "--cuts", "40", "--ops", "150",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains("cut points"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("cut points") && l.trim_end().ends_with("40")),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("violations") && l.trim_end().ends_with(" 0")),
        "{out}"
    );
}

#[test]
fn bad_arguments_are_one_line_errors() {
    for (args, needle) in [
        (
            vec!["torture", "--device", "mlc2-2g", "--block-size", "1KiB"],
            "block_size",
        ),
        (
            vec!["torture", "--device", "nandsim-256m", "--cuts", "x"],
            "--cuts",
        ),
        (vec!["torture", "--device", "nope"], "unknown device preset"),
        (
            vec!["torture", "--device", "nandsim-256m", "--policy", "fifo"],
            "--policy",
        ),
        (vec!["torture"], "no device given"),
        // A device that cannot run the workload at all is not a durability violation.
        (
            vec![
                "torture",
                "--device",
                "nandsim-256m",
                "--endurance",
                "1",
                "--cuts",
                "5",
            ],
            "cannot run on this configuration even without power cuts",
        ),
        // More operations than any machine holds: refused, not an allocation abort.
        (
            vec![
                "torture",
                "--device",
                "nandsim-256m",
                "--ops",
                "1000000000000",
            ],
            "ops: 1000000000000 operations",
        ),
        // More failures than the small device's exported blocks can absorb.
        (
            vec![
                "torture",
                "--device",
                "nandsim-256m",
                "--segments",
                "10",
                "--page-size",
                "64",
                "--block-size",
                "512",
                "--failures",
                "3",
            ],
            "3 failures may retire 3 segments of 3 blocks each, 9 blocks, and the FMS exports only 9",
        ),
    ] {
        let o = flashkit(&args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("flashkit: ") && err.contains(needle),
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// A full-size device's prefill leaves far more free segments than a few operations use:
/// the run says that its cuts never fell in a cleaning, and how many operations would.
#[test]
fn a_run_that_never_cleans_says_so() {
    let o = flashkit([
        "torture",
        "--device",
        "intel-series2plus-24m",
        "--full-device",
        "--ops",
        "20",
        "--cuts",
        "2",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    assert_eq!(v["cleanings"], 0, "{v}");
    let err = text(&o.stderr);
    assert!(
        err.contains("flashkit: warning: the workload never started the cleaner"),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "about {}, the logical block count",
            v["logical_blocks"]
        )),
        "{err}"
    );
    // The default, derived device cleans: no warning.
    let o = flashkit([
        "torture",
        "--device",
        "intel-series2plus-24m",
        "--cuts",
        "2",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(!text(&o.stderr).contains("warning"), "{}", text(&o.stderr));
}

/// `--failures` takes a count: anything else is a one-line usage error (exit 2, as every
/// argument clap rejects).
#[test]
fn failures_must_be_a_number() {
    for bad in ["two", "-1", "1.5", ""] {
        let o = flashkit(["torture", "--device", "nandsim-256m", "--failures", bad]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{bad:?}: {err}");
        assert!(
            err.starts_with("flashkit: ") && err.contains("--failures"),
            "{bad:?}: {err}"
        );
        assert!(o.stdout.is_empty(), "{bad:?}");
    }
}

/// `--failures N`: the report says how many were requested, which operations failed and
/// how many programs and erases the fault-free run saw fail, in JSON and in the table.
#[test]
fn failures_are_reported() {
    let o = flashkit([
        "torture",
        "--device",
        "intel-series2plus-24m",
        "--failures",
        "2",
        "--ops",
        "40",
        "--cuts",
        "3",
        "--json",
    ]);
    // The report is printed before any violation makes the exit non-zero.
    let v: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|_| panic!("one JSON object; stderr: {}", text(&o.stderr)));
    for key in [
        "failures_requested",
        "fail_ops",
        "program_failures",
        "erase_failures",
        "failures",
    ] {
        assert!(v.get(key).is_some(), "missing key {key}: {v}");
    }
    assert_eq!(v["failures_requested"], 2, "{v}");
    assert_eq!(v["fail_ops"].as_array().unwrap().len(), 2, "{v}");
    let injected = v["program_failures"].as_u64().unwrap() + v["erase_failures"].as_u64().unwrap();
    assert!((1..=2).contains(&injected), "{v}");
    assert!(v["failures"].is_array(), "the violation lines: {v}");

    let o = flashkit([
        "torture",
        "--device",
        "intel-series2plus-24m",
        "--failures",
        "1",
        "--ops",
        "40",
        "--cuts",
        "3",
    ]);
    let out = text(&o.stdout);
    for row in ["failures requested", "program failures", "erase failures"] {
        assert!(out.lines().any(|l| l.starts_with(row)), "{row}: {out}");
    }
    // Without --failures: zero, nothing chosen.
    let o = flashkit([
        "torture",
        "--device",
        "intel-series2plus-24m",
        "--ops",
        "40",
        "--cuts",
        "2",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    assert_eq!(v["failures_requested"], 0, "{v}");
    assert_eq!(v["program_failures"], 0, "{v}");
    assert_eq!(v["fail_ops"], serde_json::json!([]), "{v}");
}

/// The report says which recovery paths the cuts exercised: how many cut points' mounts
/// found torn records, superseded copies still live (header mode only), dirty segments
/// and the rest (`recovery`, and a text line). Every cut of a short run on each mode.
#[test]
fn reports_the_recovery_paths_the_cuts_exercised() {
    for (device, header) in [("intel-series2plus-24m", true), ("nandsim-256m", false)] {
        let o = flashkit([
            "torture", "--device", device, "--ops", "200", "--seed", "4", "--json",
        ]);
        assert!(o.status.success(), "{device}: {}", text(&o.stderr));
        let v: Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
        let r = &v["recovery"];
        let n = |k: &str| {
            r[k].as_u64()
                .unwrap_or_else(|| panic!("{device}: {k}: {v}"))
        };
        assert!(n("torn_records") > 0, "{device}: {r}");
        assert!(n("dirty_segments") > 0, "{device}: {r}");
        assert_eq!(n("stale_live_copies") > 0, header, "{device}: {r}");
        assert!(n("torn_records") <= v["cut_points"].as_u64().unwrap());
        for k in ["unreadable_trim_lists", "grown_bad_read", "index_lost"] {
            n(k);
        }
        let t = ok(flashkit([
            "torture", "--device", device, "--ops", "200", "--seed", "4",
        ]));
        assert!(text(&t.stdout).contains("mounts that found"), "{device}");
    }
}

/// `flashkit torture ARGS --cuts every`: no violation in more than `min_cuts` cut points.
fn every_cut_is_clean(args: &str, min_cuts: u64) {
    let mut a = vec!["torture", "--cuts", "every", "--json"];
    a.extend(args.split(' '));
    let o = flashkit(&a);
    assert!(o.status.success(), "{args}: {}", text(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    assert_eq!(v["violations"], 0, "{args}: {v}");
    assert!(v["cut_points"].as_u64().unwrap() > min_cuts, "{args}: {v}");
}

/// The two configurations of stop 17's randomised sweep (`scripts/torture-sweep.py
/// --seed 1605`) whose remounted tables differed from the running FMS's: a stream's
/// segment torn in an erase, found dirty by the recovery mount and reused by another
/// stream, was given back to the first stream by the next mount (its newest index entry
/// still named it). Every cut point; each had one violation before the fix (cut 726 and
/// cut 4620). The mechanism is pinned in `crates/ftl` by
/// `a_stream_does_not_get_back_a_segment_another_stream_reused`.
#[test]
fn a_segment_reused_by_another_stream_stays_that_streams() {
    for args in [
        "--device nandsim-256m --seed 153 --ops 400 --failures 3 --segments 12 --page-size 128 --block-size 1024 --wear-threshold 4 --policy cost-benefit --redistribution m4 --nop 2",
        "--device intel-series2plus-24m --seed 305 --ops 600 --failures 4 --segments 24 --page-size 64 --block-size 1024 --policy cost-benefit --regions 2 --region-select most-garbage",
    ] {
        every_cut_is_clean(args, 4000);
    }
}

/// Stop 35's first version of the mount's first-page test (`mount::slot_unwritten`)
/// read only the first page of a slot after a segment's last record too: a torn erase of
/// a full segment that kept its header, its summary and some pages of its last slot, not
/// that slot's first page, then mounted full from the summary and with its last slot free
/// from the records (`scripts/torture-sweep.py --seed 1735`, 6 violations, every cut
/// point with chained cuts). Now only slots with no record before them are read at their
/// first page.
#[test]
fn a_torn_erase_keeping_a_summary_mounts_alike_with_and_without_it() {
    every_cut_is_clean(
        "--device slc-large-1g --seed 814 --ops 200 --failures 0 --segments 12 --page-size 64 --block-size 1024 --wear-threshold 1 --fill-writes false --policy cost-benefit --redistribution m4 --chain 8 --chain-within 1",
        6000,
    );
}

/// Spare-mode trims with wear swaps and program failures, every cut point. The first
/// design of durable trims dropped a tombstone once no segment held a record older than
/// it; a randomised sweep (`scripts/torture-sweep.py --seed 1601`) then found remounted
/// tables that differed from the running ones: a wear swap whose source held only a trim
/// list whose tombstones were all dropped left its target "used" with nothing in it
/// (nandsim seed 737), and a list dropped from a segment that had gone bad came back
/// from that segment at the next mount (nandsim seed 551, two failures). Tombstones now
/// die only when their block is written again.
#[test]
fn spare_mode_trims_with_wear_swaps_and_failures() {
    for args in [
        "--device nandsim-256m --seed 737 --ops 200 --failures 0 --segments 20 --page-size 64 --block-size 512 --wear-threshold 1 --policy greedy --regions 4 --region-threshold 1s",
        "--device nandsim-256m --seed 551 --ops 600 --failures 2 --segments 16 --page-size 512 --block-size 512 --policy greedy --redistribution m1",
    ] {
        every_cut_is_clean(args, 1000);
    }
}

/// Bit flips in every read (`--bitflip-rate`): with `--ecc` the codes correct them and
/// the mounts read flipped records, headers and erased pages again, so nothing is lost
/// and every remount rebuilds the same tables; without it the flips reach the reader
/// and the torture fails. A rate of 1e-6 is SLC-like; at 1e-5 three flips in one
/// 512-byte chunk, which SEC-DED miscorrects, come about once in 10^5 chunk reads.
#[test]
fn bit_flips_need_ecc() {
    for device in ["mlc2-2g", "slc-large-1g"] {
        let args = [
            "torture",
            "--device",
            device,
            "--cuts",
            "60",
            "--ops",
            "200",
            "--seed",
            "5",
            "--bitflip-rate",
            "1e-6",
            "--json",
        ];
        let mut with = args.to_vec();
        with.push("--ecc");
        let o = flashkit(&with);
        assert!(o.status.success(), "{device}: {}", text(&o.stderr));
        let v: Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
        assert_eq!(v["violations"], 0, "{device}: {v}");
        assert_eq!(v["ecc"], true);
        let r = &v["reads"];
        assert!(r["bitflips"].as_u64().unwrap() > 100, "{device}: {r}");
        assert!(
            r["ecc_corrected_bits"].as_u64().unwrap() > 100,
            "{device}: {r}"
        );
        assert!(r["read_retries"].as_u64().unwrap() > 0, "{device}: {r}");

        let o = flashkit(args);
        assert!(!o.status.success(), "{device}: flips without ECC must fail");
        let v: Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
        assert!(v["violations"].as_u64().unwrap() > 0, "{device}: {v}");
        assert!(text(&o.stderr).contains("read garbage"), "{device}");
    }
    for (args, needle) in [
        (
            vec!["torture", "--device", "nandsim-256m", "--ecc"],
            "spare area",
        ),
        (
            vec!["torture", "--device", "mlc2-2g", "--bitflip-rate", "2"],
            "--bitflip-rate",
        ),
        (
            vec!["torture", "--device", "mlc2-2g", "--bitflip-rate", "NaN"],
            "--bitflip-rate",
        ),
        // A rate at which the mount cannot read what the format wrote names the rate
        // (QA stop 35: it said "not an FMS medium").
        (
            vec!["torture", "--device", "mlc2-2g", "--bitflip-rate", "1"],
            "garbled what the mount read; give a lower rate, or --ecc",
        ),
    ] {
        let o = flashkit(&args);
        assert!(!o.status.success(), "{args:?}");
        let err = text(&o.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// `--read-retries N` reaches every FMS of the torture: at a flip rate where some reads
/// meet two flips in a chunk (and none three), no re-reads make the fault-free run fail
/// with an uncorrectable read, and the default two pass. The report names the setting.
#[test]
fn read_retries_are_an_option() {
    let base = [
        "torture",
        "--device",
        "mlc2-2g",
        "--seed",
        "3",
        "--cuts",
        "20",
        "--ecc",
        "--bitflip-rate",
        "3e-6",
        "--json",
    ];
    let o = flashkit(base);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    assert_eq!(v["max_read_retries"], 2, "{v}");
    // An ECC medium's headers carry its code (since stop 22).
    assert_eq!(v["header_code"], true, "{v}");
    assert_eq!(v["reads"]["overflipped_chunks"], 0, "{v}");
    assert!(v["reads"]["read_retries"].as_u64().unwrap() > 0, "{v}");

    let mut none = base.to_vec();
    none.extend(["--read-retries", "0"]);
    let o = flashkit(&none);
    assert!(!o.status.success(), "no re-reads at 1e-5 must fail");
    // Which read meets a flip first depends on the reads made: a data chunk with two
    // flips (uncorrectable), or a spare record with one, which counts as torn without a
    // re-read, so that a remount loses the block (a violation).
    let err = text(&o.stderr);
    assert!(
        err.contains("uncorrectable") || err.contains("violation"),
        "{err}"
    );

    let o = flashkit(["torture", "--read-retries", "256"]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("--read-retries"));
}

/// Stop 18's sweep (`scripts/torture-sweep.py --seed 1615`): two program failures four
/// operations apart inside one write used up the free segments of a device with three
/// slots a segment, and the write failed `WornOut` although empty segments were left to
/// clean; the fault-free run could not finish. The write now cleans and retries
/// (`failures_that_use_up_the_free_segments_inside_a_write_make_it_clean` in `crates/ftl`).
#[test]
fn failures_inside_a_write_make_it_clean_first() {
    every_cut_is_clean(
        "--device nandsim-256m --seed 541 --ops 400 --failures 4 --segments 20 --page-size 64 --block-size 512 --wear-threshold 4 --fill-writes false --policy cat --regions 2 --region-select most-segments",
        5000,
    );
}

/// Options a torture would ignore or clamp are refused in one line (option fuzzer, stop
/// 19): the derived device's size comes from --segments, its pages per block are capped,
/// DAC options need regions, and threads start at 1. A sample larger than the cut points
/// cuts every one and says so.
#[test]
fn options_a_torture_would_ignore_are_refused() {
    for (extra, needle) in [
        (vec!["--blocks", "1"], "--blocks"),
        (vec!["--pages-per-block", "64"], "--pages-per-block"),
        (vec!["--region-threshold", "30m"], "--region-threshold"),
        (vec!["--region-select", "most-garbage"], "--region-select"),
        (vec!["--threads", "0"], "--threads"),
        (vec!["--full-device", "--segments", "4"], "--segments"),
        (vec!["--trace-format", "msr"], "without --trace"),
        (vec!["--flush-every", "4"], "--trace"),
        (
            vec!["--trace", "/nonexistent/t.msr", "--fill-writes", "true"],
            "--fill-writes",
        ),
        (
            vec!["--trace", "/nonexistent/t.msr", "--trace-time-unit", "ns"],
            "--trace-time-unit",
        ),
        (
            vec!["--trace", "/nonexistent/t.msr", "--skip-bad-lines"],
            "--skip-bad-lines",
        ),
        (vec!["--csv", "/nonexistent/x.csv"], "--csv"),
        (
            vec!["--regions", "4", "--redistribution", "m4"],
            "--redistribution",
        ),
        (vec!["--target", "fms-format", "--replay"], "--replay"),
        (vec!["--chain-within", "3"], "--chain-within"),
        (
            vec!["--chain", "2", "--chain-within", "0"],
            "--chain-within",
        ),
    ] {
        let mut args = vec!["torture", "--device", "nandsim-256m", "--ops", "50"];
        args.extend(&extra);
        let o = flashkit(&args);
        assert!(!o.status.success(), "{extra:?}");
        let err = text(&o.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{extra:?}: {err}");
        assert!(err.contains(needle), "{extra:?}: {err}");
    }
    let o = flashkit([
        "torture",
        "--device",
        "nandsim-256m",
        "--ops",
        "50",
        "--pages-per-block",
        "16",
        "--regions",
        "2",
        "--region-select",
        "most-garbage",
        "--cuts",
        "1000000",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["pages_per_block"], 16, "{v}");
    let n = v["cut_points"].as_u64().unwrap();
    assert!(
        text(&o.stderr).contains(&format!(
            "the workload has {n} cut points, and every one was cut"
        )),
        "{}",
        text(&o.stderr)
    );
}

/// When the fault-free run itself fails (bit flips without ECC) and no cut point runs, the
/// run says so instead of "the workload has 0 cut points, and every one was cut" and
/// warnings about what the cuts missed.
#[test]
fn a_failed_fault_free_run_is_not_a_cut_sample() {
    let o = flashkit([
        "torture",
        "--device",
        "mlc2-2g",
        "--seed",
        "3",
        "--cuts",
        "100",
        "--bitflip-rate",
        "1e-6",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(!err.contains("every one was cut"), "{err}");
    assert!(!err.contains("warning"), "{err}");
    assert!(
        err.contains("the fault-free run (no power cut) failed a check, so no cut point was run"),
        "{err}"
    );
    assert!(
        err.contains("fault-free run: read during the workload"),
        "{err}"
    );
    // A workload torture whose fault-free run fails still runs its cut points: the note
    // and the verdict say the run is one of the violations (QA stop 27: the note said no
    // cut point ran, under a list of failed cut points).
    let o = flashkit([
        "torture",
        "--device",
        "mlc2-2g",
        "--ops",
        "120",
        "--cuts",
        "20",
        "--seed",
        "4",
        "--ecc-bits",
        "2",
        "--bitflip-rate",
        "1e-4",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(!err.contains("no cut point was run"), "{err}");
    assert!(
        err.contains("it is the first of the violations")
            && err.contains("violation(s): the fault-free run and "),
        "{err}"
    );
}

/// Too few segments for the FMS's reserve: the error says how many this configuration
/// needs (its reserve depends on the policy's streams), not a fixed minimum.
#[test]
fn too_few_segments_says_what_the_fms_needs() {
    for (extra, needs) in [
        (vec![], "at least 8"),
        (
            vec!["--policy", "greedy", "--redistribution", "m1"],
            "at least 7",
        ),
    ] {
        for segments in ["4", "6"] {
            let mut args = vec!["torture", "--device", "mlc2-2g", "--segments", segments];
            args.extend(&extra);
            let o = flashkit(&args);
            let err = text(&o.stderr);
            assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(
                err.starts_with(&format!("flashkit: --segments: {segments} is too few"))
                    && err.contains(needs)
                    && err.contains("reserve"),
                "{args:?}: {err}"
            );
        }
    }
    // The minimum itself runs.
    let o = flashkit([
        "torture",
        "--device",
        "mlc2-2g",
        "--segments",
        "8",
        "--cuts",
        "5",
        "--ops",
        "50",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
}

/// `--target fms-format`: cuts in the format over the medium the workload left; the JSON
/// report counts what each cut's mount found.
#[test]
fn format_cuts_as_json() {
    let args = "torture --target fms-format --device nandsim-256m --seed 4 --json";
    let v = json(&ok(flashkit(args.split(' '))));
    assert_eq!(v["target"], "fms-format");
    assert_eq!(v["violations"], 0, "{v}");
    assert_eq!(v["cut_points"], v["ops"], "every program and erase is cut");
    let m = &v["format_mounts"];
    let sum: u64 = ["new_medium", "old_medium", "refused"]
        .iter()
        .map(|k| m[k].as_u64().unwrap_or_else(|| panic!("{k}: {v}")))
        .sum();
    assert_eq!(Some(sum), v["cut_points"].as_u64(), "{v}");
    assert!(v["recovery"]["earlier_format"].as_u64().unwrap() > 0, "{v}");
    let args = "torture --device nandsim-256m --ops 50 --cuts 3 --json";
    let v = json(&ok(flashkit(args.split(' '))));
    assert!(v["format_mounts"].is_null(), "{v}");
    // With failures: the format's own programs/erases fail (stop 28; refused before), and
    // the report counts those the format without a cut saw.
    let args = "torture --target fms-format --device nandsim-256m --seed 5 --failures 2 --json";
    let v = json(&ok(flashkit(args.split(' '))));
    assert_eq!(v["violations"], 0, "{v}");
    assert_eq!(v["fail_ops"][0], 1, "{v}");
    assert_eq!(v["erase_failures"], 1, "{v}");
    assert_eq!(v["cut_points"], v["ops"], "{v}");
}
