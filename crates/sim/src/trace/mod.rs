//! Block traces: streaming readers and writers for the standard trace formats, the mapping
//! of a trace onto the simulated flash space, trace statistics and trace generators.
//!
//! Formats (`--trace-format`, or detected from the first lines, see [`detect_format`]):
//! * `msr` — MSR Cambridge CSV `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`
//!   (100 ns Windows ticks, `Read`/`Write`, bytes);
//! * `spc` — SPC / UMass `ASU,LBA,Size,Opcode,Timestamp[,...]` (512-byte blocks, bytes,
//!   `r`/`w`, seconds);
//! * `blkparse` — blkparse's default text output (`maj,min cpu seq sec.nsec pid action RWBS
//!   sector + nsectors [proc]`), one action (D by default), discards become trims;
//! * `disksim` — DiskSim / MQSim / SSDSim ASCII `time devno blkno bcount flags` (flags bit 0
//!   = read; time in ms unless `--trace-time-unit` says otherwise);
//! * `fio` — fio iolog version 2 and 3.
//!
//! Readers stream (constant memory), read plain or gzip files (detected by the magic bytes),
//! parse byte slices without allocating per line, and report malformed input as
//! `FILE:LINE: what is wrong` ([`TraceError`]), or count it with `skip_bad_lines`.
//! `docs/traces.md` is the user documentation.

mod footprint;
pub mod generate;
mod map;
mod parse;
mod read;
mod record;
pub mod stats;
mod write;

use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::PathBuf;

use serde::Serialize;

use crate::driver::Op;

pub use map::{requests, TraceRequests, TraceRunInfo};
pub use parse::{escape_controls, parse_size};
pub use read::{detect_format, open_input, TraceReader};
pub use record::Recorder;
pub use write::{
    convert, is_stdout_path, refuse_same_file, same_file, Conversion, TraceWriter, WriteSummary,
    BYTE_OFFSET_MAX_END_SECTOR,
};

/// A trace file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Msr,
    Spc,
    Blkparse,
    Disksim,
    Fio,
}

impl Format {
    pub const ALL: [Format; 5] = [
        Format::Msr,
        Format::Spc,
        Format::Blkparse,
        Format::Disksim,
        Format::Fio,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Format::Msr => "msr",
            Format::Spc => "spc",
            Format::Blkparse => "blkparse",
            Format::Disksim => "disksim",
            Format::Fio => "fio",
        }
    }

    pub fn parse(s: &str) -> Result<Format, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "msr" => Ok(Format::Msr),
            "spc" | "umass" => Ok(Format::Spc),
            "blkparse" | "blktrace" => Ok(Format::Blkparse),
            "disksim" | "mqsim" | "ssdsim" | "ascii" => Ok(Format::Disksim),
            "fio" | "iolog" => Ok(Format::Fio),
            _ => Err(format!(
                "unknown trace format '{s}' (msr, spc, blkparse, disksim, fio)"
            )),
        }
    }

    /// Whether the format can express trims (the others drop them on writing).
    pub fn can_trim(self) -> bool {
        matches!(self, Format::Blkparse | Format::Fio)
    }

    /// The finest time the format writes, nanoseconds: MSR's 100 ns ticks, fio's
    /// microseconds, 1 ns for the others. Finer times are rounded down on writing and
    /// counted (`WriteSummary::rounded_times`).
    pub fn time_resolution_ns(self) -> i64 {
        match self {
            Format::Msr => 100,
            Format::Fio => 1_000,
            Format::Spc | Format::Blkparse | Format::Disksim => 1,
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Format, String> {
        Format::parse(s)
    }
}

/// The unit of a trace's time stamps where the format leaves it open.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TimeUnit {
    Ns,
    Us,
    Ms,
    S,
}

impl TimeUnit {
    pub fn parse(s: &str) -> Result<TimeUnit, String> {
        match s.trim() {
            "ns" => Ok(TimeUnit::Ns),
            "us" | "µs" => Ok(TimeUnit::Us),
            "ms" => Ok(TimeUnit::Ms),
            "s" => Ok(TimeUnit::S),
            _ => Err(format!("unknown time unit '{s}' (ns, us, ms, s)")),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            TimeUnit::Ns => "ns",
            TimeUnit::Us => "us",
            TimeUnit::Ms => "ms",
            TimeUnit::S => "s",
        }
    }
    /// Nanoseconds per unit.
    pub fn ns(self) -> i64 {
        match self {
            TimeUnit::Ns => 1,
            TimeUnit::Us => 1_000,
            TimeUnit::Ms => 1_000_000,
            TimeUnit::S => 1_000_000_000,
        }
    }
}

/// How trace addresses are mapped onto the simulated logical space.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TraceMap {
    /// Sector number modulo the space (requests crossing the end wrap to the start).
    #[default]
    Modulo,
    /// The distinct touched blocks renumbered densely in first-touch order.
    Compact,
}

impl TraceMap {
    pub fn parse(s: &str) -> Result<TraceMap, String> {
        match s.trim() {
            "modulo" | "mod" => Ok(TraceMap::Modulo),
            "compact" => Ok(TraceMap::Compact),
            _ => Err(format!("unknown trace mapping '{s}' (modulo, compact)")),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            TraceMap::Modulo => "modulo",
            TraceMap::Compact => "compact",
        }
    }
}

/// How to read a trace.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TraceOptions {
    /// The format; `None` detects it from the first lines.
    pub format: Option<Format>,
    /// MSR DiskNumber / DiskSim devno to keep (all when `None`).
    pub disk: Option<u64>,
    /// SPC ASU to keep (all when `None`).
    pub asu: Option<u64>,
    /// The blkparse action whose events are the requests (`D`, the default, = issued to
    /// the driver); one of [`BLKPARSE_ACTIONS`]. Another action than `D` is refused for
    /// traces of the other formats.
    pub blkparse_action: String,
    /// Unit of DiskSim time stamps (default ms) and fio v3 time stamps (default µs).
    pub time_unit: Option<TimeUnit>,
    /// Stop after this many records.
    pub limit: Option<u64>,
    /// Count malformed lines instead of stopping at the first.
    pub skip_bad_lines: bool,
}

impl Default for TraceOptions {
    fn default() -> Self {
        TraceOptions {
            format: None,
            disk: None,
            asu: None,
            blkparse_action: "D".into(),
            time_unit: None,
            limit: None,
            skip_bad_lines: false,
        }
    }
}

/// The actions blkparse prints in its action column (blktrace's `A` remap, `B` bounce, `C`
/// complete, `D` issue, `F` front merge, `G` get request, `I` insert, `M` back merge, `P`
/// plug, `Q` queue, `R` requeue, `S` sleep, `U` unplug, `UT` unplug by the timer, `X`
/// split), plus `T`, blkparse's manual's name for `UT`.
pub const BLKPARSE_ACTIONS: [&str; 16] = [
    "A", "B", "C", "D", "F", "G", "I", "M", "P", "Q", "R", "S", "T", "U", "UT", "X",
];

/// The text of the action column that `--blkparse-action action` selects (`T` is printed
/// `UT`), or why `action` is none of [`BLKPARSE_ACTIONS`].
pub fn blkparse_action(action: &str) -> Result<&'static str, String> {
    match BLKPARSE_ACTIONS.iter().find(|&&a| a == action) {
        Some(&"T") => Ok("UT"),
        Some(a) => Ok(a),
        None => Err(format!(
            "'{}' is not a blkparse action ({})",
            escape_controls(action),
            BLKPARSE_ACTIONS.join(", ")
        )),
    }
}

/// Refuse the options of `opts` that do not apply to a trace in format `fmt` (a filter
/// of another format would be silently ignored) and a blkparse action that blkparse never
/// prints; the action column text to match on success.
pub fn check_options(fmt: Format, opts: &TraceOptions) -> Result<&'static str, String> {
    let action =
        blkparse_action(&opts.blkparse_action).map_err(|e| format!("--blkparse-action: {e}"))?;
    let refuse = |flag: &str, formats: &str| {
        Err(format!(
            "{flag} applies to {formats} traces only (this trace is {fmt})"
        ))
    };
    if opts.asu.is_some() && fmt != Format::Spc {
        return refuse("--trace-asu", "spc");
    }
    if opts.disk.is_some() && !matches!(fmt, Format::Msr | Format::Disksim) {
        return refuse("--trace-disk", "msr and disksim");
    }
    if opts.time_unit.is_some() && !matches!(fmt, Format::Disksim | Format::Fio) {
        return refuse("--trace-time-unit", "disksim and fio");
    }
    if action != "D" && fmt != Format::Blkparse {
        return refuse("--blkparse-action", "blkparse");
    }
    Ok(action)
}

/// A trace as a simulation workload (`--workload trace:FILE`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TraceSpec {
    pub path: PathBuf,
    pub options: TraceOptions,
    pub map: TraceMap,
}

impl TraceSpec {
    pub fn new(path: impl Into<PathBuf>) -> TraceSpec {
        TraceSpec {
            path: path.into(),
            options: TraceOptions::default(),
            map: TraceMap::default(),
        }
    }
}

/// One request of a trace, in 512-byte sectors. `time_ns` is relative to the trace's first
/// record and may go backwards (out-of-order traces are passed through as they are).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    pub time_ns: i64,
    pub op: Op,
    pub lba: u64,
    pub sectors: u32,
}

/// A trace that cannot be read: `FILE:LINE: what is wrong` (or `FILE: what is wrong`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceError {
    pub file: String,
    pub line: Option<u64>,
    pub msg: String,
}

impl TraceError {
    pub(crate) fn new(file: &str, line: Option<u64>, msg: impl Into<String>) -> TraceError {
        TraceError {
            file: file.to_string(),
            line,
            msg: msg.into(),
        }
    }
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{}: {}", self.file, l, self.msg),
            None => write!(f, "{}: {}", self.file, self.msg),
        }
    }
}

impl std::error::Error for TraceError {}

/// What a reader saw besides its records.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Lines read (including blank, comment, header and skipped ones).
    pub lines: u64,
    /// Records delivered.
    pub records: u64,
    /// Records of size zero, skipped.
    pub skipped_zero_size: u64,
    /// Malformed lines skipped (`skip_bad_lines`).
    pub skipped_bad_lines: u64,
    /// Records of another disk / ASU / device, skipped.
    pub skipped_other_device: u64,
    /// Lines that are not requests: header lines, other blkparse actions, flushes and
    /// syncs, fio file actions, the blkparse summary.
    pub ignored_lines: u64,
    /// Records whose time stamp is earlier than an earlier record's.
    pub out_of_order: u64,
    /// The first malformed line skipped, as `FILE:LINE: what is wrong`.
    pub first_bad_line: Option<String>,
    /// The distinct disks of the records (MSR DiskNumber, DiskSim devno) when no
    /// `--trace-disk` filter keeps one, in increasing order: at most [`DEVICES_LISTED`],
    /// `more_devices` when there were more. Not part of the reports (no key): it makes the
    /// warning of [`Counts::merged_devices_warning`].
    #[serde(skip)]
    pub devices: Vec<u64>,
    #[serde(skip)]
    pub more_devices: bool,
}

/// How many distinct disks [`Counts::devices`] lists (memory stays constant).
pub const DEVICES_LISTED: usize = 8;

impl Counts {
    /// Note that a record of disk `d` was read.
    #[inline]
    pub(crate) fn note_device(&mut self, d: u64) {
        if self.devices.last() == Some(&d) || self.devices.contains(&d) {
            return;
        }
        if self.devices.len() == DEVICES_LISTED {
            self.more_devices = true;
            return;
        }
        let at = self.devices.partition_point(|&x| x < d);
        self.devices.insert(at, d);
    }

    /// The warning for a trace of `file` in format `fmt` whose records came from several
    /// disks and were read as one address space (no `--trace-disk`): their offsets overlap,
    /// so requests of different disks alias (QA stop 24, F12). `None` for one disk.
    pub fn merged_devices_warning(&self, file: &str, fmt: Format) -> Option<String> {
        if self.devices.len() < 2 {
            return None;
        }
        let list: Vec<String> = self.devices.iter().map(u64::to_string).collect();
        let (count, more) = if self.more_devices {
            (format!("more than {DEVICES_LISTED}"), ", ...")
        } else {
            (self.devices.len().to_string(), "")
        };
        let field = match fmt {
            Format::Disksim => "devnos",
            _ => "DiskNumbers",
        };
        Some(format!(
            "{file}: records of {count} disks ({field} {}{more}) read as one address space, \
             where their offsets overlap; pass --trace-disk N to keep one disk",
            list.join(", ")
        ))
    }
}

/// A fast hash for block numbers (FxHash); trace maps and statistics hash millions of them.
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher(u64);

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

pub(crate) type FxBuild = BuildHasherDefault<FxHasher>;
pub(crate) type FxHashMap<K, V> = std::collections::HashMap<K, V, FxBuild>;
