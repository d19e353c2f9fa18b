//! Mount: rebuild every RAM table from flash (segment headers, block records, the index
//! segment). Mount only reads, except that it recreates a lost index segment and, in header
//! mode, clears the live bit of superseded copies that a power cut left live.
//!
//! * A segment whose header is valid contributes its records; one whose header is erased
//!   or unreadable (torn erase, torn header write) is *dirty*: it is erased before reuse,
//!   and its erase count, which was lost, is taken as the largest one known. A header one
//!   bit from a valid one of this medium is read corrected (`read_header`).
//! * A header-mode entry one bit from a valid one is read corrected (`entry_flip`); a
//!   spare-mode record one bit from valid is torn all the same, but reported
//!   (`spare_flip` says why it is not corrected).
//! * For each logical block the record with the highest sequence number wins; if that
//!   record's live flag was cleared (header mode: the block was trimmed) the block is
//!   unmapped. In spare mode a trim list's tombstone unmaps its block when no record of
//!   the block is as new as the trim (`trims.rs`).
//! * A segment's first free slot follows its last slot with a record; if a write of that
//!   slot was begun (a write torn before its record was programmed; spare mode reads the
//!   slot's first page, `slot_unwritten`) it is skipped too (on in-order devices, where no
//!   page after it may be programmed, it is padded before the next write).
//!   The slots after it are not read: the FMS reads them before its first write there
//!   (`Tail`, `Fms::check_tail`), so that a mount costs the same whatever the free space.
//! * Active segments come from the index log (each stream's newest entry only, each segment
//!   to the stream of its newest entry, a full segment included); partly written segments
//!   the log does not name are closed.
//! * A segment whose erase block went bad in use (grown bad) contributes its records like
//!   any other while they may still be the only copies: when its header carries this
//!   format's number and (header mode) the index log does not record it retired. If it
//!   holds winners it is closed and queued to move them out; otherwise, in header mode,
//!   queued to be recorded retired (`Fms::evacuate_retired`).

use std::collections::BTreeMap;

use serde::Serialize;

use nand::blockdev::{DevError, DevResult};
use nand::{BadState, Nand};

use super::layout::{
    ecc_name, ecc_strength_of, header_code_of, medium_time_ps, one_bit_from, IndexEntry, Layout,
    LiveFlag, Record, RecordMode, SegHeader, SegSummary, TrimList, ECC_SPARE_OFFSET, ENTRY,
    FEATURES_KNOWN, FEATURE_FIRST_PAGE, FEATURE_HEADER_CODE, FEATURE_LIVE_BYTE,
    FEATURE_RECORD_CORRECTION, FEATURE_SUMMARY, INDEX_ENTRY, PAD_RECORD, SEG_HEADER, SPARE_RECORD,
    SUMMARY_NO_TIME, SUMMARY_SLOT, TRIM_LIST_LBN,
};
use super::trims::{ListSlot, Tomb};
use super::{Fms, FmsConfig, IndexLog, SegState, Tail, NONE};

struct Best {
    seq: u64,
    phys: u32,
    rec: Record,
}

/// What a mount found to repair or skip on the medium ([`Fms::mount_report`]): all zero
/// after a clean unmount (a flush, then no power cut). `fms info` prints it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MountReport {
    /// Slots holding a record that did not decode: a write torn while its record was
    /// programmed, a pad record written over a torn slot (`Fms::pad_torn_slot`), or
    /// foreign bytes. Their data is ignored.
    pub torn_records: u64,
    /// Header mode: superseded copies whose live bit was still set (an invalidation or an
    /// erase cut by power loss), cleared by the mount.
    pub stale_live_copies: u64,
    /// Spare mode: trim-list slots whose data did not decode, skipped (a torn erase of
    /// their segment after the cleaner had moved what they held).
    pub unreadable_trim_lists: u64,
    /// Segments gone bad in use whose records the mount still read.
    pub grown_bad_read: u64,
    /// Good segments whose header was erased or did not decode (a torn erase or header
    /// program, or a log segment that moved), and older index segments: erased before reuse.
    pub dirty_segments: u64,
    /// The index log was not found (a torn erase while it was rewritten); the mount made
    /// a new one, or left it to the first write when no segment was free.
    pub index_lost: bool,
    /// Segments whose header was one bit from a valid header of this medium, read
    /// corrected (a bit flipped for good; `read_header` in `mount.rs` says why this is
    /// safe): used with their blocks. The header on flash stays as it is until the segment
    /// is next erased (cleaned, wear-levelled, or the index log wraps or moves).
    pub corrected_headers: Vec<u32>,
    /// Header mode: entries one bit from a valid entry, read corrected (a bit flipped for
    /// good, or an entry program a cut stopped one bit short, after its data was
    /// programmed whole).
    pub corrected_entries: Vec<SlotRecord>,
    /// Spare mode, on media with record correction (`layout::FEATURE_RECORD_CORRECTION`):
    /// records one bit from a valid record that a later slot's decoding record follows in
    /// their segment, read corrected (a bit flipped for good in a record written whole;
    /// `settle` in `mount.rs` says why this is safe).
    pub corrected_records: Vec<SlotRecord>,
    /// Spare mode: records one bit from a valid record that were not corrected: on media
    /// with record correction, a segment's last record (a cut can leave
    /// the same bits over torn data, see `docs/format/fms.md`, Mount); on older media,
    /// any. Counted in `torn_records` too, and the block they name reads an older copy
    /// (or zeros). Named here so that the loss is not silent.
    pub flipped_records: Vec<SlotRecord>,
    /// Spare mode: segments whose records the mount took from their segment summary
    /// (one page read) instead of reading each slot's spare area (`segsum.rs`), in the
    /// order it read them. Not a recovery path.
    #[serde(skip)]
    pub summarised: Vec<u32>,
    /// Good segments whose header carries an earlier format number than the medium's
    /// (the first header's): left by a `format` that stopped before it reached them (a
    /// power cut, a killed process). What they hold belongs to the medium that format was
    /// replacing: taken for dirty (counted in `dirty_segments` too), erased before reuse,
    /// their erase counts kept.
    pub earlier_format: Vec<u32>,
    /// Blocks whose newest record sits in a good segment whose header does not decode
    /// and is not erased (bits flipped for good, or other damage): newer than the copy
    /// the mount took (or than none) and than any trim of the block. Such a block is not
    /// mapped (since stop 26; before, an older copy was): it reads zeros until written or
    /// trimmed, and its segment is held (`lost.rs`). A segment's records are not taken
    /// without its header (a torn
    /// erase can leave them behind: see `lost_blocks` in `mount.rs`), but are named here
    /// so that the loss is not silent (`fms info`, `fms check`, a warning from every
    /// command that mounts). A torn erase of a cleaned segment leaves none: its blocks
    /// all have newer copies.
    pub lost_blocks: Vec<SlotRecord>,
    /// Spare mode: tombstones taken from trim lists in segments whose header does not
    /// decode (stop 26). A tombstone can only hide copies older than its trim, so it is
    /// taken wherever it is found; the first flush writes it again into a new list, and
    /// its segment is held back from reuse until then (`lost.rs`). Before stop 26 such a
    /// trim was silently undone: the block read its data from before the trim.
    pub rescued_tombstones: u64,
}

/// A slot whose record a mount found one bit from a valid record, and the block the
/// corrected record names ([`TRIM_LIST_LBN`] for a trim list).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotRecord {
    pub segment: u32,
    pub slot: u32,
    pub block: u32,
}

/// `{"segment", "slot", "block"}`; a trim list's record as `"block": null, "trim_list":
/// true` rather than its marker number (QA stop 26: JSON named block 4294967294).
impl Serialize for SlotRecord {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let list = self.block == TRIM_LIST_LBN;
        let mut m = s.serialize_map(Some(3 + list as usize))?;
        m.serialize_entry("segment", &self.segment)?;
        m.serialize_entry("slot", &self.slot)?;
        m.serialize_entry("block", &(!list).then_some(self.block))?;
        if list {
            m.serialize_entry("trim_list", &true)?;
        }
        m.end()
    }
}

impl MountReport {
    /// What reports call each recovery path a mount can take, in the order of
    /// [`MountReport::counts`] (`fms info`'s "mount found", torture's "mounts that
    /// found").
    pub const PATHS: [&'static str; 6] = [
        "torn records",
        "stale live copies",
        "dirty segments",
        "unreadable trim lists",
        "grown-bad segments read",
        "index lost",
    ];

    /// How often this mount took each of [`MountReport::PATHS`] (the lost index as 0 or
    /// 1).
    pub fn counts(&self) -> [u64; 6] {
        [
            self.torn_records,
            self.stale_live_copies,
            self.dirty_segments,
            self.unreadable_trim_lists,
            self.grown_bad_read,
            u64::from(self.index_lost),
        ]
    }

    /// Whether the mount took none of the recovery paths (a clean unmount), found no
    /// bit flipped for good and no segment of an earlier format.
    pub fn is_clean(&self) -> bool {
        self.counts().iter().all(|&n| n == 0)
            && !self.found_flips()
            && self.earlier_format.is_empty()
            && self.lost_blocks.is_empty()
            && self.rescued_tombstones == 0
    }

    /// How many segments' records the mount took from their summaries
    /// ([`MountReport::summarised`]).
    pub fn summaries_read(&self) -> u64 {
        self.summarised.len() as u64
    }

    /// Whether the mount corrected a header, an entry or a spare record, or found a spare
    /// record one bit from valid (bits flipped for good; none of [`MountReport::PATHS`]).
    pub fn found_flips(&self) -> bool {
        !(self.corrected_headers.is_empty()
            && self.corrected_entries.is_empty()
            && self.corrected_records.is_empty()
            && self.flipped_records.is_empty())
    }
}

/// Header mode: a segment's creation time from its header's (`created`, the time of
/// its erase) and the oldest entry time in it (`oldest_ms`): the later of the two. A
/// segment may wait in the free list after its erase; if only user writes filled it, its
/// oldest entry is the first write, made when it opened; a copy made by the cleaner or a
/// wear swap carries its block's older time, and the header's is kept.
fn opened_ms(created: &mut Option<u64>, oldest_ms: u32) {
    if let (Some(c), Some(t)) = (created.as_mut(), medium_time_ps(oldest_ms as u64)) {
        if oldest_ms != u32::MAX {
            *c = (*c).max(t);
        }
    }
}

/// The first segment header that decodes, scanning good segments in order.
pub(super) fn probe(nand: &mut Nand) -> DevResult<Option<SegHeader>> {
    Ok(scan_headers(nand, 0)?.1)
}

/// What the scan's read of a good segment's header found.
#[derive(Clone, Copy)]
enum Early {
    /// A header that decodes, or erased: as [`read_header`] takes its first read.
    Final(HeaderRead),
    /// Bytes that do not decode: [`read_header`]'s first read, the re-reads to come.
    Undecoded([u8; SEG_HEADER]),
}

/// One read of every good segment's header (`None` for a bad segment), and the medium's
/// first header, the first of the newest format number at or above `min_format` (see
/// [`mount`]).
#[allow(clippy::type_complexity)]
fn scan_headers(
    nand: &mut Nand,
    min_format: u64,
) -> DevResult<(Vec<Option<Early>>, Option<SegHeader>)> {
    let mut hdr = [0u8; SEG_HEADER];
    let mut found = Vec::with_capacity(nand.geometry().blocks as usize);
    let mut newest: Option<SegHeader> = None;
    for seg in 0..nand.geometry().blocks {
        if nand.is_bad(seg) {
            found.push(None);
            continue;
        }
        let first = nand.geometry().first_page(seg);
        nand.read(first, 0, &mut hdr)?;
        found.push(Some(match SegHeader::decode(&hdr) {
            Ok(None) => Early::Final(HeaderRead::Erased),
            Ok(Some(h)) => {
                if h.format_id >= min_format && newest.is_none_or(|n| h.format_id > n.format_id) {
                    newest = Some(h);
                }
                Early::Final(HeaderRead::Valid(h))
            }
            Err(_) => Early::Undecoded(hdr),
        }));
    }
    Ok((found, newest))
}

/// Mount: the medium is the newest format number a good segment's header carries, read
/// in one scan of the headers before anything else (see "Mount" in `docs/format/fms.md`;
/// a format writes its first header to a segment that holds nothing of the old medium,
/// which need not be the first good one, `Fms::format_medium`). Should a read of the
/// mount itself find a newer one than the scan (a header the scan's read could not
/// decode, read whole again), it mounts again from the newest.
pub(super) fn mount(
    nand: Nand,
    make: MakeConfig<'_>,
) -> Result<Fms, (DevError, Option<Box<Nand>>)> {
    let clock0 = nand.clock_ps();
    let (mut nand, mut min_format) = (nand, 0);
    loop {
        match mount_from(nand, make, clock0, min_format)? {
            Ok(f) => return Ok(f),
            Err((n, newer)) => (nand, min_format) = (*n, newer),
        }
    }
}

/// What [`mount_from`] did: mounted, or met a header of a newer format number than the
/// medium's so far (the device given back to mount again from it).
type MountFrom = Result<Fms, (Box<Nand>, u64)>;

/// The configuration a mount runs with, made from the medium's first header (`None`: no
/// segment header decodes): [`super::Fms::mount_with`].
pub(super) type MakeConfig<'a> = &'a dyn Fn(Option<&SegHeader>) -> DevResult<FmsConfig>;

/// A mount that takes headers of format numbers below `min_format` for segments of an
/// earlier format; gives the device back with the format number of a newer header it
/// met. On an error the device comes back too (`None` when `Fms::new_empty` refused the
/// configuration, after the scan's reads, before any program), for
/// [`super::Fms::mount_or_return`].
fn mount_from(
    mut nand: Nand,
    make: MakeConfig<'_>,
    clock0: u64,
    min_format: u64,
) -> Result<MountFrom, (DevError, Option<Box<Nand>>)> {
    // The headers, and the medium's format number: the mount reads each header once (the
    // loop below takes the scan's reads that are final).
    let (early, newest) = match scan_headers(&mut nand, min_format) {
        Ok(found) => found,
        Err(e) => return Err((e, Some(Box::new(nand)))),
    };
    let cfg = match make(newest.as_ref()) {
        Ok(cfg) => cfg,
        Err(e) => return Err((e, Some(Box::new(nand)))),
    };
    let min_format = newest.map_or(min_format, |h| h.format_id.max(min_format));
    // The capacity the medium records (taken as the caller's too when it names the same:
    // `Sizing`).
    let mut recorded = None;
    if let Some(h) = newest {
        if h.logical_blocks > 0 && h.block_size == cfg.block_size {
            recorded = Some(h.logical_blocks as u64);
        }
    }
    // Whether pages carry ECC codes is the medium's (its headers' features), not the
    // caller's.
    let cfg = FmsConfig { ecc: false, ..cfg };
    let mut f = Fms::new_empty(nand, cfg, recorded).map_err(|e| (e, None))?;
    match rebuild(&mut f, early, min_format, clock0) {
        Ok(None) => Ok(Ok(f)),
        Ok(Some(newer)) => Ok(Err((Box::new(f.into_nand()), newer))),
        Err(e) => Err((e, Some(Box::new(f.into_nand())))),
    }
}

/// The body of [`mount_from`] on the empty FMS `f`: rebuild every table from the medium
/// (`early`: the scan's reads of the headers).
/// `Some(n)` when it met a header of a newer format number `n` (mount again from it).
fn rebuild(
    f: &mut Fms,
    mut early: Vec<Option<Early>>,
    min_format: u64,
    clock0: u64,
) -> DevResult<Option<u64>> {
    let mut lay = f.lay.clone();
    let geo = f.nand.geometry().clone();
    let slots = lay.slots;
    let mut found = Found {
        best: (0..f.logical).map(|_| None).collect(),
        stale_live: Vec::new(),
        lists: Vec::new(),
        entries: vec![0u8; slots as usize * ENTRY],
        reads: Vec::with_capacity(slots as usize),
        torn: 0,
        newest_ms: 0,
        oldest_ms: u32::MAX,
        flips: Flips::default(),
    };
    // Each segment's header time (device clock; `None`: no header of this format, or a
    // time beyond `MAX_MEDIUM_TIME_MS`): its creation time, and in spare mode its blocks'
    // last-write time.
    let mut hdr_ps: Vec<Option<u64>> = vec![None; lay.segments as usize];
    let mut any_header = false;
    let mut index_seg: Option<(u32, u64)> = None;
    // Dirty segments whose erase count is known (their header reads): kind-1 segments
    // older than the index segment, and segments of an earlier format (after a stopped
    // format, most of the medium: a flag per segment). The others (header erased or
    // unreadable) take the largest count known.
    let mut known_count = vec![false; lay.segments as usize];
    let mut max_ec = 0u32;
    // The format number of the medium: the first good segment header's (of `min_format`
    // or above).
    let mut format_id: Option<u64> = (min_format > 0).then_some(min_format);
    // Segments that went bad in use (grown bad) with a readable header: their records are
    // read once the index log is known.
    let mut grown: Vec<(u32, SegHeader)> = Vec::new();
    // Grown-bad segments whose header was corrected: checked once the format is known.
    let mut grown_corrected: Vec<(u32, SegHeader)> = Vec::new();
    // The first good segment's header that decodes without correction (looked for ahead
    // when a corrected header comes first): what a corrected header must match.
    let mut medium: Option<SegHeader> = None;
    let mut looked_ahead = false;
    // Grown-bad segments whose header did not decode before the medium's header code was
    // known: read again with it once the loop is done.
    let mut grown_unread: Vec<u32> = Vec::new();
    // Good segments whose header did not decode (not erased): their records are looked
    // at once the tables are known, for blocks they would lose (`lost_blocks`).
    let mut unreadable: Vec<u32> = Vec::new();
    for seg in 0..lay.segments {
        let si = seg as usize;
        // The code the medium's headers carry (`FEATURE_HEADER_CODE`), known from its first
        // header that decodes without correction.
        let code = medium.and_then(|m| header_code_of(m.features));
        if f.nand.is_bad(seg) {
            f.segs[si].state = SegState::Bad;
            f.segs[si].next = slots;
            if f.nand.block_info(seg).bad == BadState::Grown {
                match read_header(f, seg, code)? {
                    HeaderRead::Valid(h) => {
                        f.segs[si].erase_count = h.erase_count;
                        grown.push((seg, h));
                    }
                    HeaderRead::Corrected(h) => grown_corrected.push((seg, h)),
                    HeaderRead::Unreadable if medium.is_none() => grown_unread.push(seg),
                    HeaderRead::Erased | HeaderRead::Unreadable => {}
                }
            }
            continue;
        }
        let mut read = match early[si].take() {
            Some(Early::Final(r)) => r,
            // The scan's read, which did not decode, is the first of `read_header`'s.
            Some(Early::Undecoded(b)) => read_header_after(f, seg, code, Some(b))?,
            None => read_header(f, seg, code)?,
        };
        if read == HeaderRead::Unreadable && medium.is_none() && !looked_ahead {
            // The medium's header code is not known yet: look ahead for its first header
            // that decodes, and read this one again with the code it says.
            looked_ahead = true;
            medium = first_valid_after(f, seg, min_format)?;
            if let Some(t) = medium.and_then(|m| header_code_of(m.features)) {
                read = read_header(f, seg, Some(t))?;
            }
        }
        let h = match read {
            // A newer format than the medium's so far: mount again, from it.
            HeaderRead::Valid(h) if format_id.is_some_and(|m| h.format_id > m) => {
                return Ok(Some(h.format_id));
            }
            HeaderRead::Valid(h) => {
                if h.format_id >= min_format {
                    medium.get_or_insert(h);
                }
                h
            }
            // Bits flipped for good (`read_header` says why a correction is safe): the
            // segment is used as it is, its header left as it is on flash (mount writes
            // nothing for it), until it is next erased.
            HeaderRead::Corrected(h) => {
                if medium.is_none() && !looked_ahead {
                    looked_ahead = true;
                    medium = first_valid_after(f, seg, min_format)?;
                }
                let m = medium.map(|m| (m.format_id, m.features));
                if !header_fits(&h, &lay, m) {
                    f.segs[si].state = SegState::Dirty;
                    unreadable.push(seg);
                    continue;
                }
                f.mount_report.corrected_headers.push(seg);
                h
            }
            HeaderRead::Erased => {
                f.segs[si].state = SegState::Dirty;
                continue;
            }
            HeaderRead::Unreadable => {
                f.segs[si].state = SegState::Dirty;
                unreadable.push(seg);
                continue;
            }
        };
        // A format numbers the medium one above every header it finds, so once it has
        // written one, the medium's first header (the first of the newest number: a newer
        // one met later mounts again, above) is of the new format; one of an earlier
        // format is a segment the format did not reach (it was stopped), whatever its
        // block size or features.
        if format_id.is_some_and(|m| h.format_id < m) {
            f.segs[si].state = SegState::Dirty;
            f.segs[si].erase_count = h.erase_count;
            max_ec = max_ec.max(h.erase_count);
            f.erase_seq = f.erase_seq.max(h.erase_seq.saturating_add(1));
            f.mount_report.earlier_format.push(seg);
            known_count[seg as usize] = true;
            continue;
        }
        if h.block_size != lay.block_size || h.slots != slots {
            return Err(DevError::corrupt(format!(
                "segment {seg}: formatted with {}-byte blocks ({} per segment); mounting with {}-byte blocks ({slots})",
                h.block_size, h.slots, lay.block_size
            )));
        }
        let t = refuse_unknown(seg, &h)?;
        hdr_ps[si] = medium_time_ps(h.time_ms);
        if any_header {
            if let Some((this, was)) = unlike(h.features, lay.features()) {
                return Err(DevError::corrupt(format!(
                    "segment {seg}: formatted {this}, unlike the segments before it ({was})"
                )));
            }
        } else {
            // The first header's features are the medium's: its ECC code, how header-mode
            // entries carry the live state, whether headers carry the code.
            let live = h.features & FEATURE_LIVE_BYTE != 0;
            if live && lay.mode == RecordMode::Spare {
                return Err(DevError::corrupt(format!(
                    "segment {seg}: header features {:#x} say live byte (header mode), but this device keeps its records in spare areas (nop >= 1): written for another device, or corrupt",
                    h.features
                )));
            }
            let hcode = h.features & FEATURE_HEADER_CODE != 0;
            if hcode && (lay.mode != RecordMode::Spare || t == 0) {
                return Err(DevError::corrupt(format!(
                    "segment {seg}: header features {:#x} say header code, which needs ECC in spare mode: written for another device, or corrupt",
                    h.features
                )));
            }
            let summary = h.features & FEATURE_SUMMARY != 0;
            if summary && lay.clone().with_summary(true).summary_page.is_none() {
                return Err(DevError::corrupt(format!(
                    "segment {seg}: header features {:#x} say segment summaries, which need spare mode and room after the last slot: written for another device, or corrupt",
                    h.features
                )));
            }
            let record_correction = h.features & FEATURE_RECORD_CORRECTION != 0;
            if record_correction && lay.mode != RecordMode::Spare {
                return Err(DevError::corrupt(format!(
                    "segment {seg}: header features {:#x} say record correction, which is for spare records (nop >= 1), but this device keeps its records in segment headers: written for another device, or corrupt",
                    h.features
                )));
            }
            let first_page = h.features & FEATURE_FIRST_PAGE != 0;
            if first_page && lay.mode != RecordMode::Spare {
                return Err(DevError::corrupt(format!(
                    "segment {seg}: header features {:#x} say first-page slot tests, which are for spare records (nop >= 1), but this device keeps its records in segment headers: written for another device, or corrupt",
                    h.features
                )));
            }
            lay = lay
                .with_live_byte(live)
                .with_header_code(hcode)
                .with_summary(summary)
                .with_record_correction(record_correction)
                .with_first_page(first_page);
            if t > 0 {
                lay = lay.with_ecc(t, &geo).map_err(|e| {
                    DevError::corrupt(format!("segment {seg}: header says ECC, but {e}"))
                })?;
                f.cfg.ecc = true;
                f.cfg.ecc_strength = t;
                f.nand.set_overflip_at(super::overflip_at(t));
            }
            f.lay = lay.clone();
            super::ram::check_scrub_threshold(&f.lay, &f.cfg)?;
            // Each segment's header erase sequence, for the summaries this FMS writes
            // (allocated by the medium's feature, not the configuration's).
            f.segsum = super::segsum::Summaries::for_layout(&lay);
            f.cfg.live_byte = live;
            f.cfg.header_code = hcode;
            f.cfg.record_correction = record_correction;
            f.cfg.first_page_test = first_page;
        }
        any_header = true;
        format_id.get_or_insert(h.format_id);
        f.segs[si].erase_count = h.erase_count;
        if let Some(s) = &mut f.segsum {
            s.set_header(seg, h.erase_seq);
        }
        max_ec = max_ec.max(h.erase_count);
        f.erase_seq = f.erase_seq.max(h.erase_seq.saturating_add(1));
        if h.kind == 1 {
            // The index segment: the kind-1 header with the highest erase sequence. An
            // older one is a log that moved (`Fms::move_index`) before it was erased:
            // dirty, its erase count known.
            match index_seg {
                Some((_, q)) if q > h.erase_seq => {
                    f.segs[si].state = SegState::Dirty;
                    known_count[seg as usize] = true;
                }
                _ => {
                    if let Some((o, _)) = index_seg {
                        f.segs[o as usize].state = SegState::Dirty;
                        known_count[o as usize] = true;
                    }
                    index_seg = Some((seg, h.erase_seq));
                    f.segs[si].state = SegState::Index;
                }
            }
            continue;
        }
        let scanned = read_records(f, seg, &mut found, (h.erase_seq, h.format_id))?;
        opened_ms(&mut hdr_ps[si], found.oldest_ms);
        let (next, torn) = first_free(f, seg, scanned)?;
        f.segs[si].next = next;
        // Slots from `next` on are taken for erased unread; the first write into them
        // reads them first (`Fms::check_tail`): a torn erase may have kept old pages. On
        // in-order devices a torn slot at `next` is padded first (`Fms::pad_torn_slot`).
        if torn {
            f.segs[si].tail = Tail::Torn;
        } else if next < slots {
            f.segs[si].tail = Tail::Unchecked;
        }
        f.segs[si].state = if next == 0 {
            SegState::Free
        } else {
            SegState::Used
        };
    }
    if !any_header {
        return Err(DevError::corrupt(
            "no FMS segment header found: not an FMS medium (format it first)",
        ));
    }
    f.format_id = format_id.unwrap_or(0);
    // Grown-bad segments read before the medium's header code was known: again, with it.
    if let Some(t) = lay.header_code_t() {
        for seg in grown_unread {
            if let HeaderRead::Corrected(h) = read_header(f, seg, Some(t))? {
                grown_corrected.push((seg, h));
            }
        }
    }
    // Corrected headers of grown-bad segments: taken when they are of this format (and
    // then read as a valid one is), as `Fms::went_bad` does.
    let medium = Some((f.format_id, lay.features()));
    for (seg, h) in grown_corrected {
        if header_fits(&h, &lay, medium) {
            f.segs[seg as usize].erase_count = h.erase_count;
            f.mount_report.corrected_headers.push(seg);
            grown.push((seg, h));
        }
    }
    grown.sort_by_key(|&(seg, _)| seg);
    f.mount_report.corrected_headers.sort_unstable();
    // A grown-bad index segment newer than the good ones: its entry program failed and a
    // power cut came before the log moved to a free segment (`Fms::move_index`). Its
    // retired entries are still readable, and the only record of them: read it, and move
    // the log at the first write, trim or flush (`index_stale`).
    let mut bad_log = None;
    // Of this format, with this medium's geometry.
    let format_id = f.format_id;
    let ours = |h: &SegHeader| {
        h.block_size == lay.block_size && h.slots == slots && h.format_id == format_id
    };
    for &(seg, h) in &grown {
        if h.kind != 1 || !ours(&h) {
            continue;
        }
        f.erase_seq = f.erase_seq.max(h.erase_seq.saturating_add(1));
        let newest = index_seg.is_none_or(|(_, q)| h.erase_seq > q)
            && bad_log.as_ref().is_none_or(|&(_, q, _)| h.erase_seq > q);
        if newest && lay.mode == RecordMode::Header {
            let log = read_index(f, seg)?;
            if !log.retired.is_empty() {
                bad_log = Some((seg, h.erase_seq, log));
            }
        }
    }
    if bad_log.is_some() {
        if let Some((o, _)) = index_seg.take() {
            f.segs[o as usize].state = SegState::Dirty;
            known_count[o as usize] = true;
        }
    }
    for (i, s) in f.segs.iter_mut().enumerate() {
        if s.state == SegState::Dirty && !known_count[i] {
            s.erase_count = max_ec;
        }
    }
    let index_seg = index_seg.map(|(s, _)| s);

    // The index log: active segments (used below) and retired ones.
    let log = match (index_seg, bad_log) {
        (_, Some((_, _, log))) => Some(log),
        (Some(ix), None) => Some(read_index(f, ix)?),
        (None, None) => None,
    };

    // Grown-bad segments: their erase counts, and the records of those not yet retired
    // (header mode; in spare mode none is ever recorded retired).
    let mut read_grown = Vec::new();
    for (seg, h) in grown {
        if !ours(&h) {
            continue;
        }
        hdr_ps[seg as usize] = medium_time_ps(h.time_ms);
        // Its records are read like a good segment's: the same features, or a refusal.
        refuse_unknown(seg, &h)?;
        if h.kind != 0 {
            continue;
        }
        if let Some((this, was)) = unlike(h.features, lay.features()) {
            return Err(DevError::corrupt(format!(
                "segment {seg} (grown bad): formatted {this}, unlike the good segments ({was})"
            )));
        }
        if log.as_ref().is_some_and(|l| l.retired.contains(&seg)) {
            f.retired.push(seg);
            continue;
        }
        if let Some(s) = &mut f.segsum {
            s.set_header(seg, h.erase_seq);
        }
        read_records(f, seg, &mut found, (h.erase_seq, h.format_id))?;
        opened_ms(&mut hdr_ps[seg as usize], found.oldest_ms);
        read_grown.push(seg);
    }

    // Spare mode: the tombstones of the trim lists, which unmap their blocks.
    let Found {
        best,
        stale_live,
        lists,
        torn,
        newest_ms,
        flips,
        ..
    } = found;
    f.mount_report.torn_records = torn;
    f.mount_report.corrected_entries = flips.corrected;
    f.mount_report.corrected_records = flips.corrected_records;
    f.mount_report.flipped_records = flips.flipped;
    // Spare mode: a trim list whose record is one bit from valid is not taken as a list
    // (`spare_flip`), but its tombstones are safe to take as rescued ones (below): the
    // list's own checksum vouches for its entries, and a tombstone can only hide copies
    // older than its trim. Every mount decides alike from the bytes, the first after a
    // cut included, so the numbers it counts are never handed out again.
    let flipped_lists = flips.lists;
    if lay.mode == RecordMode::Header {
        // (Spare-mode records have no live bit: every superseded copy reads live.)
        f.mount_report.stale_live_copies = stale_live.len() as u64;
    }
    f.mount_report.grown_bad_read = read_grown.len() as u64;
    // The records behind headers that do not decode (not erased), read once the others
    // are: trim lists to rescue, blocks to name lost. (A format stopped part way leaves
    // segments of the medium it was replacing, one of them perhaps torn mid-erase: their
    // records are not this medium's, and sequence numbers do not tell them apart. Nothing
    // is read behind such headers while those segments are left.)
    let behind = if f.mount_report.earlier_format.is_empty() {
        records_behind(f, &unreadable)
    } else {
        Vec::new()
    };
    let rescue: Vec<(u32, u64)> = behind
        .iter()
        .filter(|(_, r)| r.lbn == TRIM_LIST_LBN)
        .map(|(at, r)| (f.phys(at.segment, at.slot), r.seq))
        .chain(flipped_lists)
        .collect();
    let rescued = read_trim_lists(f, &lists, &rescue, &best)?;
    if !behind.is_empty() || !rescued.is_empty() {
        let (lost, newest) = lost_blocks(f, &behind, &best);
        // A write or trim of a lost block must beat its lost record here and at every
        // later mount: numbers go on above the newest such record. Their segments are
        // held back from reuse while they hold one (`lost.rs`), as are those whose
        // rescued tombstones are not yet written again.
        f.seq = f.seq.max(newest.saturating_add(1));
        f.lost = super::lost::Lost::from_mount(&lost, &rescued);
        f.mount_report.lost_blocks = lost;
    }

    // The device clock goes on from the newest time on the medium (headers, and in header
    // mode entries), so that ages continue across mounts (docs/format/fms.md, Mount step
    // 7). A header written below (a new index segment) carries the resumed time.
    let newest = hdr_ps
        .iter()
        .flatten()
        .copied()
        .chain(medium_time_ps(newest_ms as u64))
        .max()
        .unwrap_or(0);
    let jump = newest.saturating_sub(f.nand.clock_ps());
    f.nand.advance_clock_to(newest);
    f.medium_ps = newest;
    // A block or segment whose time is unknown (spare records carry none; a dirty
    // segment's header was lost; a time beyond the bound) gets this one: young, not
    // ancient.
    let resumed = f.nand.clock_ps();

    // Translation table.
    for (lbn, b) in best.into_iter().enumerate() {
        let Some(b) = b else { continue };
        // Saturating: a corrupt record may carry the largest number; writes then
        // refuse (`check_seq`) instead of wrapping.
        f.seq = f.seq.max(b.seq.saturating_add(1));
        // A lost block is not mapped to its older copy (spare mode; in header mode
        // that copy's live bit was cleared when the lost one was written): the cleaner
        // would move it under a newer number, which would then beat the lost record and
        // end the block's name, the older data read back with no warning (a randomised
        // test found it, stop 26). A lost block reads zeros until written or trimmed.
        if !b.rec.live || f.trims.tomb.contains_key(&(lbn as u32)) || f.is_lost(lbn as u32) {
            continue;
        }
        let l = lbn as u32;
        f.blocks[lbn].map = b.phys;
        f.rev[b.phys as usize] = l;
        let seg = f.split(b.phys).0 as usize;
        f.segs[seg].valid += 1;
        // Header mode: the entry's time of the block's last user write (32-bit
        // milliseconds, within the bound). Spare mode: the header time of the segment
        // holding the block, which was written after it (a lower bound; for a copy made by
        // the cleaner, the copy's time).
        let t = match lay.mode {
            RecordMode::Header => medium_time_ps(b.rec.time_ms as u64),
            // With the time its segment's summary kept (stop 23).
            RecordMode::Spare if b.rec.time_ms != SUMMARY_NO_TIME => {
                medium_time_ps(b.rec.time_ms as u64)
            }
            RecordMode::Spare => hdr_ps[seg],
        };
        let t = t.unwrap_or(resumed);
        f.blocks[lbn].updates = b.rec.updates;
        f.update_sum += b.rec.updates as u64;
        f.mapped += 1;
        f.blocks[lbn].region = b.rec.region.min(f.cfg.regions - 1);
        f.blocks[lbn].write_ps = t;
        f.blocks[lbn].region_ps = t;
        f.blocks[lbn].readonly |= b.rec.readonly;
        if f.keeps_hot {
            f.hot.set(l, b.rec.updates as f64, 0);
        }
    }

    // DAC: a closed segment belongs to the region most of its live blocks are in (the
    // region table is not on flash; the per-block records are). The cleaner's region
    // selection reads it; the active segments get theirs from the index below.
    if f.cfg.regions > 1 {
        let mut count = vec![[0u32; 8]; lay.segments as usize];
        for (lbn, phys) in f.blocks.iter().map(|b| b.map).enumerate() {
            if phys != NONE {
                count[f.split(phys).0 as usize][f.blocks[lbn].region as usize] += 1;
            }
        }
        for (s, c) in f.segs.iter_mut().zip(&count) {
            if s.valid > 0 {
                // The first (coldest) region among the most common.
                let top = *c.iter().max().expect("eight regions");
                s.stream = c.iter().position(|&n| n == top).expect("a maximum") as u8;
            }
        }
    }

    // Finish interrupted invalidations: a superseded copy left live would come back if
    // the newer copy's segment were cleaned after the block was trimmed.
    if lay.mode == RecordMode::Header {
        for phys in stale_live {
            let (seg, slot) = f.split(phys);
            f.clear_live(seg, slot)?;
        }
    }

    // Grown-bad segments read above: those holding winners are closed and queued to move
    // them out; in header mode the others are queued to be recorded retired.
    for seg in read_grown {
        let s = &mut f.segs[seg as usize];
        if s.valid > 0 {
            s.state = SegState::Used;
            f.retiring.push(seg);
        } else if lay.mode == RecordMode::Header {
            f.retiring.push(seg);
        }
    }

    // Active segments from the index log.
    match log {
        Some(IndexRead {
            seg: ix,
            mut active,
            next,
            seq,
            ..
        }) => {
            // Newest first; equal numbers (saturated at the largest) by place in the log.
            active.sort_by_key(|&(k, e)| std::cmp::Reverse((e.seq, k)));
            // Only a stream's newest entry counts: older ones name segments it left,
            // which may since have been cleaned and reused. A full segment stays active
            // (as in the running FMS) until the stream's next write moves on. And only a
            // segment's newest entry counts: a stream whose newest entry names a segment
            // that a newer entry gave to another stream has none. It lost that segment
            // without an entry of its own (a mount that found it dirty, a failed erase),
            // and the segment was then reused (randomised sweep, seed 1605: a torn erase
            // of a stream's segment, which the next mount found dirty and freed; another
            // stream then wrote it and moved on, and the mount after that gave it back to
            // the first stream, which the running FMS had left without one).
            let mut decided = vec![false; f.active.len()];
            let mut named = std::collections::HashSet::new();
            for (_, e) in active {
                let (st, sg) = (e.stream as usize, e.seg);
                let newest_for_seg = named.insert(sg);
                if st >= f.active.len() || decided[st] {
                    continue;
                }
                decided[st] = true;
                // (A segment another stream already took was named by a newer entry.)
                if !newest_for_seg || sg >= lay.segments || f.nand.is_bad(sg) {
                    continue;
                }
                let s = &mut f.segs[sg as usize];
                if !matches!(s.state, SegState::Free | SegState::Used) {
                    continue;
                }
                s.state = SegState::Active;
                s.stream = e.stream;
                f.active[st] = sg;
            }
            f.index = Some(IndexLog { seg: ix, next, seq });
            f.index_tail_unchecked = true;
            if f.nand.is_bad(ix) {
                // Read only: full, so that the first entry moves it.
                f.index.as_mut().unwrap().next = lay.index_capacity();
                f.index_stale = true;
            }
        }
        None => {
            f.mount_report.index_lost = true;
            // Lost (torn erase while wrapping, or a cut before a bad index segment found
            // a new home): make a free or dirty segment the index. With none left, the
            // FMS runs without one until the first write, trim or flush has cleaned one
            // (`Fms::repair`).
            loop {
                let cand = (0..lay.segments).find(|&s| {
                    matches!(f.segs[s as usize].state, SegState::Free | SegState::Dirty)
                        && !f.is_held(s)
                });
                let Some(s) = cand else {
                    f.index_stale = true;
                    break;
                };
                if f.erase_and_header(s, 1)? {
                    f.segs[s as usize].state = SegState::Index;
                    f.index = Some(IndexLog {
                        seg: s,
                        next: 0,
                        seq: 1,
                    });
                    // Its header may now carry the largest count: the one a later mount
                    // gives the dirty segments.
                    let ec = f.segs[s as usize].erase_count;
                    if ec > max_ec {
                        for (i, d) in f.segs.iter_mut().enumerate() {
                            if d.state == SegState::Dirty && !known_count[i] {
                                d.erase_count = ec;
                            }
                        }
                    }
                    break;
                }
            }
        }
    }

    // Sequence numbers running out (a corrupt record carrying the largest one): leave no
    // segment open for writing, so that the first write asks for one and is refused; the
    // medium still reads.
    if f.check_seq_room().is_err() {
        for a in f.active.iter_mut() {
            if *a != NONE {
                f.segs[*a as usize].state = SegState::Used;
                *a = NONE;
            }
        }
    }

    // A segment was created when its header was written. Its last invalidation is not
    // recorded: taken as its creation, as the running FMS has it for a segment none of
    // whose blocks was superseded since it opened.
    let held = f.held_segments();
    for (i, s) in f.segs.iter_mut().enumerate() {
        s.created_ps = hdr_ps[i].unwrap_or(resumed);
        s.last_inval_ps = s.created_ps;
        if matches!(s.state, SegState::Free | SegState::Dirty) && !held.contains(&(i as u32)) {
            f.free.push_back(i as u32);
        }
    }
    f.mount_report.dirty_segments =
        f.segs.iter().filter(|s| s.state == SegState::Dirty).count() as u64;
    f.rebuild_used();
    f.update_marks();
    // The mount's own device time: the clock's jump to the medium's time is not spent.
    let end = f.nand.clock_ps();
    f.mount_ps = end.saturating_sub(clock0).saturating_sub(jump);
    // The session's time, as the age unit reads it, is the clock's since the device was
    // opened, the jump aside: the mount's reads count, as they did before the clock
    // resumed from the medium.
    f.epoch_ps = clock0.saturating_add(jump);
    Ok(None)
}

/// Spare mode: read the trim lists (`lists`: slot, record number) and keep, for each
/// block, the newest tombstone that beats every record of it (`best`). A list whose data
/// does not decode is skipped: only a torn erase of its segment clears part of a slot
/// whose record is intact, and the cleaner moved what the list held that was still needed
/// before that erase. The slots holding a live tombstone count as valid.
///
/// `rescue` lists trim-list slots in segments whose header does not decode (see
/// [`MountReport::rescued_tombstones`]): read the same way, but a tombstone that wins
/// there is waiting to be written again (`Trims::pending`), not kept where it is. Returns
/// the segments holding such tombstones, to be held until they are written.
fn read_trim_lists(
    f: &mut Fms,
    lists: &[(u32, u64)],
    rescue: &[(u32, u64)],
    best: &[Option<Best>],
) -> DevResult<Vec<u32>> {
    if lists.is_empty() && rescue.is_empty() {
        return Ok(Vec::new());
    }
    let mut buf = vec![0u8; f.lay.block_size as usize];
    // lbn → (trim's number, list record's number, slot).
    let mut won: BTreeMap<u32, (u64, u64, u32)> = BTreeMap::new();
    let mut kept: BTreeMap<u32, Vec<(u32, u64)>> = BTreeMap::new();
    let rescuing = |phys: u32| rescue.iter().any(|&(p, _)| p == phys);
    for &(phys, rseq) in lists.iter().chain(rescue) {
        f.seq = f.seq.max(rseq.saturating_add(1));
        // Read again while it does not decode (`read_until`; with ECC, `read_phys`
        // corrects and retries first, and a list it cannot correct is unreadable, as a
        // list that does not decode is).
        let mut read = f.read_phys(phys, Some(&mut buf));
        for _ in 0..f.cfg.meta_read_retries() {
            if read.is_err() || TrimList::decode(&buf).is_some() {
                break;
            }
            f.stats.read_retries += 1;
            read = f.read_phys(phys, Some(&mut buf));
        }
        match read {
            Ok(()) => {}
            // With ECC, a chunk no read could correct: the list counts when it ends before
            // that chunk (`list_before_bad_chunk`).
            Err(DevError::Corrupt(_)) if f.lay.ecc() => {
                if !list_before_bad_chunk(f, phys, &mut buf)? {
                    buf.fill(0);
                }
            }
            Err(DevError::Corrupt(_)) => buf.fill(0),
            Err(e) => return Err(e),
        }
        let Some(entries) = TrimList::decode(&buf) else {
            f.mount_report.unreadable_trim_lists += 1;
            continue;
        };
        for &(lbn, seq) in &entries {
            if lbn as u64 >= f.logical {
                let (seg, slot) = f.split(phys);
                return Err(DevError::corrupt(format!(
                    "segment {seg} slot {slot}: trim list names block {lbn} beyond the {}-block capacity",
                    f.logical
                )));
            }
            f.seq = f.seq.max(seq.saturating_add(1));
            if best[lbn as usize].as_ref().is_some_and(|b| b.seq >= seq) {
                continue;
            }
            let w = won.entry(lbn).or_insert((seq, rseq, phys));
            if (seq, rseq) > (w.0, w.1) {
                *w = (seq, rseq, phys);
            }
        }
        kept.insert(phys, entries);
    }
    let mut held = Vec::new();
    for (&lbn, &(seq, _, at)) in &won {
        if rescuing(at) {
            f.trims.tomb.insert(lbn, Tomb { seq, at: NONE });
            f.trims.pending.push(lbn);
            f.mount_report.rescued_tombstones += 1;
            held.push(f.split(at).0);
        } else {
            f.trims.tomb.insert(lbn, Tomb { seq, at });
        }
    }
    held.sort_unstable();
    held.dedup();
    for (phys, entries) in kept {
        if rescuing(phys) {
            continue;
        }
        let live = entries
            .iter()
            .filter(|&&(lbn, seq)| f.trims.tomb.get(&lbn) == Some(&Tomb { seq, at: phys }))
            .count() as u32;
        if live == 0 {
            continue;
        }
        let seg = f.split(phys).0 as usize;
        f.segs[seg].valid += 1;
        f.trims.lists.insert(phys, ListSlot { entries, live });
    }
    Ok(held)
}

/// With ECC, a trim-list slot that holds a 512-byte chunk its code cannot correct (after
/// every re-read): read once more a page at a time, correcting each chunk on its own into
/// `buf`; true when the chunks before the first uncorrectable one hold the whole list
/// (its header and entries, `16 + 12·n` bytes) and it decodes. The list's checksum covers
/// exactly those bytes, so the list is then what was written; the chunks past it hold
/// the `0xFF` padding and its codes, which nothing reads. A torn erase that cleared part
/// of the list's bytes fails the checksum or a chunk before the end, and the list is
/// skipped as before (stop 22; until then any uncorrectable chunk in the slot skipped the
/// list, and the blocks it trimmed came back with their old data).
#[cold]
#[inline(never)]
fn list_before_bad_chunk(f: &mut Fms, phys: u32, buf: &mut [u8]) -> DevResult<bool> {
    let (seg, slot) = f.split(phys);
    let geo = f.nand.geometry();
    let (ps, raw) = (geo.page_size as usize, geo.raw_page_size() as usize);
    let p0 = geo.first_page(seg) + f.lay.slot_offset(slot) / ps as u64;
    let (t, chunk) = (f.lay.ecc_t, nand::ecc::ECC_CHUNK);
    let cb = nand::ecc::code_bytes(t);
    let mut page = vec![0u8; raw];
    // Bytes of the slot before its first uncorrectable chunk.
    let mut good = 0usize;
    'pages: for k in 0..f.lay.pages_per_slot as usize {
        f.nand.read(p0 + k as u64, 0, &mut page)?;
        let (data, spare) = page.split_at_mut(ps);
        for (c, d) in data.chunks_exact_mut(chunk).enumerate() {
            let code = &spare[super::layout::ECC_SPARE_OFFSET + c * cb..][..cb];
            let rep = nand::ecc::correct_page_t(t, d, code)
                .map_err(|e| DevError::config(format!("ecc: {e}")))?;
            if rep.uncorrectable_chunks > 0 {
                break 'pages;
            }
            f.stats.ecc_corrected_bits += rep.corrected_bits as u64;
            buf[good..good + chunk].copy_from_slice(d);
            good += chunk;
        }
    }
    if good < super::layout::TRIM_LIST_HEADER {
        return Ok(false);
    }
    let n = u32::from_le_bytes(buf[4..8].try_into().expect("4 bytes")) as usize;
    let end =
        super::layout::TRIM_LIST_HEADER.saturating_add(n.saturating_mul(super::layout::TRIM_ENTRY));
    buf[good..].fill(0xFF);
    Ok(end <= good && TrimList::decode(buf).is_some())
}

/// A segment's first free slot as mount finds it, from the last slot holding a record
/// (torn or not): the slot after it, skipping torn slots — data programmed without its
/// record (a cut inside a slot, or inside a cleaner's run, whose entries are programmed
/// after its data). On devices whose pages must be programmed in order, the page after
/// a torn one cannot be skipped: the first free slot is the torn one, and `true` says
/// that it must be padded before a write (`Fms::pad_torn_slot`).
///
/// A slot counts as torn when a write of it was begun ([`slot_unwritten`]). `scanned.stop`:
/// a slot the record scan already found unwritten ([`for_each_record`]'s stop), not read
/// again. On media with record correction, a
/// segment whose tail holds a record one or two bits from valid (`scanned.closed`,
/// [`settle`]) is full: no slot is written after such a record.
fn first_free(f: &mut Fms, seg: u32, scanned: Scanned) -> DevResult<(u32, bool)> {
    let slots = f.lay.slots;
    if scanned.closed {
        return Ok((slots, false));
    }
    let erased = scanned.stop;
    let mut next = scanned.last_used.map_or(0, |s| s + 1);
    let empty = scanned.last_used.is_none();
    if next < slots && erased != Some(next) && !slot_unwritten(f, seg, next, empty)? {
        if f.nand.geometry().in_order {
            return Ok((next, true));
        }
        next += 1;
        while next < slots && !slot_unwritten(f, seg, next, empty)? {
            next += 1;
        }
    }
    Ok((next, false))
}

/// The first free slot a mount would find in `seg` now ([`first_free`] after its last
/// record), for the running FMS to agree with it.
pub(super) fn first_free_on_flash(f: &mut Fms, seg: u32) -> DevResult<(u32, bool)> {
    let mut entries = vec![0u8; f.lay.slots as usize * ENTRY];
    let mut reads = Vec::new();
    let header = (f.segsum.as_ref().map_or(0, |s| s.header(seg)), f.format_id);
    let stop = for_each_record(f, seg, &mut entries, header, |slot, read| {
        reads.push((slot, read));
        Ok(())
    })?;
    let correct = f.cfg.meta_read_retries() > 0;
    let closed = settle(&mut reads, f.lay.corrects_records(), correct);
    let scanned = Scanned {
        last_used: reads.last().map(|&(slot, _)| slot),
        stop,
        closed,
    };
    first_free(f, seg, scanned)
}

/// Read into `buf` with `read` until `ok` accepts what came back, at most
/// `1 + meta_read_retries` times; true when it did. A structure that fails its checksum is read
/// again before it counts as torn, and a page that does not read erased before it counts
/// as programmed: the model's bit flips are transient (as are real read-disturb flips),
/// and what a power cut left reads the same every time.
pub(super) fn read_until(
    f: &mut Fms,
    buf: &mut [u8],
    mut read: impl FnMut(&mut Nand, &mut [u8]) -> nand::Result<()>,
    ok: impl Fn(&[u8]) -> bool,
) -> nand::Result<bool> {
    for t in 0..=f.cfg.meta_read_retries() {
        if t > 0 {
            f.stats.read_retries += 1;
        }
        read(&mut f.nand, buf)?;
        if ok(buf) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// A header this flashkit cannot read safely: a kind other than data (0) and index (1),
/// or a feature bit it does not know. Both come only from a newer format (the header's
/// checksum holds), so the mount refuses, naming the segment, rather than take the
/// segment for something else or erase it.
/// "without ECC", or "with ECC (BCH-4)" for a code of strength `t`.
fn with_ecc(t: u8) -> String {
    match t {
        0 => "without ECC".into(),
        t => format!("with ECC ({})", ecc_name(t)),
    }
}

/// The first medium-wide feature (ECC code, live byte, header code) in which a header's
/// features `this` differ from the medium's `medium`, named for each side
/// (`with ECC (BCH-4)`, `without ECC`): every header of a medium carries the same.
fn unlike(this: u32, medium: u32) -> Option<(String, String)> {
    let t = |f: u32| ecc_strength_of(f).unwrap_or(0);
    let live = |f: u32| f & FEATURE_LIVE_BYTE != 0;
    let code = |f: u32| f & FEATURE_HEADER_CODE != 0;
    if t(this) != t(medium) {
        Some((with_ecc(t(this)), with_ecc(t(medium))))
    } else if live(this) != live(medium) {
        Some((with_live(live(this)).into(), with_live(live(medium)).into()))
    } else if code(this) != code(medium) {
        Some((
            with_header_code(code(this)).into(),
            with_header_code(code(medium)).into(),
        ))
    } else {
        // Features on or off: "with X" / "without X".
        [
            (FEATURE_SUMMARY, "segment summaries"),
            (FEATURE_RECORD_CORRECTION, "record correction"),
            (FEATURE_FIRST_PAGE, "first-page slot tests"),
        ]
        .into_iter()
        .find(|&(bit, _)| this & bit != medium & bit)
        .map(|(bit, name)| {
            let with = |f: u32| {
                let on = if f & bit != 0 { "with" } else { "without" };
                format!("{on} {name}")
            };
            (with(this), with(medium))
        })
    }
}

/// "with the live byte" or "with the live bit" (header-mode entries' live state, seven
/// bits of the flags byte or bit 0 alone: `FEATURE_LIVE_BYTE`).
fn with_live(byte: bool) -> &'static str {
    if byte {
        "with the live byte"
    } else {
        "with the live bit"
    }
}

/// "with header codes" or "without header codes" (`FEATURE_HEADER_CODE`).
fn with_header_code(code: bool) -> &'static str {
    if code {
        "with header codes"
    } else {
        "without header codes"
    }
}

/// Refuse a header of a kind or with features this version does not know; otherwise the
/// strength of the ECC its features record (0: none).
fn refuse_unknown(seg: u32, h: &SegHeader) -> DevResult<u8> {
    if h.kind > 1 {
        return Err(DevError::corrupt(format!(
            "segment {seg}: header kind {} is unknown (0 data, 1 index): written by a newer version",
            h.kind
        )));
    }
    if h.features & !FEATURES_KNOWN != 0 {
        return Err(DevError::corrupt(format!(
            "segment {seg}: header features {:#x} include some this flashkit does not know ({:#x}): written by a newer version",
            h.features, FEATURES_KNOWN
        )));
    }
    ecc_strength_of(h.features).map_err(|e| {
        DevError::corrupt(format!(
            "segment {seg}: header {e}: written by a newer version, or corrupt"
        ))
    })
}

/// A segment header as [`read_header`] found it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum HeaderRead {
    /// 64 bytes of `0xFF`.
    Erased,
    /// A header that decodes.
    Valid(SegHeader),
    /// No read decoded, but two reads returned the same bytes (the only read, when
    /// `read_retries` is 0), and exactly one of their 512 bits, flipped, makes a header
    /// that decodes: this one. The caller still checks it against the medium
    /// ([`header_fits`]) before taking it.
    Corrected(SegHeader),
    /// Neither: a torn erase or header program left it, or more than one bit flipped.
    Unreadable,
}

impl HeaderRead {
    /// The header, read as it is or corrected.
    pub(super) fn header(self) -> Option<SegHeader> {
        match self {
            HeaderRead::Valid(h) | HeaderRead::Corrected(h) => Some(h),
            HeaderRead::Erased | HeaderRead::Unreadable => None,
        }
    }
}

/// Read a segment header, again while it does not decode (as [`read_until`] does), and
/// correct it: with `code` (the strength of the code the medium's headers carry,
/// [`layout::FEATURE_HEADER_CODE`], when the caller knows it), up to that many bits of
/// its page's first chunk with the code; otherwise, or when the code cannot, a single bit
/// flipped for good by CRC search.
///
/// Why correcting one bit is safe under the device's fault model: a torn erase erases
/// whole pages (the header's page is erased, or keeps the header it had), and a torn
/// header program (after the erase that precedes every header) leaves a subset of the
/// bits it clears; so a header one bit from a valid one is either a valid header with a
/// bit flipped for good, or a header program that a cut stopped one bit short, which is
/// the same as a program that completed before the cut (a case mount already handles).
/// CRC-32C's Hamming distance (6 over 64 bytes) makes the flipped bit unique and leaves
/// four more bits of detection: a torn header missing 2 to 4 bits is never taken for
/// another header. Two bits are not corrected by CRC search: that would leave three bits
/// of detection and make a torn header that happens to lie two bits from a different
/// valid one some 250 times likelier to be miscorrected, for a failure (two flips for
/// good in one 64-byte header) much rarer than the one fixed.
///
/// Why correcting with the code is safe: the header and its code are one program, alone
/// in it, after the segment's erase; a torn one clears a subset of the bits it would
/// clear, in the chunk and in its code alike, so a torn header that the code corrects
/// (its missing bits, with any flipped for good, within the code's strength) is the
/// complete header, the same to every later step as a program that completed just
/// before the cut. Any other correction, a miscorrection of a header torn or flipped
/// beyond the code's strength, must still decode (CRC-32C, 2^-32), leave the chunk's
/// 448 bytes after the header erased, say that it carries a code of this strength, and
/// fit the medium ([`header_fits`]) before it is taken.
///
/// The model's read flips are transient, so a correction needs two reads that agree: a
/// header torn just beyond what the correction takes, read once with a flip on one of
/// its missing bits, must not be corrected by this mount and found dirty by the next.
pub(super) fn read_header(f: &mut Fms, seg: u32, code: Option<u8>) -> DevResult<HeaderRead> {
    read_header_after(f, seg, code, None)
}

/// [`read_header`] whose first read returned `first_read` when given (the mount's scan of
/// the headers made it).
fn read_header_after(
    f: &mut Fms,
    seg: u32,
    code: Option<u8>,
    mut first_read: Option<[u8; SEG_HEADER]>,
) -> DevResult<HeaderRead> {
    let first = f.nand.geometry().first_page(seg);
    // A code the page cannot hold (a corrupt or foreign header said it, and the caller
    // took it from there): not read, as on media without one (QA stop 28: the read of
    // the chunk's code ran past the spare area and mount panicked).
    let code = code.filter(|&t| {
        let geo = f.nand.geometry();
        geo.page_size as usize >= nand::ecc::ECC_CHUNK
            && geo.spare_size as usize >= ECC_SPARE_OFFSET + nand::ecc::code_bytes(t)
    });
    let retries = f.cfg.meta_read_retries();
    let mut b = [0u8; SEG_HEADER];
    let mut seen: Vec<[u8; SEG_HEADER]> = Vec::new();
    let mut seen_coded: Vec<Vec<u8>> = Vec::new();
    for t in 0..=retries {
        if t > 0 {
            f.stats.read_retries += 1;
        }
        match first_read.take() {
            Some(r) => b = r,
            None => f.nand.read(first, 0, &mut b)?,
        }
        match SegHeader::decode(&b) {
            Ok(None) => return Ok(HeaderRead::Erased),
            Ok(Some(h)) => return Ok(HeaderRead::Valid(h)),
            Err(_) => {}
        }
        if let Some(ct) = code {
            let coded = read_coded_chunk(f, first, ct)?;
            if retries == 0 || seen_coded.contains(&coded) {
                if let Some(h) = correct_with_code(ct, &coded) {
                    return Ok(HeaderRead::Corrected(h));
                }
            }
            seen_coded.push(coded);
        }
        if retries == 0 || seen.contains(&b) {
            if let Some(h) = one_bit_from(&b, |w| SegHeader::decode(w).ok().flatten()) {
                return Ok(HeaderRead::Corrected(h));
            }
        }
        seen.push(b);
    }
    Ok(HeaderRead::Unreadable)
}

/// A header page's first 512-byte chunk followed by its code of strength `t` (page 0's
/// spare at [`ECC_SPARE_OFFSET`]), in one read of the page.
fn read_coded_chunk(f: &mut Fms, first: u64, t: u8) -> DevResult<Vec<u8>> {
    let geo = f.nand.geometry();
    let ps = geo.page_size as usize;
    let raw = geo.raw_page_size() as usize;
    let mut page = vec![0u8; raw];
    f.nand.read(first, 0, &mut page)?;
    let cb = nand::ecc::code_bytes(t);
    let mut out = page[..nand::ecc::ECC_CHUNK].to_vec();
    out.extend_from_slice(&page[ps + ECC_SPARE_OFFSET..ps + ECC_SPARE_OFFSET + cb]);
    Ok(out)
}

/// The header that `coded` (a chunk and its code of strength `t`, [`read_coded_chunk`])
/// corrects to: when the code corrects the chunk, and the result decodes, is followed by
/// 448 bytes of `0xFF`, and says it carries a code of strength `t`.
pub(super) fn correct_with_code(t: u8, coded: &[u8]) -> Option<SegHeader> {
    let (chunk, code) = coded.split_at(nand::ecc::ECC_CHUNK);
    let mut chunk = chunk.to_vec();
    let r = nand::ecc::correct_page_t(t, &mut chunk, code).ok()?;
    if r.uncorrectable_chunks > 0 || !all_erased(&chunk[SEG_HEADER..]) {
        return None;
    }
    let h = SegHeader::decode(&chunk[..SEG_HEADER]).ok().flatten()?;
    (header_code_of(h.features) == Some(t)).then_some(h)
}

/// Whether a corrected header (`HeaderRead::Corrected`) belongs to this medium: a known
/// kind and features, the configured block size and slots, and, when `medium` is known,
/// the medium's format number and features (those of its first header that decodes
/// without correction, or of the running FMS). A correction that does not fit is not taken (the segment is dirty, as before).
pub(super) fn header_fits(h: &SegHeader, lay: &Layout, medium: Option<(u64, u32)>) -> bool {
    h.kind <= 1
        && h.features & !FEATURES_KNOWN == 0
        && ecc_strength_of(h.features).is_ok()
        && (h.features & FEATURE_HEADER_CODE == 0 || header_code_of(h.features).is_some())
        && h.block_size == lay.block_size
        && h.slots == lay.slots
        && medium
            .is_none_or(|(format_id, features)| h.format_id == format_id && h.features == features)
}

/// The first good segment after `after` whose header decodes without correction: what a
/// corrected header met before any such one is checked against ([`header_fits`]).
fn first_valid_after(f: &mut Fms, after: u32, min_format: u64) -> DevResult<Option<SegHeader>> {
    for seg in after + 1..f.lay.segments {
        if f.nand.is_bad(seg) {
            continue;
        }
        if let HeaderRead::Valid(h) = read_header(f, seg, None)? {
            if h.format_id >= min_format {
                return Ok(Some(h));
            }
        }
    }
    Ok(None)
}

/// Read `buf.len()` bytes starting at byte `off` of the segment whose first page is `first`.
pub(super) fn read_span(
    nand: &mut Nand,
    lay: &Layout,
    first: u64,
    off: u64,
    buf: &mut [u8],
) -> nand::Result<()> {
    for (page, col, at, n) in lay.pages_of(off, buf.len() as u64) {
        nand.read(first + page, col, &mut buf[at..at + n])?;
    }
    Ok(())
}

/// True when every byte of page `ppn`, data and spare, is erased.
/// A page counts as erased if any of `1 + meta_read_retries` reads finds it so (a programmed
/// page cannot read erased through bit flips; an erased one can read programmed).
pub(super) fn page_erased(f: &mut Fms, ppn: u64) -> DevResult<bool> {
    let raw = f.nand.geometry().raw_page_size() as usize;
    let mut buf = vec![0u8; raw];
    let ecc = f.lay.ecc();
    Ok(read_until(
        f,
        &mut buf,
        |n, b| n.read(ppn, 0, b),
        |b| erased(ecc, b),
    )?)
}

fn all_erased(b: &[u8]) -> bool {
    b.iter().all(|&x| x == 0xFF)
}

/// Whether a read piece counts as erased: every byte 0xFF; with ECC, at most one 0 bit in
/// each 512 bytes (and in a shorter rest, such as a spare area), as a NAND driver reads an
/// erased page with flips (Linux's `nand_check_erased_ecc_chunk`). A torn program that
/// cleared so few bits (possible only where the data was almost all 0xFF) is then taken
/// for erased: the program the FMS makes there fails (no more programs allowed, or a bit
/// it needs set is clear), which closes the segment early (`Fms::close_early`), or
/// succeeds with its own bytes if they keep that bit clear. Without ECC, exact.
fn erased(ecc: bool, b: &[u8]) -> bool {
    if !ecc {
        return all_erased(b);
    }
    b.chunks(nand::ecc::ECC_CHUNK)
        .all(|c| c.iter().map(|&x| x.count_zeros()).sum::<u32>() <= 1)
}

/// The FMS's test of a page it is about to program without having erased it itself
/// ([`Fms::check_tail`]): erased as [`page_erased`] reads it, and with ECC no bit held at
/// 0 in every read. With ECC, [`erased`] admits one 0 bit per 512 bytes (a driver reads an
/// erased page with a flip); a flip is transient, but a bit that reads 0 in every read is
/// held there (a stuck cell, or a torn program that cleared one bit), and a program that
/// needs it fails. Before stop 35 the FMS met such a bit only by that failing program and
/// closed the segment early, one free segment after another: a full medium with such bits
/// in its free segments ran out of them inside one cleaning and answered every write
/// "device full" until remounted (QA stop 35). A page whose reads were not all-0xFF is
/// read again until the bits set in some read cover the page, at most `1 +
/// meta_read_retries` times. Without ECC, as [`page_erased`] (exact).
pub(super) fn page_programmable(f: &mut Fms, ppn: u64) -> DevResult<bool> {
    let geo = f.nand.geometry();
    let (ps, raw) = (geo.page_size as usize, geo.raw_page_size() as usize);
    let ecc = f.lay.ecc();
    let mut page = vec![0u8; raw];
    // The bits read 1 in some read: a bit still 0 here read 0 every time.
    let mut ones = vec![0u8; raw];
    let (mut data, mut spare) = (false, false);
    for t in 0..=f.cfg.meta_read_retries() {
        if t > 0 {
            f.stats.read_retries += 1;
        }
        f.nand.read(ppn, 0, &mut page)?;
        data |= erased(ecc, &page[..ps]);
        spare |= erased(ecc, &page[ps..]);
        ones.iter_mut().zip(&page).for_each(|(o, &b)| *o |= b);
        if data && spare && (!ecc || all_erased(&ones)) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// [`page_programmable`] for every page of a slot (spare mode); header mode (no ECC) reads
/// the slot's bytes as [`slot_erased`] does.
pub(super) fn slot_programmable(f: &mut Fms, seg: u32, slot: u32) -> DevResult<bool> {
    if f.lay.mode != RecordMode::Spare {
        return slot_erased(f, seg, slot);
    }
    let p0 = f.nand.geometry().first_page(seg) + f.lay.slot_offset(slot) / f.lay.page_size as u64;
    for k in 0..f.lay.pages_per_slot as u64 {
        if !page_programmable(f, p0 + k)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// True when every byte of the slot (and, in spare mode, its pages' spare) is erased.
/// Each piece (header mode: the slot's data; spare mode: each page's data and its spare)
/// counts as erased if any of `1 + meta_read_retries` reads finds it so, as in
/// [`page_erased`]. Spare-mode slots are whole pages, each read with its spare in one
/// read (one page read of device time, where data and spare apart were two).
pub(super) fn slot_erased(f: &mut Fms, seg: u32, slot: u32) -> DevResult<bool> {
    slot_pages_erased(f, seg, slot, f.lay.pages_per_slot)
}

/// Mount's test of a slot after a segment's last record ([`first_free`],
/// [`scan_ends_at`]): whether a write of it was never begun. In a segment none of whose
/// slots before `slot` holds a record (`empty`: a free segment, or one whose first slots a
/// cut tore), on media with the first-page feature ([`Layout::first_page`], header
/// features bit 9: formats since stop 35), spare mode reads the slot's first page only
/// (before, every page of it; media without the bit still are, since the builds that
/// wrote them wrote after slots they skipped for pages a torn erase kept past the first
/// page): a spare-mode slot is written a page at a time in page order, every page with a
/// mark or the record (`Fms::program_slot`, the cleaner's runs alike), so a power cut in
/// its write leaves its first page programmed (or, cut in that page's own program,
/// reading erased as the rest then does). Only pages a torn erase kept can tell the two
/// apart: a slot erased at its first page and not further on is taken for free,
/// unchecked like the slots after it, and the FMS reads it whole before its first
/// program there (`Fms::check_tail`): a free segment is erased again, an open one closed.
/// After a record, every page is read, as before: a torn erase of a full segment may
/// keep its segment summary, which a mount reads instead of the records only when slot
/// 0's record reads programmed, and a mount reading every record must find the same
/// first free slot there (torture sweep, seed 1735: a first-page test made it 2 where the
/// summary said 3). Header mode reads the slot's bytes (a slot there is at most a few
/// pages of a NOR-style card, read as one span).
fn slot_unwritten(f: &mut Fms, seg: u32, slot: u32, empty: bool) -> DevResult<bool> {
    match f.lay.mode {
        RecordMode::Spare if empty && f.lay.first_page => slot_pages_erased(f, seg, slot, 1),
        _ => slot_erased(f, seg, slot),
    }
}

/// [`slot_erased`] of the first `pages` pages of the slot (spare mode; header mode reads
/// the whole slot).
fn slot_pages_erased(f: &mut Fms, seg: u32, slot: u32, pages: u32) -> DevResult<bool> {
    let geo = f.nand.geometry().clone();
    let first = geo.first_page(seg);
    let (lay, off) = (f.lay.clone(), f.lay.slot_offset(slot));
    let ecc = lay.ecc();
    if lay.mode == RecordMode::Spare {
        let ps = geo.page_size as usize;
        let mut page = vec![0u8; ps + geo.spare_size as usize];
        let p0 = first + off / geo.page_size as u64;
        for k in 0..pages.min(lay.pages_per_slot) as u64 {
            let (mut data, mut spare) = (false, false);
            for t in 0..=f.cfg.meta_read_retries() {
                if t > 0 {
                    f.stats.read_retries += 1;
                }
                f.nand.read(p0 + k, 0, &mut page)?;
                data |= erased(ecc, &page[..ps]);
                spare |= erased(ecc, &page[ps..]);
                if data && spare {
                    break;
                }
            }
            if !(data && spare) {
                return Ok(false);
            }
        }
        return Ok(true);
    }
    let mut buf = vec![0u8; f.lay.block_size as usize];
    let data = |n: &mut Nand, b: &mut [u8]| read_span(n, &lay, first, off, b);
    Ok(read_until(f, &mut buf, data, |b| erased(ecc, b))?)
}

/// The index log as mount reads it.
struct IndexRead {
    seg: u32,
    /// "Stream → segment" entries with their place in the log.
    active: Vec<(u32, IndexEntry)>,
    /// Segments recorded retired.
    retired: Vec<u32>,
    /// Place of the next entry.
    next: u32,
    /// Next index sequence number.
    seq: u32,
}

/// Read the index log from entry 0 up to the first erased entry; entries that do not
/// decode (torn, or of an unknown kind) are skipped.
fn read_index(f: &mut Fms, ix: u32) -> DevResult<IndexRead> {
    let lay = f.lay.clone();
    let first = f.nand.geometry().first_page(ix);
    let cap = lay.index_capacity();
    let mut e = [0u8; INDEX_ENTRY];
    let mut out = IndexRead {
        seg: ix,
        active: Vec::new(),
        retired: Vec::new(),
        next: cap,
        seq: 0,
    };
    let mut max_seq = 0u32;
    for k in 0..cap {
        let page = k / lay.index_per_page + 1;
        if page >= lay.pages_per_seg {
            out.next = k;
            break;
        }
        let col = (k % lay.index_per_page) * INDEX_ENTRY as u32;
        let ppn = first + page as u64;
        read_until(
            f,
            &mut e,
            |n, b| n.read(ppn, col, b),
            |b| all_erased(b) || IndexEntry::decode(b).is_some(),
        )?;
        if e.iter().all(|&b| b == 0xFF) {
            out.next = k;
            break;
        }
        if let Some(entry) = IndexEntry::decode(&e) {
            max_seq = max_seq.max(entry.seq);
            if entry.kind == IndexEntry::RETIRED {
                out.retired.push(entry.seg);
            } else {
                out.active.push((k, entry));
            }
        }
    }
    out.seq = max_seq.saturating_add(1);
    Ok(out)
}

/// What mount gathers from the segments' records.
struct Found {
    /// The newest record of each block.
    best: Vec<Option<Best>>,
    /// Header mode: superseded copies whose live bit is still set (an invalidation or an
    /// erase cut by power loss).
    stale_live: Vec<u32>,
    /// Spare mode: trim-list slots and their records' sequence numbers.
    lists: Vec<(u32, u64)>,
    /// Scratch: a segment's header-mode entries.
    entries: Vec<u8>,
    /// Scratch: what a segment's slots read, in slot order.
    reads: Vec<(u32, RecordRead)>,
    /// Slots whose record did not decode.
    torn: u64,
    /// The newest time of a record that decoded (header-mode entries; spare records carry
    /// none), milliseconds.
    newest_ms: u32,
    /// The oldest such time in the segment last read (`u32::MAX`: none).
    oldest_ms: u32,
    /// Records one bit from valid: corrected (header mode), or reported (spare mode).
    flips: Flips,
}

/// Records a mount found one bit from valid ([`MountReport::corrected_entries`],
/// [`MountReport::flipped_records`]).
#[derive(Default)]
struct Flips {
    /// Header mode: entries corrected.
    corrected: Vec<SlotRecord>,
    /// Spare mode: records corrected ([`settle`]).
    corrected_records: Vec<SlotRecord>,
    flipped: Vec<SlotRecord>,
    /// Spare mode: the trim-list slots among `flipped` (physical slot, record's number):
    /// their tombstones are rescued (`read_trim_lists`).
    lists: Vec<(u32, u64)>,
}

/// Read the records of segment `seg` into `found`: the newest per block, superseded copies
/// still live, trim-list slots. Returns the last slot holding a record, torn or not, and
/// the slot where the scan stopped, read unwritten (spare mode, [`for_each_record`]).
///
/// `header`: the erase sequence and format number of the segment's header, which a
/// segment summary must carry to be read instead of the records (`segsum.rs`).
fn read_records(
    f: &mut Fms,
    seg: u32,
    found: &mut Found,
    header: (u64, u64),
) -> DevResult<Scanned> {
    let Found {
        best,
        stale_live,
        lists,
        entries,
        reads,
        torn,
        newest_ms,
        oldest_ms,
        flips,
    } = found;
    *oldest_ms = u32::MAX;
    let timed = f.lay.mode == RecordMode::Header;
    let logical = f.logical;
    let slot_bits = f.slot_bits;
    let mut last_used: Option<u32> = None;
    let mut consider = |slot: u32, read: RecordRead| -> DevResult<()> {
        last_used = Some(slot);
        let at = |r: Record| SlotRecord {
            segment: seg,
            slot,
            block: r.lbn,
        };
        match read {
            RecordRead::Corrected(r) if timed => flips.corrected.push(at(r)),
            RecordRead::Corrected(r) => flips.corrected_records.push(at(r)),
            RecordRead::Flipped(r) => {
                flips.flipped.push(at(r));
                if r.lbn == TRIM_LIST_LBN {
                    flips.lists.push(((seg << slot_bits) | slot, r.seq));
                }
            }
            RecordRead::Valid(_) | RecordRead::Near | RecordRead::Torn | RecordRead::Pad => {}
        }
        let Some(r) = read.record() else {
            *torn += 1;
            return Ok(());
        };
        // Header-mode entries carry a time; spare records only through their segment's
        // summary (`SUMMARY_NO_TIME` otherwise).
        if timed || r.time_ms != SUMMARY_NO_TIME {
            *newest_ms = (*newest_ms).max(r.time_ms);
            *oldest_ms = (*oldest_ms).min(r.time_ms);
        }
        if r.lbn == TRIM_LIST_LBN {
            lists.push(((seg << slot_bits) | slot, r.seq));
            return Ok(());
        }
        if r.lbn as u64 >= logical {
            return Err(DevError::corrupt(format!(
                "segment {seg} slot {slot}: record for block {} beyond the {logical}-block capacity",
                r.lbn
            )));
        }
        let phys = (seg << slot_bits) | slot;
        let b = &mut best[r.lbn as usize];
        if b.as_ref().is_none_or(|b| r.seq > b.seq) {
            if let Some(old) = b.take().filter(|o| o.rec.live) {
                stale_live.push(old.phys);
            }
            *b = Some(Best {
                seq: r.seq,
                phys,
                rec: r,
            });
        } else if r.live {
            stale_live.push(phys);
        }
        Ok(())
    };
    reads.clear();
    let stop = for_each_record(f, seg, entries, header, |slot, read| {
        reads.push((slot, read));
        Ok(())
    })?;
    let correct = f.cfg.meta_read_retries() > 0;
    let closed = settle(reads, f.lay.corrects_records(), correct);
    for &(slot, read) in reads.iter() {
        consider(slot, read)?;
    }
    Ok(Scanned {
        last_used,
        stop,
        closed,
    })
}

/// What [`read_records`] found of a segment's slots.
#[derive(Clone, Copy)]
struct Scanned {
    /// The last slot holding a record, torn or not.
    last_used: Option<u32>,
    /// The slot where the scan stopped, read unwritten (spare mode, [`for_each_record`],
    /// [`slot_unwritten`]).
    stop: Option<u32>,
    /// The tail holds a record one or two bits from valid and the medium has record
    /// correction ([`settle`]): the segment takes no more writes.
    closed: bool,
}

/// On media with record correction (`Layout::corrects_records`, spare mode): turn each
/// record of a segment's `reads` (in slot order) that is one bit from valid
/// ([`RecordRead::Flipped`]) and that a decoding record follows into a corrected one
/// (when `correct`), and say whether the records after the last decoding one (all of
/// them when none decodes: the segment's *tail*) hold one that is one or two bits from
/// valid ([`RecordRead::Flipped`], [`RecordRead::Near`]), which closes the segment.
/// Elsewhere, changes nothing and says `false`.
///
/// Why this is safe. A cut that tears a record leaves it in its segment's tail: the
/// programs after it never happen. A record torn one bit short reads one bit from valid
/// (two reads agree; a transient flip in one read moves it by a bit, to two bits, which
/// closes too), so the first mount after the cut takes the segment for full
/// ([`first_free`]), and nothing is written after it: the running FMS writes a slot only
/// after the one before it was programmed (a cut ends it; a program error closes the
/// segment, `Fms::close_early`, which agrees through `first_free_on_flash`), and the
/// segment summary copies a record that does not decode only as two reads agree
/// (`segsum.rs`). So a record one bit from valid that a decoding record follows was
/// programmed whole, with its slot's data: a bit flipped for good. Every mount decides
/// alike from the bytes on flash, and the record's number was never handed out again: a
/// mount that met it one bit from valid in the tail closed the segment, so it can never
/// be corrected later; one that met it with a decoding record after it corrected it.
/// (Review, stop 32: with only a *last* record one bit from valid closing, one flipped
/// for good followed by a torn one left the segment open, its number was handed out
/// again, and once a later slot was written the correction tied with an acknowledged
/// rewrite and won.) Correction needs two agreeing reads, so none is made with
/// `read_retries` 0 (`correct` false); closing is not.
///
/// What remains: a record a cut left three or more bits short does not close its segment
/// (closing at every torn record would leave a segment's free slots unused at each cut,
/// and fills small media under repeated cuts); the FMS writes on after it, and only bits
/// flipped for good restoring all but one of its missing bits would then bring it one bit
/// from valid and have it corrected — persistent faults, outside the model's. And a
/// record torn one bit short, its segment closed, that a later mount reads whole through
/// a transient flip of exactly its missing bit (one read that decodes is accepted) opens
/// the segment again at that mount; were the FMS to write there then, later mounts would
/// correct it. The pad record is not one bit from valid: the FMS writes the next slot
/// after it by design.
fn settle(reads: &mut [(u32, RecordRead)], closes: bool, correct: bool) -> bool {
    if !closes {
        return false;
    }
    let decodes = |r: &RecordRead| matches!(r, RecordRead::Valid(_) | RecordRead::Corrected(_));
    let last = reads.iter().rposition(|(_, r)| decodes(r));
    if let (Some(last), true) = (last, correct) {
        for (_, r) in &mut reads[..last] {
            if let RecordRead::Flipped(x) = *r {
                *r = RecordRead::Corrected(x);
            }
        }
    }
    let tail = last.map_or(0, |l| l + 1);
    reads[tail..]
        .iter()
        .any(|(_, r)| matches!(r, RecordRead::Flipped(_) | RecordRead::Near))
}

/// Whether a segment of this layout, whose header (erase sequence, format number) is
/// `header`, holds no record at all: no slot's entry or spare record is anything but
/// erased, torn ones included (`Fms::format_medium` erases such a segment of the old
/// medium first: nothing is lost if a power cut stops the format there).
pub(super) fn holds_no_record(f: &mut Fms, seg: u32, header: (u64, u64)) -> DevResult<bool> {
    let mut entries = vec![0u8; f.lay.slots as usize * ENTRY];
    let mut any = false;
    for_each_record(f, seg, &mut entries, header, |_, _| {
        any = true;
        Ok(())
    })?;
    Ok(!any)
}

/// [`holds_no_record`] for a segment whose (valid, kind 0) header `h` may be of another
/// layout than `f`'s (a format with other options over the medium): read with the
/// layout the header describes (block size, slots, features, on this device). `false`
/// when the header describes no layout this device can have.
pub(super) fn holds_no_record_of(f: &mut Fms, seg: u32, h: &SegHeader) -> DevResult<bool> {
    let geo = f.nand.geometry().clone();
    let Ok(base) = Layout::new(&geo, h.block_size) else {
        return Ok(false);
    };
    let Ok(t) = ecc_strength_of(h.features) else {
        return Ok(false);
    };
    let mut old = base
        .with_live_byte(h.features & FEATURE_LIVE_BYTE != 0)
        .with_header_code(h.features & FEATURE_HEADER_CODE != 0)
        .with_summary(h.features & FEATURE_SUMMARY != 0)
        .with_record_correction(h.features & FEATURE_RECORD_CORRECTION != 0)
        .with_first_page(h.features & FEATURE_FIRST_PAGE != 0);
    if t > 0 {
        match old.with_ecc(t, &geo) {
            Ok(l) => old = l,
            Err(_) => return Ok(false),
        }
    }
    if old.slots != h.slots || old.features() != h.features {
        return Ok(false);
    }
    let own = std::mem::replace(&mut f.lay, old);
    let r = holds_no_record(f, seg, (h.erase_seq, h.format_id));
    f.lay = own;
    r
}

/// The records that decode in the `unreadable` segments (good, header neither erased
/// nor decoding), with where each is. Such a segment is dirty and its records are not
/// taken: a torn erase leaves a header that does not decode over records that may still
/// read whole, and a mount cannot tell that from a header damaged in place. They are
/// read for two things only: trim lists, whose tombstones are safe to take wherever
/// they are (`read_trim_lists`), and blocks to name lost ([`lost_blocks`]). Reads
/// failing here end that segment's scan quietly: the mount does not depend on it.
fn records_behind(f: &mut Fms, unreadable: &[u32]) -> Vec<(SlotRecord, Record)> {
    let mut found = Vec::new();
    if unreadable.is_empty() {
        return found;
    }
    let mut entries = vec![0u8; f.lay.slots as usize * ENTRY];
    for &seg in unreadable {
        // (No summary carries these numbers: every slot's own record is read.)
        let _ = for_each_record(f, seg, &mut entries, (u64::MAX, u64::MAX), |slot, read| {
            if let Some(r) = read.record() {
                let at = SlotRecord {
                    segment: seg,
                    slot,
                    block: r.lbn,
                };
                found.push((at, r));
            }
            Ok(())
        });
    }
    found
}

/// The blocks whose newest record is `behind` a header that does not decode
/// ([`records_behind`]): records that carry the live flag and are newer than the
/// block's copy in `best` (or it has none) and than its tombstone.
///
/// Their records are not taken: after a torn erase of a segment the cleaner had
/// emptied, every block it held has a newer copy (none is named), but its records may
/// outlive the trims that followed once those are cleaned away, and taking them would
/// bring trimmed data back. So they are only named ([`MountReport::lost_blocks`]).
/// Also returns the largest sequence number among them (0 when there are none).
fn lost_blocks(
    f: &Fms,
    behind: &[(SlotRecord, Record)],
    best: &[Option<Best>],
) -> (Vec<SlotRecord>, u64) {
    // Block → (sequence number, slot) of its newest such record.
    let mut lost: BTreeMap<u32, (u64, SlotRecord)> = BTreeMap::new();
    for &(at, r) in behind {
        if r.lbn == TRIM_LIST_LBN || r.lbn as u64 >= f.logical || !r.live {
            continue;
        }
        let newer = best[r.lbn as usize].as_ref().is_none_or(|b| b.seq < r.seq);
        let trimmed = f.trims.tomb.get(&r.lbn).is_some_and(|t| t.seq > r.seq);
        if newer && !trimmed && lost.get(&r.lbn).is_none_or(|&(s, _)| s < r.seq) {
            lost.insert(r.lbn, (r.seq, at));
        }
    }
    let newest = lost.values().map(|&(seq, _)| seq).max().unwrap_or(0);
    (lost.into_values().map(|(_, at)| at).collect(), newest)
}

/// A slot's record as [`for_each_record`] read it.
#[derive(Clone, Copy, Debug)]
enum RecordRead {
    /// It decodes.
    Valid(Record),
    /// Header mode: one bit from a valid entry in two reads that agree, read corrected.
    Corrected(Record),
    /// Spare mode: one bit from a valid record in two reads that agree: torn all the same
    /// (not corrected, see [`spare_flip`]), but reported with what it would say.
    Flipped(Record),
    /// Spare mode: torn, two bits from a valid record (naming a block of the capacity or a
    /// trim list) in two reads that agree: never corrected, but it closes its segment
    /// when no decoding record follows it ([`settle`]).
    Near,
    /// Torn or foreign.
    Torn,
    /// Spare mode: the pad record (`layout::PAD_RECORD`), which the FMS programs over a
    /// torn slot's missing record before it writes the next slot (in-order devices):
    /// counted torn, as a torn record is.
    Pad,
}

impl RecordRead {
    /// The record the mount takes: a valid one or a corrected entry.
    fn record(self) -> Option<Record> {
        match self {
            RecordRead::Valid(r) | RecordRead::Corrected(r) => Some(r),
            RecordRead::Flipped(_) | RecordRead::Near | RecordRead::Torn | RecordRead::Pad => None,
        }
    }
}

/// Header mode: the entry one bit from `e` (see [`one_bit_from`]) when it names a block
/// of the capacity.
///
/// Why this is safe: an entry is programmed in a program of its own (with the others of
/// a cleaner's run), after its slot's data was programmed whole, so an entry one bit from
/// a valid one is either a valid entry with a bit flipped for good or an entry program
/// that a cut stopped one bit short, over whole data: the same as a program that
/// completed before the cut. The decision depends on the entry's bytes alone, so every
/// mount makes the same one, the first after the cut included (the sequence number it
/// carries is then never handed out again). CRC-32C's distance over the 20 checksummed
/// bytes (8) leaves six bits of detection beyond the corrected one.
fn entry_flip(e: &[u8], logical: u64, live: LiveFlag) -> Option<Record> {
    one_bit_from(e, |w| Record::decode_entry(w, live)).filter(|r| (r.lbn as u64) < logical)
}

/// Spare mode: the record one bit from `b` (see [`one_bit_from`]) when it names a block of
/// the capacity or a trim list. Reported, never taken.
///
/// Why it is not corrected: a spare record is programmed with its slot's last page, in
/// the same program as the page's data (and, with ECC, the page's codes), so a cut that
/// leaves the record one bit short may leave the data torn in any way. Mount cannot tell
/// the two apart from the slot alone: ECC codes, torn with the data, can agree with torn
/// data; and a later slot of the segment written after the record proves nothing,
/// because the FMS goes on writing a segment after a torn record once a mount has passed
/// (the stream's active segment continues after it), having taken the record for torn
/// and handed its sequence number out again. A mount that then corrected it would let
/// an unacknowledged, torn write beat an acknowledged later one of the same block whose
/// number, counted from a gap that failed programs leave, is lower; and no record left
/// on flash proves the number was handed out twice (the copy that took it may be cleaned
/// away). `docs/format/fms.md` (Mount, step 2) gives the argument in full.
fn spare_flip(b: &[u8], logical: u64) -> Option<Record> {
    if b == PAD_RECORD {
        return None;
    }
    one_bit_from(b, Record::decode_spare)
        .filter(|r| (r.lbn as u64) < logical || r.lbn == TRIM_LIST_LBN)
}

/// A spare record that does not decode, as the scan classes it: one bit from valid
/// ([`spare_flip`]: [`RecordRead::Flipped`]), two bits from valid ([`RecordRead::Near`]),
/// or torn. The pad record is none of these (two-bit search: 120·119/2 checksums, for
/// records that fail theirs only).
fn spare_near(b: &[u8], logical: u64) -> RecordRead {
    if b == PAD_RECORD {
        return RecordRead::Pad;
    }
    if let Some(r) = spare_flip(b, logical) {
        return RecordRead::Flipped(r);
    }
    let fits = |w: &[u8]| {
        Record::decode_spare(w).filter(|r| (r.lbn as u64) < logical || r.lbn == TRIM_LIST_LBN)
    };
    if super::layout::two_bits_from(b, fits) {
        RecordRead::Near
    } else {
        RecordRead::Torn
    }
}

/// Call `visit` with each slot of `seg` whose record is not erased, in slot order, and
/// what was read there. A record that neither decodes nor reads erased is read again (up
/// to `meta_read_retries` times); when two of those reads agree (the only read, when
/// `read_retries` is 0), a record one bit from a valid one is corrected (header mode,
/// [`entry_flip`]) or reported (spare mode, [`spare_flip`]). Reads agreeing leaves out
/// the model's flips, which are transient: a torn record a flip brought one bit from
/// valid in one read must not be taken by one mount and not by the next.
///
/// Spare mode stops at the first slot that reads unwritten and whose next slot's
/// record reads erased too ([`scan_ends_at`]), and returns it; header mode reads every
/// entry (they come in one read) and returns `None`.
///
/// In spare mode, a segment summary valid for `header` (the segment header's erase
/// sequence and format number; `segsum::read_summary`) gives the records instead, read as
/// the spare areas would be, without the scan's stop (a summary is written only when the
/// last slot is).
fn for_each_record(
    f: &mut Fms,
    seg: u32,
    entries: &mut [u8],
    header: (u64, u64),
    mut visit: impl FnMut(u32, RecordRead) -> DevResult<()>,
) -> DevResult<Option<u32>> {
    let lay = f.lay.clone();
    let geo = f.nand.geometry();
    let (slots, page_size) = (lay.slots, geo.page_size);
    let first = geo.first_page(seg);
    let (retries, logical) = (f.cfg.meta_read_retries(), f.logical);
    // A record read is accepted when erased, when it decodes, or when it is the pad
    // record; otherwise read again before it counts as torn.
    match lay.mode {
        RecordMode::Header => {
            read_span(&mut f.nand, &lay, first, SEG_HEADER as u64, entries)?;
            for slot in 0..slots {
                let e = &mut entries[slot as usize * ENTRY..(slot as usize + 1) * ENTRY];
                if all_erased(e) {
                    continue;
                }
                if let Some(r) = Record::decode_entry(e, lay.live) {
                    visit(slot, RecordRead::Valid(r))?;
                    continue;
                }
                // The entries came in one read; one that is neither is read again alone.
                let off = SEG_HEADER as u64 + slot as u64 * ENTRY as u64;
                let mut seen: Vec<[u8; ENTRY]> = Vec::new();
                let mut got = RecordRead::Torn;
                for t in 0..=retries {
                    if t > 0 {
                        f.stats.read_retries += 1;
                        read_span(&mut f.nand, &lay, first, off, e)?;
                        if all_erased(e) {
                            got = RecordRead::Torn;
                            break;
                        }
                        if let Some(r) = Record::decode_entry(e, lay.live) {
                            got = RecordRead::Valid(r);
                            break;
                        }
                    }
                    let w: [u8; ENTRY] = (&*e).try_into().expect("an entry");
                    if retries == 0 || seen.contains(&w) {
                        if let Some(r) = entry_flip(e, logical, lay.live) {
                            got = RecordRead::Corrected(r);
                            break;
                        }
                    }
                    seen.push(w);
                }
                if all_erased(e) {
                    continue;
                }
                visit(slot, got)?;
            }
        }
        RecordMode::Spare => {
            // A full segment's slot 0 holds a record: only then is a summary looked for
            // (the record's read is the scan's first), so an empty segment costs no
            // summary read.
            let mut pre = None;
            if lay.summary_page.is_some() && f.cfg.segment_summaries {
                let mut r = [0u8; SPARE_RECORD - 1];
                f.nand.read(record_page(f, seg, 0), page_size + 1, &mut r)?;
                pre = Some(r);
            }
            let summary = match pre {
                Some(r) if !all_erased(&r) => super::segsum::read_summary(f, seg, header)?,
                _ => None,
            };
            if let Some(entries) = summary {
                for (slot, e) in entries.chunks_exact(SUMMARY_SLOT).enumerate() {
                    let (r, time_ms) = SegSummary::slot(e);
                    if all_erased(r) {
                        continue;
                    }
                    let got = if r == PAD_RECORD {
                        RecordRead::Pad
                    } else if let Some(rec) = Record::decode_spare(r) {
                        // The block's time, which the spare record lacks.
                        RecordRead::Valid(Record { time_ms, ..rec })
                    } else {
                        spare_near(r, logical)
                    };
                    visit(slot as u32, got)?;
                }
                return Ok(None);
            }
            let mut spare = [0u8; SPARE_RECORD - 1];
            // No slot before this one holds a record ([`slot_unwritten`]'s `empty`).
            let mut empty = true;
            for slot in 0..slots {
                let last = record_page(f, seg, slot);
                let mut seen: Vec<[u8; SPARE_RECORD - 1]> = Vec::new();
                let mut flipped = None;
                let mut got = None;
                // As `read_until`, with the reads kept to compare (the same reads as
                // before records were looked at for flips).
                for t in 0..=retries {
                    if t > 0 {
                        f.stats.read_retries += 1;
                    }
                    match pre.take() {
                        Some(r) => spare = r,
                        None => f.nand.read(last, page_size + 1, &mut spare)?,
                    }
                    if all_erased(&spare) {
                        got = Some(RecordRead::Torn);
                        break;
                    }
                    if spare == PAD_RECORD {
                        got = Some(RecordRead::Pad);
                        break;
                    }
                    if let Some(r) = Record::decode_spare(&spare) {
                        got = Some(RecordRead::Valid(r));
                        break;
                    }
                    if flipped.is_none() && (retries == 0 || seen.contains(&spare)) {
                        flipped = Some(spare_near(&spare, logical));
                    }
                    seen.push(spare);
                }
                if all_erased(&spare) {
                    if scan_ends_at(f, seg, slot, empty)? {
                        return Ok(Some(slot));
                    }
                    continue;
                }
                empty = false;
                let got = got.or(flipped).unwrap_or(RecordRead::Torn);
                visit(slot, got)?;
            }
        }
    }
    Ok(None)
}

/// Spare mode: the page whose spare area holds the record of `slot` of `seg` (the
/// slot's last page; page 0 holds the header).
pub(super) fn record_page(f: &Fms, seg: u32, slot: u32) -> u64 {
    let pps = f.lay.pages_per_slot as u64;
    f.nand.geometry().first_page(seg) + 1 + slot as u64 * pps + pps - 1
}

/// Spare mode: whether the record scan of `seg` may stop at `slot`, whose record reads
/// erased: the record of the slot after it reads erased too, and no write of `slot` was
/// begun ([`slot_unwritten`]: where no slot before it holds a record, `empty`, and the
/// medium has the first-page feature, its first page reads erased; otherwise all of it).
/// Every slot after it is then erased, or holds pages a torn erase kept (found before
/// the first program there, [`Tail::Unchecked`]): the FMS
/// writes a segment's slots in order and goes past a slot only once it is programmed
/// (a cut leaves the slot being written torn and the later ones erased), or, at mount,
/// when it read the slot not erased ([`first_free`] skips torn slots). A slot that
/// reads erased now was read not erased then only if a flip showed in every read of it
/// (transient flips; what a cut left reads the same every time); asking the next
/// record too makes the scan stop early only where that happened to two slots in a
/// row at one mount. The next record is one spare read; without the stop a mount read
/// every slot's record (35.6 s of device time on an empty `mlc2-2g`, 3.8 s with it).
fn scan_ends_at(f: &mut Fms, seg: u32, slot: u32, empty: bool) -> DevResult<bool> {
    let lay = &f.lay;
    if slot + 1 < lay.slots {
        let last = record_page(f, seg, slot + 1);
        let col = f.nand.geometry().page_size + 1;
        let mut spare = [0u8; SPARE_RECORD - 1];
        if !read_until(f, &mut spare, |n, b| n.read(last, col, b), all_erased)? {
            return Ok(false);
        }
    }
    slot_unwritten(f, seg, slot, empty)
}
