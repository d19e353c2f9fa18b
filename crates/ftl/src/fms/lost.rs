//! Lost blocks kept named: the segments holding their records are held back from reuse.
//!
//! A mount names *lost* the blocks whose newest record sits in a segment whose header
//! does not decode and is not erased (`MountReport::lost_blocks`, `mount.rs`): such a
//! segment is dirty and its records are not taken. Since stop 26 a lost block is not
//! mapped to an older copy either (the cleaner would move it under a newer number that
//! beats the lost record, ending the name silently): it reads zeros, and a block-device
//! read over it fails `DevError::Lost`. Until stop 26 the segment went to the free list
//! like any dirty one, so the first command that wrote could erase it for reuse, and
//! with it the only trace of the loss: from then on the blocks read zeros with no
//! warning.
//!
//! Now such a segment is *held*: it stays out of the free list (and is never made the
//! index segment) while it holds the newest record of a block that has not been written
//! or trimmed since. Each mount finds the same records again, so the hold needs nothing
//! on flash. A block stops being lost when it is written (its new record has a larger
//! sequence number: mount raises the next number above every lost record's, see
//! `mount.rs`) or trimmed, and the trim is made durable against the lost record: in spare
//! mode the block gets a tombstone even though nothing is mapped (its number beats the
//! record, and it lives until the block is written again: `trims.rs`); in header mode the
//! lost record's live bit is cleared on flash, as a trim clears a mapped copy's. A header
//! mode write clears it too, after the new copy is on flash: otherwise, once the new copy
//! was trimmed and its segment cleaned away, the old record would be the block's newest
//! again. When the last lost block of a held segment is resolved the segment joins the
//! free list (still dirty: it is erased before use).
//!
//! What a hold costs: the segment's space, as a bad segment's. On a medium with several
//! damaged segments the cleaner may run out of room (`NoSpace`), which is the price of
//! never losing the names silently: save what `fms read --salvage` gives, then write or
//! trim the blocks; a write or trim of only lost blocks goes on without a free segment
//! (`space_for_lost`) (docs/fms.md, "Lost blocks").

use std::collections::BTreeMap;

use super::*;

/// The lost blocks not written or trimmed since the mount named them, and the segments
/// held for them.
#[derive(Clone, Debug, Default)]
pub(super) struct Lost {
    /// Block → where its lost record is.
    pub blocks: BTreeMap<u32, SlotRecord>,
    /// Held segment → how many of `blocks` it holds.
    pub held: BTreeMap<u32, u32>,
    /// Spare mode: segments holding tombstones the mount rescued from their trim lists
    /// (`MountReport::rescued_tombstones`), held until those are written again (the
    /// next `write_trims` that empties the queue).
    pub rescued: Vec<u32>,
}

impl Lost {
    /// The hold for a mount's lost blocks and rescued tombstones' segments; `None` when
    /// there are none.
    pub(super) fn from_mount(lost: &[SlotRecord], rescued: &[u32]) -> Option<Box<Lost>> {
        if lost.is_empty() && rescued.is_empty() {
            return None;
        }
        let mut l = Lost {
            rescued: rescued.to_vec(),
            ..Lost::default()
        };
        for s in lost {
            l.blocks.insert(s.block, *s);
            *l.held.entry(s.segment).or_insert(0) += 1;
        }
        Some(Box::new(l))
    }

    fn is_empty(&self) -> bool {
        self.blocks.is_empty() && self.rescued.is_empty()
    }
}

/// A segment held back from reuse, and why (`fms info`'s `held_segments`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Hold {
    pub segment: u32,
    /// The lost blocks whose records it holds (by logical block number), each until it
    /// is written or trimmed.
    pub lost_blocks: Vec<u32>,
    /// Whether it holds tombstones the mount rescued, until the next writing command
    /// writes them again.
    pub rescued_trims: bool,
}

impl Fms {
    /// The blocks the mount named lost that have not been written or trimmed since.
    pub fn lost_blocks(&self) -> Vec<SlotRecord> {
        self.lost
            .as_ref()
            .map(|l| l.blocks.values().copied().collect())
            .unwrap_or_default()
    }

    /// The segments held back from reuse for them, or for rescued tombstones not yet
    /// written again (see the module's documentation).
    pub fn held_segments(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .lost
            .as_ref()
            .map(|l| l.held.keys().chain(&l.rescued).copied().collect())
            .unwrap_or_default();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The held segments (as [`Fms::held_segments`]) and why each is held, for reports.
    pub fn holds(&self) -> Vec<Hold> {
        let Some(l) = self.lost.as_ref() else {
            return Vec::new();
        };
        self.held_segments()
            .into_iter()
            .map(|segment| Hold {
                segment,
                lost_blocks: l
                    .blocks
                    .values()
                    .filter(|s| s.segment == segment)
                    .map(|s| s.block)
                    .collect(),
                rescued_trims: l.rescued.contains(&segment),
            })
            .collect()
    }

    /// Whether `seg` is held.
    pub(super) fn is_held(&self, seg: u32) -> bool {
        self.lost
            .as_ref()
            .is_some_and(|l| l.held.contains_key(&seg) || l.rescued.contains(&seg))
    }

    /// The rescued tombstones are on flash again (`write_trims` emptied its queue):
    /// release their segments, those not held for a lost block too.
    #[cold]
    #[inline(never)]
    pub(super) fn rescued_written(&mut self) {
        let Some(l) = self.lost.as_mut() else {
            return;
        };
        let rescued = std::mem::take(&mut l.rescued);
        let release: Vec<u32> = rescued
            .into_iter()
            .filter(|s| !l.held.contains_key(s))
            .collect();
        for seg in release {
            self.release(seg);
        }
        self.drop_empty_hold();
    }

    /// `seg` is no longer held: a dirty good segment joins the free list.
    fn release(&mut self, seg: u32) {
        if self.segs[seg as usize].state == SegState::Dirty && !self.nand.is_bad(seg) {
            self.free.push_back(seg);
        }
        // Its room is the cleaner's again: the failure reserve may fit now (a mount of
        // the medium would find it so).
        self.update_marks();
    }

    fn drop_empty_hold(&mut self) {
        if self.lost.as_ref().is_some_and(|l| l.is_empty()) {
            self.lost = None;
        }
    }

    /// Whether `lbn` is a lost block not written or trimmed since the mount.
    pub(super) fn is_lost(&self, lbn: u32) -> bool {
        self.lost
            .as_ref()
            .is_some_and(|l| l.blocks.contains_key(&lbn))
    }

    /// Salvage: read the data of lost block `lbn`'s lost copy into `buf` (a block's
    /// worth), as the slot holds it (corrected against its codes with ECC). False, with
    /// `buf` untouched, when `lbn` is not lost (or no longer: written or trimmed since).
    ///
    /// What it gives is the block's newest content when the header was damaged in place
    /// (bits flipped for good), which is what lost blocks mostly are; after a torn erase
    /// (which names blocks lost only when their newer copies were trimmed and cleaned
    /// away since) it is content the block had before its trim. The caller says which it
    /// takes it for: the FMS never does (the mount does not take these records). A copy
    /// no read can correct fails `Uncorrectable` at the block's first sector.
    pub fn read_lost(&mut self, lbn: u32, buf: &mut [u8]) -> DevResult<bool> {
        let Some(at) = self.lost.as_ref().and_then(|l| l.blocks.get(&lbn).copied()) else {
            return Ok(false);
        };
        let bs = self.lay.block_size as usize;
        if buf.len() != bs {
            return Err(DevError::config(format!(
                "read_lost: a buffer of {} bytes for a {bs}-byte block",
                buf.len()
            )));
        }
        let phys = self.phys(at.segment, at.slot);
        match self.read_phys(phys, Some(buf)) {
            Ok(()) => Ok(true),
            // (The slot reader names a slot no block maps by its place.)
            Err(DevError::Corrupt(_)) if self.lay.ecc() => Err(DevError::Uncorrectable {
                lba: lbn as u64 * (bs / SECTOR) as u64,
            }),
            Err(e) => Err(e),
        }
    }

    /// Rescued tombstones still waiting to be written (`Lost::rescued`): write them before
    /// an operation that may clean, since a trim list whose record is one bit from valid
    /// sits in a segment the cleaner may erase. Out of space they are left waiting: the
    /// operation's own end (a trim's list, a flush) writes them.
    #[cold]
    #[inline(never)]
    pub(super) fn write_rescued_first(&mut self) -> DevResult<()> {
        if self.lost.as_ref().is_none_or(|l| l.rescued.is_empty()) {
            return Ok(());
        }
        match self.write_trims() {
            Err(DevError::NoSpace | DevError::WornOut { .. }) => Ok(()),
            r => r,
        }
    }

    /// `Lost` at the first sector of `count` from `lba` that lies in a lost block (a
    /// request already checked against the capacity).
    #[cold]
    #[inline(never)]
    pub(super) fn refuse_lost(&self, lba: u64, count: u32) -> DevResult<()> {
        let spb = (self.lay.block_size as usize / SECTOR) as u64;
        let blocks = (lba / spb) as u32..(lba + count as u64).div_ceil(spb) as u32;
        let Some(l) = self.lost.as_ref() else {
            return Ok(());
        };
        match l.blocks.range(blocks).next() {
            Some((&lbn, _)) => Err(DevError::Lost {
                lba: (lbn as u64 * spb).max(lba),
            }),
            None => Ok(()),
        }
    }

    /// A write or trim of `lbns` found no space (`e`, from `ensure_space`): go on without
    /// cleaning when every one of them is lost and no segment is free (`Ok`), otherwise
    /// fail with `e`. With segments held the cleaner may have nothing left to clean, yet
    /// writing or trimming a lost block is what releases them (QA stop 26: every write
    /// and trim failed `NoSpace` for good, the remedy included). Without a free segment
    /// the operation can only use the room left in its stream's segment (`append` then
    /// fails `NoSpace` rather than take a segment the cleaner needs), so the reserve is
    /// not touched.
    #[cold]
    #[inline(never)]
    pub(super) fn space_for_lost(&mut self, e: DevError, lbns: &[u32]) -> DevResult<()> {
        let out_of_space = matches!(e, DevError::NoSpace | DevError::WornOut { .. });
        if out_of_space
            && self.free.is_empty()
            && !lbns.is_empty()
            && lbns.iter().all(|&l| self.is_lost(l))
        {
            return Ok(());
        }
        Err(e)
    }

    /// `lbn` was written (its new copy is on flash) or trimmed (its trim is on flash): if
    /// it was lost it is no longer. In header mode the lost record's live bit is cleared
    /// first. The segment holding it is released to the free list when this was its last.
    #[cold]
    #[inline(never)]
    pub(super) fn resolve_lost(&mut self, lbn: u32) -> DevResult<()> {
        let Some(at) = self.lost.as_ref().and_then(|l| l.blocks.get(&lbn).copied()) else {
            return Ok(());
        };
        if self.lay.mode == RecordMode::Header {
            // A failed clear retires the segment (`clear_live`), whose records mount then
            // no longer reads: the block is not named again either way.
            self.clear_live(at.segment, at.slot)?;
        }
        let l = self.lost.as_mut().expect("checked above");
        l.blocks.remove(&lbn);
        let left = l
            .held
            .get_mut(&at.segment)
            .expect("a lost block's segment is held");
        *left -= 1;
        if *left == 0 {
            l.held.remove(&at.segment);
            if !l.rescued.contains(&at.segment) {
                self.release(at.segment);
            }
        }
        self.drop_empty_hold();
        Ok(())
    }
}
