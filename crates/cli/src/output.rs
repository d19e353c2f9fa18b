//! Everything that prints: aligned tables, key/value blocks, JSON, CSV, and the human
//! formatting of sizes and latencies. Subcommands build rows and call these; nothing else in
//! the CLI formats output by hand, so every report looks and parses the same way.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;

/// The output flags every report takes: a table on stdout by default, `--json` instead of
/// the table, and `--csv FILE` in addition to either.
#[derive(Args, Debug, Clone, Default)]
pub struct ReportArgs {
    /// Print machine-readable JSON (stable snake_case keys) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also write the report as CSV to FILE.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
}

/// `--plot FILE.svg|FILE.png` with the parameter on the x axis and the metric(s) drawn.
#[derive(Args, Debug, Clone, Default)]
pub struct PlotArgs {
    /// Draw the figure the papers draw (a metric against the swept parameter, one line per
    /// policy; grouped bars without a numeric parameter) to FILE (.svg or .png).
    #[arg(long, value_name = "FILE.svg|FILE.png", help_heading = "Plot")]
    pub plot: Option<PathBuf>,
    /// Option on the x axis (default: the first option that varies, besides the policy).
    #[arg(long, value_name = "PARAM", help_heading = "Plot")]
    pub x: Option<String>,
    /// Metric(s) on the y axis, one panel each (JSON keys: erasures, blocks_copied,
    /// cleaning_cost, wear_stddev, throughput_bytes_per_s, write_amplification, ...;
    /// default: erasures).
    #[arg(
        long,
        value_name = "METRIC",
        value_delimiter = ',',
        help_heading = "Plot"
    )]
    pub y: Vec<String>,
}

impl PlotArgs {
    /// Reject `--x`/`--y` without `--plot` (they would have no effect), an `--x` that is no
    /// option, an unknown file type or a missing font before anything runs.
    pub fn check(&self) -> Result<()> {
        if self.plot.is_none() {
            let axis = if self.x.is_some() {
                Some("--x")
            } else if !self.y.is_empty() {
                Some("--y")
            } else {
                None
            };
            if let Some(flag) = axis {
                anyhow::bail!("{flag}: has no effect without --plot FILE.svg|FILE.png");
            }
        }
        if let Some(p) = &self.plot {
            sim::plot::check_target(p)?;
        }
        if let Some(x) = &self.x {
            let k = x.replace('-', "_");
            let names = sim::sweep::key_names();
            if !names.contains(&k.as_str()) {
                anyhow::bail!(
                    "--x: '{x}' is not an option (options: {})",
                    names.join(", ")
                );
            }
        }
        Ok(())
    }

    /// Check the axes against a grid before it runs: `--x` must be an option that varies
    /// (`keys`, the varying options; a constant x puts every point at one place), each
    /// `--y` a metric that some job of the grid (`jobs`) reports as a number.
    pub fn check_grid(&self, keys: &[&str], jobs: &[sim::sweep::Job]) -> Result<()> {
        if self.plot.is_none() {
            return Ok(());
        }
        if let Some(x) = &self.x {
            let k = x.replace('-', "_");
            if !keys.contains(&k.as_str()) {
                let vary = if keys.is_empty() {
                    "nothing does".to_string()
                } else {
                    format!("varying: {}", keys.join(", "))
                };
                anyhow::bail!(
                    "--x: '{x}' has one value in this grid, nothing to plot along ({vary})"
                );
            }
        }
        use sim::driver::SimResult;
        let metrics: Vec<&str> = SimResult::metrics().collect();
        if let Some(y) = self.y.iter().find(|y| !metrics.contains(&y.as_str())) {
            anyhow::bail!(
                "--y: '{y}' is not a numeric metric (metrics: {})",
                metrics.join(", ")
            );
        }
        for y in &self.y {
            if !jobs.iter().any(|j| SimResult::has_metric(&j.config, y)) {
                anyhow::bail!(
                    "--y: '{y}' has no value in any run of this grid ({}), nothing to draw",
                    SimResult::metric_needs(y).unwrap_or("no run reports it")
                );
            }
        }
        Ok(())
    }

    /// Draw `rows` (each run's options and its result) if `--plot` was given.
    pub fn draw(&self, rows: &[sim::plot::Row], title: &str) -> Result<()> {
        let Some(path) = &self.plot else {
            return Ok(());
        };
        let x = self.x.as_deref().map(|x| x.replace('-', "_"));
        let default_y = ["erasures".to_string()];
        let y = if self.y.is_empty() {
            &default_y[..]
        } else {
            &self.y[..]
        };
        let chart = sim::plot::auto_chart(rows, x.as_deref(), y, title, &sim::sweep::key_names())?;
        chart.render(path)
    }
}

/// Write a report to stdout and flush it.
fn to_stdout(write: impl FnOnce(&mut io::StdoutLock<'static>) -> io::Result<()>) -> Result<()> {
    let mut out = io::stdout().lock();
    write(&mut out)
        .and_then(|()| out.flush())
        .context("cannot write to stdout")
}

/// A table of text cells printed with aligned columns. A column whose body cells all start
/// with a digit (sizes, counts, latencies; empty and `-` cells ignored) is right-aligned,
/// every other column is left-aligned.
#[derive(Debug, Clone)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new<S: AsRef<str>>(headers: &[S]) -> Table {
        Table {
            headers: headers.iter().map(|h| h.as_ref().to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Append a row; it must have one cell per header. Control characters are escaped
    /// (a cell may hold text read from a file).
    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.headers.len(), "table row width");
        let cells = cells
            .into_iter()
            .map(|c| sim::trace::escape_controls(&c).into_owned())
            .collect();
        self.rows.push(cells);
    }

    pub fn write(&self, w: &mut impl Write) -> io::Result<()> {
        let n = self.headers.len();
        let width = |i: usize| {
            self.rows
                .iter()
                .map(|r| text_width(&r[i]))
                .chain([text_width(&self.headers[i])])
                .max()
                .unwrap_or(0)
        };
        let widths: Vec<usize> = (0..n).map(width).collect();
        let right: Vec<bool> = (0..n)
            .map(|i| {
                let mut body = self
                    .rows
                    .iter()
                    .map(|r| &r[i])
                    .filter(|c| !c.is_empty() && *c != "-");
                let mut any = false;
                let all = body.all(|c| {
                    any = true;
                    looks_numeric(c)
                });
                any && all
            })
            .collect();
        let line = |w: &mut dyn Write, cells: &[String]| -> io::Result<()> {
            let mut out = String::new();
            for (i, cell) in cells.iter().enumerate() {
                if i > 0 {
                    out.push_str("  ");
                }
                let pad = " ".repeat(widths[i] - text_width(cell));
                if right[i] {
                    out.push_str(&pad);
                    out.push_str(cell);
                } else {
                    out.push_str(cell);
                    if i + 1 < n {
                        out.push_str(&pad);
                    }
                }
            }
            writeln!(w, "{}", out.trim_end())
        };
        line(w, &self.headers)?;
        let rule: Vec<String> = widths.iter().map(|&k| "-".repeat(k)).collect();
        line(w, &rule)?;
        for r in &self.rows {
            line(w, r)?;
        }
        Ok(())
    }

    /// Print to stdout.
    pub fn print(&self) -> Result<()> {
        to_stdout(|w| self.write(w))
    }
}

fn text_width(s: &str) -> usize {
    s.chars().count()
}

fn looks_numeric(s: &str) -> bool {
    let s = s.strip_prefix('-').unwrap_or(s);
    s.starts_with(|c: char| c.is_ascii_digit())
}

/// A block of `key  value` lines with the values aligned (single-object reports).
#[derive(Debug, Clone, Default)]
pub struct Fields {
    items: Vec<(String, String)>,
}

impl Fields {
    pub fn new() -> Fields {
        Fields::default()
    }

    /// Append `key  value`; control characters in the value are escaped (it may hold text
    /// read from a file, such as an image's device name).
    pub fn add(&mut self, key: impl Into<String>, value: impl Into<String>) -> &mut Fields {
        let value = value.into();
        let value = sim::trace::escape_controls(&value).into_owned();
        self.items.push((key.into(), value));
        self
    }

    pub fn write(&self, w: &mut impl Write) -> io::Result<()> {
        let kw = self
            .items
            .iter()
            .map(|(k, _)| text_width(k))
            .max()
            .unwrap_or(0);
        for (k, v) in &self.items {
            let pad = " ".repeat(kw - text_width(k));
            writeln!(w, "{k}{pad}  {v}")?;
        }
        Ok(())
    }

    pub fn print(&self) -> Result<()> {
        to_stdout(|w| self.write(w))
    }
}

/// Print `lines` on stdout, a newline after each (a closed or full stdout is an error
/// naming it, as for every report, not a panic as `println!` makes it).
pub fn print_lines(lines: &[String]) -> Result<()> {
    to_stdout(|w| lines.iter().try_for_each(|l| writeln!(w, "{l}")))
}

/// Print `value` as pretty JSON on stdout, followed by a newline.
pub fn print_json<T: Serialize + ?Sized>(value: &T) -> Result<()> {
    let mut out = io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value).context("cannot write JSON to stdout")?;
    writeln!(out)
        .and_then(|()| out.flush())
        .context("cannot write JSON to stdout")
}

/// Write `rows` as CSV to `path`: a header line of the field names (in declaration order),
/// then one record per row. Rows are the same structs that `--json` prints; array fields
/// become space-separated lists and nested objects become compact JSON, so one report
/// struct serves table, JSON and CSV.
pub fn write_csv<T: Serialize>(path: &Path, rows: &[T]) -> Result<()> {
    let ctx = || format!("cannot write CSV {}", path.display());
    let mut w = csv::Writer::from_path(path).with_context(ctx)?;
    let mut header: Option<Vec<String>> = None;
    for r in rows {
        let fields = ordered_fields(r).with_context(ctx)?;
        let keys: Vec<String> = fields.iter().map(|(k, _)| k.clone()).collect();
        match &header {
            None => {
                w.write_record(&keys).with_context(ctx)?;
                header = Some(keys);
            }
            Some(h) if *h != keys => {
                anyhow::bail!("{}: rows have different fields", ctx());
            }
            Some(_) => {}
        }
        w.write_record(fields.iter().map(|(_, v)| csv_cell(v)))
            .with_context(ctx)?;
    }
    w.flush().with_context(ctx)?;
    Ok(())
}

/// The top-level fields of a struct in serialization order (serde_json's `Value` would
/// sort them). A field holding an object, or a list holding lists or objects, comes as
/// its compact JSON text (a string), its objects' keys in serialization order too
/// ([`csv_cell`] writes it as it is; until stop 31 nested keys came sorted).
pub fn ordered_fields<T: Serialize + ?Sized>(row: &T) -> Result<Vec<(String, serde_json::Value)>> {
    let text = serde_json::to_string(row)?;
    match serde_json::from_str(&text)? {
        Ordered::Object(fields) => Ok(fields
            .into_iter()
            .map(|(k, v)| (k, v.into_cell()))
            .collect()),
        _ => anyhow::bail!("a CSV row must serialize to an object"),
    }
}

/// A JSON value whose objects keep their keys in the order they were written
/// ([`ordered_fields`]).
enum Ordered {
    Scalar(serde_json::Value),
    List(Vec<Ordered>),
    Object(Vec<(String, Ordered)>),
}

impl Ordered {
    /// A CSV field's value: a scalar, or a list of scalars, as it is ([`csv_cell`] joins
    /// the list); anything holding an object or a list as its JSON text.
    fn into_cell(self) -> serde_json::Value {
        match self {
            Ordered::Scalar(v) => v,
            Ordered::List(items) if items.iter().all(|x| matches!(x, Ordered::Scalar(_))) => {
                serde_json::Value::Array(items.into_iter().map(Ordered::into_cell).collect())
            }
            other => {
                let mut text = String::new();
                other.write(&mut text);
                serde_json::Value::String(text)
            }
        }
    }

    /// Compact JSON text, keys in their order.
    fn write(&self, out: &mut String) {
        match self {
            Ordered::Scalar(v) => out.push_str(&v.to_string()),
            Ordered::List(items) => {
                out.push('[');
                for (i, x) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    x.write(out);
                }
                out.push(']');
            }
            Ordered::Object(fields) => {
                out.push('{');
                for (i, (k, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::Value::from(k.as_str()).to_string());
                    out.push(':');
                    v.write(out);
                }
                out.push('}');
            }
        }
    }
}

impl<'de> serde::Deserialize<'de> for Ordered {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Ordered;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_bool<E>(self, b: bool) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(b.into()))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(n.into()))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(n.into()))
            }
            fn visit_f64<E>(self, x: f64) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(x.into()))
            }
            fn visit_str<E>(self, s: &str) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(s.into()))
            }
            fn visit_unit<E>(self) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(serde_json::Value::Null))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Ordered, A::Error> {
                let mut items = Vec::new();
                while let Some(x) = seq.next_element()? {
                    items.push(x);
                }
                Ok(Ordered::List(items))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Ordered, A::Error> {
                let mut fields = Vec::new();
                while let Some(kv) = map.next_entry()? {
                    fields.push(kv);
                }
                Ok(Ordered::Object(fields))
            }
        }
        d.deserialize_any(V)
    }
}

fn csv_cell(v: &serde_json::Value) -> String {
    use serde_json::Value;
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        // A list of numbers or names: space-separated. A list holding structures (arrays
        // of objects), like an object, is JSON text, which any JSON reader parses (items
        // space-joined could not be told apart).
        Value::Array(items) if items.iter().all(|x| !x.is_array() && !x.is_object()) => {
            items.iter().map(csv_cell).collect::<Vec<_>>().join(" ")
        }
        other => other.to_string(),
    }
}

/// Sizes in binary units, exact where possible: `512 B`, `16 KiB`, `24 MiB`, `1.5 GiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut u = 0;
    let mut v = n as f64;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{} {}", trim_float(v), UNITS[u])
    }
}

/// A latency given in µs with the shortest sensible unit: `55.7 µs`, `2.005 ms`, `0.7 s`.
pub fn duration_us(us: f64) -> String {
    if us == 0.0 {
        "0".into()
    } else if us >= 1_000_000.0 {
        format!("{} s", trim_float(us / 1_000_000.0))
    } else if us >= 1_000.0 {
        format!("{} ms", trim_float(us / 1_000.0))
    } else if us < 1.0 {
        format!("{} ns", trim_float(us * 1_000.0))
    } else {
        format!("{} µs", trim_float(us))
    }
}

/// An operation cost of a fixed part (µs) plus a per-byte part (ns/byte), as in
/// [`nand::Timing`]: `55.7 µs`, `200 ns/B`, `25 µs + 25 ns/B`.
pub fn op_cost(fixed_us: f64, ns_per_byte: f64) -> String {
    match (fixed_us != 0.0, ns_per_byte != 0.0) {
        (_, false) => duration_us(fixed_us),
        (false, true) => format!("{}/B", duration_us(ns_per_byte / 1_000.0)),
        (true, true) => format!(
            "{} + {}/B",
            duration_us(fixed_us),
            duration_us(ns_per_byte / 1_000.0)
        ),
    }
}

/// A float with at most 3 decimals and no trailing zeros.
pub fn trim_float(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

/// A count in compact decimal units when exact: `10k`, `100k`, `1M`; otherwise the number.
pub fn count(n: u64) -> String {
    if n >= 1_000_000 && n.is_multiple_of(1_000_000) {
        format!("{}M", n / 1_000_000)
    } else if n >= 1_000 && n.is_multiple_of(1_000) {
        format!("{}k", n / 1_000)
    } else {
        n.to_string()
    }
}

/// A list of block numbers, shortened after `max` entries (the rest in the command's
/// `--json`).
pub fn block_list(blocks: &[u32], max: usize) -> String {
    block_list_in(blocks, max, "--json")
}

/// A list of block numbers, shortened after `max` entries, saying what lists them all.
pub fn block_list_in(blocks: &[u32], max: usize, lister: &str) -> String {
    shortened_list(blocks, max, |n| {
        format!(", … (+{n} more; {lister} lists all)")
    })
}

/// The first `max` of `items`, comma-separated, then `rest(n)` for the `n` left out.
pub fn shortened_list(items: &[u32], max: usize, rest: impl Fn(usize) -> String) -> String {
    let shown: Vec<String> = items.iter().take(max).map(u32::to_string).collect();
    let mut s = shown.join(", ");
    if items.len() > max {
        s.push_str(&rest(items.len() - max));
    }
    s
}

/// Render an error and its causes on one line: `outer: inner: root`. Causes whose text is
/// already contained in the previous message are skipped so nothing is said twice.
pub fn error_line(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in err.chain() {
        let msg = cause.to_string();
        let msg = msg.split_whitespace().collect::<Vec<_>>().join(" ");
        if msg.is_empty() || out.contains(&msg) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&msg);
    }
    // Whitespace is folded above; other control characters (an escape byte in a file
    // name or a device name) are escaped, as in every report.
    sim::trace::escape_controls(&out).into_owned()
}

/// An error already reported on stderr (e.g. one line per failed job of a grid): the
/// command exits with status 1 and prints nothing more.
#[derive(Debug)]
pub struct Reported(pub String);

impl std::fmt::Display for Reported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Reported {}

/// True when the error is a closed stdout (`flashkit devices | head`), which is not a
/// failure worth reporting.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
            || c.downcast_ref::<serde_json::Error>()
                .and_then(|e| e.io_error_kind())
                .is_some_and(|k| k == io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_from_files_cannot_move_the_cursor() {
        let mut f = Fields::new();
        f.add("device", "evil\x1b[2J\rname");
        let mut out = Vec::new();
        f.write(&mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "device  evil\\u{1b}[2J\\rname\n"
        );
        let mut t = Table::new(&["a"]);
        t.row(vec!["x\ny".into()]);
        let mut out = Vec::new();
        t.write(&mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "a\n----\nx\\ny\n");
        let e = anyhow::anyhow!("bad\x1b[2J\nname").context("image x\ty");
        assert_eq!(error_line(&e), "image x y: bad\\u{1b}[2J name");
    }

    #[test]
    fn table_aligns_columns() {
        let mut t = Table::new(&["name", "size"]);
        t.row(vec!["a".into(), "5".into()]);
        t.row(vec!["longer".into(), "1234".into()]);
        let mut out = Vec::new();
        t.write(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "name    size\n------  ----\na          5\nlonger  1234\n"
        );
    }

    #[test]
    fn units() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(24 << 20), "24 MiB");
        assert_eq!(bytes(16 << 30), "16 GiB");
        assert_eq!(bytes(3 << 29), "1.5 GiB");
        assert_eq!(duration_us(55.7), "55.7 µs");
        assert_eq!(duration_us(2005.0), "2.005 ms");
        assert_eq!(duration_us(700_000.0), "700 ms");
        assert_eq!(op_cost(0.0, 200.0), "200 ns/B");
        assert_eq!(op_cost(0.0, 7500.0), "7.5 µs/B");
        assert_eq!(count(100_000), "100k");
        assert_eq!(count(1_000_000), "1M");
        assert_eq!(count(12_345), "12345");
        assert_eq!(
            block_list(&[1, 2, 3], 2),
            "1, 2, … (+1 more; --json lists all)"
        );
    }

    #[test]
    fn csv_keeps_field_order_and_flattens_lists() {
        #[derive(Serialize)]
        struct Row {
            zeta: u32,
            alpha: &'static str,
            list: Vec<u32>,
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.csv");
        let rows = [
            Row {
                zeta: 1,
                alpha: "a,b",
                list: vec![3, 7],
            },
            Row {
                zeta: 2,
                alpha: "c",
                list: vec![],
            },
        ];
        write_csv(&path, &rows).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "zeta,alpha,list\n1,\"a,b\",3 7\n2,c,\n");
    }

    #[test]
    fn error_chain_on_one_line() {
        let e = anyhow::anyhow!("root\ncause").context("outer");
        assert_eq!(error_line(&e), "outer: root cause");
    }
}
