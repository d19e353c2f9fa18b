//! `flashkit sweep SPEC.toml`: a grid over any `sim` option, run in parallel on all cores,
//! results streamed as JSON lines (to `--out FILE`, resumable, or with `--json` to stdout).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::Value;
use sim::sweep::{load_done, InFieldOrder, OrderedWriter, Record, Spec};

use super::sim::{describe, plot_rows, table, varying, write_results_csv, JobResult};
use crate::output::{self, PlotArgs, ReportArgs};
use crate::progress::Progress;

#[derive(Args, Debug)]
pub struct SweepArgs {
    /// Sweep specification: a TOML table whose keys are `sim` options (device, policy,
    /// redistribution, regions, region_threshold, fill, workload, written, unit, block_size,
    /// seed, arrival, readonly_fraction, wear_threshold, blocks, pages_per_block, ...), each
    /// a value or an array of values; the grid is their product.
    pub spec: PathBuf,
    /// Append each result to FILE as one JSON line; jobs already in FILE are skipped, so a
    /// rerun resumes an interrupted sweep. FILE may hold only this sweep's results (a torn
    /// last line is dropped); any other content is refused and left untouched.
    #[arg(long, value_name = "FILE.jsonl")]
    pub out: Option<PathBuf>,
    /// Worker threads (default: all cores; at most 1024, and never more than jobs).
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Print the jobs of the grid (id and options) without running them; with --json,
    /// one JSON object per line (`job`, `options`): the job list a distributed engine
    /// would take.
    #[arg(long, conflicts_with_all = ["out", "jobs", "csv", "plot"])]
    pub dry_run: bool,
    #[command(flatten)]
    pub report: ReportArgs,
    #[command(flatten)]
    pub plot: PlotArgs,
}

pub fn run(a: SweepArgs) -> Result<()> {
    match a.jobs {
        Some(0) => bail!("--jobs: must be at least 1"),
        Some(n) if n > sim::sweep::MAX_THREADS => bail!(
            "--jobs: {n} threads is too many (at most {})",
            sim::sweep::MAX_THREADS
        ),
        _ => {}
    }
    a.plot.check()?;
    let spec = Spec::from_toml_file(&a.spec)?;
    super::common::check_outputs(
        &[
            ("--out", a.out.as_deref()),
            ("--csv", a.report.csv.as_deref()),
            ("--plot", a.plot.plot.as_deref()),
        ],
        &spec,
        Some(&a.spec),
    )?;
    let jobs = spec.expand()?;
    let keys = varying(&jobs.iter().map(|j| &j.options).collect::<Vec<_>>());
    // The plot's axes are checked before any job runs, so a typo costs no results.
    a.plot.check_grid(&keys, &jobs)?;
    if a.dry_run {
        // The jobs a run would fail at once (a block size the device cannot hold, a fill
        // beyond the capacity) are not a job list to hand on.
        let bad: Vec<(&sim::sweep::Job, anyhow::Error)> = jobs
            .iter()
            .filter_map(|j| sim::driver::check(&j.config).err().map(|e| (j, e)))
            .collect();
        if let Some((j, e)) = bad.first() {
            bail!(
                "{} of {} jobs cannot run; first: job {} ({}): {e:#}",
                bad.len(),
                jobs.len(),
                j.id,
                describe(&j.options, &keys)
            );
        }
        let lines: Vec<String> = jobs
            .iter()
            .map(|j| {
                if a.report.json {
                    serde_json::json!({ "job": j.id, "options": j.options }).to_string()
                } else {
                    format!("{}  {}", j.id, describe(&j.options, &keys))
                }
            })
            .collect();
        return output::print_lines(&lines);
    }
    // A job that cannot run (a trace filter of another format, written bytes that are no
    // whole number of requests, a fill beyond the capacity) is a spec error: refused in
    // one line before anything runs or is written, as `sim` refuses it.
    if let Err((job, e)) = super::sim::check_jobs(&jobs) {
        bail!(
            "{}: {e:#}",
            match job {
                Some(j) if !keys.is_empty() =>
                    format!("{} [{}]", a.spec.display(), describe(&j.options, &keys)),
                _ => a.spec.display().to_string(),
            }
        );
    }
    // The results file, locked (`flock`) for the whole sweep: a second sweep on it would
    // run every job again beside this one (QA stop 27: 16 lines for 8 jobs). Opened only
    // once it is known to be a regular file (opening a FIFO would wait for a reader).
    let out_file = match &a.out {
        Some(p) => Some(lock_results(p)?),
        None => None,
    };
    let (mut done, dropped) = match &a.out {
        Some(out) => load_done(out, &jobs)?,
        None => (BTreeMap::new(), 0),
    };
    let out_name = a.out.as_ref().map(|p| p.display().to_string());
    if dropped > 0 {
        eprintln!(
            "flashkit: note: {}: dropped an incomplete last line ({dropped} bytes) left by an interrupted run",
            out_name.as_deref().unwrap_or_default()
        );
    }
    let todo: Vec<usize> = (0..jobs.len())
        .filter(|&i| !done.contains_key(&jobs[i].id))
        .collect();
    if a.out.is_some() && todo.len() < jobs.len() {
        eprintln!(
            "flashkit: note: {}: {} of {} jobs already done, running the other {}",
            out_name.as_deref().unwrap_or_default(),
            jobs.len() - todo.len(),
            jobs.len(),
            todo.len()
        );
    }

    // The results file (appended in job order) and, with --json, stdout (every job of the
    // grid in order, streamed).
    let file = out_file.map(|f| OrderedWriter::new(std::io::BufWriter::new(f)));
    let stdout = a.report.json.then(|| OrderedWriter::new(std::io::stdout()));
    if let Some(w) = &stdout {
        for (i, j) in jobs.iter().enumerate() {
            if let Some(r) = done.get(&j.id) {
                w.put(i, Some(serde_json::to_string(r)?));
            }
        }
    }
    let sub: Vec<sim::sweep::Job> = todo.iter().map(|&i| jobs[i].clone()).collect();
    let fresh: Vec<Mutex<Option<Result<Record, String>>>> =
        sub.iter().map(|_| Mutex::new(None)).collect();
    let bar = Progress::jobs(sub.len() as u64);
    let warned = Mutex::new(std::collections::BTreeSet::new());
    sim::sweep::run_jobs(&sub, a.jobs, &super::sim::note, |k, r| {
        let job = &sub[k];
        let rec = r
            .and_then(|result| {
                super::sim::warn_trace(&result, &warned);
                Record::new(job, &result)
            })
            .map_err(|e| format!("{e:#}"));
        let line = rec
            .as_ref()
            .ok()
            .and_then(|r| serde_json::to_string(r).ok());
        if let Some(f) = &file {
            f.put(k, line.clone());
        }
        if let Some(w) = &stdout {
            w.put(todo[k], line);
        }
        *fresh[k].lock().expect("slot") = Some(rec);
        bar.inc(1);
    })?;
    bar.finish();
    if let Some(f) = file {
        let mut w = f
            .finish()
            .with_context(|| format!("results file {}", out_name.clone().unwrap_or_default()))?;
        w.flush()?;
    }
    if let Some(w) = stdout {
        w.finish().context("stdout")?.flush()?;
    }

    // Every job of the grid, in order.
    let mut failures: Vec<String> = Vec::new();
    // A failed job by the spec file and, when the grid has several jobs, its values.
    let label = |job: &sim::sweep::Job| {
        if keys.is_empty() {
            a.spec.display().to_string()
        } else {
            format!("{} [{}]", a.spec.display(), describe(&job.options, &keys))
        }
    };
    for (k, slot) in fresh.into_iter().enumerate() {
        match slot.into_inner().expect("slot") {
            Some(Ok(r)) => {
                done.insert(r.job.clone(), r);
            }
            Some(Err(e)) => failures.push(format!("{}: {e}", label(&sub[k]))),
            None => failures.push(format!("{}: did not run", label(&sub[k]))),
        }
    }
    let records: Vec<&Record> = jobs.iter().filter_map(|j| done.get(&j.id)).collect();
    let options: Vec<&BTreeMap<String, Value>> = records.iter().map(|r| &r.options).collect();
    let results: Vec<Value> = records
        .iter()
        .map(|r| Value::Object(r.result.clone()))
        .collect();
    // Every job failed: no empty table or CSV, one line (each failure is retried by a
    // rerun).
    if records.is_empty() && !failures.is_empty() {
        bail!(
            "{} of {} jobs failed (not written, a rerun retries them); first: {}",
            failures.len(),
            jobs.len(),
            failures[0]
        );
    }
    // The CSV before the plot: a plot that fails must not lose the results. Its columns
    // in the order of `sim --csv` (the results were read back as JSON objects).
    if let Some(path) = &a.report.csv {
        let ordered: Vec<InFieldOrder> = records.iter().map(|r| InFieldOrder(&r.result)).collect();
        let rows: Vec<JobResult<_>> = records
            .iter()
            .zip(&ordered)
            .map(|(r, o)| JobResult {
                job: &r.job,
                options: &r.options,
                result: o,
            })
            .collect();
        write_results_csv(path, &rows, &keys)?;
    }
    if !records.is_empty() {
        let rows = plot_rows(&options, &results);
        let title = format!(
            "flashkit sweep {}",
            a.spec
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default()
        );
        a.plot.draw(&rows, &title)?;
    }
    if !a.report.json {
        table(&results, &options)?;
    }
    if !failures.is_empty() {
        bail!(
            "{} of {} jobs failed (not written, a rerun retries them); first: {}",
            failures.len(),
            jobs.len(),
            failures[0]
        );
    }
    Ok(())
}

/// Open the results file `path` for appending (creating it) and take its advisory lock, or
/// fail in one line when another sweep holds it. A path that exists and is not a regular
/// file is refused first: the file is read back to its end to resume (`load_done`), which
/// a pipe or a FIFO never reaches (QA stop 27: `--out /dev/stdout | cat` hung), and
/// opening a FIFO would wait for a reader.
fn lock_results(path: &std::path::Path) -> Result<std::fs::File> {
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        bail!(
            "{}: --out must be a regular file (it is read back to resume the sweep); --json streams the results to stdout",
            path.display()
        );
    }
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("results file {}", path.display()))?;
    match f.try_lock() {
        Ok(()) => Ok(f),
        Err(std::fs::TryLockError::WouldBlock) => bail!(
            "{}: another sweep is writing these results (its lock is held); wait for it, or give --out another file",
            path.display()
        ),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("results file {}", path.display()))
        }
    }
}
