//! Figures like the papers draw them: a metric against a swept parameter, one line per
//! policy (or policy + regions, …), or grouped bars for side-by-side runs without a numeric
//! parameter. Several panels ((a) erasures, (b) blocks copied, …) share one legend, drawn
//! below the panels so it never covers data. Written as SVG or PNG (by the file's
//! extension) with `plotters`.
//!
//! Text is laid out and (for PNG) rasterised with plotters' pure-Rust `ab_glyph` font
//! backend, which needs a TrueType file at run time: `$FLASHKIT_FONT` if set, else DejaVu
//! Sans from Debian's `fonts-dejavu-core` (`/usr/share/fonts/truetype/dejavu/`), else a few
//! other common locations (Liberation, Noto, macOS, Windows). No C library (fontconfig,
//! freetype) is linked, and SVG files name the family `sans-serif` so viewers use their own.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use anyhow::{anyhow, bail, Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor;
use serde_json::Value;

/// A figure: a title and one or more panels sharing a legend.
#[derive(Clone, Debug, Default)]
pub struct Chart {
    pub title: String,
    pub panels: Vec<Panel>,
}

/// How a panel draws its series.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Style {
    #[default]
    Lines,
    Bars,
}

/// The x axis of a panel.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum XAxis {
    /// Points are placed at their x value.
    #[default]
    Numeric,
    /// Points' x is an index into these labels, equally spaced (localities, workloads).
    Categories(Vec<String>),
}

#[derive(Clone, Debug, Default)]
pub struct Panel {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x: XAxis,
    pub style: Style,
    pub series: Vec<Series>,
}

#[derive(Clone, Debug, Default)]
pub struct Series {
    pub name: String,
    /// (x, y); x is a category index for [`XAxis::Categories`].
    pub points: Vec<(f64, f64)>,
}

/// Check before a long run that `path` can be drawn: a known extension and a font.
pub fn check_target(path: &Path) -> Result<()> {
    let ext = extension(path);
    if ext != "svg" && ext != "png" {
        bail!(
            "plot {}: unknown format (the file name must end in .svg or .png)",
            path.display()
        );
    }
    check_writable(path, "plot")?;
    ensure_font()
}

/// That `path` can be written, checked before the runs whose results it will hold: an
/// existing file is opened for writing (not truncated), a new one is created and removed.
/// Errors start with `what` (a flag or "plot").
pub fn check_writable(path: &Path, what: &str) -> Result<()> {
    let fail =
        |e: std::io::Error| anyhow::anyhow!("{what} {}: cannot write it: {e}", path.display());
    if path.exists() {
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(fail)?;
        return Ok(());
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(fail)?;
    // Best effort: the probe is empty and the plot will replace it anyway.
    let _ = std::fs::remove_file(path);
    Ok(())
}

fn extension(path: &Path) -> String {
    path.extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default()
}

impl Chart {
    /// Write the chart to `path`: `.svg` or `.png`.
    pub fn render(&self, path: &Path) -> Result<()> {
        if self.panels.is_empty() {
            bail!("plot {}: nothing to draw", path.display());
        }
        ensure_font()?;
        let ext = extension(path);
        let size = self.size();
        let r = match ext.as_str() {
            // Drawn into a string and written here: plotters writes an SVG file through a
            // `BufWriter` whose last flush drops its error (a full disk gave exit 0).
            "svg" => {
                let mut svg = String::new();
                self.draw_and_present(SVGBackend::with_string(&mut svg, size).into_drawing_area())
                    .and_then(|()| std::fs::write(path, &svg).map_err(|e| anyhow!("{e}")))
            }
            "png" => self.draw_and_present(BitMapBackend::new(path, size).into_drawing_area()),
            _ => bail!(
                "plot {}: unknown format (the file name must end in .svg or .png)",
                path.display()
            ),
        };
        r.with_context(|| format!("plot {}", path.display()))
    }

    /// Draw on `root` and write it out, with the backend's error as text.
    fn draw_and_present<DB: DrawingBackend>(&self, root: DrawingArea<DB, Shift>) -> Result<()> {
        self.draw(&root).map_err(|e| anyhow!("{e}"))?;
        root.present().map_err(|e| anyhow!("{e}"))
    }

    fn grid(&self) -> (usize, usize) {
        match self.panels.len() {
            1 => (1, 1),
            2 => (1, 2),
            3 | 4 => (2, 2),
            n => (n.div_ceil(3), 3),
        }
    }

    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for p in &self.panels {
            for s in &p.series {
                if !names.contains(&s.name) {
                    names.push(s.name.clone());
                }
            }
        }
        names
    }

    fn legend_rows(&self, width: u32) -> u32 {
        let names = self.names();
        let per_row = (width as usize / legend_item_width(&names)).max(1);
        names.len().div_ceil(per_row).max(1) as u32
    }

    fn size(&self) -> (u32, u32) {
        let (rows, cols) = self.grid();
        let w = if cols == 1 { 900 } else { 620 * cols as u32 };
        let h = 60 + 440 * rows as u32 + 16 + 26 * self.legend_rows(w);
        (w, h)
    }

    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        root.fill(&WHITE)?;
        let (w, h) = root.dim_in_pixel();
        let legend_h = 16 + 26 * self.legend_rows(w);
        let (top, legend) = root.split_vertically(h - legend_h);
        let body = top.titled(&self.title, (FONT, 22))?;
        let names = self.names();
        let (rows, cols) = self.grid();
        let areas = body.split_evenly((rows, cols));
        for (panel, area) in self.panels.iter().zip(areas.iter()) {
            panel.draw(area, &names)?;
        }
        draw_legend(&legend, &names)
    }
}

const FONT: &str = "sans-serif";

/// Colours (Tableau 10, readable on white) and markers cycle with the series index.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

fn marker_shape(i: usize) -> usize {
    (i / PALETTE.len() + i) % 4
}

fn legend_item_width(names: &[String]) -> usize {
    let longest = names.iter().map(|n| n.chars().count()).max().unwrap_or(4);
    44 + longest * 8 + 24
}

fn draw_marker<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    i: usize,
    (x, y): (i32, i32),
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let c = color(i);
    match marker_shape(i) {
        0 => area.draw(&Circle::new((x, y), 4, c.filled())),
        1 => area.draw(&TriangleMarker::new((x, y), 5, c.filled())),
        2 => area.draw(&Rectangle::new(
            [(x - 4, y - 4), (x + 4, y + 4)],
            c.filled(),
        )),
        _ => area.draw(&Cross::new((x, y), 4, c.stroke_width(2))),
    }
}

fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    names: &[String],
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    if names.is_empty() {
        return Ok(());
    }
    let (w, _) = area.dim_in_pixel();
    let item = legend_item_width(names);
    let per_row = (w as usize / item).max(1);
    let used = item * per_row.min(names.len());
    let x0 = (w as usize).saturating_sub(used) / 2;
    for (i, name) in names.iter().enumerate() {
        let x = (x0 + (i % per_row) * item) as i32;
        let y = (8 + (i / per_row) * 26 + 11) as i32;
        let c = color(i);
        area.draw(&PathElement::new(
            vec![(x, y), (x + 32, y)],
            c.stroke_width(3),
        ))?;
        draw_marker(area, i, (x + 16, y))?;
        area.draw(&Text::new(
            name.clone(),
            (x + 40, y),
            (FONT, 16)
                .into_font()
                .color(&BLACK)
                .pos(text_anchor::Pos::new(
                    text_anchor::HPos::Left,
                    text_anchor::VPos::Center,
                )),
        ))?;
    }
    Ok(())
}

/// A short tick label: 150000 → "150k", 2500000 → "2.5M", 0.125 → "0.125".
pub fn tick(v: f64) -> String {
    let a = v.abs();
    let trim = |s: String| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if a >= 1e9 {
        format!("{}G", trim(format!("{:.2}", v / 1e9)))
    } else if a >= 1e6 {
        format!("{}M", trim(format!("{:.2}", v / 1e6)))
    } else if a >= 1e4 {
        format!("{}k", trim(format!("{:.1}", v / 1e3)))
    } else if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else {
        trim(format!("{v:.3}"))
    }
}

impl Panel {
    fn y_max(&self) -> f64 {
        let m = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .filter(|v| v.is_finite())
            .fold(0.0f64, f64::max);
        if m > 0.0 {
            m * 1.08
        } else {
            1.0
        }
    }

    fn y_min(&self) -> f64 {
        let m = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .filter(|v| v.is_finite())
            .fold(0.0f64, f64::min);
        if m < 0.0 {
            m * 1.08
        } else {
            0.0
        }
    }

    fn x_range(&self) -> (f64, f64) {
        match &self.x {
            XAxis::Categories(c) => (-0.5, c.len().max(1) as f64 - 0.5),
            XAxis::Numeric => {
                let xs = self
                    .series
                    .iter()
                    .flat_map(|s| s.points.iter().map(|p| p.0));
                let (lo, hi) = xs.fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
                if lo > hi {
                    (0.0, 1.0)
                } else if lo == hi {
                    (lo - 1.0, hi + 1.0)
                } else {
                    let pad = (hi - lo) * 0.04;
                    (lo - pad, hi + pad)
                }
            }
        }
    }

    fn draw<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        names: &[String],
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        let (x0, x1) = self.x_range();
        let (y0, y1) = (self.y_min(), self.y_max());
        let mut chart = ChartBuilder::on(area)
            .caption(&self.title, (FONT, 18))
            .margin(12)
            .margin_right(24)
            .x_label_area_size(52)
            .y_label_area_size(72)
            .build_cartesian_2d(x0..x1, y0..y1)?;
        let cats = match &self.x {
            XAxis::Categories(c) => Some(c.clone()),
            XAxis::Numeric => None,
        };
        let xfmt = |v: &f64| -> String {
            match &cats {
                Some(c) => {
                    let r = v.round();
                    if (v - r).abs() < 1e-6 && r >= 0.0 && (r as usize) < c.len() {
                        c[r as usize].clone()
                    } else {
                        String::new()
                    }
                }
                None => tick(*v),
            }
        };
        let yfmt = |v: &f64| tick(*v);
        let n_x_labels = match &cats {
            // Ask for one label per category (key points land on the integers).
            Some(c) => c.len().max(2) * 2 + 1,
            None => 8,
        };
        let mut mesh = chart.configure_mesh();
        mesh.x_desc(&self.x_label)
            .y_desc(&self.y_label)
            .x_labels(n_x_labels)
            .y_labels(8)
            .x_label_formatter(&xfmt)
            .y_label_formatter(&yfmt)
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 15))
            .light_line_style(TRANSPARENT)
            .bold_line_style(RGBColor(225, 225, 225));
        if cats.is_some() {
            mesh.disable_x_mesh();
        }
        mesh.draw()?;

        let index = |name: &str| names.iter().position(|n| n == name).unwrap_or(0);
        match self.style {
            Style::Lines => {
                for s in &self.series {
                    let i = index(&s.name);
                    let c = color(i);
                    let pts: Vec<(f64, f64)> = s
                        .points
                        .iter()
                        .copied()
                        .filter(|p| p.1.is_finite())
                        .collect();
                    chart.draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))?;
                    match marker_shape(i) {
                        0 => chart
                            .draw_series(pts.iter().map(|&p| Circle::new(p, 4, c.filled())))
                            .map(|_| ())?,
                        1 => chart
                            .draw_series(pts.iter().map(|&p| TriangleMarker::new(p, 5, c.filled())))
                            .map(|_| ())?,
                        2 => chart
                            .draw_series(pts.iter().map(|&p| {
                                EmptyElement::at(p) + Rectangle::new([(-4, -4), (4, 4)], c.filled())
                            }))
                            .map(|_| ())?,
                        _ => chart
                            .draw_series(pts.iter().map(|&p| Cross::new(p, 4, c.stroke_width(2))))
                            .map(|_| ())?,
                    }
                }
            }
            Style::Bars => {
                let k = self.series.len().max(1) as f64;
                let group = 0.8;
                let w = group / k;
                for (j, s) in self.series.iter().enumerate() {
                    let c = color(index(&s.name));
                    chart.draw_series(s.points.iter().filter(|p| p.1.is_finite()).map(
                        |&(x, y)| {
                            let left = x - group / 2.0 + j as f64 * w;
                            Rectangle::new(
                                [(left + w * 0.06, 0.0), (left + w * 0.94, y)],
                                c.filled(),
                            )
                        },
                    ))?;
                }
            }
        }
        Ok(())
    }
}

/// Register a TrueType font for plotters once; the error says how to get one.
fn ensure_font() -> Result<()> {
    static FONT_STATE: OnceLock<Result<(), String>> = OnceLock::new();
    FONT_STATE
        .get_or_init(|| {
            // A font the user names is the one used, or an error: never another one in
            // silence (QA stop 27).
            if let Some(p) = std::env::var_os("FLASHKIT_FONT") {
                let p = std::path::PathBuf::from(p);
                let bytes = std::fs::read(&p)
                    .map_err(|e| format!("plot: $FLASHKIT_FONT: {}: {e}", p.display()))?;
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                return plotters::style::register_font(FONT, FontStyle::Normal, bytes).map_err(
                    |_| format!("plot: $FLASHKIT_FONT: {}: not a TrueType font", p.display()),
                );
            }
            let candidates: Vec<std::path::PathBuf> = FONT_PATHS.iter().map(Into::into).collect();
            for p in &candidates {
                if let Ok(bytes) = std::fs::read(p) {
                    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                    if plotters::style::register_font(FONT, FontStyle::Normal, bytes).is_ok() {
                        return Ok(());
                    }
                }
            }
            Err(format!(
                "plot: no TrueType font found (tried {} and other common places); install one \
                 (Debian/Ubuntu: apt-get install fonts-dejavu-core) or set FLASHKIT_FONT=/path/to/font.ttf",
                FONT_PATHS[0]
            ))
        })
        .clone()
        .map_err(anyhow::Error::msg)
}

const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf",
    "/usr/share/fonts/noto/NotoSans-Regular.ttf",
    "/System/Library/Fonts/Supplemental/Arial.ttf",
    "/Library/Fonts/Arial.ttf",
    "C:\\Windows\\Fonts\\arial.ttf",
];

// ---------------------------------------------------------------------------------------
// Charts from result rows (sim, sweep): pick the x parameter and the series automatically.

/// One run for plotting: its option values and its metrics (the JSON of a result).
#[derive(Clone, Debug)]
pub struct Row {
    pub options: BTreeMap<String, Value>,
    pub metrics: Value,
}

/// Human axis label of an option or a metric.
pub fn label(key: &str) -> String {
    let known = [
        ("erasures", "erasures"),
        ("blocks_copied", "blocks copied"),
        ("cleaning_cost", "cleaning cost"),
        ("wear_stddev", "wear std. deviation (erasures)"),
        ("wear_max", "max erasures of a segment"),
        ("wear_min", "min erasures of a segment"),
        ("write_amplification", "write amplification"),
        ("throughput_bytes_per_s", "throughput (bytes/s)"),
        ("device_time_s", "device time (s)"),
        ("mean_latency_us", "mean latency (µs)"),
        ("p50_latency_us", "median latency (µs)"),
        ("p99_latency_us", "p99 latency (µs)"),
        ("max_latency_us", "max latency (µs)"),
        ("ram_bytes", "RAM (bytes)"),
        ("policy_greedy_share", "share of greedy choices"),
        ("fill", "utilization (pre-fill, fraction of raw capacity)"),
        (
            "workload",
            "locality of reference (x% of writes to y% of data)",
        ),
        ("regions", "DAC regions"),
        ("region_threshold", "DAC time threshold (s)"),
        ("blocks", "erase blocks (device size)"),
        ("pages_per_block", "pages per erase block (segment size)"),
        ("block_size", "FTL block size (bytes)"),
        ("written", "bytes written"),
        ("unit", "request size (bytes)"),
        ("readonly_fraction", "read-only fraction"),
        ("wear_threshold", "wear-levelling threshold"),
    ];
    known
        .iter()
        .find(|(k, _)| *k == key)
        .map_or_else(|| key.replace('_', " "), |(_, l)| l.to_string())
}

/// `hotcold:90/10` → Some((90, "90/10")).
fn locality(v: &Value) -> Option<(f64, String)> {
    let s = v.as_str()?.strip_prefix("hotcold:")?;
    let (x, _) = s.split_once('/')?;
    Some((x.parse().ok()?, s.to_string()))
}

fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "none".into(),
        other => other.to_string(),
    }
}

/// The keys whose values differ between rows, in the order of `order` (then the rest).
fn varying(rows: &[Row], order: &[&str]) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    let all: Vec<String> = rows
        .iter()
        .flat_map(|r| r.options.keys().cloned())
        .collect();
    let mut ordered: Vec<String> = order.iter().map(|s| s.to_string()).collect();
    for k in all {
        if !ordered.contains(&k) {
            ordered.push(k);
        }
    }
    for k in ordered {
        let first = rows.first().and_then(|r| r.options.get(&k));
        let differ = if crate::sweep::key_names().contains(&k.as_str()) {
            // A null option that does not apply to a job is no variation.
            crate::sweep::varies(&k, rows.iter().filter_map(|r| r.options.get(&k)))
        } else {
            rows.iter().any(|r| r.options.get(&k) != first)
        };
        if differ && !keys.contains(&k) {
            keys.push(k);
        }
    }
    keys
}

/// Build a chart from result rows: `ys` metrics (one panel each) against option `x`
/// (default: the first varying option other than the policy pairing and the seed), one
/// series per combination of the other varying options (seeds are averaged). A numeric x
/// (or hot/cold localities) gives lines; otherwise grouped bars by x.
pub fn auto_chart(
    rows: &[Row],
    x: Option<&str>,
    ys: &[String],
    title: &str,
    key_order: &[&str],
) -> Result<Chart> {
    if rows.is_empty() {
        bail!("plot: no results to draw");
    }
    let vary = varying(rows, key_order);
    let series_first = ["policy", "redistribution"];
    if let Some(x) = x {
        if !rows.iter().any(|r| r.options.contains_key(x)) {
            bail!(
                "--x: '{x}' is not an option of these runs (options: {})",
                rows[0]
                    .options
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    let x_key: Option<String> = x.map(String::from).or_else(|| {
        vary.iter()
            .find(|k| !series_first.contains(&k.as_str()) && k.as_str() != "seed")
            .cloned()
    });
    for y in ys {
        let ok = rows
            .iter()
            .any(|r| r.metrics.get(y).is_some_and(|v| v.is_number()));
        if !ok && rows.iter().any(|r| r.metrics.get(y).is_some()) {
            // Reported, but null in every run (e.g. the adaptive policy's share in runs
            // too short to clean, which made no choice).
            bail!("--y: '{y}' has no value in any run, nothing to draw");
        }
        if !ok {
            let names: Vec<String> = rows[0]
                .metrics
                .as_object()
                .map(|o| {
                    o.iter()
                        .filter(|(_, v)| v.is_number())
                        .map(|(k, _)| k.clone())
                        .collect()
                })
                .unwrap_or_default();
            bail!(
                "--y: '{y}' is not a numeric metric (metrics: {})",
                names.join(", ")
            );
        }
    }
    let series_keys: Vec<String> = vary
        .iter()
        .filter(|k| Some(k.as_str()) != x_key.as_deref() && k.as_str() != "seed")
        .cloned()
        .collect();
    // x positions.
    // Without an x, the bars form one group named after the workload.
    let xv = |r: &Row| -> Value {
        match &x_key {
            Some(k) => r.options.get(k).cloned().unwrap_or(Value::Null),
            None => r
                .options
                .get("workload")
                .cloned()
                .unwrap_or_else(|| Value::from("")),
        }
    };
    let all_numeric = x_key.is_some() && rows.iter().all(|r| xv(r).is_number());
    let all_locality = x_key.is_some() && rows.iter().all(|r| locality(&xv(r)).is_some());
    type Pos<'a> = Box<dyn Fn(&Row) -> f64 + 'a>;
    let (axis, style, pos): (XAxis, Style, Pos) = if all_numeric {
        (
            XAxis::Numeric,
            Style::Lines,
            Box::new(move |r: &Row| xv(r).as_f64().unwrap_or(0.0)),
        )
    } else {
        let mut cats: Vec<(f64, String)> = Vec::new();
        for r in rows {
            let v = xv(r);
            let c = if all_locality {
                locality(&v).expect("checked")
            } else {
                (cats.len() as f64, value_text(&v))
            };
            if !cats.iter().any(|(_, l)| *l == c.1) {
                cats.push(c);
            }
        }
        if all_locality {
            cats.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        let labels: Vec<String> = cats.iter().map(|c| c.1.clone()).collect();
        let labels2 = labels.clone();
        let style = if all_locality {
            Style::Lines
        } else {
            Style::Bars
        };
        (
            XAxis::Categories(labels),
            style,
            Box::new(move |r: &Row| {
                let v = xv(r);
                let t = if all_locality {
                    locality(&v).expect("checked").1
                } else {
                    value_text(&v)
                };
                labels2.iter().position(|l| *l == t).unwrap_or(0) as f64
            }),
        )
    };
    let series_name = |r: &Row| -> String {
        if series_keys.is_empty() {
            return ys.first().map(|y| label(y)).unwrap_or_default();
        }
        series_keys
            .iter()
            .map(|k| {
                let v = r.options.get(k).map(value_text).unwrap_or_default();
                if series_first.contains(&k.as_str()) || k == "workload" || k == "device" {
                    v
                } else {
                    format!("{k}={v}")
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut panels = Vec::new();
    for (pi, y) in ys.iter().enumerate() {
        // series name → x → (sum, n), in first-seen order.
        let mut order: Vec<String> = Vec::new();
        let mut acc: BTreeMap<String, BTreeMap<i64, (f64, f64, usize)>> = BTreeMap::new();
        for r in rows {
            let Some(v) = r.metrics.get(y).and_then(Value::as_f64) else {
                continue;
            };
            let name = series_name(r);
            if !order.contains(&name) {
                order.push(name.clone());
            }
            let px = pos(r);
            let e = acc
                .entry(name)
                .or_default()
                .entry((px * 1e6).round() as i64)
                .or_insert((px, 0.0, 0));
            e.1 += v;
            e.2 += 1;
        }
        let series = order
            .iter()
            .map(|n| Series {
                name: n.clone(),
                points: acc[n]
                    .values()
                    .map(|&(x, sum, k)| (x, sum / k as f64))
                    .collect(),
            })
            .collect();
        let letter = (b'a' + (pi % 26) as u8) as char;
        panels.push(Panel {
            title: if ys.len() > 1 {
                format!("({letter}) {}", label(y))
            } else {
                label(y)
            },
            x_label: x_key.as_deref().map(label).unwrap_or_default(),
            y_label: label(y),
            x: axis.clone(),
            style,
            series,
        });
    }
    Ok(Chart {
        title: title.to_string(),
        panels,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_short() {
        assert_eq!(tick(150000.0), "150k");
        assert_eq!(tick(2_500_000.0), "2.5M");
        assert_eq!(tick(0.125), "0.125");
        assert_eq!(tick(0.0), "0");
        assert_eq!(tick(1200.0), "1200");
    }

    fn row(policy: &str, fill: f64, erasures: f64) -> Row {
        let mut o = BTreeMap::new();
        o.insert("policy".into(), Value::from(policy));
        o.insert("fill".into(), Value::from(fill));
        o.insert("seed".into(), Value::from(1));
        Row {
            options: o,
            metrics: serde_json::json!({ "erasures": erasures, "policy": policy }),
        }
    }

    #[test]
    fn auto_chart_lines_per_policy() {
        let rows = vec![
            row("greedy", 0.8, 10.0),
            row("greedy", 0.9, 20.0),
            row("cat", 0.8, 5.0),
            row("cat", 0.9, 8.0),
        ];
        let c = auto_chart(&rows, None, &["erasures".into()], "t", &[]).unwrap();
        assert_eq!(c.panels.len(), 1);
        let p = &c.panels[0];
        assert_eq!(p.style, Style::Lines);
        assert_eq!(p.x, XAxis::Numeric);
        assert_eq!(p.series.len(), 2);
        assert_eq!(p.series[0].name, "greedy");
        assert_eq!(p.series[0].points, vec![(0.8, 10.0), (0.9, 20.0)]);
        assert!(auto_chart(&rows, Some("nope"), &["erasures".into()], "t", &[]).is_err());
        assert!(auto_chart(&rows, None, &["policy".into()], "t", &[]).is_err());
    }

    /// A plot that cannot be written is an error, SVG as PNG (an SVG on a full disk was
    /// reported written: plotters' file target drops the error of its last flush).
    #[test]
    fn a_plot_on_a_full_disk_is_an_error() {
        let rows = vec![row("greedy", 0.8, 10.0), row("greedy", 0.9, 20.0)];
        let c = auto_chart(&rows, None, &["erasures".into()], "t", &[]).unwrap();
        let dir = tempfile::tempdir().unwrap();
        for ext in ["svg", "png"] {
            let ok = dir.path().join(format!("ok.{ext}"));
            c.render(&ok).unwrap();
            assert!(std::fs::metadata(&ok).unwrap().len() > 100, "{ext}");
            let full = dir.path().join(format!("full.{ext}"));
            std::os::unix::fs::symlink("/dev/full", &full).unwrap();
            let e = c.render(&full).unwrap_err();
            assert!(format!("{e:#}").contains("No space left"), "{ext}: {e:#}");
        }
    }

    #[test]
    fn auto_chart_bars_without_numeric_x() {
        let rows = vec![row("greedy", 0.9, 10.0), row("cat", 0.9, 5.0)];
        let c = auto_chart(&rows, Some("policy"), &["erasures".into()], "t", &[]).unwrap();
        assert_eq!(c.panels[0].style, Style::Bars);
        assert_eq!(
            c.panels[0].x,
            XAxis::Categories(vec!["greedy".into(), "cat".into()])
        );
    }
}
