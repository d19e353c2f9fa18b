//! End-to-end tests of `flashkit bench`. Speeds are never asserted (they depend on the
//! machine); the counts behind them are deterministic and are.

mod common;
use common::*;

use serde_json::Value;

fn bench_json(extra: &[&str]) -> Vec<Value> {
    let mut args = vec![
        "bench",
        "--policy",
        "greedy,cat",
        "--written",
        "2MiB",
        "--warm",
        "1MiB",
        "--json",
    ];
    args.extend_from_slice(extra);
    json(&ok(flashkit(args))).as_array().expect("array").clone()
}

#[test]
fn reports_each_configuration_with_its_counts_and_rates() {
    let runs = bench_json(&["--repeat", "1"]);
    assert_eq!(runs.len(), 2);
    for (r, policy) in runs.iter().zip(["greedy", "cat"]) {
        assert_eq!(r["policy"], policy);
        // Every option value that produced it, as `sim --json` carries them.
        assert_eq!(r["options"]["policy"], policy, "{r}");
        // (Null where it has no effect: cb_age applies to cost-benefit only.)
        assert!(r["options"]["cb_age"].is_null(), "{r}");
        assert_eq!(r["options"]["unit"], 4096, "{r}");
        assert_eq!(r["job"].as_str().map(str::len), Some(16), "{r}");
        assert_eq!(r["written_bytes"], 2 << 20);
        // How the binary was built: the tests' builds are optimised.
        let build = r["build"].as_str().expect("build");
        assert!(
            build.starts_with("opt-level ") && !build.starts_with("opt-level 0"),
            "{r}"
        );
        // 2 MiB of 4 KiB requests on 4 KiB blocks.
        assert_eq!(r["user_writes"], 512);
        let user = r["user_writes"].as_f64().unwrap();
        let flash = r["flash_writes"].as_f64().unwrap();
        assert!(flash > user, "90/10 at 90 % fill cleans: {r}");
        assert!((r["write_amplification"].as_f64().unwrap() - flash / user).abs() < 1e-9);
        // Every block write is at least a program; copies also read, updates clear a flag.
        let ops = r["device_ops"].as_f64().unwrap();
        assert!(ops > flash, "{r}");
        assert!((r["device_ops_per_user_write"].as_f64().unwrap() - ops / user).abs() < 1e-9);
        let best = r["best_s"].as_f64().unwrap();
        assert!(best > 0.0 && best <= r["median_s"].as_f64().unwrap());
        let rate = r["user_writes_per_s"].as_f64().unwrap();
        assert!((rate * best - user).abs() < 1e-6 * user);
        assert!((r["flash_writes_per_s"].as_f64().unwrap() * best - flash).abs() < 1e-6 * flash);
        assert!(
            (r["ns_per_device_op"].as_f64().unwrap() * ops - best * 1e9).abs() < 1e-6 * best * 1e9
        );
    }
}

#[test]
fn repetitions_make_the_same_writes() {
    let once = bench_json(&["--repeat", "1"]);
    let thrice = bench_json(&["--repeat", "3"]);
    for (a, b) in once.iter().zip(&thrice) {
        assert_eq!(a["flash_writes"], b["flash_writes"]);
        assert_eq!(a["device_ops"], b["device_ops"]);
        assert_eq!(b["repeat"], 3);
    }
}

#[test]
fn prints_a_table_by_default() {
    let o = ok(flashkit([
        "bench",
        "--policy",
        "greedy",
        "--written",
        "1MiB",
        "--warm",
        "0",
        "--repeat",
        "1",
    ]));
    let t = text(&o.stdout);
    assert!(t.contains("user writes/s") && t.contains("greedy"), "{t}");
    assert!(t.lines().last().unwrap().starts_with("build "), "{t}");
}

/// bench draws no figures, so it offers no plot options (its help used to list --plot,
/// --x and --y, which it then refused); sim keeps them.
#[test]
fn bench_has_no_plot_options() {
    let h = text(&ok(flashkit(["bench", "--help"])).stdout);
    for flag in ["--plot", "--x ", "--y "] {
        assert!(!h.contains(flag), "bench --help lists {flag}: {h}");
    }
    assert!(h.contains("--policy") && h.contains("--warm"), "{h}");
    let h = text(&ok(flashkit(["sim", "--help"])).stdout);
    for flag in ["--plot", "--x ", "--y "] {
        assert!(h.contains(flag), "sim --help lacks {flag}: {h}");
    }
    for args in [["--x", "fill"], ["--y", "erasures"]] {
        let o = flashkit(["bench"].iter().chain(&args));
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(text(&o.stderr).contains("unexpected argument"), "{args:?}");
    }
}

/// bench runs synthetic workloads only: its help offers no trace workload and no trace
/// input options, and a trace run is refused for that first, before any error about
/// its other options (QA stop 24, F5).
#[test]
fn bench_offers_no_trace_input() {
    let h = text(&ok(flashkit(["bench", "--help"])).stdout);
    for text in [
        "trace:FILE",
        "Trace input",
        "--trace-format",
        "--trace-map",
        "--skip-bad-lines",
        "--blkparse-action",
    ] {
        assert!(!h.contains(text), "bench --help offers {text}: {h}");
    }
    assert!(h.contains("--workload"), "{h}");
    for args in [
        vec!["--written", "1MiB", "--workload", "trace:none.csv"],
        vec!["--workload", "trace:none.csv", "--trace-format", "msr"],
    ] {
        let mut a = vec!["bench", "--repeat", "1", "--policy", "greedy"];
        a.extend(args.iter().copied());
        let err = fails_with_all(flashkit(&a), &["synthetic workloads only"]);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    fails_with_all(
        flashkit(["bench", "--repeat", "1", "--trace-limit", "5"]),
        &["--trace-limit: bench runs synthetic workloads only"],
    );
}

#[test]
fn bad_options_are_one_line_errors() {
    for (args, needle) in [
        (vec!["--repeat", "0"], "--repeat"),
        (vec!["--warm", "lots"], "--warm"),
        (vec!["--arrival", "poisson:1"], "--arrival"),
        (vec!["--plot", "x.svg"], "--plot"),
        (
            vec!["--workload", "trace:none.csv"],
            "synthetic workloads only",
        ),
        (
            vec!["--written", "1KiB"],
            "whole number of 4096-byte requests",
        ),
        (
            vec!["--written", "6KiB"],
            "whole number of 4096-byte requests",
        ),
        (vec!["--warm", "1KiB"], "warm"),
    ] {
        let mut a = vec!["bench"];
        a.extend(args.iter().copied());
        let o = flashkit(&a);
        let err = text(&o.stderr);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
}

#[test]
fn sizes_out_of_range_are_errors_not_clamped() {
    for (args, needle) in [
        (vec!["--warm", "18446744073709551616"], "--warm"),
        (vec!["--written", "18446744073709551616"], "--written"),
        (vec!["--warm", "100.5"], "--warm"),
    ] {
        let mut a = vec!["bench"];
        a.extend(args.iter().copied());
        let o = flashkit(&a);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.starts_with("flashkit: ") && err.contains(needle),
            "{args:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
}

/// The timed part is the continuation of the warm-up in the workload a `sim` run of both
/// would write: with a `phases:` workload it covers the later phases too (it used to be
/// the first phase only, so `phases:hotcold:90/10,random` measured plain 90/10). Checked
/// exactly against `sim`: the timed writes are the second half of a run writing both.
#[test]
fn phases_span_the_warm_up_and_the_timed_writes() {
    let counts = |r: &Value| {
        (
            r["user_writes"].as_u64().unwrap(),
            r["flash_writes"].as_u64().unwrap(),
        )
    };
    let sim = |workload: &str, written: &str| {
        let v = json(&ok(flashkit([
            "sim",
            "--policy",
            "greedy",
            "--workload",
            workload,
            "--written",
            written,
            "--json",
        ])));
        counts(&v[0])
    };
    let phases = "phases:hotcold:90/10,random";
    let b = json(&ok(flashkit([
        "bench",
        "--policy",
        "greedy",
        "--workload",
        phases,
        "--warm",
        "4MiB",
        "--written",
        "4MiB",
        "--repeat",
        "1",
        "--json",
    ])));
    let timed = counts(&b[0]);
    // The first phase is the first half: 4 MiB of 90/10, as a run of it alone.
    let (all, first) = (sim(phases, "8MiB"), sim("hotcold:90/10", "4MiB"));
    assert_eq!(timed, (all.0 - first.0, all.1 - first.1));
    let plain = json(&ok(flashkit([
        "bench",
        "--policy",
        "greedy",
        "--warm",
        "4MiB",
        "--written",
        "4MiB",
        "--repeat",
        "1",
        "--json",
    ])));
    assert_ne!(counts(&plain[0]), timed);
    // A request per phase is counted over both parts (QA stop 27: the timed requests
    // alone were, so two timed requests after a warm-up were refused for four phases),
    // and refused when both together fall short.
    let four = "phases:random,sequential,random,sequential";
    let run = |warm: &str| {
        flashkit([
            "bench",
            "--policy",
            "greedy",
            "--workload",
            four,
            "--warm",
            warm,
            "--written",
            "8KiB",
            "--repeat",
            "1",
            "--json",
        ])
    };
    ok(run("8MiB"));
    fails_with_all(run("0"), &["warm + written:", "needs at least 4 requests"]);
}
