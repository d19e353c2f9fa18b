//! Trace writers, one per format, so that any trace (or generated workload) can be written
//! in any format and read back unchanged (`trace convert`, `trace generate`). A record a
//! format cannot hold (a byte offset past 64 bits, an MSR time past 2262) is an error
//! naming the record, never written wrapped.

use crate::staged::Staged;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use flate2::write::GzEncoder;
use flate2::Compression;
use serde::Serialize;

use super::parse::fmt_time;
use super::read::msr_time_ns;
use super::{Counts, Format, Record, TraceError, TraceOptions, TraceReader};
use crate::driver::Op;

/// Time stamp of the first record of an MSR trace we write (2008-02-22, as in the MSR
/// Cambridge traces), in 100 ns Windows ticks.
pub const MSR_BASE_TICKS: i64 = 128_166_372_000_000_000;
/// File name in the fio iologs we write.
const FIO_FILE: &str = "/dev/flashkit";
/// The last sector a request may end at in the formats with byte offsets (msr, fio): its
/// end in bytes must fit in 64 bits, as the readers require.
pub const BYTE_OFFSET_MAX_END_SECTOR: u64 = u64::MAX / 512;

enum Out {
    Plain(BufWriter<File>),
    /// A file or this process's stdout, gzip-compressed.
    Gz(Box<GzEncoder<Box<dyn Write + Send>>>),
    Other(Box<dyn Write + Send>),
}

impl Out {
    fn w(&mut self) -> &mut dyn Write {
        match self {
            Out::Plain(w) => w,
            Out::Gz(w) => w.as_mut(),
            Out::Other(w) => w,
        }
    }
}

/// Whether `path` names this process's standard output: `-`, `/dev/stdout`, `/dev/fd/1`
/// or `/proc/self/fd/1`. Such an output is written through the inherited handle, never
/// opened again: reopening truncates a file that stdout appends to, and a link to a
/// regular file would be staged and renamed over it (QA stop 32: `trace generate - >>
/// all.msr` replaced `all.msr`).
pub fn is_stdout_path(path: &Path) -> bool {
    ["-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"]
        .iter()
        .any(|p| path == Path::new(p))
}

/// What a writer wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WriteSummary {
    pub format: String,
    pub records: u64,
    /// Trims left out because the format cannot express them.
    pub dropped_trims: u64,
    /// Records written at time 0 because the format has no negative times.
    pub clamped_times: u64,
    /// Records whose time the format's resolution rounded down (msr: 100 ns, fio: 1 µs;
    /// the others keep nanoseconds).
    pub rounded_times: u64,
}

/// Writes [`Record`]s in one format.
pub struct TraceWriter {
    out: Out,
    /// The temporary file a [`TraceWriter::create`]d output is written to until
    /// [`TraceWriter::finish`].
    staged: Option<Staged>,
    file: String,
    fmt: Format,
    seq: u64,
    last_us: i64,
    line: String,
    /// Records given to [`TraceWriter::write`] so far (for errors: "record N").
    given: u64,
    summary: WriteSummary,
}

impl TraceWriter {
    /// Create `path` (gzip-compressed when `gzip`). The trace is written to a temporary
    /// file beside it and takes its name only when [`TraceWriter::finish`] succeeds: a
    /// writer dropped before (on an error) leaves no partial `path`, and an existing
    /// `path` untouched. Special files (FIFOs, devices) are written in place, and this
    /// process's stdout ([`is_stdout_path`]) through its own handle.
    pub fn create(path: &Path, fmt: Format, gzip: bool) -> Result<TraceWriter, TraceError> {
        let name = path.display().to_string();
        let gz =
            |w: Box<dyn Write + Send>| Out::Gz(Box::new(GzEncoder::new(w, Compression::default())));
        if is_stdout_path(path) {
            let w = Box::new(BufWriter::with_capacity(256 << 10, io::stdout()));
            let out = if gzip { gz(w) } else { Out::Other(w) };
            return TraceWriter::start(out, name, fmt);
        }
        let cannot = |e: io::Error| TraceError::new(&name, None, format!("cannot create: {e}"));
        let (f, staged) = Staged::create(path).map_err(cannot)?;
        let w = BufWriter::with_capacity(256 << 10, f);
        let out = if gzip { gz(Box::new(w)) } else { Out::Plain(w) };
        let mut w = TraceWriter::start(out, name, fmt)?;
        w.staged = staged;
        Ok(w)
    }

    /// Write to any stream (`name` is used in error messages).
    pub fn from_writer(
        w: Box<dyn Write + Send>,
        name: &str,
        fmt: Format,
    ) -> Result<TraceWriter, TraceError> {
        TraceWriter::start(Out::Other(w), name.to_string(), fmt)
    }

    fn start(out: Out, file: String, fmt: Format) -> Result<TraceWriter, TraceError> {
        let mut w = TraceWriter {
            out,
            staged: None,
            file,
            fmt,
            seq: 0,
            last_us: 0,
            line: String::with_capacity(128),
            given: 0,
            summary: WriteSummary {
                format: fmt.name().into(),
                ..Default::default()
            },
        };
        if fmt == Format::Fio {
            w.line = format!("fio version 3 iolog\n0 {FIO_FILE} add\n0 {FIO_FILE} open\n");
            w.flush_line()?;
        }
        Ok(w)
    }

    fn io_err(&self, e: io::Error) -> TraceError {
        TraceError::new(&self.file, None, format!("cannot write: {e}"))
    }

    fn flush_line(&mut self) -> Result<(), TraceError> {
        let r = self.out.w().write_all(self.line.as_bytes());
        r.map_err(|e| self.io_err(e))
    }

    fn clamp(&mut self, ns: i64) -> i64 {
        if ns < 0 {
            self.summary.clamped_times += 1;
            0
        } else {
            ns
        }
    }

    /// Count a time finer than the format writes ([`Format::time_resolution_ns`]).
    fn count_rounded(&mut self, ns: i64) {
        if ns.rem_euclid(self.fmt.time_resolution_ns()) != 0 {
            self.summary.rounded_times += 1;
        }
    }

    /// Why this writer's format cannot hold `r`, if it cannot.
    fn unfit(&self, r: &Record) -> Option<String> {
        if r.op == Op::Trim && !self.fmt.can_trim() {
            return None; // left out
        }
        let end = r.lba.saturating_add(r.sectors as u64);
        match self.fmt {
            Format::Msr | Format::Fio if end > BYTE_OFFSET_MAX_END_SECTOR => Some(format!(
                "sector {} + {} ends past the {} format's limit: its byte offsets are 64-bit, \
                 so a request must end by sector {BYTE_OFFSET_MAX_END_SECTOR}",
                r.lba, r.sectors, self.fmt
            )),
            Format::Msr if msr_time_ns(MSR_BASE_TICKS + r.time_ns.div_euclid(100)).is_none() => {
                Some(format!(
                    "time {} s after the first record is past the msr format's limit as \
                     flashkit reads it (2262-04-11, 64-bit nanoseconds since 1970)",
                    r.time_ns / 1_000_000_000
                ))
            }
            _ => None,
        }
    }

    /// Write one record. Trims in a format without trims are counted and left out. A
    /// record the format cannot hold is an error naming it `OUTPUT: record N` (N counts
    /// from 1 the records given to this writer).
    pub fn write(&mut self, r: &Record) -> Result<(), TraceError> {
        self.given += 1;
        if let Some(why) = self.unfit(r) {
            let msg = format!("record {}: {why}", self.given);
            return Err(TraceError::new(&self.file, None, msg));
        }
        self.put(r)
    }

    /// [`TraceWriter::write`] for a record read from line `line` of `file`: a record the
    /// format cannot hold is an error naming that line, `FILE:LINE: what`.
    pub fn write_from(&mut self, r: &Record, file: &str, line: u64) -> Result<(), TraceError> {
        self.given += 1;
        if let Some(why) = self.unfit(r) {
            return Err(TraceError::new(file, Some(line), why));
        }
        self.put(r)
    }

    fn put(&mut self, r: &Record) -> Result<(), TraceError> {
        use std::fmt::Write as _;
        if r.op == Op::Trim && !self.fmt.can_trim() {
            self.summary.dropped_trims += 1;
            return Ok(());
        }
        // (A time that a format without negative times writes as 0 counts as clamped, not
        // rounded.)
        let clamps = matches!(self.fmt, Format::Blkparse | Format::Fio);
        self.count_rounded(if clamps { r.time_ns.max(0) } else { r.time_ns });
        self.line.clear();
        let bytes = r.sectors as u64 * 512;
        let l = &mut self.line;
        match self.fmt {
            Format::Msr => {
                let offset = r.lba * 512; // fits: checked by `unfit`
                let ticks = MSR_BASE_TICKS + r.time_ns.div_euclid(100);
                let ty = if r.op == Op::Read { "Read" } else { "Write" };
                let _ = writeln!(l, "{ticks},flashkit,0,{ty},{offset},{bytes},0");
            }
            Format::Spc => {
                let op = if r.op == Op::Read { 'r' } else { 'w' };
                let t = fmt_time(r.time_ns, 1_000_000_000, 6);
                let _ = writeln!(l, "0,{},{bytes},{op},{t}", r.lba);
            }
            Format::Blkparse => {
                let t = self.clamp(r.time_ns);
                let rwbs = match r.op {
                    Op::Read => "R",
                    Op::Write => "W",
                    Op::Trim => "D",
                };
                self.seq += 1;
                let l = &mut self.line;
                let _ = writeln!(
                    l,
                    "{:>3},{:<3} {:>2} {:>8} {:>5}.{:09} {:>5}  D {:>3} {} + {} [flashkit]",
                    8,
                    0,
                    0,
                    self.seq,
                    t / 1_000_000_000,
                    t % 1_000_000_000,
                    1,
                    rwbs,
                    r.lba,
                    r.sectors
                );
            }
            Format::Disksim => {
                let flags = u8::from(r.op == Op::Read);
                let t = fmt_time(r.time_ns, 1_000_000, 6);
                let _ = writeln!(l, "{t} 0 {} {} {flags}", r.lba, r.sectors);
            }
            Format::Fio => {
                let us = self.clamp(r.time_ns).div_euclid(1_000);
                self.last_us = self.last_us.max(us);
                let act = match r.op {
                    Op::Read => "read",
                    Op::Write => "write",
                    Op::Trim => "trim",
                };
                let offset = r.lba * 512; // fits: checked by `unfit`
                let l = &mut self.line;
                let _ = writeln!(l, "{us} {FIO_FILE} {act} {offset} {bytes}");
            }
        }
        self.flush_line()?;
        self.summary.records += 1;
        Ok(())
    }

    /// Write the trailer (fio's `close`), flush, finish the gzip stream, and give a
    /// created file its name.
    pub fn finish(mut self) -> Result<WriteSummary, TraceError> {
        if self.fmt == Format::Fio {
            self.line = format!("{} {FIO_FILE} close\n", self.last_us);
            self.flush_line()?;
        }
        let file = self.file.clone();
        let err = |e: io::Error| TraceError::new(&file, None, format!("cannot write: {e}"));
        match self.out {
            Out::Plain(mut w) => w.flush().map_err(err)?,
            Out::Gz(g) => g.finish().map_err(err)?.flush().map_err(err)?,
            Out::Other(mut w) => w.flush().map_err(err)?,
        }
        if let Some(s) = self.staged.take() {
            s.commit().map_err(err)?;
        }
        Ok(self.summary)
    }
}

/// Whether `a` and `b` name the same file: for existing files the same device and inode
/// (links and different spellings of one path count); otherwise the same path once made
/// absolute with links resolved (two outputs not written yet).
pub fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        (Err(_), Err(_)) => match (resolved(a), resolved(b)) {
            (Some(x), Some(y)) => x == y,
            _ => a == b,
        },
        _ => false,
    }
}

/// A path made absolute with links resolved: the file's own, or its directory's.
fn resolved(p: &Path) -> Option<std::path::PathBuf> {
    if let Ok(c) = std::fs::canonicalize(p) {
        return Some(c);
    }
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    Some(std::fs::canonicalize(dir).ok()?.join(p.file_name()?))
}

/// An error unless `output` is a different file from `input`: writing a file that is being
/// read would empty it before it is read. Call it before creating `output`.
pub fn refuse_same_file(input: &Path, output: &Path) -> Result<(), TraceError> {
    if same_file(input, output) {
        return Err(TraceError::new(
            &output.display().to_string(),
            None,
            format!(
                "output is the same file as the input {}; writing it would empty the input \
                 (choose another output file)",
                input.display()
            ),
        ));
    }
    Ok(())
}

/// What [`convert`] did.
#[derive(Clone, Debug)]
pub struct Conversion {
    pub input_format: Format,
    pub written: WriteSummary,
    /// What the reader saw besides the records.
    pub read: Counts,
}

/// `trace convert`: read `input` (with `opts`) and write its records to `output` in format
/// `to`, gzip-compressed when `gzip`. Refuses an `output` that is the input file (before
/// creating anything); a record the output format cannot hold is an error at its line of
/// the input.
pub fn convert(
    input: &Path,
    output: &Path,
    to: Format,
    gzip: bool,
    opts: &TraceOptions,
) -> Result<Conversion, TraceError> {
    refuse_same_file(input, output)?;
    let mut reader = TraceReader::open(input, opts)?;
    let mut w = TraceWriter::create(output, to, gzip)?;
    let mut any = false;
    while let Some(r) = reader.next() {
        w.write_from(&r?, reader.file(), reader.line())?;
        any = true;
    }
    if !any {
        // An empty trace is a file no reader can tell the format of; the writer, dropped
        // unfinished, leaves no output.
        return Err(TraceError::new(
            &input.display().to_string(),
            None,
            "no request left to convert (the filters or --trace-limit kept none); nothing written",
        ));
    }
    Ok(Conversion {
        input_format: reader.format(),
        written: w.finish()?,
        read: reader.counts().clone(),
    })
}
