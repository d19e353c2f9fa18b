//! On-flash structures of the Flash Memory Server, byte by byte (also in
//! `docs/format/fms.md`). All integers little-endian; all checksums CRC-32C.
//!
//! Two record modes, chosen from the device:
//! * **Header mode** (NOR-style devices, `nop = 0`): as in the papers, each segment starts
//!   with a segment header holding the per-block information array. A block's entry is
//!   programmed after its data; when the block is superseded or trimmed its "live" flag bit
//!   is cleared in place (bit clearing is unlimited on these devices).
//! * **Spare mode** (NAND, `nop >= 1`): headers cannot be rewritten, so the segment header
//!   holds only segment information and each block's record is written in the spare area
//!   of the block's last page, in the same program as that page. Stale copies are resolved
//!   by the record's sequence number at mount.

use nand::Geometry;

use crate::DevError;

pub const SEG_MAGIC: u32 = 0x484D_5346; // "FSMH"
pub const SEG_VERSION: u16 = 1;
pub const SEG_HEADER: usize = 64;
pub const ENTRY: usize = 24;
pub const SPARE_RECORD: usize = 16;
pub const INDEX_ENTRY: usize = 16;
pub const INDEX_MAGIC: u16 = 0x1DE5;
/// Spare mode: programmed at spare offset 1 of every page of a multi-page slot except the
/// last (which holds the record), so a page erased by a torn erase is told from a written
/// page of 0xFF bytes.
pub const PAGE_MARK: [u8; 1] = [0x00];
/// Spare mode, on devices whose pages are programmed in order: the record programmed into
/// the last page of a slot that a power cut left partly programmed without its record,
/// so that the slots after it can be written (`Fms::pad_torn_slot`). Fifteen zero bytes:
/// not erased, so mount counts the slot used, and never a record (its checksum fails),
/// so no block maps there.
pub const PAD_RECORD: [u8; SPARE_RECORD - 1] = [0; SPARE_RECORD - 1];
/// Largest logical block number (0xFFFF_FFFF marks an empty entry).
pub const MAX_LBN: u32 = 0xFFFF_FFFE;
/// Spare mode: the lbn field of a trim-list slot's record ([`TrimList`]). No medium has
/// that many blocks (a physical slot number is a `u32` below `0xFFFF_FFFF`, and the
/// logical blocks are fewer than the physical slots), so it never names a block.
pub const TRIM_LIST_LBN: u32 = 0xFFFF_FFFE;
/// Spare mode: a trim-list slot's record checksum is the block-record checksum XOR this,
/// so a reader that does not know trim lists (before stop 16) takes the record for a torn
/// one: the slot is used, no block maps there, and trims are as they were for it (not
/// durable), never misread.
pub const TRIM_LIST_CRC_XOR: u32 = 0x5452_494D; // "TRIM"
/// Magic at byte 0 of a trim list's data.
pub const TRIM_LIST_MAGIC: u32 = 0x544D_5346; // "FSMT"
/// Bytes before a trim list's first entry.
pub const TRIM_LIST_HEADER: usize = 16;
/// Bytes of a trim list entry: lbn u32, sequence number u64.
pub const TRIM_ENTRY: usize = 12;
/// Segment header features word (bytes 48..52), bit 0: every page of a data slot carries
/// the SEC-DED code of its data (`nand::ecc`, 3 bytes per 512) at spare offset
/// [`ECC_SPARE_OFFSET`] (`fms format --ecc`; spare mode only).
pub const FEATURE_ECC: u32 = 1;
/// Segment header features word, bit 1 (header mode only; after stop 21): the live state
/// of a header-mode entry is carried by seven bits of its flags byte (bits 0 and 2..7,
/// [`LiveFlag::Byte`]) instead of bit 0 alone, so that a bit flipped for good in the
/// flags byte, which the entry's checksum leaves out, can change neither state. New
/// header-mode formats set it (`FmsConfig::live_byte`); a reader that does not know it
/// refuses the medium (an unknown bit) rather than take a cleared entry's bit 0 alone.
pub const FEATURE_LIVE_BYTE: u32 = 2;
/// Segment header features word, bit 2 (spare mode with [`FEATURE_ECC`] only; after stop
/// 22): the header page's first 512-byte chunk (the header and 448 bytes of `0xFF`)
/// carries the medium's code, at spare offset [`ECC_SPARE_OFFSET`] of page 0, programmed
/// with the header. Mount corrects a header that does not decode with it (up to the
/// code's strength in bits), where it corrected one bit by CRC search alone. New
/// spare-mode formats with ECC set it (`FmsConfig::header_code`); a reader that does not
/// know it refuses the medium (an unknown bit).
pub const FEATURE_HEADER_CODE: u32 = 4;
/// Segment header features word, bit 3 (spare mode only; after stop 22): a data segment
/// whose last slot is written gets a **segment summary** ([`SegSummary`]) in the pages
/// after its last slot, a copy of every slot's spare record, so that mount reads one page
/// for a full segment instead of a spare area per slot (the idea of JFFS2's erase-block
/// summary). Set by new spare-mode formats when the pages past the last slot hold it
/// (`FmsConfig::segment_summaries`, [`Layout::summary_page`]); a reader that does not know
/// it refuses the medium (an unknown bit). The summary is a cache of what the records
/// say: a mount that does not find a valid one reads the records.
pub const FEATURE_SUMMARY: u32 = 8;
/// Segment header features word, bit 8 (spare mode only; after stop 31): **record
/// correction**. A spare record one bit from valid (in two reads that agree) that a later
/// slot's decoding record follows in its segment is read corrected, and a mount that finds
/// a record one or two bits from valid in a data segment's *tail* (its records after the
/// last one that decodes) takes the segment for full, so that no slot is ever written
/// after such a record: a cut that left a record one bit short is then always in its
/// segment's tail, and a record one bit from valid with a decoding record after it was
/// written whole (`docs/format/fms.md`, Mount, step 2; `mount::settle`). Set by new
/// spare-mode formats (`FmsConfig::record_correction`); a reader that does not know it
/// refuses the medium (an unknown bit), since it would write after such records.
pub const FEATURE_RECORD_CORRECTION: u32 = 0x100;
/// Segment header features word, bit 9 (spare mode only; stop 35): **first-page slot
/// test**. Where no slot before it in its segment holds a record, a mount judges a slot
/// torn or free by its first page alone (`mount::slot_unwritten`): every FMS that writes
/// such a medium programs a slot's pages in order, each with a mark or the record, and
/// never writes a slot after one without a record at a segment's start unless that
/// slot's first page is programmed. Builds before stop 35 skipped any slot not fully
/// erased there (pages a torn erase kept further in) and wrote after it, and a
/// first-page test would stop before their records: media without the bit are read a
/// whole slot at a time, as before. Set by new spare-mode formats
/// (`FmsConfig::first_page_test`); a reader that does not know it refuses the medium (an
/// unknown bit), since it would write after such slots.
pub const FEATURE_FIRST_PAGE: u32 = 0x200;
/// The feature bits this version reads; a medium with others is refused at mount.
pub const FEATURES_KNOWN: u32 = FEATURE_ECC
    | FEATURE_LIVE_BYTE
    | FEATURE_HEADER_CODE
    | FEATURE_SUMMARY
    | FEATURE_BCH_MASK
    | FEATURE_RECORD_CORRECTION
    | FEATURE_FIRST_PAGE;
/// Segment summary magic (bytes `46 4D 53 53`, "FMSS").
pub const SUMMARY_MAGIC: u32 = 0x5353_4D46;
/// Bytes of a segment summary before its records.
pub const SUMMARY_HEADER: usize = 32;
/// Bytes of each slot's record in a segment summary: the spare record as programmed (spare
/// bytes 1..16).
pub const SUMMARY_RECORD: usize = SPARE_RECORD - 1;
/// Bytes of each slot in a segment summary: its record ([`SUMMARY_RECORD`]) and the time
/// of its block's last user write (u32 milliseconds, as a header-mode entry's;
/// `0xFFFFFFFF`: not known, the record's time as mount had it without summaries).
pub const SUMMARY_SLOT: usize = SUMMARY_RECORD + 4;
/// A summary slot's time when it is not known.
pub const SUMMARY_NO_TIME: u32 = u32::MAX;
/// Features bits 4–7, with [`FEATURE_ECC`]: the strength of the code, bits corrected per
/// 512 bytes, when it is a BCH code (2..=8; `nand::bch`); 0 for the SEC-DED code (stop 21;
/// zero before). A reader from before stop 21 refuses such a medium (an unknown bit)
/// rather than reading BCH codes as SEC-DED ones.
pub const FEATURE_BCH_SHIFT: u32 = 4;
/// The bits of the BCH strength in the features word.
pub const FEATURE_BCH_MASK: u32 = 0xF << FEATURE_BCH_SHIFT;

/// The features word of a medium whose pages carry codes of strength `t` (0: none).
pub fn features_of(t: u8) -> u32 {
    match t {
        0 => 0,
        1 => FEATURE_ECC,
        t => FEATURE_ECC | (t as u32) << FEATURE_BCH_SHIFT,
    }
}

/// The code strength a features word records (0: no ECC), or `Err` for a BCH field
/// without the ECC bit, or a strength of 1 or above 8 in it.
pub fn ecc_strength_of(features: u32) -> Result<u8, String> {
    let bch = (features & FEATURE_BCH_MASK) >> FEATURE_BCH_SHIFT;
    match (features & FEATURE_ECC != 0, bch) {
        (false, 0) => Ok(0),
        (true, 0) => Ok(1),
        (true, t) if t >= 2 && t <= nand::ecc::MAX_STRENGTH as u32 => Ok(t as u8),
        (ecc, t) => Err(format!(
            "features {features:#x}: BCH strength {t}{}",
            if ecc {
                " (known: 2 to 8)"
            } else {
                " without the ECC bit"
            }
        )),
    }
}

/// The strength of the code a header whose features are `features` carries on its first
/// chunk ([`FEATURE_HEADER_CODE`]), or `None` when it carries none (no bit, or no ECC).
pub fn header_code_of(features: u32) -> Option<u8> {
    match ecc_strength_of(features) {
        Ok(t) if t > 0 && features & FEATURE_HEADER_CODE != 0 => Some(t),
        _ => None,
    }
}

/// How a header-mode entry's flags byte (byte 5, outside the checksum) says whether the
/// copy is live; the discriminant is the mask of the bits a clear programs to 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum LiveFlag {
    /// Bit 0 alone (media formatted without [`FEATURE_LIVE_BYTE`], and spare mode, where
    /// records carry no live flag): written 1, cleared by programming the byte `& 0xFE`.
    Bit = 0x01,
    /// Bits 0 and 2..7 ([`FEATURE_LIVE_BYTE`]): written 1, cleared together by
    /// programming the byte `& 0x02` (bit 1, the writable hint, kept), read live when at
    /// least 4 of the 7 read 1. One bit flipped for good leaves a live copy 6 bits set and
    /// a cleared one 1: neither changes state. A clear that a power cut tore may leave
    /// any subset: either reading is then right (the clear had not completed).
    Byte = 0xFD,
}

impl LiveFlag {
    /// The bits a clear of the live state programs to 0.
    #[inline(always)]
    pub fn clear_mask(self) -> u8 {
        self as u8
    }

    /// Whether a flags byte read from flash says live.
    #[inline]
    pub fn is_live(self, flags: u8) -> bool {
        match self {
            LiveFlag::Bit => flags & 1 != 0,
            LiveFlag::Byte => (flags & LiveFlag::Byte as u8).count_ones() >= 4,
        }
    }

    /// What `fms info` calls it: "byte" (seven bits, majority), "bit" (bit 0 alone);
    /// "none" in spare mode, whose records have no live flag.
    pub fn name(self, mode: RecordMode) -> &'static str {
        match (mode, self) {
            (RecordMode::Spare, _) => "none",
            (RecordMode::Header, LiveFlag::Bit) => "bit",
            (RecordMode::Header, LiveFlag::Byte) => "byte",
        }
    }
}

/// "SEC-DED" or "BCH-t" for a code of strength `t` (1..=8), "none" for 0.
pub fn ecc_name(t: u8) -> String {
    match t {
        0 => "none".into(),
        1 => "SEC-DED".into(),
        t => format!("BCH-{t}"),
    }
}
/// Spare offset of a slot page's first ECC code byte (after the bad-block marker and the
/// 15-byte record or page mark).
pub const ECC_SPARE_OFFSET: usize = SPARE_RECORD;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordMode {
    Header,
    Spare,
}

#[inline]
fn page_col((shift, page_size): (Option<u32>, u32), off: u64) -> (u64, u32) {
    match shift {
        Some(sh) => (off >> sh, (off & ((1u64 << sh) - 1)) as u32),
        None => (off / page_size as u64, (off % page_size as u64) as u32),
    }
}

/// The pieces of a byte span of a segment, page by page ([`Layout::pages_of`]): the first
/// starts at the span's column, every later one at column 0 of the next page, so only the
/// first needs a division (or shift).
#[derive(Clone, Debug)]
pub struct Pieces {
    page: u64,
    col: u32,
    done: u64,
    len: u64,
    page_size: u32,
}

impl Iterator for Pieces {
    type Item = (u64, u32, usize, usize);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.done >= self.len {
            return None;
        }
        let n = ((self.page_size - self.col) as u64).min(self.len - self.done);
        let piece = (self.page, self.col, self.done as usize, n as usize);
        self.done += n;
        self.page += 1;
        self.col = 0;
        Some(piece)
    }
}

/// Where everything sits inside a segment.
#[derive(Clone, Debug)]
pub struct Layout {
    pub mode: RecordMode,
    pub block_size: u32,
    pub page_size: u32,
    pub pages_per_seg: u32,
    pub segments: u32,
    /// Bytes at the start of each segment taken by the header.
    pub header_bytes: u32,
    /// Data slots (FMS blocks) per segment.
    pub slots: u32,
    /// Pages per slot (spare mode; in header mode a slot may be part of a page).
    pub pages_per_slot: u32,
    /// Index entries per index-segment page.
    pub index_per_page: u32,
    pub nop: u32,
    /// log2 of the page size when it is a power of two (shifts instead of divisions when
    /// segment offsets are turned into pages).
    page_shift: Option<u32>,
    /// When every slot is one whole page (blocks the size of a page; the header takes
    /// whole blocks), the page of slot 0: a slot's page is then one addition away.
    page_slots: Option<u64>,
    /// Spare mode: slot pages carry ECC codes ([`FEATURE_ECC`]) of this strength, bits
    /// corrected per 512 bytes (`nand::ecc::code_bytes`): 0 without ECC, 1 SEC-DED, 2..=8
    /// BCH ([`FEATURE_BCH_SHIFT`]).
    pub ecc_t: u8,
    /// Header mode: how entries carry the live state ([`LiveFlag::Byte`] with
    /// [`FEATURE_LIVE_BYTE`]: new formats, and mounts of media whose headers have it;
    /// [`LiveFlag::Bit`] otherwise). Always [`LiveFlag::Bit`] in spare mode.
    pub live: LiveFlag,
    /// Spare mode with ECC: segment headers carry the code of their page's first chunk
    /// ([`FEATURE_HEADER_CODE`]: new formats, and mounts of media whose headers have it).
    /// Without ECC, or in header mode, it has no effect ([`Layout::features`]).
    pub header_code: bool,
    /// Spare mode: the page of a segment where its summary starts ([`FEATURE_SUMMARY`]),
    /// right after the last slot's pages, when the medium has summaries (new formats,
    /// and mounts of media whose headers have the bit) and the pages past the last slot
    /// hold one; `None` otherwise.
    pub summary_page: Option<u32>,
    /// Spare mode: a record one bit from valid before a record that decodes is corrected,
    /// and a segment whose tail holds a record one or two bits from valid is closed
    /// ([`FEATURE_RECORD_CORRECTION`]: new formats, and mounts of media whose headers have it).
    /// In header mode it has no effect ([`Layout::features`]; entries are corrected
    /// anyway, `mount::entry_flip`).
    pub record_correction: bool,
    /// Spare mode: a slot with no record before it in its segment is judged torn or free
    /// by its first page ([`FEATURE_FIRST_PAGE`]: new formats, and mounts of media whose
    /// headers have it). In header mode it has no effect.
    pub first_page: bool,
}

impl Layout {
    /// The pieces of the byte span `off..off + len` of a segment, one per page it touches:
    /// (page of the segment, column, offset inside the span, length).
    #[inline]
    pub fn pages_of(&self, off: u64, len: u64) -> Pieces {
        let (page, col) = self.page_col(off);
        Pieces {
            page,
            col,
            done: 0,
            len,
            page_size: self.page_size,
        }
    }

    /// The device spans (page, column, length) of slot `slot` of the segment whose first
    /// page is `first`, appended to `out`: the pieces of [`Layout::pages_of`], with the
    /// usual cases (a slot that is a whole page, or lies within one) taken without the
    /// iterator.
    #[inline(always)]
    pub fn slot_spans(&self, first: u64, slot: u32, out: &mut Vec<(u64, u32, u32)>) {
        if let Some(p0) = self.page_slots {
            out.push((first + p0 + slot as u64, 0, self.page_size));
            return;
        }
        let off = self.slot_offset(slot);
        let (page, col) = self.page_col(off);
        if col as u64 + self.block_size as u64 <= self.page_size as u64 {
            out.push((first + page, col, self.block_size));
        } else {
            for (page, col, _, n) in self.pages_of(off, self.block_size as u64) {
                out.push((first + page, col, n as u32));
            }
        }
    }

    /// When every slot is one whole page, the page of slot 0 within its segment.
    #[inline(always)]
    pub fn page_slots(&self) -> Option<u64> {
        self.page_slots
    }

    /// The pieces of slot `slot`: `pages_of(slot_offset(slot), block_size)`, without the
    /// page arithmetic when every slot is a whole page.
    #[inline]
    pub fn slot_pieces(&self, slot: u32) -> Pieces {
        match self.page_slots {
            Some(p0) => Pieces {
                page: p0 + slot as u64,
                col: 0,
                done: 0,
                len: self.block_size as u64,
                page_size: self.page_size,
            },
            None => self.pages_of(self.slot_offset(slot), self.block_size as u64),
        }
    }

    /// A byte offset inside a segment as (page of the segment, column).
    #[inline]
    pub fn page_col(&self, off: u64) -> (u64, u32) {
        page_col((self.page_shift, self.page_size), off)
    }

    pub fn new(geo: &Geometry, block_size: u32) -> Result<Layout, DevError> {
        let cfg = |m: String| Err(DevError::config(m));
        if block_size < 512 || !block_size.is_power_of_two() {
            return cfg(format!(
                "block_size: {block_size} must be a power of two of at least 512"
            ));
        }
        let seg_bytes = geo.block_bytes();
        if block_size as u64 > seg_bytes / 2 {
            return cfg(format!(
                "block_size: {block_size} too large for {seg_bytes}-byte erase segments (a \
                 block may be at most half a segment: {} here)",
                prev_power_of_two(seg_bytes / 2)
            ));
        }
        if geo.page_size < SEG_HEADER as u32 {
            return cfg("device: page too small for the segment header".into());
        }
        let nop = geo.nop;
        if nop == 0 && geo.in_order {
            // Header mode programs a slot's entry into the segment's first pages after the
            // slot's data: pages out of order. (Spare mode needs a page budget, nop >= 1.)
            return cfg(
                "device: in_order = true with nop = 0 cannot hold the FMS: its segment headers take each block's entry after the block's data (pages out of order); set in_order = false, or nop >= 1 with a spare area for per-page records".into(),
            );
        }
        if nop == 0 {
            // Header mode: the header (with one entry per slot) takes whole blocks.
            // The fewest blocks h >= 1 holding SEG_HEADER + total·ENTRY bytes, in u64: the
            // header must fit a u32 of bytes, so a segment of absurdly many blocks is
            // refused rather than truncated (a u32 product used to wrap and loop for ever).
            let total = seg_bytes / block_size as u64;
            let need = SEG_HEADER as u64 + total * ENTRY as u64;
            let h = need.div_ceil(block_size as u64).max(1);
            if h * block_size as u64 > u32::MAX as u64 {
                return cfg(format!(
                    "block_size: {block_size} makes {total} blocks per {seg_bytes}-byte erase segment, whose header of {need} bytes exceeds 4 GiB; use larger blocks or smaller erase blocks"
                ));
            }
            let (total, h) = (total as u32, h as u32);
            let per_page = geo.page_size / INDEX_ENTRY as u32;
            Ok(Layout {
                mode: RecordMode::Header,
                block_size,
                page_size: geo.page_size,
                pages_per_seg: geo.pages_per_block,
                segments: geo.blocks,
                header_bytes: h * block_size,
                slots: total - h,
                pages_per_slot: block_size.div_ceil(geo.page_size),
                index_per_page: per_page.max(1),
                nop,
                page_shift: geo
                    .page_size
                    .is_power_of_two()
                    .then(|| geo.page_size.trailing_zeros()),
                page_slots: None,
                ecc_t: 0,
                live: LiveFlag::Byte,
                header_code: true,
                summary_page: None,
                record_correction: true,
                first_page: true,
            }
            .derived())
        } else {
            if !block_size.is_multiple_of(geo.page_size) {
                return cfg(format!(
                    "block_size: {block_size} must be a multiple of the {}-byte page on NAND devices",
                    geo.page_size
                ));
            }
            if (geo.spare_size as usize) < SPARE_RECORD {
                return cfg(format!(
                    "device: spare area of {} bytes is too small for the {SPARE_RECORD}-byte block record that the FMS keeps in the spare area when pages take a limited number of programs (nop = {nop}); give a spare area of at least {SPARE_RECORD} bytes, or nop = 0 (records in segment headers)",
                    geo.spare_size
                ));
            }
            let pps = block_size / geo.page_size;
            let slots = (geo.pages_per_block - 1) / pps;
            if slots < 2 {
                return cfg(format!(
                    "block_size: {block_size} leaves fewer than 2 blocks per {seg_bytes}-byte segment"
                ));
            }
            let per_page = (geo.page_size / INDEX_ENTRY as u32).min(nop);
            Ok(Layout {
                mode: RecordMode::Spare,
                block_size,
                page_size: geo.page_size,
                pages_per_seg: geo.pages_per_block,
                segments: geo.blocks,
                header_bytes: geo.page_size,
                slots,
                pages_per_slot: pps,
                index_per_page: per_page.max(1),
                nop,
                page_shift: geo
                    .page_size
                    .is_power_of_two()
                    .then(|| geo.page_size.trailing_zeros()),
                page_slots: None,
                ecc_t: 0,
                live: LiveFlag::Bit,
                header_code: true,
                summary_page: None,
                record_correction: true,
                first_page: true,
            }
            .derived()
            .with_summary(true))
        }
    }

    /// The layout with the live state carried as `live` says in header mode (a medium's
    /// headers with or without [`FEATURE_LIVE_BYTE`]): `true` seven bits of the flags
    /// byte, `false` bit 0 alone, the encoding of media formatted before the feature.
    /// Spare mode has no live flag: unchanged.
    pub fn with_live_byte(self, live: bool) -> Layout {
        match self.mode {
            RecordMode::Spare => self,
            RecordMode::Header => Layout {
                live: if live { LiveFlag::Byte } else { LiveFlag::Bit },
                ..self
            },
        }
    }

    /// The layout with segment headers that carry a code ([`FEATURE_HEADER_CODE`]) or
    /// not (media formatted before the feature).
    pub fn with_header_code(self, code: bool) -> Layout {
        Layout {
            header_code: code,
            ..self
        }
    }

    /// The layout with spare records corrected ([`FEATURE_RECORD_CORRECTION`]) or not
    /// (media formatted before the feature).
    pub fn with_record_correction(self, on: bool) -> Layout {
        Layout {
            record_correction: on,
            ..self
        }
    }

    /// The layout with slots judged by their first page where no record precedes them
    /// ([`FEATURE_FIRST_PAGE`]) or not (media formatted before the feature).
    pub fn with_first_page(self, on: bool) -> Layout {
        Layout {
            first_page: on,
            ..self
        }
    }

    /// Whether a mount judges a slot with no record before it in its segment by its
    /// first page ([`FEATURE_FIRST_PAGE`]).
    pub fn judges_by_first_page(&self) -> bool {
        self.mode == RecordMode::Spare && self.first_page
    }

    /// Whether a mount corrects a spare record one bit from valid that a decoding record
    /// follows, and closes a segment whose tail holds a record one or two bits from valid
    /// ([`FEATURE_RECORD_CORRECTION`]).
    pub fn corrects_records(&self) -> bool {
        self.mode == RecordMode::Spare && self.record_correction
    }

    /// The layout with segment summaries ([`FEATURE_SUMMARY`]) or without (media
    /// formatted before the feature, or with `FmsConfig::segment_summaries` off). Spare
    /// mode only, and only when the pages after the last slot hold
    /// [`Layout::summary_bytes`]: otherwise there are none.
    pub fn with_summary(self, on: bool) -> Layout {
        let first = 1 + self.slots * self.pages_per_slot;
        let room = self.pages_per_seg.saturating_sub(first) as usize * self.page_size as usize;
        let fits = self.mode == RecordMode::Spare && room >= self.summary_bytes();
        Layout {
            summary_page: (on && fits).then_some(first),
            ..self
        }
    }

    /// Why a medium of `device` (its geometry `geo`) with `block_size`-byte blocks has no
    /// segment summaries whatever the configuration says, in words an option refusal can
    /// quote: a header-mode device has no per-page spare records, and a spare-mode segment
    /// whose pages past its last slot cannot hold one has none either. `None` when it has
    /// them, or when the block size gives no layout (the FMS then says why).
    pub fn why_no_summaries(geo: &Geometry, block_size: u32, device: &str) -> Option<String> {
        // (`Layout::new` gives summaries wherever they fit.)
        let lay = Layout::new(geo, block_size).ok()?;
        if lay.summary_page.is_some() {
            return None;
        }
        Some(match lay.mode {
            RecordMode::Header => format!(
                "header-mode devices ({device}: no per-page spare records) keep no segment summaries"
            ),
            RecordMode::Spare => format!(
                "the segments of {device} with {block_size}-byte blocks have no room for a summary after their last slot"
            ),
        })
    }

    /// Pages a segment's summary takes (0 without summaries).
    pub fn summary_pages(&self) -> u32 {
        match self.summary_page {
            Some(_) => (self.summary_bytes() as u32).div_ceil(self.page_size),
            None => 0,
        }
    }

    /// Bytes of a segment summary: [`SUMMARY_HEADER`] and [`SUMMARY_SLOT`] bytes a slot.
    pub fn summary_bytes(&self) -> usize {
        SUMMARY_HEADER + self.slots as usize * SUMMARY_SLOT
    }

    /// The features word of this layout's segment headers: the code
    /// ([`features_of`]) and, in header mode with [`LiveFlag::Byte`],
    /// [`FEATURE_LIVE_BYTE`]; in spare mode with ECC and [`Layout::header_code`],
    /// [`FEATURE_HEADER_CODE`]; in spare mode, [`FEATURE_SUMMARY`] with a summary page and
    /// [`FEATURE_RECORD_CORRECTION`] with [`Layout::record_correction`] and
    /// [`FEATURE_FIRST_PAGE`] with [`Layout::first_page`].
    pub fn features(&self) -> u32 {
        let live = match (self.mode, self.live) {
            (RecordMode::Header, LiveFlag::Byte) => FEATURE_LIVE_BYTE,
            _ => 0,
        };
        let summary = if self.summary_page.is_some() {
            FEATURE_SUMMARY
        } else {
            0
        };
        let torn = if self.corrects_records() {
            FEATURE_RECORD_CORRECTION
        } else {
            0
        };
        let first = if self.judges_by_first_page() {
            FEATURE_FIRST_PAGE
        } else {
            0
        };
        features_of(self.ecc_t) | live | self.header_code_feature() | summary | torn | first
    }

    /// [`FEATURE_HEADER_CODE`] when this layout's headers carry a code, else 0.
    fn header_code_feature(&self) -> u32 {
        if self.mode == RecordMode::Spare && self.ecc_t > 0 && self.header_code {
            FEATURE_HEADER_CODE
        } else {
            0
        }
    }

    /// The strength of the code segment headers carry (`None`: they carry none).
    pub fn header_code_t(&self) -> Option<u8> {
        header_code_of(self.features())
    }

    /// The layout with ECC codes of strength `t` (bits corrected per 512 bytes: 1 SEC-DED,
    /// 2..=8 BCH; 0 = none) in the slot pages' spare areas ([`FEATURE_ECC`]): spare mode
    /// only, with pages of whole 512-byte chunks and a spare area that holds the record
    /// area and the page's codes.
    pub fn with_ecc(self, t: u8, geo: &Geometry) -> Result<Layout, DevError> {
        if t == 0 {
            return Ok(Layout { ecc_t: 0, ..self });
        }
        let cfg = |m: String| Err(DevError::config(m));
        if t > nand::ecc::MAX_STRENGTH {
            return cfg(format!(
                "ecc: strength {t} bits per 512 bytes; this flashkit knows 1 (SEC-DED) to {} (BCH)",
                nand::ecc::MAX_STRENGTH
            ));
        }
        if self.mode != RecordMode::Spare {
            return cfg("ecc: the FMS keeps ECC codes in the spare area, and this device (nop = 0) has its records in segment headers; ECC needs a NAND device (nop >= 1)".into());
        }
        if !geo.page_size.is_multiple_of(nand::ecc::ECC_CHUNK as u32) {
            return cfg(format!(
                "ecc: the {}-byte page is not a whole number of {}-byte ECC chunks",
                geo.page_size,
                nand::ecc::ECC_CHUNK
            ));
        }
        let with = Layout { ecc_t: t, ..self };
        let need = ECC_SPARE_OFFSET + with.ecc_bytes();
        if (geo.spare_size as usize) < need {
            return cfg(format!(
                "ecc: the {}-byte spare area cannot hold the {ECC_SPARE_OFFSET}-byte record area and {} code bytes ({} per {}-byte chunk for {}); this needs a spare area of at least {need} bytes",
                geo.spare_size,
                with.ecc_bytes(),
                nand::ecc::code_bytes(t),
                nand::ecc::ECC_CHUNK,
                ecc_name(t),
            ));
        }
        Ok(with)
    }

    /// Whether slot pages carry ECC codes.
    #[inline(always)]
    pub fn ecc(&self) -> bool {
        self.ecc_t > 0
    }

    /// ECC code bytes of one page.
    pub fn ecc_bytes(&self) -> usize {
        self.page_size as usize / nand::ecc::ECC_CHUNK * nand::ecc::code_bytes(self.ecc_t)
    }

    /// The layout with its derived fields set from the others.
    pub(crate) fn derived(self) -> Layout {
        let whole =
            self.block_size == self.page_size && self.header_bytes.is_multiple_of(self.page_size);
        Layout {
            page_slots: whole.then_some((self.header_bytes / self.page_size) as u64),
            ..self
        }
    }

    /// Byte offset of data slot `slot` within its segment.
    #[inline]
    pub fn slot_offset(&self, slot: u32) -> u64 {
        self.header_bytes as u64 + slot as u64 * self.block_size as u64
    }

    /// Index entries per index segment cycle.
    pub fn index_capacity(&self) -> u32 {
        self.index_per_page * (self.pages_per_seg - 1)
    }

    /// The first block sequence number a record cannot hold: 2^40 in spare mode (a u40
    /// field), 2^64 − 1 in header mode (so that the successor of any number read stays
    /// representable).
    pub fn seq_end(&self) -> u64 {
        match self.mode {
            RecordMode::Spare => 1 << 40,
            RecordMode::Header => u64::MAX,
        }
    }
}

/// The largest device time, in milliseconds, that mount believes when it finds one in a
/// segment header or a header-mode entry: half the device clock's range (`u64::MAX / 2`
/// picoseconds, 106.7 days). A time beyond it is taken for foreign or corrupt and ignored,
/// so that it can neither overflow the conversion to picoseconds, nor push the clock
/// towards its end (where it saturates), nor make every other segment look ancient by
/// months. Real media stay far below: the clock counts device time (busy time, plus the
/// idle time a simulated trace's arrivals give), and an entry's 32-bit time saturates at
/// 49.7 days.
pub const MAX_MEDIUM_TIME_MS: u64 = u64::MAX / 2 / MS_PS;

/// Picoseconds per millisecond, the unit of the times on flash.
const MS_PS: u64 = 1_000_000_000;

/// A device time read from the medium (milliseconds) as the device clock's picoseconds,
/// or `None` when it is beyond [`MAX_MEDIUM_TIME_MS`] (foreign or corrupt).
pub fn medium_time_ps(ms: u64) -> Option<u64> {
    (ms <= MAX_MEDIUM_TIME_MS).then(|| ms * MS_PS)
}

/// The segment header (64 bytes at the start of every segment).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegHeader {
    pub erase_count: u32,
    pub block_size: u32,
    pub slots: u32,
    /// Logical blocks the medium was formatted to export (0: not recorded).
    pub logical_blocks: u32,
    /// 1 for the index segment, 0 for data segments.
    pub kind: u16,
    pub erase_seq: u64,
    pub time_ms: u64,
    /// The format that wrote this header: every header a format and its FMS write carry
    /// the same number, one more than the largest found on the medium at format (0 on
    /// media formatted before it was recorded). Mount reads a grown-bad segment's records
    /// only when its header carries the medium's number, so a block that went bad under
    /// an earlier format cannot bring that format's blocks back.
    pub format_id: u64,
    /// Feature bits ([`FEATURE_ECC`]); 0 on media formatted without them.
    pub features: u32,
}

impl SegHeader {
    pub fn encode(&self) -> [u8; SEG_HEADER] {
        let mut b = [0u8; SEG_HEADER];
        b[0..4].copy_from_slice(&SEG_MAGIC.to_le_bytes());
        b[4..6].copy_from_slice(&SEG_VERSION.to_le_bytes());
        b[6..8].copy_from_slice(&self.kind.to_le_bytes());
        b[8..12].copy_from_slice(&self.erase_count.to_le_bytes());
        b[12..16].copy_from_slice(&self.block_size.to_le_bytes());
        b[16..20].copy_from_slice(&self.slots.to_le_bytes());
        b[20..24].copy_from_slice(&self.logical_blocks.to_le_bytes());
        b[24..32].copy_from_slice(&self.erase_seq.to_le_bytes());
        b[32..40].copy_from_slice(&self.time_ms.to_le_bytes());
        b[40..48].copy_from_slice(&self.format_id.to_le_bytes());
        b[48..52].copy_from_slice(&self.features.to_le_bytes());
        let crc = crc32c(&b[0..60]);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// `Ok(None)` for an erased header, `Err` text for garbage.
    pub fn decode(b: &[u8]) -> Result<Option<SegHeader>, String> {
        if b.iter().all(|&x| x == 0xFF) {
            return Ok(None);
        }
        let u32at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        let u64at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
        if u32at(0) != SEG_MAGIC {
            return Err("bad segment magic".into());
        }
        if u32at(60) != crc32c(&b[0..60]) {
            return Err("segment header checksum mismatch".into());
        }
        let v = u16::from_le_bytes([b[4], b[5]]);
        if v != SEG_VERSION {
            return Err(format!("segment header version {v} unsupported"));
        }
        Ok(Some(SegHeader {
            kind: u16::from_le_bytes([b[6], b[7]]),
            erase_count: u32at(8),
            block_size: u32at(12),
            slots: u32at(16),
            logical_blocks: u32at(20),
            erase_seq: u64at(24),
            time_ms: u64at(32),
            format_id: u64at(40),
            features: u32at(48),
        }))
    }
}

/// The one decoding of `b` with a single bit flipped: `decode` is tried on `b` with each
/// of its bits flipped in turn, and the result is `Some` only when exactly one flip
/// decodes. Used at mount on structures that failed their checksum (a bit flipped for
/// good in a segment header or a header-mode entry); never on the write or cleaning
/// paths. CRC-32C has a Hamming distance of at least 6 over these lengths (up to 64
/// bytes), so two valid words are never two bits apart and the flip, when one decodes,
/// is the only one; the count is checked anyway.
pub fn one_bit_from<T>(b: &[u8], mut decode: impl FnMut(&[u8]) -> Option<T>) -> Option<T> {
    let mut w = b.to_vec();
    let mut found = None;
    for bit in 0..b.len() * 8 {
        w[bit / 8] ^= 1 << (bit % 8);
        if let Some(t) = decode(&w) {
            if found.is_some() {
                return None;
            }
            found = Some(t);
        }
        w[bit / 8] ^= 1 << (bit % 8);
    }
    found
}

/// Whether `b` with some two of its bits flipped decodes (`decode`): a structure two bits
/// from a valid one (mount closes a segment whose tail holds such a spare record:
/// `mount::settle`). Every pair is tried (`n·(n−1)/2` decodes for `n` bits), so only small
/// structures that failed their checksum are given to it.
pub fn two_bits_from<T>(b: &[u8], mut decode: impl FnMut(&[u8]) -> Option<T>) -> bool {
    let mut w = b.to_vec();
    let n = b.len() * 8;
    for i in 0..n {
        w[i / 8] ^= 1 << (i % 8);
        for j in i + 1..n {
            w[j / 8] ^= 1 << (j % 8);
            let hit = decode(&w).is_some();
            w[j / 8] ^= 1 << (j % 8);
            if hit {
                return true;
            }
        }
        w[i / 8] ^= 1 << (i % 8);
    }
    false
}

/// A block's record: the per-block information of the papers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    pub lbn: u32,
    pub region: u8,
    pub readonly: bool,
    pub live: bool,
    pub updates: u16,
    pub seq: u64,
    pub time_ms: u32,
}

const FLAG_LIVE: u8 = 1;
/// Bit 1 of a header-mode entry's flags byte: the writable hint (clear: read-only).
pub const FLAG_WRITABLE: u8 = 2;

impl Record {
    /// 24-byte header-mode entry. Byte 5 holds the flags (bit 1 writable, every other bit
    /// 1: bit 0 live, and with [`LiveFlag::Byte`] bits 2..7 live too, the same bytes) and
    /// is excluded from the checksum so the live state can be cleared in place.
    #[inline(always)]
    pub fn encode_entry(&self) -> [u8; ENTRY] {
        let flags = 0xFC | FLAG_LIVE | if self.readonly { 0 } else { FLAG_WRITABLE };
        // Built as little-endian words in registers: byte arrays stored piecemeal and read
        // back as words for the CRC stall on store forwarding (7 % of the simulator's time).
        let w0 = |f: u8| {
            self.lbn as u64
                | (self.region as u64) << 32
                | (f as u64) << 40
                | (self.updates as u64) << 48
        };
        let crc = entry_crc_words(w0(0xFF), self.seq, self.time_ms);
        let mut b = [0u8; ENTRY];
        b[0..8].copy_from_slice(&w0(flags).to_le_bytes());
        b[8..16].copy_from_slice(&self.seq.to_le_bytes());
        b[16..24].copy_from_slice(&(self.time_ms as u64 | (crc as u64) << 32).to_le_bytes());
        b
    }

    /// Offset, inside an entry, of the flags byte.
    pub const FLAGS_OFFSET: usize = 5;

    /// The time a segment summary keeps for this record's slot ([`SUMMARY_SLOT`]): the
    /// block's last user write, or [`SUMMARY_NO_TIME`] for a trim list.
    pub fn summary_time(&self) -> u32 {
        if self.lbn == TRIM_LIST_LBN {
            SUMMARY_NO_TIME
        } else {
            self.time_ms
        }
    }

    /// Decode a header-mode entry, its live state read as `live` says (the medium's
    /// [`Layout::live`]).
    pub fn decode_entry(b: &[u8], live: LiveFlag) -> Option<Record> {
        if b.iter().all(|&x| x == 0xFF) {
            return None;
        }
        let crc = u32::from_le_bytes(b[20..24].try_into().unwrap());
        if crc != entry_crc(b) {
            return None;
        }
        Some(Record {
            lbn: u32::from_le_bytes(b[0..4].try_into().unwrap()),
            region: b[4],
            live: live.is_live(b[5]),
            readonly: b[5] & FLAG_WRITABLE == 0,
            updates: u16::from_le_bytes([b[6], b[7]]),
            seq: u64::from_le_bytes(b[8..16].try_into().unwrap()),
            time_ms: u32::from_le_bytes(b[16..20].try_into().unwrap()),
        })
    }

    /// 15 bytes programmed at spare offset 1 (byte 0 is the bad-block marker and is
    /// never programmed): lbn u32, seq u40, meta u8 (bits 0-3 region, bit 4 writable,
    /// bits 5-7 one), updates u8 (saturating), crc32c of the preceding 11 bytes.
    /// A record whose lbn is [`TRIM_LIST_LBN`] is a trim list's: its checksum is XORed
    /// with [`TRIM_LIST_CRC_XOR`].
    pub fn encode_spare(&self) -> [u8; SPARE_RECORD - 1] {
        let meta = 0xE0 | (self.region & 0x0F) | if self.readonly { 0 } else { 0x10 };
        let seq = self.seq.to_le_bytes();
        let w0 = self.lbn as u64 | (self.seq & 0xFFFF_FFFF) << 32;
        let tail = [seq[4], meta, self.updates.min(255) as u8];
        let mut crc = crc32c_words(&[w0], None, &tail);
        if self.lbn == TRIM_LIST_LBN {
            crc ^= TRIM_LIST_CRC_XOR;
        }
        let mut b = [0u8; SPARE_RECORD - 1];
        b[0..8].copy_from_slice(&w0.to_le_bytes());
        b[8..11].copy_from_slice(&tail);
        b[11..15].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decode the 15 bytes read from spare offset 1. A trim list's record decodes with
    /// lbn [`TRIM_LIST_LBN`] (and only with the XORed checksum).
    pub fn decode_spare(b: &[u8]) -> Option<Record> {
        if b.iter().all(|&x| x == 0xFF) {
            return None;
        }
        let crc = u32::from_le_bytes(b[11..15].try_into().unwrap());
        let lbn = u32::from_le_bytes(b[0..4].try_into().unwrap());
        let want = crc32c(&b[0..11]);
        let ok = if lbn == TRIM_LIST_LBN {
            crc == want ^ TRIM_LIST_CRC_XOR
        } else {
            crc == want
        };
        if !ok {
            return None;
        }
        let mut seq = [0u8; 8];
        seq[0..5].copy_from_slice(&b[4..9]);
        Some(Record {
            lbn,
            seq: u64::from_le_bytes(seq),
            region: b[9] & 0x0F,
            readonly: b[9] & 0x10 == 0,
            live: true,
            updates: b[10] as u16,
            // Spare records carry no time (a segment summary may: `SUMMARY_SLOT`).
            time_ms: SUMMARY_NO_TIME,
        })
    }
}

/// Spare mode: the data of a trim-list slot, which makes trims durable. Each entry says
/// "block `lbn` was trimmed when the next sequence number was `seq`": at mount it unmaps
/// the block unless a record of it with a number of at least `seq` exists.
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 4 | magic [`TRIM_LIST_MAGIC`] |
/// | 4 | 4 | entry count `n` |
/// | 8 | 4 | crc32c of bytes 0..8 followed by the `n` entries |
/// | 12 | 4 | zero |
/// | 16 + 12·k | 12 | entry `k`: lbn u32, seq u64 |
///
/// The rest of the slot is `0xFF`.
pub struct TrimList;

/// A segment summary ([`FEATURE_SUMMARY`]; `docs/format/fms.md`, "Segment summary"):
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 4 | magic [`SUMMARY_MAGIC`] |
/// | 4 | 4 | segment number |
/// | 8 | 8 | erase sequence of the segment's header |
/// | 16 | 8 | format number of the segment's header |
/// | 24 | 4 | slots |
/// | 28 | 4 | crc32c of bytes 0..28 followed by the slots' bytes |
/// | 32 + 19·k | 15 | slot `k`'s spare record as programmed (spare bytes 1..16) |
/// | 47 + 19·k | 4 | the time of slot `k`'s block's last user write, ms ([`SUMMARY_NO_TIME`]: not known) |
pub struct SegSummary {
    pub seg: u32,
    pub erase_seq: u64,
    pub format_id: u64,
}

impl SegSummary {
    /// Encode the summary of `slots` ([`SUMMARY_SLOT`] bytes each) into `out`
    /// ([`SUMMARY_HEADER`] + `slots.len()` bytes).
    pub fn encode(&self, slots: &[u8], out: &mut [u8]) {
        assert_eq!(out.len(), SUMMARY_HEADER + slots.len());
        assert!(slots.len().is_multiple_of(SUMMARY_SLOT));
        out[0..4].copy_from_slice(&SUMMARY_MAGIC.to_le_bytes());
        out[4..8].copy_from_slice(&self.seg.to_le_bytes());
        out[8..16].copy_from_slice(&self.erase_seq.to_le_bytes());
        out[16..24].copy_from_slice(&self.format_id.to_le_bytes());
        out[24..28].copy_from_slice(&((slots.len() / SUMMARY_SLOT) as u32).to_le_bytes());
        out[SUMMARY_HEADER..].copy_from_slice(slots);
        let crc = Self::crc(out);
        out[28..32].copy_from_slice(&crc.to_le_bytes());
    }

    fn crc(b: &[u8]) -> u32 {
        crc32c::crc32c_append(crc32c::crc32c(&b[0..28]), &b[SUMMARY_HEADER..])
    }

    /// Decode a summary of `slots` slots (`b` is [`SUMMARY_HEADER`] + 19·`slots` bytes):
    /// its header and the slots' bytes, or `None` when the magic, slot count or checksum
    /// is wrong.
    pub fn decode(b: &[u8], slots: u32) -> Option<(SegSummary, &[u8])> {
        let word = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        let dword = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
        if b.len() != SUMMARY_HEADER + slots as usize * SUMMARY_SLOT
            || word(0) != SUMMARY_MAGIC
            || word(24) != slots
            || word(28) != Self::crc(b)
        {
            return None;
        }
        let s = SegSummary {
            seg: word(4),
            erase_seq: dword(8),
            format_id: dword(16),
        };
        Some((s, &b[SUMMARY_HEADER..]))
    }

    /// A summary slot's record bytes and time ([`SUMMARY_NO_TIME`]: not known).
    pub fn slot(bytes: &[u8]) -> (&[u8], u32) {
        let t = u32::from_le_bytes(bytes[SUMMARY_RECORD..SUMMARY_SLOT].try_into().unwrap());
        (&bytes[..SUMMARY_RECORD], t)
    }
}

impl TrimList {
    /// Entries one slot of `block_size` bytes holds.
    pub fn capacity(block_size: u32) -> usize {
        (block_size as usize - TRIM_LIST_HEADER) / TRIM_ENTRY
    }

    /// Encode `entries` (at most [`TrimList::capacity`]) into `out` (one block).
    pub fn encode(entries: &[(u32, u64)], out: &mut [u8]) {
        assert!(entries.len() <= Self::capacity(out.len() as u32));
        out.fill(0xFF);
        out[0..4].copy_from_slice(&TRIM_LIST_MAGIC.to_le_bytes());
        out[4..8].copy_from_slice(&(entries.len() as u32).to_le_bytes());
        out[12..16].fill(0);
        let end = TRIM_LIST_HEADER + entries.len() * TRIM_ENTRY;
        for (k, &(lbn, seq)) in entries.iter().enumerate() {
            let at = TRIM_LIST_HEADER + k * TRIM_ENTRY;
            out[at..at + 4].copy_from_slice(&lbn.to_le_bytes());
            out[at + 4..at + 12].copy_from_slice(&seq.to_le_bytes());
        }
        let crc = Self::crc(out, end);
        out[8..12].copy_from_slice(&crc.to_le_bytes());
    }

    fn crc(b: &[u8], end: usize) -> u32 {
        let mut c = crc32c::crc32c(&b[0..8]);
        c = crc32c::crc32c_append(c, &b[TRIM_LIST_HEADER..end]);
        c
    }

    /// Decode a slot's data; `None` when the magic, count or checksum is wrong (a slot
    /// whose pages a torn erase cleared in part).
    pub fn decode(b: &[u8]) -> Option<Vec<(u32, u64)>> {
        if b.len() < TRIM_LIST_HEADER
            || u32::from_le_bytes(b[0..4].try_into().unwrap()) != TRIM_LIST_MAGIC
        {
            return None;
        }
        let n = u32::from_le_bytes(b[4..8].try_into().unwrap()) as usize;
        if n > Self::capacity(b.len() as u32) {
            return None;
        }
        let end = TRIM_LIST_HEADER + n * TRIM_ENTRY;
        if u32::from_le_bytes(b[8..12].try_into().unwrap()) != Self::crc(b, end) {
            return None;
        }
        Some(
            b[TRIM_LIST_HEADER..end]
                .chunks_exact(TRIM_ENTRY)
                .map(|e| {
                    (
                        u32::from_le_bytes(e[0..4].try_into().unwrap()),
                        u64::from_le_bytes(e[4..12].try_into().unwrap()),
                    )
                })
                .collect(),
        )
    }
}

/// CRC-32C (Castagnoli) of a short record. Same value as `crc32c::crc32c`; the crate's
/// general routine sets up a three-way parallel loop that costs more than the hashing of a
/// 20-byte entry, which the simulator does on every block write, so short inputs take an
/// inlined SSE4.2 path when the CPU has it.
#[inline]
pub fn crc32c(b: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU supports SSE4.2, checked just above.
            return unsafe { crc_sse42(b) };
        }
    }
    crc32c::crc32c(b)
}

/// CRC-32C of the 20 checksummed bytes of an entry (`w0`, `seq`, `time_ms`, little-endian):
/// [`crc32c_words`] without its loops, since every block write and copy hashes an entry.
#[inline]
fn entry_crc_words(w0: u64, seq: u64, time_ms: u32) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU supports SSE4.2, checked just above.
            return unsafe { entry_crc_sse42(w0, seq, time_ms) };
        }
    }
    crc32c_words(&[w0, seq], Some(time_ms), &[])
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn entry_crc_sse42(w0: u64, seq: u64, time_ms: u32) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u32, _mm_crc32_u64};
    let c = _mm_crc32_u64(0xFFFF_FFFF, w0);
    let c = _mm_crc32_u64(c, seq) as u32;
    !_mm_crc32_u32(c, time_ms)
}

/// CRC-32C of the little-endian bytes of `words`, then `mid` (4 bytes) if any, then
/// `tail`, computed from registers.
#[inline]
fn crc32c_words(words: &[u64], mid: Option<u32>, tail: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU supports SSE4.2, checked just above.
            return unsafe { crc_words_sse42(words, mid, tail) };
        }
    }
    crc32c_words_portable(words, mid, tail)
}

/// [`crc32c_words`] on a CPU without SSE4.2: the bytes laid out and hashed by the crate.
fn crc32c_words_portable(words: &[u64], mid: Option<u32>, tail: &[u8]) -> u32 {
    let mut b = Vec::with_capacity(words.len() * 8 + 4 + tail.len());
    for w in words {
        b.extend_from_slice(&w.to_le_bytes());
    }
    if let Some(m) = mid {
        b.extend_from_slice(&m.to_le_bytes());
    }
    b.extend_from_slice(tail);
    crc32c::crc32c(&b)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn crc_words_sse42(words: &[u64], mid: Option<u32>, tail: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u32, _mm_crc32_u64, _mm_crc32_u8};
    let mut c: u64 = 0xFFFF_FFFF;
    for &w in words {
        c = _mm_crc32_u64(c, w);
    }
    let mut c = c as u32;
    if let Some(m) = mid {
        c = _mm_crc32_u32(c, m);
    }
    for &x in tail {
        c = _mm_crc32_u8(c, x);
    }
    !c
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn crc_sse42(b: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u32, _mm_crc32_u64, _mm_crc32_u8};
    let mut c: u64 = 0xFFFF_FFFF;
    let mut words = b.chunks_exact(8);
    for w in words.by_ref() {
        c = _mm_crc32_u64(c, u64::from_le_bytes(w.try_into().unwrap()));
    }
    let mut c = c as u32;
    let mut rest = words.remainder();
    if rest.len() >= 4 {
        c = _mm_crc32_u32(c, u32::from_le_bytes(rest[..4].try_into().unwrap()));
        rest = &rest[4..];
    }
    for &x in rest {
        c = _mm_crc32_u8(c, x);
    }
    !c
}

#[inline]
fn entry_crc(b: &[u8]) -> u32 {
    let mut c = [0u8; 20];
    c.copy_from_slice(&b[0..20]);
    c[5] = 0xFF;
    crc32c(&c)
}

/// An index-segment entry: "stream `stream` now writes into segment `seg`"
/// ([`IndexEntry::ACTIVE`]), or "segment `seg`, whose erase block went bad, holds nothing
/// valid any more" ([`IndexEntry::RETIRED`], header mode; `stream` is `0xFF`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    pub kind: u8,
    pub stream: u8,
    pub seg: u32,
    pub seq: u32,
}

impl IndexEntry {
    /// "Stream `stream` now writes into segment `seg`".
    pub const ACTIVE: u8 = 1;
    /// "Segment `seg` is retired": its erase block went bad and everything valid in it has
    /// moved, so mount must not read its records (see `docs/format/fms.md`).
    pub const RETIRED: u8 = 2;

    /// "Stream `stream` now writes into segment `seg`" (its `seq` is set when appended).
    pub fn active(stream: u8, seg: u32) -> IndexEntry {
        IndexEntry {
            kind: Self::ACTIVE,
            stream,
            seg,
            seq: 0,
        }
    }

    /// "Segment `seg` is retired" (its `seq` is set when appended).
    pub fn retired(seg: u32) -> IndexEntry {
        IndexEntry {
            kind: Self::RETIRED,
            stream: 0xFF,
            seg,
            seq: 0,
        }
    }

    pub fn encode(&self) -> [u8; INDEX_ENTRY] {
        let mut b = [0u8; INDEX_ENTRY];
        b[0..2].copy_from_slice(&INDEX_MAGIC.to_le_bytes());
        b[2] = self.stream;
        b[3] = self.kind;
        b[4..8].copy_from_slice(&self.seg.to_le_bytes());
        b[8..12].copy_from_slice(&self.seq.to_le_bytes());
        let crc = crc32c(&b[0..12]);
        b[12..16].copy_from_slice(&crc.to_le_bytes());
        b
    }
    pub fn decode(b: &[u8]) -> Option<IndexEntry> {
        let kind = b[3];
        if u16::from_le_bytes([b[0], b[1]]) != INDEX_MAGIC
            || !(kind == Self::ACTIVE || kind == Self::RETIRED)
        {
            return None;
        }
        if u32::from_le_bytes(b[12..16].try_into().unwrap()) != crc32c(&b[0..12]) {
            return None;
        }
        Some(IndexEntry {
            kind,
            stream: b[2],
            seg: u32::from_le_bytes(b[4..8].try_into().unwrap()),
            seq: u32::from_le_bytes(b[8..12].try_into().unwrap()),
        })
    }
}

/// The largest power of two not above `n` (1 for 0).
fn prev_power_of_two(n: u64) -> u64 {
    if n == 0 {
        1
    } else {
        1 << (63 - n.leading_zeros())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pad record marks its slot used (not erased) and never decodes.
    #[test]
    fn the_pad_record_is_not_erased_and_never_a_record() {
        assert!(PAD_RECORD.iter().any(|&b| b != 0xFF));
        assert_eq!(Record::decode_spare(&PAD_RECORD), None);
    }

    /// Header mode sizes its header in u64: erase segments of absurdly many blocks (device
    /// overrides such as `--pages-per-block 4294967295`) get a one-line error naming
    /// block_size, where a u32 product wrapped and the sizing loop never ended (or, in a
    /// debug build, panicked); a large segment that fits keeps the smallest header.
    #[test]
    fn header_of_a_huge_segment_is_refused_not_looped() {
        let geo = |page_size: u32, pages_per_block: u32| nand::Geometry {
            page_size,
            spare_size: 0,
            pages_per_block,
            blocks: 4,
            nop: 0,
            in_order: false,
        };
        for (page, ppb, bs) in [
            (4096, u32::MAX, 4096),
            (1 << 20, 1 << 20, 4096),
            (1 << 20, 1 << 21, 512),
        ] {
            let e = Layout::new(&geo(page, ppb), bs).unwrap_err().to_string();
            assert!(e.contains("block_size: ") && !e.contains('\n'), "{e}");
        }
        // 2^20 blocks of 4 KiB: 64 + 24·2^20 header bytes in 6 145 blocks.
        let lay = Layout::new(&geo(1 << 20, 4096), 4096).unwrap();
        assert_eq!(lay.header_bytes, 6145 * 4096);
        assert_eq!(lay.slots, (1 << 20) - 6145);
    }

    #[test]
    fn encoders_checksum_the_documented_bytes() {
        let mut rng = 0x1234_5678_9ABC_DEF0u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for _ in 0..1000 {
            let r = Record {
                lbn: next() as u32 % MAX_LBN,
                region: next() as u8 % 8,
                readonly: next() % 2 == 0,
                live: true,
                updates: next() as u16,
                seq: next() & 0xFF_FFFF_FFFF,
                time_ms: next() as u32,
            };
            let e = r.encode_entry();
            let mut c = [0u8; 20];
            c.copy_from_slice(&e[..20]);
            c[5] = 0xFF;
            assert_eq!(
                u32::from_le_bytes(e[20..24].try_into().unwrap()),
                crc32c::crc32c(&c)
            );
            assert_eq!(Record::decode_entry(&e, LiveFlag::Byte), Some(r));
            let sp = r.encode_spare();
            assert_eq!(
                u32::from_le_bytes(sp[11..15].try_into().unwrap()),
                crc32c::crc32c(&sp[..11])
            );
            let d = Record::decode_spare(&sp).unwrap();
            assert_eq!(
                (d.lbn, d.seq, d.region, d.readonly),
                (r.lbn, r.seq, r.region, r.readonly)
            );
        }
    }

    /// The entry CRC's SSE4.2 path (three crc32 instructions), the general word path
    /// (SSE4.2 loop) and the portable path (bytes through the crate) agree with the crate
    /// on the 20 little-endian bytes, for any words (not only valid records).
    #[test]
    fn entry_crc_paths_agree_with_the_crate() {
        let mut rng = 0x0DDB_A11C_0FFE_E123u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for i in 0..20_000u32 {
            let (w0, seq, time_ms) = match i {
                0 => (0, 0, 0),
                1 => (u64::MAX, u64::MAX, u32::MAX),
                _ => (next(), next(), next() as u32),
            };
            let mut b = [0u8; 20];
            b[0..8].copy_from_slice(&w0.to_le_bytes());
            b[8..16].copy_from_slice(&seq.to_le_bytes());
            b[16..20].copy_from_slice(&time_ms.to_le_bytes());
            let want = crc32c::crc32c(&b);
            assert_eq!(entry_crc_words(w0, seq, time_ms), want, "entry {i}");
            assert_eq!(crc32c_words(&[w0, seq], Some(time_ms), &[]), want);
            assert_eq!(crc32c_words_portable(&[w0, seq], Some(time_ms), &[]), want);
            assert_eq!(crc32c(&b), want);
            // The spare record's shape: one word and a 3-byte tail.
            let tail = [b[8], b[9], b[10]];
            let want = crc32c::crc32c(&b[..11]);
            assert_eq!(crc32c_words(&[w0], None, &tail), want);
            assert_eq!(crc32c_words_portable(&[w0], None, &tail), want);
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("sse4.2") {
                // SAFETY: the CPU supports SSE4.2, checked just above.
                unsafe {
                    assert_eq!(
                        entry_crc_sse42(w0, seq, time_ms),
                        crc32c_words_portable(&[w0, seq], Some(time_ms), &[])
                    );
                    assert_eq!(crc_sse42(&b), crc32c::crc32c(&b));
                }
            }
        }
        // Random lengths and contents through the short-record routine.
        for _ in 0..2000 {
            let len = (next() % 80) as usize;
            let b: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            assert_eq!(crc32c(&b), crc32c::crc32c(&b), "len {len}");
        }
    }

    #[test]
    fn short_crc_is_crc32c() {
        let data: Vec<u8> = (0..97u32).map(|i| (i * 37 + 11) as u8).collect();
        for len in 0..data.len() {
            for start in 0..3.min(data.len() - len) {
                let b = &data[start..start + len];
                assert_eq!(crc32c(b), crc32c::crc32c(b), "len {len} start {start}");
            }
        }
    }

    /// A trim list's record decodes only as one (lbn `TRIM_LIST_LBN`, XORed checksum): a
    /// block record with that lbn, or a trim-list record with the plain checksum (what an
    /// earlier reader checks), does not decode; lists round-trip, and a list whose bytes
    /// are damaged anywhere in its header or entries does not decode.
    #[test]
    fn trim_lists_decode_only_as_trim_lists() {
        let rec = |lbn| Record {
            lbn,
            region: 0,
            readonly: false,
            live: true,
            updates: 0,
            seq: 0x12_3456_789A,
            time_ms: 0,
        };
        let s = rec(TRIM_LIST_LBN).encode_spare();
        assert_eq!(Record::decode_spare(&s).map(|r| r.lbn), Some(TRIM_LIST_LBN));
        // What a reader without trim lists computes: the plain checksum fails.
        let crc = u32::from_le_bytes(s[11..15].try_into().unwrap());
        assert_ne!(crc, crc32c(&s[0..11]));
        // A block record carrying that lbn (plain checksum) is not a trim list.
        let mut b = s;
        b[11..15].copy_from_slice(&crc32c(&s[0..11]).to_le_bytes());
        assert_eq!(Record::decode_spare(&b), None);
        // Nor does an ordinary block's record decode with the XORed checksum.
        let mut o = rec(5).encode_spare();
        let c = u32::from_le_bytes(o[11..15].try_into().unwrap()) ^ TRIM_LIST_CRC_XOR;
        o[11..15].copy_from_slice(&c.to_le_bytes());
        assert_eq!(Record::decode_spare(&o), None);

        for bs in [512u32, 1024, 4096] {
            let cap = TrimList::capacity(bs);
            for n in [0, 1, cap / 2, cap] {
                let entries: Vec<(u32, u64)> = (0..n as u32)
                    .map(|k| (k * 7 + 1, 1000 + k as u64))
                    .collect();
                let mut b = vec![0u8; bs as usize];
                TrimList::encode(&entries, &mut b);
                assert_eq!(TrimList::decode(&b), Some(entries.clone()), "{bs} {n}");
                // Any damaged byte of what the checksum covers is found.
                let end = TRIM_LIST_HEADER + n * TRIM_ENTRY;
                for at in (0..end).filter(|&at| !(12..16).contains(&at)) {
                    let mut d = b.clone();
                    d[at] ^= 0x10;
                    assert_eq!(TrimList::decode(&d), None, "{bs} {n}: byte {at}");
                }
            }
            // Erased, zeroed or too long a count: not a list.
            assert_eq!(TrimList::decode(&vec![0xFF; bs as usize]), None);
            assert_eq!(TrimList::decode(&vec![0; bs as usize]), None);
            let mut b = vec![0u8; bs as usize];
            TrimList::encode(&[], &mut b);
            b[4..8].copy_from_slice(&(cap as u32 + 1).to_le_bytes());
            assert_eq!(TrimList::decode(&b), None);
        }
    }

    #[test]
    fn records_roundtrip_and_live_bit_outside_crc() {
        let r = Record {
            lbn: 77,
            region: 3,
            readonly: false,
            live: true,
            updates: 9,
            seq: 123456,
            time_ms: 42,
        };
        let mut e = r.encode_entry();
        assert_eq!(Record::decode_entry(&e, LiveFlag::Byte), Some(r));
        // Bit 0 cleared: dead in the old encoding, live (6 of 7) with the live byte.
        let mut b = e;
        b[Record::FLAGS_OFFSET] &= !1;
        assert!(!Record::decode_entry(&b, LiveFlag::Bit).unwrap().live);
        assert!(Record::decode_entry(&b, LiveFlag::Byte).unwrap().live);
        e[Record::FLAGS_OFFSET] &= !LiveFlag::Byte.clear_mask();
        let d = Record::decode_entry(&e, LiveFlag::Byte).unwrap();
        assert!(!d.live && !d.readonly);
        e[0] ^= 1;
        assert_eq!(Record::decode_entry(&e, LiveFlag::Byte), None);
        let s = r.encode_spare();
        let d = Record::decode_spare(&s).unwrap();
        assert_eq!(
            (d.lbn, d.seq, d.region, d.updates, d.readonly),
            (77, 123456, 3, 9, false)
        );
        let h = SegHeader {
            erase_count: 5,
            block_size: 4096,
            slots: 31,
            logical_blocks: 5000,
            kind: 0,
            erase_seq: 8,
            time_ms: 1,
            format_id: 3,
            features: FEATURE_ECC,
        };
        assert_eq!(SegHeader::decode(&h.encode()), Ok(Some(h)));
        assert_eq!(SegHeader::decode(&[0xFF; 64]), Ok(None));
        let i = IndexEntry {
            kind: IndexEntry::ACTIVE,
            stream: 2,
            seg: 9,
            seq: 4,
        };
        assert_eq!(IndexEntry::decode(&i.encode()), Some(i));
    }

    /// `one_bit_from` finds every single flipped bit of a header, an entry and a spare
    /// record (in the flags byte, outside an entry's checksum, there is nothing to find),
    /// and nothing for two flipped bits, for an erased header one bit short, or for
    /// headers a program torn two or more bits short of valid leaves (sampled).
    #[test]
    fn one_bit_from_finds_one_flip_and_no_more() {
        let h = SegHeader {
            erase_count: 17,
            block_size: 2048,
            slots: 127,
            logical_blocks: 9000,
            kind: 0,
            erase_seq: 4242,
            time_ms: 99,
            format_id: 6,
            features: 0,
        };
        let hdr = |b: &[u8]| SegHeader::decode(b).ok().flatten();
        let r = Record {
            lbn: 321,
            region: 1,
            readonly: false,
            live: true,
            updates: 4,
            seq: 77777,
            time_ms: 5,
        };
        let good = h.encode();
        let entry = r.encode_entry();
        let spare = r.encode_spare();
        for bit in 0..512 {
            let mut b = good;
            b[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(one_bit_from(&b, hdr), Some(h), "header bit {bit}");
            let other = (bit * 97 + 13) % 512;
            if other != bit {
                b[other / 8] ^= 1 << (other % 8);
                assert_eq!(one_bit_from(&b, hdr), None, "header bits {bit}, {other}");
            }
        }
        for bit in 0..ENTRY * 8 {
            let mut e = entry;
            e[bit / 8] ^= 1 << (bit % 8);
            if bit / 8 == Record::FLAGS_OFFSET {
                assert!(
                    Record::decode_entry(&e, LiveFlag::Byte).is_some(),
                    "flags bit {bit}"
                );
            } else {
                assert_eq!(
                    one_bit_from(&e, |w| Record::decode_entry(w, LiveFlag::Byte)),
                    Some(r),
                    "entry bit {bit}"
                );
            }
        }
        for bit in 0..spare.len() * 8 {
            let mut s = spare;
            s[bit / 8] ^= 1 << (bit % 8);
            let want = Record::decode_spare(&spare);
            assert_eq!(
                one_bit_from(&s, Record::decode_spare),
                want,
                "record bit {bit}"
            );
        }
        let mut erased = [0xFFu8; SEG_HEADER];
        erased[20] = 0xEF;
        assert_eq!(one_bit_from(&erased, hdr), None);
        // Torn header programs: each bit the program clears is cleared or not at random.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..2000 {
            let mut b = good;
            let mut missing = 0;
            for byte in b.iter_mut() {
                let keep = next() as u8 | next() as u8; // three bits in four cleared
                let left = !*byte & !keep;
                missing += left.count_ones();
                *byte |= left;
            }
            if missing >= 2 {
                assert_eq!(one_bit_from(&b, hdr), None, "torn {missing} bits short");
            }
        }
    }

    #[test]
    fn layouts() {
        let intel = nand::DeviceSpec::preset("intel-series2plus-24m")
            .unwrap()
            .geometry;
        let l = Layout::new(&intel, 4096).unwrap();
        assert_eq!(
            (l.mode, l.slots, l.header_bytes),
            (RecordMode::Header, 31, 4096)
        );
        let l = Layout::new(&intel, 1024).unwrap();
        assert_eq!((l.slots, l.header_bytes), (124, 4096));
        let ns = nand::DeviceSpec::preset("nandsim-256m").unwrap().geometry;
        let l = Layout::new(&ns, 1024).unwrap();
        assert_eq!(
            (l.mode, l.slots, l.pages_per_slot),
            (RecordMode::Spare, 15, 2)
        );
        assert!(Layout::new(&ns, 1000).is_err());
    }

    /// A device that must program pages in order but allows unlimited partial programs
    /// is refused by name: header mode would program entries into the first pages after
    /// the data (it used to fail at the first write with "device full").
    #[test]
    fn in_order_without_a_page_budget_is_refused() {
        let mut g = nand::DeviceSpec::preset("intel-series2plus-24m")
            .unwrap()
            .geometry;
        g.in_order = true;
        let e = Layout::new(&g, 4096).unwrap_err().to_string();
        assert!(e.contains("in_order = true with nop = 0"), "{e}");
        g.in_order = false;
        assert!(Layout::new(&g, 4096).is_ok());
    }

    /// A page program limit without a spare area (the NOR card given `nop = 2`) is
    /// refused saying why the spare area is needed and what would do instead.
    #[test]
    fn a_page_budget_without_a_spare_area_is_refused_by_name() {
        let mut g = nand::DeviceSpec::preset("intel-series2plus-24m")
            .unwrap()
            .geometry;
        g.nop = 2;
        let e = Layout::new(&g, 4096).unwrap_err().to_string();
        assert!(e.contains("spare area of 0 bytes"), "{e}");
        assert!(e.contains("(nop = 2)") && e.contains("or nop = 0"), "{e}");
        g.spare_size = SPARE_RECORD as u32;
        assert_eq!(Layout::new(&g, 4096).unwrap().mode, RecordMode::Spare);
    }

    /// The pieces of a span, stepped page by page, are those found by dividing every
    /// offset (the way they were computed before), for page sizes that are powers of two
    /// (shift) and not (division).
    #[test]
    fn pieces_match_division() {
        let ns = nand::DeviceSpec::preset("nandsim-256m").unwrap().geometry;
        let base = Layout::new(&ns, 1024).unwrap();
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for (ps, shift) in [(512u32, Some(9)), (4096, Some(12)), (1536, None), (7, None)] {
            let l = Layout {
                page_size: ps,
                page_shift: shift,
                ..base.clone()
            };
            for _ in 0..2000 {
                let off = next() % (ps as u64 * 40);
                let len = match next() % 4 {
                    0 => 0,
                    1 => next() % 4,
                    2 => ps as u64 - off % ps as u64,
                    _ => next() % (ps as u64 * 5),
                };
                let mut want = vec![];
                let mut done = 0u64;
                while done < len {
                    let at = off + done;
                    let (page, col) = (at / ps as u64, (at % ps as u64) as u32);
                    let n = (ps as u64 - col as u64).min(len - done);
                    want.push((page, col, done as usize, n as usize));
                    done += n;
                }
                let got: Vec<_> = l.pages_of(off, len).collect();
                assert_eq!(got, want, "page {ps} off {off} len {len}");
            }
        }
    }

    /// A slot's device spans and its pieces are those of its byte range, whether it is a
    /// whole page, lies within one (the short paths) or not: blocks smaller than, equal to and larger than a page, pages of a size
    /// that is not a power of two, headers that do not end on a page boundary.
    #[test]
    fn slot_spans_are_the_pieces_of_the_slot() {
        let ns = nand::DeviceSpec::preset("nandsim-256m").unwrap().geometry;
        let base = Layout::new(&ns, 1024).unwrap();
        for (ps, shift) in [
            (512u32, Some(9)),
            (4096, Some(12)),
            (1536, None),
            (1000, None),
        ] {
            for bs in [512u32, 1024, 4096] {
                for header in [0u32, 1, 2, 3] {
                    let l = Layout {
                        page_size: ps,
                        page_shift: shift,
                        block_size: bs,
                        header_bytes: header * bs,
                        ..base.clone()
                    }
                    .derived();
                    for slot in 0..24 {
                        let first = 1000 * slot as u64;
                        let mut got = vec![];
                        l.slot_spans(first, slot, &mut got);
                        let pieces: Vec<_> = l.pages_of(l.slot_offset(slot), bs as u64).collect();
                        let want: Vec<_> = pieces
                            .iter()
                            .map(|&(page, col, _, n)| (first + page, col, n as u32))
                            .collect();
                        let at = format!("page {ps} block {bs} header {header} slot {slot}");
                        assert_eq!(got, want, "{at}");
                        let got: Vec<_> = l.slot_pieces(slot).collect();
                        assert_eq!(got, pieces, "{at}");
                    }
                }
            }
        }
    }
}
