//! `flashkit fms …`: the Flash Memory Server in storage mode on a NAND image file
//! (created with `flashkit nand format`): format, info, write, read, trim, check. Every write
//! and trim is durable when the command returns; the image reopens in any later process. `info` and
//! `read` open the image read-only and never change it: what their mount repairs stays in
//! RAM (see docs/fms.md, "Inspecting an image").

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use ftl::fms::select::Policy;
use ftl::fms::{Fms, FmsConfig, Hold, SegState, SlotRecord};
use ftl::{BlockDevice, SECTOR};
use serde::Serialize;

use super::common::{open_image, parse_size};
use crate::output::{self, Fields, ReportArgs};
use sim::staged::Staged;

#[derive(Subcommand, Debug)]
pub enum FmsCmd {
    /// Format the FMS on a NAND image (erases every good segment, writes the headers).
    Format(FormatArgs),
    /// Mount an FMS image and report its tables (capacity, segments, wear, mount time).
    Info(InfoArgs),
    /// Write bytes from a file (or stdin) at a byte offset.
    ///
    /// `--json` prints what was written and what it cost the device (blocks, flash
    /// writes, erasures, device time) on stdout instead of the one-line summary on stderr.
    Write(WriteArgs),
    /// Read bytes at a byte offset to a file (or stdout).
    ///
    /// `--json` prints what was read and its device time on stdout, so it needs `--output
    /// FILE` for the data.
    Read(ReadArgs),
    /// Discard bytes at a byte offset: they read as zeros from then on (whole blocks are
    /// unmapped and their space reclaimed; parts of blocks are rewritten with zeros).
    ///
    /// `--json` prints the blocks trimmed and the cost on stdout instead of the one-line
    /// summary on stderr.
    Trim(TrimArgs),
    /// Read every mapped block through its checks (ECC, re-reads) and report what the
    /// reads found: blocks read clean, corrected, read only after re-reads, unreadable.
    ///
    /// Exits with status 1 when a block is unreadable. `--repair` opens the image for
    /// writing and moves the blocks whose reads corrected as many bits as the scrub
    /// threshold (scrubbing) before it ends; without it the image is not written.
    Check(CheckArgs),
}

pub fn run(cmd: FmsCmd) -> Result<()> {
    match cmd {
        FmsCmd::Format(a) => format(a),
        FmsCmd::Info(a) => info(a),
        FmsCmd::Write(a) => write(a),
        FmsCmd::Read(a) => read(a),
        FmsCmd::Trim(a) => trim(a),
        FmsCmd::Check(a) => check(a),
    }
}

/// How to mount: the cleaning policy (not recorded on flash) and the block size, which
/// is read from the image.
#[derive(Args, Debug, Clone)]
pub struct MountArgs {
    /// Segment selection used while this command runs: greedy, cost-benefit, cat, adaptive
    /// [default: cat]. Refused by the commands that only read the image (`fms read`, `fms
    /// check` without --repair); `fms info` takes it for the reserve it sizes.
    #[arg(long, value_name = "POLICY")]
    pub policy: Option<String>,
    /// How many times a read is made again when ECC finds a 512-byte chunk it cannot
    /// correct before the read fails; a header, record, index entry or trim list that
    /// fails its checksum is read again four times as often before it counts as torn. Bit
    /// flips in the device model are transient, so a re-read usually succeeds.
    #[arg(long, default_value_t = FmsConfig::default().read_retries, value_name = "N")]
    pub read_retries: u8,
    /// Wear levelling while this command runs: when the most and least erased segments
    /// differ by more than N erasures, swap their roles (the paper's scheme; off by
    /// default, as in `sim`; `none`: off). Not recorded on flash: give it to every command
    /// that writes. Refused where the image is only read (`fms info`, `fms read`, `fms
    /// check` without --repair).
    #[arg(long, value_name = "N|none", value_parser = super::common::parse_wear_threshold)]
    pub wear_threshold: Option<super::common::WearThreshold>,
    /// Move the index log to a free segment when its own has been erased more than N
    /// times beyond it, instead of erasing it in place (`none`: always in place) [default: 8].
    /// Refused where the image is only read (`fms info`, `fms read`, `fms check` without
    /// --repair).
    #[arg(long, value_name = "N|none")]
    pub index_wear_gap: Option<String>,
    /// With ECC: move a block whose read corrected at least N bits in one 512-byte chunk
    /// at the next flush (scrubbing; 0 = never). Default: three quarters of the code's
    /// strength, rounded up (1 for SEC-DED, 3 for BCH-4). Refused where the image is only
    /// read (`fms info`, `fms read`, `fms check` without --repair).
    #[arg(long, value_name = "N")]
    pub scrub_threshold: Option<u8>,
    /// Free segments the cleaner keeps beyond its water marks once a block has gone bad in
    /// use (or from the start, --failure-reserve-from start), while the data leaves room
    /// (one segment where N do not fit): two program failures close together then find a segment to copy into (0: the
    /// marks alone) [default: 1]. Not recorded on flash; `fms info` takes it for the state
    /// it reports. Refused where the image is only read (`fms read`, `fms check` without
    /// --repair).
    #[arg(long, value_name = "N")]
    pub failure_reserve: Option<u32>,
    /// When the failure reserve applies: first-failure (once a block has gone bad in use:
    /// a medium that never failed cleans at the paper's marks) or start (from the format
    /// on: its first failures find the reserve too, at the price of cleaning a segment
    /// earlier all along) [default: first-failure]. Not recorded on flash; `fms info` takes
    /// it for the state it reports. Refused where the image is only read (`fms read`, `fms
    /// check` without --repair).
    #[arg(long, value_name = "WHEN")]
    pub failure_reserve_from: Option<ftl::fms::ReserveFrom>,
    /// Data redistribution while this command runs, m1..m6 (docs/fms.md) [default: the
    /// paper's pairing with the policy: greedy m1, cost-benefit m4, cat and adaptive m6].
    /// Not with --regions above 1 (DAC regions replace it). Not recorded on flash. Refused
    /// where the image is only read (`fms read`, `fms check` without --repair); `fms info`
    /// takes it for the reserve it sizes.
    #[arg(long, value_name = "M")]
    pub redistribution: Option<String>,
    /// DAC regions while this command runs (1..8; 1 = no DAC) [default: 1]. A stream and
    /// its active segment per region: more than 2 need room the format left (`fms format
    /// --regions N`). Not recorded on flash. Refused where the image is only read.
    #[arg(long, value_name = "N")]
    pub regions: Option<u8>,
    /// DAC region selection: all, most-segments, most-garbage [default: all]. With
    /// --regions above 1.
    #[arg(long, value_name = "RULE")]
    pub region_select: Option<String>,
    /// DAC time threshold (device time: `500ms`, `2s`, `30m`) [default: none]. With
    /// --regions above 1.
    #[arg(long, value_name = "DURATION")]
    pub region_threshold: Option<String>,
}

impl MountArgs {
    /// `--policy`, `--failure-reserve` and `--failure-reserve-from` where the image is
    /// only read and nothing reported depends on them (`fms info` reports the reserve and
    /// RAM the policy sizes and where the failure reserve stands; `fms read`, `fms check`
    /// and a read-only `blockdev mount` report neither): refused as having no effect
    /// (stop 28; the failure reserve's, stop 34).
    pub(crate) fn refuse_writer_options_where_only_read(&self) -> Result<()> {
        let sizing = [
            ("--policy", self.policy.is_some()),
            ("--redistribution", self.redistribution.is_some()),
            ("--regions", self.regions.is_some()),
            ("--region-select", self.region_select.is_some()),
            ("--region-threshold", self.region_threshold.is_some()),
        ];
        if let Some((flag, _)) = sizing.iter().find(|(_, g)| *g) {
            bail!("{flag}: has no effect: this command only reads the image (give it to the commands that write, or to `fms info` for the reserve it sizes)");
        }
        let given = [
            ("--failure-reserve", self.failure_reserve.is_some()),
            (
                "--failure-reserve-from",
                self.failure_reserve_from.is_some(),
            ),
        ];
        if let Some((flag, _)) = given.iter().find(|(_, g)| *g) {
            bail!("{flag}: has no effect: this command only reads the image (give it to the commands that write, or to `fms info` for the state it reports)");
        }
        Ok(())
    }

    /// The runtime knobs of the FMS these options give, on top of `cfg`.
    fn apply(&self, cfg: FmsConfig) -> Result<FmsConfig> {
        if self.failure_reserve == Some(0) && self.failure_reserve_from.is_some() {
            bail!("--failure-reserve-from: has no effect: --failure-reserve is 0 (no reserve)");
        }
        let index_wear_gap = match self.index_wear_gap.as_deref() {
            None => cfg.index_wear_gap,
            Some(g) => super::common::parse_index_wear_gap(g)?,
        };
        let mut cfg = cfg;
        super::common::apply_dac(
            &mut cfg,
            self.redistribution.as_deref(),
            self.regions,
            self.region_select.as_deref(),
            self.region_threshold.as_deref(),
        )?;
        Ok(FmsConfig {
            read_retries: self.read_retries,
            wear_threshold: self.wear_threshold.and_then(|w| w.0),
            index_wear_gap,
            scrub_threshold: self.scrub_threshold,
            failure_reserve: self.failure_reserve.unwrap_or(cfg.failure_reserve),
            failure_reserve_from: self
                .failure_reserve_from
                .unwrap_or(cfg.failure_reserve_from),
            ..cfg
        })
    }
}

#[derive(Args, Debug)]
pub struct FormatArgs {
    /// NAND image file.
    pub image: PathBuf,
    /// FMS logical block size.
    #[arg(long, default_value = "4KiB")]
    pub block_size: String,
    /// Give every data page a SEC-DED code (3 bytes per 512, in its spare area): a read
    /// corrects one flipped bit per 512 bytes, reads again when it finds two, and fails
    /// rather than return wrong data when they stay. Three or more flips in one 512-byte
    /// chunk are beyond the code (an odd count is miscorrected): SLC-class error rates,
    /// not MLC's (which need 4 bits per 512). Segment headers carry the code too (up to
    /// its strength in bits corrected at mount); spare records carry CRCs, not codes.
    /// NAND devices whose spare area holds the codes (e.g. mlc2-2g, slc-large-1g;
    /// not the 16-byte spares of nandsim-256m). Later commands take it from the image.
    /// For MLC-class rates use --ecc-bits.
    #[arg(long)]
    pub ecc: bool,
    /// ECC with a code that corrects T bits per 512 bytes (implies --ecc): 1 is the
    /// SEC-DED code above; 2 to 8 a BCH code (ceil(13·T/8) bytes per 512 in the spare
    /// area: 7 for T = 4, which 2 Gb MLC parts ask; mlc2-2g's 64-byte spare holds up to
    /// T = 7 on its 2 KiB pages).
    #[arg(long, value_name = "T", value_parser = clap::value_parser!(u8).range(1..=8))]
    pub ecc_bits: Option<u8>,
    /// Format an image that already holds an FMS (its data is lost; erase counts carry
    /// over), or whose segment header pages are programmed though no header decodes (a
    /// damaged FMS, or other data). Without it such an image is refused, as `nand format`
    /// refuses an existing file.
    #[arg(long)]
    pub force: bool,
    /// Exported capacity: a size that is a whole number of blocks (e.g. 1MiB), or a
    /// percentage of the most the medium holds beside the reserve (e.g. 90%). Less leaves
    /// the cleaner slack: it copies less, and once a block has gone bad the FMS keeps one
    /// more free segment for the failures to come where the slack allows (the failure
    /// reserve, docs/fms.md). Default: the most.
    #[arg(long, value_name = "SIZE|P%", allow_hyphen_values = true)]
    pub capacity: Option<String>,
    /// Format without segment summaries (spare mode): a full segment then costs a mount
    /// one spare read per slot instead of one page read, as on media formatted before
    /// them, which flashkit builds from before them can still mount. Summaries need room
    /// after a segment's last slot (e.g. 4 KiB blocks on mlc2-2g or slc-large-1g, not
    /// 2 KiB ones); `format` says whether the medium has them.
    #[arg(long)]
    pub no_segment_summaries: bool,
    /// Leave room for N DAC regions (1..8): the reserve keeps an active segment per
    /// region (and one for read-only data), so later commands may run with `--regions` up
    /// to N. 1 and 2 need no more than the default's room (the policies' hot and cold
    /// streams) [default: 1].
    #[arg(long, value_name = "N")]
    pub regions: Option<u8>,
    #[command(flatten)]
    pub report: ReportArgs,
}

/// `flashkit fms format --json`.
#[derive(Serialize, Debug)]
pub struct FormatReport {
    pub image: String,
    pub block_size: u32,
    pub blocks_per_segment: u32,
    pub logical_blocks: u64,
    pub capacity_bytes: u64,
    pub segments: usize,
    pub bad_segments: usize,
    /// Whether data pages carry ECC codes (`--ecc`).
    pub ecc: bool,
    /// The code: `none`, `SEC-DED` or `BCH-T` (`--ecc-bits T`).
    pub ecc_code: String,
    /// How header-mode entries carry their live state: `byte` (seven bits of the flags
    /// byte, read by majority: header features bit 1, every new header-mode format),
    /// `bit` (bit 0 alone: media formatted before it), `none` (spare mode).
    pub live_flag: String,
    /// Whether segment headers carry the medium's code (header features bit 2: every new
    /// format with ECC), so that mount corrects as many bits of a header as of data.
    pub header_code: bool,
    /// Whether full segments get a segment summary (header features bit 3: new spare-mode
    /// formats with room after a segment's last slot), read by mount instead of every
    /// slot's record.
    pub segment_summaries: bool,
    /// Whether a spare record one bit from valid before a later record is corrected (a
    /// bit flipped for good), the mount closing a segment whose tail holds a record one or
    /// two bits from valid (header features bit 8: every new spare-mode format).
    pub record_correction: bool,
    /// Whether a mount judges a free segment's first slot by its first page (header
    /// features bit 9: every spare-mode format since stop 35).
    pub first_page_test: bool,
    /// Good segments beyond the reserve and the segments the capacity fills: 0 at the
    /// most the medium holds, more with `--capacity` (stop 34; before, the text alone said
    /// it). With the capacity full, the failure reserve holds through a first failure
    /// while this is at least `failure_reserve` + 1.
    pub slack_segments: u64,
    /// Device time the format took (erasing every good segment, writing the headers).
    pub format_time_s: f64,
}

#[derive(Args, Debug)]
pub struct InfoArgs {
    pub image: PathBuf,
    /// Report the segment lookup table instead, one row per segment: its state, erase
    /// count, valid blocks, slots used, stream, creation and last invalidation time (with
    /// `--json` an array of rows, with `--csv` one CSV row per segment)
    #[arg(long)]
    pub segments: bool,
    #[command(flatten)]
    pub mount: MountArgs,
    #[command(flatten)]
    pub report: ReportArgs,
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    pub image: PathBuf,
    /// Open the image for writing and move (scrub) the blocks whose reads corrected as
    /// many bits in one 512-byte chunk as `--scrub-threshold` before the command ends
    #[arg(long)]
    pub repair: bool,
    #[command(flatten)]
    pub mount: MountArgs,
    #[command(flatten)]
    pub report: ReportArgs,
}

#[derive(Args, Debug)]
pub struct WriteArgs {
    pub image: PathBuf,
    /// Byte offset (a multiple of 512).
    #[arg(long, default_value = "0")]
    pub offset: String,
    /// File to write; `-` or nothing for stdin.
    #[arg(long)]
    pub input: Option<PathBuf>,
    #[command(flatten)]
    pub mount: MountArgs,
    // `--json`: what was written and what it cost the device (on stdout, instead of the
    // one-line summary on stderr).
    #[command(flatten)]
    pub report: ReportArgs,
}

#[derive(Args, Debug)]
pub struct ReadArgs {
    pub image: PathBuf,
    /// Byte offset (a multiple of 512).
    #[arg(long, default_value = "0")]
    pub offset: String,
    /// Bytes to read.
    #[arg(long)]
    pub length: String,
    /// File to write the bytes to; `-` or nothing for stdout (not with `--json`, whose
    /// report goes to stdout).
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Read a range over blocks the mount found lost anyway (their newest copy is in a
    /// segment whose header does not decode; they read zeros): to save
    /// the rest in one read. Without it (or `--salvage`) such a range is refused.
    #[arg(long, conflicts_with = "salvage")]
    pub allow_lost: bool,
    /// Read each lost block in the range from its lost copy, the one behind the damaged
    /// header: the block's newest content when the header was damaged in place (bits
    /// flipped for good); content from before a trim if a torn erase left the header so.
    #[arg(long)]
    pub salvage: bool,
    #[command(flatten)]
    pub mount: MountArgs,
    // `--json`: what was read (the report on stdout; the data must then go to
    // `--output FILE`, not to stdout, where the two would mix).
    #[command(flatten)]
    pub report: ReportArgs,
}

#[derive(Args, Debug)]
pub struct TrimArgs {
    pub image: PathBuf,
    /// Byte offset (a multiple of 512).
    #[arg(long, default_value = "0")]
    pub offset: String,
    /// Bytes to discard (a multiple of 512).
    #[arg(long)]
    pub length: String,
    #[command(flatten)]
    pub mount: MountArgs,
    // `--json`: what was trimmed and what it cost the device (on stdout, instead of the
    // one-line summary on stderr).
    #[command(flatten)]
    pub report: ReportArgs,
}

fn config(policy: &str, block_size: u32) -> Result<FmsConfig> {
    let policy: Policy = policy.parse().map_err(|e| anyhow!("--policy: {e}"))?;
    Ok(FmsConfig {
        block_size,
        policy,
        redistribution: sim::reproduce::paper_pairing(policy),
        ..FmsConfig::default()
    })
}

/// How a command opens the image.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Reading and writing: the mount's repairs and the command's writes reach the file.
    Write,
    /// Read-only (inspection): the file is never written; the mount's repairs stay in RAM.
    Inspect,
}

/// Good erase blocks holding programmed pages: a page the device counts programmed since
/// its block's erase (the image's program-count table), or a first page (where a segment
/// header goes) that does not read erased in its first 64 bytes. On a medium where no
/// header decodes: a damaged FMS or another format's data, which `fms format` must not
/// erase without `--force` (QA stop 32: a medium whose every header was damaged was
/// formatted over, and the advice to format it came first; until stop 33 only the first
/// page was read, so a medium whose header pages a torn erase had emptied, its data pages
/// kept, was formatted over).
fn programmed_blocks(nand: &mut nand::Nand) -> Vec<u32> {
    let geo = nand.geometry().clone();
    let mut out = Vec::new();
    let mut buf = [0u8; 64];
    for b in 0..geo.blocks {
        if nand.is_bad(b) {
            continue;
        }
        let first = geo.first_page(b);
        let counted = (0..geo.pages_per_block as u64).any(|i| nand.page_programs(first + i) > 0);
        let len = buf.len().min(geo.page_size as usize);
        if counted
            || nand.read(first, 0, &mut buf[..len]).is_err()
            || buf[..len].iter().any(|&x| x != 0xFF)
        {
            out.push(b);
        }
    }
    out
}

/// More streams than a default format leaves room for (DAC regions above 2: an active
/// segment each) only where the medium has the room, as `fms format --regions N` leaves
/// it: refused otherwise, before the command writes anything of its own (the mount's
/// repairs aside); `fms info` reports the medium as it is. (The policies and
/// redistributions keep at most the streams the format's reserve counts, and a medium
/// whose room shrank as blocks went bad keeps working with them, as before.)
fn check_streams(path: &Path, fms: &Fms) -> Result<()> {
    let cfg = fms.config();
    let default = config("cat", cfg.block_size)?;
    if cfg.streams() <= default.streams() {
        return Ok(());
    }
    let (need, room) = (cfg.reserve_segments(), fms.room_beside_data());
    if need > room {
        bail!(
            "{}: --regions {}: {} stream(s) need a reserve of {} beside the data (1 index, high water {}, a segment per stream), and this medium has {}: format it with --regions {} for them, or give fewer",
            path.display(),
            cfg.regions,
            cfg.streams(),
            segments(need),
            cfg.high_water,
            segments(room),
            cfg.regions
        );
    }
    Ok(())
}

/// "segments 1, 2, 3, 4, 5 and N more" for an error message.
fn some_segments(segs: &[u32]) -> String {
    let what = if segs.len() == 1 {
        "segment"
    } else {
        "segments"
    };
    let list = output::shortened_list(segs, 5, |n| format!(" and {n} more"));
    format!("{what} {list}")
}

/// The error for an image whose every erase block is bad, if it is one: "every erase
/// block is bad (N of N, K of them because their block-table entries are corrupt):
/// `then`".
fn all_bad(path: &Path, nand: &nand::Nand, then: &str) -> Option<anyhow::Error> {
    let blocks = nand.geometry().blocks;
    if !(0..blocks).all(|b| nand.is_bad(b)) {
        return None;
    }
    let repaired = nand.open_repairs().len();
    Some(anyhow!(
        "{}: every erase block is bad ({blocks} of {blocks}{}): {then}",
        path.display(),
        if repaired > 0 {
            format!(", {repaired} of them because their block-table entries are corrupt")
        } else {
            String::new()
        }
    ))
}

/// The error for an image with no FMS segment header that decodes (`nand` opened on it).
fn no_fms(path: &Path, nand: &mut nand::Nand) -> anyhow::Error {
    // Nothing good to read a header from is not "not an FMS": say so, and do not send
    // the user to the one command that would wipe what the bad blocks still hold.
    if let Some(e) = all_bad(path, nand, "no segment to mount") {
        return e;
    }
    let programmed = programmed_blocks(nand);
    if !programmed.is_empty() {
        return anyhow!(
            "{}: no FMS segment header decodes, but programmed pages remain in {}: a damaged FMS, or another format's data (`flashkit fms format --force` would erase it)",
            path.display(),
            some_segments(&programmed)
        );
    }
    anyhow!(
        "{}: no FMS segment header: not an FMS medium (run `flashkit fms format` first)",
        path.display()
    )
}

/// "1 segment", "N segments".
fn segments(n: u64) -> String {
    format!("{n} segment{}", if n == 1 { "" } else { "s" })
}

/// Open the image and mount the FMS on it, with the block size recorded on flash.
pub(crate) fn mount(path: &Path, m: &MountArgs, access: Access) -> Result<Fms> {
    // Options that act only while the FMS writes are refused where it only reads, as
    // `torture` and `nand format` refuse theirs (QA stop 27: accepted in silence).
    if access == Access::Inspect {
        let given = [
            ("--wear-threshold", m.wear_threshold.is_some()),
            ("--index-wear-gap", m.index_wear_gap.is_some()),
            ("--scrub-threshold", m.scrub_threshold.is_some()),
        ];
        if let Some((flag, _)) = given.iter().find(|(_, g)| *g) {
            bail!("{flag}: has no effect: this command only reads the image (give it to the commands that write)");
        }
    }
    let nand = match access {
        Access::Write => open_image(path, true)?,
        Access::Inspect => open_image(path, false)?,
    };
    // The configuration is the user's, with the block size the medium records (its first
    // header's, which the mount reads anyway: one read of every header, not a probe's
    // and then the mount's).
    let base = m.apply(config(m.policy.as_deref().unwrap_or("cat"), 0)?)?;
    let no_header = std::cell::Cell::new(false);
    let make = |h: Option<&ftl::fms::layout::SegHeader>| match h {
        Some(h) => Ok(FmsConfig {
            block_size: h.block_size,
            ..base.clone()
        }),
        None => {
            no_header.set(true);
            Err(ftl::DevError::corrupt("no FMS segment header"))
        }
    };
    let fms = match Fms::mount_with(nand, &make) {
        Ok(fms) => fms,
        Err((_, Some(mut nand))) if no_header.get() => return Err(no_fms(path, &mut nand)),
        Err((e, _)) => {
            return Err(anyhow::Error::new(e).context(format!("{}: mount", path.display())))
        }
    };
    if access == Access::Write {
        check_streams(path, &fms)?;
    }
    // Spare records one bit from valid (not corrected, `spare_flip`): the blocks they
    // name may read older data; said at every mount, as lost blocks are (QA stop 26:
    // only `fms info` said it).
    let flipped = &fms.mount_report().flipped_records;
    if !flipped.is_empty() {
        eprintln!(
            "flashkit: warning: {}: {} record(s) one bit from valid, not taken (a bit flipped for good, or a write a power cut stopped): {}; the blocks they name may read older data or zeros{}",
            path.display(),
            flipped.len(),
            slot_records(&flipped[..flipped.len().min(5)])
                + &if flipped.len() > 5 {
                    format!(", … (+{} more; `fms info --json` lists all)", flipped.len() - 5)
                } else {
                    String::new()
                },
            if flipped
                .iter()
                .any(|s| s.block == ftl::fms::layout::TRIM_LIST_LBN)
            {
                " (a trim list's tombstones are taken all the same: its trims stand)"
            } else {
                ""
            }
        );
    }
    let lost = &fms.mount_report().lost_blocks;
    if !lost.is_empty() {
        // The damaged segments are held until each block is written or trimmed
        // (`ftl::fms::lost`): a writing command that does so ends the names.
        let last = match access {
            Access::Write => " (their segments are kept until each block is written or trimmed, which ends its name: `fms read --salvage` first to save them)",
            Access::Inspect => "",
        };
        eprintln!(
            "flashkit: warning: {}: blocks lost: {}{last}",
            path.display(),
            lost_text(lost)
        );
    }
    Ok(fms)
}

/// The FMS's counters and the device clock when a command's mount ended, to report what
/// the command's own reads, writes and trims cost.
struct Spent {
    stats: ftl::fms::FmsStats,
    clock_ps: u64,
}

/// What a command's reads, writes or trims cost the device (`fms write|read|trim
/// --json`), the mount's own reads apart.
#[derive(Serialize, Debug)]
pub struct IoCost {
    /// Logical blocks written by the command (a partial block's rewrite included).
    pub user_writes: u64,
    /// Logical blocks read by the command.
    pub user_reads: u64,
    /// Blocks programmed: the user writes, the cleaner's copies and trim lists (the
    /// contract's `flash_writes`, as `sim` counts it).
    pub flash_writes: u64,
    pub blocks_copied: u64,
    pub erasures: u64,
    /// Device time of the command's I/O (the mount's is `mount_time_s`).
    pub device_time_s: f64,
    pub mount_time_s: f64,
    /// The device clock when the command ended (virtual device time). Each mount resumes
    /// it from the newest time on the medium (docs/format/fms.md, Mount step 7), so it
    /// keeps growing across commands.
    pub device_clock_s: f64,
}

impl Spent {
    fn since_mount(f: &Fms) -> Spent {
        Spent {
            stats: f.stats().clone(),
            clock_ps: f.nand().clock_ps(),
        }
    }

    fn cost(&self, f: &Fms) -> IoCost {
        let (a, b) = (&self.stats, f.stats());
        let clock = f.nand().clock_ps();
        IoCost {
            user_writes: b.user_writes - a.user_writes,
            user_reads: b.user_reads - a.user_reads,
            flash_writes: b.flash_writes() - a.flash_writes(),
            blocks_copied: b.blocks_copied - a.blocks_copied,
            erasures: b.erasures - a.erasures,
            device_time_s: clock.saturating_sub(self.clock_ps) as f64 / 1e12,
            mount_time_s: f.mount_time_ps() as f64 / 1e12,
            device_clock_s: clock as f64 / 1e12,
        }
    }
}

/// `flashkit fms write --json`.
#[derive(Serialize, Debug)]
pub struct WriteReport {
    pub image: String,
    /// Byte offset written at.
    pub offset: u64,
    pub bytes_written: u64,
    /// Blocks the mount found lost that this write wrote, by logical block number: lost
    /// no longer (`fms info`'s `lost_blocks`).
    pub lost_blocks_resolved: Vec<u32>,
    #[serde(flatten)]
    pub cost: IoCost,
}

/// `flashkit fms read --json`.
#[derive(Serialize, Debug)]
pub struct ReadReport {
    pub image: String,
    pub offset: u64,
    pub bytes_read: u64,
    /// Where the bytes went.
    pub output: String,
    /// Lost blocks in the range (`--allow-lost` or `--salvage`), by logical block number.
    pub lost_blocks: Vec<u32>,
    /// How they were read: `mapped` (zeros: `--allow-lost`), `salvaged`
    /// (their lost copies: `--salvage`); null when the range holds none (and
    /// `lost_blocks` is empty: both keys are always present in this report).
    pub lost_read_as: Option<&'static str>,
    /// `--salvage`: lost blocks whose lost copy no read could correct, read as mapped
    /// (zeros).
    pub unsalvaged_blocks: Vec<u32>,
    #[serde(flatten)]
    pub cost: IoCost,
}

/// `flashkit fms trim --json`.
#[derive(Serialize, Debug)]
pub struct TrimReport {
    pub image: String,
    pub offset: u64,
    pub bytes_trimmed: u64,
    /// Logical blocks that were mapped and no longer are (whole blocks in the range; the
    /// parts of blocks at its ends are rewritten with zeros, and count in `user_writes`).
    pub blocks_trimmed: u64,
    /// Blocks the mount found lost that this trim trimmed (or rewrote, at the range's
    /// ends), by logical block number: lost no longer.
    pub lost_blocks_resolved: Vec<u32>,
    #[serde(flatten)]
    pub cost: IoCost,
}

/// Print a command's report as `--json` and/or `--csv` asks; false when neither did.
fn report<T: Serialize>(args: &ReportArgs, r: &T) -> Result<bool> {
    if let Some(p) = &args.csv {
        output::write_csv(p, std::slice::from_ref(r))?;
    }
    if args.json {
        output::print_json(r)?;
    }
    Ok(args.json)
}

fn format(a: FormatArgs) -> Result<()> {
    super::common::refuse_csv_over(&a.report, &[(&a.image, "image being formatted")])?;
    let bs = parse_size(&a.block_size).map_err(|e| anyhow!("--block-size: {e}"))?;
    let bs = u32::try_from(bs).map_err(|_| anyhow!("--block-size: {bs} too large"))?;
    let capacity = match &a.capacity {
        Some(c) => Some((Capacity::parse(c, bs)?, c)),
        None => None,
    };
    if !a.force {
        // Any segment header that decodes: a mountable FMS, or what is left of one. Looked
        // for on a read-only open, so the probe's reads neither reach the image (its
        // device clock and counters) nor count in the format's time.
        let mut nand = open_image(&a.image, false)?;
        let found = Fms::probe(&mut nand).with_context(|| format!("{}", a.image.display()))?;
        let programmed = match found {
            Some(_) => Vec::new(),
            None => programmed_blocks(&mut nand),
        };
        drop(nand);
        if !programmed.is_empty() {
            bail!(
                "{}: holds no FMS header that decodes, but programmed pages remain in {} (a damaged FMS, or another format's data); formatting would erase them: pass --force to format it anyway",
                a.image.display(),
                some_segments(&programmed)
            );
        }
        if let Some(h) = found {
            let size = output::bytes(h.block_size as u64);
            let what = match h.logical_blocks {
                0 => format!("blocks of {size}"),
                n => format!("{n} logical blocks of {size}"),
            };
            bail!(
                "{}: already holds an FMS ({what}); formatting would lose its data: pass \
                 --force to format it anyway",
                a.image.display()
            );
        }
    }
    let nand = open_image(&a.image, true)?;
    if let Some(e) = all_bad(&a.image, &nand, "nothing to format") {
        return Err(e);
    }
    let geo = nand.geometry().clone();
    if a.no_segment_summaries {
        let why = ftl::fms::layout::Layout::why_no_summaries(&geo, bs, &nand.spec().name);
        if let Some(why) = why {
            bail!("--no-segment-summaries: has no effect: {why}");
        }
    }
    let mut cfg = FmsConfig {
        ecc: a.ecc || a.ecc_bits.is_some(),
        ecc_strength: a.ecc_bits.unwrap_or(1),
        segment_summaries: !a.no_segment_summaries,
        ..config("cat", bs)?
    };
    // The reserve for the regions' streams, never less than the policies' (cat's hot,
    // cold and read-only streams).
    let default_streams = cfg.streams();
    super::common::apply_dac(&mut cfg, None, a.regions, None, None)?;
    if cfg.streams() < default_streams {
        cfg.regions = 1;
    }
    let reserve = cfg.reserve_segments();
    let good = geo.blocks.saturating_sub(nand.bad_blocks()) as u64;
    if let Some((c, text)) = &capacity {
        // The most: what the format exports on the segments good now.
        let (_, slots) = Fms::exported_blocks(&geo, &cfg)
            .with_context(|| format!("{}: format", a.image.display()))?;
        let most = good.saturating_sub(reserve) * slots as u64;
        cfg.logical_blocks = Some(c.blocks(text, bs, most)?);
    }
    // The block size that would export the most, if another (512 B to 64 KiB; the same
    // reserve and ECC, on the good segments, as the format counts them): 4 KiB blocks on
    // 512-byte pages lose a slot per segment to the header's page. Named when it gives
    // more than 5 % more.
    let better = (9..=16)
        .map(|k| 1u32 << k)
        .filter(|&b| b != bs)
        .filter_map(|b| {
            let c = FmsConfig {
                block_size: b,
                ..cfg.clone()
            };
            let (_, slots) = Fms::exported_blocks(&geo, &c).ok()?;
            let n = good.checked_sub(c.reserve_segments()).filter(|&n| n > 0)? * slots as u64;
            Some((n * b as u64, b))
        })
        .max();
    // Spare mode without room for segment summaries (blocks that fill the segment): the
    // smallest larger block size that leaves room for one.
    let summary_at = (!a.no_segment_summaries)
        .then(|| {
            let room = |b: u32| {
                ftl::fms::layout::Layout::new(&geo, b)
                    .is_ok_and(|l| l.with_summary(true).summary_page.is_some())
            };
            let spare = geo.nop > 0;
            (spare && !room(bs))
                .then(|| {
                    (bs.trailing_zeros() + 1..=16)
                        .map(|k| 1u32 << k)
                        .find(|&b| room(b))
                })
                .flatten()
        })
        .flatten();
    let mut fms =
        Fms::format(nand, cfg).with_context(|| format!("{}: format", a.image.display()))?;
    fms.flush()
        .with_context(|| format!("{}: format", a.image.display()))?;
    let r = FormatReport {
        image: a.image.display().to_string(),
        block_size: bs,
        blocks_per_segment: fms.layout().slots,
        logical_blocks: fms.logical_blocks(),
        capacity_bytes: fms.capacity_bytes(),
        segments: fms.segments().len(),
        bad_segments: fms
            .segments()
            .iter()
            .filter(|s| s.state == SegState::Bad)
            .count(),
        ecc: fms.layout().ecc(),
        ecc_code: ftl::fms::layout::ecc_name(fms.layout().ecc_t),
        live_flag: live_flag(fms.layout()),
        header_code: fms.layout().header_code_t().is_some(),
        segment_summaries: fms.layout().summary_page.is_some(),
        record_correction: fms.layout().corrects_records(),
        first_page_test: fms.layout().judges_by_first_page(),
        slack_segments: fms
            .spare_segments()
            .saturating_sub(fms.config().reserve_segments() - 2),
        format_time_s: fms.nand().clock_s(),
    };
    if let Some(p) = &a.report.csv {
        output::write_csv(p, std::slice::from_ref(&r))?;
    }
    if a.report.json {
        return output::print_json(&r);
    }
    // Printed together, as every report's text (a closed stdout is no panic).
    let mut lines = Vec::new();
    lines.push(format!(
        "formatted {}: FMS with {} blocks of {} ({} per segment), {} exported{}{}",
        r.image,
        r.logical_blocks,
        output::bytes(bs as u64),
        r.blocks_per_segment,
        output::bytes(r.capacity_bytes),
        if r.ecc {
            format!(", with ECC ({})", r.ecc_code)
        } else {
            String::new()
        },
        if r.segment_summaries {
            ", with segment summaries"
        } else {
            ""
        }
    ));
    // Where the rest of the medium goes (docs/format/fms.md, Mount step 0).
    let seg_bytes = geo.pages_per_block as u64 * geo.page_size as u64;
    lines.push(format!(
        "  of {} raw ({} segments of {}): {} bad, {} kept in reserve (the index, the \
         cleaner's {} and one per stream), the rest {} data slots each",
        output::bytes(geo.blocks as u64 * seg_bytes),
        r.segments,
        output::bytes(seg_bytes),
        r.bad_segments,
        reserve,
        reserve.saturating_sub(1 + fms.config().streams() as u64),
        r.blocks_per_segment,
    ));
    if a.capacity.is_some() {
        let slack = r.slack_segments;
        // With the capacity full, the failure reserve fits while the slack exceeds the
        // segments gone bad by `failure_reserve` (docs/fms.md, "The failure reserve").
        let need = fms.config().failure_reserve as u64 + 1;
        lines.push(format!(
            "  --capacity leaves {} of slack beside the reserve{}",
            segments(slack),
            if slack < need {
                format!(
                    " (the failure reserve needs {need} to hold through a first failure \
                     when the capacity is full)"
                )
            } else {
                String::new()
            }
        ));
    }
    // (Not with --capacity: the user chose the capacity.)
    if let Some((cap, b)) = better
        .filter(|&(cap, _)| cap > r.capacity_bytes + r.capacity_bytes / 20)
        .filter(|_| a.capacity.is_none())
    {
        lines.push(format!(
            "  --block-size {} would export {}",
            output::bytes(b as u64),
            output::bytes(cap)
        ));
    }
    if let Some(b) = summary_at {
        lines.push(format!(
            "  no segment summaries: {} blocks fill each segment; --block-size {} leaves room for one (a mount then reads a page per full segment instead of a spare area per block)",
            output::bytes(bs as u64),
            output::bytes(b as u64)
        ));
    }
    output::print_lines(&lines)
}

/// `fms format --capacity`: a share of the most the medium holds beside the reserve, or a
/// number of blocks. Parsed before the image is read ([`Capacity::parse`]: its own errors
/// come first), resolved against the medium's most ([`Capacity::blocks`]).
enum Capacity {
    Percent(f64),
    Blocks(u64),
}

impl Capacity {
    /// `text`: `P%` (above 0, at most 100) or a size that is a whole number of `bs`-byte
    /// blocks, at least one.
    fn parse(text: &str, bs: u32) -> Result<Capacity> {
        let text = text.trim();
        let bs = bs as u64;
        if let Some(p) = text.strip_suffix('%') {
            return p
                .trim()
                .parse()
                .ok()
                .filter(|p: &f64| p.is_finite() && *p > 0.0 && *p <= 100.0)
                .map(Capacity::Percent)
                .ok_or_else(|| {
                    anyhow!("--capacity: {text:?} is no percentage above 0 and at most 100")
                });
        }
        let bytes = parse_size(text).map_err(|e| anyhow!("--capacity: {e}"))?;
        if bytes == 0 {
            bail!("--capacity: {text} is less than one block");
        }
        if bytes % bs != 0 {
            bail!(
                "--capacity: {text} is not a whole number of {} blocks (give a size of whole \
                 blocks, or a percentage such as 90%)",
                output::bytes(bs)
            );
        }
        Ok(Capacity::Blocks(bytes / bs))
    }

    /// The logical blocks, of a medium that holds at most `most` blocks of `bs` bytes
    /// beside the reserve (a percentage rounded down); at least one, at most `most`.
    fn blocks(&self, text: &str, bs: u32, most: u64) -> Result<u64> {
        let text = text.trim();
        let most_text = || format!("{} ({most} blocks)", output::bytes(most * bs as u64));
        let blocks = match *self {
            Capacity::Percent(p) => {
                let n = (most as f64 * p / 100.0).floor() as u64;
                if n == 0 {
                    bail!(
                        "--capacity: {text} of {} is less than one block",
                        most_text()
                    );
                }
                n
            }
            Capacity::Blocks(n) => n,
        };
        if blocks > most {
            bail!(
                "--capacity: {text} is more than this medium holds beside the reserve: {}",
                most_text()
            );
        }
        Ok(blocks)
    }
}

/// `flashkit fms info --json`.
#[derive(Serialize, Debug)]
pub struct FmsInfo {
    pub image: String,
    pub block_size: u32,
    pub blocks_per_segment: u32,
    pub logical_blocks: u64,
    pub capacity_bytes: u64,
    pub mapped_blocks: u64,
    /// Spare mode: trimmed blocks whose tombstone is still kept on flash, and the trim-list
    /// slots holding them (0 in header mode, where a trim clears the copy's live bit).
    pub tombstones: u64,
    pub trim_lists: u64,
    pub segments: usize,
    pub free_segments: usize,
    pub used_segments: usize,
    pub active_segments: usize,
    pub dirty_segments: usize,
    /// Segments whose erase block is bad, including one that still holds blocks the
    /// next write, trim or flush moves out (not counted as used).
    pub bad_segments: usize,
    /// The segment holding the index log.
    pub index_segments: usize,
    /// Erase counts of the good segments (the contract's wear metrics).
    pub wear_min: u32,
    pub wear_max: u32,
    pub wear_mean: f64,
    pub wear_stddev: f64,
    /// Erase cycles the device is specified for (its preset's or device file's).
    pub endurance: u32,
    /// Life used: the most-erased good segment's count over `endurance` (a fraction; 1
    /// when that segment has reached it), and the mean count's.
    pub life_used: f64,
    pub life_used_mean: f64,
    /// Segments whose erase block is good, factory-bad, and grown bad (failed or worn out
    /// in use); the two bad counts add up to `bad_segments`.
    pub good_segments: usize,
    pub factory_bad_segments: usize,
    pub grown_bad_segments: usize,
    /// Segments kept out of the exported capacity (the index, the cleaner's high-water
    /// mark, one active segment per stream of this command's policy), as `fms format`
    /// says.
    pub reserve_segments: u64,
    /// Good segments that may still go bad before the exported capacity can no longer be
    /// kept: beyond those its blocks fill, the index and one to clean into
    /// (`Fms::spare_segments`).
    pub spare_segments: u64,
    /// Good segments the medium lacks to keep its capacity, once more went bad than
    /// `spare_segments` allowed (`Fms::segments_short`; 0 until then).
    pub segments_short: u64,
    /// The cleaner's free-segment marks in effect (low, high): the configured ones, raised
    /// by the failure reserve when it is engaged.
    pub water_marks: [usize; 2],
    /// Where the failure reserve stands (`ftl::fms::FailureReserve`): `off`, `no-room`
    /// (the valid data and bad segments leave too few good segments beside the reserve),
    /// `ready` (no block gone bad in use yet, and room for a segment of it after one),
    /// `engaged` (marks raised).
    pub failure_reserve: &'static str,
    /// When the failure reserve applies (`--failure-reserve-from`, not recorded on
    /// flash): `first-failure` or `start`.
    pub failure_reserve_from: &'static str,
    /// The newest device time recorded on the medium (segment headers; header-mode
    /// entries): the device clock goes on from there (docs/format/fms.md, Mount step 7).
    pub medium_time_s: f64,
    /// Device time the mount itself took (reading every header and record).
    pub mount_time_s: f64,
    pub ram_bytes: u64,
    /// What the mount found to repair or skip (`ftl::fms::MountReport`): all zero after a
    /// clean unmount.
    pub torn_records: u64,
    pub stale_live_copies: u64,
    pub unreadable_trim_lists: u64,
    pub grown_bad_read: u64,
    /// 1 when the index log was not found (a count, as in torture's `recovery`).
    pub index_lost: u64,
    /// Segments the mount found dirty (header erased or torn) and erased before reuse.
    pub mount_dirty_segments: u64,
    /// Whether data pages carry ECC codes (`fms format --ecc`).
    pub ecc: bool,
    /// The code: `none`, `SEC-DED` or `BCH-T` (`fms format --ecc-bits T`).
    pub ecc_code: String,
    /// How header-mode entries carry their live state: `byte`, `bit` or `none` (as `fms
    /// format` reports it).
    pub live_flag: String,
    /// Whether segment headers carry the medium's code (as `fms format` reports it;
    /// `false` on media formatted before it, and without ECC).
    pub header_code: bool,
    /// Whether the medium has segment summaries (as `fms format` reports it), and how
    /// many segments' records the mount took from theirs (one page read each instead of
    /// a spare read per slot).
    pub segment_summaries: bool,
    pub summaries_read: u64,
    /// Whether the medium has record correction (as `fms format` reports it;
    /// `false` on media formatted before it, and in header mode).
    pub record_correction: bool,
    /// Whether a mount judges a free segment's first slot by its first page (header
    /// features bit 9; `false` on media formatted before stop 35, and in header mode).
    pub first_page_test: bool,
    /// Reads the mount made again because a header, record, index entry or trim list
    /// failed its checksum, or a page did not read erased (a power cut's traces, or flips).
    pub read_retries: u64,
    /// `MountReport::counts`, for the text report.
    #[serde(skip)]
    pub mount_paths: [u64; 6],
    /// Bits flipped for good that the mount found (empty lists when it found none; every
    /// key is always present, so that reports of different images line up, as CSV rows
    /// must): segments whose header it read corrected (one bit from valid), header-mode
    /// entries it read corrected, spare-mode records it read corrected (one bit from
    /// valid before a later record, on media with record correction), and
    /// spare-mode records one bit from valid that it did not correct (counted in
    /// `torn_records`; the block named reads an older copy).
    pub corrected_headers: Vec<u32>,
    pub corrected_entries: Vec<SlotRecord>,
    pub corrected_records: Vec<SlotRecord>,
    pub flipped_records: Vec<SlotRecord>,
    /// Segments whose header carries an earlier format's number: a format stopped before
    /// it reached them (`MountReport::earlier_format`).
    pub earlier_format_segments: Vec<u32>,
    /// Blocks whose newest copy is in a segment whose header does not decode
    /// (`MountReport::lost_blocks`): reading them fails until they are written or trimmed.
    pub lost_blocks: Vec<SlotRecord>,
    /// The segments held back from reuse and why (`ftl::fms::Hold`): those holding lost
    /// blocks until each is written or trimmed, those holding rescued tombstones until
    /// the next writing command writes them again (`ftl::fms::lost`).
    pub held_segments: Vec<Hold>,
    /// Spare mode: tombstones the mount took from trim lists in segments whose header
    /// does not decode, or whose record is one bit from valid
    /// (`MountReport::rescued_tombstones`): their trims stand, and the next writing
    /// command writes them again.
    pub rescued_tombstones: u64,
}

/// `fms info`'s and `fms format`'s `live_flag`: how header-mode entries carry their live
/// state (`ftl::fms::layout::LiveFlag`).
fn live_flag(lay: &ftl::fms::layout::Layout) -> String {
    lay.live.name(lay.mode).to_string()
}

/// The text report's line for a `live_flag`.
fn live_flag_text(name: &str) -> String {
    match name {
        "byte" => "7 bits of each entry's flags byte, read by majority (a bit flipped for good changes nothing)".into(),
        "bit" => "bit 0 of each entry's flags byte (formatted before the live byte: a bit flipped for good there goes unseen)".into(),
        _ => "none (spare mode: records are resolved by sequence number)".into(),
    }
}

fn info(a: InfoArgs) -> Result<()> {
    super::common::refuse_csv_over(&a.report, &[(&a.image, "image being read")])?;
    let fms = mount(&a.image, &a.mount, Access::Inspect)?;
    if a.segments {
        return segment_table(&fms, &a.report);
    }
    let segs = fms.segments();
    // A segment whose erase block went bad counts as bad even while it still holds
    // blocks that the next write, trim or flush moves out (mount found it so).
    let bad = |i: usize| fms.nand().is_bad(i as u32);
    let count = |st: SegState| {
        (0..segs.len())
            .filter(|&i| segs[i].state == st && (st == SegState::Bad || !bad(i)))
            .count()
    };
    let wear = nand::WearStats::of(
        (0..segs.len())
            .filter(|&i| segs[i].state != SegState::Bad && !bad(i))
            .map(|i| segs[i].erase_count),
    );
    let endurance = fms.nand().spec().endurance;
    let bad_blocks = super::nand::bad_lists(fms.nand());
    let r = FmsInfo {
        image: a.image.display().to_string(),
        block_size: fms.layout().block_size,
        blocks_per_segment: fms.layout().slots,
        logical_blocks: fms.logical_blocks(),
        capacity_bytes: fms.capacity_bytes(),
        mapped_blocks: (0..fms.logical_blocks() as u32)
            .filter(|&l| fms.lookup(l).is_some())
            .count() as u64,
        tombstones: fms.tombstones().0,
        trim_lists: fms.tombstones().1,
        segments: segs.len(),
        free_segments: count(SegState::Free),
        used_segments: count(SegState::Used),
        active_segments: count(SegState::Active),
        dirty_segments: count(SegState::Dirty),
        bad_segments: (0..segs.len())
            .filter(|&i| segs[i].state == SegState::Bad || bad(i))
            .count(),
        index_segments: count(SegState::Index),
        wear_min: wear.min,
        wear_max: wear.max,
        wear_mean: wear.mean,
        wear_stddev: wear.stddev,
        endurance,
        life_used: wear.max as f64 / endurance as f64,
        life_used_mean: wear.mean / endurance as f64,
        good_segments: (0..segs.len()).filter(|&i| !bad(i)).count(),
        factory_bad_segments: bad_blocks.factory.len(),
        grown_bad_segments: bad_blocks.grown.len(),
        reserve_segments: fms.config().reserve_segments(),
        spare_segments: fms.spare_segments(),
        segments_short: fms.segments_short(),
        water_marks: fms.water_marks().into(),
        failure_reserve: fms.failure_reserve().name(),
        failure_reserve_from: fms.config().failure_reserve_from.name(),
        medium_time_s: fms.medium_time_ps() as f64 / 1e12,
        mount_time_s: fms.mount_time_ps() as f64 / 1e12,
        ram_bytes: fms.ram_bytes(),
        torn_records: fms.mount_report().torn_records,
        stale_live_copies: fms.mount_report().stale_live_copies,
        unreadable_trim_lists: fms.mount_report().unreadable_trim_lists,
        grown_bad_read: fms.mount_report().grown_bad_read,
        index_lost: u64::from(fms.mount_report().index_lost),
        mount_dirty_segments: fms.mount_report().dirty_segments,
        ecc: fms.layout().ecc(),
        ecc_code: ftl::fms::layout::ecc_name(fms.layout().ecc_t),
        live_flag: live_flag(fms.layout()),
        header_code: fms.layout().header_code_t().is_some(),
        segment_summaries: fms.layout().summary_page.is_some(),
        summaries_read: fms.mount_report().summaries_read(),
        record_correction: fms.layout().corrects_records(),
        first_page_test: fms.layout().judges_by_first_page(),
        read_retries: fms.stats().read_retries,
        mount_paths: fms.mount_report().counts(),
        corrected_headers: fms.mount_report().corrected_headers.clone(),
        corrected_entries: fms.mount_report().corrected_entries.clone(),
        corrected_records: fms.mount_report().corrected_records.clone(),
        flipped_records: fms.mount_report().flipped_records.clone(),
        earlier_format_segments: fms.mount_report().earlier_format.clone(),
        lost_blocks: fms.mount_report().lost_blocks.clone(),
        held_segments: fms.holds(),
        rescued_tombstones: fms.mount_report().rescued_tombstones,
    };
    if let Some(p) = &a.report.csv {
        output::write_csv(p, std::slice::from_ref(&r))?;
    }
    if a.report.json {
        return output::print_json(&r);
    }
    let mut f = Fields::new();
    f.add("image", r.image.clone())
        .add(
            "blocks",
            format!(
                "{} of {} ({} per segment), {} mapped",
                r.logical_blocks,
                output::bytes(r.block_size as u64),
                r.blocks_per_segment,
                r.mapped_blocks
            ),
        )
        .add("capacity", output::bytes(r.capacity_bytes))
        .add(
            "ecc",
            if r.ecc {
                format!(
                    "{}, {} bytes per 512 in the spare area",
                    r.ecc_code,
                    nand::ecc::code_bytes(fms.layout().ecc_t)
                )
            } else {
                "none".to_string()
            },
        )
        .add("live flag", live_flag_text(&r.live_flag))
        .add(
            "header code",
            if r.header_code {
                "yes (each segment header's page carries the medium's code: its bits are corrected as data's)"
            } else if r.ecc {
                "no (formatted before header codes: one bit of a header corrected, by CRC search)"
            } else {
                "no"
            },
        )
        .add(
            "summaries",
            if r.segment_summaries {
                format!(
                    "yes: segment summaries (mount read {} full segment(s) from their summary page)",
                    r.summaries_read
                )
            } else {
                "no (mount reads each slot's record)".to_string()
            },
        )
        .add(
            "records",
            if r.record_correction {
                "record correction: a spare record one bit from valid before a later one is corrected"
            } else if fms.layout().mode == ftl::fms::layout::RecordMode::Spare {
                "no record correction (formatted before it): a spare record one bit from valid is reported, not corrected"
            } else {
                "header mode: entries one bit from valid are corrected"
            },
        )
        .add(
            "free slots",
            if r.first_page_test {
                "a free segment's first slot is read at its first page at mount"
            } else if fms.layout().mode == ftl::fms::layout::RecordMode::Spare {
                "read whole at mount (formatted before stop 35; a new format reads a free segment's first page only)"
            } else {
                "header mode: read whole at mount"
            },
        )
        .add(
            "tombstones",
            format!("{} in {} trim list(s)", r.tombstones, r.trim_lists),
        )
        .add(
            "segments",
            format!(
                "{} ({} free, {} used, {} active, {} dirty{}, {} bad, {} index)",
                r.segments,
                r.free_segments,
                r.used_segments,
                r.active_segments,
                r.dirty_segments,
                match r.held_segments.len() {
                    0 => String::new(),
                    n => format!(" of which {n} held"),
                },
                r.bad_segments,
                r.index_segments
            ),
        )
        .add(
            "erase counts",
            format!(
                "min {} / mean {:.2} / max {} / stddev {:.2}",
                r.wear_min, r.wear_mean, r.wear_max, r.wear_stddev
            ),
        )
        .add(
            "endurance",
            format!(
                "{} erase cycles: life used {:.1} % (most-erased segment), {:.1} % on average",
                r.endurance,
                r.life_used * 100.0,
                r.life_used_mean * 100.0
            ),
        )
        .add(
            "bad segments",
            if r.segments_short > 0 && !r.held_segments.is_empty() {
                // Held segments count as not good while held (QA stop 27: the line said
                // "worn out" of a medium no segment of which had gone bad).
                format!(
                    "{} factory, {} grown; with {} segment(s) held (below) the capacity \
                     cannot be kept: {} short until they are released (writes may fail \
                     for want of space)",
                    r.factory_bad_segments,
                    r.grown_bad_segments,
                    r.held_segments.len(),
                    segments(r.segments_short)
                )
            } else if r.segments_short > 0 {
                format!(
                    "{} factory, {} grown; the capacity can no longer be kept: {} short \
                     (writes fail once the free space left is used: worn out)",
                    r.factory_bad_segments,
                    r.grown_bad_segments,
                    segments(r.segments_short)
                )
            } else if r.spare_segments == 0 && r.grown_bad_segments > 0 {
                // At the limit: the capacity is kept on paper, but the slack left is
                // spread over the segments, and writes fail once the free space is used
                // (stop 34 review: "0 more may go bad" beside writes failing "worn out").
                format!(
                    "{} factory, {} grown; at the limit: none more may go bad before the \
                     capacity can no longer be kept, and writes fail (worn out) once the free \
                     space left is used ({} in reserve)",
                    r.factory_bad_segments, r.grown_bad_segments, r.reserve_segments
                )
            } else {
                format!(
                    "{} factory, {} grown; {} more may go bad before the capacity can no \
                     longer be kept ({} in reserve)",
                    r.factory_bad_segments,
                    r.grown_bad_segments,
                    r.spare_segments,
                    r.reserve_segments
                )
            },
        )
        .add(
            "cleaner",
            format!(
                "cleans when fewer than {} segments are free, up to {}; failure reserve {}",
                r.water_marks[0],
                r.water_marks[1],
                match r.failure_reserve {
                    "engaged" if r.failure_reserve_from == "start" => {
                        "engaged (from the start: marks raised)"
                    }
                    "engaged" => "engaged (a block went bad in use: marks raised)",
                    "ready" => "ready (raises the marks once a block goes bad in use)",
                    "no-room" => {
                        "without room (the valid data and bad segments leave too few good \
                         segments beside the reserve; deleting data, or a format with \
                         --capacity below the most, leaves more)"
                    }
                    _ => "off",
                }
            ),
        )
        .add(
            "device time",
            format!(
                "{:.3} s recorded on the medium (the device clock goes on from there)",
                r.medium_time_s
            ),
        )
        .add(
            "mount time",
            format!("{:.3} s (device time)", r.mount_time_s),
        )
        .add("table RAM", output::bytes(r.ram_bytes))
        .add("mount found", mount_found(&r))
        .add("mount re-reads", output::count(r.read_retries));
    if let Some(flips) = flips_found(&r) {
        f.add("bit flips for good", flips);
    }
    if r.rescued_tombstones > 0 {
        f.add(
            "rescued trims",
            format!(
                "{} tombstone(s) read from trim lists behind damaged headers or under records one bit from valid: the trims stand; the next writing command writes them again",
                r.rescued_tombstones
            ),
        );
    }
    if !r.lost_blocks.is_empty() {
        f.add("lost blocks", lost_text(&r.lost_blocks));
    }
    if !r.held_segments.is_empty() {
        f.add("held segments", held_text(&r.held_segments));
    }
    if !r.earlier_format_segments.is_empty() {
        f.add(
            "earlier format",
            format!(
                "{} segments still of the format before this one (a format was stopped before it reached them): their data is not this medium's; erased before reuse",
                r.earlier_format_segments.len()
            ),
        );
    }
    f.print()
}

/// One row of `flashkit fms info --segments`.
#[derive(Serialize, Debug)]
pub struct SegmentRow {
    pub segment: u32,
    /// `free`, `active`, `used`, `index`, `dirty`, `held` (dirty, kept from reuse for
    /// lost blocks or rescued trims: `fms info`'s `held_segments`) or `bad`.
    pub state: &'static str,
    /// `factory` or `grown` for a bad erase block, else empty. A segment whose block went
    /// bad in use is `bad` while it still holds blocks the next write moves out.
    pub bad: &'static str,
    pub erase_count: u32,
    /// Slots holding a current block or a live trim list.
    pub valid_blocks: u32,
    /// Slots written or skipped (the first free slot); all of them for a bad segment.
    pub used_slots: u32,
    /// Stream writing into it (an active segment; the DAC region with `--regions`), else
    /// empty.
    pub stream: Option<u8>,
    /// Device time the segment was opened for writing (its header time at mount), s.
    pub created_s: f64,
    /// Device time a block of it was last superseded or trimmed, s.
    pub last_invalidated_s: f64,
    /// Whether the mount read its records from its segment summary (spare mode: a full
    /// segment of a medium with summaries).
    pub summary: bool,
}

/// `fms info --segments`: the segment lookup table as mount rebuilt it.
fn segment_table(fms: &Fms, report: &ReportArgs) -> Result<()> {
    let held = fms.held_segments();
    let summarised: std::collections::HashSet<u32> =
        fms.mount_report().summarised.iter().copied().collect();
    let rows: Vec<SegmentRow> = fms
        .segments()
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let bad = match fms.nand().block_info(i as u32).bad {
                nand::BadState::Good => "",
                nand::BadState::Factory => "factory",
                nand::BadState::Grown => "grown",
            };
            SegmentRow {
                segment: i as u32,
                // As the summary counts it: a block gone bad is a bad segment, even while
                // it still holds blocks the next write moves out.
                state: match s.state {
                    _ if !bad.is_empty() => "bad",
                    SegState::Free => "free",
                    SegState::Active => "active",
                    SegState::Used => "used",
                    SegState::Index => "index",
                    SegState::Bad => "bad",
                    SegState::Dirty if held.contains(&(i as u32)) => "held",
                    SegState::Dirty => "dirty",
                },
                bad,
                erase_count: s.erase_count,
                valid_blocks: s.valid,
                used_slots: s.next,
                stream: (s.state == SegState::Active).then_some(s.stream),
                created_s: s.created_ps as f64 / 1e12,
                last_invalidated_s: s.last_inval_ps as f64 / 1e12,
                summary: summarised.contains(&(i as u32)),
            }
        })
        .collect();
    if let Some(p) = &report.csv {
        output::write_csv(p, &rows)?;
    }
    if report.json {
        return output::print_json(&rows);
    }
    let mut t = output::Table::new(&[
        "segment",
        "state",
        "bad",
        "erase count",
        "valid",
        "used slots",
        "stream",
        "created s",
        "invalidated s",
        "summary",
    ]);
    let or_dash = |s: String| if s.is_empty() { "-".to_string() } else { s };
    for r in &rows {
        t.row(vec![
            r.segment.to_string(),
            r.state.to_string(),
            or_dash(r.bad.to_string()),
            r.erase_count.to_string(),
            r.valid_blocks.to_string(),
            r.used_slots.to_string(),
            or_dash(r.stream.map(|s| s.to_string()).unwrap_or_default()),
            format!("{:.3}", r.created_s),
            format!("{:.3}", r.last_invalidated_s),
            if r.summary { "yes" } else { "-" }.to_string(),
        ]);
    }
    t.print()
}

/// Held segments and why, in words: `1, 4 (lost blocks: until each is written or
/// trimmed); 6 (rescued trims: until the next writing command writes them again)`.
fn held_text(held: &[Hold]) -> String {
    let (lost, trims): (Vec<&Hold>, Vec<&Hold>) =
        held.iter().partition(|h| !h.lost_blocks.is_empty());
    let segs = |v: &[&Hold]| v.iter().map(|h| h.segment).collect::<Vec<u32>>();
    let mut why = Vec::new();
    if !lost.is_empty() {
        why.push(format!(
            "{} (lost blocks: until each is written or trimmed)",
            output::block_list(&segs(&lost), 10)
        ));
    }
    if !trims.is_empty() {
        why.push(format!(
            "{} (rescued trims: until the next writing command writes them again)",
            output::block_list(&segs(&trims), 10)
        ));
    }
    why.join("; ")
}

/// The lost blocks of `before` (`Fms::lost_blocks` when a writing command began) that are
/// lost no longer: the command wrote or trimmed them. Said on stderr, so that a write
/// over a lost block never ends its name unseen (QA stop 26), whatever the report's form.
pub(crate) fn lost_resolved(image: &Path, before: &[SlotRecord], fms: &Fms) -> Vec<u32> {
    let now: std::collections::BTreeSet<u32> = fms.lost_blocks().iter().map(|s| s.block).collect();
    let done: Vec<u32> = before
        .iter()
        .map(|s| s.block)
        .filter(|b| !now.contains(b))
        .collect();
    if !done.is_empty() {
        let left = match now.len() {
            0 => "none is left".to_string(),
            n => format!("{n} still lost"),
        };
        eprintln!(
            "flashkit: note: {}: {} lost block(s) written or trimmed, lost no longer: {} ({left})",
            image.display(),
            done.len(),
            output::block_list(&done, 10)
        );
    }
    done
}

/// The blocks a mount found lost (`MountReport::lost_blocks`), in words: `3: block 0
/// (segment 1 slot 0), ...; their newest copy is in a segment whose header does not
/// decode: reading them fails until they are written or trimmed (...)`.
fn lost_text(lost: &[SlotRecord]) -> String {
    let shown = slot_records(&lost[..lost.len().min(5)]);
    let more = match lost.len() {
        n if n > 5 => format!(", … (+{} more; `fms info --json` lists all)", n - 5),
        _ => String::new(),
    };
    let mut segs: Vec<u32> = lost.iter().map(|s| s.segment).collect();
    segs.sort_unstable();
    segs.dedup();
    let segs: Vec<String> = segs.iter().map(u32::to_string).collect();
    format!(
        "{}: {shown}{more}; their newest copy is in segment(s) {} whose header does not decode (damaged): reading them fails until they are written or trimmed (`fms read` refuses a range over them, `blockdev mount` answers EIO; `fms read --salvage` reads their lost copies)",
        lost.len(),
        segs.join(", ")
    )
}

/// `block 7 (segment 4 slot 2), ...`: where a mount found each record it names.
fn slot_records(v: &[SlotRecord]) -> String {
    v.iter()
        .map(|s| {
            if s.block == ftl::fms::layout::TRIM_LIST_LBN {
                format!("a trim list (segment {} slot {})", s.segment, s.slot)
            } else {
                format!("block {} (segment {} slot {})", s.block, s.segment, s.slot)
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// What the mount found of bits flipped for good, or `None`: `header of segment 3
/// corrected; record of block 7 (segment 4 slot 2) one bit from valid, not corrected:
/// the block reads an older copy`.
fn flips_found(r: &FmsInfo) -> Option<String> {
    let slots = slot_records;
    let plural = |n: usize, one: &str, many: &str| if n == 1 { one } else { many }.to_string();
    let mut parts = Vec::new();
    let h = &r.corrected_headers;
    if !h.is_empty() {
        let segs: Vec<String> = h.iter().map(u32::to_string).collect();
        parts.push(format!(
            "{} {} corrected",
            plural(h.len(), "header of segment", "headers of segments"),
            segs.join(", ")
        ));
    }
    let e = &r.corrected_entries;
    if !e.is_empty() {
        parts.push(format!(
            "{} of {} corrected",
            plural(e.len(), "entry", "entries"),
            slots(e)
        ));
    }
    let c = &r.corrected_records;
    if !c.is_empty() {
        parts.push(format!(
            "{} of {} corrected",
            plural(c.len(), "record", "records"),
            slots(c)
        ));
    }
    let fl = &r.flipped_records;
    if !fl.is_empty() {
        let lists = fl
            .iter()
            .filter(|s| s.block == ftl::fms::layout::TRIM_LIST_LBN)
            .count();
        let what = match (fl.len() - lists, lists) {
            (0, _) => "a trim list's tombstones are taken all the same: its trims stand",
            (1, 0) => "the block reads an older copy or zeros",
            (_, 0) => "the blocks read an older copy or zeros",
            _ => "the blocks named read an older copy or zeros; a trim list's tombstones are taken all the same",
        };
        parts.push(format!(
            "{} of {} one bit from valid, not corrected: {what}",
            plural(fl.len(), "record", "records"),
            slots(fl),
        ));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// The recovery paths of `counts` (in the order of [`ftl::fms::MountReport::PATHS`]) as
/// `torn records 2, dirty segments 1`: every path when `all` (torture's "mounts that
/// found"), else those taken, or `clean` when none was (`fms info`'s "mount found").
pub(crate) fn recovery_paths(counts: &[u64; 6], all: bool) -> String {
    let parts: Vec<String> = ftl::fms::MountReport::PATHS
        .iter()
        .zip(counts)
        .filter(|(_, &n)| all || n > 0)
        .map(|(what, &n)| format!("{what} {}", output::count(n)))
        .collect();
    if parts.is_empty() {
        "clean".to_string()
    } else {
        parts.join(", ")
    }
}

/// `clean`, or every recovery path the mount took and the re-reads it made (a clean
/// mount makes none): `torn records 2, dirty segments 1, re-reads 3k`.
fn mount_found(r: &FmsInfo) -> String {
    let found = recovery_paths(&r.mount_paths, false);
    match (r.read_retries, found.as_str()) {
        (0, _) => found,
        (n, "clean") => format!("re-reads {}", output::count(n)),
        (n, _) => format!("{found}, re-reads {}", output::count(n)),
    }
}

fn sector_offset(text: &str) -> Result<u64> {
    let off = parse_size(text).map_err(|e| anyhow!("--offset: {e}"))?;
    if off % SECTOR as u64 != 0 {
        bail!("--offset: {off} is not a multiple of {SECTOR} bytes");
    }
    Ok(off / SECTOR as u64)
}

/// How much `fms write` has to write.
enum Size {
    /// A regular file's length.
    Known(u64),
    /// Other input, read ahead (at most `bound` + 1 bytes): the copy, its length, `bound`.
    Buffered(Box<dyn Read>, u64, u64),
}

/// Piped input past this many bytes is read ahead into an unnamed temporary file instead
/// of memory (an image can hold more than this machine's RAM).
const SPILL_BYTES: u64 = 64 << 20;

/// Read `input` ahead, at most `limit` bytes: in memory up to [`SPILL_BYTES`], the rest in
/// an unnamed temporary file. Returns the copy (from its start) and its length.
fn read_ahead(input: &mut dyn Read, limit: u64, name: &str) -> Result<(Box<dyn Read>, u64)> {
    let mut head = Vec::new();
    input
        .take(limit.min(SPILL_BYTES))
        .read_to_end(&mut head)
        .with_context(|| name.to_string())?;
    let n = head.len() as u64;
    if n < SPILL_BYTES || n == limit {
        return Ok((Box::new(std::io::Cursor::new(head)), n));
    }
    use std::io::Seek;
    let cannot = || format!("{name}: a temporary file to hold the input");
    let mut f = tempfile::tempfile().with_context(cannot)?;
    f.write_all(&head).with_context(cannot)?;
    drop(head);
    let rest = std::io::copy(&mut input.take(limit - n), &mut f).with_context(cannot)?;
    f.rewind().with_context(cannot)?;
    Ok((Box::new(std::io::BufReader::new(f)), n + rest))
}

fn write(a: WriteArgs) -> Result<()> {
    const CHUNK: usize = 1 << 20;
    let mut inputs = vec![(a.image.as_path(), "image being written")];
    if let Some(p) = a.input.as_deref().filter(|p| *p != Path::new("-")) {
        inputs.push((p, "input"));
    }
    super::common::refuse_csv_over(&a.report, &inputs)?;
    let lba = sector_offset(&a.offset)?;
    let start = lba * SECTOR as u64;
    // A regular file's length is known before anything is written; it is then streamed.
    let (mut input, name, known): (Box<dyn Read>, String, Option<u64>) = match a.input.as_deref() {
        None => (Box::new(std::io::stdin().lock()), "stdin".into(), None),
        Some(p) if p == Path::new("-") => (Box::new(std::io::stdin().lock()), "stdin".into(), None),
        Some(p) => {
            if sim::trace::same_file(p, &a.image) {
                bail!("--input: {} is the image being written", p.display());
            }
            let f = std::fs::File::open(p).with_context(|| format!("--input: {}", p.display()))?;
            let meta = f.metadata().with_context(|| format!("{}", p.display()))?;
            // A size of 0 is not believed: files of /proc and /sys say 0 and hold data
            // (QA stop 27: `--input /proc/cpuinfo` wrote 0 bytes, exit 0); such input
            // is buffered as a pipe's is.
            let known = (meta.is_file() && meta.len() > 0).then_some(meta.len());
            (Box::new(f), p.display().to_string(), known)
        }
    };
    // Input other than a regular file (stdin, a pipe, a device) is buffered, so that input
    // that does not fit is refused before anything is written. It is read before the image
    // is locked (`fms read IMG | fms write IMG --offset …` works), but never further than
    // the image file could hold, plus one byte to tell.
    let size = match known {
        Some(n) => Size::Known(n),
        None => {
            let bound = std::fs::metadata(&a.image)
                .map_or(0, |m| m.len())
                .saturating_sub(start);
            let (copy, n) = read_ahead(&mut input, bound.saturating_add(1), &name)?;
            Size::Buffered(copy, n, bound)
        }
    };
    let mut fms = mount(&a.image, &a.mount, Access::Write)?;
    let spent = Spent::since_mount(&fms);
    let lost_before = fms.lost_blocks();
    let cap = fms.capacity_bytes();
    let room = cap.saturating_sub(start);
    let too_big = |n: String| {
        anyhow!(
            "{}: {n} bytes at offset {start} do not fit in the {cap}-byte device",
            a.image.display()
        )
    };
    let len = match size {
        Size::Known(n) => {
            if n > room || start > cap {
                return Err(too_big(n.to_string()));
            }
            n
        }
        Size::Buffered(copy, n, bound) => {
            if n > room || start > cap {
                // Past `bound` the input was not read to its end.
                let n = if n > bound {
                    format!("more than {room}")
                } else {
                    n.to_string()
                };
                return Err(too_big(n));
            }
            input = copy;
            n
        }
    };
    let mut input = input.take(len);
    let mut buf = vec![0u8; CHUNK];
    let (mut at, mut done) = (lba, 0u64);
    let per_block = (fms.layout().block_size as usize / SECTOR) as u64;
    while done < len {
        let want = (len - done).min(CHUNK as u64) as usize;
        let mut got = 0;
        while got < want {
            match input.read(&mut buf[got..want]) {
                Ok(0) => break,
                Ok(k) => got += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(anyhow!(e).context(name.clone())),
            }
        }
        if got == 0 {
            break;
        }
        let secs = got.div_ceil(SECTOR);
        let tail = got % SECTOR;
        if tail != 0 {
            // A partial last sector keeps the rest of that sector's current content.
            let mut last = vec![0u8; SECTOR];
            fms.read(at + secs as u64 - 1, 1, Some(&mut last))
                .with_context(|| format!("{}: read", a.image.display()))?;
            buf[got..secs * SECTOR].copy_from_slice(&last[tail..]);
        }
        // One FMS block at a time, so that a write that fails can say how much of the
        // input reached the medium: everything before the block it failed in.
        let mut k = 0usize;
        while k < secs {
            let lba = at + k as u64;
            let n = (secs - k).min((per_block - lba % per_block) as usize);
            if let Err(e) = fms.write(lba, n as u32, Some(&buf[k * SECTOR..(k + n) * SECTOR])) {
                lost_resolved(&a.image, &lost_before, &fms);
                return Err(partial_write(
                    &a.image,
                    e,
                    start,
                    done + (k * SECTOR) as u64,
                    &fms,
                ));
            }
            k += n;
        }
        at += secs as u64;
        done += got as u64;
        if got < want {
            break;
        }
    }
    let flushed = fms.flush();
    let lost_blocks_resolved = lost_resolved(&a.image, &lost_before, &fms);
    flushed.with_context(|| format!("{}: write", a.image.display()))?;
    let r = WriteReport {
        image: a.image.display().to_string(),
        offset: start,
        bytes_written: done,
        lost_blocks_resolved,
        cost: spent.cost(&fms),
    };
    if !report(&a.report, &r)? {
        eprintln!("wrote {done} bytes at offset {start}");
    }
    Ok(())
}

/// The one-line error of an `fms write` that failed after `written` bytes of its input
/// (from byte `start` of the device) reached the medium: they stay written (each block
/// write is durable when it returns), the block the write failed in may hold its old or
/// its new content, and nothing after it was written.
fn partial_write(
    image: &Path,
    e: nand::blockdev::DevError,
    start: u64,
    written: u64,
    fms: &Fms,
) -> anyhow::Error {
    let hint = held_hint(fms, &e);
    if written == 0 {
        return anyhow!("{}: write: {e}; nothing was written{hint}", image.display());
    }
    anyhow!(
        "{}: write: {e}; the first {written} bytes (offsets {start}..{}) were written, the \
         block at offset {} may hold its old or its new data, nothing after it was written{hint}",
        image.display(),
        start + written,
        start + written
    )
}

/// What to add to an error for want of space while segments are held for lost blocks
/// (`ftl::fms::lost`): they may be why, and what frees them.
fn held_hint(fms: &Fms, e: &nand::blockdev::DevError) -> String {
    use nand::blockdev::DevError;
    if !matches!(e, DevError::NoSpace | DevError::WornOut { .. }) {
        return String::new();
    }
    held_segments_hint(&fms.held_segments())
}

/// [`held_hint`]'s words for the segments `held` (empty when there are none), also for
/// `blockdev mount`'s closing error.
pub(crate) fn held_segments_hint(held: &[u32]) -> String {
    if held.is_empty() {
        return String::new();
    }
    format!(
        "; {} segment(s) ({}) hold lost blocks and are kept from reuse: save them with `fms read --salvage`, then trim them to free the segments (if that fails for want of space too, format the image again and write the saved data back)",
        held.len(),
        output::block_list_in(held, 10, "`fms info --json`")
    )
}

fn read(a: ReadArgs) -> Result<()> {
    let to_stdout = a.output.as_deref().is_none_or(|p| p == Path::new("-"));
    if a.report.json && to_stdout {
        bail!("--json: the data goes to stdout, where the report would mix with it; give --output FILE");
    }
    let mut inputs = vec![(a.image.as_path(), "image being read")];
    if let Some(p) = a.output.as_deref().filter(|_| !to_stdout) {
        inputs.push((p, "output"));
    }
    super::common::refuse_csv_over(&a.report, &inputs)?;
    let lba = sector_offset(&a.offset)?;
    let len = parse_size(&a.length).map_err(|e| anyhow!("--length: {e}"))?;
    a.mount.refuse_writer_options_where_only_read()?;
    let mut fms = mount(&a.image, &a.mount, Access::Inspect)?;
    let spent = Spent::since_mount(&fms);
    let sectors = len.div_ceil(SECTOR as u64);
    if lba + sectors > fms.sectors() {
        bail!(
            "{}: --offset/--length: {len} bytes at offset {} exceed the FMS's {} bytes",
            a.image.display(),
            lba * SECTOR as u64,
            fms.capacity_bytes()
        );
    }
    // A range over a block the mount found lost would read zeros there:
    // refused, not returned as if it were the data (the mount's warning names them all).
    let spb = fms.layout().block_size as u64 / SECTOR as u64;
    let blocks = lba / spb..(lba + sectors).div_ceil(spb);
    let hit: Vec<u32> = fms
        .lost_blocks()
        .iter()
        .map(|s| s.block)
        .filter(|&b| blocks.contains(&(b as u64)))
        .collect();
    if !hit.is_empty() && !a.allow_lost && !a.salvage {
        bail!(
            "{}: the range covers {} lost block(s) ({}), which would read zeros; read around them, give --salvage to read their lost copies, or --allow-lost",
            a.image.display(),
            hit.len(),
            output::block_list_in(&hit, 10, "`fms info --json`")
        );
    }
    let out_name = match a.output.as_deref() {
        Some(p) if p != Path::new("-") => p.display().to_string(),
        _ => "stdout".to_string(),
    };
    // A file output appears whole or not at all (a failed read leaves no partial file).
    let mut staged = None;
    let mut out: Box<dyn Write> = match a.output.as_deref() {
        None => Box::new(std::io::stdout().lock()),
        Some(p) if p == Path::new("-") => Box::new(std::io::stdout().lock()),
        Some(p) => {
            super::common::refuse_same_file(p, &a.image, "image being read")?;
            let (f, s) = Staged::create(p).with_context(|| format!("{}", p.display()))?;
            staged = s;
            Box::new(std::io::BufWriter::new(f))
        }
    };
    let mut left = len;
    let mut at = lba;
    let mut buf = vec![0u8; 1 << 20];
    // `--salvage`: lost blocks whose lost copy no read could correct (read as mapped).
    let mut unsalvaged = Vec::new();
    while left > 0 {
        let n = left.min(buf.len() as u64);
        let secs = n.div_ceil(SECTOR as u64);
        let b = &mut buf[..(secs as usize) * SECTOR];
        // (Lost blocks read zeros here: the range was refused above unless asked for.)
        fms.read_mapped(at, secs as u32, Some(b))
            .with_context(|| format!("{}: read", a.image.display()))?;
        if a.salvage {
            salvage_into(&mut fms, &hit, at, b, &a.image, &mut unsalvaged)?;
        }
        out.write_all(&b[..n as usize])
            .with_context(|| out_name.clone())?;
        left -= n;
        at += secs;
    }
    out.flush().with_context(|| out_name.clone())?;
    drop(out);
    if let Some(s) = staged {
        s.commit().with_context(|| out_name.clone())?;
    }
    let r = ReadReport {
        image: a.image.display().to_string(),
        offset: lba * SECTOR as u64,
        bytes_read: len,
        output: out_name,
        lost_read_as: (!hit.is_empty()).then_some(if a.salvage { "salvaged" } else { "mapped" }),
        lost_blocks: hit,
        unsalvaged_blocks: unsalvaged,
        cost: spent.cost(&fms),
    };
    let read_lost: Vec<u32> = r
        .lost_blocks
        .iter()
        .copied()
        .filter(|b| !r.unsalvaged_blocks.contains(b))
        .collect();
    if !read_lost.is_empty() {
        eprintln!(
            "flashkit: note: {}: {} lost block(s) read {}: {}",
            a.image.display(),
            read_lost.len(),
            if a.salvage {
                "from their lost copies"
            } else {
                "as zeros (--allow-lost)"
            },
            output::block_list(&read_lost, 10)
        );
    }
    report(&a.report, &r)?;
    // Everything else was written out; the blocks that could not be salvaged make the
    // exit status non-zero, as a copy that skipped unreadable parts would.
    if !r.unsalvaged_blocks.is_empty() {
        bail!(
            "{}: {} lost block(s) not salvaged, written to {} as zeros (their lost copies hold data no read could correct): {}",
            a.image.display(),
            r.unsalvaged_blocks.len(),
            r.output,
            output::block_list(&r.unsalvaged_blocks, 10)
        );
    }
    Ok(())
}

/// `fms read --salvage`: overwrite the bytes of each lost block of `lost` that `b` (read
/// from sector `at`) covers with its lost copy's. A copy no read can correct leaves the
/// block as read (what the FMS maps), named in `unsalvaged`: one such block does not stop
/// the rest being saved.
fn salvage_into(
    fms: &mut Fms,
    lost: &[u32],
    at: u64,
    b: &mut [u8],
    image: &Path,
    unsalvaged: &mut Vec<u32>,
) -> Result<()> {
    let bs = fms.layout().block_size as u64;
    let start = at * SECTOR as u64;
    let end = start + b.len() as u64;
    let mut block = vec![0u8; bs as usize];
    for &lbn in lost {
        let (from, to) = (lbn as u64 * bs, (lbn as u64 + 1) * bs);
        if to <= start || from >= end {
            continue;
        }
        match fms.read_lost(lbn, &mut block) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(ftl::DevError::Uncorrectable { .. }) => {
                if !unsalvaged.contains(&lbn) {
                    unsalvaged.push(lbn);
                }
                continue;
            }
            Err(e) => {
                return Err(anyhow!(e))
                    .with_context(|| format!("{}: salvage: block {lbn}", image.display()))
            }
        }
        let (lo, hi) = (from.max(start), to.min(end));
        b[(lo - start) as usize..(hi - start) as usize]
            .copy_from_slice(&block[(lo - from) as usize..(hi - from) as usize]);
    }
    Ok(())
}

/// `flashkit fms check --json`.
#[derive(Serialize, Debug)]
pub struct CheckReport {
    pub image: String,
    /// Mapped blocks read.
    pub blocks_checked: u64,
    /// Blocks read without a flipped bit or a re-read.
    pub blocks_clean: u64,
    /// Blocks whose read corrected bits (ECC).
    pub blocks_corrected: u64,
    /// Bits the codes corrected in those reads.
    pub bits_corrected: u64,
    /// Blocks read only after a re-read (a chunk the code could not correct at first).
    pub blocks_reread: u64,
    /// Blocks no read could correct (`uncorrectable`), by logical block number.
    pub unreadable_blocks: Vec<u32>,
    /// Blocks whose newest copy the mount found in a segment whose header does not decode
    /// (`MountReport::lost_blocks`), by logical block number: they read zeros (not
    /// mapped) until written or trimmed.
    pub lost_blocks: Vec<u32>,
    /// The segments held back from reuse and why, after the check (`fms info`'s
    /// `held_segments`; a `--repair` writes rescued trims again, which releases theirs).
    pub held_segments: Vec<Hold>,
    /// Spare mode: tombstones the mount rescued from trim lists behind damaged headers or
    /// under records one bit from valid (`fms info`'s): their trims stand.
    pub rescued_tombstones: u64,
    /// Spare-mode records one bit from valid (`fms info`'s `flipped_records`): each may
    /// be a write a power cut tore or a bit flipped for good, so the check passes, and
    /// says so.
    pub flipped_records: Vec<SlotRecord>,
    /// Whether `--repair` was given (the image was written).
    pub repair: bool,
    /// Blocks moved by scrubbing (with `--repair`; 0 without it).
    pub scrubbed: u64,
    #[serde(flatten)]
    pub cost: IoCost,
}

fn check(a: CheckArgs) -> Result<()> {
    super::common::refuse_csv_over(&a.report, &[(&a.image, "image being checked")])?;
    let access = if a.repair {
        Access::Write
    } else {
        a.mount.refuse_writer_options_where_only_read()?;
        Access::Inspect
    };
    let mut fms = mount(&a.image, &a.mount, access)?;
    let spent = Spent::since_mount(&fms);
    let mut buf = vec![0u8; fms.layout().block_size as usize];
    let mut r = CheckReport {
        image: a.image.display().to_string(),
        blocks_checked: 0,
        blocks_clean: 0,
        blocks_corrected: 0,
        bits_corrected: 0,
        blocks_reread: 0,
        unreadable_blocks: Vec::new(),
        lost_blocks: fms
            .mount_report()
            .lost_blocks
            .iter()
            .map(|s| s.block)
            .collect(),
        held_segments: Vec::new(),
        rescued_tombstones: fms.mount_report().rescued_tombstones,
        flipped_records: fms.mount_report().flipped_records.clone(),
        repair: a.repair,
        scrubbed: 0,
        cost: spent.cost(&fms),
    };
    for lbn in 0..fms.logical_blocks() as u32 {
        if fms.lookup(lbn).is_none() {
            continue;
        }
        let before = fms.stats().clone();
        r.blocks_checked += 1;
        match fms.read_block(lbn, Some(&mut buf)) {
            Ok(()) => {}
            Err(ftl::DevError::Uncorrectable { .. }) => {
                r.unreadable_blocks.push(lbn);
                continue;
            }
            Err(e) => {
                return Err(anyhow!(e))
                    .with_context(|| format!("{}: check: block {lbn}", a.image.display()))
            }
        }
        let after = fms.stats();
        let bits = after.ecc_corrected_bits - before.ecc_corrected_bits;
        let reread = after.read_retries > before.read_retries;
        r.bits_corrected += bits;
        r.blocks_corrected += u64::from(bits > 0);
        r.blocks_reread += u64::from(reread);
        r.blocks_clean += u64::from(bits == 0 && !reread);
    }
    if a.repair {
        fms.flush()
            .with_context(|| format!("{}: check: repair", a.image.display()))?;
        r.scrubbed = fms.stats().scrubbed - spent.stats.scrubbed;
    }
    r.held_segments = fms.holds();
    r.cost = spent.cost(&fms);
    if let Some(p) = &a.report.csv {
        output::write_csv(p, std::slice::from_ref(&r))?;
    }
    if a.report.json {
        output::print_json(&r)?;
    } else {
        let mut f = Fields::new();
        f.add("image", r.image.clone())
            .add(
                "blocks",
                format!(
                    "{} checked: {} clean, {} corrected ({} bits), {} re-read, {} unreadable; {} lost",
                    r.blocks_checked,
                    r.blocks_clean,
                    r.blocks_corrected,
                    r.bits_corrected,
                    r.blocks_reread,
                    r.unreadable_blocks.len(),
                    r.lost_blocks.len()
                ),
            )
            .add(
                "repair",
                if a.repair {
                    format!("{} block(s) scrubbed", r.scrubbed)
                } else {
                    "none (--repair moves blocks near the code's limit)".to_string()
                },
            )
            .add(
                "device time",
                format!(
                    "{:.3} s (mount {:.3} s)",
                    r.cost.device_time_s, r.cost.mount_time_s
                ),
            );
        // What the mount found that does not fail the check, named (QA stop 26: `fms
        // check` said nothing of them).
        if r.rescued_tombstones > 0 {
            f.add(
                "rescued trims",
                format!(
                    "{} tombstone(s) read from trim lists behind damaged headers or under records one bit from valid: the trims stand{}",
                    r.rescued_tombstones,
                    if a.repair { "; written again" } else { "; the next writing command (or --repair) writes them again" }
                ),
            );
        }
        if !r.flipped_records.is_empty() {
            f.add(
                "flipped records",
                format!(
                    "{} spare record(s) one bit from valid ({}): a write a power cut tore, or a bit flipped for good (the block named reads its older copy)",
                    r.flipped_records.len(),
                    slot_records(&r.flipped_records[..r.flipped_records.len().min(5)])
                        + if r.flipped_records.len() > 5 { ", …" } else { "" }
                ),
            );
        }
        if !r.held_segments.is_empty() {
            f.add("held segments", held_text(&r.held_segments));
        }
        f.print()?;
    }
    let mut bad = Vec::new();
    if !r.unreadable_blocks.is_empty() {
        bad.push(format!(
            "{} block(s) unreadable (uncorrectable data): {}",
            r.unreadable_blocks.len(),
            output::block_list(&r.unreadable_blocks, 10)
        ));
    }
    if !r.lost_blocks.is_empty() {
        bad.push(format!(
            "{} block(s) lost (their newest copy is in a segment whose header does not decode): {}",
            r.lost_blocks.len(),
            output::block_list(&r.lost_blocks, 10)
        ));
    }
    if !bad.is_empty() {
        bail!("{}: {}", a.image.display(), bad.join("; "));
    }
    Ok(())
}

fn trim(a: TrimArgs) -> Result<()> {
    let lba = sector_offset(&a.offset)?;
    let len = parse_size(&a.length).map_err(|e| anyhow!("--length: {e}"))?;
    if len % SECTOR as u64 != 0 {
        bail!("--length: {len} is not a multiple of {SECTOR} bytes");
    }
    super::common::refuse_csv_over(&a.report, &[(&a.image, "image being trimmed")])?;
    let mut fms = mount(&a.image, &a.mount, Access::Write)?;
    let spent = Spent::since_mount(&fms);
    let sectors = len / SECTOR as u64;
    if lba + sectors > fms.sectors() {
        bail!(
            "{}: --offset/--length: {len} bytes at offset {} exceed the FMS's {} bytes",
            a.image.display(),
            lba * SECTOR as u64,
            fms.capacity_bytes()
        );
    }
    // The logical blocks the range touches, and how many of them are mapped.
    let per_block = (fms.layout().block_size as usize / SECTOR) as u64;
    let touched = (lba / per_block) as u32..(lba + sectors).div_ceil(per_block) as u32;
    let mapped = |f: &Fms| touched.clone().filter(|&l| f.lookup(l).is_some()).count() as u64;
    let mapped_before = mapped(&fms);
    let lost_before = fms.lost_blocks();
    let mut at = lba;
    let end = lba + sectors;
    while at < end {
        let n = (end - at).min(u32::MAX as u64 / 2) as u32;
        if let Err(e) = fms.trim(at, n) {
            lost_resolved(&a.image, &lost_before, &fms);
            let hint = held_hint(&fms, &e);
            bail!("{}: trim: {e}{hint}", a.image.display());
        }
        at += n as u64;
    }
    let flushed = fms.flush();
    let lost_blocks_resolved = lost_resolved(&a.image, &lost_before, &fms);
    flushed.with_context(|| format!("{}: trim", a.image.display()))?;
    let r = TrimReport {
        image: a.image.display().to_string(),
        offset: lba * SECTOR as u64,
        bytes_trimmed: len,
        blocks_trimmed: mapped_before.saturating_sub(mapped(&fms)),
        lost_blocks_resolved,
        cost: spent.cost(&fms),
    };
    if !report(&a.report, &r)? {
        eprintln!("trimmed {len} bytes at offset {}", r.offset);
    }
    Ok(())
}
