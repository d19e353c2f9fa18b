//! Format cuts (`flashkit torture --target fms-format`, [`TortureConfig::format`]): power
//! cut at every program and erase of a format over a used medium.
//!
//! The old medium is what the fault-free workload leaves (the run the workload target
//! makes first, then a flush). A fault-free format of a copy counts the format's programs
//! and erases: the cut points. For each cut point a fresh copy of the old medium is
//! formatted with the cut armed, and what the cut left is checked:
//!
//! 1. Mount. It may refuse with an error (the medium is neither the old one nor the new
//!    one: the user formats again), counted as `refused`, not a violation. When it mounts,
//!    the medium is either the new format (its first header carries the new format
//!    number: `new_medium`) or still the old one (the cut fell before the format's first
//!    header: `old_medium`). With [`TortureConfig::chain`] the mount is cut in its repairs
//!    (a lost index log's new segment) as a chained run's mounts are (stop 31).
//! 2. Every sector of a new medium reads zeros: no block of the old medium comes back
//!    (until stop 24 up to 9 010 of 9 766 did). Every sector of an old medium reads what
//!    the old medium held (its flushed content) or zeros: the format erased the segments
//!    it reached, and the blocks they held are gone — the user asked for that, and the
//!    format does not try to keep them. Nothing ever reads content never written there.
//! 3. The tables rebuilt at mount equal those of a second, clean remount, and erase
//!    counts are those the device counted or one fewer (check 4 of the workload target),
//!    for every segment whose header the cut did not leave unreadable.
//! 4. The FMS keeps working (check 5 of the workload target: writes, flushes, trims, the
//!    cleaner, remounts). With [`TortureConfig::chain`] (stop 31) the chained cuts of the
//!    workload target come first: power is cut again, N times, among the first W
//!    programs/erases of the writes that follow (the erases of the earlier format's
//!    segments, which the mount took for dirty, and the cleanings), and in the repairs of
//!    each mount after them, each recovery checked as a workload cut's (checks 1-4 there).
//! 5. Formatting again (a copy of what the cut left) completes, mounts to a medium of
//!    zeros, and keeps every erase count that survived: each segment's count is at least
//!    its count on the old medium, and is the device's count or one fewer — a segment
//!    whose header the cut lost gets the largest count on the medium
//!    ([`Fms::format`]), which until stop 25 was 0.
//!
//! The fault-free format goes through checks 2 to 5 too. With bit flips
//! ([`TortureConfig::bitflip_rate`], usually with ECC) the workload that makes the old
//! medium, the format and every mount read with flips, as in the workload target.
//!
//! With program/erase failures ([`TortureConfig::failures`] = N, stop 28) N seeded
//! programs or erases *of the format* report status-fail, in the format without a cut and
//! at every cut point alike (the workload that makes the old medium runs without them):
//! the format on a worn medium, whose segments go bad under its erases and header
//! programs. The cut points are the programs and erases of the format with its failures;
//! checks 1 to 5 are the same (a segment the format retired is skipped by the erase-count
//! checks, and formatting again runs without failures). A format that cannot complete
//! even without a cut (too few good segments left) is reported as unable to run, not as
//! a violation.

use super::*;

/// The medium the workload left, fault-free and flushed, on a reopened device (its
/// operation count at 0, so that cut point `k` is the format's k-th program or erase).
pub(super) struct OldMedium {
    /// (In a mutex: workers copy it from their threads.)
    nand: Mutex<Nand>,
    /// The old medium's format number, and its FMS's erase count of each segment.
    format_id: u64,
    erase_counts: Vec<u32>,
    /// The old FMS's shadow model after the workload and the flush.
    model: Model,
    /// Programs and erases of a fault-free format of it.
    pub(super) format_ops: u64,
}

impl OldMedium {
    pub(super) fn build(ctx: &Ctx) -> Result<OldMedium, String> {
        let (mut fms, mut model) = start(ctx, None)?;
        let mut buf = Vec::new();
        for (i, op) in ctx.ops.iter().enumerate() {
            model.start(op);
            apply(&mut fms, ctx, op, &mut buf)
                .map_err(|e| dev_err(&format!("old medium: workload op {i} ({op})"), e))?;
            if matches!(op, Op::Flush) {
                model.flushed();
            }
        }
        fms.flush().map_err(|e| dev_err("old medium: flush", e))?;
        model.flushed();
        let format_id = fms.format_id();
        let erase_counts = fms.erase_counts();
        let nand = Nand::open(ctx.spec.clone(), fms.into_nand().into_store())
            .map_err(|e| format!("old medium: reopen: {e}"))?;
        let probe = nand.try_clone().ok_or("the device cannot be copied")?;
        let f = Fms::format(probe, ctx.cfg.clone()).map_err(|e| dev_err("format", e))?;
        let format_ops = f.nand().op_count();
        Ok(OldMedium {
            nand: Mutex::new(nand),
            format_id,
            erase_counts,
            model,
            format_ops,
        })
    }
}

/// What the mount after a format cut found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Found {
    NewMedium,
    OldMedium,
    Refused,
}

/// Cut points by what their mount found ([`TortureReport::format_mounts`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FormatMounts {
    /// The new format (its first header carries the new format number).
    pub new_medium: u64,
    /// The old medium, less the segments the format had erased.
    pub old_medium: u64,
    /// Mount refused the medium with an error.
    pub refused: u64,
}

impl FormatMounts {
    pub(super) fn add(&mut self, f: Found) {
        match f {
            Found::NewMedium => self.new_medium += 1,
            Found::OldMedium => self.old_medium += 1,
            Found::Refused => self.refused += 1,
        }
    }
}

/// The format of a copy of `old`, cut at `cut` (none: the fault-free format), and checks
/// 1 to 5.
pub(super) fn run_cut(ctx: &Ctx, old: &OldMedium, cut: Option<u64>) -> RunOutcome {
    let mut out = RunOutcome::empty();
    if let Err(e) = run_cut_inner(ctx, old, cut, &mut out) {
        out.problems.push(e);
    }
    out
}

fn copy(nand: &Nand) -> Result<Nand, String> {
    nand.try_clone()
        .ok_or_else(|| "the device cannot be copied".to_string())
}

fn run_cut_inner(
    ctx: &Ctx,
    old: &OldMedium,
    cut: Option<u64>,
    out: &mut RunOutcome,
) -> Result<(), String> {
    let mut nand = copy(&old.nand.lock().unwrap())?;
    if cut.is_some() || ctx.bitflip_rate > 0.0 || !ctx.fail_ops.is_empty() {
        nand.set_faults(FaultPlan {
            power_cut_at: cut,
            torn: TornMode::Random,
            bitflip_rate: ctx.bitflip_rate,
            fail_ops: ctx.fail_ops.clone(),
            seed: fault_seed(ctx, cut),
            ..FaultPlan::default()
        });
    }
    let left = match (Fms::format_or_return(nand, ctx.cfg.clone()), cut) {
        (Ok(f), None) => {
            out.reads.add_fms(&f);
            let c = f.nand().counters();
            (out.program_failures, out.erase_failures) = (c.program_failures, c.erase_failures);
            f.into_nand()
        }
        // With failures, a format that cannot complete even without a cut (its failed
        // erases left too few good segments) tests nothing: not a violation.
        (Err((e, _)), None) if !ctx.fail_ops.is_empty() => {
            out.workload_failed = true;
            return Err(dev_err("format", e));
        }
        (Ok(f), Some(k)) => {
            return Err(format!(
                "power cut {k} never happened: the format did only {} programs/erases (the run is not deterministic)",
                f.nand().op_count()
            ))
        }
        (Err((DevError::PowerLoss, Some(nand))), Some(_)) => *nand,
        (Err((e, _)), _) => return Err(dev_err("format", e)),
    };
    out.device_ops = left.op_count();
    // What the cut left, kept to format again (5), with the headers it lost.
    let mut again = Nand::open(ctx.spec.clone(), copy(&left)?.into_store())
        .map_err(|e| format!("after the cut: reopen: {e}"))?;
    let mut cut_left = Lost::default();
    cut_left.add_cut(&mut again, left.cut_erase())?;

    // (1) Mount: with chained cuts, cut in its repairs too (`mount_cut`); `lost` gathers
    // what the mounts' cuts and the chain's leave besides the format's.
    out.cut_mounts = cut.is_some() && ctx.chain > 0;
    let mut lost = Lost::default();
    let salt = cut.unwrap_or(0) ^ 0xF0A7;
    let f1 = match mount_cut(ctx, salt, left, &mut lost, "after the cut", out)? {
        Ok(f) => Some(f),
        Err(_) if cut.is_some() => None,
        Err((e, what)) => return Err(dev_err(&format!("after the format: {what}"), e)),
    };
    let mut found = Found::Refused;
    if let Some(mut f1) = f1 {
        found = if f1.format_id() == old.format_id {
            Found::OldMedium
        } else {
            Found::NewMedium
        };
        out.recovered = Some(f1.mount_report().clone());
        // A new medium holds nothing yet: naming a block lost would be a false alarm (the
        // old medium's records behind a header the format's erase tore).
        if found == Found::NewMedium {
            if let Err(e) = lost_is_none(&f1, "the new medium") {
                out.problems.push(e);
            }
        }
        if found == Found::OldMedium && cut.is_none() {
            out.problems.push(format!(
                "a complete format left the old medium's format number {}",
                old.format_id
            ));
        }
        // (2) What the sectors hold.
        let seen =
            read_all(ctx, &mut f1, "after the cut").inspect_err(|_| out.reads.add_fms(&f1))?;
        let mut bad = 0usize;
        for (lba, &s) in seen.iter().enumerate() {
            let why = match (found, s) {
                (_, Seen::Zero) => None,
                (Found::NewMedium, s) => Some(format!(
                    "sector {lba} (block {}): the new medium reads {}, not zeros",
                    lba as u64 / ctx.spb,
                    seen_text(s)
                )),
                _ => old
                    .model
                    .check(lba as u64, s)
                    .map(|p| format!("the old medium: {p}")),
            };
            if let Some(w) = why {
                if bad < 3 {
                    out.problems.push(w);
                }
                bad += 1;
            }
        }
        if bad > 3 {
            out.problems.push(format!("... {} more sectors", bad - 3));
        }
        // (3) Tables and erase counts.
        let d1 = f1.tables_digest();
        let t1 = Tables::of(&f1);
        check_erase_counts(&f1, &lost, "after the cut", &mut out.problems);
        let f2 = remount(ctx, f1, "second mount", &mut out.reads)?;
        let d2 = f2.tables_digest();
        if d1 != d2 {
            out.problems.push(format!(
                "tables rebuilt after the cut ({d1:016x}) differ from a clean remount ({d2:016x}): {}",
                t1.diff(&Tables::of(&f2))
            ));
        }
        if !out.problems.is_empty() {
            out.reads.add_fms(&f2);
            return Ok(());
        }
        // (4) It keeps working, after chained cuts when asked (from the format's cut: the
        // fault-free format has none to chain after). Their cuts are not the format's:
        // formatting again (5) starts from what the format's cut left.
        let mut model = Model::new(ctx.sectors, ctx.spb);
        model.settle(&seen);
        let mut extra = Extra::new(ctx, cut.unwrap_or(0));
        let go_on = match cut {
            Some(k) if ctx.chain > 0 => {
                chained(ctx, k ^ 0xF0A7, f2, model, &mut lost, &mut extra, out)?
            }
            _ => Some((f2, model)),
        };
        if let Some((f2, model)) = go_on {
            keeps_working(ctx, f2, model, Vec::new(), &lost, &mut extra, out)?;
        }
        if !out.problems.is_empty() {
            return Ok(());
        }
    }
    out.format_found = Some(found);

    // (5) Format again.
    if cut.is_some() {
        let f = Fms::format(again, ctx.cfg.clone())
            .map_err(|e| dev_err("formatting again after the cut", e))?;
        let nand = Nand::open(ctx.spec.clone(), f.into_nand().into_store())
            .map_err(|e| format!("formatting again: reopen: {e}"))?;
        let mut f =
            Fms::mount(nand, ctx.cfg.clone()).map_err(|e| dev_err("formatting again: mount", e))?;
        let seen = read_all(ctx, &mut f, "formatted again")?;
        if let Some(lba) = seen.iter().position(|&s| s != Seen::Zero) {
            out.problems.push(format!(
                "formatted again: sector {lba} (block {}) reads {}, not zeros",
                lba as u64 / ctx.spb,
                seen_text(seen[lba])
            ));
        }
        check_erase_counts(&f, &cut_left, "formatted again", &mut out.problems);
        // A count the cut lost cannot be read back: the format takes the largest on the
        // medium, at least the largest of those that survived.
        let counts = f.erase_counts();
        let segs = f.segments();
        let kept = (0..counts.len())
            .filter(|&s| !cut_left.headers[s])
            .map(|s| old.erase_counts[s])
            .max()
            .unwrap_or(0);
        let lower = (0..counts.len()).find_map(|s| {
            let want = if cut_left.headers[s] {
                kept
            } else {
                old.erase_counts[s]
            };
            (segs[s].state != SegState::Bad && counts[s] < want).then_some((s, want))
        });
        if let Some((s, want)) = lower {
            out.problems.push(format!(
                "formatted again: segment {s}'s erase count is {}, below {want}, {}",
                counts[s],
                if cut_left.headers[s] {
                    "the largest the old medium's other segments had (the cut left its header unreadable)"
                } else {
                    "its count on the old medium"
                }
            ));
        }
        out.reads.add_fms(&f);
    }
    Ok(())
}
