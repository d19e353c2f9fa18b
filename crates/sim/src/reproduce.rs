//! Paper experiments: `flashkit reproduce NAME` runs one and prints the paper's figures
//! beside ours with the relative difference. Nothing here is tuned to a paper's number:
//! the configurations are the papers' set-ups, the figures are typed from the papers.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{bail, Result};
use ftl::fms::redistribute::Redistribution;
use ftl::fms::select::Policy;
use serde::Serialize;

use crate::driver::{Arrival, SimConfig, SimResult};
use crate::plot::{Chart, Panel, Series, Style, XAxis};
use crate::workload::WorkloadSpec;

/// A finished reproduction: a table for people, the raw results for machines.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub name: String,
    pub title: String,
    /// The text table as printed (labels for people, cells as text).
    pub columns: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// Each figure of the paper beside ours, as numbers (experiments whose table gives
    /// the paper's figures per row; empty for the others).
    pub comparisons: Vec<Comparison>,
    pub notes: Vec<String>,
    /// Every run: the `sim` job that runs it alone (its id and options, as `sim --json`
    /// prints them: [`crate::sweep::job_of`]), then its result's fields.
    pub results: Vec<Run>,
    /// The paper's figure drawn with our numbers (`--plot`).
    #[serde(skip)]
    pub chart: Option<Chart>,
}

/// One run of an experiment: the `sim` job that gives it, then its result.
#[derive(Clone, Debug, Serialize)]
pub struct Run {
    /// The id `flashkit sim` (or a sweep) gives the run with these options.
    pub job: String,
    /// Every option's value, as in `sim --json`: `flashkit sim` with the ones that differ
    /// from the defaults runs this configuration.
    pub options: BTreeMap<String, serde_json::Value>,
    #[serde(flatten)]
    pub result: SimResult,
}

/// Each result with the job that gives it (`jobs` and `results` in the same order).
fn runs(jobs: Vec<crate::sweep::Job>, results: &[SimResult]) -> Vec<Run> {
    jobs.into_iter()
        .zip(results)
        .map(|(j, r)| Run {
            job: j.id,
            options: j.options,
            result: r.clone(),
        })
        .collect()
}

/// One figure of a paper beside ours: the row it belongs to (its keys, e.g. workload,
/// policy and redistribution), the metric (a result key, or a figure derived from results
/// named for what it is: `cleaning_cost_below_percent`, adaptive's cost below the row's
/// `against`), the paper's value (`None` when the paper gives none), ours, and
/// `diff_percent` = (ours - paper) / paper x 100 (0 when both are 0, `None` when the
/// paper's is 0 and ours is not, or there is no paper value). Where the paper gives a
/// range ("reduced by 16.5~23.3%"), `paper` is its low end and `paper_high` its high end,
/// and `diff_percent` is measured from the nearer end (0 inside the range).
///
/// `diff` is ours − paper in the metric's own units (from the nearer end of a range, 0
/// inside it; `None` without a paper value): for the metrics that are themselves
/// percentages (`*_percent`) it is the difference in points, which stays readable where
/// the paper's figure is near zero and `diff_percent` explodes (`dac-fig12`: adaptive
/// 0.67 % below CAT in the paper, about 5.9 % above in one of our rows: −976 %, or −6.5
/// points).
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub row: Vec<(&'static str, String)>,
    pub metric: &'static str,
    pub paper: Option<f64>,
    pub paper_high: Option<f64>,
    pub ours: f64,
    pub diff: Option<f64>,
    pub diff_percent: Option<f64>,
}

impl Comparison {
    pub fn new(
        row: Vec<(&'static str, String)>,
        metric: &'static str,
        paper: Option<f64>,
        ours: f64,
    ) -> Comparison {
        let diff_percent = paper.and_then(|p| rel_pct(ours, p));
        Comparison {
            row,
            metric,
            paper,
            paper_high: None,
            ours,
            diff: paper.map(|p| ours - p),
            diff_percent,
        }
    }

    /// A figure the paper gives as a range, `low` to `high`.
    pub fn range(
        row: Vec<(&'static str, String)>,
        metric: &'static str,
        (low, high): (f64, f64),
        ours: f64,
    ) -> Comparison {
        let (diff, diff_percent) = if (low..=high).contains(&ours) {
            (0.0, Some(0.0))
        } else if ours < low {
            (ours - low, rel_pct(ours, low))
        } else {
            (ours - high, rel_pct(ours, high))
        };
        Comparison {
            row,
            metric,
            paper: Some(low),
            paper_high: Some(high),
            ours,
            diff: Some(diff),
            diff_percent,
        }
    }
}

/// The row's keys first, then `metric`, `paper`, `paper_high`, `ours`, `diff`,
/// `diff_percent`: one flat object (and one CSV line) per figure.
impl Serialize for Comparison {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.row.len() + 6))?;
        for (k, v) in &self.row {
            m.serialize_entry(k, v)?;
        }
        m.serialize_entry("metric", self.metric)?;
        m.serialize_entry("paper", &self.paper)?;
        m.serialize_entry("paper_high", &self.paper_high)?;
        m.serialize_entry("ours", &self.ours)?;
        m.serialize_entry("diff", &self.diff)?;
        m.serialize_entry("diff_percent", &self.diff_percent)?;
        m.end()
    }
}

pub struct Experiment {
    pub name: &'static str,
    pub description: &'static str,
    run: fn(&Options) -> Result<Report>,
}

/// Called with (jobs done, jobs in all) as a reproduction's runs finish.
#[derive(Clone, Default)]
pub struct OnJob(pub Option<Arc<dyn Fn(usize, usize) + Send + Sync>>);

impl std::fmt::Debug for OnJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "OnJob(set)"
        } else {
            "OnJob(none)"
        })
    }
}

/// A function given one line of text.
pub type NoteFn = dyn Fn(&str) + Send + Sync;

/// Called with a one-line note for the user (fewer runs at a time for lack of RAM).
#[derive(Clone, Default)]
pub struct OnNote(pub Option<Arc<NoteFn>>);

impl std::fmt::Debug for OnNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "OnNote(set)"
        } else {
            "OnNote(none)"
        })
    }
}

/// How many runs each figure of ours averages by default: the 1999 paper's "averaging
/// four runs" (Section 5; the DAC paper does not say, and gets the same).
pub const PAPER_RUNS: u32 = 4;

/// Knobs every reproduction accepts (to run it smaller or with another seed).
#[derive(Clone, Debug)]
pub struct Options {
    /// The first run's seed; the others take the next ones (`seed + 1`, ...).
    pub seed: u64,
    /// Runs per configuration, each with its own seed; our figures are their mean
    /// ([`SimResult::mean`]) and `results` holds every run. [`PAPER_RUNS`] by default.
    pub runs: u32,
    /// Multiply the bytes written by this (1.0 = the paper's amount).
    pub scale: f64,
    /// Progress of the runs.
    pub progress: OnJob,
    /// The memory the runs may use (bytes; by default [`nand::available_ram`], `None` =
    /// unknown): runs go in parallel only as many as fit together, and an experiment with
    /// a run that cannot fit alone is refused before any starts ([`crate::ram::plan`]).
    pub available_ram: Option<u64>,
    /// Where that check's note goes when it runs fewer at a time than there are cores.
    pub note: OnNote,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            seed: 1,
            runs: PAPER_RUNS,
            scale: 1.0,
            progress: OnJob::default(),
            available_ram: nand::available_ram(),
            note: OnNote::default(),
        }
    }
}

pub fn experiments() -> Vec<Experiment> {
    vec![
        Experiment {
            name: "chiang1999-table4",
            description: "Chiang & Chang 1999, Table 4: sequential / random / 90-10 locality \
                          updates on the 24 MB Intel card (4 KiB blocks, 90% fill, 192 MB \
                          written) under greedy (M1), cost-benefit (M4) and CAT (M6)",
            run: table4,
        },
        Experiment {
            name: "dac-fig12",
            description: "Chiang, Lee & Chang (DAC), Fig. 12: the 4-phase workload (90/10, \
                          random, 90/10, random; 160 MB in 4 KiB units) on the Intel card at \
                          90% fill, regions 1-4, all four policies, 30-minute threshold and none",
            run: dac_fig12,
        },
        Experiment {
            name: "chiang1999-fig12",
            description: "Chiang & Chang 1999, Fig. 12: localities 50/50 ... 95/5 on the 24 MB \
                          Intel card (4 KiB blocks, 90% fill, 192 MB written), greedy-M1, \
                          cost-benefit-M4, CAT-M6: erasures, blocks copied, throughput, wear",
            run: fig12,
        },
        Experiment {
            name: "chiang1999-fig13",
            description: "Chiang & Chang 1999, Fig. 13: utilization 50-90% for sequential, \
                          random and 90/10 locality updates, greedy-M1, cost-benefit-M4, CAT-M6",
            run: fig13,
        },
        Experiment {
            name: "chiang1999-fig18",
            description: "Chiang & Chang 1999, Fig. 18: redistribution M1/M4/M6 under greedy, \
                          cost-benefit and CAT for localities 50/50 ... 95/5 (24 MB, 128 KiB \
                          segments, 90% fill, Poisson arrivals over two weeks)",
            run: fig18,
        },
        Experiment {
            name: "dac-fig11",
            description: "Chiang, Lee & Chang (DAC), Fig. 11: localities 50/50 ... 95/5, 24 MB, \
                          4 KiB blocks, 85% fill, 192 MB over two weeks; each policy with DAC \
                          off (1 region, M1), on (4 regions) and on with an 84-minute threshold",
            run: dac_fig11,
        },
    ]
}

pub fn run(name: &str, opts: &Options) -> Result<Report> {
    let e = experiments()
        .into_iter()
        .find(|e| e.name == name)
        .ok_or_else(|| {
            let names: Vec<&str> = experiments().iter().map(|e| e.name).collect();
            anyhow::anyhow!("unknown experiment '{name}' (known: {})", names.join(", "))
        })?;
    let mut rep = (e.run)(opts)?;
    rep.notes.push(runs_note(name, opts, &rep.results));
    Ok(rep)
}

/// What our figures are the mean of, and how far the seeds spread: the largest range of
/// erasures among one configuration's runs, in percent of their mean.
fn runs_note(name: &str, o: &Options, all: &[Run]) -> String {
    let per = o.runs.max(1);
    if per == 1 {
        return format!(
            "one run per configuration (seed {}); the 1999 paper averages four runs \
             (--runs {PAPER_RUNS})",
            o.seed
        );
    }
    let mut groups: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in all {
        let mut key = r.options.clone();
        key.remove("seed");
        let key = serde_json::to_string(&key).unwrap_or_default();
        groups
            .entry(key)
            .or_default()
            .push(r.result.erasures as f64);
    }
    let spread = groups
        .values()
        .map(|v| {
            let mean = v.iter().sum::<f64>() / v.len() as f64;
            let (mn, mx) = v
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
                    (a.min(x), b.max(x))
                });
            if mean > 0.0 {
                (mx - mn) / mean * 100.0
            } else {
                0.0
            }
        })
        .fold(0.0f64, f64::max);
    let whose = if name.starts_with("chiang1999") {
        "as the paper averages four runs"
    } else {
        "the DAC paper does not say how many runs it averages; the 1999 paper averages four"
    };
    let last = o.seed.wrapping_add(per as u64 - 1);
    let wraps = if last < o.seed {
        ", wrapping past 2^64 - 1"
    } else {
        ""
    };
    format!(
        "each of our figures is the mean of {per} runs, seeds {} to {last}{wraps} ({whose}; \
         `results` holds every run); erasures differed between one configuration's runs by \
         up to {spread:.1}% of their mean",
        o.seed
    )
}

fn rel(ours: f64, paper: f64) -> String {
    if paper == 0.0 {
        if ours == 0.0 {
            "0%".into()
        } else {
            "n/a".into()
        }
    } else {
        signed_pct((ours - paper) / paper * 100.0)
    }
}

/// [`rel`] as a number: `None` where it prints "n/a".
fn rel_pct(ours: f64, paper: f64) -> Option<f64> {
    if paper == 0.0 {
        (ours == 0.0).then_some(0.0)
    } else {
        Some((ours - paper) / paper * 100.0).filter(|v| v.is_finite())
    }
}

/// "+12.3%", or "n/a" for a NaN or infinite value.
fn signed_pct(v: f64) -> String {
    if v.is_finite() {
        format!("{}%", signed1(v))
    } else {
        "n/a".into()
    }
}

/// `v` with a sign and one decimal; a value that rounds to zero is "+0.0" whatever its
/// sign (never "-0.0").
fn signed1(v: f64) -> String {
    let s = format!("{v:+.1}");
    if s == "-0.0" {
        "+0.0".into()
    } else {
        s
    }
}

/// How far `a` is below `b`, in percent of `b` (negative: `a` is above); `None` when `b`
/// is 0 or either is not finite.
fn pct_less(a: f64, b: f64) -> Option<f64> {
    let v = (b - a) / b * 100.0;
    (b != 0.0 && v.is_finite()).then_some(v)
}

/// "12.3% below" or "4.5% above" (`a` against `b`, in percent of `b`), or "n/a": for notes
/// that would otherwise read "below … by -4.5%".
/// "level with" when the percentage rounds to 0.0.
fn below_or_above(a: f64, b: f64) -> String {
    match pct_less(a, b) {
        Some(v) if format!("{:.1}", v.abs()) == "0.0" => "level with".into(),
        Some(v) if v < 0.0 => format!("{:.1}% above", -v),
        Some(v) => format!("{v:.1}% below"),
        None => "n/a".into(),
    }
}

/// "12.3%", or "n/a" when there is no percentage.
fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".into(), |v| format!("{v:.1}%"))
}

/// How far apart the values are, in percent of the smallest: 0 when all are equal, `None`
/// when the smallest is 0 and another is not (no base to compare with).
fn spread_pct(v: &[f64]) -> Option<f64> {
    let (mn, mx) = v
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        });
    let v = (mx - mn) / mn * 100.0;
    if mn == mx {
        Some(0.0)
    } else {
        (mn != 0.0 && v.is_finite()).then_some(v)
    }
}

/// Run each configuration `o.runs` times, seeds `seed`, `seed + 1`, ... (each run a `sim`
/// job of its own), on all cores (fewer when they would not fit in RAM together; refused
/// before any starts when one cannot fit alone: [`crate::sweep::run_configs`]), reporting
/// progress. Returns each configuration's mean ([`SimResult::mean`], in input order:
/// what the tables and comparisons show) and every run with its job (`results`).
fn collect(cfgs: &[SimConfig], o: &Options) -> Result<(Vec<SimResult>, Vec<Run>)> {
    let per = o.runs.max(1) as usize;
    // The runs' seeds must each fit a sweep file (`sweep::fits_i64`): said of `--seed`
    // and `--runs` together, not of a seed the user never gave (QA stop 35).
    let most = i64::MAX as u64;
    if per > 1 && o.seed <= most && most - o.seed < per as u64 - 1 {
        bail!(
            "--seed {} with --runs {per}: the runs take seeds {} to {}, past {most} (the largest integer a sweep file holds): give a seed of at most {}",
            o.seed,
            o.seed,
            o.seed as u128 + per as u128 - 1,
            most - (per as u64 - 1)
        );
    }
    let cfgs: Vec<SimConfig> = cfgs
        .iter()
        .flat_map(|c| {
            (0..per).map(move |k| {
                let mut c = c.clone();
                c.seed = c.seed.wrapping_add(k as u64);
                c
            })
        })
        .collect();
    // Every run's job first: a configuration no `sim` options give is an error before any
    // run starts.
    let jobs = cfgs
        .iter()
        .map(crate::sweep::job_of)
        .collect::<Result<Vec<_>>>()?;
    let n = cfgs.len();
    let refs: Vec<&SimConfig> = cfgs.iter().collect();
    let slots: Vec<Mutex<Option<Result<SimResult>>>> =
        cfgs.iter().map(|_| Mutex::new(None)).collect();
    let done = AtomicUsize::new(0);
    let note = |text: &str| {
        if let Some(f) = &o.note.0 {
            f(text);
        }
    };
    if let Some(f) = &o.progress.0 {
        f(0, n);
    }
    crate::sweep::run_configs(&refs, None, o.available_ram, &note, |i, r| {
        *slots[i].lock().expect("slot") = Some(r);
        let d = done.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(f) = &o.progress.0 {
            f(d, n);
        }
    })?;
    let results = slots
        .into_iter()
        .map(|s| s.into_inner().expect("slot").expect("every run ran"))
        .collect::<Result<Vec<_>>>()?;
    let means = results.chunks(per).map(SimResult::mean).collect();
    Ok((means, runs(jobs, &results)))
}

/// The Table 4 pairing of the 1999 paper: greedy M1, cost-benefit M4, CAT M6.
pub fn paper_pairing(p: Policy) -> Redistribution {
    match p {
        Policy::Greedy => Redistribution::M1,
        Policy::CostBenefit => Redistribution::M4,
        Policy::Cat | Policy::Adaptive => Redistribution::M6,
    }
}

/// Workload, then erasures, blocks copied and wear stddev for greedy, cost-benefit, CAT.
type PaperRow = (&'static str, [f64; 3], [f64; 3], [f64; 3]);

fn table4(o: &Options) -> Result<Report> {
    // Pentium 133 rows of Table 4 (the "actual" rows of Table 6).
    let paper: [PaperRow; 3] = [
        (
            "sequential",
            [1567., 1568., 1568.],
            [0., 0., 0.],
            [2.63, 2.64, 2.64],
        ),
        (
            "random",
            [7103., 7265., 7241.],
            [171624., 176634., 175891.],
            [4.03, 3.51, 2.96],
        ),
        (
            "hotcold:90/10",
            [8827., 5733., 4138.],
            [225068., 129142., 79705.],
            [11.85, 9.20, 5.97],
        ),
    ];
    let policies = [Policy::Greedy, Policy::CostBenefit, Policy::Cat];
    let written = scaled("chiang1999-table4", 192 << 20, o)?;
    let mut cfgs = Vec::new();
    for (w, ..) in &paper {
        for p in policies {
            let mut c = SimConfig::flagship();
            c.workload = WorkloadSpec::parse(w).map_err(anyhow::Error::msg)?;
            c.written_bytes = written;
            c.seed = o.seed;
            c.fms.policy = p;
            c.fms.redistribution = paper_pairing(p);
            cfgs.push(c);
        }
    }
    let (results, all) = collect(&cfgs, o)?;
    let mut rows = Vec::new();
    let mut comparisons = Vec::new();
    for (wi, (w, pe, pc, pw)) in paper.iter().enumerate() {
        for (pi, p) in policies.iter().enumerate() {
            let r = &results[wi * 3 + pi];
            let row = || {
                vec![
                    ("workload", w.to_string()),
                    ("policy", p.name().to_string()),
                    ("redistribution", r.redistribution.clone()),
                ]
            };
            for (metric, paper, ours) in [
                ("erasures", pe[pi], r.erasures as f64),
                ("blocks_copied", pc[pi], r.blocks_copied as f64),
                ("wear_stddev", pw[pi], r.wear_stddev),
            ] {
                comparisons.push(Comparison::new(row(), metric, Some(paper), ours));
            }
            rows.push(vec![
                w.to_string(),
                pair_name(r),
                format!("{}", pe[pi]),
                r.erasures.to_string(),
                rel(r.erasures as f64, pe[pi]),
                format!("{}", pc[pi]),
                r.blocks_copied.to_string(),
                rel(r.blocks_copied as f64, pc[pi]),
                format!("{:.2}", pw[pi]),
                format!("{:.2}", r.wear_stddev),
                rel(r.wear_stddev, pw[pi]),
            ]);
        }
    }
    let loc = &results[6..9];
    // The paper's text gives CAT's erasures as 54.93% below greedy and 28.91% below
    // cost-benefit: those are its Intel 486 rows (3978 vs 8827 and 5596); its Pentium 133
    // rows, the ones in our table, give 53.1% and 27.8%. Its blocks-copied figures (64.59%,
    // 38.28%) are the Pentium rows'.
    let (_, pe, pc, _) = paper[2];
    let mut notes = vec![
        format!(
            "locality: CAT erasures {} below greedy (paper's text 54.9%, from its Intel 486 rows; \
             its Table 4 Pentium rows {}), {} below cost-benefit (paper's text 28.9%, its Table 4 \
             Pentium rows {})",
            pct(pct_less(loc[2].erasures as f64, loc[0].erasures as f64)),
            pct(pct_less(pe[2], pe[0])),
            pct(pct_less(loc[2].erasures as f64, loc[1].erasures as f64)),
            pct(pct_less(pe[2], pe[1])),
        ),
        format!(
            "locality: CAT blocks copied {} below greedy (paper {}), {} below cost-benefit (paper {}; \
             its text and Table 4 agree)",
            pct(pct_less(loc[2].blocks_copied as f64, loc[0].blocks_copied as f64)),
            pct(pct_less(pc[2], pc[0])),
            pct(pct_less(loc[2].blocks_copied as f64, loc[1].blocks_copied as f64)),
            pct(pct_less(pc[2], pc[1])),
        ),
    ];
    let erasures = |rs: &[SimResult]| rs.iter().map(|r| r.erasures as f64).collect::<Vec<_>>();
    notes.push(format!(
        "random: policies within {} of each other in erasures (paper: within {})",
        pct(spread_pct(&erasures(&results[3..6]))),
        pct(spread_pct(&paper[1].1)),
    ));
    notes.push(format!(
        "{} data blocks per 128 KiB segment (one 4 KiB slot holds the segment header); the paper's \
         sequential erasures imply about 31.4",
        results[0].blocks_per_segment
    ));
    scale_note(&mut notes, o, written, 192 << 20);
    Ok(Report {
        name: "chiang1999-table4".into(),
        title: "Chiang & Chang 1999, Table 4 (Pentium 133 rows): paper vs flashkit".into(),
        columns: [
            "workload",
            "policy",
            "erasures paper",
            "ours",
            "diff",
            "copied paper",
            "ours",
            "diff",
            "wear sd paper",
            "ours",
            "diff",
        ]
        .map(String::from)
        .to_vec(),
        chart: Some(table4_chart(&results, written)),
        rows,
        comparisons,
        notes,
        results: all,
    })
}

fn dac_fig12(o: &Options) -> Result<Report> {
    let workload = WorkloadSpec::parse("phases:hotcold:90/10,random,hotcold:90/10,random")
        .map_err(anyhow::Error::msg)?;
    let thresholds: [Option<u64>; 2] = [Some(30 * 60 * 1_000_000_000_000), None];
    let written = scaled("dac-fig12", 160 << 20, o)?;
    let mut cfgs = Vec::new();
    for th in thresholds {
        for p in Policy::ALL {
            for regions in 1..=4u8 {
                let mut c = SimConfig::flagship();
                c.workload = workload.clone();
                c.written_bytes = written;
                c.seed = o.seed;
                c.fms.policy = p;
                c.fms.regions = regions;
                // One region is the DAC paper's baseline: one-segment cleaning (M1).
                c.fms.redistribution = Redistribution::M1;
                c.fms.region_threshold_ps = th;
                cfgs.push(c);
            }
        }
    }
    let (results, all) = collect(&cfgs, o)?;
    let mut rows = Vec::new();
    for r in &results {
        rows.push(vec![
            // One region has no threshold to apply ("-"; null in the result).
            r.region_threshold_s
                .map_or(if r.regions > 1 { "none" } else { "-" }.to_string(), |s| {
                    format!("{}m", s / 60.0)
                }),
            r.policy.clone(),
            r.regions.to_string(),
            r.erasures.to_string(),
            r.blocks_copied.to_string(),
            format!("{:.1}", r.cleaning_cost),
            format!("{:.2}", r.wear_stddev),
            r.policy_greedy_share
                .map_or("-".into(), |g| format!("{:.0}%", g * 100.0)),
        ]);
    }
    let mut notes = Vec::new();
    let mut comparisons = Vec::new();
    let idx = |t: usize, p: usize, r: usize| t * 16 + p * 4 + (r - 1);
    for (t, label) in [(0usize, "30m threshold"), (1, "no threshold")] {
        let a1 = &results[idx(t, 3, 1)];
        // The paper's figures beside ours, as numbers (the notes below say them in words).
        let th = if t == 0 { "30m" } else { "none" };
        let row = |regions: &str, against: &str| {
            vec![
                ("threshold", th.to_string()),
                ("policy", "adaptive".to_string()),
                ("regions", regions.to_string()),
                ("against", against.to_string()),
            ]
        };
        for r in 2..=4usize {
            let a = &results[idx(t, 3, r)];
            for (metric, range, ours) in [
                (
                    "erasures_below_percent",
                    (15.97, 22.55),
                    pct_less(a.erasures as f64, a1.erasures as f64),
                ),
                (
                    "cleaning_cost_below_percent",
                    (16.5, 23.3),
                    pct_less(a.cleaning_cost, a1.cleaning_cost),
                ),
            ] {
                if let Some(ours) = ours {
                    comparisons.push(Comparison::range(
                        row(&r.to_string(), "1 region"),
                        metric,
                        range,
                        ours,
                    ));
                }
            }
        }
        for (p, name, paper) in [
            (0, "greedy", 15.73),
            (1, "cost-benefit", 4.67),
            (2, "cat", 0.67),
        ] {
            let a4 = results[idx(t, 3, 4)].cleaning_cost;
            if let Some(ours) = pct_less(a4, results[idx(t, p, 4)].cleaning_cost) {
                comparisons.push(Comparison::new(
                    row("4", name),
                    "cleaning_cost_below_percent",
                    Some(paper),
                    ours,
                ));
            }
        }
        let shares: Vec<f64> = (1..=4)
            .filter_map(|r| results[idx(t, 3, r)].policy_greedy_share)
            .filter(|g| g.is_finite())
            .collect();
        if shares.len() == 4 {
            comparisons.push(Comparison::new(
                row("1-4 (mean)", "-"),
                "policy_greedy_share",
                Some(0.41),
                shares.iter().sum::<f64>() / 4.0,
            ));
        }
        let red: Vec<String> = (2..=4)
            .map(|r| {
                let a = &results[idx(t, 3, r)];
                format!(
                    "{}: erasures {}, cost {}",
                    r,
                    below_or_above(a.erasures as f64, a1.erasures as f64),
                    below_or_above(a.cleaning_cost, a1.cleaning_cost)
                )
            })
            .collect();
        notes.push(format!(
            "{label}: adaptive against 1 region, at regions {} (paper: erasures 16.0-22.6% below, cleaning cost 16.5-23.3% below)",
            red.join("; ")
        ));
        let a4 = results[idx(t, 3, 4)].cleaning_cost;
        let vs: Vec<String> = [
            (0, "greedy", 15.73),
            (1, "cost-benefit", 4.67),
            (2, "cat", 0.67),
        ]
        .iter()
        .map(|&(p, n, paper)| {
            format!(
                "{} {n} (paper {paper}% below)",
                below_or_above(a4, results[idx(t, p, 4)].cleaning_cost)
            )
        })
        .collect();
        notes.push(format!(
            "{label}: at 4 regions adaptive's cleaning cost is {}",
            vs.join(", ")
        ));
        let shares: Vec<String> = (1..=4)
            .map(|r| {
                results[idx(t, 3, r)]
                    .policy_greedy_share
                    .filter(|g| g.is_finite())
                    .map_or("n/a".into(), |g| format!("{:.0}%", g * 100.0))
            })
            .collect();
        notes.push(format!(
            "{label}: adaptive chose greedy {} of the time at regions 1-4 (paper: 41% on average)",
            shares.join("/")
        ));
    }
    scale_note(&mut notes, o, written, 160 << 20);
    Ok(Report {
        name: "dac-fig12".into(),
        title: "DAC paper, Fig. 12: 4-phase synthetic workload, regions 1-4".into(),
        columns: [
            "threshold",
            "policy",
            "regions",
            "erasures",
            "copied",
            "cleaning cost",
            "wear sd",
            "greedy share",
        ]
        .map(String::from)
        .to_vec(),
        chart: Some(dac_fig12_chart(&cfgs, &results)),
        rows,
        comparisons,
        notes,
        results: all,
    })
}

// ---------------------------------------------------------------------------------------
// Figures: helpers shared by the reproductions below.

/// The localities of the 1999 paper's Fig. 12 / 18 and the DAC paper's Fig. 11.
const LOCALITIES: [(u32, u32); 6] = [(50, 50), (60, 40), (70, 30), (80, 20), (90, 10), (95, 5)];

/// The three policies of the 1999 paper, each with its pairing.
const PAIRED: [Policy; 3] = [Policy::Greedy, Policy::CostBenefit, Policy::Cat];

/// The generated workloads' span: "two weeks' write activities" (192 MB in 4 KiB units).
const TWO_WEEKS_S: f64 = 14.0 * 86400.0;

fn loc_label((x, y): (u32, u32)) -> String {
    format!("{x}/{y}")
}

fn hotcold((x, y): (u32, u32)) -> WorkloadSpec {
    WorkloadSpec::HotCold {
        x: x as f64 / 100.0,
        y: y as f64 / 100.0,
    }
}

/// The fewest 4 KiB requests a reproduction runs: 1024 (4 MiB, a sixth of the 24 MB
/// card). Fewer leave the card's free space unfilled, so most runs do no cleaning at all
/// and the percentages compare a handful of erasures (or none); the smallest scales
/// allowed are 1/48 (192 MB experiments) and 1/40 (dac-fig12). `--scale 0.05` runs 2457
/// and 2048 requests.
pub const MIN_REQUESTS: u64 = 1024;

/// `bytes` times `--scale`, rounded down to whole 4 KiB requests; refused (naming the
/// experiment and the size that would result) below [`MIN_REQUESTS`], never raised.
fn scaled(name: &str, bytes: u64, o: &Options) -> Result<u64> {
    let b = (bytes as f64 * o.scale) as u64;
    let b = b - b % 4096;
    if b / 4096 < MIN_REQUESTS {
        let min = MIN_REQUESTS * 4096;
        bail!(
            "--scale {}: {name} would write {} bytes ({} requests of 4 KiB) of the paper's {}; \
             a reproduction needs at least {MIN_REQUESTS} requests ({}): --scale {} or more",
            crate::trace::generate::short(o.scale),
            b,
            b / 4096,
            mb(bytes),
            mb(min),
            (min as f64 / bytes as f64 * 1e4).ceil() / 1e4
        );
    }
    Ok(b)
}

/// "192 MB" (MB as the papers write it: 2^20 bytes), "9.60 MB" when not whole.
fn mb(bytes: u64) -> String {
    if bytes.is_multiple_of(1 << 20) {
        format!("{} MB", bytes >> 20)
    } else {
        format!("{:.2} MB", bytes as f64 / (1u64 << 20) as f64)
    }
}

/// The note every reproduction prints when `--scale` is not 1: the paper's figures are
/// for the full amount, ours for the amount written.
fn scale_note(notes: &mut Vec<String>, o: &Options, written: u64, paper_bytes: u64) {
    if o.scale != 1.0 {
        notes.push(format!(
            "run at --scale {}: {} written of the paper's {}; the paper's figures are for the \
             full amount, so its counts compare with ours only at --scale 1",
            o.scale,
            mb(written),
            mb(paper_bytes)
        ));
    }
}

/// Poisson arrivals at the paper's rate: 192 MB of 4 KiB requests over two weeks (the
/// rate, not the span, is kept when `--scale` shortens the run).
fn two_week_poisson() -> Arrival {
    Arrival::Poisson {
        rate: (192u64 << 20) as f64 / 4096.0 / TWO_WEEKS_S,
    }
}

/// "greedy-M1".
fn pair_name(r: &SimResult) -> String {
    format!("{}-{}", r.policy, r.redistribution.to_ascii_uppercase())
}

fn metric(r: &SimResult, key: &str) -> f64 {
    serde_json::to_value(r)
        .ok()
        .and_then(|v| v.get(key).and_then(|x| x.as_f64()))
        .unwrap_or(f64::NAN)
}

/// A panel from (series, x, y) points; series in first-seen order.
fn panel(
    title: String,
    x_label: &str,
    y_label: &str,
    x: XAxis,
    style: Style,
    points: impl IntoIterator<Item = (String, f64, f64)>,
) -> Panel {
    let mut series: Vec<Series> = Vec::new();
    for (name, px, py) in points {
        match series.iter_mut().find(|s| s.name == name) {
            Some(s) => s.points.push((px, py)),
            None => series.push(Series {
                name,
                points: vec![(px, py)],
            }),
        }
    }
    Panel {
        title,
        x_label: x_label.into(),
        y_label: y_label.into(),
        x,
        style,
        series,
    }
}

fn letter(i: usize) -> char {
    (b'a' + i as u8) as char
}

const LOCALITY_AXIS: &str = "locality of reference (x% of writes to y% of data)";

fn loc_axis() -> XAxis {
    XAxis::Categories(LOCALITIES.iter().map(|&l| loc_label(l)).collect())
}

fn table4_chart(results: &[SimResult], written: u64) -> Chart {
    let workloads = ["sequential", "random", "hotcold:90/10"];
    let cats = XAxis::Categories(vec![
        "sequential".into(),
        "random".into(),
        "locality 90/10".into(),
    ]);
    let metrics = [
        ("erasures", "erasures"),
        ("blocks_copied", "blocks copied"),
        ("wear_stddev", "wear std. deviation"),
    ];
    let panels = metrics
        .iter()
        .enumerate()
        .map(|(i, (m, label))| {
            panel(
                format!("({}) {label}", letter(i)),
                "workload",
                label,
                cats.clone(),
                Style::Bars,
                results.iter().map(|r| {
                    let x = workloads.iter().position(|w| *w == r.workload).unwrap_or(0);
                    (pair_name(r), x as f64, metric(r, m))
                }),
            )
        })
        .collect();
    Chart {
        title: format!(
            "Chiang & Chang 1999, Table 4 (flashkit): 24 MB card, 90% fill, {} written",
            mb(written)
        ),
        panels,
    }
}

/// `cfgs` are the runs of `results`: a panel takes the runs configured with its threshold
/// (a one-region result reports none, since one region applies no threshold, but each
/// panel's curve starts at one region).
fn dac_fig12_chart(cfgs: &[SimConfig], results: &[SimResult]) -> Chart {
    let panels = [
        (Some(1800.0), "30-minute threshold"),
        (None, "no threshold"),
    ]
    .iter()
    .enumerate()
    .map(|(i, (th, label))| {
        panel(
            format!("({}) cleaning cost, {label}", letter(i)),
            "DAC regions",
            "cleaning cost",
            XAxis::Numeric,
            Style::Lines,
            cfgs.iter()
                .zip(results)
                .filter(|(c, _)| c.fms.region_threshold_ps.map(|p| p as f64 / 1e12) == *th)
                .map(|(_, r)| (r.policy.clone(), r.regions as f64, r.cleaning_cost)),
        )
    })
    .collect();
    Chart {
        title: "DAC paper, Fig. 12 (flashkit): 4-phase workload, regions 1-4".into(),
        panels,
    }
}

/// Relative change from `a` to `b` in percent ("+35.2%": `b` is higher), or "n/a" when
/// `a` is 0. "B vs A" in a label or note is this: (B - A) / A.
fn change(a: f64, b: f64) -> String {
    if a == 0.0 {
        "n/a".into()
    } else {
        signed_pct((b - a) / a * 100.0)
    }
}

/// "50/50, 60/40" of the localities where `pred` holds, or "none".
fn where_(pred: impl Fn(usize) -> bool) -> String {
    let v: Vec<String> = (0..LOCALITIES.len())
        .filter(|&i| pred(i))
        .map(|i| loc_label(LOCALITIES[i]))
        .collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

fn fig12(o: &Options) -> Result<Report> {
    let written = scaled("chiang1999-fig12", 192 << 20, o)?;
    let mut cfgs = Vec::new();
    for &l in &LOCALITIES {
        for p in PAIRED {
            let mut c = SimConfig::flagship();
            c.workload = hotcold(l);
            c.written_bytes = written;
            c.seed = o.seed;
            c.fms.policy = p;
            c.fms.redistribution = paper_pairing(p);
            cfgs.push(c);
        }
    }
    let (results, all) = collect(&cfgs, o)?;
    let at = |li: usize, pi: usize| &results[li * 3 + pi];
    let mut rows = Vec::new();
    for (li, &l) in LOCALITIES.iter().enumerate() {
        for pi in 0..3 {
            let r = at(li, pi);
            rows.push(vec![
                loc_label(l),
                pair_name(r),
                r.erasures.to_string(),
                r.blocks_copied.to_string(),
                r.throughput_bytes_per_s
                    .map_or("-".into(), |t| format!("{t:.0}")),
                format!("{:.2}", r.wear_stddev),
            ]);
        }
    }
    let best = |li: usize, m: &str, low: bool| -> usize {
        let v: Vec<f64> = (0..3).map(|pi| metric(at(li, pi), m)).collect();
        let mut b = 0;
        for pi in 1..3 {
            if (low && v[pi] < v[b]) || (!low && v[pi] > v[b]) {
                b = pi;
            }
        }
        b
    };
    let last = LOCALITIES.len() - 1;
    let (g, cb, cat) = (at(last, 0), at(last, 1), at(last, 2));
    // The paper's figures at 95/5 beside ours, as numbers (the notes say them in words).
    let mut comparisons = Vec::new();
    // (Throughput is null only for a run timed at zero, which the paper's setups never are.)
    let tp = |r: &SimResult| r.throughput_bytes_per_s.unwrap_or(f64::NAN);
    let row = |against: &str| {
        vec![
            ("locality", loc_label(LOCALITIES[last])),
            ("policy", "cat".to_string()),
            ("against", against.to_string()),
        ]
    };
    for (other, name, erasures, throughput) in [
        (g, "greedy", 69.16, 201.11),
        (cb, "cost-benefit", 33.22, 36.98),
    ] {
        if let Some(ours) = pct_less(cat.erasures as f64, other.erasures as f64) {
            comparisons.push(Comparison::new(
                row(name),
                "erasures_below_percent",
                Some(erasures),
                ours,
            ));
        }
        if let Some(less) = pct_less(tp(cat), tp(other)) {
            comparisons.push(Comparison::new(
                row(name),
                "throughput_above_percent",
                Some(throughput),
                -less,
            ));
        }
    }
    let mut notes = vec![
        format!(
            "CAT has the fewest erasures at {} (paper: CAT best above 60/40)",
            where_(|li| best(li, "erasures", true) == 2)
        ),
        format!(
            "95/5: CAT erasures {} below greedy (paper 69.16%), {} below cost-benefit (paper 33.22%)",
            pct(pct_less(cat.erasures as f64, g.erasures as f64)),
            pct(pct_less(cat.erasures as f64, cb.erasures as f64))
        ),
        format!(
            "95/5: CAT throughput {} vs greedy (paper +201.11%), {} vs cost-benefit (paper +36.98%)",
            change(tp(g), tp(cat)),
            change(tp(cb), tp(cat))
        ),
        format!(
            "50/50 -> 95/5 erasures: greedy {}, cost-benefit {}, CAT {} (paper: CAT improves rapidly, greedy deteriorates severely)",
            change(at(0, 0).erasures as f64, g.erasures as f64),
            change(at(0, 1).erasures as f64, cb.erasures as f64),
            change(at(0, 2).erasures as f64, cat.erasures as f64)
        ),
        format!(
            "CAT has the lowest wear std. deviation at {} (paper: CAT best in wear-levelling at every locality)",
            where_(|li| best(li, "wear_stddev", true) == 2)
        ),
    ];
    scale_note(&mut notes, o, written, 192 << 20);
    let metrics = [
        ("erasures", "erasures"),
        ("blocks_copied", "blocks copied"),
        ("throughput_bytes_per_s", "throughput (bytes/s)"),
        (
            "wear_stddev",
            "wear std. deviation (degree of uneven wearing)",
        ),
    ];
    let panels = metrics
        .iter()
        .enumerate()
        .map(|(i, (m, label))| {
            panel(
                format!("({}) {}", letter(i), label),
                LOCALITY_AXIS,
                label,
                loc_axis(),
                Style::Lines,
                results
                    .iter()
                    .enumerate()
                    .map(|(k, r)| (pair_name(r), (k / 3) as f64, metric(r, m))),
            )
        })
        .collect();
    Ok(Report {
        name: "chiang1999-fig12".into(),
        title: format!(
            "Chiang & Chang 1999, Fig. 12: varying locality of reference (24 MB card, 90% fill, {})",
            mb(written)
        ),
        columns: ["locality", "policy", "erasures", "copied", "throughput B/s", "wear sd"]
            .map(String::from)
            .to_vec(),
        rows,
        comparisons,
        notes,
        results: all,
        chart: Some(Chart {
            title: "Chiang & Chang 1999, Fig. 12 (flashkit): varying locality of reference".into(),
            panels,
        }),
    })
}

fn fig13(o: &Options) -> Result<Report> {
    let fills = [0.5, 0.6, 0.7, 0.8, 0.9];
    let workloads = ["sequential", "random", "hotcold:90/10"];
    let written = scaled("chiang1999-fig13", 192 << 20, o)?;
    let mut cfgs = Vec::new();
    for w in workloads {
        for &f in &fills {
            for p in PAIRED {
                let mut c = SimConfig::flagship();
                c.workload = WorkloadSpec::parse(w).map_err(anyhow::Error::msg)?;
                c.fill = f;
                c.written_bytes = written;
                c.seed = o.seed;
                c.fms.policy = p;
                c.fms.redistribution = paper_pairing(p);
                cfgs.push(c);
            }
        }
    }
    let (results, all) = collect(&cfgs, o)?;
    let nf = fills.len();
    let at = |wi: usize, fi: usize, pi: usize| &results[(wi * nf + fi) * 3 + pi];
    let rows = results
        .iter()
        .map(|r| {
            vec![
                r.workload.clone(),
                format!("{:.2}", r.fill),
                pair_name(r),
                r.erasures.to_string(),
                r.blocks_copied.to_string(),
                format!("{:.2}", r.wear_stddev),
            ]
        })
        .collect();
    let mut notes = Vec::new();
    for (wi, w) in workloads.iter().enumerate() {
        let grow: Vec<String> = (0..3)
            .map(|pi| {
                let (lo, hi) = (at(wi, 0, pi).erasures, at(wi, nf - 1, pi).erasures);
                if lo == 0 {
                    format!("{} n/a ({lo} -> {hi})", at(wi, 0, pi).policy)
                } else {
                    format!("{} x{:.2}", at(wi, 0, pi).policy, hi as f64 / lo as f64)
                }
            })
            .collect();
        // The widest spread over the utilizations; n/a if any has no base.
        let spread = (0..nf)
            .map(|fi| {
                let v: Vec<f64> = (0..3).map(|pi| at(wi, fi, pi).erasures as f64).collect();
                spread_pct(&v)
            })
            .try_fold(0f64, |m, s| s.map(|s| m.max(s)));
        let similar = if wi < 2 {
            format!(
                "; policies within {} of each other at every utilization",
                pct(spread)
            )
        } else {
            String::new()
        };
        notes.push(format!(
            "{w}: erasures from 50% to 90% utilization: {}{similar}",
            grow.join(", ")
        ));
    }
    notes.push(
        "paper: performance decreases as utilization increases; sequential and random: all policies \
         similar; 90/10 locality: greedy degrades dramatically, CAT gradually, CAT best at every utilization"
            .into(),
    );
    let cat_best = (0..nf)
        .filter(|&fi| (0..2).all(|pi| at(2, fi, 2).erasures <= at(2, fi, pi).erasures))
        .map(|fi| format!("{:.0}%", fills[fi] * 100.0))
        .collect::<Vec<_>>();
    notes.push(format!(
        "90/10 locality: CAT has the fewest erasures at {} utilization",
        if cat_best.is_empty() {
            "no".into()
        } else {
            cat_best.join(", ")
        }
    ));
    scale_note(&mut notes, o, written, 192 << 20);
    let mut panels = Vec::new();
    for (m, label) in [("erasures", "erasures"), ("blocks_copied", "blocks copied")] {
        for (wi, w) in workloads.iter().enumerate() {
            let name = if *w == "hotcold:90/10" {
                "locality 90/10"
            } else {
                w
            };
            panels.push(panel(
                format!("({}) {label}, {name}", letter(panels.len())),
                "utilization (pre-filled fraction)",
                label,
                XAxis::Numeric,
                Style::Lines,
                (0..nf)
                    .flat_map(|fi| (0..3).map(move |pi| (fi, pi)))
                    .map(|(fi, pi)| {
                        let r = at(wi, fi, pi);
                        (pair_name(r), r.fill, metric(r, m))
                    })
                    .collect::<Vec<_>>(),
            ));
        }
    }
    Ok(Report {
        name: "chiang1999-fig13".into(),
        title: format!(
            "Chiang & Chang 1999, Fig. 13: varying flash memory utilization (24 MB card, {})",
            mb(written)
        ),
        columns: [
            "workload", "fill", "policy", "erasures", "copied", "wear sd",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        comparisons: Vec::new(),
        notes,
        results: all,
        chart: Some(Chart {
            title: "Chiang & Chang 1999, Fig. 13 (flashkit): varying flash memory utilization"
                .into(),
            panels,
        }),
    })
}

fn fig18(o: &Options) -> Result<Report> {
    let reds = [Redistribution::M1, Redistribution::M4, Redistribution::M6];
    let written = scaled("chiang1999-fig18", 192 << 20, o)?;
    let mut cfgs = Vec::new();
    for p in PAIRED {
        for &l in &LOCALITIES {
            for r in reds {
                let mut c = SimConfig::flagship();
                c.workload = hotcold(l);
                c.written_bytes = written;
                c.arrival = two_week_poisson();
                c.seed = o.seed;
                c.fms.policy = p;
                c.fms.redistribution = r;
                cfgs.push(c);
            }
        }
    }
    let (results, all) = collect(&cfgs, o)?;
    let nl = LOCALITIES.len();
    let at = |pi: usize, li: usize, ri: usize| &results[(pi * nl + li) * 3 + ri];
    let rows = results
        .iter()
        .enumerate()
        .map(|(k, r)| {
            vec![
                loc_label(LOCALITIES[(k / 3) % nl]),
                r.policy.clone(),
                r.redistribution.to_ascii_uppercase(),
                r.erasures.to_string(),
                r.blocks_copied.to_string(),
                format!("{:.2}", r.wear_stddev),
            ]
        })
        .collect();
    let mut notes = Vec::new();
    for (pi, p) in PAIRED.iter().enumerate() {
        let m6_best =
            where_(|li| (0..2).all(|ri| at(pi, li, 2).erasures <= at(pi, li, ri).erasures));
        let gap = |li: usize| {
            below_or_above(at(pi, li, 2).erasures as f64, at(pi, li, 0).erasures as f64)
        };
        notes.push(format!(
            "{}: M6 has the fewest erasures at {m6_best}; M6's erasures {} M1's at 50/50 and {} at 95/5; \
             50/50 -> 95/5 erasures M1 {}, M4 {}, M6 {}",
            p.name(),
            gap(0),
            gap(nl - 1),
            change(at(pi, 0, 0).erasures as f64, at(pi, nl - 1, 0).erasures as f64),
            change(at(pi, 0, 1).erasures as f64, at(pi, nl - 1, 1).erasures as f64),
            change(at(pi, 0, 2).erasures as f64, at(pi, nl - 1, 2).erasures as f64),
        ));
    }
    let best: Vec<String> = (0..nl)
        .map(|li| {
            let mut b = (0, 0);
            for pi in 0..3 {
                for ri in 0..3 {
                    if at(pi, li, ri).erasures < at(b.0, li, b.1).erasures {
                        b = (pi, ri);
                    }
                }
            }
            format!(
                "{} {}",
                loc_label(LOCALITIES[li]),
                pair_name(at(b.0, li, b.1))
            )
        })
        .collect();
    notes.push(format!("fewest erasures overall: {}", best.join(", ")));
    notes.push(
        "paper: the gaps between redistribution methods widen with locality; M1 gets much worse and M6 \
         much better; M6 best above 60/40; CAT with M6 best of all"
            .into(),
    );
    scale_note(&mut notes, o, written, 192 << 20);
    let mut panels = Vec::new();
    for (m, label) in [("erasures", "erasures"), ("blocks_copied", "blocks copied")] {
        for (pi, p) in PAIRED.iter().enumerate() {
            panels.push(panel(
                format!("({}) {label}, {}", letter(panels.len()), p.name()),
                LOCALITY_AXIS,
                label,
                loc_axis(),
                Style::Lines,
                (0..nl)
                    .flat_map(|li| (0..3).map(move |ri| (li, ri)))
                    .map(|(li, ri)| {
                        let r = at(pi, li, ri);
                        (
                            r.redistribution.to_ascii_uppercase(),
                            li as f64,
                            metric(r, m),
                        )
                    })
                    .collect::<Vec<_>>(),
            ));
        }
    }
    Ok(Report {
        name: "chiang1999-fig18".into(),
        title: "Chiang & Chang 1999, Fig. 18: redistribution methods under varying locality (24 MB, 90% fill)"
            .into(),
        columns: ["locality", "policy", "redist", "erasures", "copied", "wear sd"]
            .map(String::from)
            .to_vec(),
        rows,
        comparisons: Vec::new(),
        notes,
        results: all,
        chart: Some(Chart {
            title: "Chiang & Chang 1999, Fig. 18 (flashkit): M1 / M4 / M6 under varying locality".into(),
            panels,
        }),
    })
}

fn dac_fig11(o: &Options) -> Result<Report> {
    // (label, regions, threshold)
    let modes: [(&str, u8, Option<u64>); 3] = [
        ("Off", 1, None),
        ("On", 4, None),
        ("On*", 4, Some(84 * 60 * 1_000_000_000_000)),
    ];
    let written = scaled("dac-fig11", 192 << 20, o)?;
    let mut cfgs = Vec::new();
    for p in Policy::ALL {
        for &l in &LOCALITIES {
            for (_, regions, th) in modes {
                let mut c = SimConfig::flagship();
                c.workload = hotcold(l);
                c.fill = 0.85;
                c.written_bytes = written;
                c.arrival = two_week_poisson();
                c.seed = o.seed;
                c.fms.policy = p;
                // Off is the DAC paper's baseline: one region, one-segment cleaning (M1).
                c.fms.redistribution = Redistribution::M1;
                c.fms.regions = regions;
                c.fms.region_threshold_ps = th;
                cfgs.push(c);
            }
        }
    }
    let (results, all) = collect(&cfgs, o)?;
    let nl = LOCALITIES.len();
    let at = |pi: usize, li: usize, mi: usize| &results[(pi * nl + li) * 3 + mi];
    let mut rows = Vec::new();
    for (pi, p) in Policy::ALL.iter().enumerate() {
        for (li, &l) in LOCALITIES.iter().enumerate() {
            let (off, on, on2) = (at(pi, li, 0), at(pi, li, 1), at(pi, li, 2));
            rows.push(vec![
                loc_label(l),
                p.name().to_string(),
                format!("{:.1}", off.cleaning_cost),
                format!("{:.1}", on.cleaning_cost),
                format!("{:.1}", on2.cleaning_cost),
                change(off.cleaning_cost, on.cleaning_cost),
                change(on.cleaning_cost, on2.cleaning_cost),
            ]);
        }
    }
    // The paper's reductions (% less cleaning cost), smallest and largest over the
    // localities; the notes print them as "vs" changes like the table's columns.
    let paper_dac = [(1.9, 28.5), (0.5, 61.5), (0.8, 65.6), (0.6, 65.6)];
    let paper_th = [(0.3, 12.5), (0.4, 12.5), (0.6, 12.5), (0.6, 11.9)];
    // The range over the localities of "B vs A", signed as in the columns; "n/a" if any
    // has no base (a cost of 0).
    let range = |v: Vec<Option<f64>>| match v.into_iter().collect::<Option<Vec<f64>>>() {
        Some(v) if !v.is_empty() => {
            let (mn, mx) = v
                .iter()
                .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
            format!("{}~{}%", signed1(mn), signed1(mx))
        }
        _ => "n/a".into(),
    };
    let vs = |b: f64, a: f64| pct_less(b, a).map(|less| -less);
    let mut notes = Vec::new();
    // The paper's smallest and largest reductions beside ours, as numbers: "less cost"
    // over the localities, On against Off and On* against On.
    let mut comparisons = Vec::new();
    for (pi, p) in Policy::ALL.iter().enumerate() {
        for (mode, base, name, paper) in [
            (1, 0, "On vs Off", paper_dac[pi]),
            (2, 1, "On* vs On", paper_th[pi]),
        ] {
            let less: Option<Vec<f64>> = (0..nl)
                .map(|li| {
                    pct_less(
                        at(pi, li, mode).cleaning_cost,
                        at(pi, li, base).cleaning_cost,
                    )
                })
                .collect();
            let Some(less) = less.filter(|v| !v.is_empty()) else {
                continue;
            };
            let (mn, mx) = less
                .iter()
                .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
            for (metric, paper, ours) in [
                ("cleaning_cost_below_percent_least", paper.0, mn),
                ("cleaning_cost_below_percent_most", paper.1, mx),
            ] {
                comparisons.push(Comparison::new(
                    vec![
                        ("policy", p.name().to_string()),
                        ("compared", name.to_string()),
                        ("localities", "50/50-95/5".to_string()),
                    ],
                    metric,
                    Some(paper),
                    ours,
                ));
            }
        }
    }
    for (pi, p) in Policy::ALL.iter().enumerate() {
        let dac: Vec<Option<f64>> = (0..nl)
            .map(|li| vs(at(pi, li, 1).cleaning_cost, at(pi, li, 0).cleaning_cost))
            .collect();
        let th: Vec<Option<f64>> = (0..nl)
            .map(|li| vs(at(pi, li, 2).cleaning_cost, at(pi, li, 1).cleaning_cost))
            .collect();
        notes.push(format!(
            "{}: cost On vs Off {} (paper -{}~-{}%), On* vs On {} (paper -{}~-{}%); \
             50/50 -> 95/5 cost Off {}, On {}",
            p.name(),
            range(dac),
            paper_dac[pi].1,
            paper_dac[pi].0,
            range(th),
            paper_th[pi].1,
            paper_th[pi].0,
            change(at(pi, 0, 0).cleaning_cost, at(pi, nl - 1, 0).cleaning_cost),
            change(at(pi, 0, 1).cleaning_cost, at(pi, nl - 1, 1).cleaning_cost),
        ));
    }
    notes.push(
        "paper: as locality increases the cost rises sharply without DAC and falls sharply with it; \
         the 84-minute threshold lowers it further (every \"vs\" of the paper is negative, less \
         cost); a positive percentage means ours went the other way"
            .into(),
    );
    scale_note(&mut notes, o, written, 192 << 20);
    let panels = Policy::ALL
        .iter()
        .enumerate()
        .map(|(pi, p)| {
            panel(
                format!("({}) {}", letter(pi), p.name()),
                LOCALITY_AXIS,
                "cleaning cost",
                loc_axis(),
                Style::Lines,
                (0..nl)
                    .flat_map(|li| (0..3).map(move |mi| (li, mi)))
                    .map(|(li, mi)| {
                        (
                            modes[mi].0.to_string(),
                            li as f64,
                            at(pi, li, mi).cleaning_cost,
                        )
                    })
                    .collect::<Vec<_>>(),
            )
        })
        .collect();
    Ok(Report {
        name: "dac-fig11".into(),
        title: "DAC paper, Fig. 11: varying locality, DAC off / on / on with an 84-minute threshold (On*)"
            .into(),
        columns: [
            "locality",
            "policy",
            "cost Off",
            "cost On",
            "cost On*",
            "On vs Off",
            "On* vs On",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        comparisons,
        notes,
        results: all,
        chart: Some(Chart {
            title: "DAC paper, Fig. 11 (flashkit): cleaning cost, DAC Off (1 region, M1) / On (4 regions) / On* (84-min threshold)"
                .into(),
            panels,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(scale: f64) -> Options {
        Options {
            scale,
            ..Default::default()
        }
    }

    /// Our figures are each configuration's mean over `runs` runs with consecutive seeds,
    /// and `results` keeps every run (the paper averages four runs; before stop 29 one).
    #[test]
    fn figures_are_the_mean_of_runs_with_consecutive_seeds() {
        let o = Options {
            seed: 7,
            runs: 3,
            ..at(0.05)
        };
        let r = run("chiang1999-table4", &o).unwrap();
        assert_eq!(r.results.len(), 9 * 3);
        let seeds: Vec<u64> = r.results[..6].iter().map(|x| x.result.seed).collect();
        assert_eq!(seeds, [7, 8, 9, 7, 8, 9]);
        // Locality, greedy: the seventh configuration.
        let runs = &r.results[18..21];
        assert!(runs.iter().all(|x| x.result.workload == "hotcold:90/10"));
        let e: Vec<u64> = runs.iter().map(|x| x.result.erasures).collect();
        assert!(
            e[0] != e[1] || e[1] != e[2],
            "seeds gave the same run: {e:?}"
        );
        let want = (e.iter().sum::<u64>() as f64 / 3.0).round();
        let c = r
            .comparisons
            .iter()
            .find(|c| {
                c.metric == "erasures"
                    && c.row.contains(&("workload", "hotcold:90/10".into()))
                    && c.row.contains(&("policy", "greedy".into()))
            })
            .unwrap();
        assert_eq!(c.ours, want);
        let note = r.notes.last().unwrap();
        assert!(note.contains("mean of 3 runs, seeds 7 to 9"), "{note}");
        // One run: the first seed alone, as before.
        let one = run("chiang1999-table4", &Options { runs: 1, ..o }).unwrap();
        assert_eq!(one.results.len(), 9);
        assert_eq!(one.results[6].result.erasures, e[0]);
        // Seeds past what a sweep file holds are said of --seed and --runs together.
        let e = run(
            "chiang1999-table4",
            &Options {
                seed: i64::MAX as u64,
                runs: 2,
                ..at(0.05)
            },
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("--seed 9223372036854775807 with --runs 2: the runs take seeds"),
            "{e}"
        );
    }

    /// The mean averages every measured figure: a field added to the results and left out
    /// of [`SimResult::mean`] keeps the first run's value, which this finds.
    #[test]
    fn the_mean_averages_every_measured_figure() {
        let runs: Vec<SimResult> = [3u64, 4]
            .iter()
            .map(|&seed| {
                let mut c = SimConfig::flagship();
                c.workload = WorkloadSpec::parse("hotcold:90/10").unwrap();
                c.written_bytes = 4 << 20;
                c.arrival = Arrival::parse("poisson:200").unwrap();
                c.seed = seed;
                crate::driver::run(&c).unwrap()
            })
            .collect();
        let m = SimResult::mean(&runs);
        let json = |r: &SimResult| serde_json::to_value(r).unwrap();
        let (a, b, m) = (json(&runs[0]), json(&runs[1]), json(&m));
        let mut differing = 0;
        for k in SimResult::metrics() {
            let (Some(x), Some(y)) = (a[k].as_f64(), b[k].as_f64()) else {
                continue;
            };
            let v = m[k].as_f64().unwrap_or_else(|| panic!("{k}: {}", m[k]));
            if k == "seed" {
                assert_eq!(v, x);
                continue;
            }
            assert!(
                v >= x.min(y) - 0.5 && v <= x.max(y) + 0.5,
                "{k}: {v} not between {x} and {y}"
            );
            if (x - y).abs() > 1.0 {
                differing += 1;
                assert!(
                    v != x && v != y,
                    "{k}: {v} is a run's, not the mean of {x} and {y}"
                );
            }
        }
        assert!(
            differing >= 10,
            "only {differing} figures differ between the seeds"
        );
    }

    /// An experiment with a run that cannot fit in the memory available is refused in one
    /// line naming the run's configuration and its parts, before any run starts; with
    /// room for one run at a time it runs them one at a time, says so, and its results are
    /// the same as with all cores.
    #[test]
    fn runs_are_checked_against_the_ram_available() {
        let started = Arc::new(AtomicUsize::new(0));
        let notes = Arc::new(Mutex::new(Vec::<String>::new()));
        let opts = |available: Option<u64>| {
            let (s, n) = (started.clone(), notes.clone());
            Options {
                available_ram: available,
                progress: OnJob(Some(Arc::new(move |done, _| {
                    s.fetch_max(done, Ordering::Relaxed);
                }))),
                note: OnNote(Some(Arc::new(move |t: &str| {
                    n.lock().unwrap().push(t.to_string())
                }))),
                ..at(0.0209)
            }
        };
        let e = run("chiang1999-table4", &opts(Some(1 << 20)))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("device intel-series2plus-24m (") && e.contains("a run needs about"),
            "{e}"
        );
        assert!(e.contains("more than the 1048576 bytes available"), "{e}");
        assert!(!e.contains('\n'), "{e}");
        assert_eq!(started.load(Ordering::Relaxed), 0, "a run started");
        assert!(notes.lock().unwrap().is_empty());

        let free = run("chiang1999-table4", &opts(None)).unwrap();
        assert!(notes.lock().unwrap().is_empty());
        // Room for exactly the largest run: one at a time, said once (with more than one
        // core; on one core there is nothing to throttle).
        let peak = ["sequential", "random", "hotcold:90/10"]
            .iter()
            .map(|w| {
                let mut c = SimConfig::flagship();
                c.workload = WorkloadSpec::parse(w).unwrap();
                crate::ram::estimate(&c).unwrap().peak()
            })
            .max()
            .unwrap();
        let one = run("chiang1999-table4", &opts(Some(peak))).unwrap();
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let said = notes.lock().unwrap().clone();
        if cores > 1 {
            assert_eq!(said.len(), 1, "{said:?}");
            assert!(
                said[0].starts_with("running 1 job(s) at a time"),
                "{said:?}"
            );
        }
        let json = |r: &Report| serde_json::to_string(r).unwrap();
        assert_eq!(json(&one), json(&free));
    }

    #[test]
    fn scaled_refuses_small_scales_and_never_raises() {
        assert_eq!(scaled("x", 192 << 20, &at(1.0)).unwrap(), 192 << 20);
        // --scale 0.05 as before: rounded down to whole 4 KiB requests.
        assert_eq!(scaled("x", 192 << 20, &at(0.05)).unwrap(), 10_063_872);
        assert_eq!(scaled("x", 160 << 20, &at(0.05)).unwrap(), 8 << 20);
        assert_eq!(scaled("x", 160 << 20, &at(0.025)).unwrap(), 4 << 20);
        for s in [1e-9, 0.02, 0.0249] {
            let e = scaled("dac-fig12", 160 << 20, &at(s))
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("--scale "), "{e}");
            assert!(e.contains("dac-fig12 would write"), "{e}");
            assert!(e.contains("--scale 0.025 or more"), "{e}");
        }
        let e = scaled("t4", 192 << 20, &at(1e-9)).unwrap_err().to_string();
        assert!(e.starts_with("--scale 1e-9: t4 would write 0 bytes"), "{e}");
    }

    /// dac-fig11's notes give the same signed "vs" as its columns (they used to say "On
    /// below Off by" with the opposite sign beside a column "On vs Off").
    #[test]
    fn dac_fig11_notes_agree_with_its_columns() {
        let r = dac_fig11(&at(0.0209)).unwrap();
        let col = |name: &str| r.columns.iter().position(|c| c == name).unwrap();
        let (on_off, th_on) = (col("On vs Off"), col("On* vs On"));
        for p in Policy::ALL {
            let rows: Vec<&Vec<String>> = r.rows.iter().filter(|row| row[1] == p.name()).collect();
            let span = |c: usize| {
                let v: Vec<f64> = rows
                    .iter()
                    .map(|row| row[c].trim_end_matches('%').parse::<f64>().unwrap())
                    .collect();
                let (mn, mx) = v
                    .iter()
                    .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
                (mn, mx)
            };
            let note = r
                .notes
                .iter()
                .find(|n| n.starts_with(&format!("{}: ", p.name())))
                .unwrap();
            for (label, c) in [("On vs Off ", on_off), ("On* vs On ", th_on)] {
                let (mn, mx) = span(c);
                let at = note.find(label).unwrap_or_else(|| panic!("{note}")) + label.len();
                let range = note[at..].split(' ').next().unwrap();
                let (a, b) = range.trim_end_matches('%').split_once('~').unwrap();
                let (a, b) = (a.parse::<f64>().unwrap(), b.parse::<f64>().unwrap());
                // The columns are rounded to 0.1 as the note is.
                assert!(
                    (a - mn).abs() < 0.051 && (b - mx).abs() < 0.051,
                    "{note}: {mn} {mx}"
                );
            }
            assert!(!note.contains("below"), "{note}");
        }
    }

    /// dac-fig12's notes say "above" rather than "below … -x%" or a "reduction" of -x% (at
    /// this scale adaptive's cost at 4 regions is above cost-benefit's and 1 region's).
    #[test]
    fn notes_say_above_rather_than_a_negative_below() {
        let r = dac_fig12(&at(0.025)).unwrap();
        let notes = r.notes.join("\n");
        assert!(notes.contains("% above "), "{notes}");
        let negative = notes
            .match_indices(" -")
            .any(|(i, _)| notes[i + 2..].starts_with(|c: char| c.is_ascii_digit()));
        assert!(!negative, "{notes}");
    }

    #[test]
    fn percentages_without_a_base_are_na() {
        assert_eq!(pct(pct_less(5.0, 0.0)), "n/a");
        assert_eq!(pct(pct_less(0.0, 0.0)), "n/a");
        assert_eq!(pct(pct_less(25.0, 100.0)), "75.0%");
        assert_eq!(pct(pct_less(125.0, 100.0)), "-25.0%");
        assert_eq!(pct(pct_less(f64::NAN, 100.0)), "n/a");
        assert_eq!(below_or_above(25.0, 100.0), "75.0% below");
        assert_eq!(below_or_above(125.0, 100.0), "25.0% above");
        assert_eq!(below_or_above(100.0, 100.0), "level with");
        assert_eq!(below_or_above(100.04, 100.0), "level with");
        assert_eq!(below_or_above(5.0, 0.0), "n/a");
        assert_eq!(spread_pct(&[0.0, 0.0, 0.0]), Some(0.0));
        assert_eq!(spread_pct(&[0.0, 5.0, 3.0]), None);
        assert_eq!(spread_pct(&[100.0, 110.0, 105.0]), Some(10.0));
        assert_eq!(change(0.0, 70.0), "n/a");
        assert_eq!(change(410.7, 446.0), "+8.6%");
        assert_eq!(change(446.0, 410.7), "-7.9%");
        // A change that rounds to zero has no sign to show.
        assert_eq!(change(1000.0, 999.9), "+0.0%");
        assert_eq!(change(1000.0, 1000.1), "+0.0%");
        assert_eq!(signed_pct(-0.0), "+0.0%");
        assert_eq!(rel(f64::INFINITY, 2.0), "n/a");
        assert_eq!(mb(192 << 20), "192 MB");
        assert_eq!(mb(10_063_872), "9.60 MB");
    }
}
