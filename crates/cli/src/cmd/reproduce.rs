//! `flashkit reproduce NAME`: a paper experiment, the paper's figures beside ours.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Result};
use clap::Args;

use crate::output::{self, ReportArgs, Table};
use crate::progress::Progress;

#[derive(Args, Debug)]
pub struct ReproduceArgs {
    /// Experiment name (see --list). With --json: `comparisons` holds each of the paper's
    /// numeric figures beside ours (row keys, metric, paper, paper_high for a range,
    /// ours, diff = ours - paper in the metric's units, diff_percent; none for the experiments whose paper gives only shapes) and
    /// `results` every run, each with the `sim` job that runs it alone (`job`, `options`,
    /// as `sim --json` prints them); with --csv FILE: the comparisons, one line per figure
    /// (for experiments without the paper's figures as numbers, the runs as `sim --csv`
    /// writes them: job, the options that vary, the result).
    pub name: Option<String>,
    /// List the experiments (a table, or `--json` / `--csv FILE`).
    #[arg(long, conflicts_with_all = ["name", "seed", "runs", "scale", "plot"])]
    pub list: bool,
    /// Seed of the workload generator (the first run's; the others take the next seeds).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Runs per configuration, each with its own seed (seed, seed + 1, ...): our figures
    /// are their mean, as the 1999 paper's are of four runs; `--json` results hold every
    /// run. 1 to 1000.
    #[arg(long, default_value_t = sim::reproduce::PAPER_RUNS)]
    pub runs: u32,
    /// Scale the bytes written (1.0 = the paper's amount; smaller runs faster).
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// Draw the paper's figure with our numbers to FILE (.svg or .png).
    #[arg(long, value_name = "FILE.svg|FILE.png")]
    pub plot: Option<PathBuf>,
    #[command(flatten)]
    pub report: ReportArgs,
}

pub fn run(a: ReproduceArgs) -> Result<()> {
    if a.list || a.name.is_none() {
        #[derive(serde::Serialize)]
        struct Listed {
            experiment: &'static str,
            description: &'static str,
        }
        let all: Vec<Listed> = sim::reproduce::experiments()
            .iter()
            .map(|e| Listed {
                experiment: e.name,
                description: e.description,
            })
            .collect();
        if let Some(p) = &a.report.csv {
            output::write_csv(p, &all)?;
        }
        if a.report.json {
            return output::print_json(&all);
        }
        let mut t = Table::new(&["experiment", "what it runs"]);
        for e in &all {
            t.row(vec![e.experiment.to_string(), e.description.to_string()]);
        }
        return t.print();
    }
    if !(a.scale > 0.0 && a.scale <= 100.0) {
        bail!("--scale: {} must be in (0, 100]", a.scale);
    }
    if !(1..=1000).contains(&a.runs) {
        bail!("--runs: {} must be from 1 to 1000", a.runs);
    }
    // Outputs are checked before the runs, so a bad one costs no results.
    let name = a.name.as_deref().unwrap_or_default();
    if let Some(p) = &a.plot {
        sim::plot::check_target(p)?;
    }
    if let Some(csv) = &a.report.csv {
        sim::plot::check_writable(csv, "--csv")?;
    }
    let bar = Arc::new(Progress::jobs(0));
    let b = bar.clone();
    let opts = sim::reproduce::Options {
        seed: a.seed,
        runs: a.runs,
        scale: a.scale,
        progress: sim::reproduce::OnJob(Some(Arc::new(move |done, total| {
            b.set_total(total as u64);
            b.set(done as u64);
        }))),
        // Checked before any run starts: runs in parallel only as many as fit in RAM
        // together, refused in one line when one cannot fit alone.
        available_ram: nand::available_ram(),
        note: sim::reproduce::OnNote(Some(Arc::new(super::sim::note))),
    };
    let rep = sim::reproduce::run(name, &opts);
    bar.finish();
    let rep = rep?;
    // The CSV before the plot: a plot that fails must not lose the results. One line per
    // figure compared with the paper's (row keys, metric, paper, ours, diff_percent), or
    // per run for the experiments whose tables hold only our figures.
    if let Some(path) = &a.report.csv {
        if rep.comparisons.is_empty() {
            // As `sim --csv` writes a grid: the job, the options that vary, the result.
            let options: Vec<_> = rep.results.iter().map(|r| &r.options).collect();
            let keys = super::sim::varying(&options);
            let rows: Vec<super::sim::JobResult<_>> = rep
                .results
                .iter()
                .map(|r| super::sim::JobResult {
                    job: &r.job,
                    options: &r.options,
                    result: &r.result,
                })
                .collect();
            super::sim::write_results_csv(path, &rows, &keys)?;
        } else {
            output::write_csv(path, &rep.comparisons)?;
        }
    }
    if let Some(path) = &a.plot {
        match &rep.chart {
            Some(c) => c.render(path)?,
            None => bail!("--plot: {} has no figure", rep.name),
        }
    }
    if a.report.json {
        return output::print_json(&rep);
    }
    output::print_lines(&[rep.title.clone(), String::new()])?;
    let mut t = Table::new(&rep.columns);
    for r in &rep.rows {
        t.row(r.clone());
    }
    t.print()?;
    let mut lines = vec![String::new()];
    lines.extend(rep.notes.iter().map(|n| format!("* {n}")));
    output::print_lines(&lines)
}
