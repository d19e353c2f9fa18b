//! Sizing the FMS's RAM tables: the same computation for a format and for an estimate made
//! before anything is allocated.

use super::*;

/// How [`Fms::new_empty`] sizes its tables: the layout, the slot numbering, the logical
/// blocks and which optional tables are kept. Computed without allocating, so that
/// [`Fms::estimate_ram`] sizes the same tables as a format.
pub(super) struct Sizing {
    pub(super) lay: Layout,
    pub(super) slot_bits: u32,
    /// Physical slot numbers (the reverse map's length).
    pub(super) phys: usize,
    pub(super) logical: u64,
    pub(super) keeps_hot: bool,
    pub(super) used: bool,
    /// Greedy's valid-count keys (small devices; `ValidKeys::new` may still decline).
    pub(super) keys: bool,
    pub(super) aged: bool,
    pub(super) rows: bool,
    pub(super) sums: bool,
    pub(super) wear: bool,
    pub(super) adaptive: bool,
}

/// The index segment must hold an entry for every active segment (one a stream), the
/// entry that makes it wrap, and one more, or the log would wrap at every entry and, with
/// a retired segment, not fit at all: erase blocks of a few pages on a device of one
/// program a page (an entry a page) leave too few (`index segment full` at the first
/// wrap, for good).
pub(super) fn check_index_room(lay: &Layout, cfg: &FmsConfig) -> DevResult<()> {
    let need = cfg.streams() as u64 + 2;
    let cap = lay.index_capacity() as u64;
    if cap < need {
        return Err(DevError::config(format!(
            "device: erase blocks of {} pages leave the FMS's index segment room for {cap} entries ({} a page after its header), fewer than the {need} it needs ({} active segments, the entry that makes the log wrap and one segment gone bad); use erase blocks of more pages, a device that takes more programs a page, or fewer streams",
            lay.pages_per_seg,
            lay.index_per_page,
            cfg.streams(),
        )));
    }
    Ok(())
}

/// A scrub threshold (`FmsConfig::scrub_threshold`) other than 0 (never) needs a code that
/// corrects that many bits in a chunk: without ECC no read corrects any, and above the
/// code's strength none corrects that many, so the option would silently do nothing.
/// Checked against the medium's code: at format, and at mount once the headers said it.
pub(super) fn check_scrub_threshold(lay: &Layout, cfg: &FmsConfig) -> DevResult<()> {
    let Some(n) = cfg.scrub_threshold.filter(|&n| n > 0) else {
        return Ok(());
    };
    if !lay.ecc() {
        return Err(DevError::config(format!(
            "scrub_threshold: {n} bits, but the medium has no ECC: only reads a code corrects can scrub (format with ECC, or leave the threshold out)"
        )));
    }
    if n > lay.ecc_t {
        return Err(DevError::config(format!(
            "scrub_threshold: {n} bits is more than the {} the medium's code ({}) corrects in a 512-byte chunk, so no read would reach it; give 1 to {}, or 0 for never",
            lay.ecc_t,
            layout::ecc_name(lay.ecc_t),
            lay.ecc_t
        )));
    }
    Ok(())
}

impl Sizing {
    /// `good`: the device's good segments; `recorded` as for [`Fms::new_empty`].
    pub(super) fn new(
        geo: &nand::Geometry,
        cfg: &FmsConfig,
        good: u64,
        recorded: Option<u64>,
    ) -> DevResult<Sizing> {
        cfg.validate()?;
        let lay = Layout::new(geo, cfg.block_size)?
            .with_ecc(if cfg.ecc { cfg.ecc_strength } else { 0 }, geo)?
            .with_live_byte(cfg.live_byte)
            .with_header_code(cfg.header_code)
            .with_summary(cfg.segment_summaries)
            .with_record_correction(cfg.record_correction)
            .with_first_page(cfg.first_page_test);
        check_index_room(&lay, cfg)?;
        let segments = lay.segments as usize;
        // A physical slot number is `seg << slot_bits | slot`: shifts, not divisions by
        // the (often odd) slot count, on every lookup. Numbers past `slots` are unused.
        let slot_bits = 32 - (lay.slots.max(2) - 1).leading_zeros();
        let phys = segments << slot_bits;
        if phys >= NONE as usize {
            return Err(DevError::config(format!(
                "device too large for the FMS: blocks: {segments} erase segments of {} data blocks need {phys} physical block numbers (2^{slot_bits} a segment), more than 2^32 - 1; use fewer blocks or a larger block_size",
                lay.slots
            )));
        }
        let reserve = cfg.reserve_segments();
        let auto = good.saturating_sub(reserve) * lay.slots as u64;
        // A caller naming the capacity the medium records mounts it as a caller naming
        // none does (QA stop 29: a medium formatted with an explicit `logical_blocks` was
        // refused by a mount with the same configuration once a segment had gone bad and
        // eaten into the reserve); another capacity is checked as a new one.
        let recorded = recorded.filter(|&r| cfg.logical_blocks.is_none_or(|n| n == r));
        if let Some(n) = recorded {
            // The capacity the medium was formatted to: segments gone bad since (worn out)
            // may have eaten into the reserve, but the data on it must stay readable (writes
            // say `WornOut` when space runs out). Bounded by the slots of the whole device,
            // so a corrupt header cannot make the tables huge.
            let slots = lay.segments as u64 * lay.slots as u64;
            if n > slots {
                return Err(DevError::corrupt(format!(
                    "segment header: capacity of {n} blocks recorded, but the device has {slots} slots"
                )));
            }
        } else if auto == 0 && cfg.logical_blocks.is_none() {
            return Err(DevError::config(format!(
                "no room for data: {good} good segment(s), {reserve} kept in reserve (1 index, high_water {}, {} active stream(s))",
                cfg.high_water,
                cfg.streams()
            )));
        }
        let logical = cfg.logical_blocks.or(recorded).unwrap_or(auto);
        if recorded.is_none() && (logical == 0 || logical > auto) {
            return Err(DevError::config(format!(
                "logical_blocks: {logical} does not fit: the device holds at most {auto} blocks of {} bytes with the reserve",
                cfg.block_size
            )));
        }
        // The indexes of large devices (see `select`): greedy's, cost-benefit's and CAT's
        // (adaptive keeps both), the DAC region loads.
        let large = |min| lay.segments >= min;
        let used = matches!(cfg.policy, Policy::Greedy | Policy::Adaptive)
            && large(select::USED_INDEX_MIN_SEGMENTS);
        let aged =
            cfg.policy != Policy::Greedy && large(select::aged_index_min_segments(cfg.policy));
        Ok(Sizing {
            slot_bits,
            phys,
            logical,
            // Adaptive keeps none: it chooses greedy rarely (5 % of the flagship's
            // cleanings), and the keys' upkeep cost it more than its scans.
            keys: cfg.policy == Policy::Greedy && !used,
            // Hot degrees are kept only where something reads them (see `keeps_hot`).
            keeps_hot: cfg.regions == 1 && cfg.redistribution.uses_hot_degree(),
            used,
            aged,
            rows: cfg.policy != Policy::Greedy && !aged,
            sums: cfg.regions > 1
                && cfg.region_select != RegionSelect::All
                && large(select::SUMMARY_MIN_SEGMENTS),
            wear: cfg.wear_threshold.is_some() && large(select::SUMMARY_MIN_SEGMENTS),
            adaptive: cfg.policy == Policy::Adaptive,
            lay,
        })
    }
}

/// Bytes of host RAM a run of the FMS needs, estimated before anything is allocated
/// ([`Fms::estimate_ram`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RamEstimate {
    /// The FMS tables at their largest: [`Fms::ram_bytes`] once the victim indexes hold
    /// every segment they can.
    pub tables: u64,
    /// Pages the FMS programs with real bytes (segment headers, the index segment): what
    /// a payload-less store keeps of the data areas
    /// ([`nand::PayloadlessStore::ram_bytes_for`]).
    pub kept_pages: u64,
    /// Logical blocks the format exports.
    pub logical_blocks: u64,
    /// Of `tables`, the bytes allowed for the groups of the cost-benefit / CAT index on
    /// large devices: a bound (their number depends on the run's valid counts and erase
    /// counts), not an estimate, and the one part of `tables` that can be well above what
    /// a run holds.
    pub aged_groups: u64,
}

impl Fms {
    /// What [`Fms::format`] of a device of `geo`, all segments good, with `cfg` would hold
    /// in RAM, computed without allocating (a device too large for this machine gets a
    /// number, not an allocation failure). Sized by the same code as the format
    /// (`Sizing`); each optional table by its own module's `ram_bytes_for`. Keep it in
    /// step with [`Fms::ram_bytes`] (`tests::ram_estimate_tracks_the_tables` checks it).
    pub fn estimate_ram(geo: &nand::Geometry, cfg: &FmsConfig) -> DevResult<RamEstimate> {
        let z = Sizing::new(geo, cfg, geo.blocks as u64, None)?;
        let n = z.logical;
        let segments = z.lay.segments as u64;
        let slots = z.lay.slots;
        let opt = |keep: bool, bytes: u64| if keep { bytes } else { 0 };
        // A CAT group is (stream, valid count, erase count): as many as segments at most,
        // and empty groups stay until they are half the map; cost-benefit's have no erase
        // count.
        let groups = match cfg.policy {
            Policy::CostBenefit => (cfg.streams() as u64 * (slots as u64 + 1)).min(segments),
            _ => segments,
        } * 2;
        let aged_groups = opt(z.aged, select::AgedIndex::peak_ram_bytes_for(0, groups));
        let tables = n
            .saturating_mul(PER_BLOCK_BYTES)
            .saturating_add(z.phys as u64 * 4)
            .saturating_add(segments * std::mem::size_of::<Seg>() as u64)
            .saturating_add(opt(z.keeps_hot, HotDegree::ram_bytes_for(n)))
            .saturating_add(opt(
                z.used,
                select::UsedIndex::ram_bytes_for(segments, slots),
            ))
            .saturating_add(opt(
                z.keys,
                select::ValidKeys::ram_bytes_for(segments, slots),
            ))
            .saturating_add(opt(
                z.aged,
                select::AgedIndex::peak_ram_bytes_for(segments, groups),
            ))
            .saturating_add(opt(
                z.rows,
                segments * std::mem::size_of::<select::Row>() as u64,
            ))
            .saturating_add(opt(z.sums, TableSums::ram_bytes_for(segments)))
            .saturating_add(opt(z.wear, WearIndex::peak_ram_bytes_for(segments)))
            .saturating_add(opt(z.adaptive, Adaptive::ram_bytes_for(n)));
        let header_pages = (z.lay.header_bytes as u64).div_ceil(z.lay.page_size as u64);
        // Every full segment's summary pages are kept too, and each segment's header
        // erase sequence.
        let summary_pages = z.lay.summary_pages() as u64;
        let tables = tables.saturating_add(if summary_pages > 0 { segments * 8 } else { 0 });
        Ok(RamEstimate {
            tables,
            kept_pages: segments * (header_pages + summary_pages) + z.lay.pages_per_seg as u64,
            logical_blocks: n,
            aged_groups,
        })
    }
}
