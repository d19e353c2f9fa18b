//! Where the medium's state lives: RAM, an image file ([`crate::image::ImageStore`]), or
//! nowhere for the data area (payload-less simulation store).
//!
//! A store keeps exactly what is physically on the medium (page bytes, spare bytes) plus the
//! bookkeeping the device model needs to enforce the rules across reopen (programs done per
//! page since its erase, per-block erase count and bad state). It does not decide rules:
//! that is [`crate::Nand`]'s job, so every store behaves the same (a store that holds the
//! bytes may compare them for the device's bit rule: [`Store::first_set_bit_in_place`],
//! [`Store::program_bytes_if_clears`]).

use std::collections::HashMap;

use crate::device::Data;
use crate::error::Result;
use crate::geometry::Geometry;
use crate::table::config_table as table;

/// Why a block is bad.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BadState {
    #[default]
    Good,
    /// Marked bad at manufacture.
    Factory,
    /// Went bad in use (worn out, or a program/erase failed).
    Grown,
}

/// Per-block state kept by the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct BlockInfo {
    pub erase_count: u32,
    pub bad: BadState,
}

/// The first byte of `new` that sets a bit which is 0 in `old` (a program may only clear
/// bits); `old` and `new` have the same length. The usual answer is "none": the whole
/// range is or-reduced without an early exit, a word at a time when it is short (an FMS
/// entry is three words) and a byte at a time, which the compiler vectorises, when it is
/// long (a run of entries is hundreds of bytes); only a range that sets a bit is searched.
#[inline]
pub fn first_set_bit(old: &[u8], new: &[u8]) -> Option<usize> {
    debug_assert_eq!(old.len(), new.len());
    let n = old.len().min(new.len());
    let (old, new) = (&old[..n], &new[..n]);
    let sets = if n < 64 {
        let (mut oc, mut nc) = (old.chunks_exact(8), new.chunks_exact(8));
        let mut sets = 0u64;
        for (o, w) in oc.by_ref().zip(nc.by_ref()) {
            let o = u64::from_ne_bytes(o.try_into().unwrap());
            let w = u64::from_ne_bytes(w.try_into().unwrap());
            sets |= w & !o;
        }
        for (o, w) in oc.remainder().iter().zip(nc.remainder()) {
            sets |= (w & !o) as u64;
        }
        sets != 0
    } else {
        let mut sets = 0u8;
        for (o, w) in old.iter().zip(new) {
            sets |= w & !o;
        }
        sets != 0
    };
    if !sets {
        return None;
    }
    old.iter().zip(new).position(|(o, w)| w & !o != 0)
}

/// Bytes `at..at + 8` of `b` as a word.
#[inline(always)]
fn word(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// For `8 <= old.len() == new.len() <= 32` (an FMS entry is 24 bytes): whether programming
/// `new` over `old` clears bits only, then, if so, `old.copy_from_slice(new)`. The range
/// is covered by two words (up to 16 bytes) or four, overlapping where the length is not a
/// multiple of 8 (the words overlap only on bytes of the same range, so each byte is
/// compared, and written with its own new value, at least once): no loop and no call to
/// `memcpy`. `false`, with nothing written, when a bit would be set.
#[inline(always)]
fn program_short(old: &mut [u8], new: &[u8]) -> bool {
    let n = new.len();
    if !(8..=32).contains(&n) || old.len() != n {
        unreachable!("program_short of {} bytes over {}", n, old.len());
    }
    let (a1, a2) = if n <= 16 { (0, n - 8) } else { (8, n - 16) };
    let a3 = n - 8;
    let (w0, w1, w2, w3) = (word(new, 0), word(new, a1), word(new, a2), word(new, a3));
    let sets = (w0 & !word(old, 0))
        | (w1 & !word(old, a1))
        | (w2 & !word(old, a2))
        | (w3 & !word(old, a3));
    if sets != 0 {
        return false;
    }
    old[0..8].copy_from_slice(&w0.to_le_bytes());
    old[a1..a1 + 8].copy_from_slice(&w1.to_le_bytes());
    old[a2..a2 + 8].copy_from_slice(&w2.to_le_bytes());
    old[a3..a3 + 8].copy_from_slice(&w3.to_le_bytes());
    true
}

/// Whether programming `new` over `old` (the same length) only clears bits: a word at a
/// time, overlapping, for 8 to 32 bytes (a spare record), bytes below that (a page mark),
/// without a call or a loop over the bytes.
#[inline(always)]
fn clears_only_short(old: &[u8], new: &[u8]) -> bool {
    let n = new.len();
    if (8..=32).contains(&n) && old.len() == n {
        let (a1, a2) = if n <= 16 { (0, n - 8) } else { (8, n - 16) };
        let a3 = n - 8;
        (word(new, 0) & !word(old, 0))
            | (word(new, a1) & !word(old, a1))
            | (word(new, a2) & !word(old, a2))
            | (word(new, a3) & !word(old, a3))
            == 0
    } else if n < 8 {
        old.iter().zip(new).all(|(o, w)| w & !o == 0)
    } else {
        first_set_bit(old, new).is_none()
    }
}

/// `dst.copy_from_slice(src)` of a short range (a spare record or mark) without a call to
/// `memcpy`: a word at a time, overlapping, for 8 to 32 bytes.
#[inline(always)]
fn copy_short(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    if (8..=32).contains(&n) && dst.len() == n {
        let (a1, a2) = if n <= 16 { (0, n - 8) } else { (8, n - 16) };
        let a3 = n - 8;
        let (w0, w1, w2, w3) = (word(src, 0), word(src, a1), word(src, a2), word(src, a3));
        dst[0..8].copy_from_slice(&w0.to_le_bytes());
        dst[a1..a1 + 8].copy_from_slice(&w1.to_le_bytes());
        dst[a2..a2 + 8].copy_from_slice(&w2.to_le_bytes());
        dst[a3..a3 + 8].copy_from_slice(&w3.to_le_bytes());
    } else if n < 8 {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = *s;
        }
    } else {
        dst.copy_from_slice(src);
    }
}

/// `dst.copy_from_slice(src)`, without a call to `memcpy` for a single byte (the FMS reads
/// and clears live flags one byte at a time).
#[inline(always)]
fn copy_bytes(dst: &mut [u8], src: &[u8]) {
    match (dst, src) {
        ([d], [s]) => *d = *s,
        (dst, src) => dst.copy_from_slice(src),
    }
}

/// A byte range of one page: (page, column, length).
pub type Span = (u64, u32, u32);

/// The medium.
pub trait Store: Send {
    fn geometry(&self) -> &Geometry;
    /// False for the payload-less store: data areas written with [`Store::program_opaque`]
    /// are not kept.
    fn keeps_payload(&self) -> bool;
    /// Read `buf.len()` bytes of page `ppn` from column `col` (data then spare).
    fn read(&mut self, ppn: u64, col: u32, buf: &mut [u8]) -> Result<()>;
    /// Store bytes (already checked against the rules).
    fn write(&mut self, ppn: u64, col: u32, bytes: &[u8]) -> Result<()>;
    /// A data-area program whose content the caller does not track (simulation mode).
    /// Stores that keep payloads record zeros; the payload-less store records nothing.
    fn program_opaque(&mut self, ppn: u64, col: u32, len: u32) -> Result<()>;
    /// True when the data area of `ppn` is known byte for byte (always, except pages of
    /// the payload-less store that only saw opaque programs).
    fn data_known(&self, ppn: u64) -> bool;
    /// Set every byte of the block, data and spare, to 0xFF and its program counts to 0.
    fn erase(&mut self, block: u32) -> Result<()>;
    /// Set a single page to 0xFF (used to model an incomplete erase).
    fn erase_page(&mut self, ppn: u64) -> Result<()>;
    fn page_programs(&self, ppn: u64) -> u8;
    fn set_page_programs(&mut self, ppn: u64, n: u8) -> Result<()>;
    /// Count one more program of `ppn` since its erase (saturating).
    fn bump_page_programs(&mut self, ppn: u64) -> Result<()> {
        let n = self.page_programs(ppn);
        self.set_page_programs(ppn, n.saturating_add(1))
    }
    /// One complete program of `ppn`, already checked against the rules by the device:
    /// `data` at data column `col`, `spare.1` at offset `spare.0` of the spare area, and one
    /// more program counted. The device's path for every program that is not torn or
    /// failed by a fault: one dynamic call, within which each store's own primitives are
    /// called statically (the default is compiled per store).
    fn program(
        &mut self,
        ppn: u64,
        col: u32,
        data: Data<'_>,
        spare: Option<(u32, &[u8])>,
    ) -> Result<()> {
        match data {
            Data::None => {}
            Data::Bytes(b) => self.write(ppn, col, b)?,
            Data::Opaque(n) => self.program_opaque(ppn, col, n)?,
        }
        if let Some((so, s)) = spare {
            let ps = self.geometry().page_size;
            self.write(ppn, ps + so, s)?;
        }
        self.bump_page_programs(ppn)
    }
    /// [`Store::program`] of an opaque data area without spare bytes of every span, in
    /// order, as one call; returns false, having done nothing, when the store does not
    /// batch (the default). A store that batches cannot fail here. The device calls it
    /// only after checking every rule ([`crate::Nand::opaque_batch`]).
    fn program_opaque_spans(&mut self, _spans: &[Span]) -> bool {
        false
    }
    /// [`Store::program_opaque_spans`] of the whole data areas (column 0, `page_size`
    /// bytes) of the `count` consecutive pages from `first`; returns false, having done
    /// nothing, when the store does not batch (the default). The device calls it only
    /// after checking every rule ([`crate::Nand::opaque_page_batch`]).
    fn program_opaque_pages(&mut self, _first: u64, _count: u32) -> bool {
        false
    }
    /// [`Store::program_opaque_pages`] with spare bytes: page `first + k` of the
    /// `ends.len()` consecutive pages from `first` also gets `spares[ends[k - 1]..ends[k]]`
    /// (from 0 for the first) at spare column `spare_col`, as [`Store::program`] of an
    /// opaque data area with those spare bytes would. The device has checked every rule
    /// but the bit rule on the spare bytes, which the store checks for every page before
    /// it changes anything: false, having done nothing, when one would set a bit, or when
    /// the store does not batch (the default). ([`crate::Nand::opaque_page_batch_spare`].)
    fn program_opaque_pages_spare(
        &mut self,
        _first: u64,
        _spare_col: u32,
        _spares: &[u8],
        _ends: &[u32],
    ) -> bool {
        false
    }
    /// [`Store::program`] of an opaque data area without spare bytes (the simulator's data
    /// programs): a call of its own so that a store can make it a short leaf.
    fn program_opaque_data(&mut self, ppn: u64, col: u32, len: u32) -> Result<()> {
        self.program(ppn, col, Data::Opaque(len), None)
    }
    /// Program `bytes` at data column `col` of `ppn` (one complete program, counted, no
    /// spare bytes), after the device's other rules, if the store can compare them in place
    /// with the medium and they only clear bits: `Some(None)` when programmed,
    /// `Some(Some(i))` when byte `i` would set a bit (nothing changed), `None` when the
    /// store cannot compare in place (nothing changed; the device then checks the bit rule
    /// its own way and calls [`Store::program`]). The comparison is the device's bit rule,
    /// done where the bytes are; stores whose writes can fail leave it to the device (the
    /// default), so a failed write is still counted as a program.
    fn program_bytes_if_clears(
        &mut self,
        _ppn: u64,
        _col: u32,
        _bytes: &[u8],
    ) -> Option<Option<usize>> {
        None
    }
    /// Read the byte at data column `col` of `ppn` and program it back with the bits of
    /// `clear` cleared (one complete program, counted, no spare bytes), after the device
    /// has checked every rule of the read and the program but the bit rule and made sure
    /// no bit flip is due: `Some(byte read)` when done, `None` when the store cannot do it
    /// in place (nothing changed; the device then reads and programs a call at a time).
    /// The bit rule holds by construction (the byte programmed is the byte on the medium
    /// with bits cleared) and is checked all the same. The default does not.
    fn clear_byte_in_place(&mut self, _ppn: u64, _col: u32, _clear: u8) -> Option<u8> {
        None
    }
    /// Where programming `new` at `col` of `ppn` would set a bit that is 0 on the medium:
    /// `Some(Some(i))` for the first such byte of `new`, `Some(None)` for none, or `None`
    /// when the store cannot compare in place (the device then reads the bytes).
    fn first_set_bit_in_place(&self, _ppn: u64, _col: u32, _new: &[u8]) -> Option<Option<usize>> {
        None
    }
    fn block_info(&self, block: u32) -> BlockInfo;
    fn set_block_info(&mut self, block: u32, info: BlockInfo) -> Result<()>;
    /// Make everything written so far durable (image files).
    fn sync(&mut self) -> Result<()> {
        Ok(())
    }
    /// Bytes of host RAM this store holds.
    fn ram_bytes(&self) -> u64;
    /// An independent copy of the medium, for a caller that wants to branch a device's
    /// history (`flashkit torture` forks the running device at each cut point instead of
    /// replaying the workload up to it). `None` when the store cannot be copied (an image
    /// file: two writers of one file would corrupt it).
    fn try_clone(&self) -> Option<Box<dyn Store>> {
        None
    }
    /// What opening the store had to repair, a line each (an image's corrupt block-table
    /// entries); empty for stores that are never reopened.
    fn repairs(&self) -> &[String] {
        &[]
    }
}

/// Everything in RAM: data, spare, program counts, block table.
#[derive(Clone)]
pub struct RamStore {
    geo: Geometry,
    raw: u32,
    bytes: Vec<u8>,
    programs: Vec<u8>,
    blocks: Vec<BlockInfo>,
}

impl RamStore {
    /// The bytes of RAM [`RamStore::new`] allocates for `geo` (what [`Store::ram_bytes`]
    /// then reports), computed without allocating: every page's data and spare bytes, a
    /// program count per page, 8 bytes per block. Saturates instead of overflowing.
    pub fn ram_bytes_for(geo: &Geometry) -> u64 {
        geo.pages()
            .saturating_mul(geo.raw_page_size() as u64 + 1)
            .saturating_add(geo.blocks as u64 * std::mem::size_of::<BlockInfo>() as u64)
    }

    pub fn new(geo: &Geometry) -> Result<Self> {
        geo.validate()?;
        let total = geo.pages() as u128 * geo.raw_page_size() as u128;
        if total > (1u128 << 36) {
            return Err(crate::NandError::config(format!(
                "a RAM store of {total} bytes is too large; use the payload-less store (simulation) or an image file"
            )));
        }
        Ok(RamStore {
            geo: geo.clone(),
            raw: geo.raw_page_size(),
            bytes: table(total as u64, 0xFF, "the RAM store")?,
            programs: table(geo.pages(), 0, "the program counts")?,
            blocks: table(geo.blocks as u64, BlockInfo::default(), "the block table")?,
        })
    }
    #[inline]
    fn off(&self, ppn: u64, col: u32) -> usize {
        (ppn * self.raw as u64 + col as u64) as usize
    }
}

impl Store for RamStore {
    fn geometry(&self) -> &Geometry {
        &self.geo
    }
    fn keeps_payload(&self) -> bool {
        true
    }
    fn read(&mut self, ppn: u64, col: u32, buf: &mut [u8]) -> Result<()> {
        let o = self.off(ppn, col);
        buf.copy_from_slice(&self.bytes[o..o + buf.len()]);
        Ok(())
    }
    fn write(&mut self, ppn: u64, col: u32, bytes: &[u8]) -> Result<()> {
        let o = self.off(ppn, col);
        self.bytes[o..o + bytes.len()].copy_from_slice(bytes);
        Ok(())
    }
    fn program_opaque(&mut self, ppn: u64, col: u32, len: u32) -> Result<()> {
        let o = self.off(ppn, col);
        self.bytes[o..o + len as usize].fill(0);
        Ok(())
    }
    fn data_known(&self, _ppn: u64) -> bool {
        true
    }
    fn erase(&mut self, block: u32) -> Result<()> {
        let first = self.geo.first_page(block);
        let o = self.off(first, 0);
        let n = self.geo.pages_per_block as usize * self.raw as usize;
        self.bytes[o..o + n].fill(0xFF);
        let p = first as usize;
        self.programs[p..p + self.geo.pages_per_block as usize].fill(0);
        Ok(())
    }
    fn erase_page(&mut self, ppn: u64) -> Result<()> {
        let o = self.off(ppn, 0);
        self.bytes[o..o + self.raw as usize].fill(0xFF);
        self.programs[ppn as usize] = 0;
        Ok(())
    }
    fn page_programs(&self, ppn: u64) -> u8 {
        self.programs[ppn as usize]
    }
    fn set_page_programs(&mut self, ppn: u64, n: u8) -> Result<()> {
        self.programs[ppn as usize] = n;
        Ok(())
    }
    fn bump_page_programs(&mut self, ppn: u64) -> Result<()> {
        let p = &mut self.programs[ppn as usize];
        *p = p.saturating_add(1);
        Ok(())
    }
    fn first_set_bit_in_place(&self, ppn: u64, col: u32, new: &[u8]) -> Option<Option<usize>> {
        let o = self.off(ppn, col);
        Some(first_set_bit(&self.bytes[o..o + new.len()], new))
    }
    fn program_bytes_if_clears(
        &mut self,
        ppn: u64,
        col: u32,
        bytes: &[u8],
    ) -> Option<Option<usize>> {
        let o = self.off(ppn, col);
        let cur = &mut self.bytes[o..o + bytes.len()];
        if let Some(i) = first_set_bit(cur, bytes) {
            return Some(Some(i));
        }
        cur.copy_from_slice(bytes);
        let p = &mut self.programs[ppn as usize];
        *p = p.saturating_add(1);
        Some(None)
    }
    fn clear_byte_in_place(&mut self, ppn: u64, col: u32, clear: u8) -> Option<u8> {
        let o = self.off(ppn, col);
        let old = self.bytes[o];
        let new = old & !clear;
        if new & !old != 0 {
            return None;
        }
        self.bytes[o] = new;
        let p = &mut self.programs[ppn as usize];
        *p = p.saturating_add(1);
        Some(old)
    }
    fn block_info(&self, block: u32) -> BlockInfo {
        self.blocks[block as usize]
    }
    fn set_block_info(&mut self, block: u32, info: BlockInfo) -> Result<()> {
        self.blocks[block as usize] = info;
        Ok(())
    }
    fn ram_bytes(&self) -> u64 {
        (self.bytes.len() + self.programs.len() + self.blocks.len() * 8) as u64
    }
    fn try_clone(&self) -> Option<Box<dyn Store>> {
        Some(Box::new(self.clone()))
    }
}

/// Payload-less store for simulation mode. It keeps every spare area, the program count of
/// every page, the block table, and the data area only of pages that were programmed with
/// real bytes (headers and other metadata the layers above read back). Data programmed
/// with [`Store::program_opaque`] is dropped: its bytes read back as zeros, as the RAM
/// store's do, and bytes no program touched read erased. A page whose data area saw opaque
/// programs over part of it only (blocks smaller than a page) remembers those byte ranges
/// until it is covered, kept or erased, so that real bytes programmed later beside them
/// (an FMS header entry in the page where the header ends) are kept and checked exactly.
///
/// Memory: `pages × (spare_size + 5)` bytes plus the kept pages; `chang-kuo-16g` (32 Mi
/// pages of 16 B spare) needs about 672 MiB. Kept pages live in one arena indexed per page
/// (no hashing on the simulator's hot path) and are recycled when their block is erased.
#[derive(Clone)]
pub struct PayloadlessStore {
    geo: Geometry,
    spare: Vec<u8>,
    programs: Vec<u8>,
    blocks: Vec<BlockInfo>,
    /// Per page: index of its kept copy in `arena`, `OPAQUE` (not kept, its whole data
    /// area saw opaque programs), `PARTIAL` (not kept, the byte ranges in `partial` saw
    /// opaque programs, the rest is erased) or `NOT_KEPT` (its data area is erased).
    kept_at: Vec<u32>,
    /// The opaque byte ranges of `PARTIAL` pages, sorted and disjoint. Only pages being
    /// filled by sub-page programs are here (none when blocks are at least a page).
    partial: HashMap<u64, Vec<(u32, u32)>>,
    arena: Vec<u8>,
    /// Per arena slot: the byte range `[lo, hi)` written since the slot was filled, so
    /// that reusing it for an erased page refills only that range with 0xFF (a header
    /// page is mostly untouched; refilling all of it cost a page-sized memset per erase).
    dirty: Vec<(u32, u32)>,
    free_slots: Vec<u32>,
}

const NOT_KEPT: u32 = u32::MAX;
const OPAQUE: u32 = u32::MAX - 1;
const PARTIAL: u32 = u32::MAX - 2;

/// Add `[lo, hi)` to sorted, disjoint `ranges`, merging what touches it.
fn add_range(ranges: &mut Vec<(u32, u32)>, lo: u32, hi: u32) {
    let (mut lo, mut hi) = (lo, hi);
    ranges.retain(|&(a, b)| {
        let apart = b < lo || a > hi;
        if !apart {
            lo = lo.min(a);
            hi = hi.max(b);
        }
        apart
    });
    let at = ranges.partition_point(|&(a, _)| a < lo);
    ranges.insert(at, (lo, hi));
}

impl PayloadlessStore {
    /// The bytes of RAM this store holds for `geo` once `kept_pages` pages hold real bytes
    /// (what [`Store::ram_bytes`] reports then; the layer above knows how many pages it
    /// programs with real bytes), computed without allocating: per page its spare area, a
    /// program count and a kept-page index entry; 8 bytes per block; per kept page its
    /// bytes and dirty range. Byte ranges of pages filled by sub-page opaque programs
    /// (blocks smaller than a page, being filled) are transient and not counted.
    /// Saturates instead of overflowing.
    pub fn ram_bytes_for(geo: &Geometry, kept_pages: u64) -> u64 {
        let per_page = geo.spare_size as u64 + 1 + std::mem::size_of::<u32>() as u64;
        let per_kept = geo.page_size as u64 + std::mem::size_of::<(u32, u32)>() as u64;
        geo.pages()
            .saturating_mul(per_page)
            .saturating_add(geo.blocks as u64 * std::mem::size_of::<BlockInfo>() as u64)
            .saturating_add(kept_pages.saturating_mul(per_kept))
    }

    pub fn new(geo: &Geometry) -> Result<Self> {
        geo.validate()?;
        Ok(PayloadlessStore {
            geo: geo.clone(),
            spare: table(geo.pages() * geo.spare_size as u64, 0xFF, "the spare areas")?,
            programs: table(geo.pages(), 0, "the program counts")?,
            blocks: table(geo.blocks as u64, BlockInfo::default(), "the block table")?,
            kept_at: table(geo.pages(), NOT_KEPT, "the kept-page index")?,
            partial: HashMap::new(),
            arena: Vec::new(),
            dirty: Vec::new(),
            free_slots: Vec::new(),
        })
    }

    #[inline]
    fn kept(&self, ppn: u64) -> Option<&[u8]> {
        let k = self.kept_at[ppn as usize];
        (k < PARTIAL).then(|| {
            let ps = self.geo.page_size as usize;
            &self.arena[k as usize * ps..(k as usize + 1) * ps]
        })
    }

    /// The kept copy of `ppn` (if any) with bytes `[lo, hi)` about to be written.
    #[inline]
    fn kept_mut(&mut self, ppn: u64, lo: usize, hi: usize) -> Option<&mut [u8]> {
        let k = self.kept_at[ppn as usize];
        (k < PARTIAL).then(|| {
            let d = &mut self.dirty[k as usize];
            *d = (d.0.min(lo as u32), d.1.max(hi as u32));
            let ps = self.geo.page_size as usize;
            &mut self.arena[k as usize * ps..(k as usize + 1) * ps]
        })
    }

    /// The kept copy of `ppn`, created if missing (erased, with zeros where opaque
    /// programs went), with bytes `[lo, hi)` about to be written.
    #[inline]
    fn keep(&mut self, ppn: u64, lo: usize, hi: usize) -> &mut [u8] {
        if self.kept_at[ppn as usize] >= PARTIAL {
            self.keep_new(ppn);
        }
        self.kept_mut(ppn, lo, hi).expect("just kept")
    }

    /// Give `ppn`, not kept, a kept copy: erased, with zeros where opaque programs went.
    #[inline(never)]
    fn keep_new(&mut self, ppn: u64) {
        let was = self.kept_at[ppn as usize];
        let fill = if was == OPAQUE { 0 } else { 0xFF };
        let ps = self.geo.page_size as usize;
        let slot = match self.free_slots.pop() {
            Some(s) => {
                // A free slot is 0xFF outside its dirty range.
                let (a, b) = match fill {
                    0xFF => self.dirty[s as usize],
                    _ => (0, ps as u32),
                };
                if a < b {
                    let base = s as usize * ps;
                    self.arena[base + a as usize..base + b as usize].fill(fill);
                }
                s
            }
            None => {
                let s = (self.arena.len() / ps) as u32;
                self.arena.resize(self.arena.len() + ps, fill);
                self.dirty.push((0, 0));
                s
            }
        };
        // A page filled with zeros is dirty all over.
        self.dirty[slot as usize] = match fill {
            0xFF => (ps as u32, 0),
            _ => (0, ps as u32),
        };
        self.kept_at[ppn as usize] = slot;
        if was == PARTIAL {
            for (a, b) in self.partial.remove(&ppn).unwrap_or_default() {
                if let Some(p) = self.kept_mut(ppn, a as usize, b as usize) {
                    p[a as usize..b as usize].fill(0);
                }
            }
        }
    }

    /// Store `bytes` at data column `col` (within the data area).
    #[inline(always)]
    fn write_data(&mut self, ppn: u64, col: usize, bytes: &[u8]) {
        let end = col + bytes.len();
        let page = self.keep(ppn, col, end);
        page[col..end].copy_from_slice(bytes);
    }

    /// Store `bytes` at offset `off` of the spare area.
    #[inline(always)]
    fn write_spare(&mut self, ppn: u64, off: usize, bytes: &[u8]) {
        let base = ppn as usize * self.geo.spare_size as usize + off;
        self.spare[base..base + bytes.len()].copy_from_slice(bytes);
    }

    /// An opaque program of `len` data bytes at `col`.
    #[inline(always)]
    fn opaque(&mut self, ppn: u64, col: u32, len: u32) {
        let k = self.kept_at[ppn as usize];
        if k < PARTIAL {
            // Kept: the opaque bytes become zeros in place.
            let (lo, hi) = (col as usize, (col + len) as usize);
            if let Some(p) = self.kept_mut(ppn, lo, hi) {
                p[lo..hi].fill(0);
            }
        } else if k == NOT_KEPT && col == 0 && len >= self.geo.page_size {
            self.kept_at[ppn as usize] = OPAQUE;
        } else if k != OPAQUE && len > 0 {
            self.program_opaque_partly(ppn, col, col + len);
        }
    }

    /// The data area of a page that is not kept reads zeros where opaque programs went.
    fn read_unkept(&self, ppn: u64, col: usize, out: &mut [u8]) {
        match self.kept_at[ppn as usize] {
            OPAQUE => out.fill(0),
            PARTIAL => {
                out.fill(0xFF);
                let end = col + out.len();
                for &(a, b) in &self.partial[&ppn] {
                    let (a, b) = ((a as usize).max(col), (b as usize).min(end));
                    if a < b {
                        out[a - col..b - col].fill(0);
                    }
                }
            }
            _ => out.fill(0xFF),
        }
    }

    /// Forget the opaque ranges and kept copy of `ppn` (erased).
    #[inline]
    fn forget(&mut self, ppn: usize) {
        match self.kept_at[ppn] {
            k if k < PARTIAL => self.free_slots.push(k),
            PARTIAL => self.forget_partial(ppn as u64),
            _ => {}
        }
        self.kept_at[ppn] = NOT_KEPT;
    }

    // The partly opaque pages' paths, out of line: only blocks smaller than a page take
    // them, and the simulator's usual programs stay short.

    #[inline(never)]
    fn forget_partial(&mut self, ppn: u64) {
        self.partial.remove(&ppn);
    }

    /// An opaque program over part of a page that is not kept and not all opaque.
    #[inline(never)]
    fn program_opaque_partly(&mut self, ppn: u64, lo: u32, hi: u32) {
        let ps = self.geo.page_size;
        if self.kept_at[ppn as usize] == NOT_KEPT {
            self.kept_at[ppn as usize] = PARTIAL;
            self.partial.insert(ppn, vec![(lo, hi)]);
            return;
        }
        let r = self.partial.get_mut(&ppn).expect("partial page has ranges");
        add_range(r, lo, hi);
        if r[..] == [(0, ps)] {
            self.partial.remove(&ppn);
            self.kept_at[ppn as usize] = OPAQUE;
        }
    }

    /// An opaque program of the whole data area of a kept or partly opaque page.
    #[inline(never)]
    fn opaque_page_known(&mut self, ppn: u64) {
        self.opaque(ppn, 0, self.geo.page_size);
    }

    /// Whether an opaque range of `PARTIAL` page `ppn` overlaps bytes `[col, end)`.
    #[inline(never)]
    fn partly_opaque_in(&self, ppn: u64, col: usize, end: usize) -> bool {
        self.partial[&ppn]
            .iter()
            .any(|&(a, b)| (a as usize) < end && (b as usize) > col)
    }
}

impl Store for PayloadlessStore {
    fn geometry(&self) -> &Geometry {
        &self.geo
    }
    fn keeps_payload(&self) -> bool {
        false
    }
    fn read(&mut self, ppn: u64, col: u32, buf: &mut [u8]) -> Result<()> {
        let ps = self.geo.page_size as usize;
        let ss = self.geo.spare_size as usize;
        let col = col as usize;
        let end = col + buf.len();
        if col < ps {
            let d = end.min(ps);
            let out = &mut buf[..d - col];
            match self.kept(ppn) {
                Some(p) => copy_bytes(out, &p[col..d]),
                None => self.read_unkept(ppn, col, out),
            }
        }
        if end > ps {
            let s0 = col.max(ps);
            let base = ppn as usize * ss;
            buf[s0 - col..].copy_from_slice(&self.spare[base + s0 - ps..base + end - ps]);
        }
        Ok(())
    }
    fn write(&mut self, ppn: u64, col: u32, bytes: &[u8]) -> Result<()> {
        let ps = self.geo.page_size as usize;
        let col = col as usize;
        let end = col + bytes.len();
        if col < ps {
            let d = end.min(ps);
            self.write_data(ppn, col, &bytes[..d - col]);
        }
        if end > ps {
            let s0 = col.max(ps);
            self.write_spare(ppn, s0 - ps, &bytes[s0 - col..]);
        }
        Ok(())
    }
    fn program_opaque(&mut self, ppn: u64, col: u32, len: u32) -> Result<()> {
        self.opaque(ppn, col, len);
        Ok(())
    }
    /// The device's path for every complete program, written out for this store so that
    /// its primitives are inlined (the default calls them; this store is the simulator's).
    /// Same effect as the default: the device has checked that `data` lies within the
    /// data area.
    fn program(
        &mut self,
        ppn: u64,
        col: u32,
        data: Data<'_>,
        spare: Option<(u32, &[u8])>,
    ) -> Result<()> {
        match data {
            Data::None => {}
            Data::Bytes(b) => self.write_data(ppn, col as usize, b),
            Data::Opaque(n) => self.opaque(ppn, col, n),
        }
        if let Some((so, s)) = spare {
            self.write_spare(ppn, so as usize, s);
        }
        let p = &mut self.programs[ppn as usize];
        *p = p.saturating_add(1);
        Ok(())
    }
    fn program_bytes_if_clears(
        &mut self,
        ppn: u64,
        col: u32,
        bytes: &[u8],
    ) -> Option<Option<usize>> {
        let (lo, hi) = (col as usize, col as usize + bytes.len());
        let k = self.kept_at[ppn as usize];
        if k < PARTIAL {
            // Kept: compare and copy in the kept page.
            let ps = self.geo.page_size as usize;
            let page = &mut self.arena[k as usize * ps..(k as usize + 1) * ps];
            let cur = &mut page[lo..hi];
            if (8..=32).contains(&bytes.len()) {
                // An entry: compared and copied a word at a time.
                if !program_short(cur, bytes) {
                    return Some(first_set_bit(cur, bytes));
                }
            } else {
                if let Some(i) = first_set_bit(cur, bytes) {
                    return Some(Some(i));
                }
                copy_bytes(cur, bytes);
            }
            let d = &mut self.dirty[k as usize];
            *d = (d.0.min(lo as u32), d.1.max(hi as u32));
        } else if k == NOT_KEPT {
            // Never programmed since the erase: all ones, any bytes only clear bits.
            self.write_data(ppn, lo, bytes);
        } else {
            // Opaque bytes somewhere in the page: the device decides.
            return None;
        }
        let p = &mut self.programs[ppn as usize];
        *p = p.saturating_add(1);
        Some(None)
    }
    /// Kept pages only (the FMS's header pages); any other page takes the device's
    /// general path.
    fn clear_byte_in_place(&mut self, ppn: u64, col: u32, clear: u8) -> Option<u8> {
        let k = self.kept_at[ppn as usize];
        if k >= PARTIAL {
            return None;
        }
        let col = col as usize;
        let at = k as usize * self.geo.page_size as usize + col;
        let old = self.arena[at];
        let new = old & !clear;
        if new & !old != 0 {
            return None;
        }
        self.arena[at] = new;
        let d = &mut self.dirty[k as usize];
        *d = (d.0.min(col as u32), d.1.max(col as u32 + 1));
        let p = &mut self.programs[ppn as usize];
        *p = p.saturating_add(1);
        Some(old)
    }
    fn program_opaque_spans(&mut self, spans: &[Span]) -> bool {
        for &(ppn, col, len) in spans {
            self.opaque(ppn, col, len);
            let p = &mut self.programs[ppn as usize];
            *p = p.saturating_add(1);
        }
        true
    }
    fn program_opaque_pages(&mut self, first: u64, count: u32) -> bool {
        let (a, b) = (first as usize, first as usize + count as usize);
        for ppn in a..b {
            // What `opaque` does with a whole data area: an erased page becomes all
            // opaque, an all-opaque page stays so; kept and partly opaque pages out of
            // line.
            match self.kept_at[ppn] {
                NOT_KEPT => self.kept_at[ppn] = OPAQUE,
                OPAQUE => {}
                _ => self.opaque_page_known(ppn as u64),
            }
        }
        for p in &mut self.programs[a..b] {
            *p = p.saturating_add(1);
        }
        true
    }
    fn program_opaque_pages_spare(
        &mut self,
        first: u64,
        spare_col: u32,
        spares: &[u8],
        ends: &[u32],
    ) -> bool {
        let ss = self.geo.spare_size as usize;
        let col = spare_col as usize;
        // The bit rule on every page's spare bytes first: nothing changes if one fails.
        let mut at = 0usize;
        for (k, &e) in ends.iter().enumerate() {
            let base = (first as usize + k) * ss + col;
            let new = &spares[at..e as usize];
            if !clears_only_short(&self.spare[base..base + new.len()], new) {
                return false;
            }
            at = e as usize;
        }
        self.program_opaque_pages(first, ends.len() as u32);
        let mut at = 0usize;
        for (k, &e) in ends.iter().enumerate() {
            let base = (first as usize + k) * ss + col;
            let new = &spares[at..e as usize];
            copy_short(&mut self.spare[base..base + new.len()], new);
            at = e as usize;
        }
        true
    }
    fn program_opaque_data(&mut self, ppn: u64, col: u32, len: u32) -> Result<()> {
        self.opaque(ppn, col, len);
        let p = &mut self.programs[ppn as usize];
        *p = p.saturating_add(1);
        Ok(())
    }
    fn data_known(&self, ppn: u64) -> bool {
        self.kept_at[ppn as usize] < PARTIAL
    }
    fn erase(&mut self, block: u32) -> Result<()> {
        let first = self.geo.first_page(block) as usize;
        let n = self.geo.pages_per_block as usize;
        let ss = self.geo.spare_size as usize;
        if ss > 0 {
            self.spare[first * ss..(first + n) * ss].fill(0xFF);
        }
        self.programs[first..first + n].fill(0);
        // Most pages of a block are erased or all opaque: nothing to forget but the mark,
        // which the fill below resets; the others (kept, partly opaque) in page order.
        for ppn in first..first + n {
            let k = self.kept_at[ppn];
            if k != NOT_KEPT && k != OPAQUE {
                self.forget(ppn);
            }
        }
        self.kept_at[first..first + n].fill(NOT_KEPT);
        Ok(())
    }
    fn erase_page(&mut self, ppn: u64) -> Result<()> {
        let ss = self.geo.spare_size as usize;
        let base = ppn as usize * ss;
        self.spare[base..base + ss].fill(0xFF);
        self.programs[ppn as usize] = 0;
        self.forget(ppn as usize);
        Ok(())
    }
    fn page_programs(&self, ppn: u64) -> u8 {
        self.programs[ppn as usize]
    }
    fn set_page_programs(&mut self, ppn: u64, n: u8) -> Result<()> {
        self.programs[ppn as usize] = n;
        Ok(())
    }
    fn bump_page_programs(&mut self, ppn: u64) -> Result<()> {
        let p = &mut self.programs[ppn as usize];
        *p = p.saturating_add(1);
        Ok(())
    }
    fn first_set_bit_in_place(&self, ppn: u64, col: u32, new: &[u8]) -> Option<Option<usize>> {
        let ps = self.geo.page_size as usize;
        let (col, end) = (col as usize, col as usize + new.len());
        if end <= ps {
            match self.kept(ppn) {
                Some(p) => Some(first_set_bit(&p[col..end], new)),
                // Opaque bytes in the range: unknown, the device cannot check them.
                None if self.kept_at[ppn as usize] == OPAQUE => None,
                None if self.kept_at[ppn as usize] == PARTIAL
                    && self.partly_opaque_in(ppn, col, end) =>
                {
                    None
                }
                // Never programmed there: all ones, any program is allowed.
                None => Some(None),
            }
        } else if col >= ps {
            let base = ppn as usize * self.geo.spare_size as usize;
            Some(first_set_bit(
                &self.spare[base + col - ps..base + end - ps],
                new,
            ))
        } else {
            None
        }
    }
    fn block_info(&self, block: u32) -> BlockInfo {
        self.blocks[block as usize]
    }
    fn set_block_info(&mut self, block: u32, info: BlockInfo) -> Result<()> {
        self.blocks[block as usize] = info;
        Ok(())
    }
    fn ram_bytes(&self) -> u64 {
        (self.spare.len() + self.programs.len() + self.blocks.len() * 8) as u64
            + self.kept_at.len() as u64 * 4
            + self.arena.len() as u64
            + self.dirty.len() as u64 * 8
            + self
                .partial
                .values()
                .map(|r| 48 + r.capacity() as u64 * 8)
                .sum::<u64>()
    }
    fn try_clone(&self) -> Option<Box<dyn Store>> {
        Some(Box::new(self.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `clears_only_short` and `copy_short` (the spare bytes of a batch) against
    /// `first_set_bit` and `copy_from_slice`, at every length from 0 to 40: a bit set at
    /// each byte is seen, and a copy leaves exactly the new bytes, nothing outside them.
    #[test]
    fn short_spare_checks_and_copies_agree_with_the_general_ones() {
        for n in 0..=40usize {
            let old = vec![0xA5u8; n];
            let same: Vec<u8> = old.iter().map(|b| b & 0x3C).collect();
            assert!(clears_only_short(&old, &same), "{n}");
            for i in 0..n {
                for bit in [0u8, 1, 6] {
                    let mut new = same.clone();
                    new[i] |= 1 << bit;
                    assert_eq!(
                        clears_only_short(&old, &new),
                        first_set_bit(&old, &new).is_none(),
                        "{n} {i} {bit}"
                    );
                }
            }
            let mut dst = vec![0x11u8; n + 4];
            let src: Vec<u8> = (0..n as u8).map(|b| b.wrapping_mul(37)).collect();
            copy_short(&mut dst[2..2 + n], &src);
            assert_eq!(&dst[2..2 + n], &src[..], "{n}");
            assert_eq!(
                (dst[0], dst[1], dst[n + 2], dst[n + 3]),
                (0x11, 0x11, 0x11, 0x11)
            );
        }
    }

    /// `program_short` against `first_set_bit` and `copy_from_slice`, at every length it
    /// takes: a bit set at each byte is refused (nothing written), and a program that
    /// clears bits leaves exactly the new bytes (and nothing outside the range).
    #[test]
    fn program_short_checks_and_copies_every_byte() {
        for n in 8..=32 {
            for i in 0..n {
                for bit in [0u8, 3, 7] {
                    // One bit clear at byte i on the medium; the program sets it.
                    let mut old = vec![0xA5u8; n + 2];
                    old[1 + i] &= !(1 << bit);
                    let before = old.clone();
                    let mut new = old[1..1 + n].to_vec();
                    new[i] |= 1 << bit;
                    assert!(!program_short(&mut old[1..1 + n], &new), "n {n} byte {i}");
                    assert_eq!(old, before, "n {n} byte {i}: refused, nothing written");
                    assert_eq!(first_set_bit(&old[1..1 + n], &new), Some(i));
                    // Bits only cleared, one byte differing: programmed exactly.
                    let mut new = old[1..1 + n].to_vec();
                    new[i] &= !(1 << (bit ^ 5));
                    assert!(program_short(&mut old[1..1 + n], &new), "n {n} byte {i}");
                    assert_eq!(&old[1..1 + n], &new[..], "n {n} byte {i}");
                    assert_eq!(
                        (old[0], old[n + 1]),
                        (0xA5, 0xA5),
                        "n {n}: outside the range"
                    );
                }
            }
        }
    }

    /// The estimates without a store against the stores' own count, on every preset
    /// shrunk to a few blocks; the payload-less store also after it kept pages.
    #[test]
    fn ram_bytes_for_matches_the_stores() {
        for spec in crate::presets() {
            let mut geo = spec.geometry.clone();
            geo.blocks = 6;
            let ram = RamStore::new(&geo).unwrap();
            assert_eq!(
                RamStore::ram_bytes_for(&geo),
                ram.ram_bytes(),
                "{}",
                spec.name
            );
            let mut pl = PayloadlessStore::new(&geo).unwrap();
            assert_eq!(
                PayloadlessStore::ram_bytes_for(&geo, 0),
                pl.ram_bytes(),
                "{}",
                spec.name
            );
            // Real bytes in three pages (one of them twice): three kept pages.
            let ppb = geo.pages_per_block as u64;
            for ppn in [0, 1, ppb, 1] {
                pl.write(ppn, 0, &[0x12]).unwrap();
            }
            assert_eq!(
                PayloadlessStore::ram_bytes_for(&geo, 3),
                pl.ram_bytes(),
                "{}",
                spec.name
            );
        }
    }
}
