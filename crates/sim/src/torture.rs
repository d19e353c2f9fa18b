//! Power-loss torture: run a seeded workload on a small device in storage mode, cut power at
//! every program/erase (or a seeded sample of them), remount, and check with a shadow
//! model that nothing acknowledged as durable was lost and every invariant holds.
//!
//! ## How a run goes
//!
//! 1. The device is derived from the chosen one ([`small_device`]): same page, spare,
//!    NOP, program order, timing and endurance, but few erase blocks (16 by default) and
//!    few pages per block, so the cleaner runs every few writes and the whole run is short.
//! 2. The workload ([`workload`]) is generated once from the seed: a prefill of most of
//!    the logical space, then random-length writes (often partial blocks), aligned
//!    overwrites of a hot area, trims (whole blocks and partial), reads and flushes. Every
//!    written sector holds real random bytes derived from a unique tag, its own address
//!    and the seed, so any content read back can be traced to the exact write (or shown
//!    to be garbage). One random write in six writes all-0xFF sectors instead ([`FILL`]):
//!    erased flash reads 0xFF too, and the FMS must not take such data for a slot a torn
//!    erase wiped (nor the reverse).
//! 3. A fault-free run counts the program and erase operations of the workload. Counting
//!    starts after the format: the device is formatted, reopened, the fault plan is
//!    installed on the fresh device and the FMS is mounted, so cut point `k` is the k-th
//!    program/erase *of the workload* (format operations are never cut).
//! 4. For each cut point the run is repeated with
//!    `FaultPlan { power_cut_at: Some(k), torn: Random, seed: seed ^ k }` (the torn mode —
//!    nothing / partial / complete — is drawn per cut point), forked from the fault-free
//!    run just before the operation the cut falls in (below, "Forked cuts"), and stops at
//!    the power-loss error. The store is taken out, reopened and mounted, then checked:
//!    1. every sector whose last write or trim was acknowledged before the last completed
//!       flush reads back exactly that write; a trimmed sector reads zeros (header mode
//!       clears the copy's live bit at the trim, spare mode writes trim lists at the flush;
//!       until stop 16 spare-mode trims were not durable and this check admitted older
//!       content for them);
//!    2. no sector reads content that was never written to it: a sector changed since the
//!       last flush (including by the operation that was cut) reads its flushed value or
//!       one of the values written since;
//!    3. the tables rebuilt at mount equal those of a second, clean remount of the same
//!       store (`tables_digest`);
//!    4. erase counts survive: for every segment that is neither dirty nor bad, the FMS's
//!       count is the device's count or one less (a torn erase may be counted by the
//!       device before the FMS could record it in the header); a segment whose header
//!       was unreadable after the cut lost its count and mount estimates it, so it is not
//!       checked, then or after it is reused;
//!    5. the FMS keeps working: a few more writes, a flush, a clean remount; every sector
//!       then reads back exactly, the remount rebuilds the tables the running FMS had, and
//!       the erase counts hold again;
//!    6. no mount (after the cut, or any remount after it) names a lost block
//!       (`MountReport::lost_blocks`, stop 25): power cuts alone lose nothing
//!       acknowledged.
//!
//! ## Chained cuts
//!
//! With [`TortureConfig::chain`] = N > 0 (`--chain N`), a cut point does not end at its
//! first recovery: once checks 1-4 pass, power is cut again at a seeded program/erase
//! among the next [`TortureConfig::chain_within`] (`--chain-within W`, default 5, at most
//! [`MAX_CHAIN_WITHIN`]) while the FMS goes on with seeded writes, trims and a flush every
//! eighth operation (`chain_cut`); the medium is recovered and checked again (checks 1-4,
//! violations prefixed "chained cut c"), N times, and check 5 follows the last recovery.
//! (The fault-free run has no cut, so no chain.) With `--target fms-format` a chain
//! follows the recovery from each cut in the format (`torture/format.rs`, check 4; since
//! stop 31). A recovery leaves work to the first write
//! (erasing dirty segments, padding torn slots, `Fms::repair`) and often starts a
//! cleaning: these cuts fall in that work, and cut it again before it finishes — the
//! schedule that found stop 29's wedged medium and lost block.
//!
//! In a chained run every mount after a cut is cut too, at a seeded program/erase among
//! its first W (`mount_cut`): a mount programs to repair (it clears the live flags
//! of superseded copies and, when the index log is lost, makes a new index segment), and a
//! cut there leaves a medium the next mount must take as it takes any other (before stop
//! 31 the mount was never cut: `Fms::mount` dropped the device on an error). Most mounts
//! program less than the cut's place, and then the cut is taken back before the checks
//! read anything. Up to [`MAX_MOUNT_CUTS`] mounts in a row are cut; the report counts them
//! (`mount_cuts`).
//!
//! Check 4 allows the FMS's count of a segment to fall behind the device's by one per
//! erase that cuts stopped once begun ([`nand::Nand::cut_erase`]): an erase torn part way
//! may leave the header, and the count it records, as it was, and a chain can stop two
//! erases of one segment (a repair cut, then the repair again) — nothing on flash tells the
//! FMS of them. With no such erase the counts must agree exactly (until stop 30 every
//! segment could be one behind, which hid an erase the FMS failed to count).
//!
//! Each cut in a cleaning's first operations tears the slot a copy was going to, so a
//! chain can use a small medium's erased slots up (docs/fms.md, "Power cuts a few
//! operations apart"). A write or trim refused for want of space when, before it, no
//! segment was free and no cleaning could finish (`no_cleaning_can_finish`) ends the
//! chain: the medium is recovered and checked as after a cut, and the cut point counts in
//! `chains_full`, not as a violation; any other refusal is one. The report counts the
//! chained cuts made (`chained_cuts`) and the recovery paths their mounts met
//! (`chain_recovery`). Chains run in the worker, after the fork or the replay alike,
//! seeded from the cut point, so the report does not depend on either.
//!
//! `--target fms-format` ([`TortureConfig::format`]) cuts power in a format over the
//! medium the workload left instead: see `torture/format.rs`.
//!
//! The fault-free run goes through the same checks (a clean shutdown and remount), and its
//! reads are compared with the model as the workload runs.
//!
//! ## Forked cuts
//!
//! Until stop 20 every cut point replayed the workload from the format up to its cut, so a
//! run cost the square of its programs (a 1 000-request multimedia trace, 120 000 cut
//! points, would have run for about 20 minutes). Now one thread runs the fault-free
//! workload a second time (`fork_cuts`) and, before each operation in which cuts fall
//! (by the fault-free run's operation counts), copies the running FMS with its device
//! ([`Fms::try_clone`], [`nand::Nand::try_clone`]) and the shadow model once per cut,
//! arms the cut on the copy ([`nand::Nand::arm_power_cut`]) and hands it to a worker,
//! which applies that operation and goes through the checks below. The copy is the state
//! the replay reached: the runs are deterministic up to the cut, and the device's
//! generator is either reseeded as the replay's was (no bit flips: nothing draws from it
//! before the cut) or the same (with flips every run has one seed). So the reports are
//! the same, which `forked_cuts_report_what_replayed_cuts_report` checks on NOR-style and
//! NAND devices, DAC, wear swaps, ECC with flips and a trace, and `--replay`
//! ([`TortureConfig::replay`]) keeps the replays for cross-checking. That 1 000-request
//! trace now runs every cut in about 36 s. Runs with program/erase failures still replay:
//! a failed program's torn bits are drawn from each run's own seed, so a copy of the
//! fault-free run would not be the state the cut run reaches. Cuts that fall in the first
//! mount (if the mount of a fresh format ever programs) also replay.
//!
//! ## Bit flips
//!
//! With [`TortureConfig::bitflip_rate`] > 0 (`--bitflip-rate P`, usually with `--ecc`),
//! every read of every run flips bits at that rate: the workload (its fault plan gets the
//! rate, and one seed for all runs, so that flips fall on the same reads in every run up to
//! its cut: an ECC re-read advances the clock, which cost-benefit and CAT read, and runs
//! must agree up to their cut) and every mount and remount after it (a fresh plan on the
//! reopened device). The report sums what the reads met (`reads`), and a violation in a
//! run that read a 512-byte chunk with three or more flips says so.
//!
//! ## Program and erase failures
//!
//! With [`TortureConfig::failures`] = N > 0 (`--failures N`), every run also has N
//! program/erase operations report status-fail (`FaultPlan::fail_ops`): a failed program
//! is torn and its erase block grows bad, a failed erase grows the block bad and leaves its
//! content. Which ones is deterministic, independent of the thread count:
//!
//! 1. the workload first runs once with no faults, counting its programs and erases, N0;
//! 2. N distinct indices in `1..=N0` are drawn from the seed;
//! 3. the fault-free run (no power cut) runs with those failures; its operation count N1
//!    (the FMS's retries and moves out of retired segments add operations) defines the cut
//!    points, and it reports the failures it actually saw (`program_failures`,
//!    `erase_failures`: an index beyond its operations fails nothing, and a run that saw
//!    none says so in [`TortureReport::untested`]);
//! 4. every cut point `k` runs with the same failures and `power_cut_at: Some(k)`, so cuts
//!    fall before, during and after the FMS's handling of each failure (a cut at a failing
//!    operation itself wins: that operation is torn by the cut and does not fail). A
//!    violation line says how many operations after the last failure the cut fell. Up to
//!    the cut a run must be the fault-free run (the torn bits of a failed program differ,
//!    drawn from each run's seed): a cut that falls in another workload operation than
//!    the one that did operation `k` in the fault-free run is a violation.
//!
//! Recovery (the remounts and checks 1-5) runs with no faults installed; blocks grown bad
//! stay bad. Checks account for them: check 4 skips bad segments, and the table comparisons
//! ignore a bad segment's erase count and next free slot (when a header program failed,
//! the running FMS counted an erase that no header on flash records).
//! A workload operation that fails in the fault-free run (bad blocks left too little
//! space) makes the whole run an error
//! naming the operation and the failures, not a violation, as without failures. So that
//! the bad blocks the run makes do not end it that way, the FMS is formatted with N
//! segments' worth of blocks fewer than it would export (unless `logical_blocks` is set);
//! with the failure reserve kept from the start (`ReserveFrom::Start`), `failure_reserve`
//! segments' worth fewer again, the room it needs (even without failures).
//!
//! Cut points are independent and run on all cores; the report does not depend on the
//! number of threads.

mod format;

pub use format::FormatMounts;

use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use ftl::fms::layout::{RecordMode, SegHeader, SEG_HEADER};
use ftl::fms::{Fms, FmsConfig, MountReport, ReserveFrom, SegState};
use nand::blockdev::{BlockDevice, DevError, SECTOR};
use nand::{DeviceSpec, FaultPlan, Nand, TornMode};
use rand::{Rng, RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

/// Which cut points to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cuts {
    /// Every program and erase of the workload.
    Every,
    /// A seeded sample of this many distinct operations (all of them if there are fewer).
    Sample(u64),
    /// Only the K-th program or erase (1-based, as violations name it: "cut K/N"), to
    /// replay one cut point.
    At(u64),
}

impl FromStr for Cuts {
    type Err = String;
    fn from_str(s: &str) -> Result<Cuts, String> {
        if s.eq_ignore_ascii_case("every") || s.eq_ignore_ascii_case("all") {
            return Ok(Cuts::Every);
        }
        if let Some(k) = s.strip_prefix("at:") {
            return match k.parse::<u64>() {
                Ok(0) => Err("cuts: cut points are numbered from 1 (at:1 is the first)".into()),
                Ok(k) => Ok(Cuts::At(k)),
                Err(_) => Err(format!(
                    "cuts: expected 'at:K' with K a cut point number, got '{s}'"
                )),
            };
        }
        match s.parse::<u64>() {
            Ok(0) => Err("cuts: need at least one cut point (or 'every')".into()),
            Ok(n) => Ok(Cuts::Sample(n)),
            Err(_) => Err(format!(
                "cuts: expected 'every', a number of cut points or 'at:K', got '{s}'"
            )),
        }
    }
}

impl std::fmt::Display for Cuts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cuts::Every => f.write_str("every"),
            Cuts::Sample(n) => write!(f, "{n}"),
            Cuts::At(k) => write!(f, "at:{k}"),
        }
    }
}

/// A torture run.
#[derive(Clone, Debug)]
pub struct TortureConfig {
    /// The device (a preset); shrunk with [`small_device`] unless `shrink` is false.
    pub device: DeviceSpec,
    pub shrink: bool,
    /// Erase blocks of the shrunk device.
    pub segments: u32,
    /// The FMS under test (its `block_size` is the logical block size).
    pub fms: FmsConfig,
    pub cuts: Cuts,
    /// Workload operations after the prefill.
    pub ops: usize,
    pub seed: u64,
    /// Worker threads (0: one per core).
    pub threads: usize,
    /// One random write in six writes 0xFF sectors ([`FILL`]). Default: on.
    pub fill_writes: bool,
    /// Program/erase failures injected at seeded operations of the workload (of the format,
    /// with `format`), the same ones in every run (the fault-free run and every cut point;
    /// see "Program and erase failures" in the module doc). Default: 0.
    pub failures: u64,
    /// Probability that a bit read comes back flipped (transient: `FaultPlan::bitflip_rate`),
    /// in every run and every mount. Default: 0. With flips, format with ECC
    /// (`fms.ecc`), or reads return them.
    pub bitflip_rate: f64,
    /// Replay this block trace (its first `ops` requests, mapped onto the device as `sim`
    /// maps one) after the prefill instead of the random operations, with a flush after
    /// every `flush_every` requests ([`trace_workload`]). Default: none.
    pub trace: Option<crate::trace::TraceSpec>,
    /// Requests of a trace between flushes (traces record none). Default: 8.
    pub flush_every: usize,
    /// Replay the workload from the format for every cut point, as torture did until stop
    /// 20, instead of forking the running FMS before the operation the cut falls in (see
    /// "Forked cuts" in the module doc). Both give the same report; replaying is slower by
    /// the length of the workload and is kept to cross-check the forks. Runs with injected
    /// failures always replay. Default: false.
    pub replay: bool,
    /// Cut the format instead (`--target fms-format`): power cuts at every program and
    /// erase of a format over the medium the workload left (see "Format cuts" in
    /// `torture/format.rs`); with `failures`, the format's programs/erases fail.
    /// Default: false.
    pub format: bool,
    /// Chained cuts: after the recovery from each cut point's cut (and its checks), cut
    /// power this many times more, each at a seeded program/erase among the next
    /// `chain_within` ones, recovering and checking after each (see "Chained cuts" in the
    /// module doc). Not with `format`. Default: 0.
    pub chain: u32,
    /// The window of a chained cut, in programs and erases after the recovery (at least
    /// 1). Default: 5.
    pub chain_within: u64,
}

impl TortureConfig {
    /// Defaults for `device`: 16 segments, the device's default block size
    /// ([`default_block_size`]), the paper's FMS (CAT, M6), every cut point, 300 operations,
    /// 0xFF fill writes.
    pub fn new(device: DeviceSpec) -> TortureConfig {
        let fms = FmsConfig {
            block_size: default_block_size(&device),
            ..FmsConfig::default()
        };
        TortureConfig {
            shrink: true,
            segments: 16,
            fms,
            cuts: Cuts::Every,
            ops: 300,
            seed: 1,
            threads: 0,
            fill_writes: true,
            failures: 0,
            bitflip_rate: 0.0,
            trace: None,
            flush_every: 8,
            replay: false,
            format: false,
            chain: 0,
            chain_within: 5,
            device,
        }
    }

    /// The device the run uses.
    pub fn test_device(&self) -> DeviceSpec {
        if self.shrink {
            small_device(&self.device, self.segments, self.fms.block_size)
        } else {
            self.device.clone()
        }
    }
}

/// The widest window of a chained cut ([`TortureConfig::chain_within`]): a cut is meant
/// to fall in the work a recovery starts, and a wider window only makes the run longer
/// (its writes wear the small device out).
pub const MAX_CHAIN_WITHIN: u64 = 10_000;

/// What a torture run found.
#[derive(Clone, Debug, Serialize)]
pub struct TortureReport {
    pub target: String,
    /// The device the run was derived from.
    pub device: String,
    pub seed: u64,
    /// `every` or the requested sample size.
    pub cuts: String,
    /// Geometry actually used.
    pub segments: u32,
    pub pages_per_block: u32,
    pub page_size: u32,
    pub block_size: u32,
    pub record_mode: String,
    pub logical_blocks: u64,
    /// `random` (the seeded workload) or `trace:FILE`.
    pub workload: String,
    /// Workload operations (prefill writes, writes, trims, reads, flushes).
    pub workload_ops: usize,
    /// Whether some writes wrote 0xFF sectors ([`TortureConfig::fill_writes`]).
    pub fill_writes: bool,
    /// Programs and erases of the fault-free workload (of the format, with target
    /// `fms-format`): the possible cut points.
    pub ops: u64,
    /// Cut points run.
    pub cut_points: u64,
    /// Chained cuts asked for after each cut point's recovery, their window in programs
    /// and erases ([`TortureConfig::chain`], `chain_within`), and the chained cuts made
    /// over all cut points (a run stopped by a violation makes fewer).
    pub chain: u32,
    pub chain_within: u64,
    pub chained_cuts: u64,
    /// Mounts after a cut that a chained run cut in turn (the cut fell in their repairs:
    /// `mount_cut`); 0 without a chain.
    pub mount_cuts: u64,
    /// Cut points whose chain ended with the medium full: a write refused for want of
    /// space when no cleaning could finish, the erased slots used up by copies that cuts
    /// tore (the documented limit, docs/fms.md "Power cuts a few operations apart"; not a
    /// violation; what was read back after it was still checked).
    pub chains_full: u64,
    /// Program/erase failures requested ([`TortureConfig::failures`]), the operations
    /// (1-based, counted like the cut points) chosen to fail, and the program and erase
    /// failures the fault-free run actually saw (an index beyond its operations fails
    /// nothing). The key `failures` is the list of violations.
    pub failures_requested: u64,
    pub fail_ops: Vec<u64>,
    pub program_failures: u64,
    pub erase_failures: u64,
    /// Cut points (and the fault-free run) where a check failed.
    pub violations: u64,
    /// One line per violation: the cut point and what went wrong.
    pub failures: Vec<String>,
    /// Cleanings and erasures of the fault-free run (to show the cleaner ran).
    pub cleanings: u64,
    pub erasures: u64,
    /// Valid blocks the cleaner copied and wear-levelling swaps in the fault-free run (a
    /// cleaner that only ever erases empty segments, or a swap that never happens, leaves
    /// their power-loss windows untested).
    pub blocks_copied: u64,
    pub wear_swaps: u64,
    /// Times the fault-free run's index log moved to another segment
    /// (`FmsConfig::index_wear_gap`, or retired segments in header mode).
    pub index_moves: u64,
    /// The recovery paths the cuts exercised: cut points whose mount found (at least one
    /// of) each thing it repairs or skips (`ftl::fms::MountReport`). A path at 0 was not
    /// tested by this run.
    pub recovery: RecoveryCounts,
    /// With `chain`: the recovery paths of the mounts after chained cuts (each counted
    /// once per cut point whose chain met it); null without.
    pub chain_recovery: Option<RecoveryCounts>,
    /// Target `fms-format`: cut points by what the mount after the cut found (the new
    /// medium, the old one, or a refusal); null for target `fms`.
    pub format_mounts: Option<FormatMounts>,
    /// Whether the medium was formatted with ECC codes, and the bit flip rate of reads.
    pub ecc: bool,
    /// The code (`SEC-DED`, `BCH-T`; `none`), as `fms format` names it.
    pub ecc_code: String,
    /// How header-mode entries carry their live state (`byte`, `bit`; `none` in spare
    /// mode), as `fms info` names it.
    pub live_flag: String,
    /// Whether segment headers carry the medium's code (ECC media formatted since stop 22),
    /// as `fms info` says it.
    pub header_code: bool,
    /// Whether the medium has segment summaries (spare mode, `fms info`'s
    /// `segment_summaries`): the first mount after each cut reads them, the second every
    /// record, and the two must rebuild the same tables.
    pub segment_summaries: bool,
    pub bitflip_rate: f64,
    /// Re-reads allowed per read (`FmsConfig::read_retries`, `--read-retries`).
    pub max_read_retries: u8,
    /// Over every run and mount: bits flipped by the device, corrected by ECC, reads made
    /// again, and data reads that failed uncorrectable.
    pub reads: ReadCounts,
    pub elapsed_s: f64,
}

/// What bit flips did to reads, summed over the FMS instances of a torture.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReadCounts {
    pub bitflips: u64,
    pub ecc_corrected_bits: u64,
    pub read_retries: u64,
    pub uncorrectable_reads: u64,
    /// 512-byte chunks read with more flips than the medium's code corrects
    /// (`nand::Counters::overflipped_chunks`): three or more for SEC-DED, which takes an odd
    /// count for one flip and "corrects" it; t + 1 or more for BCH-t.
    pub overflipped_chunks: u64,
    /// Blocks moved because a read corrected many flips in one chunk (scrubbing,
    /// `FmsConfig::scrub_threshold`).
    pub scrubbed: u64,
}

impl ReadCounts {
    fn add_fms(&mut self, f: &Fms) {
        self.add_nand(f.nand());
        self.ecc_corrected_bits += f.stats().ecc_corrected_bits;
        self.read_retries += f.stats().read_retries;
        self.uncorrectable_reads += f.stats().uncorrectable_reads;
        self.scrubbed += f.stats().scrubbed;
    }

    /// The device's part alone: a mount a cut stopped gives back its device, not its
    /// FMS's counts.
    fn add_nand(&mut self, n: &Nand) {
        self.bitflips += n.counters().bitflips;
        self.overflipped_chunks += n.counters().overflipped_chunks;
    }

    fn add(&mut self, o: &ReadCounts) {
        self.bitflips += o.bitflips;
        self.ecc_corrected_bits += o.ecc_corrected_bits;
        self.read_retries += o.read_retries;
        self.uncorrectable_reads += o.uncorrectable_reads;
        self.overflipped_chunks += o.overflipped_chunks;
        self.scrubbed += o.scrubbed;
    }

    /// Appended to a violation of a run whose reads went beyond the code's strength.
    fn beyond_ecc(&self) -> Option<String> {
        (self.overflipped_chunks > 0).then(|| {
            format!(
                "(this run read {} chunk(s) with more flipped bits than the code corrects)",
                self.overflipped_chunks
            )
        })
    }
}

/// Cut points whose mount after the cut found each thing a mount repairs or skips.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RecoveryCounts {
    pub torn_records: u64,
    pub stale_live_copies: u64,
    pub dirty_segments: u64,
    pub unreadable_trim_lists: u64,
    pub grown_bad_read: u64,
    pub index_lost: u64,
    /// Cut points whose mount found segments of an earlier format (a format stopped part
    /// way: `MountReport::earlier_format`), taken for dirty.
    pub earlier_format: u64,
    /// Cut points whose mount read at least one segment summary (not a recovery path:
    /// the coverage of summaries, which the next mount checks against every record).
    pub summaries_read: u64,
}

impl RecoveryCounts {
    fn add(&mut self, r: &MountReport) {
        self.add_any(std::slice::from_ref(r));
    }

    /// Count one cut point for each path that at least one of its mounts `rs` met.
    fn add_any(&mut self, rs: &[MountReport]) {
        let any = |p: fn(&MountReport) -> bool| rs.iter().any(p) as u64;
        self.summaries_read += any(|r| r.summaries_read() > 0);
        self.torn_records += any(|r| r.torn_records > 0);
        self.stale_live_copies += any(|r| r.stale_live_copies > 0);
        self.dirty_segments += any(|r| r.dirty_segments > 0);
        self.unreadable_trim_lists += any(|r| r.unreadable_trim_lists > 0);
        self.grown_bad_read += any(|r| r.grown_bad_read > 0);
        self.index_lost += any(|r| r.index_lost);
        self.earlier_format += any(|r| !r.earlier_format.is_empty());
    }

    /// The counts in the order of [`MountReport::PATHS`].
    pub fn counts(&self) -> [u64; 6] {
        [
            self.torn_records,
            self.stale_live_copies,
            self.dirty_segments,
            self.unreadable_trim_lists,
            self.grown_bad_read,
            self.index_lost,
        ]
    }
}

/// How the failure of the fault-free run starts in [`TortureReport::failures`] (always
/// first when there is one).
pub const FAULT_FREE_RUN: &str = "fault-free run: ";

impl TortureReport {
    /// Whether the fault-free run itself failed a check: it counts as one violation, a
    /// format torture then runs no cut point, and the cut runs of a workload torture
    /// (which still run) may fail for the same reason, so what the cuts did or did not
    /// exercise means little.
    pub fn fault_free_failed(&self) -> bool {
        self.failures
            .first()
            .is_some_and(|f| f.starts_with(FAULT_FREE_RUN))
    }

    /// What the fault-free run never did, so that no cut point fell inside it and its
    /// power-loss windows went untested: cleaning (and copying valid blocks), or wear
    /// swaps when `wear_levelling` is on. One line each, naming what to raise; empty when
    /// the run exercised them all. On a full-size device the prefill leaves thousands of
    /// free segments, which a few hundred operations never use up.
    pub fn untested(&self, wear_levelling: bool) -> Vec<String> {
        if self.format_mounts.is_some() {
            // Format cuts: the workload only makes the old medium.
            return Vec::new();
        }
        let ops = if self.workload == "random" {
            format!(
                "raise --ops (each writes about one block; about {}, the logical block count, would start it)",
                self.logical_blocks
            )
        } else {
            format!(
                "replay more of the trace (--ops) or one that writes more (the device has {} logical blocks)",
                self.logical_blocks
            )
        };
        let mut out = Vec::new();
        if self.cleanings == 0 {
            out.push(format!(
                "the workload never started the cleaner, so no cut fell in a cleaning: {ops}"
            ));
        } else if self.blocks_copied == 0 {
            out.push(format!(
                "the cleaner only erased segments with nothing valid, so no cut fell in a copy: {ops}"
            ));
        }
        if wear_levelling && self.wear_swaps == 0 {
            out.push(
                "no wear-levelling swap happened, so no cut fell in one: raise --ops or lower --wear-threshold"
                    .to_string(),
            );
        }
        if self.failures_requested > 0 && self.program_failures + self.erase_failures == 0 {
            out.push(format!(
                "none of the {} requested failures (at operations {:?}) fell within the fault-free run's {} programs and erases, so no run saw a program or erase fail: try another --seed",
                self.failures_requested, self.fail_ops, self.ops
            ));
        }
        out
    }
}

/// Default logical block size for torturing `device`: 4 KiB on NOR-style devices, at
/// least 1 KiB (and a whole page) on NAND.
pub fn default_block_size(device: &DeviceSpec) -> u32 {
    let g = &device.geometry;
    if g.nop == 0 {
        let mut b = 4096u32;
        while b > 512 && b as u64 > g.block_bytes() / 2 {
            b /= 2;
        }
        b
    } else {
        g.page_size.max(1024)
    }
}

/// A small device with `device`'s page, spare, NOP, program order, timing and endurance:
/// `segments` erase blocks of at most 8 logical blocks (NOR-style) or 16 slots' worth of
/// pages (NAND), so cleaning happens every few writes.
pub fn small_device(device: &DeviceSpec, segments: u32, block_size: u32) -> DeviceSpec {
    let mut d = device.clone();
    let g = &mut d.geometry;
    let pages_per_block_size = block_size.div_ceil(g.page_size).max(1);
    let want = if g.nop == 0 {
        8 * pages_per_block_size
    } else {
        16 * pages_per_block_size
    };
    g.pages_per_block = g.pages_per_block.min(want).max(2);
    g.blocks = segments;
    let mut name = format!("{}-torture", device.name);
    name.truncate(63);
    d.name = name;
    d.description = format!(
        "{} shrunk for power-loss torture: {} blocks of {} pages",
        device.name, g.blocks, g.pages_per_block
    );
    d
}

// ---- workload ------------------------------------------------------------------------------

/// Tag bit of a write whose sectors are all 0xFF (what erased flash reads as): the FMS
/// must tell such data from a slot a torn erase wiped. Fill sectors cannot be traced to
/// the exact write, only to "some fill write".
pub const FILL: u64 = 1 << 63;

/// One workload operation. Sector contents are derived from `tag + i` for the i-th sector
/// (all 0xFF when `tag` has the [`FILL`] bit).
#[derive(Clone, Copy, Debug)]
pub enum Op {
    Write { lba: u64, count: u32, tag: u64 },
    Trim { lba: u64, count: u32 },
    Read { lba: u64, count: u32 },
    Flush,
}

/// For messages: "write of 3 sectors at sector 235" (QA stop 32: they printed the Rust
/// value, `Trim { lba: 235, count: 2 }`).
impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (what, lba, count) = match *self {
            Op::Write { lba, count, .. } => ("write", lba, count),
            Op::Trim { lba, count } => ("trim", lba, count),
            Op::Read { lba, count } => ("read", lba, count),
            Op::Flush => return f.write_str("flush"),
        };
        let s = if count == 1 { "" } else { "s" };
        write!(f, "{what} of {count} sector{s} at sector {lba}")
    }
}

/// The seeded workload over `sectors` sectors with `spb` sectors per logical block: a
/// prefill of ~90% of the blocks in random 1–4-block aligned chunks and a flush, then `ops`
/// random operations (45% writes at any sector with 1 to 2 blocks' worth of sectors, 20%
/// aligned overwrites of the hottest quarter, 10% trims, 10% reads, 15% flushes) and a
/// final flush. With `fill_writes`, one in six of the 45% writes writes 0xFF sectors
/// ([`FILL`]); which ones is drawn from a second generator, so the operations are the same
/// either way.
pub fn workload(seed: u64, sectors: u64, spb: u64, ops: usize, fill_writes: bool) -> Vec<Op> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x7047_7572_6521);
    let mut fills = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x4646_4646);
    let mut tag = 1u64;
    let mut out = Vec::with_capacity(ops + sectors as usize / spb as usize + 4);
    let write = |out: &mut Vec<Op>, tag: &mut u64, lba: u64, count: u64, fill: bool| {
        out.push(Op::Write {
            lba,
            count: count as u32,
            tag: if fill { *tag | FILL } else { *tag },
        });
        *tag += count;
    };
    let blocks = sectors / spb;
    let fill = blocks * 9 / 10;
    let mut b = 0;
    while b < fill {
        let n = rng.gen_range(1..=4).min(fill - b);
        write(&mut out, &mut tag, b * spb, n * spb, false);
        b += n;
    }
    out.push(Op::Flush);
    let hot = (blocks / 4).max(1);
    for _ in 0..ops {
        let r = rng.gen_range(0..100);
        if r < 45 {
            let lba = rng.gen_range(0..sectors);
            let count = rng.gen_range(1..=2 * spb).min(sectors - lba);
            let fill = fills.gen_ratio(1, 6) && fill_writes;
            write(&mut out, &mut tag, lba, count, fill);
        } else if r < 65 {
            let lbn = rng.gen_range(0..hot);
            let n = rng.gen_range(1..=2u64).min(blocks - lbn);
            write(&mut out, &mut tag, lbn * spb, n * spb, false);
        } else if r < 75 {
            let (lba, count) = if rng.gen_bool(0.5) {
                let lbn = rng.gen_range(0..blocks);
                (lbn * spb, rng.gen_range(1..=2u64).min(blocks - lbn) * spb)
            } else {
                let lba = rng.gen_range(0..sectors);
                (lba, rng.gen_range(1..=spb).min(sectors - lba))
            };
            out.push(Op::Trim {
                lba,
                count: count as u32,
            });
        } else if r < 85 {
            let lba = rng.gen_range(0..sectors);
            let count = rng.gen_range(1..=2 * spb).min(sectors - lba);
            out.push(Op::Read {
                lba,
                count: count as u32,
            });
        } else {
            out.push(Op::Flush);
        }
    }
    out.push(Op::Flush);
    out
}

/// The first content tag no write of `ops` used.
fn next_tag(ops: &[Op]) -> u64 {
    ops.iter()
        .map(|o| match *o {
            Op::Write { tag, count, .. } => (tag & !FILL) + count as u64,
            _ => 1,
        })
        .max()
        .unwrap_or(1)
}

/// The seeded workload's prefill (about 90 % of the blocks in random 1–4-block chunks) and
/// flush, then the first `limit` requests of `trace`, mapped onto `sectors` sectors as
/// `flashkit sim` maps a trace (its `--trace-map`, in whole blocks of `spb` sectors), with
/// a flush after every `flush_every` requests and at the end. Reads stay reads, trims
/// trims; each write gets fresh tags, so the checks know every sector's last content.
/// A trace that yields no request is an error.
pub fn trace_workload(
    trace: &crate::trace::TraceSpec,
    seed: u64,
    sectors: u64,
    spb: u64,
    limit: usize,
    flush_every: usize,
) -> Result<Vec<Op>, String> {
    if limit == 0 {
        return Err("--ops 0: no request of the trace to replay".into());
    }
    let mut out = workload(seed, sectors, spb, 0, false);
    out.pop(); // the random part's final flush; the trace's comes at its end
    let mut tag = next_tag(&out);
    let reqs = crate::trace::requests(trace, sectors, spb).map_err(|e| e.to_string())?;
    // Records, not the pieces a record is mapped into, count for the limit and the flushes.
    let mut n = 0;
    for r in reqs {
        let r = r.map_err(|e| e.to_string())?;
        if !r.continues {
            if n == limit {
                break;
            }
            if n > 0 && flush_every > 0 && n % flush_every == 0 {
                out.push(Op::Flush);
            }
            n += 1;
        }
        let (lba, count) = (r.lba, r.sectors.min((sectors - r.lba.min(sectors)) as u32));
        if count == 0 {
            continue;
        }
        out.push(match r.op {
            crate::driver::Op::Write => {
                let w = Op::Write { lba, count, tag };
                tag += count as u64;
                w
            }
            crate::driver::Op::Trim => Op::Trim { lba, count },
            crate::driver::Op::Read => Op::Read { lba, count },
        });
    }
    if n == 0 {
        return Err(format!(
            "{}: the trace has no request to replay",
            trace.path.display()
        ));
    }
    out.push(Op::Flush);
    Ok(out)
}

/// The content of sector `lba` written with `tag`: the tag, the address, then random bytes
/// from both and the run's seed.
pub fn sector_content(seed: u64, tag: u64, lba: u64, out: &mut [u8]) {
    if tag & FILL != 0 {
        out[..SECTOR].fill(0xFF);
        return;
    }
    out[0..8].copy_from_slice(&tag.to_le_bytes());
    out[8..16].copy_from_slice(&lba.to_le_bytes());
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(
        tag.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ lba.rotate_left(32) ^ seed,
    );
    rng.fill_bytes(&mut out[16..SECTOR]);
}

/// What a sector read back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    Zero,
    Tag(u64),
    /// All 0xFF: some [`FILL`] write.
    Ones,
    /// Neither zeros nor any content ever written to this sector.
    Garbage,
}

fn classify(seed: u64, lba: u64, b: &[u8], scratch: &mut [u8]) -> Seen {
    if b.iter().all(|&x| x == 0) {
        return Seen::Zero;
    }
    if b.iter().all(|&x| x == 0xFF) {
        return Seen::Ones;
    }
    let tag = u64::from_le_bytes(b[0..8].try_into().unwrap());
    if tag == 0 || u64::from_le_bytes(b[8..16].try_into().unwrap()) != lba {
        return Seen::Garbage;
    }
    sector_content(seed, tag, lba, scratch);
    if scratch[..SECTOR] == b[..SECTOR] {
        Seen::Tag(tag)
    } else {
        Seen::Garbage
    }
}

// ---- shadow model --------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Val {
    Data(u64),
    Zero,
    /// Trimmed: reads zeros once the trim is durable (a flush returned).
    Trimmed,
}

impl Val {
    /// May a sector holding `self` read back `seen`?
    fn admits(self, seen: Seen) -> bool {
        match (self, seen) {
            (_, Seen::Garbage) => false,
            (Val::Data(t), Seen::Tag(s)) => t == s,
            (Val::Data(t), Seen::Ones) => t & FILL != 0,
            (Val::Data(_), Seen::Zero) => false,
            (Val::Zero | Val::Trimmed, Seen::Zero) => true,
            (Val::Zero | Val::Trimmed, Seen::Tag(_) | Seen::Ones) => false,
        }
    }
}

impl std::fmt::Display for Val {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Val::Data(t) if t & FILL != 0 => write!(f, "write #{} (0xFF)", t & !FILL),
            Val::Data(t) => write!(f, "write #{t}"),
            Val::Zero => f.write_str("zeros"),
            Val::Trimmed => f.write_str("trimmed"),
        }
    }
}

fn seen_text(s: Seen) -> String {
    match s {
        Seen::Zero => "zeros".into(),
        Seen::Tag(t) => format!("write #{t}"),
        Seen::Ones => "0xFF (a fill write)".into(),
        Seen::Garbage => "garbage (content never written there)".into(),
    }
}

#[derive(Clone, Debug)]
struct Cell {
    durable: Val,
    /// Values since the last completed flush, oldest first, including an operation that
    /// was under way when power was cut.
    since: Vec<Val>,
}

impl Cell {
    fn current(&self) -> Val {
        *self.since.last().unwrap_or(&self.durable)
    }
}

#[derive(Clone)]
struct Model {
    cells: Vec<Cell>,
    /// The cells whose `since` is not empty, so that a flush visits only them: a flush
    /// over every sector made a full-device run's time grow with the square of the
    /// device (a flush every few operations, each over every sector).
    dirty: Vec<usize>,
    spb: u64,
}

impl Model {
    fn new(sectors: u64, spb: u64) -> Model {
        Model {
            cells: vec![
                Cell {
                    durable: Val::Zero,
                    since: Vec::new(),
                };
                sectors as usize
            ],
            dirty: Vec::new(),
            spb,
        }
    }

    /// Record an operation as under way (it may or may not reach the medium).
    fn start(&mut self, op: &Op) {
        match *op {
            Op::Write { lba, count, tag } => {
                for i in 0..count as u64 {
                    self.push((lba + i) as usize, Val::Data(tag + i));
                }
            }
            Op::Trim { lba, count } => {
                for i in 0..count as u64 {
                    self.push((lba + i) as usize, Val::Trimmed);
                }
            }
            Op::Read { .. } | Op::Flush => {}
        }
    }

    fn push(&mut self, i: usize, v: Val) {
        let c = &mut self.cells[i];
        if c.since.is_empty() {
            self.dirty.push(i);
        }
        c.since.push(v);
    }

    fn flushed(&mut self) {
        for &i in &self.dirty {
            let c = &mut self.cells[i];
            if let Some(&v) = c.since.last() {
                c.durable = v;
                c.since.clear();
            }
        }
        self.dirty.clear();
    }

    /// Check what sector `lba` read back after a power cut; `None` when admissible.
    fn check(&self, lba: u64, seen: Seen) -> Option<String> {
        let c = &self.cells[lba as usize];
        if c.durable.admits(seen) || c.since.iter().any(|v| v.admits(seen)) {
            return None;
        }
        let lbn = lba / self.spb;
        Some(if c.since.is_empty() {
            format!(
                "sector {lba} (block {lbn}): flushed {} but read {}",
                c.durable,
                seen_text(seen)
            )
        } else {
            let cands: Vec<String> = std::iter::once(c.durable)
                .chain(c.since.iter().copied())
                .map(|v| v.to_string())
                .collect();
            format!(
                "sector {lba} (block {lbn}): read {}, not one of [{}] (last flushed first)",
                seen_text(seen),
                cands.join(", ")
            )
        })
    }

    /// After a successful recovery, what was read back is the new durable state.
    fn settle(&mut self, seen: &[Seen]) {
        self.dirty.clear();
        for (c, &s) in self.cells.iter_mut().zip(seen) {
            c.since.clear();
            c.durable = match s {
                Seen::Tag(t) => Val::Data(t),
                Seen::Ones => Val::Data(FILL),
                _ => Val::Zero,
            };
        }
    }
}

// ---- one run -------------------------------------------------------------------------------

struct Ctx {
    spec: DeviceSpec,
    cfg: FmsConfig,
    seed: u64,
    ops: Vec<Op>,
    sectors: u64,
    spb: u64,
    /// First tag free for the after-recovery writes.
    next_tag: u64,
    /// Program/erase operations (1-based, from the first mount) that fail, in every run.
    fail_ops: Vec<u64>,
    bitflip_rate: f64,
    /// Format cuts: a mount may name lost blocks (`lost_is_none`): a cut format that
    /// erased part of the old medium before its first header leaves the old medium with
    /// blocks lost, as the user asked.
    lost_ok: bool,
    /// [`TortureConfig::chain`] and [`TortureConfig::chain_within`].
    chain: u32,
    chain_within: u64,
}

/// Outcome of one run (fault-free or cut).
struct RunOutcome {
    problems: Vec<String>,
    /// A workload operation failed without any power cut: the configuration cannot run
    /// the workload at all (a worn-out or too small device), which is not a violation.
    workload_failed: bool,
    device_ops: u64,
    /// Fault-free run: the program/erase count after the first mount, then after each
    /// workload operation (operation `i` did those in `op_ends[i] + 1..=op_ends[i + 1]`).
    op_ends: Vec<u64>,
    /// Cut run: the workload operation the cut interrupted.
    cut_in: Option<usize>,
    /// Program and erase failures the device injected during the workload.
    program_failures: u64,
    erase_failures: u64,
    cleanings: u64,
    erasures: u64,
    blocks_copied: u64,
    wear_swaps: u64,
    index_moves: u64,
    /// Cut run: what the mount after the cut found to repair or skip.
    recovered: Option<MountReport>,
    /// Chained cuts made after the first recovery, and what the mount after each found.
    chained_cuts: u64,
    chain_recovered: Vec<MountReport>,
    /// A chained run ([`TortureConfig::chain`], a cut run): its mounts after a cut are cut
    /// in turn (`mount_cut`), and counted.
    cut_mounts: bool,
    mount_cuts: u64,
    /// The chain ended with the medium full ([`full_by_torn_slots`]).
    chain_full: bool,
    /// Format cut: what the mount after the cut found.
    format_found: Option<format::Found>,
    reads: ReadCounts,
}

fn dev_err(what: &str, e: DevError) -> String {
    format!("{what}: {e}")
}

/// Format a fresh device and reopen it, so the operation count starts at 0.
fn formatted(ctx: &Ctx) -> Result<Nand, String> {
    let nand = Nand::ram(ctx.spec.clone()).map_err(|e| format!("device: {e}"))?;
    let fms = Fms::format(nand, ctx.cfg.clone()).map_err(|e| dev_err("format", e))?;
    let store = fms.into_nand().into_store();
    Nand::open(ctx.spec.clone(), store).map_err(|e| format!("reopen: {e}"))
}

/// Reads of `nand` flip bits at the torture's rate from now on (a reopened device has
/// no fault plan), seeded from the run's seed and `salt`.
fn flip_reads(ctx: &Ctx, nand: &mut Nand, salt: u64) {
    flip_reads_and_cut(ctx, nand, salt, None);
}

/// [`flip_reads`], and power cut at the `cut`-th program/erase from now (torn as the
/// seeded generator picks; the flips are those [`flip_reads`] makes until the cut).
fn flip_reads_and_cut(ctx: &Ctx, nand: &mut Nand, salt: u64, cut: Option<u64>) {
    if ctx.bitflip_rate > 0.0 || cut.is_some() {
        nand.set_faults(FaultPlan {
            power_cut_at: cut,
            torn: TornMode::Random,
            bitflip_rate: ctx.bitflip_rate,
            seed: ctx.seed ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15),
            ..FaultPlan::default()
        });
    }
}

/// Reopen and mount `nand` (an FMS's, whose read counts are added to `reads`).
fn remount(ctx: &Ctx, old: Fms, what: &str, reads: &mut ReadCounts) -> Result<Fms, String> {
    remount_with(ctx, ctx.cfg.clone(), old, what, reads)
}

/// [`remount`] with configuration `cfg` (check 3b mounts reading every record, not the
/// segment summaries, and compares).
fn remount_with(
    ctx: &Ctx,
    cfg: FmsConfig,
    old: Fms,
    what: &str,
    reads: &mut ReadCounts,
) -> Result<Fms, String> {
    reads.add_fms(&old);
    let mut nand = Nand::open(ctx.spec.clone(), old.into_nand().into_store())
        .map_err(|e| format!("{what}: reopen: {e}"))?;
    flip_reads(ctx, &mut nand, what.len() as u64 ^ reads.bitflips);
    let f = Fms::mount(nand, cfg).map_err(|e| dev_err(&format!("{what}: mount"), e))?;
    if !ctx.lost_ok {
        lost_is_none(&f, what)?;
    }
    Ok(f)
}

/// Power cuts alone lose nothing acknowledged, so no mount of a tortured medium may name
/// a lost block (`MountReport::lost_blocks`: a block whose newest record sits behind a
/// header that does not decode): one that did would be a loss, or a false alarm of the
/// check (a torn erase's records outliving the copies and trims that superseded them).
fn lost_is_none(f: &Fms, what: &str) -> Result<(), String> {
    match f.mount_report().lost_blocks.first() {
        None => Ok(()),
        Some(l) => Err(format!(
            "{what}: the mount names {} lost block(s), first block {} (segment {} slot {}, whose header does not decode)",
            f.mount_report().lost_blocks.len(),
            l.block,
            l.segment,
            l.slot
        )),
    }
}

/// Read every sector; classify each.
fn read_all(ctx: &Ctx, fms: &mut Fms, what: &str) -> Result<Vec<Seen>, String> {
    let chunk = (ctx.spb * 8).min(ctx.sectors);
    let mut buf = vec![0u8; chunk as usize * SECTOR];
    let mut scratch = vec![0u8; SECTOR];
    let mut seen = Vec::with_capacity(ctx.sectors as usize);
    let mut lba = 0;
    while lba < ctx.sectors {
        let n = chunk.min(ctx.sectors - lba);
        let b = &mut buf[..n as usize * SECTOR];
        fms.read(lba, n as u32, Some(b))
            .map_err(|e| dev_err(&format!("{what}: read {lba}+{n}"), e))?;
        for i in 0..n {
            let s = &b[i as usize * SECTOR..(i as usize + 1) * SECTOR];
            seen.push(classify(ctx.seed, lba + i, s, &mut scratch));
        }
        lba += n;
    }
    Ok(seen)
}

/// The tables `tables_digest` covers, to compare a running FMS with a remount and say how
/// they differ. The erase count of a dirty segment is not compared: it was lost, and mount
/// takes the largest count known at the time. Nor are the erase count and next free slot
/// of a bad segment: mount skips bad blocks without reading them (it cannot know either),
/// while the FMS that saw the block fail kept its last values.
struct Tables {
    map: Vec<Option<u32>>,
    segs: Vec<ftl::fms::Seg>,
    active: Vec<u32>,
}

impl Tables {
    fn of(f: &Fms) -> Tables {
        Tables {
            map: (0..f.logical_blocks() as u32)
                .map(|l| f.lookup(l))
                .collect(),
            segs: f.segments().to_vec(),
            active: f.active_segments().to_vec(),
        }
    }

    fn diff(&self, other: &Tables) -> String {
        self.diff_from(other, None)
    }

    /// [`Tables::diff`] of a mount that read segment summaries (`self`) with one that
    /// read every record (`other`) of the same medium. `slots`: a segment the summary
    /// mount found full (used, every slot written) and holding no valid block may be
    /// anything holding no valid block to the records mount: a torn erase of a cleaned
    /// segment can keep its header and summary and erase some of its slots (every block
    /// of it had moved, so its records were all stale either way).
    fn diff_from(&self, other: &Tables, slots: Option<u32>) -> String {
        let mut d = Vec::new();
        if let Some(l) = (0..self.map.len()).find(|&l| self.map[l] != other.map[l]) {
            d.push(format!(
                "block {l} at {:?} vs {:?}",
                self.map[l], other.map[l]
            ));
        }
        for (s, (a, b)) in self.segs.iter().zip(&other.segs).enumerate() {
            let key = |x: &ftl::fms::Seg| match x.state {
                SegState::Dirty => (0, x.valid, x.next, x.state),
                SegState::Bad => (0, x.valid, 0, x.state),
                _ => (x.erase_count, x.valid, x.next, x.state),
            };
            let kept = |a: &ftl::fms::Seg, b: &ftl::fms::Seg| {
                slots.is_some_and(|n| {
                    (a.state, a.next, a.valid) == (SegState::Used, n, 0)
                        && b.valid == 0
                        && matches!(b.state, SegState::Used | SegState::Free)
                })
            };
            if key(a) != key(b) && !kept(a, b) {
                d.push(format!(
                    "segment {s}: erase count/valid/next/state {:?} vs {:?}",
                    key(a),
                    key(b)
                ));
                break;
            }
        }
        if self.active != other.active {
            d.push(format!(
                "active segments {:?} vs {:?}",
                self.active, other.active
            ));
        }
        d.join(", ")
    }
}

/// Segments whose header is erased or unreadable (their erase count is lost).
fn lost_headers(nand: &mut Nand) -> Result<Vec<bool>, String> {
    let geo = nand.geometry().clone();
    let mut hdr = [0u8; SEG_HEADER];
    (0..geo.blocks)
        .map(|b| {
            if nand.is_bad(b) {
                return Ok(false);
            }
            nand.read(geo.first_page(b), 0, &mut hdr)
                .map_err(|e| format!("after the cut: read header {b}: {e}"))?;
            Ok(!matches!(SegHeader::decode(&hdr), Ok(Some(_))))
        })
        .collect()
}

/// What the cuts of a run left that the FMS cannot know, for check (4): segments whose
/// header no cut left readable, and erases that cuts stopped once begun.
#[derive(Clone, Default)]
struct Lost {
    /// Segments with no readable header after a cut: their count was lost and mount
    /// estimates it (as the largest count known), so they are not checked, then or later.
    headers: Vec<bool>,
    /// Per segment, erases stopped by a cut after they began
    /// ([`nand::Nand::cut_erase`]): the device counted each, and a header the erase did
    /// not reach still carries the count before it, so the FMS's count may fall behind
    /// the device's by one for each. Only chained cuts ([`TortureConfig::chain`]) stop two
    /// erases of one segment. (Until stop 30 check 4 let every segment fall one behind,
    /// cut or not: an erase the FMS forgot to count went unseen.)
    torn_erases: Vec<u32>,
}

impl Lost {
    /// Note what the cut that stopped `nand` left: call before the mount reuses anything.
    fn add_cut(&mut self, nand: &mut Nand, cut_erase: Option<u32>) -> Result<(), String> {
        let now = lost_headers(nand)?;
        if self.headers.is_empty() {
            self.headers = now;
            self.torn_erases = vec![0; self.headers.len()];
        } else {
            for (l, n) in self.headers.iter_mut().zip(now) {
                *l |= n;
            }
        }
        if let Some(b) = cut_erase {
            self.torn_erases[b as usize] += 1;
        }
        Ok(())
    }

    /// How far the FMS's erase count of segment `s` may fall behind the device's.
    fn slack(&self, s: usize) -> u32 {
        self.torn_erases.get(s).copied().unwrap_or(0)
    }
}

/// Check (4): erase counts of segments that are neither dirty nor bad, nor in
/// `lost.headers`; the FMS's count may fall behind the device's by [`Lost::slack`].
fn check_erase_counts(fms: &Fms, lost: &Lost, what: &str, problems: &mut Vec<String>) {
    let counts = fms.erase_counts();
    for (s, seg) in fms.segments().iter().enumerate() {
        if matches!(seg.state, SegState::Dirty | SegState::Bad)
            || lost.headers.get(s) == Some(&true)
        {
            continue;
        }
        let dev = fms.nand().erase_count(s as u32);
        let c = counts[s];
        if c > dev || c + lost.slack(s) < dev {
            problems.push(format!(
                "{what}: segment {s} ({:?}): FMS erase count {c}, device erase count {dev}",
                seg.state
            ));
        }
    }
}

fn apply(fms: &mut Fms, ctx: &Ctx, op: &Op, buf: &mut Vec<u8>) -> Result<(), DevError> {
    match *op {
        Op::Write { lba, count, tag } => {
            buf.resize(count as usize * SECTOR, 0);
            for i in 0..count as u64 {
                let at = i as usize * SECTOR;
                sector_content(ctx.seed, tag + i, lba + i, &mut buf[at..at + SECTOR]);
            }
            fms.write(lba, count, Some(buf))
        }
        Op::Trim { lba, count, .. } => fms.trim(lba, count),
        Op::Read { lba, count } => {
            buf.resize(count as usize * SECTOR, 0);
            fms.read(lba, count, Some(buf))
        }
        Op::Flush => fms.flush(),
    }
}

/// Compare a workload read with the model's current values (strict: nothing was cut yet).
fn check_read(ctx: &Ctx, model: &Model, op: &Op, buf: &[u8], problems: &mut Vec<String>) {
    let Op::Read { lba, count } = *op else { return };
    let mut scratch = vec![0u8; SECTOR];
    for i in 0..count as u64 {
        let s = &buf[i as usize * SECTOR..(i as usize + 1) * SECTOR];
        let seen = classify(ctx.seed, lba + i, s, &mut scratch);
        let cur = model.cells[(lba + i) as usize].current();
        // Before any power cut the FMS holds every trim in RAM: trimmed reads zeros.
        let ok = match cur {
            Val::Data(t) if t & FILL != 0 => seen == Seen::Ones,
            Val::Data(t) => seen == Seen::Tag(t),
            Val::Zero | Val::Trimmed => seen == Seen::Zero,
        };
        if !ok {
            problems.push(format!(
                "read during the workload: sector {} holds {cur} but read {}",
                lba + i,
                seen_text(seen)
            ));
            return;
        }
    }
}

/// Run the workload, cut at `cut` (if any), recover and check.
impl RunOutcome {
    fn empty() -> RunOutcome {
        RunOutcome {
            problems: Vec::new(),
            workload_failed: false,
            device_ops: 0,
            op_ends: Vec::new(),
            cut_in: None,
            program_failures: 0,
            erase_failures: 0,
            cleanings: 0,
            erasures: 0,
            blocks_copied: 0,
            wear_swaps: 0,
            index_moves: 0,
            recovered: None,
            chained_cuts: 0,
            chain_recovered: Vec::new(),
            cut_mounts: false,
            mount_cuts: 0,
            chain_full: false,
            format_found: None,
            reads: ReadCounts::default(),
        }
    }
}

fn run_one(ctx: &Ctx, cut: Option<u64>) -> RunOutcome {
    let mut out = RunOutcome::empty();
    if let Err(e) = run_one_inner(ctx, cut, &mut out) {
        out.problems.push(e);
    }
    out
}

/// The seed of a run's fault plan. With bit flips, one seed for every run: the flips then
/// fall on the same reads in every run up to its cut, as its programs and erases must (an
/// ECC re-read advances the clock, which the age-based policies read). The torn outcome
/// still differs from cut to cut (the generator has come further).
fn fault_seed(ctx: &Ctx, cut: Option<u64>) -> u64 {
    if ctx.bitflip_rate > 0.0 {
        ctx.seed ^ 0xF11F_5EED
    } else {
        ctx.seed ^ cut.unwrap_or(0).wrapping_mul(0xA24B_AED4_963E_E407)
    }
}

/// A freshly formatted FMS with the run's fault plan, mounted, and an empty shadow model.
fn start(ctx: &Ctx, cut: Option<u64>) -> Result<(Fms, Model), String> {
    let mut nand = formatted(ctx)?;
    if cut.is_some() || !ctx.fail_ops.is_empty() || ctx.bitflip_rate > 0.0 {
        nand.set_faults(FaultPlan {
            power_cut_at: cut,
            torn: TornMode::Random,
            fail_ops: ctx.fail_ops.clone(),
            bitflip_rate: ctx.bitflip_rate,
            seed: fault_seed(ctx, cut),
            ..FaultPlan::default()
        });
    }
    let fms = Fms::mount(nand, ctx.cfg.clone()).map_err(|e| {
        let e = dev_err("first mount", e);
        // The medium is the one the format just wrote: under flips, the rate is the
        // cause (QA stop 35: `--bitflip-rate 1` blamed the medium).
        if ctx.bitflip_rate > 0.0 {
            format!(
                "{e} (the medium was just formatted: the bit flips of --bitflip-rate {} garbled what the mount read; give a lower rate{})",
                ctx.bitflip_rate,
                if ctx.cfg.ecc { "" } else { ", or --ecc" }
            )
        } else {
            e
        }
    })?;
    Ok((fms, Model::new(ctx.sectors, ctx.spb)))
}

fn run_one_inner(ctx: &Ctx, cut: Option<u64>, out: &mut RunOutcome) -> Result<(), String> {
    let (mut fms, mut model) = start(ctx, cut)?;
    let mut buf = Vec::new();
    let mut was_cut = false;
    if cut.is_none() {
        out.op_ends.reserve(ctx.ops.len() + 1);
        out.op_ends.push(fms.nand().op_count());
    }
    for (i, op) in ctx.ops.iter().enumerate() {
        model.start(op);
        match apply(&mut fms, ctx, op, &mut buf) {
            Ok(()) => {
                if cut.is_none() {
                    out.op_ends.push(fms.nand().op_count());
                }
                if matches!(op, Op::Flush) {
                    model.flushed();
                }
                if matches!(op, Op::Read { .. }) {
                    check_read(ctx, &model, op, &buf, &mut out.problems);
                    if !out.problems.is_empty() {
                        out.reads.add_fms(&fms);
                        return Ok(());
                    }
                }
            }
            Err(DevError::PowerLoss) if cut.is_some() => {
                was_cut = true;
                out.cut_in = Some(i);
                break;
            }
            Err(e) => {
                out.workload_failed = cut.is_none();
                out.device_ops = fms.nand().op_count();
                out.program_failures = fms.nand().counters().program_failures;
                out.erase_failures = fms.nand().counters().erase_failures;
                return Err(format!("workload op {i} ({op}): {e}"));
            }
        }
    }
    after_workload(ctx, cut, was_cut, fms, model, buf, out)
}

/// A cut run forked from the fault-free run just before workload operation `op`
/// ([`fork_cuts`]): arm the cut, apply the operation it stops, then the checks of a
/// replayed run ([`after_workload`]).
fn run_forked(ctx: &Ctx, fork: Fork) -> RunOutcome {
    let mut out = RunOutcome::empty();
    let Fork {
        op,
        cut,
        mut fms,
        mut model,
    } = fork;
    let mut buf = Vec::new();
    let o = &ctx.ops[op];
    model.start(o);
    let was_cut = match apply(&mut fms, ctx, o, &mut buf) {
        Err(DevError::PowerLoss) => {
            out.cut_in = Some(op);
            true
        }
        Ok(()) => false,
        Err(e) => {
            out.problems.push(format!("workload op {op} ({o}): {e}"));
            return out;
        }
    };
    if let Err(e) = after_workload(ctx, Some(cut), was_cut, fms, model, buf, &mut out) {
        out.problems.push(e);
    }
    out
}

/// A copy of the fault-free run's FMS and shadow model taken just before workload
/// operation `op`, with the power cut `cut` armed on its device.
struct Fork {
    op: usize,
    cut: u64,
    fms: Fms,
    model: Model,
}

/// What a torture worker runs: a forked cut, or a cut replayed from the format.
enum Job {
    Fork(Box<Fork>),
    Replay(u64),
}

/// Run the workload once more without faults and, before each operation in which cuts of
/// `cuts` (sorted) fall by the fault-free run's `op_ends`, fork the running FMS and model
/// once for each such cut, arm the cut on the fork's device and hand it to `send`.
/// Returns the cuts it could not fork (those falling in the first mount, or after an
/// early end of the fault-free run), to be replayed; stops early when `send` returns
/// false.
fn fork_cuts(
    ctx: &Ctx,
    cuts: &[u64],
    op_ends: &[u64],
    mut send: impl FnMut(Fork) -> bool,
) -> Result<Vec<u64>, String> {
    let (mut fms, mut model) = start(ctx, None)?;
    let mut buf = Vec::new();
    let first = op_ends.first().copied().unwrap_or(u64::MAX);
    let mut rest: Vec<u64> = cuts.iter().copied().filter(|&k| k <= first).collect();
    let mut next = rest.len();
    for (i, op) in ctx.ops.iter().enumerate() {
        let Some(&end) = op_ends.get(i + 1) else {
            break;
        };
        while let Some(&k) = cuts.get(next).filter(|&&k| k <= end) {
            let fork = fms.try_clone().ok_or("the device cannot be copied")?;
            let mut fork = Fork {
                op: i,
                cut: k,
                fms: fork,
                model: model.clone(),
            };
            // Without flips a replayed cut run seeds its generator for its cut, and
            // nothing draws from it before the cut; with flips every run has one seed,
            // and the fork's generator has drawn what the replay's would have.
            let reseed = (ctx.bitflip_rate <= 0.0).then(|| fault_seed(ctx, Some(k)));
            fork.fms
                .nand_mut()
                .arm_power_cut(k, TornMode::Random, reseed);
            if !send(fork) {
                return Ok(Vec::new());
            }
            next += 1;
        }
        if next == cuts.len() {
            return Ok(rest);
        }
        model.start(op);
        apply(&mut fms, ctx, op, &mut buf)
            .map_err(|e| format!("fork run: workload op {i} ({op}): {e}"))?;
        if matches!(op, Op::Flush) {
            model.flushed();
        }
    }
    rest.extend_from_slice(&cuts[next..]);
    Ok(rest)
}

/// After the workload (or its cut): collect the run's figures, mount, check.
fn after_workload(
    ctx: &Ctx,
    cut: Option<u64>,
    was_cut: bool,
    fms: Fms,
    model: Model,
    buf: Vec<u8>,
    out: &mut RunOutcome,
) -> Result<(), String> {
    out.device_ops = fms.nand().op_count();
    out.program_failures = fms.nand().counters().program_failures;
    out.erase_failures = fms.nand().counters().erase_failures;
    out.cleanings = fms.stats().cleanings;
    out.erasures = fms.stats().erasures;
    out.blocks_copied = fms.stats().blocks_copied;
    out.wear_swaps = fms.stats().wear_swaps;
    out.index_moves = fms.stats().index_moves;
    if let Some(k) = cut {
        if !was_cut {
            return Err(format!(
                "power cut {k} never happened: the workload did only {} programs/erases (the run is not deterministic)",
                out.device_ops
            ));
        }
    }

    let salt = cut.unwrap_or(0);
    let mut lost = Lost::default();
    // (The fault-free run has no cut to chain after.)
    let chain = if cut.is_some() { ctx.chain } else { 0 };
    out.cut_mounts = chain > 0;
    let first = recover(ctx, salt ^ 0x5EED, fms, model, &mut lost, "", out)?;
    let Some((mut f2, mut model)) = first else {
        return Ok(());
    };
    let mut extra = Extra::new(ctx, salt);
    if chain > 0 {
        match chained(ctx, salt, f2, model, &mut lost, &mut extra, out)? {
            Some((f, m)) => (f2, model) = (f, m),
            None => return Ok(()),
        }
    }
    keeps_working(ctx, f2, model, buf, &lost, &mut extra, out)
}

/// The chained cuts of a cut point ([`TortureConfig::chain`]) after the recovery that
/// left `f2` (checked) and `model`: each [`chain_cut`] and its recovery, checked; `salt`
/// (the cut point's) seeds the recoveries' flips and mount cuts; `lost` gathers what the
/// cuts left for check 4. Returns the FMS and model of the last recovery, for check 5, or
/// `None` when a check failed or the chain left the medium full (recovered and checked:
/// counted in `out`).
fn chained(
    ctx: &Ctx,
    salt: u64,
    mut f2: Fms,
    mut model: Model,
    lost: &mut Lost,
    extra: &mut Extra,
    out: &mut RunOutcome,
) -> Result<Option<(Fms, Model)>, String> {
    out.cut_mounts = true;
    let mut buf = Vec::new();
    for c in 1..=ctx.chain {
        let (k, cut_fms) = match chain_cut(ctx, c, f2, &mut model, extra, &mut buf, out)? {
            Chained::Cut(k, f) => (k, f),
            Chained::Full(f) => {
                let prefix = format!("chained cut {c}, the medium full: ");
                recover(ctx, salt ^ 0xF11, f, model, lost, &prefix, out)?;
                return Ok(None);
            }
        };
        out.chained_cuts += 1;
        let prefix = format!(
            "chained cut {c} (program/erase {k} after recovery {}): ",
            c - 1
        );
        let salt = salt ^ 0x5EED ^ (c as u64).wrapping_mul(0xD1B5_4A32_D192_ED03);
        match recover(ctx, salt, cut_fms, model, lost, &prefix, out)? {
            Some((f, m)) => (f2, model) = (f, m),
            None => return Ok(None),
        }
    }
    Ok(Some((f2, model)))
}

/// Checks (1)-(4) after a cut: reopen the medium `fms` was cut on, mount it, read every
/// sector back against `model`, compare the tables with a second mount (and, with segment
/// summaries, with a mount reading every record). Returns the FMS of the last mount and
/// the model settled to what was read, or `None` when a check failed (its problems, each
/// starting with `prefix`, are in `out`). `lost` gathers the segments whose header the
/// cut left unreadable (over a chain of cuts: check 4 skips them from then on); `salt`
/// seeds the mount's bit flips. In a chained run the mount is cut too
/// ([`mount_cut`]).
fn recover(
    ctx: &Ctx,
    salt: u64,
    fms: Fms,
    mut model: Model,
    lost: &mut Lost,
    prefix: &str,
    out: &mut RunOutcome,
) -> Result<Option<(Fms, Model)>, String> {
    // Mount after the cut (or the clean shutdown). Segments without a readable header
    // lost their erase count (mount estimates it); note them before mount reuses any
    // (read without flips: what the cut left, not what a read made of it).
    out.reads.add_fms(&fms);
    let after = format!("{prefix}after the cut");
    let mut f1 = match mount_cut(ctx, salt, fms.into_nand(), lost, &after, out)? {
        Ok(f) => f,
        Err((e, what)) => return Err(dev_err(&format!("{after}: {what}"), e)),
    };
    if out.recovered.is_none() {
        out.recovered = Some(f1.mount_report().clone());
    } else {
        out.chain_recovered.push(f1.mount_report().clone());
    }
    if let Err(e) = lost_is_none(&f1, &after) {
        out.problems.push(e);
    }
    let d1 = f1.tables_digest();
    let t1 = Tables::of(&f1);
    check_erase_counts(&f1, lost, &after, &mut out.problems);
    // An FMS's read counts are added when it is remounted, and here before any return
    // that drops it: a violation must carry the note of the reads that caused it.
    let seen = read_all(ctx, &mut f1, &after).inspect_err(|_| out.reads.add_fms(&f1))?;
    verify(&model, &seen, prefix, &mut out.problems);

    // Check (3): a second mount of the same medium rebuilds the same tables.
    let reads = &mut out.reads;
    let problems = &mut out.problems;
    let mut f2 = remount(ctx, f1, &format!("{prefix}second mount"), reads)?;
    let d2 = f2.tables_digest();
    if d1 != d2 {
        problems.push(format!(
            "{prefix}tables rebuilt after the cut ({d1:016x}) differ from a clean remount ({d2:016x}): {}",
            t1.diff(&Tables::of(&f2))
        ));
    }
    // Check (3b), on media with segment summaries (spare mode): a mount that reads every
    // record instead finds the same blocks where the summaries put them; then a mount
    // with summaries again, to go on from.
    if f2.layout().summary_page.is_some() {
        let records = FmsConfig {
            segment_summaries: false,
            ..ctx.cfg.clone()
        };
        let t2 = Tables::of(&f2);
        let slots = f2.layout().slots;
        let what = format!("{prefix}mount reading every record");
        let f3 = remount_with(ctx, records, f2, &what, reads)?;
        let diff = t2.diff_from(&Tables::of(&f3), Some(slots));
        if !diff.is_empty() {
            problems.push(format!(
                "{prefix}tables rebuilt from the segment summaries differ from those rebuilt from every record: {diff}"
            ));
        }
        f2 = remount(ctx, f3, &format!("{prefix}mount after the records"), reads)?;
        let d4 = f2.tables_digest();
        if d4 != d2 {
            problems.push(format!(
                "{prefix}tables rebuilt from the segment summaries ({d2:016x}) differ after a mount reading every record ({d4:016x}): {}",
                t2.diff(&Tables::of(&f2))
            ));
        }
    }
    if !problems.is_empty() {
        reads.add_fms(&f2);
        return Ok(None);
    }
    model.settle(&seen);
    Ok(Some((f2, model)))
}

/// Mounts after a cut that a chained run cuts in a row, at most: then the mount runs to
/// its end (each cut mount leaves its repairs part done, and the last one finishes them).
pub const MAX_MOUNT_CUTS: u32 = 4;

/// Reopen the medium of `nand`, which a cut stopped, and mount it. `lost` notes what each
/// cut left (before a mount reuses anything). In a chained run (`out.cut_mounts`) the mount
/// is armed with a power cut at a seeded program/erase among its first
/// [`TortureConfig::chain_within`]: when the mount's repairs reach it, the mount stops
/// with its device (`Fms::mount_or_return`), which is reopened and mounted again, cut
/// again up to [`MAX_MOUNT_CUTS`] times in a row ([`RunOutcome::mount_cuts`]); a cut the
/// mount did not reach is taken back before anything else runs. A mount's refusal is
/// given back, with which mount it was ("mount", "mount after 2 cut mount(s) (armed at
/// its program/erase 3)"): an error after a workload's cut (`recover`), an outcome after
/// a format's (`torture/format.rs`). `after` names the medium in the errors of the reopen
/// and of `lost`.
fn mount_cut(
    ctx: &Ctx,
    salt: u64,
    nand: Nand,
    lost: &mut Lost,
    after: &str,
    out: &mut RunOutcome,
) -> Result<Result<Fms, (DevError, String)>, String> {
    let mut cut_erase = nand.cut_erase();
    let mut store = nand.into_store();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(ctx.seed ^ salt ^ 0x0A7C_0075);
    for attempt in 0u32.. {
        let mut nand =
            Nand::open(ctx.spec.clone(), store).map_err(|e| format!("{after}: reopen: {e}"))?;
        lost.add_cut(&mut nand, cut_erase)?;
        let cut = (out.cut_mounts && attempt < MAX_MOUNT_CUTS)
            .then(|| rng.gen_range(1..=ctx.chain_within));
        // (The first attempt's flips are those of a mount that is not cut.)
        let flips = salt ^ (attempt as u64).wrapping_mul(0xA24B_AED4_963E_E407);
        flip_reads_and_cut(ctx, &mut nand, flips, cut);
        match Fms::mount_or_return(nand, ctx.cfg.clone()) {
            Ok(mut f) => {
                if cut.is_some() {
                    f.nand_mut().disarm_power_cut();
                }
                return Ok(Ok(f));
            }
            Err((DevError::PowerLoss, Some(n))) if cut.is_some() => {
                out.mount_cuts += 1;
                out.reads.add_nand(&n);
                cut_erase = n.cut_erase();
                store = n.into_store();
            }
            Err((e, n)) => {
                if let Some(n) = n {
                    out.reads.add_nand(&n);
                }
                // (The cut armed may not have fallen: the mount failed before it.)
                let cut = match cut {
                    Some(k) => format!(" (armed at its program/erase {k})"),
                    None => String::new(),
                };
                let what = match attempt {
                    0 => format!("mount{cut}"),
                    a => format!("mount after {a} cut mount(s){cut}"),
                };
                return Ok(Err((e, what)));
            }
        }
    }
    unreachable!("the mounts after a cut end in a mount or an error")
}

/// The writes, trims and flushes a run makes after a recovery ([`chain_cut`],
/// [`keeps_working`]): seeded from the run's seed and a salt (its cut point), with tags
/// from [`Ctx::next_tag`] on, so that no two writes of a run share one.
struct Extra {
    rng: Xoshiro256PlusPlus,
    tag: u64,
}

impl Extra {
    fn new(ctx: &Ctx, salt: u64) -> Extra {
        let salt = salt.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        Extra {
            rng: Xoshiro256PlusPlus::seed_from_u64(ctx.seed ^ salt ^ 0xC0FFEE),
            tag: ctx.next_tag,
        }
    }

    /// Operation `i` of a run of writes and trims ([`Extra::op`]) with a flush every
    /// eighth, which programs what the others left in RAM.
    fn nth(&mut self, ctx: &Ctx, i: u64) -> Op {
        if i % 8 == 7 {
            Op::Flush
        } else {
            self.op(ctx, true)
        }
    }

    /// A write of one sector to two blocks' worth at a random sector or, with `trims`, in
    /// three cases out of ten a trim of a whole block or of part of one.
    fn op(&mut self, ctx: &Ctx, trims: bool) -> Op {
        let rng = &mut self.rng;
        let lba = rng.gen_range(0..ctx.sectors);
        if trims && rng.gen_bool(0.3) {
            let (lba, count) = if rng.gen_bool(0.5) {
                let blocks = ctx.sectors / ctx.spb;
                let lbn = rng.gen_range(0..blocks);
                (lbn * ctx.spb, ctx.spb.min(ctx.sectors - lbn * ctx.spb))
            } else {
                (lba, rng.gen_range(1..=ctx.spb).min(ctx.sectors - lba))
            };
            return Op::Trim {
                lba,
                count: count as u32,
            };
        }
        let count = rng.gen_range(1..=2 * ctx.spb).min(ctx.sectors - lba);
        let op = Op::Write {
            lba,
            count: count as u32,
            tag: self.tag,
        };
        self.tag += count;
        op
    }
}

/// How a link of a chain ended: cut at the given program/erase after the recovery, or
/// with the medium full (a write or trim refused for want of space when nothing could be
/// cleaned: [`full_by_torn_slots`]).
enum Chained {
    Cut(u64, Fms),
    Full(Fms),
}

/// Whether no cleaning can finish on `f`: no segment is free, and no closed segment that
/// is not bad has valid blocks that fit the erased slots left in the other segments (stop
/// 29's rule, `Fms::victim_without_a_free_segment`). Then a write or trim that needs room
/// fails, and rightly: every cut in a cleaning's first operations tears the slot a copy
/// was going to, so cuts a few operations apart can use the last erased slots up
/// (docs/fms.md, "Power cuts a few operations apart"). Taken on the state *before* the
/// operation that failed: a refusal when a cleaning could have finished is the wedge that
/// rule fixed (stop 28's cleaner copied a victim that did not fit and left no room at
/// all), and a violation.
fn no_cleaning_can_finish(f: &Fms) -> bool {
    if f.free_segments() > 0 {
        return false;
    }
    let slots = f.layout().slots;
    let segs = f.segments();
    let open = |g: usize| {
        let s = &segs[g];
        matches!(s.state, SegState::Active | SegState::Used)
            && s.next < slots
            && !f.nand().is_bad(g as u32)
    };
    let room: u64 = (0..segs.len())
        .filter(|&g| open(g))
        .map(|g| (slots - segs[g].next) as u64)
        .sum();
    !segs.iter().enumerate().any(|(g, s)| {
        let own = if open(g) { (slots - s.next) as u64 } else { 0 };
        s.candidate(slots) && !f.nand().is_bad(g as u32) && s.valid as u64 <= room - own
    })
}

/// Whether the operation that failed with `e` on `f` ran out of the room chained cuts
/// used up: a refusal for want of space (`NoSpace`, `WornOut`) when no cleaning could
/// finish before it (`stuck`, [`no_cleaning_can_finish`] taken before the operation). The
/// chain then ends: the medium is recovered and checked as after a cut, and counted
/// ([`TortureReport::chains_full`]).
fn full_by_torn_slots(stuck: bool, e: &DevError) -> bool {
    stuck && matches!(e, DevError::NoSpace | DevError::WornOut { .. })
}

/// A chained cut ([`TortureConfig::chain`]): on the FMS `f` just recovered (and checked),
/// arm a power cut at a seeded program/erase among the next [`TortureConfig::chain_within`]
/// and go on with writes, trims and a flush every eighth operation until it falls; the
/// recovery, the repairs the mount left to the first write (`Fms::repair`) and the
/// cleanings it starts are cut in turn. Returns the cut's operation number (from the
/// recovery) and the FMS it stopped, or the FMS with the medium full
/// ([`full_by_torn_slots`]); any other refusal is an error, and a violation.
fn chain_cut(
    ctx: &Ctx,
    c: u32,
    mut f: Fms,
    model: &mut Model,
    extra: &mut Extra,
    buf: &mut Vec<u8>,
    out: &mut RunOutcome,
) -> Result<Chained, String> {
    let k = extra.rng.gen_range(1..=ctx.chain_within);
    f.nand_mut().set_faults(FaultPlan {
        power_cut_at: Some(k),
        torn: TornMode::Random,
        bitflip_rate: ctx.bitflip_rate,
        seed: extra.rng.gen(),
        ..FaultPlan::default()
    });
    let limit = ctx.chain_within.saturating_mul(16).saturating_add(64);
    for i in 0..limit {
        let op = extra.nth(ctx, i);
        model.start(&op);
        let stuck = no_cleaning_can_finish(&f);
        match apply(&mut f, ctx, &op, buf) {
            Ok(()) => {
                if matches!(op, Op::Flush) {
                    model.flushed();
                }
            }
            Err(DevError::PowerLoss) => return Ok(Chained::Cut(k, f)),
            Err(e) if full_by_torn_slots(stuck, &e) => {
                out.chain_full = true;
                // (The cut armed never fell: the recovery reopens the medium without it.)
                return Ok(Chained::Full(f));
            }
            Err(e) => {
                out.reads.add_fms(&f);
                return Err(dev_err(
                    &format!(
                        "chained cut {c} (armed at program/erase {k} after recovery {}): {op}",
                        c - 1
                    ),
                    e,
                ));
            }
        }
    }
    out.reads.add_fms(&f);
    Err(format!(
        "chained cut {c}: armed at program/erase {k} after recovery {}, but {limit} operations did only {} programs/erases",
        c - 1,
        f.nand().op_count()
    ))
}

/// Check (5) after a chain, cut short by a medium the chain left full
/// ([`full_by_torn_slots`]): counted, then recovered and checked as after a cut.
fn ended_full(
    ctx: &Ctx,
    salt: u64,
    f: Fms,
    model: Model,
    lost: &Lost,
    prefix: &str,
    out: &mut RunOutcome,
) -> Result<(), String> {
    out.chain_full = true;
    recover(ctx, salt, f, model, &mut lost.clone(), prefix, out)?;
    Ok(())
}

/// Check (5): the FMS `f2`, mounted after a cut and checked, keeps working. First a few
/// writes, a flush and a clean remount, which must rebuild exactly the tables the running
/// FMS had and read back every sector; then writes and trims enough to make the cleaner
/// run, and another remount. `model` holds what `f2` read back; `extra` makes the writes;
/// `lost`: the segments whose header a cut left unreadable (check 4 skips them).
fn keeps_working(
    ctx: &Ctx,
    mut f2: Fms,
    mut model: Model,
    mut buf: Vec<u8>,
    lost: &Lost,
    extra: &mut Extra,
    out: &mut RunOutcome,
) -> Result<(), String> {
    let reads = &mut out.reads;
    let problems = &mut out.problems;
    for _ in 0..6 {
        let op = extra.op(ctx, false);
        model.start(&op);
        let stuck = out.chained_cuts + out.mount_cuts > 0 && no_cleaning_can_finish(&f2);
        if let Err(e) = apply(&mut f2, ctx, &op, &mut buf) {
            if full_by_torn_slots(stuck, &e) {
                let prefix = "after recovery, the medium full: ";
                return ended_full(ctx, 0xF11, f2, model, lost, prefix, out);
            }
            reads.add_fms(&f2);
            return Err(dev_err(&format!("after recovery: {op}"), e));
        }
    }
    f2.flush()
        .map_err(|e| dev_err("after recovery: flush", e))
        .inspect_err(|_| reads.add_fms(&f2))?;
    model.flushed();
    let live = Tables::of(&f2);
    let mut f3 = remount(ctx, f2, "remount after recovery", reads)?;
    let diff = live.diff(&Tables::of(&f3));
    if !diff.is_empty() {
        problems.push(format!(
            "after recovery, writes and a flush: a clean remount rebuilds other tables than the running FMS had: {diff}"
        ));
    }
    check_erase_counts(&f3, lost, "after recovery", problems);
    let seen = read_all(ctx, &mut f3, "after recovery").inspect_err(|_| reads.add_fms(&f3))?;
    verify(&model, &seen, "after recovery: ", problems);
    if !problems.is_empty() {
        reads.add_fms(&f3);
        return Ok(());
    }

    let n = (ctx.sectors / ctx.spb / 2).max(16);
    for i in 0..n {
        let op = extra.nth(ctx, i);
        model.start(&op);
        let stuck = out.chained_cuts + out.mount_cuts > 0 && no_cleaning_can_finish(&f3);
        if let Err(e) = apply(&mut f3, ctx, &op, &mut buf) {
            if full_by_torn_slots(stuck, &e) {
                let prefix = "after recovery, phase 2, the medium full: ";
                return ended_full(ctx, 0xF12, f3, model, lost, prefix, out);
            }
            out.reads.add_fms(&f3);
            return Err(dev_err(&format!("after recovery, phase 2: {op}"), e));
        }
        if matches!(op, Op::Flush) {
            model.flushed();
        }
    }
    f3.flush()
        .map_err(|e| dev_err("after recovery, phase 2: flush", e))
        .inspect_err(|_| reads.add_fms(&f3))?;
    model.flushed();
    let mut f4 = remount(ctx, f3, "after recovery, phase 2: remount", reads)?;
    check_erase_counts(&f4, lost, "after recovery, phase 2", problems);
    let seen = read_all(ctx, &mut f4, "after recovery, phase 2");
    reads.add_fms(&f4);
    verify(&model, &seen?, "after recovery, phase 2: ", problems);
    Ok(())
}

/// Check every sector read back against the model; reports the first three problems.
fn verify(model: &Model, seen: &[Seen], prefix: &str, problems: &mut Vec<String>) {
    let mut bad = 0usize;
    for (lba, &s) in seen.iter().enumerate() {
        if let Some(p) = model.check(lba as u64, s) {
            if bad < 3 {
                problems.push(format!("{prefix}{p}"));
            }
            bad += 1;
        }
    }
    if bad > 3 {
        problems.push(format!("{prefix}... {} more sectors", bad - 3));
    }
}

// ---- the whole run ---------------------------------------------------------------------------

/// Run a torture: the fault-free run, then every selected cut point.
pub fn run(cfg: &TortureConfig) -> Result<TortureReport, String> {
    run_with_progress(cfg, &|_, _| {})
}

/// [`run`], calling `progress(done, total)` as cut points finish (from worker threads).
pub fn run_with_progress(
    cfg: &TortureConfig,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<TortureReport, String> {
    let t0 = Instant::now();
    if !(1..=MAX_CHAIN_WITHIN).contains(&cfg.chain_within) {
        return Err(format!(
            "chain-within: {} is not a window of 1 to {MAX_CHAIN_WITHIN} programs/erases after a recovery",
            cfg.chain_within
        ));
    }
    let spec = cfg.test_device();
    spec.validate().map_err(|e| format!("device: {e}"))?;
    // Every worker replays on its own copy of the device in RAM: refuse before the first
    // copy if they cannot all fit (an out-of-memory kill helps nobody).
    let workers = if cfg.threads > 0 {
        cfg.threads
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    };
    let device_bytes = spec.geometry.pages() * spec.geometry.raw_page_size() as u64;
    let need = device_bytes.saturating_mul(workers as u64);
    // What shrinks the run (QA stop 32: --full-device was advised fewer --segments,
    // which it does not take).
    let smaller = if cfg.shrink {
        "fewer --segments or a smaller device"
    } else {
        "a smaller device, or leave out --full-device (the device shrunk to --segments)"
    };
    if let Some(avail) = nand::available_ram().filter(|&a| need > a) {
        return Err(format!(
            "device: {workers} worker(s) × {device_bytes} bytes of device in RAM = {need} bytes, more than the {avail} bytes available; use fewer --threads, {smaller}"
        ));
    }
    // With failures, each of which may retire a segment, the format exports that many
    // segments fewer (unless the configuration sets the capacity): a device left without
    // room by the bad blocks the run itself makes tests nothing.
    // With the failure reserve kept from the start, `failure_reserve` segments fewer too,
    // so that a run whose workload fills the capacity keeps the room the reserve needs and
    // cleans at the raised marks (stop 34 review: without, runs without failures barely
    // differed from the default's).
    let mut fms_cfg = cfg.fms.clone();
    let from_start = if fms_cfg.failure_reserve_from == ReserveFrom::Start {
        fms_cfg.failure_reserve as u64
    } else {
        0
    };
    if cfg.failures + from_start > 0 && fms_cfg.logical_blocks.is_none() {
        let (blocks, slots) =
            Fms::exported_blocks(&spec.geometry, &fms_cfg).map_err(|e| format!("FMS: {e}"))?;
        let spare = cfg.failures.saturating_mul(slots as u64);
        if spare >= blocks {
            return Err(format!(
                "failures: {} failures may retire {} segments of {slots} blocks each, {spare} blocks, and the FMS exports only {blocks} on {} segments, so nothing would be left to write; ask for fewer or raise --segments",
                cfg.failures, cfg.failures, spec.geometry.blocks
            ));
        }
        let spare = spare.saturating_add(from_start.saturating_mul(slots as u64));
        if spare >= blocks {
            return Err(format!(
                "failure_reserve: a reserve of {from_start} segment{} from the start, with {} failures, leaves nothing to write of the {blocks} blocks the FMS exports on {} segments; ask for a smaller reserve or raise --segments",
                if from_start == 1 { "" } else { "s" },
                cfg.failures, spec.geometry.blocks
            ));
        }
        fms_cfg.logical_blocks = Some(blocks - spare);
    }
    let probe = Nand::ram(spec.clone()).map_err(|e| format!("device: {e}"))?;
    let fms = Fms::format(probe, fms_cfg.clone()).map_err(|e| format!("FMS: {e}"))?;
    let sectors = fms.sectors();
    let lay = fms.layout().clone();
    let logical_blocks = fms.logical_blocks();
    // Besides its device, a worker holds the FMS tables twice (the running FMS and the
    // remount after a cut) and the shadow model; the device alone was about 30-40 % short.
    let tables = fms.ram_bytes().saturating_mul(2);
    let shadow = sectors.saturating_mul(std::mem::size_of::<Cell>() as u64);
    drop(fms);
    let per_worker = device_bytes.saturating_add(tables).saturating_add(shadow);
    // Forked cuts (see "Forked cuts" in the module doc) keep two more copies: the running
    // fault-free run's and the fork waiting for a worker.
    let fork = !cfg.replay && cfg.failures == 0;
    let copies = workers as u64 + if fork { 2 } else { 0 };
    let need = per_worker.saturating_mul(copies);
    if let Some(avail) = nand::available_ram().filter(|&a| need > a) {
        return Err(format!(
            "device: {copies} cop(ies) of the run ({workers} worker(s){}) × {per_worker} bytes (device {device_bytes}, FMS tables and their remount {tables}, shadow model {shadow}) = {need} bytes, more than the {avail} bytes available; use fewer --threads, {smaller}",
            if fork { " and 2 for the forks" } else { "" }
        ));
    }
    let spb = (cfg.fms.block_size as usize / SECTOR) as u64;
    // (A trace's workload is as long as the trace, read as it is replayed.)
    if cfg.trace.is_none() {
        let op_bytes = (cfg.ops as u64).saturating_mul(std::mem::size_of::<Op>() as u64);
        nand::table::check_fits(op_bytes, "the workload")
            .map_err(|e| format!("ops: {} operations: {e}", cfg.ops))?;
    }
    let ops = match &cfg.trace {
        Some(t) => trace_workload(t, cfg.seed, sectors, spb, cfg.ops, cfg.flush_every)
            .map_err(|e| format!("trace: {e}"))?,
        None => workload(cfg.seed, sectors, spb, cfg.ops, cfg.fill_writes),
    };
    let next_tag = next_tag(&ops);
    let mut ctx = Ctx {
        spec: spec.clone(),
        cfg: fms_cfg,
        seed: cfg.seed,
        sectors,
        spb,
        next_tag,
        ops,
        fail_ops: Vec::new(),
        bitflip_rate: cfg.bitflip_rate,
        lost_ok: cfg.format,
        chain: cfg.chain,
        chain_within: cfg.chain_within,
    };

    let cannot_run = |r: &RunOutcome| {
        format!(
            "the workload cannot run on this configuration even without power cuts: {}",
            r.problems.join("; ")
        )
    };
    if cfg.failures > 0 && !cfg.format {
        // Count the workload's programs and erases without faults, and fail seeded ones
        // (format cuts fail the format's instead, below).
        let probe = run_one(&ctx, None);
        if probe.workload_failed {
            return Err(cannot_run(&probe));
        }
        let n0 = probe.device_ops;
        ctx.fail_ops = seeded_ops(cfg, n0, "the workload")?;
    }
    let mut failures = Vec::new();
    let base = run_one(&ctx, None);
    if base.workload_failed {
        if cfg.failures == 0 {
            return Err(cannot_run(&base));
        }
        // Bad blocks can leave too little space for the workload: not a violation.
        return Err(format!(
            "the workload cannot run on this configuration with program/erase failures at operations {:?} ({} program and {} erase failure(s) before it stopped), even without power cuts: {}",
            ctx.fail_ops,
            base.program_failures,
            base.erase_failures,
            base.problems.join("; ")
        ));
    }
    let mut violations = 0;
    if !base.problems.is_empty() {
        violations += 1;
        let mut p = base.problems.clone();
        p.extend(base.reads.beyond_ecc());
        failures.push(format!("{FAULT_FREE_RUN}{}", p.join("; ")));
    }
    // Format cuts: the medium the workload left, and a fault-free format of it checked as
    // a cut run is (a failure of either is the fault-free run's, and no cut runs).
    let mut format_mounts = cfg.format.then(FormatMounts::default);
    // With failures, seeded programs/erases of the format report status-fail, in the
    // format without a cut and at every cut point alike (the workload that made the old
    // medium runs without them).
    let mut format_run = None;
    let old = if cfg.format && base.problems.is_empty() {
        let old = format::OldMedium::build(&ctx)?;
        if cfg.failures > 0 {
            ctx.fail_ops = seeded_ops(cfg, old.format_ops, "the format")?;
        }
        let r = format::run_cut(&ctx, &old, None);
        if r.workload_failed {
            return Err(format!(
                "the format cannot complete on this configuration with program/erase failures at its operations {:?}, even without power cuts: {}",
                ctx.fail_ops,
                r.problems.join("; ")
            ));
        }
        if !r.problems.is_empty() {
            violations += 1;
            failures.push(format!(
                "{FAULT_FREE_RUN}the format without a cut: {}",
                r.problems.join("; ")
            ));
        }
        let ok = r.problems.is_empty();
        format_run = Some(r);
        ok.then_some(old)
    } else {
        None
    };
    let ctx = ctx;
    // The cut points: the fault-free run's programs and erases (the format's, with its
    // failures, for format cuts).
    let total_ops = match (&old, &format_run) {
        (Some(_), Some(r)) => r.device_ops,
        _ if cfg.format => 0,
        _ => base.device_ops,
    };
    // The failures the fault-free run saw (the format's, for format cuts).
    let seen = format_run.as_ref().unwrap_or(&base);
    let (program_failures, erase_failures) = (seen.program_failures, seen.erase_failures);

    let cuts: Vec<u64> = match cfg.cuts {
        Cuts::Sample(n) if n < total_ops => {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(cfg.seed ^ 0x005A_3F1E);
            let mut v: Vec<u64> =
                rand::seq::index::sample(&mut rng, total_ops as usize, n as usize)
                    .into_iter()
                    .map(|i| i as u64 + 1)
                    .collect();
            v.sort_unstable();
            v
        }
        Cuts::At(k) if k > total_ops => {
            return Err(format!(
                "cuts: at:{k}, but the workload does only {total_ops} programs and erases"
            ));
        }
        Cuts::At(k) => vec![k],
        _ => (1..=total_ops).collect(),
    };

    let threads = if cfg.threads > 0 {
        cfg.threads
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
    .min(cuts.len().max(1));
    let done = AtomicUsize::new(0);
    let results: Mutex<Vec<(u64, Vec<String>)>> = Mutex::new(Vec::new());
    let recovery: Mutex<RecoveryCounts> = Mutex::new(RecoveryCounts::default());
    let chain_recovery: Mutex<RecoveryCounts> = Mutex::new(RecoveryCounts::default());
    let chained = AtomicUsize::new(0);
    let mount_cuts = AtomicUsize::new(0);
    let chains_full = AtomicUsize::new(0);
    let found: Mutex<FormatMounts> = Mutex::new(FormatMounts::default());
    let reads: Mutex<ReadCounts> = Mutex::new(base.reads.clone());
    // "cut k/n": with failures, also how far the cut fell after the last one before it.
    let label = |k: u64| match ctx.fail_ops.iter().rev().find(|&&j| j < k) {
        Some(&j) => format!(
            "cut {k}/{total_ops} ({} op(s) after the failure at op {j})",
            k - j
        ),
        None => format!("cut {k}/{total_ops}"),
    };
    let total = cuts.len() as u64;
    let finish = |k: u64, mut r: RunOutcome| {
        // The run up to the cut must be the fault-free run's (with failures, the torn
        // content of a failed program differs: the FMS must not depend on it). (A
        // fault-free run that stopped early at a bad read has fewer entries.)
        let ends = r
            .cut_in
            .and_then(|i| Some((i, *base.op_ends.get(i)?, *base.op_ends.get(i + 1)?)));
        if let Some((i, lo, hi)) = ends {
            if !(lo < k && k <= hi) {
                r.problems.insert(0, format!(
                    "the cut fell in workload op {i}, whose programs/erases were {}..={hi} in the fault-free run (the runs are not deterministic)",
                    lo + 1
                ));
            }
        }
        if let Some(m) = &r.recovered {
            recovery.lock().unwrap().add(m);
        }
        if !r.chain_recovered.is_empty() {
            chain_recovery.lock().unwrap().add_any(&r.chain_recovered);
        }
        chained.fetch_add(r.chained_cuts as usize, Ordering::Relaxed);
        mount_cuts.fetch_add(r.mount_cuts as usize, Ordering::Relaxed);
        chains_full.fetch_add(r.chain_full as usize, Ordering::Relaxed);
        if let Some(f) = r.format_found {
            found.lock().unwrap().add(f);
        }
        reads.lock().unwrap().add(&r.reads);
        if !r.problems.is_empty() {
            r.problems.extend(r.reads.beyond_ecc());
            results.lock().unwrap().push((k, r.problems));
        }
        let d = done.fetch_add(1, Ordering::Relaxed) as u64 + 1;
        progress(d, total);
    };
    if let Some(old) = &old {
        run_pool(threads, &cuts, &|k| {
            finish(k, format::run_cut(&ctx, old, Some(k)))
        });
    } else if fork {
        // One thread runs the workload and forks it at the cuts; the workers take the
        // forks (a rendezvous channel: at most one fork waits, so the device copies in
        // RAM are the workers' and two more, as checked above).
        let (tx, rx) = std::sync::mpsc::sync_channel::<Job>(0);
        let rx = Mutex::new(rx);
        let forked = std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| loop {
                    let job = rx.lock().unwrap().recv();
                    match job {
                        Ok(Job::Fork(f)) => {
                            let k = f.cut;
                            finish(k, run_forked(&ctx, *f));
                        }
                        Ok(Job::Replay(k)) => finish(k, run_one(&ctx, Some(k))),
                        Err(_) => break,
                    }
                });
            }
            let r = fork_cuts(&ctx, &cuts, &base.op_ends, |f| {
                tx.send(Job::Fork(Box::new(f))).is_ok()
            });
            if let Ok(rest) = &r {
                for &k in rest {
                    if tx.send(Job::Replay(k)).is_err() {
                        break;
                    }
                }
            }
            drop(tx);
            r
        });
        forked?;
    } else {
        run_pool(threads, &cuts, &|k| finish(k, run_one(&ctx, Some(k))));
    }
    if let Some(m) = &mut format_mounts {
        *m = found.into_inner().unwrap();
    }
    let mut bad = results.into_inner().unwrap();
    bad.sort_by_key(|(k, _)| *k);
    violations += bad.len() as u64;
    for (k, p) in bad {
        failures.push(format!("{}: {}", label(k), p.join("; ")));
    }

    Ok(TortureReport {
        target: if cfg.format { "fms-format" } else { "fms" }.into(),
        device: cfg.device.name.clone(),
        seed: cfg.seed,
        cuts: cfg.cuts.to_string(),
        segments: spec.geometry.blocks,
        pages_per_block: spec.geometry.pages_per_block,
        page_size: spec.geometry.page_size,
        block_size: cfg.fms.block_size,
        record_mode: match lay.mode {
            RecordMode::Header => "header".into(),
            RecordMode::Spare => "spare".into(),
        },
        logical_blocks,
        workload: match &cfg.trace {
            Some(t) => format!("trace:{}", t.path.display()),
            None => "random".into(),
        },
        workload_ops: ctx.ops.len(),
        fill_writes: cfg.fill_writes,
        ops: total_ops,
        cut_points: total,
        chain: cfg.chain,
        chain_within: cfg.chain_within,
        chained_cuts: chained.into_inner() as u64,
        mount_cuts: mount_cuts.into_inner() as u64,
        chains_full: chains_full.into_inner() as u64,
        failures_requested: cfg.failures,
        fail_ops: ctx.fail_ops.clone(),
        program_failures,
        erase_failures,
        violations,
        failures,
        cleanings: base.cleanings,
        erasures: base.erasures,
        blocks_copied: base.blocks_copied,
        wear_swaps: base.wear_swaps,
        index_moves: base.index_moves,
        recovery: recovery.into_inner().unwrap(),
        chain_recovery: (cfg.chain > 0).then(|| chain_recovery.into_inner().unwrap()),
        format_mounts,
        ecc: lay.ecc(),
        ecc_code: ftl::fms::layout::ecc_name(lay.ecc_t),
        live_flag: lay.live.name(lay.mode).to_string(),
        header_code: lay.header_code_t().is_some(),
        segment_summaries: lay.summary_page.is_some(),
        bitflip_rate: cfg.bitflip_rate,
        max_read_retries: cfg.fms.read_retries,
        reads: reads.into_inner().unwrap(),
        elapsed_s: t0.elapsed().as_secs_f64(),
    })
}

/// `cfg.failures` seeded operation indices (1-based, sorted) among the `n` programs and
/// erases of `what`'s fault-free run: the operations that report status-fail.
fn seeded_ops(cfg: &TortureConfig, n: u64, what: &str) -> Result<Vec<u64>, String> {
    if cfg.failures > n {
        return Err(format!(
            "failures: {} requested, but {what} does only {n} programs and erases",
            cfg.failures
        ));
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(cfg.seed ^ 0x0FA1_1ED0_0B5E);
    let mut v: Vec<u64> = rand::seq::index::sample(&mut rng, n as usize, cfg.failures as usize)
        .into_iter()
        .map(|i| i as u64 + 1)
        .collect();
    v.sort_unstable();
    Ok(v)
}

/// Run `job(k)` for every cut point `k` of `cuts` on `threads` threads.
fn run_pool(threads: usize, cuts: &[u64], job: &(dyn Fn(u64) + Sync)) {
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&k) = cuts.get(i) else { break };
                job(k);
            });
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Messages name workload operations in words (QA stop 32: `Trim { lba: 235, count:
    /// 2 }`).
    #[test]
    fn operations_read_as_words() {
        let w = Op::Write {
            lba: 8,
            count: 1,
            tag: 3,
        };
        assert_eq!(w.to_string(), "write of 1 sector at sector 8");
        let t = Op::Trim { lba: 235, count: 2 };
        assert_eq!(t.to_string(), "trim of 2 sectors at sector 235");
        assert_eq!(Op::Flush.to_string(), "flush");
    }

    #[test]
    fn untested_windows_are_named() {
        let mut cfg = TortureConfig::new(DeviceSpec::preset("intel-series2plus-24m").unwrap());
        cfg.ops = 40;
        cfg.cuts = Cuts::Sample(2);
        let r = run(&cfg).unwrap();
        assert!(r.cleanings > 0 && r.blocks_copied > 0, "{r:?}");
        assert_eq!(r.untested(false), Vec::<String>::new());
        let w = r.untested(true);
        assert_eq!(w.len(), (r.wear_swaps == 0) as usize, "{w:?}");
        let idle = TortureReport {
            cleanings: 0,
            blocks_copied: 0,
            wear_swaps: 0,
            ..r.clone()
        };
        let w = idle.untested(true);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("never started the cleaner"), "{w:?}");
        assert!(
            w[0].contains(&format!("about {}", r.logical_blocks)),
            "{w:?}"
        );
        assert!(w[1].contains("wear-levelling"), "{w:?}");
        let empty_only = TortureReport {
            blocks_copied: 0,
            ..r.clone()
        };
        assert!(empty_only.untested(false)[0].contains("nothing valid"));
        // Failures requested, none injected (every index beyond the run's operations).
        let missed = TortureReport {
            failures_requested: 2,
            fail_ops: vec![r.ops + 1, r.ops + 2],
            ..r.clone()
        };
        let w = missed.untested(false);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("none of the 2 requested failures"), "{w:?}");
        let hit = TortureReport {
            program_failures: 1,
            ..missed
        };
        assert!(hit.untested(false).is_empty());
    }

    #[test]
    fn cuts_parse() {
        assert_eq!("every".parse::<Cuts>(), Ok(Cuts::Every));
        assert_eq!("150".parse::<Cuts>(), Ok(Cuts::Sample(150)));
        assert!("0".parse::<Cuts>().is_err());
        assert!("x".parse::<Cuts>().is_err());
        assert_eq!("at:644".parse::<Cuts>(), Ok(Cuts::At(644)));
        assert_eq!(Cuts::At(644).to_string(), "at:644");
        assert!("at:0".parse::<Cuts>().is_err());
        assert!("at:x".parse::<Cuts>().is_err());
    }

    #[test]
    fn content_is_traceable() {
        let mut a = vec![0u8; SECTOR];
        let mut s = vec![0u8; SECTOR];
        sector_content(7, 42, 9, &mut a);
        assert_eq!(classify(7, 9, &a, &mut s), Seen::Tag(42));
        assert_eq!(classify(7, 10, &a, &mut s), Seen::Garbage);
        a[100] ^= 1;
        assert_eq!(classify(7, 9, &a, &mut s), Seen::Garbage);
        assert_eq!(classify(7, 9, &[0u8; SECTOR], &mut s), Seen::Zero);
        sector_content(7, 43 | FILL, 9, &mut a);
        assert!(a.iter().all(|&x| x == 0xFF));
        assert_eq!(classify(7, 9, &a, &mut s), Seen::Ones);
    }

    /// A trace replays after the prefill: its requests in order, mapped into the device,
    /// with fresh tags for writes and a flush after every `flush_every` requests.
    #[test]
    fn a_trace_replays_after_the_prefill() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.fio");
        std::fs::write(
            &path,
            "fio version 3 iolog\n0 /d add\n0 /d open\n0 /d write 0 4096\n1 /d read 4096 1024\n2 /d trim 8192 2048\n3 /d write 1000000000 512\n4 /d write 512 512\n5 /d close\n",
        )
        .unwrap();
        let spec = crate::trace::TraceSpec::new(&path);
        let ops = trace_workload(&spec, 7, 512, 2, 100, 2).unwrap();
        let pre = workload(7, 512, 2, 0, false);
        // The prefill without its last flush, which the trace's first flush replaces.
        let n = pre.len() - 1;
        assert_eq!(format!("{:?}", &ops[..n]), format!("{:?}", &pre[..n]));
        let rest: Vec<String> = ops[n..].iter().map(|o| format!("{o:?}")).collect();
        let first_tag = match ops[n] {
            Op::Write { tag, .. } => tag,
            o => panic!("{o:?}"),
        };
        assert!(first_tag > 0 && first_tag & FILL == 0);
        assert_eq!(rest.len(), 5 + 2 + 1, "{rest:?}");
        assert!(matches!(
            ops[n],
            Op::Write {
                lba: 0,
                count: 8,
                ..
            }
        ));
        assert!(matches!(ops[n + 1], Op::Read { lba: 8, count: 2 }));
        assert!(matches!(ops[n + 2], Op::Flush));
        assert!(matches!(ops[n + 3], Op::Trim { lba: 16, count: 4 }));
        // Mapped into the 512 sectors (modulo, whole blocks).
        match ops[n + 4] {
            Op::Write { lba, count: 1, tag } => {
                assert!(lba < 512);
                assert_eq!(tag, first_tag + 8);
            }
            o => panic!("{o:?}"),
        }
        assert!(matches!(ops[n + 5], Op::Flush));
        assert!(matches!(
            ops[n + 6],
            Op::Write {
                lba: 1,
                count: 1,
                ..
            }
        ));
        assert!(matches!(ops[n + 7], Op::Flush));
        // The limit counts the trace's requests.
        let ops = trace_workload(&spec, 7, 512, 2, 1, 0).unwrap();
        assert_eq!(ops.len(), n + 2);
        // A record split where the space wraps is one request: replayed whole, counted
        // once, no flush inside it.
        std::fs::write(
            &path,
            "fio version 3 iolog\n0 /d add\n0 /d open\n0 /d write 261120 4096\n1 /d write 0 512\n2 /d close\n",
        )
        .unwrap();
        let ops = trace_workload(&spec, 7, 512, 2, 1, 1).unwrap();
        let rest: Vec<String> = ops[n..].iter().map(|o| format!("{o:?}")).collect();
        assert_eq!(rest.len(), 3, "{rest:?}");
        assert!(
            matches!(
                ops[n],
                Op::Write {
                    lba: 510,
                    count: 2,
                    ..
                }
            ),
            "{rest:?}"
        );
        assert!(
            matches!(
                ops[n + 1],
                Op::Write {
                    lba: 0,
                    count: 6,
                    ..
                }
            ),
            "{rest:?}"
        );
        assert!(matches!(ops[n + 2], Op::Flush));
        // An empty trace is an error.
        std::fs::write(&path, "fio version 3 iolog\n").unwrap();
        let e = trace_workload(&spec, 7, 512, 2, 100, 8).unwrap_err();
        assert!(e.contains("no request"), "{e}");
    }

    #[test]
    fn fill_writes_are_checked() {
        // A sector last written with 0xFF must read 0xFF (an FMS that takes it for a
        // half-erased slot and returns zeros is caught), and 0xFF where only traceable
        // data was written is a violation.
        let mut m = Model::new(2, 1);
        m.start(&Op::Write {
            lba: 0,
            count: 2,
            tag: 5 | FILL,
        });
        m.flushed();
        assert!(m.check(0, Seen::Ones).is_none());
        assert!(m.check(1, Seen::Ones).is_none());
        assert!(m.check(0, Seen::Zero).is_some(), "fill read as zeros");
        m.start(&Op::Write {
            lba: 1,
            count: 1,
            tag: 7,
        });
        m.flushed();
        assert!(m.check(1, Seen::Ones).is_some(), "0xFF for traceable data");
        assert!(m.check(1, Seen::Tag(7)).is_none());
        let w = workload(1, 512, 2, 300, true);
        let fills = w
            .iter()
            .filter(|o| matches!(o, Op::Write { tag, .. } if tag & FILL != 0))
            .count();
        assert!(fills > 10, "{fills} fill writes");
    }

    #[test]
    fn model_rules() {
        let mut m = Model::new(4, 1);
        m.start(&Op::Write {
            lba: 0,
            count: 1,
            tag: 5,
        });
        m.flushed();
        assert!(m.check(0, Seen::Tag(5)).is_none());
        assert!(m.check(0, Seen::Zero).is_some(), "flushed data lost");
        m.start(&Op::Write {
            lba: 0,
            count: 1,
            tag: 6,
        });
        assert!(m.check(0, Seen::Tag(5)).is_none());
        assert!(m.check(0, Seen::Tag(6)).is_none());
        assert!(m.check(0, Seen::Tag(4)).is_some());
        m.start(&Op::Trim { lba: 0, count: 1 });
        // Not flushed yet: the trim may or may not have reached the medium.
        assert!(m.check(0, Seen::Zero).is_none());
        assert!(m.check(0, Seen::Tag(5)).is_none());
        m.flushed();
        assert!(m.check(0, Seen::Zero).is_none());
        assert!(
            m.check(0, Seen::Tag(5)).is_some(),
            "a flushed trim is durable"
        );
        assert!(m.check(0, Seen::Garbage).is_some());
    }

    /// A flush settles exactly the cells written since the last one (it visits only
    /// those: a full-device model has millions of cells), also after a recovery's settle.
    #[test]
    fn flush_settles_the_cells_written_since_the_last_one() {
        let mut m = Model::new(1 << 20, 1);
        let w = |lba, tag| Op::Write { lba, count: 2, tag };
        m.start(&w(10, 1));
        m.start(&w(11, 3));
        m.start(&w(500_000, 5));
        assert_eq!(
            m.dirty,
            vec![10, 11, 12, 500_000, 500_001],
            "one entry per cell"
        );
        m.flushed();
        assert!(m.dirty.is_empty());
        for (lba, tag) in [(10, 1), (11, 3), (12, 4), (500_000, 5), (500_001, 6)] {
            assert!(m.check(lba, Seen::Tag(tag)).is_none(), "sector {lba}");
            assert!(m.check(lba, Seen::Zero).is_some(), "sector {lba}");
            assert!(m.cells[lba as usize].since.is_empty(), "sector {lba}");
        }
        assert!(m.check(13, Seen::Zero).is_none());
        m.start(&w(12, 7));
        let mut seen = vec![Seen::Zero; 1 << 20];
        seen[10] = Seen::Tag(1);
        m.settle(&seen);
        assert!(m.dirty.is_empty());
        assert!(
            m.check(12, Seen::Zero).is_none(),
            "settled to what was read"
        );
        m.start(&w(20, 9));
        m.flushed();
        assert!(m.check(20, Seen::Tag(9)).is_none());
        assert!(m.check(21, Seen::Tag(10)).is_none());
        assert!(m.check(10, Seen::Tag(1)).is_none());
    }

    #[test]
    fn small_devices() {
        let intel = DeviceSpec::preset("intel-series2plus-24m").unwrap();
        assert_eq!(default_block_size(&intel), 4096);
        let d = small_device(&intel, 12, 4096);
        assert_eq!((d.geometry.blocks, d.geometry.pages_per_block), (12, 8));
        d.validate().unwrap();
        let ns = DeviceSpec::preset("nandsim-256m").unwrap();
        assert_eq!(default_block_size(&ns), 1024);
        assert_eq!(small_device(&ns, 16, 1024).geometry.pages_per_block, 32);
        let mlc = DeviceSpec::preset("mlc2-2g").unwrap();
        assert_eq!(default_block_size(&mlc), 2048);
        let d = small_device(&mlc, 16, 2048);
        assert_eq!(d.geometry.pages_per_block, 16);
        assert!(d.geometry.in_order);
    }
}
