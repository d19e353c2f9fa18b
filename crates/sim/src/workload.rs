//! Synthetic workloads of the Chiang papers.
//!
//! A workload produces write requests of `unit` bytes, aligned to `unit`, inside the
//! writable part of the pre-filled space. Forms (`--workload`):
//! * `sequential` — units in order, wrapping;
//! * `random` — uniform over the units;
//! * `hotcold:X/Y` — the hot-and-cold workload of Sprite LFS: X% of writes go to Y% of the
//!   data (the hot set, a seeded random subset of the units, not a contiguous range, so
//!   the sequential pre-fill does not already cluster it), the rest to the other units;
//!   phases with the same Y share the hot set;
//! * `phases:W1,W2,...` — the listed workloads one after another, each writing an equal
//!   share of the total (the DAC paper's 4-phase experiment);
//! * `trace:FILE` — a block trace (see [`crate::trace`]); the driver reads it itself, so as
//!   a [`Workload`] it yields nothing.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum WorkloadSpec {
    Sequential,
    Random,
    HotCold { x: f64, y: f64 },
    Phases(Vec<WorkloadSpec>),
    Trace(Box<crate::trace::TraceSpec>),
}

impl WorkloadSpec {
    pub fn parse(s: &str) -> Result<WorkloadSpec, String> {
        let s = s.trim();
        if let Some(rest) = s.strip_prefix("phases:") {
            let mut parts = Vec::new();
            for p in split_phases(rest) {
                let w = WorkloadSpec::parse(&p)?;
                if matches!(w, WorkloadSpec::Phases(_)) {
                    return Err("workload: phases cannot nest".into());
                }
                if matches!(w, WorkloadSpec::Trace(_)) {
                    return Err("workload: phases cannot contain a trace".into());
                }
                parts.push(w);
            }
            if parts.is_empty() {
                return Err("workload: phases: needs at least one workload".into());
            }
            return Ok(WorkloadSpec::Phases(parts));
        }
        if let Some(path) = s.strip_prefix("trace:") {
            if path.is_empty() {
                return Err("workload: trace: needs a file name (trace:FILE)".into());
            }
            return Ok(WorkloadSpec::Trace(Box::new(crate::trace::TraceSpec::new(
                path,
            ))));
        }
        match s {
            "sequential" | "seq" => Ok(WorkloadSpec::Sequential),
            "random" | "uniform" => Ok(WorkloadSpec::Random),
            _ => {
                if let Some(rest) = s.strip_prefix("hotcold:") {
                    let (x, y) = rest
                        .split_once('/')
                        .ok_or_else(|| format!("workload '{s}': expected hotcold:X/Y"))?;
                    let x: f64 = x
                        .parse()
                        .map_err(|_| format!("workload '{s}': X is not a number"))?;
                    let y: f64 = y
                        .parse()
                        .map_err(|_| format!("workload '{s}': Y is not a number"))?;
                    if !((0.0..=100.0).contains(&x) && 0.0 < y && y < 100.0) {
                        return Err(format!(
                            "workload '{s}': need 0 <= X <= 100 and 0 < Y < 100"
                        ));
                    }
                    Ok(WorkloadSpec::HotCold {
                        x: x / 100.0,
                        y: y / 100.0,
                    })
                } else {
                    Err(format!(
                        "unknown workload '{s}' (sequential, random, hotcold:X/Y, phases:W1,W2,..., \
                         trace:FILE)"
                    ))
                }
            }
        }
    }

    pub fn label(&self) -> String {
        match self {
            WorkloadSpec::Sequential => "sequential".into(),
            WorkloadSpec::Random => "random".into(),
            WorkloadSpec::HotCold { x, y } => format!("hotcold:{}/{}", x * 100.0, y * 100.0),
            WorkloadSpec::Phases(p) => format!(
                "phases:{}",
                p.iter().map(|w| w.label()).collect::<Vec<_>>().join(",")
            ),
            WorkloadSpec::Trace(t) => format!("trace:{}", t.path.display()),
        }
    }
}

/// Split "hotcold:90/10,random" at commas (no nesting, so plain split).
fn split_phases(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(String::from)
        .collect()
}

/// One phase's address generator.
enum Gen {
    Sequential {
        next: u64,
    },
    Random,
    HotCold {
        x: f64,
        hot: Vec<u64>,
        cold: Vec<u64>,
    },
}

/// A stream of unit indices in `0..units`.
pub struct Workload {
    units: u64,
    phases: Vec<(Gen, u64)>,
    current: usize,
    left: u64,
    rng: Xoshiro256PlusPlus,
}

impl Workload {
    /// `total` requests over `units` units.
    pub fn new(spec: &WorkloadSpec, units: u64, total: u64, seed: u64) -> Workload {
        let rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let list: Vec<WorkloadSpec> = match spec {
            WorkloadSpec::Phases(p) => p.clone(),
            w => vec![w.clone()],
        };
        let n = list.len() as u64;
        let mut phases = Vec::new();
        for (i, w) in list.iter().enumerate() {
            let share = total / n + u64::from((i as u64) < total % n);
            let gen = match w {
                WorkloadSpec::Sequential => Gen::Sequential { next: 0 },
                WorkloadSpec::Random => Gen::Random,
                WorkloadSpec::HotCold { x, y } => {
                    let mut all: Vec<u64> = (0..units).collect();
                    // The hot set depends only on the seed and Y, so the 90/10 phases of
                    // a phases: workload update the same hot data (as one benchmark would).
                    let mut hot_rng =
                        Xoshiro256PlusPlus::seed_from_u64(seed ^ y.to_bits().rotate_left(17));
                    all.shuffle(&mut hot_rng);
                    let h = ((units as f64 * y).round() as u64)
                        .clamp(1, units.saturating_sub(1).max(1));
                    let cold = all.split_off(h as usize);
                    Gen::HotCold {
                        x: *x,
                        hot: all,
                        cold,
                    }
                }
                WorkloadSpec::Phases(_) => unreachable!("phases do not nest"),
                // The driver reads traces itself; as a synthetic workload a trace is empty.
                WorkloadSpec::Trace(_) => {
                    phases.push((Gen::Random, 0));
                    continue;
                }
            };
            phases.push((gen, share));
        }
        let left = phases.first().map_or(0, |p| p.1);
        Workload {
            units,
            phases,
            current: 0,
            left,
            rng,
        }
    }

    /// Index of the phase the next request belongs to.
    pub fn phase(&self) -> usize {
        self.current
    }
}

impl Iterator for Workload {
    type Item = u64;
    fn next(&mut self) -> Option<u64> {
        while self.left == 0 {
            self.current += 1;
            if self.current >= self.phases.len() {
                return None;
            }
            self.left = self.phases[self.current].1;
        }
        self.left -= 1;
        let units = self.units;
        let rng = &mut self.rng;
        Some(match &mut self.phases[self.current].0 {
            Gen::Sequential { next } => {
                let u = *next;
                *next = (*next + 1) % units;
                u
            }
            Gen::Random => rng.gen_range(0..units),
            Gen::HotCold { x, hot, cold } => {
                if cold.is_empty() || rng.gen_bool(*x) {
                    hot[rng.gen_range(0..hot.len())]
                } else {
                    cold[rng.gen_range(0..cold.len())]
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_label() {
        assert_eq!(WorkloadSpec::parse("random").unwrap(), WorkloadSpec::Random);
        let p = WorkloadSpec::parse("phases:hotcold:90/10,random,hotcold:90/10,random").unwrap();
        match &p {
            WorkloadSpec::Phases(v) => assert_eq!(v.len(), 4),
            _ => panic!(),
        }
        assert_eq!(
            p.label(),
            "phases:hotcold:90/10,random,hotcold:90/10,random"
        );
        assert!(WorkloadSpec::parse("hotcold:90").is_err());
        assert!(WorkloadSpec::parse("zipf").is_err());
    }

    #[test]
    fn hot_cold_sends_x_percent_to_y_percent() {
        let spec = WorkloadSpec::parse("hotcold:90/10").unwrap();
        let units = 1000;
        let mut counts = vec![0u32; units as usize];
        for u in Workload::new(&spec, units, 200_000, 7) {
            counts[u as usize] += 1;
        }
        counts.sort_unstable_by(|a, b| b.cmp(a));
        let top: u32 = counts[..100].iter().sum();
        let share = top as f64 / 200_000.0;
        assert!((share - 0.9).abs() < 0.01, "{share}");
    }

    #[test]
    fn phases_split_evenly_and_sequential_wraps() {
        let spec = WorkloadSpec::parse("phases:sequential,random").unwrap();
        let mut w = Workload::new(&spec, 10, 25, 1);
        let first: Vec<u64> = (&mut w).take(13).collect();
        assert_eq!(first, vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2]);
        assert_eq!(w.phase(), 0);
        assert_eq!(w.count(), 12);
    }
}
