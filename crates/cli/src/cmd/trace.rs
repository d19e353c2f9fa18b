//! `flashkit trace`: block-trace tools — `stats` (what a trace contains), `convert` (any
//! format to any format) and `generate` (synthetic traces, including generators shaped
//! after Chang & Kuo's root-disk and multimedia workloads). The trace input flags are
//! shared with `flashkit sim --workload trace:FILE`. See docs/traces.md.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Result};
use clap::{Args, Subcommand};
use sim::trace::generate::{generator, GenConfig, GenWorkload};
use sim::trace::stats::{check_space, trace_stats, ClassStats, TraceStats};
use sim::trace::{parse_size, Format, TimeUnit, TraceOptions, TraceWriter};

use crate::output::{self, Fields, ReportArgs, Table};

/// How to read a trace (shared by `sim` and the `trace` subcommands).
#[derive(Args, Debug, Clone)]
pub struct TraceInputArgs {
    /// Trace format: msr, spc, blkparse, disksim, fio (default: detected from the first
    /// lines).
    #[arg(long, value_name = "FORMAT", help_heading = "Trace input")]
    pub trace_format: Option<String>,
    /// Keep only this MSR DiskNumber / DiskSim devno (default: all; refused for the other
    /// formats).
    #[arg(long, value_name = "N", help_heading = "Trace input")]
    pub trace_disk: Option<u64>,
    /// Keep only this SPC ASU (default: all; refused for the other formats).
    #[arg(long, value_name = "N", help_heading = "Trace input")]
    pub trace_asu: Option<u64>,
    /// The blkparse action whose events are the requests (D = issued, Q = queued, C =
    /// completed, ...: A, B, C, D, F, G, I, M, P, Q, R, S, T, U, UT, X; another than D is
    /// refused for the other formats).
    #[arg(
        long,
        value_name = "ACTION",
        default_value = "D",
        help_heading = "Trace input"
    )]
    pub blkparse_action: String,
    /// Unit of DiskSim/MQSim time stamps (default ms) and fio v3 time stamps (default
    /// us): ns, us, ms, s. Refused for the other formats.
    #[arg(long, value_name = "UNIT", help_heading = "Trace input")]
    pub trace_time_unit: Option<String>,
    /// Read at most N records of the trace.
    #[arg(long, value_name = "N", help_heading = "Trace input")]
    pub trace_limit: Option<u64>,
    /// Count and report malformed lines instead of stopping at the first one.
    #[arg(long, help_heading = "Trace input")]
    pub skip_bad_lines: bool,
}

impl TraceInputArgs {
    pub fn options(&self) -> Result<TraceOptions> {
        let format = match &self.trace_format {
            Some(f) => Some(Format::parse(f).map_err(|e| anyhow!("--trace-format: {e}"))?),
            None => None,
        };
        let time_unit = match &self.trace_time_unit {
            Some(u) => Some(TimeUnit::parse(u).map_err(|e| anyhow!("--trace-time-unit: {e}"))?),
            None => None,
        };
        // Whether it applies is checked by the reader, once the format is known.
        sim::trace::blkparse_action(&self.blkparse_action)
            .map_err(|e| anyhow!("--blkparse-action: {e}"))?;
        Ok(TraceOptions {
            format,
            disk: self.trace_disk,
            asu: self.trace_asu,
            blkparse_action: self.blkparse_action.clone(),
            time_unit,
            limit: match self.trace_limit {
                Some(0) => bail!("--trace-limit: must be at least 1"),
                l => l,
            },
            skip_bad_lines: self.skip_bad_lines,
        })
    }
}

#[derive(Subcommand, Debug)]
pub enum TraceCmd {
    /// Print what a trace contains: requests, bytes, the request-size histogram with Chang
    /// & Kuo's small/medium/large classes, footprint, write locality, sequentiality,
    /// inter-arrival times.
    Stats(StatsArgs),
    /// Convert a trace to another format (A→B→A gives back the same requests).
    Convert(ConvertArgs),
    /// Write a synthetic trace: any `sim` workload, or the root-disk / multimedia
    /// workloads of Chang & Kuo 2005.
    Generate(GenerateArgs),
}

#[derive(Args, Debug)]
pub struct StatsArgs {
    /// The trace (plain or gzip).
    pub file: PathBuf,
    #[command(flatten)]
    pub input: TraceInputArgs,
    /// The logical space footprints are compared with, e.g. 20GiB.
    #[arg(long, value_name = "BYTES")]
    pub space: Option<String>,
    #[command(flatten)]
    pub report: ReportArgs,
}

#[derive(Args, Debug)]
pub struct ConvertArgs {
    /// The trace to read (plain or gzip).
    pub input_file: PathBuf,
    /// The trace to write; `-` for stdout (the one-line summary then goes to stderr, and
    /// `--json` is refused).
    pub output_file: PathBuf,
    /// Output format: msr, spc, blkparse, disksim, fio.
    #[arg(long, value_name = "FORMAT")]
    pub to: String,
    /// Compress the output with gzip (also when OUT ends in .gz).
    #[arg(long)]
    pub gzip: bool,
    #[command(flatten)]
    pub input: TraceInputArgs,
    // `--json`/`--csv FILE`: the summary (QA stop 27: no --csv).
    #[command(flatten)]
    pub report: ReportArgs,
}

#[derive(Args, Debug)]
pub struct GenerateArgs {
    /// The trace to write; `-` for stdout (the one-line summary then goes to stderr, and
    /// `--json` is refused).
    pub output_file: PathBuf,
    /// Output format: msr, spc, blkparse, disksim, fio.
    #[arg(long, value_name = "FORMAT")]
    pub format: String,
    /// sequential | random | hotcold:X/Y | phases:W1,W2,... | rootdisk | multimedia.
    #[arg(long, default_value = "hotcold:90/10")]
    pub workload: String,
    /// Number of requests (at least 1).
    #[arg(long, default_value_t = 100_000)]
    pub requests: u64,
    /// Request size of the synthetic workloads (default 4KiB); refused for rootdisk and
    /// multimedia, whose request sizes are their own.
    #[arg(long)]
    pub unit: Option<String>,
    /// The logical space addressed (for the same requests as `flashkit sim`, the simulated
    /// space: fill × capacity, in whole FTL blocks).
    #[arg(long, default_value = "1GiB")]
    pub space: String,
    /// Poisson arrivals at this many requests per second.
    #[arg(long, default_value_t = 1000.0)]
    pub rate: f64,
    /// Seed of the generator (at most 2^63 − 1, as `sim --seed`: the trace can be matched
    /// to the `sim` run it reproduces).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(..=i64::MAX as u64))]
    pub seed: u64,
    /// Share of requests that are reads (default: 0, rootdisk 0.525 as in the paper).
    #[arg(long)]
    pub read_fraction: Option<f64>,
    /// Compress the output with gzip (also when OUT ends in .gz).
    #[arg(long)]
    pub gzip: bool,
    #[command(flatten)]
    pub report: ReportArgs,
}

pub fn run(c: TraceCmd) -> Result<()> {
    match c {
        TraceCmd::Stats(a) => stats(a),
        TraceCmd::Convert(a) => convert(a),
        TraceCmd::Generate(a) => generate(a),
    }
}

fn parse_format(flag: &str, s: &str) -> Result<Format> {
    Format::parse(s).map_err(|e| anyhow!("--{flag}: {e}"))
}

fn wants_gzip(flag: bool, path: &std::path::Path) -> bool {
    flag || path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gz"))
}

fn stats(a: StatsArgs) -> Result<()> {
    let opts = a.input.options()?;
    let space = match &a.space {
        Some(s) => Some(
            parse_size(s)
                .and_then(check_space)
                .map_err(|e| anyhow!("--space: {e}"))?,
        ),
        None => None,
    };
    if let Some(csv) = &a.report.csv {
        // The CSV is written after the trace is read: it would replace the trace, and one
        // that cannot be written would cost the whole read.
        sim::trace::refuse_same_file(&a.file, csv)?;
        sim::plot::check_writable(csv, "--csv")?;
    }
    let st = trace_stats(&a.file, &opts, space)?;
    // As `sim` and `trace convert` do: the count, and the first line skipped.
    report_skips(
        &a.file.display().to_string(),
        st.skipped_bad_lines,
        st.first_bad_line.as_deref(),
    );
    if let Some(w) = st.merged_devices_warning.as_deref() {
        eprintln!("flashkit: warning: {w}");
    }
    if let Some(path) = &a.report.csv {
        // A key holding a structure (`write_classes`, `read_classes`, `size_histogram`,
        // `write_locality`) is a JSON cell (`output::write_csv`; QA stop 24, F8).
        output::write_csv(path, std::slice::from_ref(&st))?;
    }
    if a.report.json {
        return output::print_json(&st);
    }
    print_stats(&st)
}

fn pct(v: f64) -> String {
    format!("{v:.1}%")
}

fn print_stats(s: &TraceStats) -> Result<()> {
    let mut f = Fields::new();
    f.add("file", format!("{} ({})", s.file, s.format));
    f.add(
        "requests",
        format!(
            "{} ({} reads, {} writes, {} trims)",
            s.requests, s.reads, s.writes, s.trims
        ),
    );
    f.add(
        "read",
        format!(
            "{} (mean {:.1} sectors)",
            output::bytes(s.read_bytes),
            s.mean_read_sectors
        ),
    );
    f.add(
        "written",
        format!(
            "{} (mean {:.1} sectors)",
            output::bytes(s.write_bytes),
            s.mean_write_sectors
        ),
    );
    if s.trims > 0 {
        f.add("trimmed", output::bytes(s.trim_bytes));
    }
    let of_space = s
        .footprint_percent_of_space
        .map_or(String::new(), |p| format!(", {} of the space", pct(p)));
    f.add(
        "footprint",
        format!(
            "{} ({} blocks of 4 KiB{of_space}; read {}, written {})",
            output::bytes(s.footprint_bytes),
            s.footprint_blocks,
            output::bytes(s.read_footprint_bytes),
            output::bytes(s.write_footprint_bytes)
        ),
    );
    for l in &s.write_locality {
        f.add(
            format!("write locality {}%", l.data_percent),
            format!(
                "{} of writes go to {}% of the written data",
                pct(l.writes_percent),
                l.data_percent
            ),
        );
    }
    f.add(
        "sequential",
        format!(
            "{} of requests, {} of writes, {} of large writes start where the previous \
             one ended",
            pct(s.sequential_percent),
            pct(s.sequential_write_percent),
            pct(s.sequential_large_write_percent)
        ),
    );
    f.add(
        "inter-arrival",
        format!(
            "mean {}, p50 {}, p99 {}",
            output::duration_us(s.interarrival_mean_us),
            output::duration_us(s.interarrival_p50_us),
            output::duration_us(s.interarrival_p99_us)
        ),
    );
    f.add("duration", output::duration_us(s.duration_s * 1e6));
    let skipped = [
        (s.out_of_order, "out of order"),
        (s.skipped_zero_size, "zero-size skipped"),
        (s.skipped_bad_lines, "malformed lines skipped"),
        (s.skipped_other_device, "other disk/ASU skipped"),
    ];
    let notes: Vec<String> = skipped
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
    if !notes.is_empty() {
        f.add("notes", notes.join(", "));
    }
    f.print()?;
    output::print_lines(&[String::new()])?;
    let mut t = Table::new(&[
        "class",
        "writes",
        "% writes",
        "written",
        "% written",
        "write footprint",
        "reads",
        "% reads",
        "read",
    ]);
    let classes = [
        (
            "small (<= 8 sectors)",
            &s.write_classes.small,
            &s.read_classes.small,
        ),
        ("medium", &s.write_classes.medium, &s.read_classes.medium),
        (
            "large (>= 128 sectors)",
            &s.write_classes.large,
            &s.read_classes.large,
        ),
    ];
    for (name, w, r) in classes {
        let fp = |c: &ClassStats| match c.footprint_percent_of_space {
            Some(p) => format!("{} ({})", output::bytes(c.footprint_bytes), pct(p)),
            None => output::bytes(c.footprint_bytes),
        };
        t.row(vec![
            name.into(),
            w.count.to_string(),
            pct(w.count_percent),
            output::bytes(w.bytes),
            pct(w.bytes_percent),
            fp(w),
            r.count.to_string(),
            pct(r.count_percent),
            output::bytes(r.bytes),
        ]);
    }
    t.print()?;
    output::print_lines(&[String::new()])?;
    let mut h = Table::new(&["sectors", "reads", "writes", "trims"]);
    for b in &s.size_histogram {
        let range = match b.max_sectors {
            Some(m) if m == b.min_sectors => m.to_string(),
            Some(m) => format!("{}-{}", b.min_sectors, m),
            None => format!(">= {}", b.min_sectors),
        };
        h.row(vec![
            range,
            b.reads.to_string(),
            b.writes.to_string(),
            b.trims.to_string(),
        ]);
    }
    h.print()
}

/// The warning `sim`, `trace stats` and `trace convert` give for `--skip-bad-lines`.
fn report_skips(file: &str, skipped: u64, first: Option<&str>) {
    if skipped > 0 {
        eprintln!(
            "flashkit: warning: {file}: skipped {skipped} malformed lines (first: {})",
            first.unwrap_or("?")
        );
    }
}

/// `--csv` naming the trace the command writes (a file that may not exist yet, which
/// `refuse_csv_over` cannot tell by identity) is refused by its path.
fn refuse_csv_as_output(report: &ReportArgs, out: &Path) -> Result<()> {
    if report.csv.as_deref() == Some(out) {
        bail!("--csv: {} is also the trace written", out.display());
    }
    Ok(())
}

/// Whether `convert` and `generate` write their trace to this process's stdout (`-`,
/// `/dev/stdout` and the like, written through the inherited handle:
/// `sim::trace::is_stdout_path`; or a path to the same file), where the summary must not
/// go (QA stop 32: it was appended to the trace). `--json`, whose report is stdout, is
/// then refused.
fn to_stdout(path: &Path, json: bool) -> Result<bool> {
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    let stdout = sim::trace::is_stdout_path(path) || {
        let fd = std::io::stdout().as_fd().try_clone_to_owned().ok();
        let ours = fd.and_then(|fd| std::fs::File::from(fd).metadata().ok());
        match (ours, std::fs::metadata(path)) {
            (Some(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
            _ => false,
        }
    };
    if stdout && json {
        bail!(
            "--json: the trace goes to stdout ({}), where the report would mix with it; give a file",
            path.display()
        );
    }
    Ok(stdout)
}

/// The one-line summary of `convert` or `generate`: on stdout, or on stderr when the
/// trace itself goes to stdout.
fn summary_line(line: &str, to_stdout: bool) -> Result<()> {
    if to_stdout {
        eprintln!("{line}");
        Ok(())
    } else {
        output::print_lines(&[line.to_string()])
    }
}

fn convert(a: ConvertArgs) -> Result<()> {
    let to_stdout = to_stdout(&a.output_file, a.report.json)?;
    refuse_csv_as_output(&a.report, &a.output_file)?;
    super::common::refuse_csv_over(
        &a.report,
        &[
            (&a.input_file, "trace being converted"),
            (&a.output_file, "converted trace"),
        ],
    )?;
    let opts = a.input.options()?;
    let to = parse_format("to", &a.to)?;
    let gzip = wants_gzip(a.gzip, &a.output_file);
    let done = sim::trace::convert(&a.input_file, &a.output_file, to, gzip, &opts)?;
    let summary = &done.written;
    report_skips(
        &a.input_file.display().to_string(),
        done.read.skipped_bad_lines,
        done.read.first_bad_line.as_deref(),
    );
    if let Some(w) = done
        .read
        .merged_devices_warning(&a.input_file.display().to_string(), done.input_format)
    {
        eprintln!("flashkit: warning: {w}");
    }
    if summary.dropped_trims > 0 {
        eprintln!(
            "flashkit: warning: {} trims left out ({} cannot express trims)",
            summary.dropped_trims, to
        );
    }
    if summary.clamped_times > 0 {
        eprintln!(
            "flashkit: warning: {} {} with a time before the first record's written at \
             time 0 ({} has no negative times)",
            summary.clamped_times,
            if summary.clamped_times == 1 {
                "record"
            } else {
                "records"
            },
            to
        );
    }
    if summary.rounded_times > 0 {
        eprintln!(
            "flashkit: warning: {} {} rounded down to the {} format's resolution ({} ns)",
            summary.rounded_times,
            if summary.rounded_times == 1 {
                "record's time"
            } else {
                "records' times"
            },
            to,
            to.time_resolution_ns()
        );
    }
    #[derive(serde::Serialize)]
    struct Converted<'a> {
        input: String,
        input_format: &'a str,
        output: String,
        output_format: &'a str,
        records: u64,
        dropped_trims: u64,
        clamped_times: u64,
        rounded_times: u64,
        reader: &'a sim::trace::Counts,
    }
    let c = Converted {
        input: a.input_file.display().to_string(),
        input_format: done.input_format.name(),
        output: a.output_file.display().to_string(),
        output_format: to.name(),
        records: summary.records,
        dropped_trims: summary.dropped_trims,
        clamped_times: summary.clamped_times,
        rounded_times: summary.rounded_times,
        reader: &done.read,
    };
    if let Some(p) = &a.report.csv {
        output::write_csv(p, std::slice::from_ref(&c))?;
    }
    if a.report.json {
        return output::print_json(&c);
    }
    summary_line(
        &format!(
            "{} ({}) -> {} ({}): {} records",
            c.input, c.input_format, c.output, c.output_format, c.records
        ),
        to_stdout,
    )
}

fn generate(a: GenerateArgs) -> Result<()> {
    let to_stdout = to_stdout(&a.output_file, a.report.json)?;
    refuse_csv_as_output(&a.report, &a.output_file)?;
    super::common::refuse_csv_over(&a.report, &[(&a.output_file, "trace being generated")])?;
    let fmt = parse_format("format", &a.format)?;
    if a.requests == 0 {
        // An empty trace is a file no command can read (its format cannot be told).
        bail!("--requests: must be at least 1");
    }
    let workload = GenWorkload::parse(&a.workload).map_err(|e| anyhow!("--workload: {e}"))?;
    let unit = match (&a.unit, &workload) {
        (Some(_), GenWorkload::RootDisk | GenWorkload::Multimedia) => bail!(
            "--unit: the {} workload does not use it (its request sizes are shaped after \
             the paper's); leave --unit out",
            workload.label()
        ),
        (Some(u), _) => parse_size(u).map_err(|e| anyhow!("--unit: {e}"))?,
        (None, _) => GenConfig::default().unit_bytes,
    };
    let space = parse_size(&a.space).map_err(|e| anyhow!("--space: {e}"))?;
    let cfg = GenConfig {
        workload,
        requests: a.requests,
        unit_bytes: unit,
        space_bytes: space,
        rate: a.rate,
        seed: a.seed,
        read_fraction: a.read_fraction,
    };
    let g = generator(&cfg).map_err(|e| anyhow!("trace generate: {e}"))?;
    let mut w = TraceWriter::create(&a.output_file, fmt, wants_gzip(a.gzip, &a.output_file))?;
    for r in g {
        w.write(&r)?;
    }
    let summary = w.finish()?;
    if summary.dropped_trims > 0 {
        eprintln!(
            "flashkit: warning: {} trims left out ({} cannot express trims)",
            summary.dropped_trims, fmt
        );
    }
    if a.report.json || a.report.csv.is_some() {
        // The parameters that define the trace, so that it can be matched to the `sim` run
        // it equals and made again (QA stop 24, F16).
        #[derive(serde::Serialize)]
        struct Generated {
            output: String,
            format: &'static str,
            workload: String,
            requests: u64,
            /// `None` for rootdisk and multimedia, whose request sizes are their own.
            unit_bytes: Option<u64>,
            space_bytes: u64,
            rate: f64,
            seed: u64,
            /// The share of reads used (the workload's default when not given).
            read_fraction: f64,
            gzip: bool,
            records: u64,
            dropped_trims: u64,
        }
        let synthetic = matches!(cfg.workload, GenWorkload::Synthetic(_));
        let g = Generated {
            output: a.output_file.display().to_string(),
            format: fmt.name(),
            workload: cfg.workload.label(),
            requests: cfg.requests,
            unit_bytes: synthetic.then_some(cfg.unit_bytes),
            space_bytes: cfg.space_bytes,
            rate: cfg.rate,
            seed: cfg.seed,
            read_fraction: cfg
                .read_fraction
                .unwrap_or_else(|| cfg.workload.default_read_fraction()),
            gzip: wants_gzip(a.gzip, &a.output_file),
            records: summary.records,
            dropped_trims: summary.dropped_trims,
        };
        if let Some(p) = &a.report.csv {
            output::write_csv(p, std::slice::from_ref(&g))?;
        }
        if a.report.json {
            return output::print_json(&g);
        }
    }
    summary_line(
        &format!(
            "{}: {} records of {} in {} format",
            a.output_file.display(),
            summary.records,
            cfg.workload.label(),
            fmt
        ),
        to_stdout,
    )
}
