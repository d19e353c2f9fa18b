//! End-to-end tests of `flashkit trace stats|convert|generate` and of trace workloads in
//! `flashkit sim`, including the one-line `FILE:LINE` error for malformed traces.

use std::process::Output;

mod common;
use common::*;

/// Non-zero exit and exactly one `flashkit: …` line on stderr that contains `needle`.
fn fails_with(o: Output, needle: &str) {
    fails_with_all(o, &[needle]);
}

#[test]
fn generate_stats_convert() {
    let dir = tempfile::tempdir().unwrap();
    let msr = dir.path().join("hc.csv");
    let o = ok(flashkit([
        "trace",
        "generate",
        path_str(&msr),
        "--format",
        "msr",
        "--workload",
        "hotcold:90/10",
        "--requests",
        "20000",
        "--space",
        "1MiB",
        "--read-fraction",
        "0.25",
    ]));
    assert!(String::from_utf8_lossy(&o.stdout).contains("20000 records"));
    let s = json(&ok(flashkit([
        "trace",
        "stats",
        path_str(&msr),
        "--json",
        "--space",
        "1MiB",
    ])));
    assert_eq!(s["requests"], 20000);
    assert_eq!(s["format"], "msr");
    assert_eq!(
        s["reads"].as_u64().unwrap() + s["writes"].as_u64().unwrap(),
        20000
    );
    for key in [
        "read_bytes",
        "write_bytes",
        "write_classes",
        "size_histogram",
        "footprint_bytes",
        "write_locality",
        "sequential_percent",
        "interarrival_mean_us",
        "interarrival_p50_us",
        "interarrival_p99_us",
    ] {
        assert!(s.get(key).is_some(), "missing {key}");
    }
    assert_eq!(s["write_classes"]["small"]["count_percent"], 100.0);
    let loc = &s["write_locality"][2];
    assert_eq!(loc["data_percent"], 10.0);
    // 90/10 over a space it writes many times over: ~90% of writes in 10% of the data.
    assert!(loc["writes_percent"].as_f64().unwrap() > 85.0, "{loc}");

    // The table report names the Chang & Kuo classes and the locality points.
    let table = String::from_utf8(ok(flashkit(["trace", "stats", path_str(&msr)])).stdout).unwrap();
    assert!(table.contains("small (<= 8 sectors)"), "{table}");
    assert!(
        table.contains("of writes go to 10% of the written data"),
        "{table}"
    );

    // msr -> fio.gz -> blkparse, same statistics.
    let fio = dir.path().join("hc.fio.gz");
    let o = ok(flashkit([
        "trace",
        "convert",
        path_str(&msr),
        path_str(&fio),
        "--to",
        "fio",
        "--json",
    ]));
    assert_eq!(json(&o)["records"], 20000);
    let bytes = std::fs::read(&fio).unwrap();
    assert_eq!(&bytes[..2], &[0x1f, 0x8b], "gzip output for .gz");
    let blk = dir.path().join("hc.blk");
    ok(flashkit([
        "trace",
        "convert",
        path_str(&fio),
        path_str(&blk),
        "--to",
        "blkparse",
    ]));
    let s2 = json(&ok(flashkit([
        "trace",
        "stats",
        path_str(&blk),
        "--json",
        "--space",
        "1MiB",
    ])));
    for key in [
        "requests",
        "reads",
        "write_bytes",
        "footprint_bytes",
        "write_locality",
    ] {
        assert_eq!(s[key], s2[key], "{key}");
    }
    // CSV as well.
    let csv = dir.path().join("s.csv");
    ok(flashkit([
        "trace",
        "stats",
        path_str(&blk),
        "--csv",
        path_str(&csv),
        "--json",
    ]));
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(text.starts_with("file,format,requests,"), "{text}");
}

#[test]
fn generate_rootdisk_and_multimedia() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root.spc");
    ok(flashkit([
        "trace",
        "generate",
        path_str(&root),
        "--format",
        "spc",
        "--workload",
        "rootdisk",
        "--requests",
        "20000",
        "--space",
        "32MiB",
    ]));
    let s = json(&ok(flashkit([
        "trace",
        "stats",
        path_str(&root),
        "--json",
        "--space",
        "32MiB",
    ])));
    let small = s["write_classes"]["small"]["count_percent"]
        .as_f64()
        .unwrap();
    assert!((small - 62.0).abs() < 2.5, "{small}");
    let mm = dir.path().join("mm.log");
    ok(flashkit([
        "trace",
        "generate",
        path_str(&mm),
        "--format",
        "fio",
        "--workload",
        "multimedia",
        "--requests",
        "5000",
        "--space",
        "64MiB",
    ]));
    let s = json(&ok(flashkit(["trace", "stats", path_str(&mm), "--json"])));
    assert!(
        s["write_classes"]["large"]["count_percent"]
            .as_f64()
            .unwrap()
            > 85.0
    );
    assert!(s["trims"].as_u64().unwrap() > 0);
}

#[test]
fn sim_runs_a_trace_workload() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.fio");
    ok(flashkit([
        "trace",
        "generate",
        path_str(&t),
        "--format",
        "fio",
        "--requests",
        "3000",
        "--space",
        "21MiB",
        "--read-fraction",
        "0.2",
    ]));
    let w = format!("trace:{}", path_str(&t));
    let r = json(&ok(flashkit([
        "sim",
        "--workload",
        &w,
        "--policy",
        "greedy",
        "--json",
    ])));
    let r = &r[0];
    assert_eq!(r["workload"], w);
    assert_eq!(r["arrival"], "trace");
    assert_eq!(r["requests"], 3000);
    assert!(r["user_reads"].as_u64().unwrap() > 0);
    assert_eq!(r["trace"]["records"], 3000);
    assert_eq!(r["trace"]["map"], "modulo");
    let r = json(&ok(flashkit([
        "sim",
        "--workload",
        &w,
        "--policy",
        "greedy",
        "--json",
        "--arrival",
        "closed",
        "--trace-map",
        "compact",
        "--trace-limit",
        "1000",
    ])));
    assert_eq!(r[0]["arrival"], "closed");
    assert_eq!(r[0]["requests"], 1000);
    assert_eq!(r[0]["trace"]["map"], "compact");
    // Synthetic workloads keep closed arrivals and no trace block.
    let r = json(&ok(flashkit([
        "sim",
        "--policy",
        "greedy",
        "--written",
        "4MiB",
        "--json",
    ])));
    assert_eq!(r[0]["arrival"], "closed");
    assert!(r[0]["trace"].is_null());
}

#[test]
fn malformed_traces_fail_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.csv");
    std::fs::write(
        &bad,
        "128166372003061629,hm,1,Read,0,4096,1\n128166372003061630,hm,1,Write,0,4096,1\n\
         128166372003061631,hm,1,Flush,0,4096,1\n128166372003061632,hm,1,Write,8192,4096,1\n",
    )
    .unwrap();
    let at = format!(
        "{}:3: type 'Flush' is neither Read nor Write",
        path_str(&bad)
    );
    fails_with(flashkit(["trace", "stats", path_str(&bad)]), &at);
    let out = dir.path().join("o.fio");
    fails_with(
        flashkit([
            "trace",
            "convert",
            path_str(&bad),
            path_str(&out),
            "--to",
            "fio",
        ]),
        &at,
    );
    let w = format!("trace:{}", path_str(&bad));
    fails_with(
        flashkit(["sim", "--workload", &w, "--policy", "greedy"]),
        &at,
    );
    // --skip-bad-lines counts the line and warns once.
    let o = ok(flashkit([
        "trace",
        "stats",
        path_str(&bad),
        "--json",
        "--skip-bad-lines",
    ]));
    let s = json(&o);
    assert_eq!(
        (s["requests"].as_u64(), s["skipped_bad_lines"].as_u64()),
        (Some(3), Some(1))
    );
    // The first bad line, on stderr and in the JSON, as `sim` gives it (docs/traces.md).
    let first = s["first_bad_line"].as_str().unwrap_or_default();
    assert!(first.contains(&at), "{s}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("skipped 1 malformed lines") && err.contains(&at),
        "{err}"
    );
    let o = ok(flashkit([
        "trace",
        "convert",
        path_str(&bad),
        path_str(&out),
        "--to",
        "fio",
        "--json",
        "--skip-bad-lines",
    ]));
    assert!(text(&o.stderr).contains(&at), "{}", text(&o.stderr));
    assert!(
        json(&o)["reader"]["first_bad_line"]
            .as_str()
            .is_some_and(|l| l.contains(&at)),
        "{}",
        text(&o.stdout)
    );
    let o = ok(flashkit([
        "sim",
        "--workload",
        &w,
        "--policy",
        "greedy",
        "--json",
        "--skip-bad-lines",
    ]));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("skipped 1 malformed lines") && err.contains(&at),
        "{err}"
    );
    assert_eq!(json(&o)[0]["trace"]["skipped_bad_lines"], 1);
    // Bad flags and files.
    fails_with(
        flashkit(["trace", "stats", path_str(&bad), "--trace-format", "csv"]),
        "--trace-format",
    );
    // A generator seed `sim --seed` could not take (QA stop 35): a usage error.
    let o = flashkit([
        "trace",
        "generate",
        path_str(&out),
        "--format",
        "msr",
        "--seed",
        "18446744073709551615",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("is not in 0..=9223372036854775807"), "{err}");
    fails_with(
        flashkit([
            "trace",
            "convert",
            path_str(&bad),
            path_str(&out),
            "--to",
            "xml",
        ]),
        "--to",
    );
    fails_with(
        flashkit(["trace", "stats", path_str(&dir.path().join("nope"))]),
        "cannot open",
    );
    fails_with(
        flashkit([
            "trace",
            "generate",
            path_str(&out),
            "--format",
            "fio",
            "--workload",
            "zipf",
        ]),
        "--workload",
    );
}

#[test]
fn hot_cold_generation_over_a_huge_space_needs_no_table() {
    // The hot set used to be a shuffled table of every unit: 64 TiB of 4 KiB units asked
    // for 137 GB and aborted.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("g.spc");
    let o = ok(flashkit([
        "trace",
        "generate",
        path_str(&out),
        "--format",
        "spc",
        "--requests",
        "10",
        "--space",
        "64TiB",
    ]));
    assert!(
        text(&o.stdout).contains("10 records"),
        "{}",
        text(&o.stdout)
    );
    let lbas: Vec<u64> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| l.split(',').nth(1).unwrap().parse().unwrap())
        .collect();
    assert_eq!(lbas.len(), 10);
    assert!(
        lbas.iter().all(|&l| l % 8 == 0 && l < (64u64 << 40) / 512),
        "{lbas:?}"
    );
}

/// A trace written to stdout (`-`, or `/dev/stdout` when stdout is a file or a pipe) is
/// the trace alone: the summary goes to stderr (QA stop 32: it was appended to the trace,
/// which then failed to parse), and `--json`, whose report is stdout, is refused. `-` is
/// not a file name (QA stop 32: it created a file named `-`).
#[test]
fn a_trace_written_to_stdout_is_the_trace_alone() {
    let dir = tempfile::tempdir().unwrap();
    let gen = |out: &str| {
        flashkit_in(
            dir.path(),
            [
                "trace",
                "generate",
                out,
                "--format",
                "spc",
                "--requests",
                "5",
                "--space",
                "1MiB",
            ],
        )
    };
    let file = dir.path().join("f.spc");
    ok(gen(path_str(&file)));
    let want = std::fs::read(&file).unwrap();
    for out in ["-", "/dev/stdout"] {
        let o = ok(gen(out));
        assert!(o.stdout == want, "{out}: {}", text(&o.stdout));
        assert!(text(&o.stderr).contains("5 records"), "{out}");
        assert!(!dir.path().join("-").exists(), "{out}: no file named -");
        let o = ok(flashkit_in(
            dir.path(),
            ["trace", "convert", path_str(&file), out, "--to", "spc"],
        ));
        assert!(o.stdout == want, "{out}: {}", text(&o.stdout));
        assert!(text(&o.stderr).contains("-> "), "{out}");
        fails_with(
            flashkit_in(
                dir.path(),
                [
                    "trace",
                    "convert",
                    path_str(&file),
                    out,
                    "--to",
                    "spc",
                    "--json",
                ],
            ),
            "--json: the trace goes to stdout",
        );
    }
    // Stdout appending to a file (`>> all.spc`): the trace is appended, the file's
    // content kept (QA stop 32: the file was replaced, through /dev/stdout's link).
    for out in ["-", "/dev/stdout"] {
        let all = dir.path().join("all.spc");
        std::fs::write(&all, "0,1,4096,w,0.0\n").unwrap();
        let append = std::fs::OpenOptions::new().append(true).open(&all).unwrap();
        let st = std::process::Command::new(env!("CARGO_BIN_EXE_flashkit"))
            .args([
                "trace",
                "generate",
                out,
                "--format",
                "spc",
                "--requests",
                "5",
            ])
            .args(["--space", "1MiB"])
            .stdout(append)
            .status()
            .unwrap();
        assert!(st.success(), "{out}");
        let mut want_all = b"0,1,4096,w,0.0\n".to_vec();
        want_all.extend_from_slice(&want);
        assert!(std::fs::read(&all).unwrap() == want_all, "{out}: appended");
    }
    // To a file, the summary stays on stdout.
    let o = ok(flashkit([
        "trace",
        "convert",
        path_str(&file),
        path_str(&dir.path().join("g.spc")),
        "--to",
        "msr",
    ]));
    assert!(text(&o.stdout).contains("-> "), "{}", text(&o.stdout));
}

/// Times finer than the output format keeps are rounded down with a warning and counted
/// (`rounded_times`; QA stop 32: 100 ns and 300 ns became 0 in fio, silently).
#[test]
fn times_rounded_to_the_format_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let msr = dir.path().join("t.msr");
    // 0, 100 ns, 300 ns, 2 µs after the first record.
    std::fs::write(
        &msr,
        "128166372000000000,h,0,Write,0,4096,0\n128166372000000001,h,0,Write,4096,4096,0\n\
         128166372000000003,h,0,Write,8192,4096,0\n128166372000000020,h,0,Write,0,4096,0\n",
    )
    .unwrap();
    let to = |fmt: &str| {
        let out = dir.path().join(format!("o.{fmt}"));
        flashkit([
            "trace",
            "convert",
            path_str(&msr),
            path_str(&out),
            "--to",
            fmt,
            "--json",
        ])
    };
    let o = ok(to("fio"));
    let err = text(&o.stderr);
    assert!(
        err.contains(
            "warning: 2 records' times rounded down to the fio format's resolution (1000 ns)"
        ),
        "{err}"
    );
    assert_eq!(json(&o)["rounded_times"], 2);
    let o = ok(to("spc"));
    assert!(!text(&o.stderr).contains("rounded"), "{}", text(&o.stderr));
    assert_eq!(json(&o)["rounded_times"], 0);
}

#[test]
fn convert_refuses_to_write_its_input() {
    // Writing the input used to truncate it first: "0 records", exit 0, input gone.
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("same.msr");
    ok(flashkit([
        "trace",
        "generate",
        path_str(&t),
        "--format",
        "msr",
        "--requests",
        "50",
        "--space",
        "1MiB",
    ]));
    let before = std::fs::read(&t).unwrap();
    let link = dir.path().join("link.msr");
    std::os::unix::fs::symlink(&t, &link).unwrap();
    let hard = dir.path().join("hard.msr");
    std::fs::hard_link(&t, &hard).unwrap();
    // The same path, another spelling of it, a symbolic and a hard link.
    let dotted = dir.path().join(".").join("same.msr");
    for out in [&t, &dotted, &link, &hard] {
        fails_with(
            flashkit([
                "trace",
                "convert",
                path_str(&t),
                path_str(out),
                "--to",
                "msr",
            ]),
            "output is the same file as the input",
        );
        assert_eq!(std::fs::read(&t).unwrap(), before, "input changed");
    }
    // trace stats --csv would replace the trace with its statistics.
    fails_with(
        flashkit(["trace", "stats", path_str(&t), "--csv", path_str(&hard)]),
        "output is the same file as the input",
    );
    assert_eq!(std::fs::read(&t).unwrap(), before, "input changed");
    // Another file is fine.
    let o = ok(flashkit([
        "trace",
        "convert",
        path_str(&t),
        path_str(&dir.path().join("other.msr")),
        "--to",
        "msr",
    ]));
    assert!(
        text(&o.stdout).contains("50 records"),
        "{}",
        text(&o.stdout)
    );
}

#[test]
fn convert_refuses_sectors_the_output_format_cannot_hold() {
    // Sector 2^55 is byte 2^64: msr and fio offsets used to wrap to 0.
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.disksim");
    std::fs::write(&big, "0.0 0 36028797018963968 8 0\n1.0 0 100 8 1\n").unwrap();
    for to in ["msr", "fio"] {
        let out = dir.path().join(format!("big.{to}"));
        fails_with(
            flashkit([
                "trace",
                "convert",
                path_str(&big),
                path_str(&out),
                "--to",
                to,
            ]),
            &format!(
                "{}:1: sector 36028797018963968 + 8 ends past the {to} format's limit",
                path_str(&big)
            ),
        );
    }
    // Formats that count sectors hold it, and it reads back.
    let spc = dir.path().join("big.spc");
    ok(flashkit([
        "trace",
        "convert",
        path_str(&big),
        path_str(&spc),
        "--to",
        "spc",
    ]));
    let s = std::fs::read_to_string(&spc).unwrap();
    assert!(s.starts_with("0,36028797018963968,4096,w,"), "{s}");
    // The last request msr can hold converts and reads back.
    let edge = dir.path().join("edge.disksim");
    std::fs::write(&edge, "0.0 0 36028797018963959 8 0\n").unwrap();
    let msr = dir.path().join("edge.msr");
    ok(flashkit([
        "trace",
        "convert",
        path_str(&edge),
        path_str(&msr),
        "--to",
        "msr",
    ]));
    let back = dir.path().join("back.disksim");
    ok(flashkit([
        "trace",
        "convert",
        path_str(&msr),
        path_str(&back),
        "--to",
        "disksim",
    ]));
    assert_eq!(
        std::fs::read_to_string(&back).unwrap(),
        "0.000000 0 36028797018963959 8 0\n"
    );
}

#[test]
fn a_zero_space_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.spc");
    ok(flashkit([
        "trace",
        "generate",
        path_str(&t),
        "--format",
        "spc",
        "--requests",
        "20",
        "--space",
        "1MiB",
    ]));
    // trace stats used to print "0.0% of the space".
    for space in ["0", "0KiB"] {
        fails_with(
            flashkit(["trace", "stats", path_str(&t), "--space", space]),
            "--space: must be more than 0 bytes",
        );
    }
    // Sizes are exact: a fraction of a byte is not rounded to 0.
    fails_with(
        flashkit(["trace", "stats", path_str(&t), "--space", "0.0001"]),
        "--space: '0.0001': not a whole number of bytes",
    );
    ok(flashkit(["trace", "stats", path_str(&t), "--space", "1"]));
    // trace generate refuses it for every workload.
    let out = dir.path().join("g.spc");
    for w in ["hotcold:90/10", "random", "rootdisk", "multimedia"] {
        fails_with(
            flashkit([
                "trace",
                "generate",
                path_str(&out),
                "--format",
                "spc",
                "--workload",
                w,
                "--space",
                "0",
            ]),
            "space: ",
        );
    }
}

#[test]
fn generate_refuses_units_beyond_a_record() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("g.csv");
    let gen = |unit: &str, space: &str| {
        flashkit([
            "trace",
            "generate",
            path_str(&out),
            "--format",
            "msr",
            "--requests",
            "1",
            "--unit",
            unit,
            "--space",
            space,
        ])
    };
    // 4 TiB is 2^33 sectors: more than a record's 32-bit count, not cut to 0.
    fails_with(
        gen("4TiB", "8TiB"),
        "unit: 4398046511104 bytes is too large",
    );
    fails_with(gen("18446744073709551616", "8TiB"), "--unit");
    fails_with(gen("4KiB", "1.1KiB"), "--space");
}

/// `sim --csv` or `--plot` naming the trace the run reads is refused before the run; the
/// trace is left as it was.
#[test]
fn sim_outputs_never_overwrite_the_trace() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.spc");
    ok(flashkit([
        "trace",
        "generate",
        path_str(&t),
        "--format",
        "spc",
        "--requests",
        "50",
        "--space",
        "8MiB",
    ]));
    let before = std::fs::read(&t).unwrap();
    let workload = format!("trace:{}", path_str(&t));
    fails_with(
        flashkit([
            "sim",
            "--workload",
            &workload,
            "--policy",
            "greedy",
            "--csv",
            path_str(&t),
        ]),
        "is the trace being read itself",
    );
    assert!(
        std::fs::read(&t).unwrap() == before,
        "the trace was modified"
    );
}

/// Arrival times that overflow (rate 1e-300) or pass the simulator's clock (rate 1e-9:
/// about 1e9 s apart) are refused naming --rate and the first record past the limit,
/// before the output is created; a rate that fits writes times in order.
#[test]
fn generate_refuses_arrival_times_past_the_clock() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.disksim");
    let gen = |rate: &str, requests: &str| {
        flashkit([
            "trace",
            "generate",
            "--format",
            "disksim",
            "--requests",
            requests,
            "--rate",
            rate,
            path_str(&out),
        ])
    };
    fails_with(
        gen("1e-300", "3"),
        "--rate 1e-300: record 2 (of --requests 3)",
    );
    fails_with(
        gen("1e-9", "100000"),
        "--rate 1e-9: record 2 (of --requests 100000)",
    );
    assert!(!out.exists(), "nothing written for a refused rate");
    // 1 request per 10 s: 9.2e6 s holds about 9.2e5 records, 100 fit, 2e6 do not.
    fails_with(gen("0.1", "2000000"), "past the 9223372 s");
    ok(gen("0.1", "100"));
    let s = json(&ok(flashkit(["trace", "stats", path_str(&out), "--json"])));
    assert_eq!(s["out_of_order"], 0, "{s}");
    let times: Vec<f64> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| l.split(' ').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(times.len(), 100);
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    assert!(times.iter().all(|t| (0.0..=9.3e9).contains(t)), "{times:?}");
}

/// `trace convert` stopped by a malformed input line leaves no partial output (nor a
/// temporary file) and does not touch an output that was already there.
#[test]
fn convert_stopped_by_an_error_leaves_no_partial_output() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.fio");
    std::fs::write(
        &bad,
        "fio version 3 iolog\n0 f write 0 4096\n1 f write 4096 4096\n2 f write x 4096\n",
    )
    .unwrap();
    let out = dir.path().join("out.msr");
    let convert = || {
        flashkit([
            "trace",
            "convert",
            path_str(&bad),
            path_str(&out),
            "--to",
            "msr",
        ])
    };
    fails_with(convert(), "bad.fio:4: offset 'x'");
    assert!(!out.exists());
    std::fs::write(&out, "kept\n").unwrap();
    fails_with(convert(), "bad.fio:4: offset 'x'");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "kept\n");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
}

/// A conversion that keeps no request (a filter matching nothing, `--trace-limit 0`)
/// is an error and writes nothing: an empty trace is a file no reader can tell the
/// format of (option fuzzer, stop 19).
#[test]
fn convert_that_keeps_nothing_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.fio");
    std::fs::write(&t, "fio version 3 iolog\n0 f write 0 4096\n").unwrap();
    let out = dir.path().join("out.msr");
    let convert = |extra: &[&str]| {
        let mut args = vec![
            "trace",
            "convert",
            path_str(&t),
            path_str(&out),
            "--to",
            "msr",
        ];
        args.extend(extra);
        flashkit(&args)
    };
    fails_with(
        convert(&["--trace-limit", "0"]),
        "--trace-limit: must be at least 1",
    );
    let dsk = dir.path().join("t.disksim");
    std::fs::write(&dsk, "0.0 0 0 8 0\n").unwrap();
    fails_with(
        flashkit([
            "trace",
            "convert",
            path_str(&dsk),
            path_str(&out),
            "--to",
            "msr",
            "--trace-disk",
            "7",
        ]),
        "no request left to convert",
    );
    assert!(!out.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
}

/// `trace stats --csv` to a file that cannot be written is refused before the trace is
/// read (a long read for a large trace), not by the CSV writer after it.
#[test]
fn stats_checks_its_csv_before_reading() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.fio");
    std::fs::write(&t, "fio version 3 iolog\n0 f write 0 4096\n").unwrap();
    let csv = dir.path().join("no").join("dir").join("s.csv");
    fails_with(
        flashkit(["trace", "stats", path_str(&t), "--csv", path_str(&csv)]),
        "--csv ",
    );
    let good = dir.path().join("s.csv");
    ok(flashkit([
        "trace",
        "stats",
        path_str(&t),
        "--csv",
        path_str(&good),
    ]));
    assert_eq!(std::fs::read_to_string(&good).unwrap().lines().count(), 2);
}

/// A small blkparse trace: one write queued (Q) and issued (D).
const BLKPARSE: &str = "  8,0    3        1     0.000000000   697  Q   W 223490 + 8 [k]\n  \
                        8,0    3        2     0.000013640   697  D   W 223490 + 8 [k]\n  \
                        8,0    3        3     0.000020000   697  UT  N [k] 1\n";

/// `--blkparse-action` names one of the actions blkparse prints; anything else used to
/// select no event and give an empty trace (requests 0, exit 0).
#[test]
fn blkparse_action_must_be_a_blkparse_action() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.blkparse");
    std::fs::write(&t, BLKPARSE).unwrap();
    let requests = |action: &str| {
        json(&ok(flashkit([
            "trace",
            "stats",
            path_str(&t),
            "--blkparse-action",
            action,
            "--json",
        ])))["requests"]
            .as_u64()
    };
    for bad in ["DD", "1", "ǅ", "D,Q", "", "d", "Q\n"] {
        let o = flashkit([
            "trace",
            "stats",
            path_str(&t),
            "--blkparse-action",
            bad,
            "--json",
        ]);
        fails_with(
            o,
            &format!(
                "flashkit: --blkparse-action: '{}' is not a blkparse action \
                 (A, B, C, D, F, G, I, M, P, Q, R, S, T, U, UT, X)",
                bad.escape_debug()
            ),
        );
    }
    let w = format!("trace:{}", path_str(&t));
    fails_with(
        flashkit([
            "sim",
            "--workload",
            &w,
            "--policy",
            "greedy",
            "--blkparse-action",
            "DD",
        ]),
        "--blkparse-action: 'DD' is not a blkparse action",
    );
    assert_eq!(requests("D"), Some(1));
    assert_eq!(requests("Q"), Some(1));
    assert_eq!(requests("C"), Some(0));
    // blkparse prints the timer unplug that its manual calls T as UT.
    assert_eq!(requests("T"), requests("UT"));
}

/// A filter of another format than the trace's used to be ignored silently (all requests
/// kept); it is refused once the format is known, by stats, convert and sim alike.
#[test]
fn filters_of_another_format_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for fmt in ["msr", "spc", "disksim", "fio"] {
        let p = dir.path().join(format!("t.{fmt}"));
        ok(flashkit([
            "trace",
            "generate",
            path_str(&p),
            "--format",
            fmt,
            "--requests",
            "20",
            "--space",
            "4MiB",
        ]));
        files.push((fmt, p));
    }
    let blk = dir.path().join("t.blkparse");
    std::fs::write(&blk, BLKPARSE).unwrap();
    files.push(("blkparse", blk));
    let flags: [(&str, &str, &[&str]); 4] = [
        ("--trace-asu", "0", &["spc"]),
        ("--trace-disk", "0", &["msr", "disksim"]),
        ("--trace-time-unit", "ms", &["disksim", "fio"]),
        ("--blkparse-action", "Q", &["blkparse"]),
    ];
    let out = dir.path().join("out.fio");
    for (flag, value, applies) in flags {
        for (fmt, p) in &files {
            let stats = flashkit(["trace", "stats", path_str(p), flag, value, "--json"]);
            if applies.contains(fmt) {
                ok(stats);
                continue;
            }
            let msg = format!(
                "{}: {flag} applies to {} traces only (this trace is {fmt})",
                path_str(p),
                applies.join(" and ")
            );
            fails_with(stats, &msg);
            // Also with the format given rather than detected.
            fails_with(
                flashkit([
                    "trace",
                    "stats",
                    path_str(p),
                    "--trace-format",
                    fmt,
                    flag,
                    value,
                ]),
                &msg,
            );
            fails_with(
                flashkit([
                    "trace",
                    "convert",
                    path_str(p),
                    path_str(&out),
                    "--to",
                    "fio",
                    flag,
                    value,
                ]),
                &msg,
            );
            assert!(!out.exists(), "convert wrote {}", out.display());
            let w = format!("trace:{}", path_str(p));
            fails_with(
                flashkit(["sim", "--workload", &w, "--policy", "greedy", flag, value]),
                &msg,
            );
        }
    }
    // The default action is the same as none.
    let msr = &files[0].1;
    ok(flashkit([
        "trace",
        "stats",
        path_str(msr),
        "--blkparse-action",
        "D",
    ]));
}

/// `--unit` sizes the synthetic workloads' requests; rootdisk and multimedia have their own
/// sizes (the paper's) and used to ignore it, whatever its value.
#[test]
fn generate_refuses_unit_for_rootdisk_and_multimedia() {
    let dir = tempfile::tempdir().unwrap();
    for w in ["rootdisk", "multimedia"] {
        let out = dir.path().join(format!("{w}.msr"));
        for unit in ["0", "4KiB", "64KiB"] {
            fails_with(
                flashkit([
                    "trace",
                    "generate",
                    "--format",
                    "msr",
                    "--requests",
                    "5",
                    "--workload",
                    w,
                    "--unit",
                    unit,
                    path_str(&out),
                ]),
                &format!("--unit: the {w} workload does not use it"),
            );
            assert!(!out.exists());
        }
        ok(flashkit([
            "trace",
            "generate",
            "--format",
            "msr",
            "--requests",
            "5",
            "--workload",
            w,
            path_str(&out),
        ]));
    }
    // The synthetic workloads use it, and check it.
    let out = dir.path().join("g.msr");
    fails_with(
        flashkit([
            "trace",
            "generate",
            "--format",
            "msr",
            "--requests",
            "5",
            "--unit",
            "0",
            path_str(&out),
        ]),
        "unit: 0 must be a positive multiple of 512 bytes",
    );
    ok(flashkit([
        "trace",
        "generate",
        "--format",
        "msr",
        "--requests",
        "5",
        "--unit",
        "8KiB",
        path_str(&out),
    ]));
    let s = json(&ok(flashkit(["trace", "stats", path_str(&out), "--json"])));
    assert_eq!(s["mean_write_sectors"].as_f64(), Some(16.0));
}

/// `--requests 0` used to write a trace no command can read (its format cannot be told).
#[test]
fn generate_refuses_zero_requests() {
    let dir = tempfile::tempdir().unwrap();
    for fmt in ["msr", "spc", "blkparse", "disksim", "fio"] {
        let out = dir.path().join(format!("g.{fmt}"));
        fails_with(
            flashkit([
                "trace",
                "generate",
                path_str(&out),
                "--format",
                fmt,
                "--requests",
                "0",
            ]),
            "--requests: must be at least 1",
        );
        assert!(!out.exists());
        ok(flashkit([
            "trace",
            "generate",
            path_str(&out),
            "--format",
            fmt,
            "--requests",
            "1",
        ]));
        let s = json(&ok(flashkit(["trace", "stats", path_str(&out), "--json"])));
        assert_eq!(s["requests"], 1);
    }
}

/// QA stop 24, F8: the structured keys of `trace stats --csv` are JSON in their cells
/// (arrays were space-joined objects that no parser reads), their keys in the JSON's
/// order.
#[test]
fn stats_csv_cells_holding_structures_are_json() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("k.ds");
    std::fs::write(
        &ds,
        "0 0 0 8 0\n1 0 8 8 0\n2 0 16 16 0\n3 0 0 8 1\n10 0 1000 256 0\n10 0 1256 256 0\n20 0 0 1 0\n",
    )
    .unwrap();
    let csv_path = dir.path().join("k.csv");
    let j = json(&ok(flashkit(["trace", "stats", path_str(&ds), "--json"])));
    ok(flashkit([
        "trace",
        "stats",
        path_str(&ds),
        "--csv",
        path_str(&csv_path),
    ]));
    let mut r = csv::Reader::from_path(&csv_path).unwrap();
    let header: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
    let row = r.records().next().unwrap().unwrap();
    // The columns are the JSON keys, in order.
    let keys: Vec<String> = j.as_object().unwrap().keys().cloned().collect();
    let mut sorted_header = header.clone();
    sorted_header.sort();
    let mut sorted_keys = keys;
    sorted_keys.sort();
    assert_eq!(sorted_header, sorted_keys);
    assert_eq!(header[0], "file");
    let cell = |k: &str| &row[header.iter().position(|h| h == k).unwrap()];
    for k in [
        "size_histogram",
        "write_locality",
        "write_classes",
        "read_classes",
    ] {
        let v: serde_json::Value =
            serde_json::from_str(cell(k)).unwrap_or_else(|e| panic!("{k}: {e}: {}", cell(k)));
        assert_eq!(v, j[k], "{k}");
    }
    assert!(j["size_histogram"].as_array().unwrap().len() > 1);
    assert_eq!(cell("requests"), "7");
    // The structures' keys in the order `--json` prints them (stop 31: they came sorted,
    // `max_sectors` before `min_sectors`, `large` before `small`).
    assert!(
        cell("size_histogram").starts_with(r#"[{"min_sectors":1,"max_sectors":1,"#),
        "{}",
        cell("size_histogram")
    );
    assert!(
        cell("write_classes").starts_with(r#"{"small":{"count":"#),
        "{}",
        cell("write_classes")
    );
}

/// QA stop 24, F10: `--space` takes the units docs/traces.md uses (8 EiB) and refuses a
/// size beyond 64 bits in one line naming the option.
#[test]
fn generate_takes_spaces_in_pib_and_eib() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("big.msr");
    let j = json(&ok(flashkit([
        "trace",
        "generate",
        path_str(&out),
        "--format",
        "msr",
        "--requests",
        "5",
        "--space",
        "8EiB",
        "--json",
    ])));
    assert_eq!(j["space_bytes"], 1u64 << 63);
    ok(flashkit([
        "trace",
        "generate",
        path_str(&out),
        "--format",
        "msr",
        "--requests",
        "5",
        "--space",
        "2PiB",
    ]));
    fails_with(
        flashkit([
            "trace",
            "generate",
            path_str(&out),
            "--format",
            "msr",
            "--requests",
            "5",
            "--space",
            "16EiB",
        ]),
        "--space: '16EiB': size too large",
    );
    let t = dir.path().join("t.spc");
    std::fs::write(&t, "0,100,4096,w,0.0\n").unwrap();
    let s = json(&ok(flashkit([
        "trace",
        "stats",
        path_str(&t),
        "--space",
        "1PiB",
        "--json",
    ])));
    assert_eq!(s["space_bytes"], 1u64 << 50);
}

/// QA stop 24, F11: an out-of-range time stamp is one line naming file, line and field,
/// "out of range", not "is not a number".
#[test]
fn out_of_range_time_stamps_are_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let spc = dir.path().join("b6.spc");
    std::fs::write(&spc, "0,100,4096,w,0.0\n0,100,4096,w,1e300\n").unwrap();
    let err = fails_with_all(
        flashkit(["trace", "stats", path_str(&spc)]),
        &["b6.spc:2: timestamp '1e300' is out of range (at most 9223372036.854775807 s"],
    );
    assert!(!err.contains("not a number"), "{err}");
    let ws = format!("trace:{}", path_str(&spc));
    fails_with(
        flashkit(["sim", "--workload", &ws, "--policy", "greedy"]),
        "b6.spc:2: timestamp '1e300' is out of range",
    );
}

/// QA stop 24, F12: a multi-disk MSR trace read without --trace-disk gives one warning
/// naming the disks and the option, in `sim` (once, whatever the number of jobs), `trace
/// convert` and `trace stats`; the merged reading is unchanged, and --trace-disk silences
/// it.
#[test]
fn multi_disk_traces_read_as_one_warn_once() {
    let dir = tempfile::tempdir().unwrap();
    let msr = dir.path().join("d.msr");
    std::fs::write(
        &msr,
        "128166372000000000,h,0,Write,0,4096,0\n128166372000000010,h,1,Write,4096,4096,0\n\
         128166372000000020,h,0,Read,0,4096,0\n",
    )
    .unwrap();
    let want = "records of 2 disks (DiskNumbers 0, 1) read as one address space";
    let warned = |o: &Output| {
        let err = text(&o.stderr);
        let lines: Vec<&str> = err.lines().filter(|l| l.contains(want)).collect();
        assert_eq!(lines.len(), 1, "one warning: {err}");
        assert!(lines[0].starts_with("flashkit: warning: "), "{err}");
        assert!(lines[0].contains("--trace-disk"), "{err}");
        assert!(lines[0].contains("d.msr"), "{err}");
    };
    let out = dir.path().join("d2.msr");
    let o = ok(flashkit([
        "trace",
        "convert",
        path_str(&msr),
        path_str(&out),
        "--to",
        "msr",
        "--json",
    ]));
    warned(&o);
    assert_eq!(json(&o)["records"], 3, "every disk is still converted");
    let o = ok(flashkit(["trace", "stats", path_str(&msr), "--json"]));
    warned(&o);
    assert!(json(&o).get("merged_devices_warning").is_none());
    let ws = format!("trace:{}", path_str(&msr));
    let o = ok(flashkit([
        "sim",
        "--workload",
        &ws,
        "--policy",
        "greedy,cat",
        "--json",
    ]));
    warned(&o);
    // A sweep's jobs read it too: the same one warning.
    let spec = dir.path().join("s.toml");
    std::fs::write(
        &spec,
        format!(
            "policy = [\"greedy\", \"cat\"]\nworkload = \"trace:{}\"\n",
            path_str(&msr)
        ),
    )
    .unwrap();
    let o = ok(flashkit(["sweep", path_str(&spec), "--json"]));
    warned(&o);
    // With the filter, nothing to say.
    let o = ok(flashkit([
        "trace",
        "convert",
        path_str(&msr),
        path_str(&out),
        "--to",
        "msr",
        "--trace-disk",
        "0",
    ]));
    assert!(!text(&o.stderr).contains("warning"), "{}", text(&o.stderr));
}

/// QA stop 24, F13: `phases:` with fewer requests than phases is refused in one line.
#[test]
fn generate_refuses_fewer_requests_than_phases() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ph.spc");
    fails_with(
        flashkit([
            "trace",
            "generate",
            path_str(&out),
            "--format",
            "spc",
            "--workload",
            "phases:random,sequential,hotcold:90/10",
            "--requests",
            "2",
        ]),
        "has 3 phases and needs at least 3 requests",
    );
    assert!(!out.exists());
}

/// QA stop 24, F15: `trace convert` warns on stderr when it writes records at time 0
/// because the output format has no negative times, as it does for left-out trims.
#[test]
fn convert_warns_about_clamped_times() {
    let dir = tempfile::tempdir().unwrap();
    let spc = dir.path().join("neg.spc");
    std::fs::write(
        &spc,
        "0,100,4096,w,5.0\n0,108,4096,w,4.0\n0,116,4096,r,6.5\n",
    )
    .unwrap();
    let out = dir.path().join("neg.blk");
    let o = ok(flashkit([
        "trace",
        "convert",
        path_str(&spc),
        path_str(&out),
        "--to",
        "blkparse",
        "--json",
    ]));
    assert_eq!(json(&o)["clamped_times"], 1);
    let err = text(&o.stderr);
    assert!(
        err.contains(
            "flashkit: warning: 1 record with a time before the first record's written at \
             time 0 (blkparse has no negative times)"
        ),
        "{err}"
    );
    // In order: no warning.
    let out2 = dir.path().join("neg2.spc");
    let o = ok(flashkit([
        "trace",
        "convert",
        path_str(&out),
        path_str(&out2),
        "--to",
        "spc",
    ]));
    assert!(!text(&o.stderr).contains("warning"), "{}", text(&o.stderr));
}

/// QA stop 24, F16: `trace generate --json` echoes the parameters that define the trace.
#[test]
fn generate_json_has_its_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("g.spc.gz");
    let j = json(&ok(flashkit([
        "trace",
        "generate",
        path_str(&out),
        "--format",
        "spc",
        "--requests",
        "10",
        "--unit",
        "8KiB",
        "--space",
        "1MiB",
        "--rate",
        "250",
        "--seed",
        "7",
        "--read-fraction",
        "0.25",
        "--workload",
        "random",
        "--json",
    ])));
    assert_eq!(j["workload"], "random");
    assert_eq!(j["requests"], 10);
    assert_eq!(j["records"], 10);
    assert_eq!(j["unit_bytes"], 8192);
    assert_eq!(j["space_bytes"], 1 << 20);
    assert_eq!(j["rate"], 250.0);
    assert_eq!(j["seed"], 7);
    assert_eq!(j["read_fraction"], 0.25);
    assert_eq!(j["gzip"], true);
    assert_eq!(j["format"], "spc");
    // rootdisk: its own request sizes (no unit) and its default read share.
    let out = dir.path().join("r.spc");
    let j = json(&ok(flashkit([
        "trace",
        "generate",
        path_str(&out),
        "--format",
        "spc",
        "--requests",
        "10",
        "--space",
        "8MiB",
        "--workload",
        "rootdisk",
        "--json",
    ])));
    assert!(j["unit_bytes"].is_null());
    assert_eq!(
        j["read_fraction"].as_f64().unwrap(),
        sim::trace::generate::ROOT_READ_FRACTION
    );
    assert_eq!(j["seed"], 1);
    assert_eq!(j["gzip"], false);
}

/// A plot that cannot be drawn after the runs (a metric every run of a trace grid left
/// null, which the checks before the runs cannot tell) fails after the reports are
/// written: the results are not lost (QA stop 27: no table, JSON or CSV).
#[test]
fn a_plot_that_cannot_be_drawn_keeps_the_results() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("small.msr");
    std::fs::write(
        &trace,
        "128166372000000000,h,0,Write,4096,4096,0\n128166372000000480,h,0,Write,8192,4096,0\n",
    )
    .unwrap();
    let csv = dir.path().join("r.csv");
    let svg = dir.path().join("r.svg");
    let workload = format!("trace:{}", path_str(&trace));
    let o = flashkit([
        "sim",
        "--policy",
        "adaptive",
        "--workload",
        &workload,
        "--trace-map",
        "modulo,compact",
        "--plot",
        path_str(&svg),
        "--y",
        "policy_greedy_share",
        "--csv",
        path_str(&csv),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("nothing to draw"),
        "{}",
        text(&o.stderr)
    );
    let v = json(&o);
    assert_eq!(v.as_array().map(Vec::len), Some(2), "{v}");
    let rows = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(rows.lines().count(), 3, "{rows}");
}

/// A file that is no trace (one endless line: a disk image, zeros) fails at its first
/// line in one line, with bounded memory; a device or a pipe is refused (QA stop 27: the
/// line was buffered whole until the process aborted, and `/dev/zero` was read for ever).
#[test]
fn files_that_are_no_traces_fail_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let zeros = dir.path().join("zeros.img");
    std::fs::write(&zeros, vec![0u8; 200_000]).unwrap();
    let z = path_str(&zeros);
    fails_with_all(
        flashkit(["trace", "stats", z, "--trace-format", "disksim"]),
        &[&format!("{z}:1: a line longer than 65536 bytes")],
    );
    let workload = format!("trace:{z}");
    fails_with_all(
        flashkit(["sim", "--workload", &workload, "--trace-format", "msr"]),
        &["a line longer than 65536 bytes"],
    );
    fails_with_all(
        flashkit(["trace", "stats", "/dev/zero"]),
        &["/dev/zero: not a regular file"],
    );
    fails_with_all(
        flashkit([
            "sim",
            "--workload",
            "trace:/dev/zero",
            "--trace-format",
            "msr",
        ]),
        &["/dev/zero: not a regular file"],
    );
    // A FIFO without a writer: opening it would wait for one (QA stop 28: `trace stats`
    // and `sim` hung); refused before the open. Killed after a minute rather than hang.
    let fifo = dir.path().join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo (coreutils) is needed by this test");
    assert!(made.success());
    let f = path_str(&fifo);
    let workload = format!("trace:{f}");
    for args in [
        vec!["trace", "stats", f],
        vec!["sim", "--workload", &workload],
        vec!["trace", "convert", f, "--to", "msr", "/dev/null"],
    ] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_flashkit"))
            .args(&args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut waited = 0;
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if waited > 600 {
                let _ = child.kill();
                panic!("{args:?}: still running after a minute (waiting on the FIFO)");
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
            waited += 1;
        };
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("fifo: not a regular file"), "{args:?}: {err}");
    }
}

/// `trace generate` and `trace convert` write their summary as CSV too (QA stop 27: only
/// --json), never over the traces they read or write.
#[test]
fn generate_and_convert_write_csv_summaries() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let (g, gc, m, mc) = (p("g.blk"), p("g.csv"), p("g.msr"), p("m.csv"));
    ok(flashkit([
        "trace",
        "generate",
        &g,
        "--format",
        "blkparse",
        "--requests",
        "50",
        "--csv",
        &gc,
    ]));
    let rows = std::fs::read_to_string(&gc).unwrap();
    let mut lines = rows.lines();
    assert!(
        lines
            .next()
            .unwrap()
            .starts_with("output,format,workload,requests"),
        "{rows}"
    );
    assert!(
        lines
            .next()
            .unwrap()
            .contains(",blkparse,hotcold:90/10,50,"),
        "{rows}"
    );
    ok(flashkit([
        "trace", "convert", &g, &m, "--to", "msr", "--csv", &mc,
    ]));
    let rows = std::fs::read_to_string(&mc).unwrap();
    assert!(
        rows.lines().nth(1).unwrap().contains(",blkparse,") && rows.contains(",msr,50,"),
        "{rows}"
    );
    let before = std::fs::read(&g).unwrap();
    fails_with_all(
        flashkit([
            "trace",
            "convert",
            &g,
            &p("x.msr"),
            "--to",
            "msr",
            "--csv",
            &g,
        ]),
        &["--csv", "is the trace being converted itself"],
    );
    fails_with_all(
        flashkit([
            "trace",
            "convert",
            &g,
            &p("y.msr"),
            "--to",
            "msr",
            "--csv",
            &p("y.msr"),
        ]),
        &["--csv", "is also the trace written"],
    );
    assert_eq!(std::fs::read(&g).unwrap(), before);
}

/// A trace of trims only writes no user block: its write amplification is no ratio
/// (null, as `policy_greedy_share` of a run that made no choice), not 0 beside the
/// trim list it programmed (QA stop 27); the table shows `-`.
#[test]
fn write_amplification_without_user_writes_is_null() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.fio");
    std::fs::write(
        &t,
        "fio version 2 iolog\n/dev/x add\n/dev/x open\n/dev/x trim 0 4096\n/dev/x close\n",
    )
    .unwrap();
    let w = format!("trace:{}", path_str(&t));
    let common = [
        "sim",
        "--workload",
        &w,
        "--device",
        "nandsim-256m",
        "--block-size",
        "1KiB",
        "--policy",
        "greedy",
    ];
    let v = json(&ok(flashkit(common.iter().copied().chain(["--json"]))));
    assert_eq!(v[0]["user_writes"], 0, "{v}");
    assert_eq!(v[0]["flash_writes"], 1, "{v}");
    assert!(v[0]["write_amplification"].is_null(), "{v}");
    assert!(v[0]["byte_write_amplification"].is_null(), "{v}");
    let table = text(&ok(flashkit(common)).stdout);
    assert!(
        !table.contains("NaN") && !table.contains("0.000"),
        "{table}"
    );
}
