//! End-to-end tests of `flashkit sim`'s reports: what a result says about where its
//! device came from and which options applied, the table's columns, the metrics beside
//! write amplification, grids in which some jobs fail, and the errors of impossible
//! configurations. Runs are small (a few MiB written on a few dozen erase blocks).

use std::process::Output;

mod common;
use common::*;

use serde_json::Value;

fn stdout(o: &Output) -> String {
    text(&o.stdout)
}

/// The header and data lines of a printed table (without the dashes under the header).
fn table_lines(out: &str) -> (String, Vec<String>) {
    let mut lines = out.lines();
    let head = lines.next().unwrap_or_default().to_string();
    let rows = lines
        .filter(|l| !l.starts_with("---"))
        .map(String::from)
        .collect();
    (head, rows)
}

/// The cells of a table line (columns are at least two spaces apart).
fn cells(line: &str) -> Vec<&str> {
    line.split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}

/// A small run of CAT on the Intel card: 48 erase blocks, 80 % filled, 2 MiB written
/// (`--fill` and `--written` unless `extra` gives them; not `--written` for a trace).
fn small<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["sim", "--blocks", "48", "--policy", "cat"];
    let trace = extra.iter().any(|a| a.starts_with("trace:"));
    for (flag, value) in [("--fill", "0.8"), ("--written", "2MiB")] {
        if !extra.contains(&flag) && (!trace || flag != "--written") {
            v.extend([flag, value]);
        }
    }
    v.extend_from_slice(extra);
    v
}

/// A device read from a file is labelled as such, and `options.device` (the default
/// preset, which did not run) is null: an edited copy of a preset is not that preset.
#[test]
fn device_files_label_their_results() {
    let dir = tempfile::tempdir().unwrap();
    let devices = json(&ok(flashkit(["devices", "--json"])));
    let mut intel = devices
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "intel-series2plus-24m")
        .unwrap()
        .clone();
    // An edited copy that keeps the preset's name.
    intel["erase_us"] = Value::from(2_000_000.0);
    let file = dir.path().join("intel-slow.json");
    std::fs::write(&file, intel.to_string()).unwrap();
    let f = path_str(&file);
    let v = json(&ok(flashkit(small(&["--device-file", f, "--json"]))));
    let r = &v[0];
    assert_eq!(r["options"]["device"], Value::Null, "{r}");
    assert_eq!(r["options"]["device_file"], f);
    assert_eq!(r["device"], format!("intel-series2plus-24m (from {f})"));
    // The preset itself keeps its plain name, and the two are different jobs.
    let p = json(&ok(flashkit(small(&["--json"]))));
    assert_eq!(p[0]["device"], "intel-series2plus-24m");
    assert_eq!(p[0]["options"]["device"], "intel-series2plus-24m");
    assert_ne!(p[0]["job"], r["job"]);
    // --help says how the label reads.
    let help = stdout(&ok(flashkit(["sim", "--help"])));
    assert!(help.contains("NAME (from FILE)"), "{help}");
}

/// Two fills that differ in the third decimal print differently; a fill with two exact
/// decimals prints as the recorded tables show it.
#[test]
fn fills_print_as_given() {
    let out = stdout(&ok(flashkit([
        "sim",
        "--blocks",
        "48",
        "--fill",
        "0.75,0.755,0.7",
        "--written",
        "256KiB",
        "--policy",
        "greedy",
    ])));
    let (head, rows) = table_lines(&out);
    let col = head.split_whitespace().position(|h| h == "fill").unwrap();
    // "redist", "clean cost" etc. are single words up to the fill column.
    let fills: Vec<&str> = rows
        .iter()
        .map(|r| r.split_whitespace().nth(col).unwrap())
        .collect();
    assert_eq!(fills, ["0.75", "0.755", "0.70"], "{out}");
}

/// A fill that does not fit because of the block size (4 KiB blocks in spare mode on
/// 512-byte pages waste a slot per segment) names the block size that fits.
#[test]
fn too_full_names_a_block_size_that_fits() {
    for device in ["nandsim-256m", "chang-kuo-16g"] {
        fails_with_all(
            flashkit([
                "sim",
                "--device",
                device,
                "--policy",
                "greedy",
                "--written",
                "1MiB",
            ]),
            &["fill: 0.9", "lower --fill", "--block-size 1KiB"],
        );
    }
    // No block size helps: only --fill is suggested.
    let err = fails_with_all(
        flashkit(small(&["--fill", "0.99"])),
        &["fill: 0.99", "lower --fill"],
    );
    assert!(!err.contains("--block-size"), "{err}");
}

/// Options a job cannot run with are refused before any job of the grid runs, in one
/// line with numbers as written (QA stop 32): a fill leaving no room for one request (the
/// 0.7 job ran and printed its table first, then the grid failed), a write/erase ratio
/// whose cleaning cost is no finite number (1e308 gave a null cost, quoted with 309
/// digits), a Poisson rate whose mean gap is past the clock's range (refused when its
/// first request came, as "inf s").
#[test]
fn options_that_cannot_run_are_refused_before_the_grid_runs() {
    let o = flashkit(small(&["--block-size", "1KiB", "--fill", "0.7,0.0001"]));
    assert!(o.stdout.is_empty(), "nothing ran: {}", text(&o.stdout));
    fails_with_all(
        o,
        &["fill=0.0001", "leaving 0 writable bytes", "raise --fill"],
    );
    let e = fails_with_all(
        flashkit(small(&["--write-erase-ratio", "1e308"])),
        &["--write-erase-ratio", "1e308 must be at most 1e9"],
    );
    assert!(e.len() < 100, "{e}");
    fails_with_all(
        flashkit(small(&["--arrival", "poisson:1e-300"])),
        &[
            "--arrival",
            "past the simulator's clock range",
            "above 1.084e-7",
        ],
    );
    ok(flashkit(small(&[
        "--arrival",
        "poisson:1e-6",
        "--written",
        "4KiB",
    ])));
    // A rate whose requests together pass the clock is refused before the grid runs too.
    let o = flashkit(small(&["--arrival", "poisson:1e-6", "--fill", "0.5,0.8"]));
    assert!(o.stdout.is_empty(), "nothing ran: {}", text(&o.stdout));
    fails_with_all(
        o,
        &["arrival: 512 requests", "past the simulator's clock range"],
    );
}

/// The grid of a lifetime run in which greedy wears the device out and CAT survives: the
/// table (and JSON) has CAT's row, greedy's error is on stderr naming its options, and
/// the exit status is 1. CAT retired segments, so the table shows them.
#[test]
fn failed_jobs_do_not_hide_the_others() {
    let args = [
        "sim",
        "--blocks",
        "48",
        "--fill",
        "0.8",
        "--written",
        "8MiB",
        "--endurance",
        "8",
        "--policy",
        "greedy,cat",
    ];
    let o = flashkit(args);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("flashkit: policy=greedy: ") && err.contains("worn out"),
        "{err}"
    );
    let out = stdout(&o);
    let (head, rows) = table_lines(&out);
    assert_eq!(rows.len(), 1, "{out}");
    assert!(rows[0].contains(" cat "), "{out}");
    let col = head.split_whitespace().position(|h| h == "retired");
    assert!(col.is_some(), "{out}");

    let mut with_json = args.to_vec();
    with_json.push("--json");
    let o = flashkit(&with_json);
    assert_eq!(o.status.code(), Some(1));
    let v = json(&o);
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["policy"], "cat");
    let retired = rows[0]["retired_segments"].as_u64().unwrap();
    assert!(retired > 0, "{}", rows[0]);

    // The CSV too.
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("r.csv");
    let mut with_csv = args.to_vec();
    with_csv.extend(["--csv", path_str(&csv)]);
    assert_eq!(flashkit(&with_csv).status.code(), Some(1));
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(text.lines().next().unwrap().contains("retired_segments"));
}

/// The metrics beside write amplification: host bytes, byte write amplification (with
/// 512-byte requests on 4 KiB blocks, 8 times the block figure), spare reads, retired
/// segments; in JSON and CSV, defined in --help.
#[test]
fn byte_write_amplification_and_spare_reads_are_reported() {
    let v = json(&ok(flashkit(small(&["--unit", "512", "--json"]))));
    let r = &v[0];
    let wa = r["write_amplification"].as_f64().unwrap();
    let bwa = r["byte_write_amplification"].as_f64().unwrap();
    assert_eq!(r["host_bytes_written"], 2 << 20);
    let flash = r["flash_writes"].as_f64().unwrap();
    assert_eq!(bwa, flash * 4096.0 / (2 << 20) as f64);
    assert!((bwa - wa * 8.0).abs() < 1e-9, "{wa} {bwa}");
    assert_eq!(r["retired_segments"], 0);
    // The Intel card has no spare area; nandsim's mount scans its spare areas.
    assert_eq!(r["spare_reads"], 0);
    let n = json(&ok(flashkit([
        "sim",
        "--device",
        "nandsim-256m",
        "--blocks",
        "64",
        "--block-size",
        "1KiB",
        "--fill",
        "0.8",
        "--written",
        "256KiB",
        "--policy",
        "cat",
        "--json",
    ])));
    assert!(n[0]["spare_reads"].as_u64().unwrap() > 0, "{}", n[0]);

    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("r.csv");
    ok(flashkit(small(&["--csv", path_str(&csv)])));
    let text = std::fs::read_to_string(&csv).unwrap();
    let head = text.lines().next().unwrap();
    for k in [
        "host_bytes_written",
        "byte_write_amplification",
        "retired_segments",
        "spare_reads",
    ] {
        assert!(head.split(',').any(|c| c == k), "{head}");
    }
    let help = stdout(&ok(flashkit(["sim", "--help"])));
    for k in [
        "byte_write_amplification",
        "host_bytes_written",
        "write_amplification",
        "HDR histogram",
    ] {
        assert!(help.contains(k), "--help lacks {k}: {help}");
    }
}

/// Options that vary get a column; latency columns appear when requests arrive on their
/// own (poisson), not in a closed-loop table; no retired column when nothing retired.
#[test]
fn table_columns_follow_the_grid() {
    let out = stdout(&ok(flashkit(small(&[
        "--written",
        "1MiB,2MiB",
        "--block-size",
        "2KiB,4KiB",
    ]))));
    let (head, rows) = table_lines(&out);
    assert_eq!(
        cells(&head)[..3],
        ["written", "block size", "workload"],
        "{out}"
    );
    assert_eq!(rows.len(), 4);
    assert_eq!(cells(&rows[1])[..2], ["1048576", "4096"], "{out}");
    assert!(
        !head.contains("latency") && !head.contains("retired"),
        "{out}"
    );

    let out = stdout(&ok(flashkit(small(&["--arrival", "closed,poisson:20"]))));
    let (head, rows) = table_lines(&out);
    assert_eq!(cells(&head)[0], "arrival", "{out}");
    assert!(
        head.contains("mean latency") && head.contains("p99 latency"),
        "{out}"
    );
    assert_eq!(rows.len(), 2);
}

/// A trace workload's options object has no `written` or `unit` (they do not apply), so
/// they are not part of its job id either.
#[test]
fn trace_jobs_null_the_options_they_ignore() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.csv");
    ok(flashkit([
        "trace",
        "generate",
        path_str(&trace),
        "--format",
        "msr",
        "--workload",
        "hotcold:90/10",
        "--requests",
        "500",
        "--space",
        "1MiB",
    ]));
    let w = format!("trace:{}", path_str(&trace));
    let v = json(&ok(flashkit(small(&["--workload", &w, "--json"]))));
    let o = &v[0]["options"];
    assert_eq!(o["written"], Value::Null, "{o}");
    assert_eq!(o["unit"], Value::Null, "{o}");
    // Beside a synthetic workload, that one keeps its values.
    let v = json(&ok(flashkit(small(&[
        "--workload",
        &w,
        "--workload",
        "random",
        "--written",
        "2MiB",
        "--json",
    ]))));
    assert_eq!(v[0]["options"]["written"], Value::Null);
    assert_eq!(v[1]["options"]["written"], 2 << 20);
    assert_eq!(v[1]["options"]["unit"], 4096);

    // --trace-map takes a comma list like every grid option: one job per map.
    let v = json(&ok(flashkit(small(&[
        "--workload",
        &w,
        "--trace-map",
        "modulo,compact",
        "--json",
    ]))));
    let maps: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["options"]["trace_map"].as_str().unwrap())
        .collect();
    assert_eq!(maps, ["modulo", "compact"]);

    // So does --device: a grid over presets, each labelled with its own.
    let v = json(&ok(flashkit(small(&[
        "--device",
        "intel-series2plus-24m,nandsim-256m",
        "--block-size",
        "1KiB",
        "--unit",
        "1KiB",
        "--json",
    ]))));
    let devices: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["device"].as_str().unwrap())
        .collect();
    assert_eq!(devices, ["intel-series2plus-24m", "nandsim-256m"]);
    fails_with_all(
        flashkit(small(&["--device", "intel-series2plus-24m,nosuch"])),
        &["nosuch"],
    );

    // --trace-limit 0 is refused as such, like `trace stats` and `torture` refuse it.
    fails_with_all(
        flashkit(small(&["--workload", &w, "--trace-limit", "0"])),
        &["--trace-limit", "at least 1"],
    );
}

/// Help texts say what the commands do.
#[test]
fn help_names_every_fms_command_and_traces() {
    let out = stdout(&ok(flashkit(["--help"])));
    let fms = out
        .lines()
        .find(|l| l.trim_start().starts_with("fms"))
        .unwrap();
    assert!(fms.contains("trim"), "{fms}");
    let sim = out
        .lines()
        .find(|l| l.trim_start().starts_with("sim"))
        .unwrap();
    assert!(sim.contains("trace"), "{sim}");
}

/// A device without a spare area has no spare read cost: `nand info` shows "-", as
/// `flashkit devices` does.
#[test]
fn no_spare_area_no_spare_read_cost() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("intel.img");
    ok(flashkit([
        "nand",
        "format",
        path_str(&img),
        "--device",
        "intel-series2plus-24m",
        "--blocks",
        "8",
    ]));
    let info = stdout(&ok(flashkit(["nand", "info", path_str(&img)])));
    assert!(info.contains("spare read -,"), "{info}");
    let devices = stdout(&ok(flashkit(["devices"])));
    let (head, rows) = table_lines(&devices);
    let at = cells(&head)
        .iter()
        .position(|h| *h == "spare read")
        .unwrap();
    let intel = rows
        .iter()
        .find(|r| r.starts_with("intel-series2plus-24m"))
        .unwrap();
    assert_eq!(cells(intel)[at], "-", "{devices}");
}

/// The non-null values of a result's `options` as a sweep spec (TOML).
fn options_as_spec(options: &Value) -> String {
    options
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| format!("{k} = {v}\n"))
        .collect()
}

/// A result's `options` are a re-runnable job (QA stop 24, F1, F2, F9): options with no
/// effect on the job are null (the trace options of a synthetic workload, `cat_age` under
/// greedy, the DAC options with one region, `unit` with a trace), so the non-null ones,
/// given to `sweep`, are accepted and run the same job with the same id and results. A
/// one-region result reports no region threshold, and a trace result no request size.
/// Options null only where they do not apply make no table column.
#[test]
fn options_run_again_as_the_same_job() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.csv");
    ok(flashkit([
        "trace",
        "generate",
        path_str(&trace),
        "--format",
        "msr",
        "--workload",
        "hotcold:90/10",
        "--requests",
        "300",
        "--space",
        "1MiB",
    ]));
    let w = format!("trace:{}", path_str(&trace));
    let grid = json(&ok(flashkit(small(&[
        "--policy",
        "greedy,cat",
        "--regions",
        "1,2",
        "--region-threshold",
        "30m",
        "--index-wear-gap",
        "none",
        "--json",
    ]))));
    let traced = json(&ok(flashkit(small(&["--workload", &w, "--json"]))));
    let mut results: Vec<Value> = grid.as_array().unwrap().clone();
    results.extend(traced.as_array().unwrap().iter().cloned());
    assert_eq!(results.len(), 5);
    for r in &results {
        let o = &r["options"];
        let one_region = o["regions"] == 1;
        let trace = r["trace"].is_object();
        assert_eq!(o["region_threshold"].is_null(), one_region, "{o}");
        assert_eq!(r["region_threshold_s"].is_null(), one_region, "{r}");
        assert_eq!(o["cat_age"].is_null(), o["policy"] == "greedy", "{o}");
        assert!(
            o["cb_age"].is_null() && o["adaptive_threshold"].is_null(),
            "{o}"
        );
        assert_eq!(o["trace_format"].is_null(), !trace, "{o}");
        assert_eq!(o["trace_map"].is_null(), !trace, "{o}");
        assert_eq!(r["unit_bytes"].is_null(), trace, "{r}");
        assert_eq!(o["unit"].is_null(), trace, "{o}");
        // An option whose none is not its default says "none", not null (QA stop 32:
        // null read back as the default, 8, another job).
        let gap = if trace {
            Value::from(8)
        } else {
            Value::from("none")
        };
        assert_eq!(o["index_wear_gap"], gap, "{o}");
        let spec = dir.path().join("again.toml");
        std::fs::write(&spec, options_as_spec(o)).unwrap();
        let again = json(&ok(flashkit(["sweep", path_str(&spec), "--json"])));
        assert_eq!(again["job"], r["job"], "{}", options_as_spec(o));
        for k in ["erasures", "blocks_copied", "device_time_s", "unit_bytes"] {
            assert_eq!(again[k], r[k], "{k}");
        }
    }

    // A seed a sweep file cannot hold (TOML integers are signed 64-bit) is refused.
    fails_with_all(
        flashkit(small(&["--seed", "9223372036854775808"])),
        &["--seed", "at most 9223372036854775807"],
    );

    // The flagship's four policies: cat_age, cb_age and the adaptive options apply to
    // some policies only, and are no columns of the table.
    let out = stdout(&ok(flashkit(small(&[
        "--policy",
        "greedy,cost-benefit,cat,adaptive",
        "--written",
        "256KiB",
    ]))));
    let (head, rows) = table_lines(&out);
    assert_eq!(rows.len(), 4, "{out}");
    for col in ["cat age", "cb age", "adaptive", "trace"] {
        assert!(!head.contains(col), "{head}");
    }
}

/// A run whose every operation is timed at zero took no device time: its throughput is
/// undefined, null in JSON and `-` in the table (QA stop 32: it read 0 B/s).
#[test]
fn throughput_without_device_time_is_null() {
    let args = [
        "sim",
        "--device",
        "nandsim-256m",
        "--blocks",
        "128",
        "--fill",
        "0.6",
        "--written",
        "2MiB",
        "--block-size",
        "1KiB",
        "--policy",
        "greedy",
        "--read-us",
        "0",
        "--program-us",
        "0",
        "--erase-us",
        "0",
        "--spare-read-us",
        "0",
    ];
    let mut with_json = args.to_vec();
    with_json.push("--json");
    let v = json(&ok(flashkit(&with_json)));
    assert_eq!(v[0]["device_time_s"], 0.0, "{v}");
    assert!(v[0]["throughput_bytes_per_s"].is_null(), "{v}");
    let out = text(&ok(flashkit(args)).stdout);
    assert!(!out.contains("0 B/s"), "{out}");
}

/// `device_time_s` and `throughput_bytes_per_s` are the device's busy time, the same for
/// every arrival process; `elapsed_time_s` is the simulated span, idle time included
/// (QA stop 24, F3). Both are in `--help`.
#[test]
fn busy_time_and_elapsed_time_are_reported_apart() {
    let v = json(&ok(flashkit(small(&[
        "--written",
        "256KiB",
        "--arrival",
        "poisson:0.1,closed",
        "--json",
    ]))));
    let (poisson, closed) = (&v[0], &v[1]);
    assert_eq!(poisson["arrival"], "poisson:0.1");
    let f = |r: &Value, k: &str| r[k].as_f64().unwrap();
    assert_eq!(poisson["device_time_s"], closed["device_time_s"]);
    assert_eq!(
        poisson["throughput_bytes_per_s"],
        closed["throughput_bytes_per_s"]
    );
    assert_eq!(f(closed, "elapsed_time_s"), f(closed, "device_time_s"));
    // 64 requests at 0.1 per second arrive over about 640 s of simulated time.
    let requests = f(poisson, "requests");
    assert_eq!(requests, 64.0);
    assert!(
        f(poisson, "elapsed_time_s") > requests / 0.1 / 2.0,
        "{poisson}"
    );
    assert!(f(poisson, "elapsed_time_s") > f(poisson, "device_time_s"));
    let help = stdout(&ok(flashkit(["sim", "--help"])));
    for k in [
        "elapsed_time_s",
        "device_time_s",
        "busy time",
        "trim_list_slots",
    ] {
        assert!(help.contains(k), "{k}");
    }
}

/// In spare mode a trace's trims program trim-list slots: `trim_list_slots` reports
/// them, so `flash_writes = user_writes + blocks_copied + trim_list_slots` (QA stop 24,
/// F17); a synthetic run (no trims) programs none.
#[test]
fn trim_list_slots_complete_the_flash_writes() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("mm.fio");
    ok(flashkit([
        "trace",
        "generate",
        path_str(&trace),
        "--format",
        "fio",
        "--workload",
        "multimedia",
        "--requests",
        "2000",
        "--space",
        "48MiB",
    ]));
    let w = format!("trace:{}", path_str(&trace));
    for args in [vec!["--workload", w.as_str()], vec!["--written", "2MiB"]] {
        let mut a = vec![
            "sim", "--device", "mlc2-2g", "--blocks", "256", "--policy", "greedy", "--json",
        ];
        a.extend(args);
        let v = json(&ok(flashkit(&a)));
        let r = &v[0];
        let n = |k: &str| r[k].as_u64().unwrap();
        assert_eq!(
            n("flash_writes"),
            n("user_writes") + n("blocks_copied") + n("trim_list_slots"),
            "{r}"
        );
        assert_eq!(n("trim_list_slots") > 0, n("trims") > 0, "{r}");
        if r["trace"].is_object() {
            assert!(n("trim_list_slots") > 0, "{r}");
        }
    }
}

/// An option with no effect on the device is refused in one line: header-mode devices
/// keep no segment summaries (QA stop 24, F4); a spare-mode device takes the option.
#[test]
fn segment_summaries_need_a_device_that_keeps_them() {
    let e = fails_with_all(
        flashkit(small(&["--no-segment-summaries"])),
        &["--no-segment-summaries: has no effect: header-mode devices"],
    );
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    let v = json(&ok(flashkit([
        "sim",
        "--device",
        "slc-large-1g",
        "--blocks",
        "256",
        "--policy",
        "greedy",
        "--written",
        "256KiB",
        "--no-segment-summaries",
        "--json",
    ])));
    assert_eq!(v[0]["options"]["segment_summaries"], false);
    // On the Intel card the option is null (it does not apply).
    let v = json(&ok(flashkit(small(&["--written", "256KiB", "--json"]))));
    assert!(v[0]["options"]["segment_summaries"].is_null());
}

/// An error with one cause for the whole grid is one line, without the options of a
/// job it does not depend on (QA stop 24, F6).
#[test]
fn grid_wide_errors_are_said_once() {
    for (args, needle) in [
        (vec!["--written", "4095"], "written: 4095 bytes"),
        (vec!["--unit", "1GiB"], "written: 2097152 bytes"),
        (
            vec!["--workload", "trace:no-such-trace", "--seed", "1,2"],
            "no-such-trace: cannot open",
        ),
    ] {
        let mut a = small(&args);
        a.extend(["--policy", "greedy,cat"]);
        let o = flashkit(&a);
        assert_eq!(o.status.code(), Some(1));
        let err = text(&o.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with(&format!("flashkit: {needle}")), "{err}");
        assert!(o.stdout.is_empty());
    }
    // So is an error every job meets while running (a malformed line of their trace).
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.msr");
    std::fs::write(&bad, "128166372000000000,h,0,Write,0,4096,0\nbad line\n").unwrap();
    let w = format!("trace:{}", path_str(&bad));
    let e = fails_with_all(
        flashkit(small(&["--workload", &w, "--policy", "greedy,cat"])),
        &[":2: timestamp 'bad line'"],
    );
    assert!(!e.contains("policy="), "{e}");
}

/// A `phases:` workload needs a request per phase: fewer is refused in one line (its last
/// phases silently never ran; QA stop 24, F13).
#[test]
fn phases_with_fewer_requests_than_phases_are_refused() {
    let out = flashkit([
        "sim",
        "--workload",
        "phases:random,random,random",
        "--written",
        "8KiB",
        "--unit",
        "4KiB",
    ]);
    fails_with_all(
        out,
        &["written", "3 phases", "at least 3 requests", "2 given"],
    );
}
