//! The Flash Memory Server (Chiang & Chang 1999; Chiang, Lee & Chang, DAC) as a
//! [`BlockDevice`] over raw flash.
//!
//! Logical blocks of a fixed size (1 KiB, 4 KiB, …) are never updated in place: each write
//! goes to the next free slot of an *active segment*, the old copy is marked obsolete, and a
//! cleaner reclaims segments when free segments fall below a low-water mark (until they
//! reach a high-water mark), one segment at a time: pick a victim (greedy, cost-benefit,
//! CAT, adaptive), copy its valid blocks out (M1–M6 or DAC regions), erase it, write its
//! header and queue it free. RAM tables (translation table, segment lookup table, region
//! and active-segment tables) are rebuilt from flash at mount. See `docs/fms.md` for the
//! design and `docs/format/fms.md` for the bytes.
//!
//! Storage mode (real payloads) and simulation mode (payload-less device, `None` buffers)
//! run this same code.

pub mod adaptive;
mod clean;
pub mod dac;
mod faults;
pub mod hot;
mod index_log;
pub mod layout;
mod lost;
mod mount;
mod ram;
pub mod redistribute;
mod segsum;
pub mod select;
mod summary;
mod trims;

use std::collections::VecDeque;

use nand::blockdev::{check_request, BlockDevice, DevError, DevResult, SECTOR};
use nand::{BadState, Data, Nand, NandError};
use serde::Serialize;

use adaptive::Adaptive;
use dac::{AgeRule, Dac, RegionLoad, RegionSelect};
use hot::HotDegree;
use layout::{IndexEntry, Layout, Record, RecordMode, SegHeader, ENTRY, SEG_HEADER};
use redistribute::{Averages, M4Average, Moving, Redistribution};
use select::{AgeTransform, CbAge, Policy, SegView, SelectCtx, Selector};
use summary::{TableSums, WearIndex};

use index_log::IndexLog;
pub use lost::Hold;
pub use mount::{MountReport, SlotRecord};
pub use ram::RamEstimate;
use ram::Sizing;

const NONE: u32 = u32::MAX;

/// Every knob of the FMS. `Default` gives the paper's FMS with CAT and M6.
#[derive(Clone, Debug, Serialize)]
pub struct FmsConfig {
    /// Logical block size in bytes (power of two ≥ 512).
    pub block_size: u32,
    pub policy: Policy,
    /// Used when `regions == 1`.
    pub redistribution: Redistribution,
    /// DAC regions (1–8). More than one replaces M1–M6 by DAC clustering.
    pub regions: u8,
    /// DAC time threshold for promotion/demotion (device time, picoseconds).
    pub region_threshold_ps: Option<u64>,
    /// DAC: how the cleaner picks the region to clean.
    pub region_select: RegionSelect,
    /// DAC: what "young to its region" compares with at an update (promotion).
    pub promotion: AgeRule,
    /// DAC: what "old to its region" compares with at a cleaning (demotion).
    pub demotion: AgeRule,
    /// Place blocks marked read-only in their own segments.
    pub readonly_separation: bool,
    /// Clean when free segments < low water … until ≥ high water.
    pub low_water: u32,
    pub high_water: u32,
    /// Free segments the cleaner keeps beyond both water marks once an erase block of the
    /// medium has gone bad in use (grown bad; or from the start, `failure_reserve_from`):
    /// while the good segments hold that many beyond the format's reserve and what the
    /// valid blocks fill, else one while they hold one ([`Fms::water_marks`],
    /// `Fms::reserve_room`). A program that fails takes the rest of its
    /// segment with it; a cleaning starts with `low_water - 1` free segments (one, by
    /// default), so one failure in it is absorbed and a second, back to back, could leave
    /// every segment full with nothing erased to move a block into (QA seed 346470). By
    /// default media that never fail run exactly as the paper's marks say. Default 1; 0
    /// keeps the marks as they are (the behaviour before stop 33).
    pub failure_reserve: u32,
    /// When the failure reserve applies: from the medium's first block gone bad in use
    /// (the default; media that never fail run at the paper's marks) or from the start
    /// (UBI's reserve of erase blocks for bad-block handling is kept from the start too):
    /// two program failures close together on a medium that had never failed then find
    /// the extra free segment too, at the price of cleaning one segment earlier all along
    /// ([`ReserveFrom`]).
    pub failure_reserve_from: ReserveFrom,
    /// Swap the most- and least-erased segments' roles when their erase counts differ by
    /// more than this.
    pub wear_threshold: Option<u32>,
    /// Hot-degree half-life in user writes (default: half the logical blocks).
    pub hot_half_life: Option<f64>,
    pub cat_age: AgeTransform,
    /// What the cost-benefit age is measured from.
    pub cb_age: CbAge,
    /// What M4's average utilisation is taken over ([`redistribute::M4Average`]).
    pub m4_average: M4Average,
    /// Adaptive: minimum writes per analysis window (default: logical blocks / 4).
    pub adaptive_window: Option<u64>,
    /// Adaptive: variance ratio above which access is non-uniform.
    pub adaptive_threshold: f64,
    /// Exported logical blocks (default: all data slots less a reserve of
    /// `high_water + streams` segments).
    pub logical_blocks: Option<u64>,
    /// Format only: every data page carries a SEC-DED code of its data in its spare area
    /// (spare mode; `docs/fms.md`, "Bit flips and ECC"). A mount takes it from the medium.
    pub ecc: bool,
    /// Format only, with `ecc`: the bits the code corrects per 512 bytes: 1 is the SEC-DED
    /// code (3 code bytes a chunk; the only one before stop 21), 2..=8 a BCH code
    /// (`nand::bch`, ceil(13·t / 8) bytes a chunk; 4 is what 2 Gb MLC parts ask). The
    /// spare area must hold 16 bytes and the codes of a page. A mount takes it from the
    /// medium. Default 1.
    pub ecc_strength: u8,
    /// Format only, header mode: carry each entry's live state in seven bits of its flags
    /// byte, read by majority, so that a bit flipped for good there changes nothing
    /// (`layout::FEATURE_LIVE_BYTE`, `docs/format/fms.md`, "Header-mode entry"). `false`
    /// formats the encoding of media from before the feature (bit 0 alone), which flashkit
    /// builds without it still mount: for tests of old media. A mount takes it from the
    /// medium; spare mode has no live flag and ignores it. Default `true`.
    pub live_byte: bool,
    /// Format only, spare mode with ECC: segment headers carry the medium's code over
    /// their page's first 512 bytes, so that mount corrects up to the code's strength in
    /// a header's bits (`layout::FEATURE_HEADER_CODE`, `docs/format/fms.md`, "Segment
    /// header"). `false` formats headers without it, as media from before the feature,
    /// which flashkit builds without it still mount: for tests of old media. A mount takes
    /// it from the medium. Default `true`.
    pub header_code: bool,
    /// Spare mode: write a segment summary after a segment's last slot, a copy of its
    /// slots' records, so that mount reads one page for a full segment instead of every
    /// slot's spare area (`layout::FEATURE_SUMMARY`, `docs/format/fms.md`, "Segment
    /// summary"), when the pages past the last slot hold it (`Layout::summary_page`).
    /// Format: whether the medium has them (`false` formats media as before the
    /// feature). Mount: whether to read them (`false` reads every record, as a medium
    /// without them is read; a medium that has them still gets them written). Default
    /// `true`.
    pub segment_summaries: bool,
    /// Format only, spare mode: a mount corrects a spare record one bit from valid that a
    /// later slot's decoding record follows (a bit flipped for good in a record written
    /// whole), and closes a data segment whose tail (records after the last valid one) holds
    /// a record one or two bits from valid, so that nothing is ever written after one
    /// (`layout::FEATURE_RECORD_CORRECTION`,
    /// `docs/format/fms.md`, Mount, step 2). `false` formats media as before the feature,
    /// whose mounts write on after such a record and correct no record (they report it).
    /// A mount takes it from the medium. Default `true`.
    pub record_correction: bool,
    /// Format only, spare mode: a mount judges a slot with no record before it in its
    /// segment (a free segment's slot 0) by its first page, not all of them
    /// (`layout::FEATURE_FIRST_PAGE`; a fresh `nandsim-256m` mounts in 2.7 s of device
    /// time instead of 9.1 s). `false` formats media as before the feature. A mount takes
    /// it from the medium. Default `true`.
    pub first_page_test: bool,
    /// Reads of a structure that fails its checksum or its ECC, after the first, before it
    /// counts as torn or the read fails (the model's bit flips are transient, as read
    /// disturb and most real flips are): 2 by default.
    pub read_retries: u8,
    /// When the index log wraps and its segment has been erased more than this many times
    /// beyond the segment at the head of the free list, the log moves there instead of
    /// erasing its own segment in place, and the old one becomes a free segment
    /// (`index_log.rs`, `Fms::wrap_index`). The papers leave the index segment's wear
    /// open; erased at every wrap, it wore far ahead of every other segment on NAND
    /// devices, where a cycle holds one entry per page (NOP 1: 127 entries on `mlc2-2g`),
    /// and it dominated `wear_max` and `wear_stddev`. With wear levelling
    /// (`wear_threshold`) the smaller of the two applies. `None`: always wrap in place
    /// (before stop 20). Default: 8.
    pub index_wear_gap: Option<u32>,
    /// Storage mode with ECC: a block whose read corrected at least this many bits in one
    /// 512-byte chunk is moved (rewritten with fresh codes, as the cleaner moves blocks)
    /// at the next flush, before more flips add up past the code ([`FmsStats::scrubbed`]).
    /// `None` (the default): three quarters of the code's strength, rounded up, as MTD's
    /// `bitflip_threshold` has it (1 for SEC-DED, 3 for BCH-4); `Some(0)`: never.
    pub scrub_threshold: Option<u8>,
}

/// The flips in one 512-byte chunk from which a read is beyond a code of strength `t`
/// (`Nand::set_overflip_at`): 3 for SEC-DED (and without a code), whose two flips are
/// detected; t + 1 for BCH, which may miscorrect from there.
pub(crate) fn overflip_at(t: u8) -> u32 {
    if t <= 1 {
        3
    } else {
        t as u32 + 1
    }
}

impl Default for FmsConfig {
    fn default() -> Self {
        FmsConfig {
            block_size: 4096,
            policy: Policy::Cat,
            redistribution: Redistribution::M6,
            regions: 1,
            region_threshold_ps: None,
            region_select: RegionSelect::All,
            promotion: AgeRule::Threshold,
            demotion: AgeRule::Threshold,
            readonly_separation: true,
            low_water: 2,
            high_water: 3,
            failure_reserve: 1,
            failure_reserve_from: ReserveFrom::FirstFailure,
            wear_threshold: None,
            hot_half_life: None,
            cat_age: AgeTransform::Saturating,
            // The segment's write time: see select/cost_benefit.rs for why.
            cb_age: CbAge::Written,
            m4_average: M4Average::Device,
            adaptive_window: None,
            adaptive_threshold: 1.5,
            logical_blocks: None,
            ecc: false,
            ecc_strength: 1,
            live_byte: true,
            header_code: true,
            segment_summaries: true,
            record_correction: true,
            first_page_test: true,
            scrub_threshold: None,
            read_retries: 2,
            index_wear_gap: Some(8),
        }
    }
}

/// How many times more often the FMS re-reads its own small structures than data (see
/// [`FmsConfig::meta_read_retries`]).
pub const META_RETRY_FACTOR: u32 = 4;

impl FmsConfig {
    /// Re-reads of a segment header, spare record, header-mode entry, index entry or
    /// trim list that fails its checksum, and of a page or slot checked for erased, before
    /// it counts as torn (or programmed): [`FmsConfig::read_retries`] ×
    /// [`META_RETRY_FACTOR`], 8 by default. They are small (15 to 64 bytes, a spare
    /// read each) and read at mount, and what a failed read costs is larger than a
    /// data read's: a header that stays unreadable makes its segment dirty (its blocks
    /// read older copies, and the segment is erased before reuse), a record its block's
    /// newest copy. With flips independent from read to read, at 1e-4 raw bit errors a
    /// 64-byte header fails one read in 20 and three reads in 8 000 — about one segment
    /// per mount of a full `mlc2-2g` — and nine reads in 5·10¹¹ (stop 22; until then
    /// metadata had the data's two re-reads).
    pub fn meta_read_retries(&self) -> u32 {
        self.read_retries as u32 * META_RETRY_FACTOR
    }

    pub fn validate(&self) -> DevResult<()> {
        let bad = |m: &str| Err(DevError::config(m.to_string()));
        if !(1..=8).contains(&self.regions) {
            return bad("regions: must be 1..8");
        }
        // The least marks the cleaner works with (`Fms::water_marks`); lower ones were
        // raised to these silently until stop 25, and the reserve of a format counted the
        // configured high mark, not the one used.
        if self.low_water < 2 {
            return Err(DevError::config(format!(
                "low_water: {} must be at least 2 (a user write must leave a free segment for the cleaner to copy into)",
                self.low_water
            )));
        }
        if self.high_water <= self.low_water {
            return Err(DevError::config(format!(
                "high_water: {} must be above low_water ({}; a cleaning frees at least one segment)",
                self.high_water, self.low_water
            )));
        }
        if self.adaptive_threshold.is_nan() || self.adaptive_threshold <= 0.0 {
            return bad("adaptive_threshold: must be > 0");
        }
        if self.hot_half_life.is_some_and(|h| h.is_nan() || h <= 0.0) {
            return bad("hot_half_life: must be > 0");
        }
        if !(1..=nand::ecc::MAX_STRENGTH).contains(&self.ecc_strength) {
            return bad(&format!(
                "ecc_strength: {} bits per 512 bytes; must be 1 (SEC-DED) to {} (BCH)",
                self.ecc_strength,
                nand::ecc::MAX_STRENGTH
            ));
        }
        Ok(())
    }

    /// Name of the redistribution in effect ("dac" with more than one region).
    pub fn redistribution_name(&self) -> &'static str {
        if self.regions > 1 {
            "dac"
        } else {
            self.redistribution.name()
        }
    }

    /// Segments kept out of the exported capacity: the index, the cleaner's high-water
    /// mark of free segments, and one active segment per stream.
    pub fn reserve_segments(&self) -> u64 {
        1 + self.high_water as u64 + self.streams() as u64
    }

    /// Number of write streams (active segments).
    pub fn streams(&self) -> usize {
        let data = if self.regions > 1 {
            self.regions as usize
        } else if self.redistribution.separates() {
            2
        } else {
            1
        };
        data + self.readonly_separation as usize
    }
}

/// When the failure reserve applies ([`FmsConfig::failure_reserve_from`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReserveFrom {
    /// Once an erase block of the medium has gone bad in use (grown bad). The default.
    FirstFailure,
    /// From the format on, on every medium with room for it.
    Start,
}

impl ReserveFrom {
    pub const ALL: [ReserveFrom; 2] = [ReserveFrom::FirstFailure, ReserveFrom::Start];
    pub fn name(self) -> &'static str {
        match self {
            ReserveFrom::FirstFailure => "first-failure",
            ReserveFrom::Start => "start",
        }
    }
}

impl std::str::FromStr for ReserveFrom {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse_named(
            s,
            &ReserveFrom::ALL,
            ReserveFrom::name,
            "start of the failure reserve",
        )
    }
}

impl std::fmt::Display for ReserveFrom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Where the failure reserve stands ([`FmsConfig::failure_reserve`],
/// [`Fms::failure_reserve`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureReserve {
    /// `failure_reserve` is 0.
    Off,
    /// The good segments hold no room for it beside the format's reserve and the
    /// segments the valid blocks fill (after one more goes bad, when none has yet).
    NoRoom,
    /// No block has gone bad in use yet, and there would be room for at least a segment
    /// of it after one: the configured marks (never with [`ReserveFrom::Start`]).
    Ready,
    /// A block has gone bad in use (or the reserve applies from the start) and there is
    /// room: the marks are raised by the reserve, or by one segment where it does not fit
    /// whole.
    Engaged,
}

impl FailureReserve {
    pub fn name(self) -> &'static str {
        match self {
            FailureReserve::Off => "off",
            FailureReserve::NoRoom => "no-room",
            FailureReserve::Ready => "ready",
            FailureReserve::Engaged => "engaged",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum SegState {
    /// Erased, header written, waiting in the free list.
    Free,
    /// Being written by a stream.
    Active,
    /// Closed, holds data; a cleaning candidate.
    Used,
    /// The index segment.
    Index,
    /// Retired.
    Bad,
    /// Content unknown (torn erase or header): erased before use.
    Dirty,
}

/// What is known of a segment's slots from `next` on, which a write would program.
///
/// A power cut in an erase keeps a random subset of the segment's pages (a torn erase,
/// `nand::TornMode::Partial`): when the header page is among them, mount sees a valid
/// header and reads the records up to the first unwritten slot (`mount::slot_unwritten`),
/// and cannot tell the old pages further on from erased ones without reading every
/// remaining slot of every open and free segment, which would make every mount read the
/// medium's free space. Instead,
/// mount marks those tails [`Tail::Unchecked`] and the FMS reads a tail just before it
/// first writes into it (`Fms::check_tail`). What it does on finding old pages there is
/// what a later mount rebuilds without reading them: a free segment is erased again (with
/// its header, as after any erase); an active one is closed where it is and its stream
/// moves to a new segment, whose index entry makes a mount close it too; a closed one is
/// not reopened. The simulator never mounts before writing, so it never reads a tail.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Tail {
    /// Erased by this FMS, or read and found erased.
    Erased,
    /// Found by mount; not read yet.
    Unchecked,
    /// Found by mount on a device whose pages are programmed in order: the slot at `next`
    /// was partly programmed without its record (a power cut), and a page cannot be
    /// skipped. It is padded before the first write (`Fms::pad_torn_slot`); the slots
    /// after it are then read as for [`Tail::Unchecked`].
    Torn,
    /// Read: holds pages a torn erase kept. Never written into.
    Garbage,
}

/// One row of the segment lookup table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Seg {
    pub erase_count: u32,
    pub valid: u32,
    /// First free slot.
    pub next: u32,
    pub state: SegState,
    pub stream: u8,
    /// Counted in `Fms::data_segs` (holds data: closed or active) when last synced.
    data: bool,
    /// Whether the slots from `next` on are known to be erased (in the padding before
    /// `created_ps`: the row stays 32 bytes).
    pub tail: Tail,
    pub created_ps: u64,
    pub last_inval_ps: u64,
}

impl Seg {
    /// A cleaning candidate: closed, with at least one slot of garbage (what every victim
    /// lookup, index and scan row takes in).
    #[inline(always)]
    pub fn candidate(&self, slots: u32) -> bool {
        self.state == SegState::Used && self.valid < slots
    }

    /// What a selection policy sees of this row, in a segment of `slots` slots.
    pub fn view(&self, slots: u32) -> SegView {
        SegView {
            valid: self.valid,
            slots,
            erase_count: self.erase_count,
            created_ps: self.created_ps,
            last_inval_ps: self.last_inval_ps,
        }
    }
}

/// Counters of what the FMS did.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct FmsStats {
    pub user_writes: u64,
    pub user_reads: u64,
    pub blocks_copied: u64,
    pub erasures: u64,
    pub cleanings: u64,
    pub wear_swaps: u64,
    pub obsolete_marks: u64,
    pub index_appends: u64,
    /// Times the index log moved to another segment instead of wrapping in place (with
    /// retired segments, or worn ahead of the free ones: [`FmsConfig::index_wear_gap`]).
    pub index_moves: u64,
    pub trims: u64,
    /// Segments whose erase block went bad under this FMS (a failed program, erase or
    /// header, the index segment included), each once.
    pub retired_segments: u64,
    /// Good segments closed before they were full because a program met what a torn
    /// operation left there (reused after their next cleaning).
    pub closed_early: u64,
    /// Cleaned blocks placed in another stream's segment because free segments ran low.
    pub borrowed_slots: u64,
    /// Spare mode: trim-list slots programmed by trims (those the cleaner rewrites count
    /// in `blocks_copied`).
    pub trim_lists: u64,
    /// ECC (storage mode): bits the codes corrected in data reads.
    pub ecc_corrected_bits: u64,
    /// Reads made again because what came back failed its ECC (data) or its checksum
    /// (headers, records, index entries, trim lists), or a page read not quite erased.
    pub read_retries: u64,
    /// Blocks the cleaner (or a wear swap, or a retirement) copied although it could not
    /// read them: their uncorrectable chunks and codes copied as they were
    /// (`Fms::read_unreadable`).
    pub unreadable_copies: u64,
    /// Data reads that failed with `Uncorrectable` after every retry.
    pub uncorrectable_reads: u64,
    /// Blocks moved because a read corrected as many bits in one chunk as
    /// `FmsConfig::scrub_threshold` says (scrubbing).
    pub scrubbed: u64,
}

impl FmsStats {
    /// Blocks programmed: user writes, the cleaner's (and wear levelling's) copies,
    /// scrubbing's moves (storage mode only) and trim-list slots (the contract's
    /// `flash_writes`).
    pub fn flash_writes(&self) -> u64 {
        self.user_writes + self.blocks_copied + self.scrubbed + self.trim_lists
    }
}

/// The Flash Memory Server.
pub struct Fms {
    nand: Nand,
    cfg: FmsConfig,
    lay: Layout,
    logical: u64,
    /// Translation table: a row per logical block.
    blocks: Vec<BlockRow>,
    cleaning: bool,
    /// The water marks the cleaner works to: the configured ones, raised by
    /// `FmsConfig::failure_reserve` once the medium has failed, or from the start
    /// ([`Fms::update_marks`]).
    marks: (usize, usize),
    // Reverse map, per physical slot.
    rev: Vec<u32>,
    /// Bits of a physical slot number that hold the slot (see `new_empty`).
    slot_bits: u32,
    // Segment lookup table.
    segs: Vec<Seg>,
    free: VecDeque<u32>,
    active: Vec<u32>,
    index: Option<IndexLog>,
    seq: u64,
    erase_seq: u64,
    selector: select::AnySelector,
    adaptive: Option<Adaptive>,
    dac: Dac,
    hot: HotDegree,
    /// Closed segments by valid count (greedy and adaptive only): greedy's victim without
    /// a scan of the segment table.
    used: Option<select::UsedIndex>,
    /// Every segment's valid count as a key (greedy, on devices too small for `used`):
    /// greedy's victim by a vectorised minimum.
    keys: Option<select::ValidKeys>,
    /// Closed segments by group and age (cost-benefit, CAT and adaptive's CAT choices):
    /// their victim without scoring every segment.
    aged: Option<select::AgedIndex>,
    /// Cost-benefit's or CAT's [`select::Row`] of every segment, on devices too small for
    /// `aged`: a scan rules most segments out with it instead of scoring them.
    rows: Option<Vec<select::Row>>,
    /// DAC region selection's sums over the table, on devices with many segments.
    sums: Option<TableSums>,
    /// Wear levelling's least-erased segment holding data, on devices with many segments.
    wear: Option<WearIndex>,
    /// Whether any of `used`, `aged`, `sums`, `wear` is kept: the one test at every table
    /// change without one.
    indexed: bool,
    /// Whether `hot` is kept (M3 or M6 without DAC regions); empty otherwise.
    keeps_hot: bool,
    update_sum: u64,
    mapped: u64,
    /// Segments holding data (closed or active), kept by `sync_used`: with `mapped` (the
    /// valid blocks, all of which sit in such segments), M4's average utilisation without
    /// a scan of the table.
    data_segs: u64,
    write_clock: u64,
    stats: FmsStats,
    buf: Vec<u8>,
    /// Scratch: one page with its spare area (ECC reads).
    page_buf: Vec<u8>,
    moving: Vec<Moving>,
    /// Scratch for the cleaner: a run's entries.
    entries: Vec<u8>,
    /// Segments whose erase block went bad (a failed program, or a failed erase of a data
    /// segment): their valid blocks move out and, in header mode, the index log records
    /// them retired, at the end of the operation ([`Fms::evacuate_retired`]).
    retiring: Vec<u32>,
    /// Header mode: the grown-bad segments the index log records as retired (rewritten
    /// when the log wraps), whose records mount must not read.
    retired: Vec<u32>,
    /// The number every segment header of this format carries ([`SegHeader::format_id`]).
    format_id: u64,
    /// The index log is missing, or could not move (no free segment), so entries have
    /// been dropped since: it is rewritten at the end of the operation ([`Fms::repair`]).
    index_stale: bool,
    /// Mount found the log: its pages after the next entry's are checked at the first
    /// entry appended ([`Fms::index_tail_programmed`]).
    index_tail_unchecked: bool,
    /// The segment being emptied while the cleaner (or a wear swap, or a retirement) moves
    /// its blocks, `NONE` otherwise.
    victim: u32,
    /// Scratch for a run's batched device operations in simulation mode: its reads and
    /// its data programs ([`Fms::copy_run_batched`]).
    spans: (Vec<nand::Span>, Vec<nand::Span>),
    /// The same run's read pages when slots are whole pages.
    read_pages: Vec<u64>,
    /// Spare mode: a run's spare bytes and where each page's end
    /// ([`Fms::copy_run_spare`]).
    spare_run: (Vec<u8>, Vec<u32>),
    /// Spare mode: tombstones of trimmed blocks and the trim lists holding them
    /// (`trims.rs`).
    trims: trims::Trims,
    /// What the mount that made this FMS found to repair or skip (zero after a format).
    mount_report: MountReport,
    /// Where this FMS's session time starts on the device clock: 0 after a format; after a
    /// mount, the clock when the mount began plus the jump to the medium's newest time. The
    /// write clock (`write_clock`) counts the session's writes, so the age unit
    /// (`Fms::age_unit`: device time per device-write) reads the session's time, the mount's
    /// reads included, not the time restored from the medium.
    epoch_ps: u64,
    /// The device time of the mount that made this FMS and the newest time it found on
    /// the medium ([`Fms::mount_time_ps`], [`Fms::medium_time_ps`]; zero after a format).
    mount_ps: u64,
    medium_ps: u64,
    /// DAC with [`AgeRule::RegionAverage`]: each region's average stamp, taken at the start
    /// of the last cleaning (zeros before the first).
    dac_means: Box<[u64; 8]>,
    /// ECC codes to program instead of computing them, one page's after another: set
    /// while the cleaner copies a block it cannot read ([`Fms::read_unreadable`]), so the
    /// copy keeps the source's codes and stays uncorrectable where the source was.
    ecc_override: Option<Vec<u8>>,
    /// Blocks to scrub at the next flush: (logical block, the copy whose read found the
    /// flips). A block written or moved since is left alone.
    scrub: Vec<(u32, u32)>,
    /// Media with segment summaries: what writing them needs (`segsum.rs`); boxed, and
    /// `None` on other media, so that the FMS's own row stays as it was for the simulator's
    /// header-mode runs.
    segsum: Option<Box<segsum::Summaries>>,
    /// Blocks a mount named lost and not written or trimmed since, and the segments held
    /// back from reuse for them (`lost.rs`); `None` when there are none.
    lost: Option<Box<lost::Lost>>,
}

impl Fms {
    /// An independent copy of this FMS and its device, for branching its history
    /// (`flashkit torture` forks the running FMS at each cut point instead of replaying
    /// the workload up to it), or `None` when the device's store cannot be copied (an
    /// image file). Every field is listed, so a new one does not compile until it is
    /// copied here too.
    pub fn try_clone(&self) -> Option<Fms> {
        Some(Fms {
            nand: self.nand.try_clone()?,
            cfg: self.cfg.clone(),
            lay: self.lay.clone(),
            logical: self.logical,
            blocks: self.blocks.clone(),
            cleaning: self.cleaning,
            marks: self.marks,
            rev: self.rev.clone(),
            slot_bits: self.slot_bits,
            segs: self.segs.clone(),
            free: self.free.clone(),
            active: self.active.clone(),
            index: self.index.clone(),
            seq: self.seq,
            erase_seq: self.erase_seq,
            selector: self.selector.clone(),
            adaptive: self.adaptive.clone(),
            dac: self.dac,
            hot: self.hot.clone(),
            used: self.used.clone(),
            keys: self.keys.clone(),
            aged: self.aged.clone(),
            rows: self.rows.clone(),
            sums: self.sums.clone(),
            wear: self.wear.clone(),
            indexed: self.indexed,
            keeps_hot: self.keeps_hot,
            update_sum: self.update_sum,
            mapped: self.mapped,
            data_segs: self.data_segs,
            write_clock: self.write_clock,
            stats: self.stats.clone(),
            buf: self.buf.clone(),
            page_buf: self.page_buf.clone(),
            moving: self.moving.clone(),
            entries: self.entries.clone(),
            retiring: self.retiring.clone(),
            retired: self.retired.clone(),
            format_id: self.format_id,
            index_stale: self.index_stale,
            index_tail_unchecked: self.index_tail_unchecked,
            victim: self.victim,
            spans: self.spans.clone(),
            read_pages: self.read_pages.clone(),
            spare_run: self.spare_run.clone(),
            trims: self.trims.clone(),
            mount_report: self.mount_report.clone(),
            epoch_ps: self.epoch_ps,
            mount_ps: self.mount_ps,
            medium_ps: self.medium_ps,
            dac_means: self.dac_means.clone(),
            ecc_override: self.ecc_override.clone(),
            scrub: self.scrub.clone(),
            segsum: self.segsum.clone(),
            lost: self.lost.clone(),
        })
    }

    // ---- construction --------------------------------------------------------------------

    /// The logical blocks `format` exports on a device of `geo` whose segments are all
    /// good (without `logical_blocks` set), and the data slots per segment: what a caller
    /// can check before allocating any table.
    pub fn exported_blocks(geo: &nand::Geometry, cfg: &FmsConfig) -> DevResult<(u64, u32)> {
        cfg.validate()?;
        let lay = Layout::new(geo, cfg.block_size)?;
        ram::check_index_room(&lay, cfg)?;
        let data = (lay.segments as u64).saturating_sub(cfg.reserve_segments());
        Ok((data * lay.slots as u64, lay.slots))
    }

    /// Empty tables for `nand`. `recorded`: the medium's own capacity (mount), which the
    /// reserve does not limit, taken when the configuration sets no `logical_blocks` or
    /// the same.
    fn new_empty(nand: Nand, cfg: FmsConfig, recorded: Option<u64>) -> DevResult<Fms> {
        // The per-block tables of a device too large for this machine are an error.
        fn table<T: Clone>(n: usize, fill: T, what: &str) -> DevResult<Vec<T>> {
            nand::table(n as u64, fill, what)
                .map_err(|e| DevError::config(format!("device too large for the FMS here: {e}")))
        }
        let good = (0..nand.geometry().blocks)
            .filter(|&s| !nand.is_bad(s))
            .count() as u64;
        let Sizing {
            lay,
            slot_bits,
            phys,
            logical,
            keeps_hot,
            used,
            keys,
            aged,
            rows,
            sums,
            wear,
            adaptive,
        } = Sizing::new(nand.geometry(), &cfg, good, recorded)?;
        let mut nand = nand;
        nand.set_overflip_at(overflip_at(lay.ecc_t));
        let segments = lay.segments as usize;
        let cfg = FmsConfig {
            logical_blocks: cfg.logical_blocks.or(recorded),
            ..cfg
        };
        let n = logical as usize;
        let half_life = cfg.hot_half_life.unwrap_or(logical as f64 / 2.0);
        let adaptive =
            adaptive.then(|| Adaptive::new(n, cfg.adaptive_window, cfg.adaptive_threshold));
        let used = used.then(|| select::UsedIndex::new(segments, lay.slots));
        let aged = aged.then(|| aged_index(&cfg, segments));
        let keys = keys
            .then(|| select::ValidKeys::new(segments, lay.slots))
            .flatten();
        let selector = select::build(cfg.policy, cfg.cat_age, cfg.cb_age);
        let rows = rows.then(|| vec![selector.absent_row(); segments]);
        let sums = sums.then(|| TableSums::new(segments, lay.slots));
        let wear = wear.then(|| WearIndex::new(segments));
        Ok(Fms {
            selector,
            dac: Dac {
                regions: cfg.regions,
                threshold_ps: cfg.region_threshold_ps,
                promotion: cfg.promotion,
                demotion: cfg.demotion,
            },
            dac_means: Box::new([0; 8]),
            ecc_override: None,
            scrub: Vec::new(),
            segsum: segsum::Summaries::for_layout(&lay),
            lost: None,
            adaptive,
            hot: HotDegree::new(if keeps_hot { n } else { 0 }, half_life),
            indexed: used.is_some() || aged.is_some() || sums.is_some() || wear.is_some(),
            used,
            keys,
            aged,
            rows,
            sums,
            wear,
            keeps_hot,
            active: vec![NONE; cfg.streams()],
            nand,
            lay,
            logical,
            blocks: table(n, BlockRow::UNMAPPED, "the translation table")?,
            cleaning: false,
            marks: (cfg.low_water as usize, cfg.high_water as usize),
            rev: table(phys, NONE, "the reverse map")?,
            slot_bits,
            segs: vec![
                Seg {
                    erase_count: 0,
                    valid: 0,
                    next: 0,
                    state: SegState::Dirty,
                    stream: 0,
                    data: false,
                    tail: Tail::Erased,
                    created_ps: 0,
                    last_inval_ps: 0,
                };
                segments
            ],
            free: VecDeque::new(),
            index: None,
            seq: 1,
            erase_seq: 1,
            update_sum: 0,
            mapped: 0,
            data_segs: 0,
            write_clock: 0,
            stats: FmsStats::default(),
            buf: Vec::new(),
            page_buf: Vec::new(),
            moving: Vec::new(),
            entries: Vec::new(),
            spans: (Vec::new(), Vec::new()),
            read_pages: Vec::new(),
            spare_run: (Vec::new(), Vec::new()),
            retiring: Vec::new(),
            retired: Vec::new(),
            format_id: 0,
            index_stale: false,
            index_tail_unchecked: false,
            victim: NONE,
            trims: trims::Trims::default(),
            mount_report: MountReport::default(),
            epoch_ps: 0,
            mount_ps: 0,
            medium_ps: 0,
            cfg,
        })
    }

    /// Format the device: erase every good segment, write the headers, set up the index
    /// segment. Erase counts found in old FMS headers are carried over; a segment whose
    /// header is erased or unreadable on a medium that has FMS headers (a format or an
    /// erase stopped by a power cut) gets the largest count found, as a mount estimates a
    /// lost count (`mount.rs`), rather than 0, which would make the most worn segment of
    /// an interrupted format look new to wear levelling for good.
    pub fn format(nand: Nand, cfg: FmsConfig) -> DevResult<Fms> {
        Fms::format_or_return(nand, cfg).map_err(|(e, _)| e)
    }

    /// [`Fms::format`], giving the device back with the error when the format stops part
    /// way (a power cut: `flashkit torture --target fms-format` mounts what it left). The
    /// device is `None` when the configuration was refused before it was touched.
    pub fn format_or_return(
        nand: Nand,
        cfg: FmsConfig,
    ) -> Result<Fms, (DevError, Option<Box<Nand>>)> {
        let mut f = Fms::new_empty(nand, cfg, None).map_err(|e| (e, None))?;
        match f.format_medium() {
            Ok(()) => Ok(f),
            Err(e) => Err((e, Some(Box::new(f.nand)))),
        }
    }

    fn format_medium(&mut self) -> DevResult<()> {
        let f = self;
        ram::check_scrub_threshold(&f.lay, &f.cfg)?;
        // The old headers: erase counts to carry over, and the largest format number on
        // the medium, grown-bad segments included (they keep their content), so that this
        // format's number is new to every header a mount may read.
        let mut last_format = 0u64;
        // The code the old medium's headers carry (`layout::FEATURE_HEADER_CODE`), from its
        // first header that decodes; headers that did not decode before it was known are
        // read again with it.
        let mut code = None;
        let mut unread = Vec::new();
        // Good segments without a header to carry a count from, and the largest count
        // found: theirs unless the medium has no FMS header at all.
        let mut lost = Vec::new();
        // The old medium's segments the format may erase first (below).
        let mut harmless = Vec::new();
        let mut empty_candidates = Vec::new();
        for s in 0..f.lay.segments {
            let grown = f.nand.block_info(s).bad == BadState::Grown;
            if f.nand.is_bad(s) && !grown {
                continue;
            }
            // A corrected header counts (`mount::read_header`): a mount may take a
            // grown-bad segment's corrected header for this format's.
            let read = mount::read_header(f, s, code)?;
            if let mount::HeaderRead::Valid(h) = read {
                code = code.or(layout::header_code_of(h.features));
            }
            let old = read.header();
            if read == mount::HeaderRead::Unreadable && code.is_none() {
                unread.push(s);
            } else if old.is_none() && !grown {
                lost.push(s);
            }
            f.segs[s as usize].erase_count = old.map_or(0, |h| h.erase_count);
            last_format = last_format.max(old.map_or(0, |h| h.format_id));
            if let (Some(h), false) = (old, grown) {
                if h.kind == 1 {
                    harmless.push(s);
                } else if h.kind == 0 {
                    empty_candidates.push((s, h));
                }
            }
        }
        for s in unread {
            let h = match code {
                Some(_) => mount::read_header(f, s, code)?.header(),
                None => None,
            };
            if let Some(h) = h {
                f.segs[s as usize].erase_count = h.erase_count;
                last_format = last_format.max(h.format_id);
            } else if f.nand.block_info(s).bad != BadState::Grown {
                lost.push(s);
            }
        }
        if last_format > 0 {
            let max = f.segs.iter().map(|s| s.erase_count).max().unwrap_or(0);
            for s in lost {
                f.segs[s as usize].erase_count = max;
            }
        }
        f.format_id = last_format.wrapping_add(1).max(1);
        // Until the format's first header is on flash, a power cut leaves the old medium
        // what mounts, less what the format erased; erasing its data first would lose what
        // the segment held for it — a trim list's tombstones, and trimmed blocks come back
        // (`torture --target fms-format --failures`, stop 28: the old index segment's erase
        // failed, the next segment erased was cut). So the first segments formatted are the
        // old index segments (an index lost is recovered from), then, if each of those goes
        // bad, data segments that hold no record; only then the others, in order.
        let mut done = vec![false; f.lay.segments as usize];
        for s in harmless {
            done[s as usize] = true;
            if f.format_segment(s)? {
                break;
            }
        }
        if f.index.is_none() {
            for (s, h) in empty_candidates {
                if mount::holds_no_record_of(f, s, &h)? {
                    done[s as usize] = true;
                    if f.format_segment(s)? {
                        break;
                    }
                }
            }
        }
        for s in 0..f.lay.segments {
            if !done[s as usize] {
                f.format_segment(s)?;
            }
        }
        if f.index.is_none() {
            return Err(DevError::config("no good segment for the index"));
        }
        f.rebuild_used();
        f.update_marks();
        // The capacity was sized to the segments good before the format; its own erases
        // can wear some out. A medium that can no longer keep that capacity is not
        // reported formatted (QA stop 27: `fms format --force` of a nearly worn medium
        // succeeded, and its first large write failed worn out): the caller may format
        // again, which sizes the capacity to the segments left, or give up the medium.
        if f.segments_short() > 0 {
            let good = (0..f.lay.segments).filter(|&s| !f.nand.is_bad(s)).count() as u64;
            // Formatting again helps only when the segments left hold more than the
            // reserve (QA stop 32: the advice was given when they did not, and the next
            // format found no room for data).
            let reserve = f.cfg.reserve_segments();
            let next = if good > reserve {
                "format again to size the capacity to the segments left".to_string()
            } else {
                format!(
                    "the medium is worn out: the reserve alone needs {reserve}, so no format \
                     leaves room for data"
                )
            };
            return Err(DevError::config(format!(
                "the format's own erases wore out segments: {good} good segment(s) are left, \
                 {} short of what a capacity of {} blocks needs ({next})",
                f.segments_short(),
                f.logical
            )));
        }
        Ok(())
    }

    /// One segment of [`Fms::format_medium`]: a bad one is marked so; a good one is erased
    /// and given its header, the index segment's (kind 1) if there is none yet, a free
    /// data segment's otherwise. True when its header is on flash.
    fn format_segment(&mut self, s: u32) -> DevResult<bool> {
        if self.nand.is_bad(s) {
            self.segs[s as usize].state = SegState::Bad;
            self.segs[s as usize].next = self.lay.slots;
            return Ok(false);
        }
        let kind = if self.index.is_none() { 1 } else { 0 };
        if !self.erase_and_header(s, kind)? {
            return Ok(false);
        }
        if kind == 1 {
            self.segs[s as usize].state = SegState::Index;
            self.index = Some(IndexLog {
                seg: s,
                next: 0,
                seq: 1,
            });
        } else {
            self.free.push_back(s);
        }
        Ok(true)
    }

    /// Mount a formatted device, rebuilding every table from flash. Unless the
    /// configuration sets `logical_blocks`, the capacity recorded at format is used.
    pub fn mount(nand: Nand, cfg: FmsConfig) -> DevResult<Fms> {
        Fms::mount_or_return(nand, cfg).map_err(|(e, _)| e)
    }

    /// [`Fms::mount`], giving the device back with the error: a read or medium error, or
    /// a power cut in the mount's repairs (it programs only to repair: clearing the live
    /// flags of superseded copies, a new index segment when the index log is lost), which
    /// `flashkit torture --chain` makes, mounting what the cut left. The device is `None`
    /// when the configuration was refused (after the mount's reads of the headers, before
    /// any program).
    pub fn mount_or_return(
        nand: Nand,
        cfg: FmsConfig,
    ) -> Result<Fms, (DevError, Option<Box<Nand>>)> {
        mount::mount(nand, &|_| Ok(cfg.clone()))
    }

    /// [`Fms::mount_or_return`] with the configuration `make` gives for the medium's first
    /// header (of the newest format number on it; `None` when no segment header decodes):
    /// what a tool needs to mount a medium without knowing how it was formatted (its
    /// block size), reading every header once, where [`Fms::probe`] and then
    /// [`Fms::mount`] read each twice. An error of `make` is the mount's, the device given
    /// back.
    pub fn mount_with(
        nand: Nand,
        make: &dyn Fn(Option<&SegHeader>) -> DevResult<FmsConfig>,
    ) -> Result<Fms, (DevError, Option<Box<Nand>>)> {
        mount::mount(nand, make)
    }

    /// The medium's first valid segment header (block size, slots, recorded capacity):
    /// of the newest format number any good segment's header carries, the first such
    /// (reads every header); `None` when there is none. What a tool needs to mount a
    /// medium without knowing how it was formatted.
    pub fn probe(nand: &mut Nand) -> DevResult<Option<SegHeader>> {
        mount::probe(nand)
    }

    /// Give the device back (e.g. to reopen it after a power cut).
    pub fn into_nand(self) -> Nand {
        self.nand
    }

    // ---- accessors -----------------------------------------------------------------------

    pub fn nand(&self) -> &Nand {
        &self.nand
    }
    pub fn nand_mut(&mut self) -> &mut Nand {
        &mut self.nand
    }
    pub fn config(&self) -> &FmsConfig {
        &self.cfg
    }
    pub fn layout(&self) -> &Layout {
        &self.lay
    }
    /// The number every segment header of this format carries (`SegHeader::format_id`):
    /// one above every header the format found on the medium.
    pub fn format_id(&self) -> u64 {
        self.format_id
    }
    /// What the mount that made this FMS found to repair or skip on the medium.
    pub fn mount_report(&self) -> &MountReport {
        &self.mount_report
    }
    /// Device time the mount that made this FMS spent on the medium (its reads, and its
    /// repairs), picoseconds; the clock's jump to the medium's newest time
    /// ([`Fms::medium_time_ps`]) is not part of it. 0 after a format.
    pub fn mount_time_ps(&self) -> u64 {
        self.mount_ps
    }
    /// The newest device time the mount that made this FMS found on the medium (segment
    /// headers, header-mode entries; times beyond [`layout::MAX_MEDIUM_TIME_MS`] are not
    /// believed), picoseconds: the device clock went on from there, so that ages continue
    /// across mounts. 0 after a format.
    pub fn medium_time_ps(&self) -> u64 {
        self.medium_ps
    }
    /// Good segments that may still go bad before the exported capacity can no longer be
    /// kept: those beyond the segments the logical blocks fill, the index segment and one
    /// segment of room for the cleaner to copy into (0 at that point: once the medium is
    /// full, writes fail `WornOut`). After a default format, the reserve
    /// ([`FmsConfig::reserve_segments`]) less those two.
    pub fn spare_segments(&self) -> u64 {
        let (good, needed) = self.good_and_needed_segments();
        good.saturating_sub(needed)
    }
    /// How many good segments the medium lacks to keep its exported capacity (0 while
    /// [`Fms::spare_segments`] is not: bad segments past that point): the segments its
    /// blocks fill, the index and one to clean into, less the good ones. Writes fail
    /// `WornOut` once the free space left is used.
    pub fn segments_short(&self) -> u64 {
        let (good, needed) = self.good_and_needed_segments();
        needed.saturating_sub(good)
    }
    /// The good segments, and those keeping the capacity needs (the segments the logical
    /// blocks fill, the index and one to clean into).
    /// Segments held for lost blocks or rescued trims (`lost.rs`) count as not good while
    /// held: their room is not the cleaner's.
    fn good_and_needed_segments(&self) -> (u64, u64) {
        let good = self.good_segments();
        let data = self.logical.div_ceil(self.lay.slots as u64);
        (good, data + 2)
    }
    pub fn stats(&self) -> &FmsStats {
        &self.stats
    }
    pub fn logical_blocks(&self) -> u64 {
        self.logical
    }
    pub fn segments(&self) -> &[Seg] {
        &self.segs
    }
    /// Read sectors as the FMS maps them: a lost block reads zeros (`fms read
    /// --allow-lost`, `--salvage`, which name what they read). `BlockDevice::read` refuses
    /// a range over a lost block instead.
    pub fn read_mapped(&mut self, lba: u64, count: u32, buf: Option<&mut [u8]>) -> DevResult<()> {
        check_request(self.sectors(), lba, count, buf.as_ref().map(|b| b.len()))?;
        let spb = self.lay.block_size as u64 / SECTOR as u64;
        let bs = self.lay.block_size as usize;
        let mut tmp = std::mem::take(&mut self.buf);
        let mut out = buf;
        let mut lba_i = lba;
        let end = lba + count as u64;
        while lba_i < end {
            let lbn = (lba_i / spb) as u32;
            let first = (lba_i % spb) as usize;
            let n = ((spb - first as u64).min(end - lba_i)) as usize;
            match out.as_deref_mut() {
                Some(o) => {
                    tmp.resize(bs, 0);
                    self.read_block(lbn, Some(&mut tmp))?;
                    let at = ((lba_i - lba) as usize) * SECTOR;
                    o[at..at + n * SECTOR]
                        .copy_from_slice(&tmp[first * SECTOR..(first + n) * SECTOR]);
                }
                None => self.read_block(lbn, None)?,
            }
            lba_i += n as u64;
        }
        self.buf = tmp;
        Ok(())
    }

    /// Physical slot (`segment × slots + slot`) of a logical block.
    pub fn lookup(&self, lbn: u32) -> Option<u32> {
        let p = self
            .blocks
            .get(lbn as usize)
            .map(|b| b.map)
            .filter(|&p| p != NONE)?;
        let (seg, slot) = self.split(p);
        Some(seg * self.lay.slots + slot)
    }
    /// DAC region of a logical block.
    pub fn region_of(&self, lbn: u32) -> u8 {
        self.blocks[lbn as usize].region
    }
    pub fn free_segments(&self) -> usize {
        self.free.len()
    }
    pub fn active_segments(&self) -> &[u32] {
        &self.active
    }
    /// The adaptive policy's share of greedy choices; `None` for the other policies and
    /// before the first cleaning.
    pub fn greedy_share(&self) -> Option<f64> {
        self.adaptive.as_ref().and_then(|a| a.greedy_share())
    }
    pub fn adaptive(&self) -> Option<&Adaptive> {
        self.adaptive.as_ref()
    }
    /// The adaptive policy's write monitor and choice counts start again
    /// ([`Adaptive::restart`]); nothing for the other policies.
    pub fn restart_write_monitor(&mut self) {
        if let Some(a) = &mut self.adaptive {
            a.restart();
        }
    }
    /// Erase counts per segment as the FMS knows them (from its headers).
    pub fn erase_counts(&self) -> Vec<u32> {
        self.segs.iter().map(|s| s.erase_count).collect()
    }
    /// Host RAM held by the FMS tables (not the device model).
    pub fn ram_bytes(&self) -> u64 {
        let n = self.blocks.len() as u64;
        n * PER_BLOCK_BYTES
            + self.rev.len() as u64 * 4
            + self.segs.len() as u64 * std::mem::size_of::<Seg>() as u64
            + self.hot.ram_bytes()
            + self.used.as_ref().map_or(0, |u| u.ram_bytes())
            + self.keys.as_ref().map_or(0, |k| k.ram_bytes())
            + self.aged.as_ref().map_or(0, |u| u.ram_bytes())
            + self.rows.as_ref().map_or(0, |r| {
                r.len() as u64 * std::mem::size_of::<select::Row>() as u64
            })
            + self.sums.as_ref().map_or(0, |u| u.ram_bytes())
            + self.wear.as_ref().map_or(0, |u| u.ram_bytes())
            + self.adaptive.as_ref().map_or(0, |a| a.ram_bytes())
            + self.trims.ram_bytes()
            + self.segsum.as_ref().map_or(0, |s| s.ram_bytes())
    }

    /// A digest of the tables rebuilt at mount (map, valid counts, erase counts, free slots,
    /// active segments), to compare two mounts. A dirty segment's erase count is left out:
    /// it was lost, and mount takes the largest count known at the time, which a mount's
    /// own repair (recreating a lost index) can raise for the next one.
    pub fn tables_digest(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut mix = |v: u64| {
            h ^= v;
            h = h.wrapping_mul(0x100_0000_01b3);
        };
        for b in &self.blocks {
            mix(b.map as u64);
        }
        for s in &self.segs {
            mix(if s.state == SegState::Dirty {
                0
            } else {
                s.erase_count as u64
            });
            mix(s.valid as u64);
            mix(s.next as u64);
            mix(s.state as u64);
        }
        for &a in &self.active {
            mix(a as u64);
        }
        for (&lbn, t) in &self.trims.tomb {
            mix(lbn as u64);
            mix(t.seq);
            mix(t.at as u64);
        }
        h
    }

    /// Mark logical blocks read-only (data placement hint: they are written once and kept
    /// in read-only segments when `readonly_separation` is on).
    pub fn mark_readonly(&mut self, lbn: u32, count: u32) {
        for l in lbn..lbn.saturating_add(count).min(self.logical as u32) {
            self.blocks[l as usize].readonly = true;
        }
    }

    // ---- block-level I/O -------------------------------------------------------------------

    /// Only M3 and M6 read hot degrees, and only without DAC regions (the regions replace
    /// the redistribution method); the decayed counts cost a table and exponentials on
    /// every update, so other configurations do not keep them.
    #[inline]
    fn uses_hot_degree(&self) -> bool {
        self.keeps_hot
    }

    #[inline]
    fn phys(&self, seg: u32, slot: u32) -> u32 {
        (seg << self.slot_bits) | slot
    }

    #[inline]
    fn split(&self, phys: u32) -> (u32, u32) {
        (phys >> self.slot_bits, phys & ((1 << self.slot_bits) - 1))
    }

    fn check_lbn(&self, lbn: u32) -> DevResult<()> {
        if lbn as u64 >= self.logical {
            return Err(DevError::out_of_range(lbn as u64, 1, self.logical));
        }
        Ok(())
    }

    /// Read one logical block (`buf` of block_size bytes, or `None` in simulation mode).
    /// Unwritten blocks read as zeros.
    pub fn read_block(&mut self, lbn: u32, buf: Option<&mut [u8]>) -> DevResult<()> {
        self.check_lbn(lbn)?;
        self.stats.user_reads += 1;
        let phys = self.blocks[lbn as usize].map;
        if phys == NONE {
            if let Some(b) = buf {
                b.fill(0);
            }
            return Ok(());
        }
        self.read_phys(phys, buf)
    }

    #[inline(always)]
    fn read_phys(&mut self, phys: u32, buf: Option<&mut [u8]>) -> DevResult<()> {
        let (seg, slot) = self.split(phys);
        let first = self.nand.geometry().first_page(seg);
        let ps = self.lay.page_size as u64;
        match buf {
            Some(b) if self.lay.ecc() => self.read_slot_ecc(phys, b)?,
            Some(b) => {
                for (page, col, at, n) in self.lay.slot_pieces(slot) {
                    self.nand.read(first + page, col, &mut b[at..at + n])?;
                }
                if self.lay.mode == RecordMode::Spare && self.lay.pages_per_slot > 1 {
                    let off = self.lay.slot_offset(slot);
                    self.torn_reads_as_trimmed(first + off / ps, b)?;
                }
            }
            None => {
                for (page, col, _, n) in self.lay.slot_pieces(slot) {
                    self.nand.read_opaque(first + page, col, n as u32)?;
                }
            }
        }
        Ok(())
    }

    /// Storage mode with ECC: read each page of slot `phys` with its spare area in one
    /// page read and correct its data against the codes there, reading a page again (the
    /// model's flips are transient) up to `read_retries` times while a chunk holds more
    /// flips than the code corrects; then the read fails with `Uncorrectable`, never with
    /// wrong data. Out of line: the simulator never takes it.
    #[inline(never)]
    fn read_slot_ecc(&mut self, phys: u32, b: &mut [u8]) -> DevResult<()> {
        let (seg, slot) = self.split(phys);
        let geo = self.nand.geometry();
        let (ps, raw) = (geo.page_size as usize, geo.raw_page_size() as usize);
        let p0 = geo.first_page(seg) + self.lay.slot_offset(slot) / ps as u64;
        let code = layout::ECC_SPARE_OFFSET..layout::ECC_SPARE_OFFSET + self.lay.ecc_bytes();
        let mut page = std::mem::take(&mut self.page_buf);
        page.resize(raw, 0);
        let mut r = Ok(());
        let mut most = 0;
        'pages: for k in 0..self.lay.pages_per_slot as usize {
            let mut tries = 0;
            loop {
                if let Err(e) = self.nand.read(p0 + k as u64, 0, &mut page) {
                    r = Err(e.into());
                    break 'pages;
                }
                let (data, spare) = page.split_at_mut(ps);
                let rep =
                    match nand::ecc::correct_page_t(self.lay.ecc_t, data, &spare[code.clone()]) {
                        Ok(rep) => rep,
                        Err(e) => {
                            r = Err(DevError::config(format!("ecc: {e}")));
                            break 'pages;
                        }
                    };
                self.stats.ecc_corrected_bits += rep.corrected_bits as u64;
                if rep.uncorrectable_chunks == 0 {
                    most = most.max(rep.most_in_a_chunk);
                    break;
                }
                if tries >= self.cfg.read_retries {
                    self.stats.uncorrectable_reads += 1;
                    // A block's first sector; a slot no block maps has no sector (a trim
                    // list; `Fms::read_lost` names the lost block whose copy it is).
                    let lbn = self.rev[phys as usize];
                    let spb = (self.lay.block_size as usize / SECTOR) as u64;
                    r = Err(if lbn == NONE {
                        DevError::corrupt(format!(
                            "segment {seg} slot {slot}: uncorrectable data (a slot no block maps)"
                        ))
                    } else {
                        DevError::Uncorrectable {
                            lba: lbn as u64 * spb,
                        }
                    });
                    break 'pages;
                }
                tries += 1;
                self.stats.read_retries += 1;
            }
            b[k * ps..(k + 1) * ps].copy_from_slice(&page[..ps]);
        }
        self.page_buf = page;
        r?;
        if most > 0 && most >= self.scrub_at() {
            let lbn = self.rev[phys as usize];
            if lbn != NONE && !self.scrub.contains(&(lbn, phys)) {
                self.scrub.push((lbn, phys));
            }
        }
        if self.lay.pages_per_slot > 1 {
            self.torn_reads_as_trimmed(p0, b)?;
        }
        Ok(())
    }

    /// The cleaner's read of a valid block that [`Fms::read_slot_ecc`] found uncorrectable:
    /// each page once more, corrected where the code can, the rest as it reads, into `b`,
    /// and the pages' codes as they are on flash into [`Fms::ecc_override`], for the copy
    /// to carry. The copy then reads as the original does: the same chunks uncorrectable,
    /// so a read of the block still fails with `Uncorrectable`, never returns wrong data,
    /// while the cleaning goes on (until stop 20 it failed, and since the victim stayed
    /// the best choice every later write and trim failed with it: one bad chunk froze the
    /// device). Overwriting or trimming the block clears it.
    #[cold]
    #[inline(never)]
    pub(super) fn read_unreadable(&mut self, phys: u32, b: &mut [u8]) -> DevResult<()> {
        let (seg, slot) = self.split(phys);
        let geo = self.nand.geometry();
        let (ps, raw) = (geo.page_size as usize, geo.raw_page_size() as usize);
        let p0 = geo.first_page(seg) + self.lay.slot_offset(slot) / ps as u64;
        let c = self.lay.ecc_bytes();
        let code = layout::ECC_SPARE_OFFSET..layout::ECC_SPARE_OFFSET + c;
        let mut page = vec![0u8; raw];
        let mut codes = Vec::with_capacity(c * self.lay.pages_per_slot as usize);
        for k in 0..self.lay.pages_per_slot as usize {
            self.nand.read(p0 + k as u64, 0, &mut page)?;
            let (data, spare) = page.split_at_mut(ps);
            codes.extend_from_slice(&spare[code.clone()]);
            nand::ecc::correct_page_t(self.lay.ecc_t, data, &spare[code.clone()])
                .map_err(|e| DevError::config(format!("ecc: {e}")))?;
            b[k * ps..(k + 1) * ps].copy_from_slice(data);
        }
        self.stats.unreadable_copies += 1;
        self.ecc_override = Some(codes);
        Ok(())
    }

    /// Spare mode: every page of a slot but the last carries [`layout::PAGE_MARK`] in its
    /// spare area (the last carries the record). A page that reads erased without its mark
    /// was erased by a torn erase after the slot was written. Only a block whose newest
    /// record sits in a segment whose erase was interrupted can be mapped there, and that
    /// is a block trimmed before (valid blocks are copied out before the erase) on a medium
    /// written before stop 16, when spare-mode trims did not persist (now its tombstone
    /// outlives the segment): it reads as trimmed, zeros, never as half-erased garbage.
    fn torn_reads_as_trimmed(&mut self, p0: u64, b: &mut [u8]) -> DevResult<()> {
        let ps = self.lay.page_size as usize;
        for k in 0..self.lay.pages_per_slot as usize - 1 {
            if b[k * ps..(k + 1) * ps].iter().all(|&x| x == 0xFF) {
                let mut mark = [0u8];
                self.nand
                    .read(p0 + k as u64, self.lay.page_size + 1, &mut mark)?;
                if mark[0] == 0xFF {
                    b.fill(0);
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Write one logical block (`data` of block_size bytes, or `None`).
    pub fn write_block(&mut self, lbn: u32, data: Option<&[u8]>) -> DevResult<()> {
        self.check_lbn(lbn)?;
        if self.lost.is_some() {
            self.write_rescued_first()?;
        }
        if let Err(e) = self.ensure_space() {
            self.space_for_lost(e, &[lbn])?;
        }
        let now = self.nand.clock_ps();
        let i = lbn as usize;
        let old = self.blocks[i].map;
        let ro = self.blocks[i].readonly && self.cfg.readonly_separation;
        let (stream, region) = if ro {
            (self.cfg.streams() - 1, 0)
        } else if self.cfg.regions > 1 {
            let r = if old == NONE {
                0
            } else {
                self.dac_on_update(i, now)
            };
            (r as usize, r)
        } else {
            (0, 0)
        };
        let updates = if old == NONE {
            0
        } else {
            self.blocks[i].updates.saturating_add(1)
        };
        let rec = Record {
            lbn,
            region,
            readonly: self.blocks[i].readonly,
            live: true,
            updates,
            seq: self.seq,
            time_ms: (now / 1_000_000_000).min(u32::MAX as u64) as u32,
        };
        let mut old = old;
        let phys = match self.append(stream, data, &rec) {
            Ok(phys) => phys,
            Err(e @ (DevError::NoSpace | DevError::WornOut { .. })) => {
                let phys = self.append_after_cleaning(stream, data, &rec, e)?;
                // The cleaning may have moved the block's old copy.
                old = self.blocks[i].map;
                phys
            }
            Err(e) => return Err(e),
        };
        self.write_clock += 1;
        self.stats.user_writes += 1;
        if old != NONE {
            self.invalidate(old, true)?;
            self.update_sum += 1;
            if self.uses_hot_degree() {
                self.hot.on_update(lbn, self.write_clock);
            }
        } else {
            self.mapped += 1;
            if !self.trims.tomb.is_empty() {
                self.forget_tomb(lbn)?;
            }
        }
        self.blocks[i].map = phys;
        self.rev[phys as usize] = lbn;
        self.blocks[i].updates = updates;
        self.blocks[i].write_ps = now;
        self.blocks[i].region = region;
        self.blocks[i].region_ps = now;
        if let Some(a) = self.adaptive.as_mut() {
            a.on_write(lbn);
        }
        if self.lost.is_some() {
            self.resolve_lost(lbn)?;
        }
        if !self.retiring.is_empty() || self.index_stale {
            self.repair()?;
        }
        Ok(())
    }

    /// A user write's `append` found no free segment: program failures inside it used
    /// them up (each failed program closes its segment, and the retry takes another),
    /// after `ensure_space` had left the low-water mark. Clean as before a write, then
    /// try again; nothing of this write has landed. A torture sweep (seed 1615: nandsim,
    /// 3 slots a segment, two failures four operations apart) found writes failing
    /// `WornOut` with three empty segments left to clean. Not for trim lists (a cleaning
    /// must not come between a trim's unmapping and its list: `Fms::trim_blocks`), nor
    /// inside a cleaning.
    #[cold]
    #[inline(never)]
    fn append_after_cleaning(
        &mut self,
        stream: usize,
        data: Option<&[u8]>,
        rec: &Record,
        e: DevError,
    ) -> DevResult<u32> {
        if self.cleaning || !self.free.is_empty() {
            return Err(e);
        }
        self.make_space()?;
        if self.free.is_empty() {
            return Err(e);
        }
        self.append(stream, data, rec)
    }

    /// DAC: the region an update of block `i` (mapped) moves it to. Out of line: the write
    /// path without DAC keeps its code as it was.
    #[inline(never)]
    fn dac_on_update(&self, i: usize, now: u64) -> u8 {
        let b = &self.blocks[i];
        let mean = self.dac_means[b.region as usize];
        self.dac.on_update(b.region, b.region_ps, now, mean)
    }

    /// Unmap a logical block (`Fms::trim_blocks` of one block): durable when it returns.
    pub fn trim_block(&mut self, lbn: u32) -> DevResult<()> {
        self.check_lbn(lbn)?;
        self.trim_blocks(lbn..lbn + 1)
    }

    /// Unmap logical blocks; the trim is durable when it returns, as a write is. In header
    /// mode each copy's live flag is cleared on flash. In spare mode the blocks' tombstones
    /// are written into trim lists (`trims.rs`), a list's worth at a time: the cleaner runs
    /// first, if it must, so that no segment holding a block's last copy is erased between
    /// the block's unmapping and its list's program (a power cut there would bring back an
    /// older copy of the block, older than its content at the trim).
    pub(super) fn trim_blocks(&mut self, lbns: std::ops::Range<u32>) -> DevResult<()> {
        if lbns.end as u64 > self.logical {
            return Err(DevError::out_of_range(
                lbns.start as u64,
                lbns.len() as u64,
                self.logical,
            ));
        }
        if self.lost.is_some() {
            self.write_rescued_first()?;
        }
        if self.lay.mode == RecordMode::Header {
            for lbn in lbns {
                self.unmap(lbn)?;
                if self.lost.is_some() {
                    // (Its lost record's live bit cleared too: `lost.rs`.)
                    self.resolve_lost(lbn)?;
                }
            }
        } else {
            let cap = self.trim_list_capacity();
            let mut chunk = Vec::with_capacity(cap.min(lbns.len()));
            let mut next = lbns.start;
            while next < lbns.end {
                chunk.clear();
                while next < lbns.end && chunk.len() < cap {
                    // A lost block gets a tombstone even when nothing is mapped: it must
                    // beat the lost record at the next mount (`lost.rs`).
                    if self.blocks[next as usize].map != NONE || self.is_lost(next) {
                        chunk.push(next);
                    }
                    next += 1;
                }
                if chunk.is_empty() {
                    break;
                }
                if let Err(e) = self.ensure_space() {
                    self.space_for_lost(e, &chunk)?;
                }
                // The list first, then the unmapping, with no cleaning in between: a block
                // is unmapped once its tombstone is on flash. A list that cannot be
                // programmed (failures, numbers running out) leaves its blocks mapped and
                // the trim failed: nothing waits in RAM for the next flush, during which
                // the cleaner could erase a trimmed block's newest copy and a cut bring
                // back an older one (QA stop 28, the review of the failure path).
                // (A lost block may already have a tombstone, which a failed trim keeps.)
                let before: Vec<Option<trims::Tomb>> = chunk
                    .iter()
                    .map(|l| self.trims.tomb.get(l).copied())
                    .collect();
                let listed = chunk
                    .iter()
                    .try_for_each(|&lbn| self.add_tomb(lbn))
                    .and_then(|()| self.write_trims());
                for (&lbn, prev) in chunk.iter().zip(&before) {
                    match self.trims.tomb.get(&lbn) {
                        // This trim's tombstone, on flash.
                        Some(t) if t.at != NONE && prev.is_none_or(|p| p.seq != t.seq) => {
                            self.unmap(lbn)?;
                        }
                        _ => match prev {
                            Some(p) => {
                                self.trims.tomb.insert(lbn, *p);
                            }
                            None => {
                                self.trims.tomb.remove(&lbn);
                            }
                        },
                    }
                }
                if let Err(e) = listed {
                    // This trim's tombstones are gone; those waiting before it still wait.
                    self.trims.pending.retain(|l| match chunk.binary_search(l) {
                        Ok(i) => before[i].is_some_and(|p| p.at == NONE),
                        Err(_) => true,
                    });
                    return Err(e);
                }
                if self.lost.is_some() {
                    for &lbn in &chunk {
                        self.resolve_lost(lbn)?;
                    }
                }
            }
        }
        if !self.retiring.is_empty() || self.index_stale {
            self.repair()?;
        }
        Ok(())
    }

    /// Unmap `lbn` in RAM and, in header mode, clear its copy's live bit.
    fn unmap(&mut self, lbn: u32) -> DevResult<()> {
        let i = lbn as usize;
        let old = self.blocks[i].map;
        if old == NONE {
            return Ok(());
        }
        self.invalidate(old, true)?;
        self.blocks[i].map = NONE;
        self.update_sum -= self.blocks[i].updates as u64;
        self.blocks[i].updates = 0;
        self.mapped -= 1;
        if self.uses_hot_degree() {
            self.hot.set(lbn, 0.0, self.write_clock);
        }
        self.stats.trims += 1;
        Ok(())
    }

    /// Keep the victim indexes of used (closed) segments in step with segment `seg`'s row;
    /// called after every change of its state, valid count, stream or age stamps. Without
    /// an index (small devices) it is one test, or the segment's scan row, and the count
    /// of segments holding data; the update of the large devices' indexes is out of line.
    #[inline(always)]
    fn sync_used(&mut self, seg: u32) {
        let s = &mut self.segs[seg as usize];
        let data = matches!(s.state, SegState::Used | SegState::Active);
        if data != s.data {
            s.data = data;
            if data {
                self.data_segs += 1;
            } else {
                self.data_segs -= 1;
            }
        }
        if let Some(keys) = self.keys.as_mut() {
            let s = &self.segs[seg as usize];
            keys.set(seg, s.candidate(self.lay.slots).then_some(s.valid));
        }
        if let Some(rows) = self.rows.as_mut() {
            let s = &self.segs[seg as usize];
            rows[seg as usize] = if s.candidate(self.lay.slots) {
                self.selector.row(&s.view(self.lay.slots))
            } else {
                self.selector.absent_row()
            };
        }
        if self.indexed {
            self.sync_used_now(seg);
        }
    }

    #[inline(never)]
    fn sync_used_now(&mut self, seg: u32) {
        let s = &self.segs[seg as usize];
        let candidate = s.candidate(self.lay.slots);
        if let Some(ix) = self.used.as_mut() {
            ix.set(seg, candidate.then_some(s.valid));
        }
        if let Some(ix) = self.aged.as_mut() {
            let view = s.view(self.lay.slots);
            ix.set(seg, candidate.then_some((s.stream, &view)));
        }
        if let Some(sums) = self.sums.as_mut() {
            sums.set(seg, s.state, s.stream, s.valid);
        }
        if let Some(ix) = self.wear.as_mut() {
            let data = s.state == SegState::Active || (s.state == SegState::Used && s.valid > 0);
            ix.set(seg, data.then_some(s.erase_count));
        }
    }

    /// Index every segment afresh (after mount, format, or a test that sets rows).
    pub(super) fn rebuild_used(&mut self) {
        for seg in 0..self.segs.len() as u32 {
            self.sync_used(seg);
        }
    }

    /// Mark the copy at `phys` obsolete: RAM tables, and on flash in header mode.
    #[inline]
    fn invalidate(&mut self, phys: u32, on_flash: bool) -> DevResult<()> {
        let (seg, slot) = self.split(phys);
        let s = &mut self.segs[seg as usize];
        s.valid -= 1;
        s.last_inval_ps = self.nand.clock_ps();
        self.rev[phys as usize] = NONE;
        self.sync_used(seg);
        if on_flash && self.lay.mode == RecordMode::Header {
            self.clear_live(seg, slot)?;
            self.stats.obsolete_marks += 1;
        }
        Ok(())
    }

    /// Header mode: a bit flip in the flags byte `clear_live` read made its program try
    /// to set a bit: bit 1 (writable) of a read-only copy read as 1 (every bit the clear
    /// programs to 0 may be 1 or 0 on flash: a bit flipped for good to 1 is programmed
    /// back to 0, one read 0 by a flip is 0 in the program, and neither sets a bit).
    /// Program it with bit 1 clear too: the copy is dead, and only a live copy's hint is
    /// read. Out of line: never taken without flips.
    #[cold]
    #[inline(never)]
    fn clear_live_after_a_flip(&mut self, ppn: u64, col: u32, read: u8) -> Result<(), NandError> {
        let clear = self.lay.live.clear_mask() | layout::FLAG_WRITABLE;
        self.nand
            .program(ppn, col, Data::Bytes(&[read & !clear]), None)
    }

    /// Header mode: clear the live state of a slot's entry (bit 0, or with the live-byte
    /// feature bits 0 and 2..7: [`layout::LiveFlag`]), keeping bit 1 (the writable hint) as
    /// it is on flash.
    ///
    /// A segment whose erase block went bad cannot be programmed, and a failed clear
    /// retires it: either way the copy keeps its live bit, and the invalidation stands in
    /// RAM. The segment is queued (`retiring`); once it is recorded retired, mount no
    /// longer reads it. Until then a mount still does, and a superseded copy there loses
    /// to the newer one by sequence number; the copy of a block trimmed meanwhile comes
    /// back only if the power is cut before that record, which the end of the same trim
    /// writes (docs/fms.md, "Program and erase failures").
    fn clear_live(&mut self, seg: u32, slot: u32) -> DevResult<()> {
        if self.nand.is_bad(seg) {
            return Ok(());
        }
        let off = SEG_HEADER as u64 + slot as u64 * ENTRY as u64 + Record::FLAGS_OFFSET as u64;
        let (page, col) = self.lay.page_col(off);
        let ppn = self.nand.geometry().first_page(seg) + page;
        // The flags byte is read, then programmed with the live bits clear.
        let clear = self.lay.live.clear_mask();
        let (flags, mut r) = self.nand.read_then_clear_byte(ppn, col, clear)?;
        if let Err(NandError::SetsBits { .. }) = r {
            r = self.clear_live_after_a_flip(ppn, col, flags);
        }
        match r {
            Ok(()) => Ok(()),
            Err(NandError::ProgramFailed { .. }) => {
                self.note_retired(seg);
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Refuse to open a segment for writing when the block sequence numbers left might not
    /// cover every slot of the segments then open for writing (one per stream, plus a wear
    /// levelling target): a number that wrapped would lose to every older copy at the next
    /// mount. Every number handed out fills a slot of an open segment, so checking here,
    /// once per segment's worth of blocks, keeps the check off the per-block path.
    pub(super) fn check_seq_room(&self) -> DevResult<()> {
        let open = self.active.len() as u64 + 1;
        if open * self.lay.slots as u64 > self.lay.seq_end().saturating_sub(self.seq) {
            return Err(seq_exhausted(self.seq, self.lay.seq_end()));
        }
        Ok(())
    }

    /// Allocate the next slot of `stream`'s active segment and program the block and its
    /// record there. Returns the physical slot.
    fn append(&mut self, stream: usize, data: Option<&[u8]>, rec: &Record) -> DevResult<u32> {
        let mut rec = *rec;
        for _attempt in 0..8 {
            let seg = self.active_slot_segment(stream)?;
            let s = &mut self.segs[seg as usize];
            let slot = s.next;
            s.next += 1;
            rec.seq = self.seq;
            self.seq += 1;
            match self.program_slot(seg, slot, data, &rec) {
                Ok(()) => {
                    // An active segment: never indexed (no `sync_used`).
                    self.segs[seg as usize].valid += 1;
                    return Ok(self.phys(seg, slot));
                }
                Err(
                    NandError::SetsBits { .. }
                    | NandError::NopExceeded { .. }
                    | NandError::OutOfOrder { .. }
                    | NandError::ProgramFailed { .. },
                ) => {
                    // Garbage left by a torn operation (bits already cleared, a page
                    // already programmed, later pages programmed — e.g. a torn erase that
                    // left the header), or a failing block: close this segment (the
                    // cleaner will reclaim it) and retry in a fresh one.
                    self.close_early(seg)?;
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(self.no_space())
    }

    /// `seg` was closed early: the stream whose segment it is has none now. Not
    /// necessarily the stream writing into it, which may have borrowed it
    /// ([`Fms::active_slot_segment`]) and keeps its own (full) segment.
    fn drop_active(&mut self, seg: u32) {
        if let Some(a) = self.active.iter_mut().find(|a| **a == seg) {
            *a = NONE;
        }
    }

    fn program_slot(
        &mut self,
        seg: u32,
        slot: u32,
        data: Option<&[u8]>,
        rec: &Record,
    ) -> Result<(), NandError> {
        let first = self.nand.geometry().first_page(seg);
        let ps = self.lay.page_size as u64;
        let off = self.lay.slot_offset(slot);
        match self.lay.mode {
            RecordMode::Header => {
                self.program_data(seg, slot, data)?;
                self.program_entries(seg, slot, &rec.encode_entry())?;
            }
            RecordMode::Spare => {
                let pps = self.lay.pages_per_slot as u64;
                let p0 = first + off / ps;
                let spare = rec.encode_spare();
                if let (true, Some(b)) = (self.lay.ecc(), data) {
                    self.program_slot_ecc(p0, b, &spare)?;
                } else if data.is_none() && pps > 1 && self.program_slot_batched(p0, &spare) {
                    // Simulation mode: the slot's pages in one device call.
                } else {
                    for k in 0..pps {
                        let d = match data {
                            Some(b) => Data::Bytes(&b[(k * ps) as usize..((k + 1) * ps) as usize]),
                            None => Data::Opaque(ps as u32),
                        };
                        // The last page carries the record, the others a written mark.
                        let sp = if k == pps - 1 {
                            &spare[..]
                        } else {
                            &layout::PAGE_MARK[..]
                        };
                        self.nand.program(p0 + k, 0, d, Some((1, sp)))?;
                    }
                }
                if self.lay.summary_page.is_some() {
                    self.note_record(seg, slot, &spare, rec.summary_time())?;
                }
            }
        }
        Ok(())
    }

    /// Spare mode, simulation mode: [`Fms::program_slot`]'s opaque pages of a slot of
    /// several pages, with their page marks and the record `rec` on the last, as one
    /// [`Nand::opaque_page_batch_spare`]. False, with nothing done, when the device
    /// declines (a program would fail, or a fault plan is installed; the caller then
    /// programs them a page at a time and meets the failure where it falls) or the slot
    /// has more pages than the call is built for here. Out of line: header mode never
    /// calls it.
    #[inline(never)]
    fn program_slot_batched(&mut self, p0: u64, rec: &[u8; layout::SPARE_RECORD - 1]) -> bool {
        const MOST: usize = 16;
        let pps = self.lay.pages_per_slot as usize;
        if pps > MOST {
            return false;
        }
        let mark = layout::PAGE_MARK.len();
        let mut spares = [0u8; (MOST - 1) * layout::PAGE_MARK.len() + layout::SPARE_RECORD - 1];
        let mut ends = [0u32; MOST];
        for k in 0..pps - 1 {
            spares[k * mark..(k + 1) * mark].copy_from_slice(&layout::PAGE_MARK);
            ends[k] = ((k + 1) * mark) as u32;
        }
        let n = (pps - 1) * mark + rec.len();
        spares[(pps - 1) * mark..n].copy_from_slice(rec);
        ends[pps - 1] = n as u32;
        self.nand
            .opaque_page_batch_spare(&[], p0, 1, &spares[..n], &ends[..pps])
    }

    /// Spare mode with ECC, storage mode: [`Fms::program_slot`]'s pages, each with the
    /// codes of its data at spare offset [`layout::ECC_SPARE_OFFSET`], in the same program
    /// as its record or page mark. Out of line: the simulator never takes it.
    #[inline(never)]
    fn program_slot_ecc(
        &mut self,
        p0: u64,
        data: &[u8],
        rec: &[u8; layout::SPARE_RECORD - 1],
    ) -> Result<(), NandError> {
        let ps = self.lay.page_size as usize;
        let pps = self.lay.pages_per_slot as usize;
        // Spare bytes from offset 1: record or mark, 0xFF up to the codes, the codes.
        let n = layout::ECC_SPARE_OFFSET - 1 + self.lay.ecc_bytes();
        let (mut stack, mut heap) = ([0xFFu8; 256], Vec::new());
        let sp: &mut [u8] = if n <= stack.len() {
            &mut stack[..n]
        } else {
            heap.resize(n, 0xFF);
            &mut heap[..]
        };
        for k in 0..pps {
            let page = &data[k * ps..(k + 1) * ps];
            sp.fill(0xFF);
            if k == pps - 1 {
                sp[..rec.len()].copy_from_slice(rec);
            } else {
                sp[0] = layout::PAGE_MARK[0];
            }
            match &self.ecc_override {
                Some(codes) => {
                    let c = self.lay.ecc_bytes();
                    sp[layout::ECC_SPARE_OFFSET - 1..].copy_from_slice(&codes[k * c..(k + 1) * c]);
                }
                None => nand::ecc::compute_page_t(
                    self.lay.ecc_t,
                    page,
                    &mut sp[layout::ECC_SPARE_OFFSET - 1..][..self.lay.ecc_bytes()],
                )
                .map_err(|e| NandError::config(format!("ecc: {e}")))?,
            }
            self.nand
                .program(p0 + k as u64, 0, Data::Bytes(page), Some((1, sp)))?;
        }
        Ok(())
    }

    /// Header mode: program a slot's data area. Inlined: a `Result` read back from memory
    /// just after the callee stored it stalls on store forwarding.
    #[inline(always)]
    fn program_data(&mut self, seg: u32, slot: u32, data: Option<&[u8]>) -> Result<(), NandError> {
        let first = self.nand.geometry().first_page(seg);
        for (page, col, at, n) in self.lay.slot_pieces(slot) {
            let d = match data {
                Some(b) => Data::Bytes(&b[at..at + n]),
                None => Data::Opaque(n as u32),
            };
            self.nand.program(first + page, col, d, None)?;
        }
        Ok(())
    }

    /// Header mode: program the entries of consecutive slots from `slot` (`entries` holds
    /// whole 24-byte entries) in one program per header page they touch.
    #[inline(always)]
    fn program_entries(&mut self, seg: u32, slot: u32, entries: &[u8]) -> Result<(), NandError> {
        let first = self.nand.geometry().first_page(seg);
        let eoff = SEG_HEADER as u64 + slot as u64 * ENTRY as u64;
        for (page, col, at, n) in self.lay.pages_of(eoff, entries.len() as u64) {
            let d = Data::Bytes(&entries[at..at + n]);
            self.nand.program(first + page, col, d, None)?;
        }
        Ok(())
    }

    /// The active segment of `stream`, allocating one when it is missing or full.
    fn active_slot_segment(&mut self, stream: usize) -> DevResult<u32> {
        let cur = self.active[stream];
        if cur != NONE && self.room(cur)? {
            return Ok(cur);
        }
        // When a cleaning has used up the free segments, a stream whose segment is full
        // borrows the nearest stream's segment that has room. A cleaning starts with at
        // least one free segment and a victim holds fewer valid blocks than a segment has
        // slots, so it always completes; the reserve stays at the water marks however many
        // streams there are, and clustering bends only in that corner.
        if self.cleaning && self.free.is_empty() {
            if let Some(a) = self.borrow_segment(stream)? {
                return Ok(a);
            }
        }
        if cur != NONE {
            self.segs[cur as usize].state = SegState::Used;
            self.sync_used(cur);
        }
        let seg = match self.take_free() {
            Ok(seg) => seg,
            Err(e) => {
                // The closed segment is no longer the stream's: the stream has none until
                // it gets one. (Left named, a cleaning could pick it as its victim, erase
                // and free it while the stream went on writing into it, and the next stream
                // to take it from the free list reset its row: QA stop 29, a flushed block
                // lost after chained power cuts and failing erases.)
                if cur != NONE && self.active[stream] == cur {
                    self.active[stream] = NONE;
                }
                if !(self.cleaning && matches!(e, DevError::NoSpace | DevError::WornOut { .. })) {
                    return Err(e);
                }
                // The free segments went bad as they were taken (QA stop 29): borrow as
                // above, then reopen or reuse a closed segment.
                if let Some(a) = self.borrow_segment(stream)? {
                    return Ok(a);
                }
                if let Some(seg) = self.reopen_closed(stream)? {
                    return Ok(seg);
                }
                return match self.reuse_superseded(stream)? {
                    Some(seg) => Ok(seg),
                    None => Err(e),
                };
            }
        };
        self.open_empty(seg, stream);
        self.log_active(stream as u8, seg)?;
        Ok(seg)
    }

    /// The nearest other stream's segment with room (`active_slot_segment`), counted as
    /// borrowed. Out of line: only cleanings without a free segment get here.
    #[cold]
    #[inline(never)]
    fn borrow_segment(&mut self, stream: usize) -> DevResult<Option<u32>> {
        let n = self.active.len();
        for d in 1..n {
            for cand in [stream.checked_sub(d), Some(stream + d)]
                .into_iter()
                .flatten()
            {
                if cand < n {
                    let a = self.active[cand];
                    if a != NONE && self.room(a)? {
                        self.stats.borrowed_slots += 1;
                        return Ok(Some(a));
                    }
                }
            }
        }
        Ok(None)
    }

    /// Make the erased segment `seg` `stream`'s segment, written from slot 0.
    fn open_empty(&mut self, seg: u32, stream: usize) {
        let now = self.nand.clock_ps();
        let s = &mut self.segs[seg as usize];
        s.state = SegState::Active;
        s.stream = stream as u8;
        s.created_ps = now;
        s.last_inval_ps = now;
        s.next = 0;
        s.valid = 0;
        self.sync_used(seg);
        self.active[stream] = seg;
    }

    /// A cleaning that finds no free segment and no stream's segment with room writes into
    /// a closed segment whose slots from `next` on are erased, which becomes `stream`'s
    /// segment. Only a mount leaves such segments in numbers (it closes the partly written
    /// segments the index log does not name, all of them when the index was lost), and a
    /// cut in a cleaning that had used the free segments up (say, for an index segment
    /// that went bad) can leave none free: the cleaner would then have nowhere to move a
    /// victim's blocks. Never the victim being emptied, nor a bad segment.
    fn reopen_closed(&mut self, stream: usize) -> DevResult<Option<u32>> {
        // Opened for writing as a free segment is (`take_free`; QA stop 28: a corrupt
        // record near the end of the numbers could let copies wrap here).
        self.check_seq_room()?;
        let slots = self.lay.slots;
        let mut from = 0;
        let seg = loop {
            let Some(g) = (from..self.lay.segments).find(|&g| {
                let s = &self.segs[g as usize];
                s.state == SegState::Used
                    && s.next < slots
                    && g != self.victim
                    && !self.nand.is_bad(g)
            }) else {
                return Ok(None);
            };
            if self.room(g)? {
                break g;
            }
            from = g + 1;
        };
        let s = &mut self.segs[seg as usize];
        s.state = SegState::Active;
        s.stream = stream as u8;
        self.sync_used(seg);
        self.active[stream] = seg;
        self.log_active(stream as u8, seg)?;
        Ok(Some(seg))
    }

    /// A cleaning that finds no free segment (the last went bad when it was taken, say),
    /// no stream's segment and no closed segment with room erases a closed segment whose
    /// blocks have all been superseded, as it would clean it, and writes on there: the
    /// victim's copies would otherwise stop half-way with such a segment at hand (QA stop
    /// 29: power cuts and failing erases, every segment full, one of them holding nothing
    /// valid). Never the victim, nor a bad segment.
    #[cold]
    #[inline(never)]
    fn reuse_superseded(&mut self, stream: usize) -> DevResult<Option<u32>> {
        self.check_seq_room()?;
        loop {
            // (One whose erase or header failed went bad, or is free: the next is another.)
            let Some(g) = self.first_empty_candidate(self.victim) else {
                return Ok(None);
            };
            if self.erase_and_header(g, 0)? {
                self.open_empty(g, stream);
                self.log_active(stream as u8, g)?;
                return Ok(Some(g));
            }
        }
    }

    /// Pop a free segment, erasing it first if its state is unknown.
    fn take_free(&mut self) -> DevResult<u32> {
        self.check_seq_room()?;
        while let Some(seg) = self.free.pop_front() {
            if !self.erased_for_use(seg)? {
                continue;
            }
            return Ok(seg);
        }
        Err(self.no_space())
    }

    /// Make a segment from the free list ready to be written from slot 0: erase it if
    /// its state is unknown, or if it came from mount and holds pages a torn erase kept
    /// ([`Tail`]). False if it went bad.
    fn erased_for_use(&mut self, seg: u32) -> DevResult<bool> {
        let s = &self.segs[seg as usize];
        if s.state == SegState::Dirty
            || s.tail == Tail::Torn
            || (s.tail != Tail::Erased && !self.check_tail(seg)?)
        {
            return self.erase_and_header(seg, 0);
        }
        Ok(true)
    }

    /// Whether `seg` has a slot to write into: `next` is before the end and the slots from
    /// there are known to be erased. Inline: the write path asks at every block; only a
    /// segment mount found open reads anything ([`Fms::check_tail`]).
    #[inline(always)]
    fn room(&mut self, seg: u32) -> DevResult<bool> {
        let s = &self.segs[seg as usize];
        if s.next >= self.lay.slots {
            return Ok(false);
        }
        if s.tail == Tail::Erased {
            return Ok(true);
        }
        self.check_tail(seg)
    }

    /// Erase a segment and write its header. Returns false if the segment went bad (its
    /// erase or its header's program failed), or was already. A data segment that goes
    /// bad here is queued (`retiring`): in header mode its old records, still on flash,
    /// must be recorded retired in the index log.
    fn erase_and_header(&mut self, seg: u32, kind: u16) -> DevResult<bool> {
        Ok(self.erase_segment(seg, kind)? && self.program_header(seg, kind)?)
    }

    /// The erase of [`Fms::erase_and_header`]: false if the segment went bad.
    fn erase_segment(&mut self, seg: u32, kind: u16) -> DevResult<bool> {
        match self.nand.erase(seg) {
            Ok(()) => {}
            Err(e @ (NandError::EraseFailed { .. } | NandError::BadBlock { .. })) => {
                // Already bad (`BadBlock`): a data segment was counted when its program
                // failed; the index segment, whose entry program failed, was not.
                let newly = matches!(e, NandError::EraseFailed { .. }) || kind == 1;
                self.went_bad(seg, kind, newly)?;
                return Ok(false);
            }
            Err(e) => return Err(e.into()),
        }
        self.stats.erasures += 1;
        if let Some(s) = &mut self.segsum {
            s.erased(seg);
        }
        let s = &mut self.segs[seg as usize];
        s.erase_count = s.erase_count.saturating_add(1);
        s.valid = 0;
        s.next = 0;
        s.tail = Tail::Erased;
        s.state = SegState::Free;
        self.sync_used(seg);
        Ok(true)
    }

    /// The header program of [`Fms::erase_and_header`]: false if the segment went bad.
    fn program_header(&mut self, seg: u32, kind: u16) -> DevResult<bool> {
        let erase_count = self.segs[seg as usize].erase_count;
        let hdr = SegHeader {
            erase_count,
            block_size: self.lay.block_size,
            slots: self.lay.slots,
            logical_blocks: self.logical as u32,
            kind,
            erase_seq: self.erase_seq,
            time_ms: self.nand.clock_ps() / 1_000_000_000,
            format_id: self.format_id,
            features: self.lay.features(),
        };
        self.erase_seq = self.erase_seq.saturating_add(1);
        if let Some(s) = &mut self.segsum {
            s.set_header(seg, hdr.erase_seq);
        }
        let first = self.nand.geometry().first_page(seg);
        let bytes = hdr.encode();
        // With a header code (`layout::FEATURE_HEADER_CODE`), the code of the page's first
        // chunk goes into page 0's spare in the same program (one program per page on
        // NOP-1 devices). Storage mode only: the simulator never mounts, and programs no
        // code.
        let r = if self.nand.store().keeps_payload() {
            self.program_header_bytes(first, &bytes)
        } else {
            self.nand.program(first, 0, Data::Bytes(&bytes), None)
        };
        match r {
            Ok(()) => Ok(true),
            Err(NandError::ProgramFailed { .. }) => {
                self.went_bad(seg, kind, true)?;
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }
}

impl Fms {
    /// Storage mode: program header `bytes` into page `first`, with the code of the page's
    /// first chunk in its spare area when the layout says headers carry one. Out of line:
    /// the cleaner programs a header for every victim, and the simulator (no payload)
    /// keeps its one program with no spare (inlined, the choice cost greedy 0.4–0.6 % of
    /// its instructions).
    #[cold]
    #[inline(never)]
    fn program_header_bytes(
        &mut self,
        first: u64,
        bytes: &[u8; SEG_HEADER],
    ) -> Result<(), NandError> {
        let code = self.lay.header_code_t().map(|t| header_code(t, bytes));
        let spare = code
            .as_deref()
            .map(|c| (layout::ECC_SPARE_OFFSET as u32, c));
        self.nand.program(first, 0, Data::Bytes(bytes), spare)
    }
}

/// The code of strength `t` of a header page's first 512-byte chunk: the 64-byte
/// header `hdr` followed by 448 bytes of `0xFF` (`layout::FEATURE_HEADER_CODE`).
pub(super) fn header_code(t: u8, hdr: &[u8; SEG_HEADER]) -> Vec<u8> {
    let mut chunk = [0xFFu8; nand::ecc::ECC_CHUNK];
    chunk[..SEG_HEADER].copy_from_slice(hdr);
    let mut code = vec![0u8; nand::ecc::code_bytes(t)];
    nand::ecc::compute_page_t(t, &chunk, &mut code).expect("one whole chunk");
    code
}

/// RAM per logical block of the FMS's translation table (a [`BlockRow`]).
const PER_BLOCK_BYTES: u64 = std::mem::size_of::<BlockRow>() as u64;

/// What the FMS keeps per logical block: its translation table row (Fig. 9 of the 1999
/// paper: the physical copy, update count and time stamps, DAC region, read-only mark).
/// One row, not a table per field: the write path and the cleaner read most of a block's
/// fields together, one cache line instead of one per table.
#[derive(Clone, Copy, Debug)]
struct BlockRow {
    /// Time of the block's last write (device clock).
    write_ps: u64,
    /// When the block entered its DAC region (or was last rewritten there).
    region_ps: u64,
    /// Physical slot of the current copy, or `NONE`.
    map: u32,
    updates: u16,
    region: u8,
    readonly: bool,
}

impl BlockRow {
    const UNMAPPED: BlockRow = BlockRow {
        write_ps: 0,
        region_ps: 0,
        map: NONE,
        updates: 0,
        region: 0,
        readonly: false,
    };
}

/// The cost-benefit / CAT index for `cfg`'s policy: grouped by valid count, and for CAT
/// (adaptive's other choice) by erase count too, aged by the stamp its score reads.
fn aged_index(cfg: &FmsConfig, segments: usize) -> select::AgedIndex {
    let stamp = match (cfg.policy, cfg.cb_age) {
        (Policy::CostBenefit, CbAge::Invalidation) => select::AgeStamp::Invalidated,
        _ => select::AgeStamp::Created,
    };
    select::AgedIndex::new(segments, stamp, cfg.policy != Policy::CostBenefit)
}

/// The error when the block sequence numbers run out (out of line: never on a hot path).
#[cold]
#[inline(never)]
fn seq_exhausted(next: u64, end: u64) -> DevError {
    DevError::corrupt(format!(
        "block sequence numbers exhausted (next {next}, records hold numbers below {end}): a corrupt record, or that many block writes; the medium can still be read: copy the data off and format it"
    ))
}

/// Parse `s` (any case) as the one of `all` whose `name` it is; the error names `what`
/// and lists the names, so the list cannot drift from `all`. Shared by the FMS's named
/// options (policy, redistribution, DAC region selection and age rules).
pub(crate) fn parse_named<T: Copy>(
    s: &str,
    all: &[T],
    name: fn(T) -> &'static str,
    what: &str,
) -> Result<T, String> {
    let lower = s.to_ascii_lowercase();
    all.iter()
        .copied()
        .find(|&v| name(v) == lower)
        .ok_or_else(|| {
            let names: Vec<&str> = all.iter().map(|&v| name(v)).collect();
            format!("unknown {what} '{s}' ({})", names.join(", "))
        })
}

impl BlockDevice for Fms {
    fn sectors(&self) -> u64 {
        self.logical * (self.lay.block_size as u64 / SECTOR as u64)
    }

    /// A range over a lost block fails `Lost` (as a read of a bad sector would), so that
    /// nothing reads its zeros for data (`lost.rs`; [`Fms::read_mapped`] reads them).
    fn read(&mut self, lba: u64, count: u32, buf: Option<&mut [u8]>) -> DevResult<()> {
        if self.lost.is_some() {
            check_request(self.sectors(), lba, count, buf.as_ref().map(|b| b.len()))?;
            self.refuse_lost(lba, count)?;
        }
        self.read_mapped(lba, count, buf)
    }

    fn write(&mut self, lba: u64, count: u32, data: Option<&[u8]>) -> DevResult<()> {
        check_request(self.sectors(), lba, count, data.map(|b| b.len()))?;
        let spb = self.lay.block_size as u64 / SECTOR as u64;
        let bs = self.lay.block_size as usize;
        let mut lba_i = lba;
        let end = lba + count as u64;
        let mut tmp = vec![0u8; if data.is_some() { bs } else { 0 }];
        while lba_i < end {
            let lbn = (lba_i / spb) as u32;
            let first = (lba_i % spb) as usize;
            let n = ((spb - first as u64).min(end - lba_i)) as usize;
            match data {
                Some(d) => {
                    let at = ((lba_i - lba) as usize) * SECTOR;
                    if n as u64 == spb {
                        self.write_block(lbn, Some(&d[at..at + bs]))?;
                    } else {
                        self.read_block(lbn, Some(&mut tmp))?;
                        tmp[first * SECTOR..(first + n) * SECTOR]
                            .copy_from_slice(&d[at..at + n * SECTOR]);
                        self.write_block(lbn, Some(&tmp))?;
                    }
                }
                None => {
                    if (n as u64) < spb {
                        self.read_block(lbn, None)?;
                    }
                    self.write_block(lbn, None)?;
                }
            }
            lba_i += n as u64;
        }
        Ok(())
    }

    fn trim(&mut self, lba: u64, count: u32) -> DevResult<()> {
        check_request(self.sectors(), lba, count, None)?;
        let spb = self.lay.block_size as u64 / SECTOR as u64;
        let mut lba_i = lba;
        let end = lba + count as u64;
        while lba_i < end {
            let lbn = (lba_i / spb) as u32;
            let first = lba_i % spb;
            let n = (spb - first).min(end - lba_i);
            if n == spb {
                // The whole blocks from here, at once (one trim list per list's worth).
                let whole = ((end - lba_i) / spb) as u32;
                self.trim_blocks(lbn..lbn + whole)?;
                lba_i += whole as u64 * spb;
                continue;
            } else if self.blocks[lbn as usize].map != NONE || self.is_lost(lbn) {
                // Partial trim: zero the sectors. (Of a lost block too, mapped or not: as
                // a partial write does, it keeps what the FMS maps in the other sectors,
                // zeros for a lost block, and ends the block's name: `lost.rs`.)
                if self.nand.store().keeps_payload() {
                    let mut tmp = vec![0u8; self.lay.block_size as usize];
                    self.read_block(lbn, Some(&mut tmp))?;
                    tmp[(first as usize) * SECTOR..((first + n) as usize) * SECTOR].fill(0);
                    self.write_block(lbn, Some(&tmp))?;
                } else {
                    // The same device work as with payloads: read, then write back.
                    self.read_block(lbn, None)?;
                    self.write_block(lbn, None)?;
                }
            }
            lba_i += n;
        }
        if self.reserve_applies() {
            // The data shrank: the failure reserve may fit again (before the next
            // cleaning, which would otherwise start at the lower marks).
            self.update_marks();
        }
        Ok(())
    }

    fn flush(&mut self) -> DevResult<()> {
        // Every block write and trim is durable when it returns (data, then record; a
        // trim's list); only the store may buffer (image files), so flush syncs it. Trim
        // lists an operation that failed left waiting are written first, and blocks left
        // in a segment a failed program retired (an operation that failed before moving
        // them) move; so do blocks whose reads found them near their code's limit.
        self.write_trims()?;
        if !self.scrub.is_empty() {
            self.scrub_pending()?;
        }
        if !self.retiring.is_empty() || self.index_stale {
            self.repair()?;
        }
        self.nand.sync()?;
        Ok(())
    }
}

#[cfg(test)]
mod flip_tests;
#[cfg(test)]
mod header_code_tests;
#[cfg(test)]
mod segsum_tests;
#[cfg(test)]
mod tests;
