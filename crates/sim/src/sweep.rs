//! Parameter grids shared by `flashkit sim` (comma lists in flags) and `flashkit sweep`
//! (a TOML table): every `sim` option is a key whose value is one value or a list, and the
//! grid is the product of the lists. One registry ([`KEYS`]) names the keys, parses and
//! checks their values and applies them to a [`SimConfig`], so a flag and a sweep key can
//! never disagree.
//!
//! Each expanded [`Job`] carries its canonical option values (every key, defaults
//! included; null for an option with no effect on the job, so that the non-null values
//! given back as a spec run the same job) and a stable id: a 64-bit FNV-1a hash of those
//! values and of the contents of the files the job reads (device file, trace), so the same
//! job has the same id in any sweep file and resumed sweeps skip what is done, but never a
//! job whose files changed.
//! Relative paths in a sweep file are relative to its directory. Jobs are independent and
//! deterministic per seed.
//!
//! ```toml
//! # sweep.toml
//! policy = ["greedy", "cost-benefit", "cat"]
//! workload = ["hotcold:50/50", "hotcold:90/10"]
//! fill = [0.8, 0.85, 0.9]
//! written = "64MiB"
//! seed = [1, 2]
//! ```

use std::collections::BTreeMap;
use std::io::{Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{anyhow, Context, Result};
use ftl::fms::dac::{AgeRule, RegionSelect};
use ftl::fms::redistribute::{M4Average, Redistribution};
use ftl::fms::select::{AgeTransform, CbAge, Policy};
use ftl::fms::ReserveFrom;
use nand::DeviceSpec;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::driver::{Arrival, SimConfig, SimResult};
use crate::trace::{Format, TimeUnit, TraceMap, TraceOptions};
use crate::workload::WorkloadSpec;

/// Where a key's values came from, for error messages.
#[derive(Clone, Debug, PartialEq)]
pub enum Origin {
    /// A command-line flag (`--policy`).
    Flag,
    /// A sweep file and the line of the value.
    File { path: PathBuf, line: usize },
}

/// One value as written: flags give text, TOML gives typed scalars.
#[derive(Clone, Debug, PartialEq)]
pub enum Scalar {
    Text(String),
    Int(i64),
    /// A float and, from a file, its text as written (`1.0`, `1.5e6`) for messages.
    Float(f64, Option<String>),
    Bool(bool),
}

impl Scalar {
    fn text(&self) -> String {
        match self {
            Scalar::Text(s) => s.trim().to_string(),
            Scalar::Int(i) => i.to_string(),
            Scalar::Float(_, Some(raw)) => raw.trim().to_string(),
            // Debug keeps the point: 1.0, not 1.
            Scalar::Float(f, None) => format!("{f:?}"),
            Scalar::Bool(b) => b.to_string(),
        }
    }
}

/// How a key's value is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Text,
    Size,
    /// A size, or none (a device override).
    OptSize,
    Float,
    Int,
    Bool,
    OptInt,
    OptFloat,
    OptBool,
    OptDuration,
}

/// A key of the grid: its name (a `sim` flag without the dashes, `_` for `-`), how its
/// values are read, its default (as a flag would give it) and how it changes a config.
pub struct KeyDef {
    pub name: &'static str,
    kind: Kind,
    pub default: &'static str,
    check: fn(&Value) -> std::result::Result<Value, String>,
    apply: fn(&Value, &mut Draft),
}

/// A config being built from canonical values (device resolved at the end).
pub struct Draft {
    cfg: SimConfig,
    device: String,
    device_file: Option<String>,
    overrides: Vec<(&'static str, Value)>,
    redistribution: Option<Redistribution>,
    /// `arrival = "auto"`: the trace's time stamps for traces, closed otherwise.
    arrival_auto: bool,
    trace: TraceOptions,
    trace_map: TraceMap,
}

fn ok(v: &Value) -> std::result::Result<Value, String> {
    Ok(v.clone())
}

fn in_unit(v: &Value) -> std::result::Result<Value, String> {
    let f = v.as_f64().unwrap_or(-1.0);
    if (0.0..1.0).contains(&f) {
        Ok(v.clone())
    } else {
        Err(format!("{f} must be in [0, 1)"))
    }
}

/// A text key naming a value of `T` (a policy choice such as `cb_age`).
fn names<T: std::str::FromStr<Err = String>>(v: &Value) -> std::result::Result<Value, String> {
    v.as_str().unwrap_or_default().parse::<T>()?;
    Ok(v.clone())
}

/// The value a text key checked by [`names`] names.
fn named<T: std::str::FromStr>(v: &Value) -> T {
    match v.as_str().unwrap_or_default().parse() {
        Ok(t) => t,
        Err(_) => unreachable!("checked by names()"),
    }
}

fn positive(v: &Value) -> std::result::Result<Value, String> {
    match v.as_f64() {
        Some(f) if f > 0.0 && f.is_finite() => Ok(v.clone()),
        Some(f) => Err(format!("{} must be > 0", nand::quoted_number(f))),
        None => Ok(v.clone()),
    }
}

/// The write/erase cost ratio of `cleaning_cost`: positive and at most 10^9, so that the
/// cost stays a finite number (QA stop 32: 1e308 made it infinite, printed as null).
fn cost_ratio(v: &Value) -> std::result::Result<Value, String> {
    positive(v)?;
    match v.as_f64() {
        Some(f) if f > 1e9 => Err(format!("{} must be at most 1e9", nand::quoted_number(f))),
        _ => Ok(v.clone()),
    }
}

/// A device override, when given (`none` keeps the device's own value).
fn override_(d: &mut Draft, key: &'static str, v: &Value) {
    if !v.is_null() {
        d.overrides.push((key, v.clone()));
    }
}

/// A whole number for a 32-bit field: larger values are errors, never cut to 32 bits.
fn fits_u32(v: &Value) -> std::result::Result<Value, String> {
    match v.as_u64() {
        Some(x) if u32::try_from(x).is_err() => {
            Err(format!("{x} is too large (at most {})", u32::MAX))
        }
        _ => Ok(v.clone()),
    }
}

/// A seed a sweep file can hold: TOML integers are signed 64-bit, so a job whose seed is
/// above `i64::MAX` could not be given back as a spec (QA stop 32: `sim` ran it, and its
/// options were refused by `sweep`).
fn fits_i64(v: &Value) -> std::result::Result<Value, String> {
    match v.as_u64() {
        Some(x) if i64::try_from(x).is_err() => Err(format!(
            "{x} is too large (at most {}, the largest integer a sweep file holds)",
            i64::MAX
        )),
        _ => Ok(v.clone()),
    }
}

/// The value of a key checked by [`fits_u32`] (or a size checked to fit 32 bits).
fn u32_of(v: &Value) -> u32 {
    match v.as_u64().map(u32::try_from) {
        Some(Ok(x)) => x,
        _ => unreachable!("checked to fit 32 bits: {v}"),
    }
}

macro_rules! key {
    ($name:literal, $kind:ident, $default:literal, $check:expr, |$v:ident, $d:ident| $body:expr) => {
        KeyDef {
            name: $name,
            kind: Kind::$kind,
            default: $default,
            check: $check,
            apply: |$v: &Value, $d: &mut Draft| $body,
        }
    };
}

/// Every key, outermost grid dimension first (the order of expansion and of tables).
pub const KEYS: &[KeyDef] = &[
    key!(
        "device",
        Text,
        "intel-series2plus-24m",
        |v| {
            let s = v.as_str().unwrap_or_default();
            DeviceSpec::preset(s).map_err(|e| e.to_string())?;
            Ok(v.clone())
        },
        |v, d| d.device = v.as_str().unwrap_or_default().to_string()
    ),
    key!(
        "device_file",
        Text,
        "none",
        |v| Ok(if v.as_str() == Some("none") {
            Value::Null
        } else {
            v.clone()
        }),
        |v, d| d.device_file = v.as_str().map(String::from)
    ),
    key!("blocks", OptInt, "none", fits_u32, |v, d| override_(
        d, "blocks", v
    )),
    key!("page_size", OptSize, "none", fits_u32, |v, d| override_(
        d,
        "page_size",
        v
    )),
    key!("spare_size", OptSize, "none", fits_u32, |v, d| override_(
        d,
        "spare_size",
        v
    )),
    key!("pages_per_block", OptInt, "none", fits_u32, |v, d| {
        override_(d, "pages_per_block", v)
    }),
    key!("nop", OptInt, "none", fits_u32, |v, d| override_(
        d, "nop", v
    )),
    key!("in_order", OptBool, "none", ok, |v, d| override_(
        d, "in_order", v
    )),
    key!("endurance", OptInt, "none", fits_u32, |v, d| override_(
        d,
        "endurance",
        v
    )),
    key!("read_us", OptFloat, "none", ok, |v, d| override_(
        d, "read_us", v
    )),
    key!("spare_read_us", OptFloat, "none", ok, |v, d| override_(
        d,
        "spare_read_us",
        v
    )),
    key!("program_us", OptFloat, "none", ok, |v, d| override_(
        d,
        "program_us",
        v
    )),
    key!("erase_us", OptFloat, "none", ok, |v, d| override_(
        d, "erase_us", v
    )),
    key!(
        "workload",
        Text,
        "hotcold:90/10",
        |v| {
            let w = WorkloadSpec::parse(v.as_str().unwrap_or_default())?;
            Ok(Value::from(w.label()))
        },
        |v, d| d.cfg.workload =
            WorkloadSpec::parse(v.as_str().unwrap_or_default()).expect("checked")
    ),
    // How trace workloads (`trace:FILE`) are read and mapped; ignored by the others.
    key!(
        "trace_format",
        Text,
        "auto",
        |v| {
            let s = v.as_str().unwrap_or_default();
            if s == "auto" {
                return Ok(v.clone());
            }
            Ok(Value::from(Format::parse(s)?.name()))
        },
        |v, d| d.trace.format = v.as_str().and_then(|s| Format::parse(s).ok())
    ),
    key!("trace_disk", OptInt, "none", ok, |v, d| d.trace.disk =
        v.as_u64()),
    key!("trace_asu", OptInt, "none", ok, |v, d| d.trace.asu =
        v.as_u64()),
    key!(
        "blkparse_action",
        Text,
        "D",
        |v| {
            let s = v.as_str().unwrap_or_default();
            if s.is_empty() || s.contains(char::is_whitespace) {
                return Err(format!("'{s}' is not a blkparse action (e.g. D, Q, C)"));
            }
            Ok(v.clone())
        },
        |v, d| d.trace.blkparse_action = v.as_str().unwrap_or("D").to_string()
    ),
    key!(
        "trace_time_unit",
        Text,
        "auto",
        |v| {
            let s = v.as_str().unwrap_or_default();
            if s == "auto" {
                return Ok(v.clone());
            }
            Ok(Value::from(TimeUnit::parse(s)?.name()))
        },
        |v, d| d.trace.time_unit = v.as_str().and_then(|s| TimeUnit::parse(s).ok())
    ),
    key!(
        "trace_limit",
        OptInt,
        "none",
        |v| match v.as_u64() {
            Some(0) => Err("must be at least 1 (it is the number of requests replayed)".into()),
            _ => Ok(v.clone()),
        },
        |v, d| d.trace.limit = v.as_u64()
    ),
    key!("skip_bad_lines", Bool, "false", ok, |v, d| d
        .trace
        .skip_bad_lines =
        v.as_bool().unwrap_or(false)),
    key!(
        "trace_map",
        Text,
        "modulo",
        |v| {
            Ok(Value::from(
                TraceMap::parse(v.as_str().unwrap_or_default())?.name(),
            ))
        },
        |v, d| d.trace_map = TraceMap::parse(v.as_str().unwrap_or_default()).expect("checked")
    ),
    key!("written", Size, "192MiB", ok, |v, d| d.cfg.written_bytes =
        v.as_u64().unwrap_or(0)),
    key!(
        "unit",
        Size,
        "4KiB",
        |v| {
            let u = v.as_u64().unwrap_or(0);
            if u == 0 || u % 512 != 0 || u > u32::MAX as u64 {
                return Err(format!("{u} must be a positive multiple of 512 bytes"));
            }
            Ok(v.clone())
        },
        |v, d| d.cfg.unit_bytes = u32_of(v)
    ),
    key!(
        "arrival",
        Text,
        "auto",
        |v| {
            let s = v.as_str().unwrap_or_default();
            if s == "auto" {
                return Ok(v.clone());
            }
            Ok(Value::from(
                Arrival::parse(s)
                    .map_err(|e| match e.contains(": expected") {
                        true => format!("{e} or auto"),
                        false => e,
                    })?
                    .label(),
            ))
        },
        |v, d| {
            let s = v.as_str().unwrap_or_default();
            d.arrival_auto = s == "auto";
            if !d.arrival_auto {
                d.cfg.arrival = Arrival::parse(s).expect("checked");
            }
        }
    ),
    key!(
        "block_size",
        Size,
        "4KiB",
        |v| {
            let b = v.as_u64().unwrap_or(0);
            if b < 512 || !b.is_power_of_two() || b > u32::MAX as u64 {
                return Err(format!("{b} must be a power of two of at least 512 bytes"));
            }
            Ok(v.clone())
        },
        |v, d| d.cfg.fms.block_size = u32_of(v)
    ),
    key!("fill", Float, "0.90", in_unit, |v, d| d.cfg.fill =
        v.as_f64().unwrap_or(0.0)),
    key!(
        "policy",
        Text,
        "greedy,cost-benefit,cat,adaptive",
        |v| {
            let p: Policy = v.as_str().unwrap_or_default().parse()?;
            Ok(Value::from(p.name()))
        },
        |v, d| d.cfg.fms.policy = v.as_str().unwrap_or_default().parse().expect("checked")
    ),
    key!(
        "redistribution",
        Text,
        "paper",
        |v| {
            let s = v.as_str().unwrap_or_default().to_ascii_lowercase();
            if s == "paper" {
                return Ok(Value::from(s));
            }
            let r: Redistribution = s
                .parse()
                .map_err(|e: String| format!("{e} or paper (the 1999 pairing)"))?;
            Ok(Value::from(r.name()))
        },
        |v, d| d.redistribution = v.as_str().and_then(|s| s.parse().ok())
    ),
    key!(
        "regions",
        Int,
        "1",
        |v| {
            match v.as_u64() {
                Some(r @ 1..=8) => Ok(Value::from(r)),
                _ => Err(format!("{v} must be 1..8")),
            }
        },
        |v, d| d.cfg.fms.regions = v.as_u64().unwrap_or(1) as u8
    ),
    key!("region_threshold", OptDuration, "none", ok, |v, d| d
        .cfg
        .fms
        .region_threshold_ps =
        v.as_f64().map(|s| (s * 1e12) as u64)),
    key!(
        "region_select",
        Text,
        "all",
        names::<RegionSelect>,
        |v, d| d.cfg.fms.region_select = named(v)
    ),
    key!("promotion", Text, "threshold", names::<AgeRule>, |v, d| d
        .cfg
        .fms
        .promotion =
        named(v)),
    key!("demotion", Text, "threshold", names::<AgeRule>, |v, d| d
        .cfg
        .fms
        .demotion =
        named(v)),
    key!("readonly_fraction", Float, "0", in_unit, |v, d| d
        .cfg
        .readonly_fraction =
        v.as_f64().unwrap_or(0.0)),
    key!("readonly_separation", Bool, "true", ok, |v, d| d
        .cfg
        .fms
        .readonly_separation =
        v.as_bool().unwrap_or(true)),
    key!("segment_summaries", Bool, "true", ok, |v, d| d
        .cfg
        .fms
        .segment_summaries =
        v.as_bool().unwrap_or(true)),
    key!("wear_threshold", OptInt, "none", fits_u32, |v, d| d
        .cfg
        .fms
        .wear_threshold =
        v.as_u64().map(|_| u32_of(v))),
    key!("index_wear_gap", OptInt, "8", fits_u32, |v, d| d
        .cfg
        .fms
        .index_wear_gap =
        v.as_u64().map(|_| u32_of(v))),
    key!("write_erase_ratio", Float, "0.75", cost_ratio, |v, d| d
        .cfg
        .write_erase_ratio =
        v.as_f64().unwrap_or(0.75)),
    key!("low_water", Int, "2", fits_u32, |v, d| d
        .cfg
        .fms
        .low_water =
        u32_of(v)),
    key!("high_water", Int, "3", fits_u32, |v, d| d
        .cfg
        .fms
        .high_water =
        u32_of(v)),
    key!("failure_reserve", Int, "1", fits_u32, |v, d| d
        .cfg
        .fms
        .failure_reserve =
        u32_of(v)),
    key!(
        "failure_reserve_from",
        Text,
        "first-failure",
        names::<ReserveFrom>,
        |v, d| d.cfg.fms.failure_reserve_from = named(v)
    ),
    key!(
        "cat_age",
        Text,
        "saturating",
        names::<AgeTransform>,
        |v, d| d.cfg.fms.cat_age = named(v)
    ),
    key!("cb_age", Text, "written", names::<CbAge>, |v, d| d
        .cfg
        .fms
        .cb_age =
        named(v)),
    key!("m4_average", Text, "device", names::<M4Average>, |v, d| d
        .cfg
        .fms
        .m4_average =
        named(v)),
    key!("hot_half_life", OptFloat, "none", positive, |v, d| d
        .cfg
        .fms
        .hot_half_life =
        v.as_f64()),
    // (0 would make every analysis 0/0, which picks CAT: QA stop 27.)
    key!("adaptive_window", OptInt, "none", positive, |v, d| d
        .cfg
        .fms
        .adaptive_window =
        v.as_u64()),
    key!("adaptive_threshold", Float, "1.5", positive, |v, d| d
        .cfg
        .fms
        .adaptive_threshold =
        v.as_f64().unwrap_or(1.5)),
    key!("seed", Int, "1", fits_i64, |v, d| d.cfg.seed =
        v.as_u64().unwrap_or(1)),
];

/// Whether `key` is an optional key (one whose value may be none).
fn is_optional(key: &str) -> bool {
    keydef(key).is_some_and(|d| {
        matches!(
            d.kind,
            Kind::OptInt | Kind::OptSize | Kind::OptFloat | Kind::OptBool | Kind::OptDuration
        )
    })
}

/// Whether the values a key has in some jobs (their `options`) differ, as tables, labels
/// and plots see it: for a key that has no null value of its own (`policy`, `cat_age`,
/// `written`, ...), null says only that the option does not apply to that job (see
/// `Spec::expand`), so the greedy jobs' null `cat_age` beside the CAT jobs' `saturating`
/// is no variation; for a key whose null is a value (`region_threshold` none,
/// `wear_threshold` none), it is one.
pub fn varies<'a>(key: &str, values: impl IntoIterator<Item = &'a Value>) -> bool {
    let null_is_inert = keydef(key).is_some() && !is_optional(key) && key != "device_file";
    let mut first: Option<&Value> = None;
    for v in values {
        if null_is_inert && v.is_null() {
            continue;
        }
        match first {
            None => first = Some(v),
            Some(f) if f != v => return true,
            Some(_) => {}
        }
    }
    false
}

/// The key names in grid order.
pub fn key_names() -> Vec<&'static str> {
    KEYS.iter().map(|k| k.name).collect()
}

fn keydef(name: &str) -> Option<&'static KeyDef> {
    let n = name.replace('-', "_");
    KEYS.iter().find(|k| k.name == n)
}

/// The default of a key as a flag would give it (for `--help`).
pub fn default_of(name: &str) -> &'static str {
    keydef(name).map_or("", |k| k.default)
}

/// Parse a byte size: `4096`, `4KiB`, `4K`, `192MiB`, `1.5GiB`, up to EiB (binary units;
/// K/M/G/T/P/E and KB/MB/.. are read as binary too, as storage tools usually do), exactly:
/// [`crate::trace::parse_size`], one parser for every size option.
pub fn parse_size(s: &str) -> std::result::Result<u64, String> {
    crate::trace::parse_size(s)
}

/// Parse a duration: `30m`, `84m`, `2h`, `90s`, `500ms`, `1d`; a bare number is seconds.
/// Errors when the value is not finite or above [`MAX_DURATION_S`] (device time is counted
/// in 64-bit picoseconds).
pub fn parse_duration_s(s: &str) -> std::result::Result<f64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("'{s}': not a duration (e.g. 30m, 2h, 90s)"))?;
    let mul = match unit {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "us" => 1e-6,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        _ => return Err(format!("'{s}': unknown duration unit '{unit}'")),
    };
    check_duration_s(v * mul).map_err(|e| format!("'{s}': {e}"))
}

/// The longest duration device time can hold: 2^64 - 1 picoseconds, about 213 days.
pub const MAX_DURATION_S: f64 = u64::MAX as f64 / 1e12;

/// A duration in seconds that converts to picoseconds without clamping.
fn check_duration_s(v: f64) -> std::result::Result<f64, String> {
    if !v.is_finite() || v < 0.0 {
        return Err(format!("{v} is not a duration (>= 0 seconds)"));
    }
    // `u64::MAX as f64` rounds up to 2^64, so `<` keeps the picoseconds below it.
    if v * 1e12 >= u64::MAX as f64 {
        return Err(format!(
            "duration too long (at most {}s, about {} days)",
            (MAX_DURATION_S * 1e3).floor() / 1e3,
            (MAX_DURATION_S / 86400.0).floor()
        ));
    }
    Ok(v)
}

/// Read one scalar as the key's kind, giving its canonical JSON value.
fn canonical(def: &KeyDef, s: &Scalar) -> std::result::Result<Value, String> {
    let text = s.text();
    let none = matches!(s, Scalar::Text(_)) && text.eq_ignore_ascii_case("none");
    // An optional key's none is null, but where its default is a value (`index_wear_gap`,
    // 8) null would read back as that default: there it is the text "none", so that a
    // job's options given back run it (QA stop 32). Its id hashes null as before
    // ([`Job::new`]).
    let none_value = if def.default.eq_ignore_ascii_case("none") {
        Value::Null
    } else {
        Value::from("none")
    };
    let int = |t: &str| -> std::result::Result<Value, String> {
        match s {
            Scalar::Int(i) if *i >= 0 => Ok(Value::from(*i as u64)),
            Scalar::Int(i) => Err(format!("{i} must not be negative")),
            Scalar::Float(..) | Scalar::Bool(_) => Err(format!("'{t}' is not a whole number")),
            Scalar::Text(_) => t
                .parse::<u64>()
                .map(Value::from)
                .map_err(|_| format!("'{t}' is not a whole number")),
        }
    };
    let float = |t: &str| -> std::result::Result<Value, String> {
        let f = match s {
            Scalar::Int(i) => *i as f64,
            Scalar::Float(f, _) => *f,
            Scalar::Bool(_) => return Err(format!("'{t}' is not a number")),
            Scalar::Text(_) => t
                .parse::<f64>()
                .map_err(|_| format!("'{t}' is not a number"))?,
        };
        if !f.is_finite() {
            return Err(format!("'{t}' is not a finite number"));
        }
        Ok(Value::from(f))
    };
    let boolean = |t: &str| -> std::result::Result<Value, String> {
        match s {
            Scalar::Bool(b) => Ok(Value::from(*b)),
            Scalar::Text(_) => match t.to_ascii_lowercase().as_str() {
                "true" | "yes" | "on" => Ok(Value::from(true)),
                "false" | "no" | "off" => Ok(Value::from(false)),
                _ => Err(format!("'{t}' is not true or false (yes/no, on/off)")),
            },
            _ => Err(format!("'{t}' is not true or false (yes/no, on/off)")),
        }
    };
    let size = |s: &Scalar| -> std::result::Result<Value, String> {
        match s {
            Scalar::Int(i) if *i >= 0 => Ok(Value::from(*i as u64)),
            Scalar::Text(_) => Ok(Value::from(parse_size(&text)?)),
            Scalar::Float(..) => Err(format!(
                "'{text}' is a float; a size is a whole number of bytes (4096) or a \
                 string with a unit (\"1.5MiB\", \"192MiB\")"
            )),
            _ => Err(format!("'{text}' is not a size (e.g. 4096, 4KiB, 192MiB)")),
        }
    };
    let v = match def.kind {
        Kind::Text => match s {
            Scalar::Text(_) => Value::from(text.clone()),
            _ => return Err(format!("'{text}' must be a string")),
        },
        Kind::Size => size(s)?,
        Kind::OptSize if none => none_value,
        Kind::OptSize => size(s)?,
        Kind::Float => float(&text)?,
        Kind::Int => int(&text)?,
        Kind::Bool => boolean(&text)?,
        Kind::OptInt if none => none_value,
        Kind::OptInt => int(&text)?,
        Kind::OptFloat if none => none_value,
        Kind::OptFloat => float(&text)?,
        Kind::OptBool if none => none_value,
        Kind::OptBool => boolean(&text)?,
        Kind::OptDuration if none => none_value,
        Kind::OptDuration => match s {
            Scalar::Int(i) => Value::from(check_duration_s(*i as f64)?),
            Scalar::Float(f, _) => Value::from(check_duration_s(*f)?),
            Scalar::Text(_) => Value::from(parse_duration_s(&text)?),
            Scalar::Bool(_) => return Err(format!("'{text}' is not a duration")),
        },
    };
    if v.is_null() || (v == "none" && is_optional(def.name)) {
        return Ok(v);
    }
    (def.check)(&v)
}

struct Entry {
    values: Vec<Value>,
    origin: Origin,
}

/// The items of a TOML array as written (`[1, 1.0, "a,b"]` gives `1`, `1.0`, `"a,b"`),
/// for messages that quote a value; `None` when `src` is not a flat array this simple
/// scanner understands.
fn array_items(src: &str) -> Option<Vec<String>> {
    let inner = src.trim().strip_prefix('[')?.strip_suffix(']')?;
    let mut items = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut comment = false;
    for c in inner.chars() {
        if comment {
            comment = c != '\n';
            continue;
        }
        match quote {
            Some(q) => {
                cur.push(c);
                if escaped {
                    escaped = false;
                } else if c == '\\' && q == '"' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '"' | '\'' => {
                    quote = Some(c);
                    cur.push(c);
                }
                '#' => comment = true,
                '[' | ']' | '{' | '}' => return None,
                ',' => items.push(std::mem::take(&mut cur).trim().to_string()),
                _ => cur.push(c),
            },
        }
    }
    if quote.is_some() {
        return None;
    }
    let last = cur.trim();
    if !last.is_empty() {
        items.push(last.to_string());
    }
    Some(items)
}

/// The most jobs one grid may hold. Every job is built (its config and canonical options,
/// some KiB each) before the first runs, and a sweep's results are kept for its table and
/// plot; 100 000 jobs take about 650 MiB and 8 s to expand (a `--dry-run` measured on 2
/// cores), while a grid of millions would exhaust memory or run for weeks, which is never
/// what a spec meant.
pub const MAX_GRID_JOBS: u64 = 100_000;

/// The most worker threads a sweep may ask for (`--jobs`): far above any core count, and
/// low enough that spawning them cannot exhaust the system.
pub const MAX_THREADS: usize = 1024;

/// A grid: for each key given, its list of values (keys not given take their default).
#[derive(Default)]
pub struct Spec {
    entries: BTreeMap<&'static str, Entry>,
}

/// Name a key in an error: `--pages-per-block` for a flag, `FILE:LINE: pages_per_block`
/// for a sweep file.
fn located(key: &str, origin: &Origin, msg: impl std::fmt::Display) -> anyhow::Error {
    match origin {
        // The booleans whose flags turn them off.
        Origin::Flag if key == "readonly_separation" => anyhow!("--no-readonly-separation: {msg}"),
        Origin::Flag if key == "segment_summaries" => anyhow!("--no-segment-summaries: {msg}"),
        Origin::Flag => anyhow!("--{}: {msg}", key.replace('_', "-")),
        Origin::File { path, line } => anyhow!("{}:{line}: {key}: {msg}", path.display()),
    }
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

fn unknown_key(key: &str) -> String {
    let n = key.replace('-', "_");
    let near = KEYS
        .iter()
        .map(|k| (edit_distance(&n, k.name), k.name))
        .min()
        .filter(|(d, _)| *d <= 2)
        .map(|(_, k)| format!("did you mean '{k}'? "))
        .unwrap_or_default();
    format!(
        "unknown key '{key}' ({near}known: {})",
        key_names().join(", ")
    )
}

impl Spec {
    pub fn new() -> Spec {
        Spec::default()
    }

    /// Set a key's values; each is checked now, so errors name the key and its origin.
    pub fn set(&mut self, key: &str, values: Vec<Scalar>, origin: Origin) -> Result<()> {
        let def = keydef(key).ok_or_else(|| match &origin {
            Origin::Flag => anyhow!("{}", unknown_key(key)),
            Origin::File { path, line } => {
                anyhow!("{}:{line}: {}", path.display(), unknown_key(key))
            }
        })?;
        if values.is_empty() {
            return Err(located(def.name, &origin, "empty list"));
        }
        let mut out: Vec<Value> = Vec::new();
        for s in &values {
            let v = canonical(def, s).map_err(|e| located(def.name, &origin, e))?;
            if !out.contains(&v) {
                out.push(v);
            }
        }
        self.entries.insert(
            def.name,
            Entry {
                values: out,
                origin,
            },
        );
        Ok(())
    }

    /// Set a key from flag text (`--policy greedy,cat` gives `["greedy", "cat"]`).
    pub fn set_flag<S: AsRef<str>>(&mut self, key: &str, values: &[S]) -> Result<()> {
        self.set(
            key,
            values
                .iter()
                .map(|v| Scalar::Text(v.as_ref().to_string()))
                .collect(),
            Origin::Flag,
        )
    }

    /// The files the grid reads, with the key and where it was given: trace workloads
    /// (`trace:FILE`, also inside `phases:` should phases ever hold traces) and device
    /// files. Outputs must not name them.
    pub fn inputs(&self) -> Vec<(&'static str, PathBuf, Origin)> {
        let mut out = Vec::new();
        for (key, e) in &self.entries {
            for v in &e.values {
                let Some(s) = v.as_str() else { continue };
                match *key {
                    "workload" => {
                        let Ok(w) = WorkloadSpec::parse(s) else {
                            continue;
                        };
                        let parts = match w {
                            WorkloadSpec::Phases(p) => p,
                            w => vec![w],
                        };
                        for p in parts {
                            if let WorkloadSpec::Trace(t) = p {
                                out.push((*key, t.path.clone(), e.origin.clone()));
                            }
                        }
                    }
                    "device_file" => out.push((*key, PathBuf::from(s), e.origin.clone())),
                    _ => {}
                }
            }
        }
        out
    }

    /// Whether a key was given.
    pub fn has(&self, key: &str) -> bool {
        keydef(key).is_some_and(|d| self.entries.contains_key(d.name))
    }

    /// Read a sweep file (a flat TOML table of keys to values or arrays of values).
    pub fn from_toml_file(path: &Path) -> Result<Spec> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("sweep spec {}", path.display()))?;
        Spec::from_toml_str(&text, path)
    }

    /// Parse sweep-file text; `path` names the file in errors.
    pub fn from_toml_str(text: &str, path: &Path) -> Result<Spec> {
        let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
        let table: BTreeMap<String, toml::Spanned<toml::Value>> =
            toml::from_str(text).map_err(|e| {
                // A dotted key (`policy.x = ...`) or a `[table]` makes a table, which the
                // spanned reading reports as a type error about strings (QA stop 27): say
                // what is wrong instead, at the line that starts it.
                if let Ok(t) = toml::from_str::<toml::Table>(text) {
                    if let Some((k, _)) = t.iter().find(|(_, v)| v.is_table()) {
                        let line = text
                            .lines()
                            .position(|l| {
                                let l = l.trim_start().trim_start_matches('[').trim_start();
                                l.starts_with(k.as_str())
                                    && l[k.len()..].trim_start().starts_with(['.', ']'])
                            })
                            .map_or(1, |i| i + 1);
                        return anyhow!(
                            "{}:{line}: {k}: tables are not supported: write every key at the top level",
                            path.display()
                        );
                    }
                }
                let line = e.span().map_or(1, |s| line_of(s.start));
                // The key of a `key = value` line the error is on, when the parser's message
                // does not name it (`number too large to fit in target type`: QA stop 27).
                let key = text
                    .lines()
                    .nth(line - 1)
                    .and_then(|l| l.split_once('='))
                    .map(|(k, _)| k.trim())
                    .filter(|k| {
                        !k.is_empty()
                            && k.chars()
                                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                    })
                    .map(|k| format!("{k}: "))
                    .unwrap_or_default();
                anyhow!(
                    "{}:{line}: {key}{}",
                    path.display(),
                    e.message().split_whitespace().collect::<Vec<_>>().join(" ")
                )
            })?;
        let mut entries: Vec<(usize, String, std::ops::Range<usize>, toml::Value)> = table
            .into_iter()
            .map(|(k, v)| (line_of(v.span().start), k, v.span(), v.into_inner()))
            .collect();
        entries.sort_by_key(|e| e.0);
        // One key spelled twice (`write_erase_ratio` and `write-erase-ratio`): TOML sees
        // two keys, and the second would silently win (QA stop 27).
        let mut seen: BTreeMap<String, (usize, &str)> = BTreeMap::new();
        for (line, key, _, _) in &entries {
            if let Some((first, as_first)) = seen.insert(key.replace('-', "_"), (*line, key)) {
                anyhow::bail!(
                    "{}:{line}: {key}: set again (line {first} sets it as {as_first}); give each key once",
                    path.display()
                );
            }
        }
        let mut spec = Spec::new();
        for (line, key, span, value) in entries {
            let origin = Origin::File {
                path: path.to_path_buf(),
                line,
            };
            let scalar = |v: &toml::Value, raw: Option<&str>| -> Result<Scalar> {
                Ok(match v {
                    toml::Value::String(s) => Scalar::Text(s.clone()),
                    toml::Value::Integer(i) => Scalar::Int(*i),
                    toml::Value::Float(f) => Scalar::Float(*f, raw.map(String::from)),
                    toml::Value::Boolean(b) => Scalar::Bool(*b),
                    toml::Value::Datetime(_) => {
                        return Err(located(&key, &origin, "dates are not values here"))
                    }
                    toml::Value::Array(_) => {
                        return Err(located(&key, &origin, "lists cannot nest"))
                    }
                    toml::Value::Table(_) => {
                        return Err(located(
                            &key,
                            &origin,
                            "tables are not supported: write every key at the top level",
                        ))
                    }
                })
            };
            let src = text.get(span.clone()).unwrap_or_default();
            let values = match &value {
                toml::Value::Array(items) => {
                    // The items as written, when the array could be split (messages only).
                    let raw = array_items(src).filter(|r| r.len() == items.len());
                    items
                        .iter()
                        .enumerate()
                        .map(|(i, v)| scalar(v, raw.as_ref().map(|r| r[i].as_str())))
                        .collect::<Result<Vec<_>>>()?
                }
                v => vec![scalar(v, Some(src))?],
            };
            // Files a spec names are found beside the spec, wherever it is run from.
            let values = match path.parent() {
                Some(dir) => values
                    .into_iter()
                    .map(|v| relative_to(dir, &key, v))
                    .collect(),
                None => values,
            };
            spec.set(&key, values, origin)?;
        }
        Ok(spec)
    }

    /// The files a job with these canonical options reads (its device file, its trace).
    fn job_inputs(options: &BTreeMap<String, Value>) -> Vec<(&'static str, PathBuf)> {
        let mut out = Vec::new();
        if let Some(f) = options.get("device_file").and_then(Value::as_str) {
            out.push(("device_file", PathBuf::from(f)));
        }
        if let Some(w) = options.get("workload").and_then(Value::as_str) {
            if let Ok(WorkloadSpec::Trace(t)) = WorkloadSpec::parse(w) {
                out.push(("workload", t.path.clone()));
            }
        }
        out
    }

    fn values_of(&self, def: &KeyDef) -> Result<(Vec<Value>, Origin)> {
        match self.entries.get(def.name) {
            Some(e) => Ok((e.values.clone(), e.origin.clone())),
            None => {
                let mut out = Vec::new();
                for part in def.default.split(',') {
                    out.push(
                        canonical(def, &Scalar::Text(part.to_string()))
                            .map_err(|e| anyhow!("default of {}: {e}", def.name))?,
                    );
                }
                Ok((out, Origin::Flag))
            }
        }
    }

    /// Each key's number of values (defaults included), in grid order.
    fn dims(&self) -> Vec<(&'static str, usize)> {
        KEYS.iter()
            .map(|d| {
                let n = self
                    .entries
                    .get(d.name)
                    .map_or_else(|| d.default.split(',').count(), |e| e.values.len());
                (d.name, n)
            })
            .collect()
    }

    /// The number of jobs the grid holds (`usize::MAX` when the product overflows).
    pub fn len(&self) -> usize {
        self.dims()
            .iter()
            .try_fold(1usize, |acc, (_, n)| acc.checked_mul(*n))
            .unwrap_or(usize::MAX)
    }

    /// Refuse a grid above [`MAX_GRID_JOBS`] before anything is built: the error names the
    /// spec and every list of several values.
    fn check_size(&self) -> Result<()> {
        let dims = self.dims();
        let total = dims
            .iter()
            .try_fold(1u64, |acc, (_, n)| acc.checked_mul(*n as u64));
        if total.is_some_and(|t| t <= MAX_GRID_JOBS) {
            return Ok(());
        }
        let lists: Vec<String> = dims
            .iter()
            .filter(|(_, n)| *n > 1)
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        let count = match total {
            Some(t) => format!("{t} jobs"),
            None => format!("more than {} jobs", u64::MAX),
        };
        let source = self
            .entries
            .values()
            .find_map(|e| match &e.origin {
                Origin::File { path, .. } => Some(format!("{}: ", path.display())),
                Origin::Flag => None,
            })
            .unwrap_or_default();
        Err(anyhow!(
            "{source}grid too large: {count} ({}), at most {MAX_GRID_JOBS}; split it into \
             smaller sweeps",
            lists.join(" x ")
        ))
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Expand the grid (product of every key's values, [`KEYS`] order, last key fastest).
    pub fn expand(&self) -> Result<Vec<Job>> {
        self.check_size()?;
        let mut dims: Vec<(&KeyDef, Vec<Value>, Origin)> = Vec::new();
        for def in KEYS {
            let (v, o) = self.values_of(def)?;
            dims.push((def, v, o));
        }
        let total: usize = dims.iter().map(|d| d.1.len()).product();
        let mut jobs = Vec::with_capacity(total);
        let mut idx = vec![0usize; dims.len()];
        let mut devices: BTreeMap<String, std::result::Result<DeviceSpec, String>> =
            BTreeMap::new();
        // Each input file is read once per expansion, however many jobs read it.
        let mut contents: BTreeMap<PathBuf, String> = BTreeMap::new();
        for _ in 0..total {
            let mut options = BTreeMap::new();
            for (i, (def, vals, _)) in dims.iter().enumerate() {
                options.insert(def.name.to_string(), vals[idx[i]].clone());
            }
            let config = build(&options, &dims, &mut devices)?;
            let inputs: Vec<String> = Spec::job_inputs(&options)
                .into_iter()
                .map(|(key, path)| {
                    let id = contents
                        .entry(path.clone())
                        .or_insert_with(|| file_identity(&path));
                    format!("{key} {} {id}", path.display())
                })
                .collect();
            jobs.push(Job::new(options, config, &inputs));
            // Odometer: last key fastest.
            for i in (0..dims.len()).rev() {
                idx[i] += 1;
                if idx[i] < dims[i].1.len() {
                    break;
                }
                idx[i] = 0;
            }
        }
        self.check_effects(&jobs)?;
        without_inert_options(jobs, &dims, &mut devices)
    }

    /// Every value given for a key must change at least one job: an option that would be
    /// silently ignored (`written` with a trace workload, `arrival = "trace"` without one,
    /// `cb_age` without the cost-benefit policy, ...) is an error saying why. Keys left at
    /// their defaults are not checked.
    fn check_effects(&self, jobs: &[Job]) -> Result<()> {
        for (key, entry) in &self.entries {
            for v in &entry.values {
                let mut reason = None;
                for j in jobs.iter().filter(|j| j.options.get(*key) == Some(v)) {
                    match no_effect(key, v, &j.options, &j.config) {
                        Some(r) => reason = Some(r),
                        None => {
                            reason = None;
                            break;
                        }
                    }
                }
                if let Some(why) = reason {
                    let what = if entry.values.len() > 1 {
                        format!("{} has no effect", value_text(v))
                    } else {
                        "has no effect".to_string()
                    };
                    return Err(located(key, &entry.origin, format!("{what}: {why}")));
                }
            }
        }
        Ok(())
    }
}

/// Jobs whose options that had no effect on them are null, as `sim --help` says: `device`
/// when a `device_file` gives the device, `written` and `unit` for a trace workload (it
/// brings its own requests), and every other option [`no_effect`] names for the job (the
/// trace options of a synthetic workload, `cat_age` without the CAT or adaptive policy,
/// the DAC options with one region, the redistribution with several, `segment_summaries`
/// on a device that keeps none, ...). A job's options are so a self-contained job
/// specification: given back to `sim` or `sweep` (the non-null values), they run the same
/// job, with the same id, instead of being refused for giving options without effect.
///
/// A null option runs as its default (the job's configuration is built again from the
/// defaults when it had another value), and the id hashes that default, so a job keeps
/// the id it always had when its inert options were at their defaults: the keys `device`,
/// `written` and `unit` hash as null, as they did before the others were nulled. Jobs that
/// become the same (a grid of `written` values with a trace among the workloads, of
/// `cb_age` values beside the greedy policy, of `paper` and the redistribution it pairs
/// with a policy) are one job, the first.
fn without_inert_options(
    jobs: Vec<Job>,
    dims: &[(&KeyDef, Vec<Value>, Origin)],
    devices: &mut BTreeMap<String, std::result::Result<DeviceSpec, String>>,
) -> Result<Vec<Job>> {
    // Hashed as null (these were nulled, in the options and in the id, first).
    const NULL_IN_ID: [&str; 3] = ["device", "written", "unit"];
    let mut seen = std::collections::BTreeSet::new();
    let mut runs = std::collections::BTreeSet::new();
    let mut out = Vec::with_capacity(jobs.len());
    for job in jobs {
        let inert: Vec<&'static str> = KEYS
            .iter()
            .map(|d| d.name)
            .filter(|k| no_effect(k, &job.options[*k], &job.options, &job.config).is_some())
            .collect();
        let job = if inert.is_empty() {
            job
        } else {
            // What runs: the inert options at their defaults.
            let mut ran = job.options.clone();
            for k in &inert {
                let def = keydef(k).expect("a key");
                let (defaults, _) = Spec::new().values_of(def)?;
                ran.insert(k.to_string(), defaults[0].clone());
            }
            let config = if ran == job.options {
                job.config
            } else {
                build(&ran, dims, devices)?
            };
            let mut hashed = ran;
            let mut shown = job.options;
            for k in &inert {
                shown.insert(k.to_string(), Value::Null);
                if NULL_IN_ID.contains(k) {
                    hashed.insert(k.to_string(), Value::Null);
                } else if LATE_KEYS.iter().any(|(n, _)| n == k) {
                    // A key added later, inert here: out of the hash whatever its default,
                    // as in every job before it existed.
                    hashed.remove(*k);
                }
            }
            Job {
                options: shown,
                ..Job::new(hashed, config, &job.inputs)
            }
        };
        // A job that runs what an earlier one runs: the same id, or the same options once
        // `paper` is read as the redistribution it gives the policy (`--redistribution
        // paper,m1` with greedy: QA stop 28 found one run under two ids).
        if seen.insert(job.id.clone()) && runs.insert(resolved_options(&job.options)) {
            out.push(job);
        }
    }
    Ok(out)
}

/// A job's options with `paper` read as the redistribution it gives the job's policy, as
/// canonical text: two jobs with the same run the same configuration.
fn resolved_options(options: &BTreeMap<String, Value>) -> String {
    let mut o = options.clone();
    if let Some(r) = redistribution(&o) {
        o.insert("redistribution".into(), Value::from(r.name()));
    }
    serde_json::to_string(&o).expect("options serialize")
}

/// Whether a result written with options `old` is of the job with options `job` once
/// `paper` is resolved: keys added later ([`LATE_KEYS`]) that `old` lacks are left out of
/// `job`'s where null (inert) or at their old behaviour.
fn same_run(job: &BTreeMap<String, Value>, old: &BTreeMap<String, Value>) -> bool {
    let mut j = job.clone();
    j.retain(|k, v| {
        old.contains_key(k)
            || !LATE_KEYS
                .iter()
                .any(|(n, d)| k == n && (v.is_null() || d(v)))
    });
    resolved_options(&j) == resolved_options(old)
}

/// A canonical value as written in a flag (`none` for null, strings unquoted).
fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "none".into(),
        other => other.to_string(),
    }
}

/// Why `key` set to `value` changes nothing in a job with these `options`, built as
/// `cfg` (`None`: it does change it).
fn no_effect(
    key: &str,
    value: &Value,
    options: &BTreeMap<String, Value>,
    cfg: &SimConfig,
) -> Option<String> {
    if key == "segment_summaries" {
        return no_summaries(cfg);
    }
    // A spare read's cost on a device without a spare area: nothing reads one (QA stop
    // 27: accepted, recorded, and another job id for the same results).
    if key == "spare_read_us" && !value.is_null() && cfg.device.geometry.spare_size == 0 {
        return Some(format!(
            "the device ({}) has no spare area, so no spare read is made",
            cfg.device.name
        ));
    }
    no_effect_static(key, value, options).map(String::from)
}

/// Why a job built as `cfg` writes no segment summaries whatever `segment_summaries` says
/// ([`ftl::fms::layout::Layout::why_no_summaries`]).
fn no_summaries(cfg: &SimConfig) -> Option<String> {
    ftl::fms::layout::Layout::why_no_summaries(
        &cfg.device.geometry,
        cfg.fms.block_size,
        &cfg.device.name,
    )
}

/// [`no_effect`] for the keys whose effect the options alone decide.
fn no_effect_static(
    key: &str,
    value: &Value,
    options: &BTreeMap<String, Value>,
) -> Option<&'static str> {
    let text = |k: &str| options.get(k).and_then(Value::as_str).unwrap_or_default();
    let trace = text("workload").starts_with("trace:");
    let policy = text("policy");
    let dac = options.get("regions").and_then(Value::as_u64).unwrap_or(1) > 1;
    match key {
        "device" if !options.get("device_file").is_none_or(Value::is_null) => {
            Some("a device_file gives the device (its own name labels the results)")
        }
        "written" | "unit" if trace => {
            Some("a trace workload (trace:FILE) brings its own requests and their sizes")
        }
        "arrival" if !trace && value.as_str() == Some("trace") => Some(
            "only trace workloads have time stamps (synthetic requests use closed or poisson:RATE)",
        ),
        "trace_format" | "trace_disk" | "trace_asu" | "blkparse_action" | "trace_time_unit"
        | "trace_limit" | "skip_bad_lines" | "trace_map"
            if !trace =>
        {
            Some("it applies to trace workloads (trace:FILE) only")
        }
        "cat_age" if !matches!(policy, "cat" | "adaptive") => {
            Some("it applies to the cat and adaptive policies only")
        }
        "cb_age" if policy != "cost-benefit" => Some("it applies to the cost-benefit policy only"),
        "m4_average" if dac || redistribution(options) != Some(Redistribution::M4) => Some(
            "it applies to the m4 redistribution only (not with DAC regions; `paper` pairs m4 \
             with cost-benefit)",
        ),
        "adaptive_window" | "adaptive_threshold" if policy != "adaptive" => {
            Some("it applies to the adaptive policy only")
        }
        "region_threshold" | "region_select" | "promotion" | "demotion" if !dac => {
            Some("it applies to DAC (regions > 1) only")
        }
        "redistribution" if dac => Some("DAC regions (regions > 1) replace the redistribution"),
        "region_threshold"
            if text("promotion") == "region-average" && text("demotion") == "region-average" =>
        {
            Some("with region-average promotion and demotion no threshold is read")
        }
        "hot_half_life"
            if dac || !matches!(redistribution(options), Some(r) if r.uses_hot_degree()) =>
        {
            Some(
                "hot degrees are used only by the m3 and m6 redistributions (not with DAC regions)",
            )
        }
        "failure_reserve_from"
            if options.get("failure_reserve").and_then(Value::as_u64) == Some(0) =>
        {
            Some("there is no failure reserve (failure_reserve is 0)")
        }
        "readonly_separation"
            if options.get("readonly_fraction").and_then(Value::as_f64) == Some(0.0) =>
        {
            Some("there is no read-only data (readonly_fraction is 0)")
        }
        _ => None,
    }
}

/// The redistribution a job uses (`paper` resolved by its policy).
fn redistribution(options: &BTreeMap<String, Value>) -> Option<Redistribution> {
    let text = |k: &str| options.get(k).and_then(Value::as_str).unwrap_or_default();
    match text("redistribution") {
        "paper" => text("policy")
            .parse::<Policy>()
            .ok()
            .map(crate::reproduce::paper_pairing),
        r => r.parse().ok(),
    }
}

fn origin_of<'a>(dims: &'a [(&KeyDef, Vec<Value>, Origin)], key: &str) -> &'a Origin {
    dims.iter()
        .find(|d| d.0.name == key)
        .map_or(&Origin::Flag, |d| &d.2)
}

/// A device description file (see [`DeviceSpec::from_file`]); errors name the file.
pub fn load_device_file(path: &Path) -> std::result::Result<DeviceSpec, String> {
    DeviceSpec::from_file(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn build(
    options: &BTreeMap<String, Value>,
    dims: &[(&KeyDef, Vec<Value>, Origin)],
    devices: &mut BTreeMap<String, std::result::Result<DeviceSpec, String>>,
) -> Result<SimConfig> {
    let mut d = Draft {
        cfg: SimConfig::flagship(),
        device: String::new(),
        device_file: None,
        overrides: Vec::new(),
        redistribution: None,
        arrival_auto: true,
        trace: TraceOptions::default(),
        trace_map: TraceMap::default(),
    };
    for def in KEYS {
        let v = &options[def.name];
        (def.apply)(v, &mut d);
    }
    // Device: preset or file, then overrides, validated together.
    let base_key = d
        .device_file
        .clone()
        .unwrap_or_else(|| format!("preset:{}", d.device));
    let base = devices
        .entry(base_key)
        .or_insert_with(|| match &d.device_file {
            Some(f) => load_device_file(Path::new(f)),
            None => DeviceSpec::preset(&d.device).map_err(|e| e.to_string()),
        })
        .clone()
        .map_err(|e| {
            let key = if d.device_file.is_some() {
                "device_file"
            } else {
                "device"
            };
            located(key, origin_of(dims, key), e)
        })?;
    let mut spec = base;
    for (k, v) in &d.overrides {
        let g = &mut spec.geometry;
        let t = &mut spec.timing;
        match *k {
            "blocks" => g.blocks = u32_of(v),
            "page_size" => g.page_size = u32_of(v),
            "spare_size" => g.spare_size = u32_of(v),
            "pages_per_block" => g.pages_per_block = u32_of(v),
            "nop" => g.nop = u32_of(v),
            "in_order" => g.in_order = v.as_bool().unwrap_or(false),
            "endurance" => spec.endurance = u32_of(v),
            "read_us" => t.read_us = v.as_f64().unwrap_or(0.0),
            "spare_read_us" => t.spare_read_us = v.as_f64().unwrap_or(0.0),
            "program_us" => t.program_us = v.as_f64().unwrap_or(0.0),
            "erase_us" => t.erase_us = v.as_f64().unwrap_or(0.0),
            _ => unreachable!("override key {k}"),
        }
    }
    if !d.overrides.is_empty() {
        spec.validate().map_err(|e| {
            let keys: Vec<&str> = d.overrides.iter().map(|o| o.0).collect();
            let key = keys
                .iter()
                .find(|k| e.to_string().contains(*k))
                .copied()
                .unwrap_or(keys[0]);
            located(
                key,
                origin_of(dims, key),
                format!("device {}: {e}", spec.name),
            )
        })?;
    }
    d.cfg.device = spec;
    d.cfg.device_file = d.device_file.clone();
    let is_trace = matches!(d.cfg.workload, WorkloadSpec::Trace(_));
    if let WorkloadSpec::Trace(t) = &mut d.cfg.workload {
        t.options = d.trace.clone();
        t.map = d.trace_map;
    }
    if d.arrival_auto {
        d.cfg.arrival = if is_trace {
            Arrival::Trace
        } else {
            Arrival::Closed
        };
    }
    let p = d.cfg.fms.policy;
    d.cfg.fms.redistribution = d
        .redistribution
        .unwrap_or_else(|| crate::reproduce::paper_pairing(p));
    d.cfg.fms.validate().map_err(|e| {
        let msg = e.to_string();
        // The key the message is about comes first ("high_water: 2 must be above
        // low_water (2; ...)" is about high_water).
        let key = KEYS
            .iter()
            .filter_map(|k| msg.find(k.name).map(|at| (at, k.name)))
            .min()
            .map_or("policy", |(_, k)| k);
        located(key, origin_of(dims, key), msg)
    })?;
    Ok(d.cfg)
}

/// A relative path in a sweep file's `device_file` or `trace:FILE` workload, made
/// relative to the directory of the spec (`dir`) instead of the current directory:
/// `flashkit sweep sub/t.toml` with `workload = "trace:w.csv"` reads `sub/w.csv`. The
/// option's value becomes that path, as a `sim` flag run from here would name the file,
/// so the job is the same job (same id) as that `sim` run.
fn relative_to(dir: &Path, key: &str, v: Scalar) -> Scalar {
    let Scalar::Text(text) = &v else { return v };
    let join = |p: &str| -> Option<String> {
        let p = Path::new(p);
        if p.as_os_str().is_empty() || p.is_absolute() {
            return None;
        }
        // Without `.` components: `./t.toml` and `t.toml` name the same files.
        let joined: PathBuf = dir
            .join(p)
            .components()
            .filter(|c| !matches!(c, std::path::Component::CurDir))
            .collect();
        Some(joined.to_string_lossy().into_owned())
    };
    let t = text.trim();
    let resolved = match key {
        "device_file" if !t.eq_ignore_ascii_case("none") => join(t),
        // As `WorkloadSpec::parse` reads it: the path is what follows `trace:`.
        "workload" => t
            .strip_prefix("trace:")
            .and_then(join)
            .map(|p| format!("trace:{p}")),
        _ => None,
    };
    resolved.map_or(v, Scalar::Text)
}

/// What a job's id records of a file it reads: its size and a 64-bit FNV-1a hash of its
/// bytes (`unreadable: …` when it cannot be read; such a job fails when it runs, with the
/// reader's error, and records no result).
///
/// The whole content is hashed rather than trusting size and modification time: an edit
/// that keeps the size within the same second, a copy that keeps the time (`cp -p`,
/// `rsync -t`, an archive) or a file replaced by another would otherwise resume a sweep
/// with results of data it no longer holds, while hashing costs little next to the
/// simulation: the file is streamed in 1 MiB pieces (a trace of several GB needs no
/// memory), once per distinct file per sweep, at about 1 GB/s, and every job that reads
/// the trace parses all of it anyway, which is several times slower.
fn file_identity(path: &Path) -> String {
    use std::io::Read;
    let hash = || -> std::io::Result<(u64, u64)> {
        // (Checked before the open as well: opening a FIFO waits for a writer.)
        if !std::fs::metadata(path)?.is_file() {
            return Err(std::io::Error::other("not a regular file"));
        }
        let mut f = std::fs::File::open(path)?;
        // A pipe or a device may never end (`/dev/zero` spun for ever: QA stop 27); the
        // job then fails where the file is read, in one line.
        if !f.metadata()?.is_file() {
            return Err(std::io::Error::other("not a regular file"));
        }
        let mut buf = vec![0u8; 1 << 20];
        let (mut h, mut len) = (FNV_OFFSET, 0u64);
        loop {
            let n = match f.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            h = fnv1a_more(h, &buf[..n]);
            len += n as u64;
        }
        Ok((len, h))
    };
    match hash() {
        Ok((len, h)) => format!("{len} {h:016x}"),
        Err(e) => format!("unreadable: {e}"),
    }
}

/// One point of the grid.
#[derive(Clone, Debug)]
pub struct Job {
    /// Stable id: 16 hex digits of the FNV-1a hash of the canonical options and, for a
    /// job that reads files (a `device_file`, a `trace:FILE` workload), of their
    /// contents (`file_identity`): the same options on an edited file are another job.
    pub id: String,
    /// Every key's canonical value, null for the options that have no effect on this job
    /// (see `without_inert_options`).
    pub options: BTreeMap<String, Value>,
    pub config: SimConfig,
    /// What the id hashes of the files the job reads: a line per file (key, path,
    /// `file_identity`), empty for a job without files.
    pub inputs: Vec<String>,
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// 64-bit FNV-1a.
fn fnv1a(bytes: &[u8]) -> u64 {
    fnv1a_more(FNV_OFFSET, bytes)
}

/// 64-bit FNV-1a continued from `h` over more bytes.
fn fnv1a_more(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Whether a key's canonical value is its default.
type AtDefault = fn(&Value) -> bool;

/// Keys added to [`KEYS`] after job ids were first published, each with a test for its
/// default: [`Job::new`] leaves a key out of the hash at its default, so every job that
/// ran before the key existed keeps its id.
const LATE_KEYS: &[(&str, AtDefault)] = &[
    // Stop 20: the index log moves when its segment wears ahead (`FmsConfig::index_wear_gap`).
    ("index_wear_gap", |v| v.as_u64() == Some(8)),
    // Stop 23: segment summaries in spare mode (`FmsConfig::segment_summaries`).
    ("segment_summaries", |v| v.as_bool() == Some(true)),
    // Stop 29: what M4 averages over (`FmsConfig::m4_average`). Its old behaviour, `data`,
    // keeps the old ids; M4 jobs at the new default `device` take new ids, since it can
    // change their results (cost-benefit's do; greedy's victims, the emptiest segments,
    // fell below both averages in every run we made, but nothing bounds them there).
    // Every other job has it inert: out of its hash.
    ("m4_average", |v| v.as_str() == Some("data")),
    // Stop 33: free segments kept beyond the water marks once the medium has failed
    // (`FmsConfig::failure_reserve`). Jobs whose blocks never go bad run as before, and
    // keep their ids; a result from before the key in which blocks went bad
    // (`retired_segments` > 0) is refused as stale when a sweep resumes (`load_done`).
    ("failure_reserve", |v| v.as_u64() == Some(1)),
    // Stop 34: the reserve from the start (`FmsConfig::failure_reserve_from`); at its
    // default every job runs as before.
    ("failure_reserve_from", |v| {
        v.as_str() == Some("first-failure")
    }),
];

impl Job {
    /// `inputs`: one line per file the job reads (key, path, [`file_identity`]); a job
    /// without files hashes exactly what it always did, so its id never changes.
    fn new(options: BTreeMap<String, Value>, config: SimConfig, inputs: &[String]) -> Job {
        // A key added after ids were first published hashes only away from its default,
        // so a job at the default keeps its id (results files stay resumable).
        // An optional key's none hashes null, as it did when it was null (`canonical`).
        const NULL: Value = Value::Null;
        let hashed: BTreeMap<&String, &Value> = options
            .iter()
            .filter(|(k, v)| !LATE_KEYS.iter().any(|(n, d)| k.as_str() == *n && d(v)))
            .map(|(k, v)| {
                (
                    k,
                    if v == "none" && is_optional(k) {
                        &NULL
                    } else {
                        v
                    },
                )
            })
            .collect();
        let canon = serde_json::to_string(&hashed).expect("options serialize");
        let mut text = format!("flashkit-sim-v1\n{canon}");
        for line in inputs {
            text.push_str("\ninput ");
            text.push_str(line);
        }
        let id = format!("{:016x}", fnv1a(text.as_bytes()));
        Job {
            id,
            options,
            config,
            inputs: inputs.to_vec(),
        }
    }
}

/// The `sim` job that runs `cfg`: the options a `flashkit sim` (or sweep) run needs to run
/// exactly this configuration, and that run's id, so a `reproduce` result names the job
/// that reproduces it alone (and matches a sweep's record of the same run). Only the
/// options whose values differ from the flagship's are given, as `sim` gives only the
/// flags on its command line; the job's configuration is then compared with `cfg`, and a
/// configuration that no set of options gives (a device that is not a preset, say) is an
/// error rather than a job that would run something else.
pub fn job_of(cfg: &SimConfig) -> Result<Job> {
    let base = SimConfig::flagship();
    let (f, b) = (&cfg.fms, &base.fms);
    let mut s = Spec::new();
    let mut flag = |key: &str, differs: bool, value: String| -> Result<()> {
        if differs {
            s.set_flag(key, &[value])?;
        }
        Ok(())
    };
    let none_or = |v: Option<String>| v.unwrap_or_else(|| "none".into());
    flag(
        "device",
        cfg.device.name != base.device.name,
        cfg.device.name.clone(),
    )?;
    flag(
        "block_size",
        f.block_size != b.block_size,
        f.block_size.to_string(),
    )?;
    flag("fill", cfg.fill != base.fill, cfg.fill.to_string())?;
    flag(
        "workload",
        cfg.workload.label() != base.workload.label(),
        cfg.workload.label(),
    )?;
    flag(
        "written",
        cfg.written_bytes != base.written_bytes,
        cfg.written_bytes.to_string(),
    )?;
    flag(
        "unit",
        cfg.unit_bytes != base.unit_bytes,
        cfg.unit_bytes.to_string(),
    )?;
    flag("arrival", cfg.arrival != base.arrival, cfg.arrival.label())?;
    // Always given: without it a job is the flagship's four policies.
    flag("policy", true, f.policy.name().into())?;
    let dac = f.regions > 1;
    flag(
        "redistribution",
        !dac && f.redistribution != crate::reproduce::paper_pairing(f.policy),
        f.redistribution.name().into(),
    )?;
    flag("regions", f.regions != b.regions, f.regions.to_string())?;
    flag(
        "region_threshold",
        dac && f.region_threshold_ps != b.region_threshold_ps,
        none_or(
            f.region_threshold_ps
                .map(|ps| format!("{}s", ps as f64 / 1e12)),
        ),
    )?;
    flag(
        "readonly_fraction",
        cfg.readonly_fraction != base.readonly_fraction,
        cfg.readonly_fraction.to_string(),
    )?;
    flag(
        "wear_threshold",
        f.wear_threshold != b.wear_threshold,
        none_or(f.wear_threshold.map(|t| t.to_string())),
    )?;
    flag("seed", cfg.seed != base.seed, cfg.seed.to_string())?;
    flag(
        "write_erase_ratio",
        cfg.write_erase_ratio != base.write_erase_ratio,
        cfg.write_erase_ratio.to_string(),
    )?;
    let mut jobs = s.expand()?;
    let job = jobs.pop().filter(|_| jobs.is_empty());
    match job {
        Some(job) if format!("{:?}", ran(&job.config)) == format!("{:?}", ran(cfg)) => Ok(job),
        _ => Err(anyhow!(
            "no sim options give this configuration ({}, {}, {})",
            cfg.device.name,
            cfg.workload.label(),
            f.policy
        )),
    }
}

/// `cfg` with the settings that change nothing in its run set as a sweep sets them: the
/// DAC settings without DAC (one region), the redistribution with DAC (the regions replace
/// it). Two configurations equal here run the same.
fn ran(cfg: &SimConfig) -> SimConfig {
    let mut c = cfg.clone();
    let base = SimConfig::flagship().fms;
    if c.fms.regions > 1 {
        c.fms.redistribution = crate::reproduce::paper_pairing(c.fms.policy);
        if (c.fms.promotion, c.fms.demotion) == (AgeRule::RegionAverage, AgeRule::RegionAverage) {
            c.fms.region_threshold_ps = base.region_threshold_ps;
        }
    } else {
        c.fms.region_threshold_ps = base.region_threshold_ps;
        c.fms.region_select = base.region_select;
        c.fms.promotion = base.promotion;
        c.fms.demotion = base.demotion;
    }
    c
}

/// One line of a sweep's JSON-lines output: the job's id and options, then the result's
/// fields (read back as plain JSON, so files from older versions stay readable).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Record {
    pub job: String,
    pub options: BTreeMap<String, Value>,
    #[serde(flatten)]
    pub result: serde_json::Map<String, Value>,
}

impl Record {
    pub fn new(job: &Job, result: &SimResult) -> Result<Record> {
        let Value::Object(result) = serde_json::to_value(result)? else {
            anyhow::bail!("a result must serialize to an object");
        };
        Ok(Record {
            job: job.id.clone(),
            options: job.options.clone(),
            result,
        })
    }
}

/// A result read back as a JSON object, serialized with its fields in
/// [`SimResult::FIELDS`] order (then any others, as they come), so a sweep's CSV has the
/// columns of `sim --csv` in the same order.
pub struct InFieldOrder<'a>(pub &'a serde_json::Map<String, Value>);

impl Serialize for InFieldOrder<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let known = SimResult::FIELDS
            .iter()
            .filter_map(|k| self.0.get_key_value(*k));
        let others = self
            .0
            .iter()
            .filter(|(k, _)| !SimResult::FIELDS.contains(&k.as_str()));
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in known.chain(others) {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// The records already in a sweep's JSON-lines results file, by job id, for resuming the
/// sweep of `jobs`. Every complete line must be a result of one of `jobs` (blank lines
/// aside): anything else (another sweep's results, a spec, a report) is an error naming
/// the file and line, and the file is left as it is. Only a last line without its newline
/// that is the start of a result (an interrupted write) is cut off, so appending continues
/// cleanly; a last result that only lacks its newline gets one. Returns the records and
/// the number of bytes cut off. `path`, when it exists, must be a regular file (the
/// caller checks, before it opens the file to lock it: a pipe or a FIFO is never read to
/// its end, QA stop 27).
pub fn load_done(path: &Path, jobs: &[Job]) -> Result<(BTreeMap<String, Record>, u64)> {
    let ctx = || format!("results file {}", path.display());
    let data = match std::fs::read(path) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((BTreeMap::new(), 0)),
        Err(e) => return Err(e).with_context(ctx),
    };
    let ids: std::collections::BTreeSet<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
    let mut done = BTreeMap::new();
    // Where a torn last line starts, and whether a whole last record lacks its newline.
    let mut torn: Option<usize> = None;
    let mut unterminated = false;
    let mut pos = 0usize;
    let mut line_no = 0usize;
    while pos < data.len() {
        line_no += 1;
        let (line, end, complete) = match data[pos..].iter().position(|&b| b == b'\n') {
            Some(nl) => (&data[pos..pos + nl], pos + nl + 1, true),
            None => (&data[pos..], data.len(), false),
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            pos = end;
            continue;
        }
        let record = match serde_json::from_slice::<Record>(line) {
            Ok(r) if ids.contains(r.job.as_str()) => Ok(r),
            // The options of a job of the grid under another id: a file it reads has
            // other contents now, so its result is not this job's.
            Ok(r) => match jobs
                .iter()
                .find(|j| j.options == r.options && !Spec::job_inputs(&j.options).is_empty())
            {
                Some(j) => {
                    let files: Vec<String> = Spec::job_inputs(&j.options)
                        .iter()
                        .map(|(_, p)| p.display().to_string())
                        .collect();
                    anyhow::bail!(
                        "{}:{line_no}: job {} is stale: it ran on other contents of {} \
                         (now job {}); the file was left unchanged (give --out a new file, \
                         or remove it to run the sweep again)",
                        path.display(),
                        r.job,
                        files.join(" and "),
                        j.id
                    )
                }
                // A job the grid now folds into another (`paper` beside the redistribution
                // it pairs with the policy, before stop 29 two jobs): that job's result.
                None => match jobs.iter().find(|j| {
                    Spec::job_inputs(&j.options).is_empty() && same_run(&j.options, &r.options)
                }) {
                    Some(j) => Ok(Record {
                        job: j.id.clone(),
                        ..r
                    }),
                    None => Err(format!("job {} is not in this sweep's grid", r.job)),
                },
            },
            Err(_) => Err("not a sweep result (a JSON line with job and options)".to_string()),
        };
        // A result of this grid must carry every field a result has now: a line without
        // them (cut by hand, or written by a flashkit before they existed) would make a
        // row of blanks in the table and fail the CSV after the other jobs ran (QA stop
        // 27). Its options are the job's own, as the grid spells them now (a file from
        // before an option existed keeps its job ids: `LATE_KEYS`).
        let record = record.and_then(|mut r| {
            match SimResult::FIELDS
                .iter()
                .find(|k| !r.result.contains_key(**k))
            {
                Some(k) if complete || !is_torn_record(line) => Err(format!(
                    "job {}'s result has no `{k}` (written by an older flashkit, or cut)",
                    r.job
                )),
                Some(_) => Err("a torn result".to_string()),
                None if SimResult::check_types(&r.result).is_err() => Err(format!(
                    "job {}'s result: {} (edited by hand, or damaged)",
                    r.job,
                    SimResult::check_types(&r.result).unwrap_err()
                )),
                None if !r.options.contains_key("failure_reserve")
                    && r.result.get("retired_segments").and_then(Value::as_u64) > Some(0) =>
                {
                    Err(format!(
                        "job {} is stale: blocks went bad in it under a flashkit from before \
                         the failure reserve (stop 33, `failure_reserve`), which changes such \
                         runs, so it must run again",
                        r.job
                    ))
                }
                None if !r.options.contains_key("failure_reserve_from")
                    && r.options.get("failure_reserve").and_then(Value::as_u64) > Some(1)
                    && r.result.get("retired_segments").and_then(Value::as_u64) > Some(0) =>
                {
                    Err(format!(
                        "job {} is stale: blocks went bad in it under a flashkit from before \
                         stop 34, whose failure reserve of more than one segment raised \
                         nothing where it did not fit whole (now one segment), so it must run \
                         again",
                        r.job
                    ))
                }
                None => {
                    if let Some(j) = jobs.iter().find(|j| j.id == r.job) {
                        r.options = j.options.clone();
                    }
                    Ok(r)
                }
            }
        });
        match record {
            Ok(r) => {
                unterminated = !complete;
                done.insert(r.job.clone(), r);
            }
            Err(_) if !complete && is_torn_record(line) => torn = Some(pos),
            Err(why) => anyhow::bail!(
                "{}:{line_no}: {why}: the file is not this sweep's results (as they are \
                 written now) and was left unchanged (give --out a new file)",
                path.display()
            ),
        }
        pos = end;
    }
    let open = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .with_context(ctx)
    };
    let dropped = match torn {
        Some(at) => {
            open()?.set_len(at as u64).with_context(ctx)?;
            (data.len() - at) as u64
        }
        None => 0,
    };
    if unterminated {
        let mut f = open()?;
        f.seek(std::io::SeekFrom::End(0)).with_context(ctx)?;
        f.write_all(b"\n").with_context(ctx)?;
    }
    Ok((done, dropped))
}

/// Whether `line` can be what an interrupted write of a record left: the start of
/// `{"job":"…` (records are written with the job id first).
fn is_torn_record(line: &[u8]) -> bool {
    const HEAD: &[u8] = br#"{"job":""#;
    line.starts_with(HEAD) || HEAD.starts_with(line)
}

/// Run `jobs` on `threads` worker threads (all cores when `None`), calling `done` with
/// each job's index and result in completion order, after the RAM check of
/// [`run_configs`] against this machine's available memory.
pub fn run_jobs<F>(jobs: &[Job], threads: Option<usize>, note: &dyn Fn(&str), done: F) -> Result<()>
where
    F: Fn(usize, Result<SimResult>) + Sync,
{
    let cfgs: Vec<&SimConfig> = jobs.iter().map(|j| &j.config).collect();
    run_configs(&cfgs, threads, nand::available_ram(), note, done)
}

/// Run `cfgs` on `threads` worker threads (all cores when `None`), calling `done` with
/// each run's index and result in completion order. Before any starts, fewer threads are
/// used when the largest runs would not fit in `available` bytes together, saying so once
/// through `note`, and the whole list is refused when one run cannot fit alone
/// ([`crate::ram::plan`]; `None`: nothing known, no check). Behind `sim`, `sweep` and
/// `reproduce`: the check decides only how many runs go at once, never what a run does.
pub fn run_configs<F>(
    cfgs: &[&SimConfig],
    threads: Option<usize>,
    available: Option<u64>,
    note: &dyn Fn(&str),
    done: F,
) -> Result<()>
where
    F: Fn(usize, Result<SimResult>) + Sync,
{
    use rayon::prelude::*;
    // Never more threads than runs (nor than MAX_THREADS).
    let n = threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .min(cfgs.len())
        .clamp(1, MAX_THREADS);
    let plan = crate::ram::plan(cfgs, n, available)?;
    if let Some(text) = &plan.note {
        note(text);
    }
    let b = rayon::ThreadPoolBuilder::new().num_threads(plan.runs);
    let pool = b.build().context("thread pool")?;
    pool.install(|| {
        cfgs.par_iter()
            .enumerate()
            .for_each(|(i, c)| done(i, crate::driver::run(c)));
    });
    Ok(())
}

/// Writes records in job order as they complete (results that finish early wait for the
/// ones before them), so a sweep's output is the same file whatever the thread count.
pub struct OrderedWriter<W: Write> {
    inner: Mutex<OrderedState<W>>,
}

struct OrderedState<W> {
    out: W,
    next: usize,
    pending: BTreeMap<usize, Option<String>>,
    error: Option<std::io::Error>,
}

impl<W: Write> OrderedWriter<W> {
    pub fn new(out: W) -> Self {
        OrderedWriter {
            inner: Mutex::new(OrderedState {
                out,
                next: 0,
                pending: BTreeMap::new(),
                error: None,
            }),
        }
    }

    /// Hand in job `index`'s line (`None` for a job that produced none, e.g. failed).
    pub fn put(&self, index: usize, line: Option<String>) {
        let mut s = self.inner.lock().expect("writer lock");
        s.pending.insert(index, line);
        loop {
            let next = s.next;
            let Some(l) = s.pending.remove(&next) else {
                break;
            };
            s.next += 1;
            if let Some(l) = l {
                if s.error.is_none() {
                    let r = writeln!(s.out, "{l}").and_then(|_| s.out.flush());
                    if let Err(e) = r {
                        s.error = Some(e);
                    }
                }
            }
        }
    }

    /// The writer back, or the first write error.
    pub fn finish(self) -> std::io::Result<W> {
        let s = self.inner.into_inner().expect("writer lock");
        match s.error {
            Some(e) => Err(e),
            None => Ok(s.out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> Result<Spec> {
        Spec::from_toml_str(text, Path::new("s.toml"))
    }

    #[test]
    fn product_in_key_order() {
        let s =
            spec("policy = [\"greedy\", \"cat\"]\nfill = [0.8, 0.9]\nseed = [1, 2, 3]\n").unwrap();
        assert_eq!(s.len(), 12);
        let jobs = s.expand().unwrap();
        assert_eq!(jobs.len(), 12);
        // fill is outside policy, seed innermost.
        assert_eq!(jobs[0].options["fill"], Value::from(0.8));
        assert_eq!(jobs[0].options["policy"], "greedy");
        assert_eq!(jobs[1].options["seed"], 2);
        assert_eq!(jobs[3].options["policy"], "cat");
        assert_eq!(jobs[6].options["fill"], Value::from(0.9));
        // Pairing default and ids unique and stable.
        assert_eq!(jobs[3].config.fms.redistribution, Redistribution::M6);
        let ids: std::collections::BTreeSet<_> = jobs.iter().map(|j| j.id.clone()).collect();
        assert_eq!(ids.len(), 12);
        assert_eq!(s.expand().unwrap()[5].id, jobs[5].id);
    }

    #[test]
    fn flags_and_file_agree() {
        let f = spec(
            "policy = \"cat\"\nwritten = \"1MiB\"\nblock_size = 4096\nregions = 2\nregion_threshold = \"30m\"\n",
        )
        .unwrap()
        .expand()
        .unwrap();
        let mut s = Spec::new();
        s.set_flag("policy", &["cat"]).unwrap();
        s.set_flag("written", &["1024KiB"]).unwrap();
        s.set_flag("block-size", &["4KiB"]).unwrap();
        s.set_flag("regions", &["2"]).unwrap();
        s.set_flag("region-threshold", &["1800"]).unwrap();
        let g = s.expand().unwrap();
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].id, g[0].id);
        assert_eq!(
            f[0].config.fms.region_threshold_ps,
            Some(1800 * 1_000_000_000_000)
        );
    }

    #[test]
    fn device_overrides() {
        let j = spec("blocks = [96, 192]\npages_per_block = 64\npolicy = \"greedy\"\n")
            .unwrap()
            .expand()
            .unwrap();
        assert_eq!(j.len(), 2);
        assert_eq!(j[1].config.device.geometry.blocks, 192);
        assert_eq!(j[1].config.device.geometry.pages_per_block, 64);
        // Page and spare sizes take units as every size does (QA stop 28), and the job is
        // the one of the plain byte count.
        let a = spec("device = \"mlc2-2g\"\npage_size = \"4KiB\"\nspare_size = 128\n")
            .unwrap()
            .expand()
            .unwrap();
        let b = spec("device = \"mlc2-2g\"\npage_size = 4096\nspare_size = \"128\"\n")
            .unwrap()
            .expand()
            .unwrap();
        assert_eq!(a[0].config.device.geometry.page_size, 4096);
        assert_eq!(a[0].id, b[0].id);
        assert!(spec("page_size = \"1.5\"\n").is_err());
    }

    #[test]
    fn errors_name_key_and_line() {
        let e = spec("fill = 0.9\npolcy = \"cat\"\n")
            .err()
            .unwrap()
            .to_string();
        assert!(e.starts_with("s.toml:2: unknown key 'polcy'"), "{e}");
        assert!(e.contains("did you mean 'policy'"), "{e}");
        let e = spec("fill = 0.9\n\npolicy = [\"cat\", \"lru\"]\n")
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.starts_with("s.toml:3: policy: unknown policy 'lru'"),
            "{e}"
        );
        let e = spec("fill = 1.5\n").err().unwrap().to_string();
        assert!(e.starts_with("s.toml:1: fill:"), "{e}");
        let e = spec("regions = 9\n").err().unwrap().to_string();
        assert!(e.contains("regions"), "{e}");
        let e = spec("fill = [[0.5]]\n").err().unwrap().to_string();
        assert!(e.contains("s.toml:1: fill"), "{e}");
        let e = spec("fill = \n").err().unwrap().to_string();
        assert!(e.starts_with("s.toml:1: "), "{e}");
        let e = spec("[device]\nblocks = 3\n").err().unwrap().to_string();
        assert!(e.contains("device") && e.contains("tables"), "{e}");
        let e = spec("pages_per_block = 0\npolicy = \"cat\"\n")
            .unwrap()
            .expand()
            .err()
            .unwrap()
            .to_string();
        assert!(e.starts_with("s.toml:1: pages_per_block"), "{e}");
        let e = spec("written = []\n").err().unwrap().to_string();
        assert!(e.contains("written: empty list"), "{e}");
        let mut s = Spec::new();
        let e = s.set_flag("unit", &["1000"]).err().unwrap().to_string();
        assert!(e.starts_with("--unit:"), "{e}");
    }

    #[test]
    fn sizes_are_exact() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4KiB"), Ok(4096));
        assert_eq!(parse_size("4 k"), Ok(4096));
        assert_eq!(parse_size("192MiB"), Ok(192 << 20));
        assert_eq!(parse_size("1.5KiB"), Ok(1536));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size(".5K"), Ok(512));
        assert_eq!(parse_size("2."), Ok(2));
        assert_eq!(parse_size("1.250KiB"), Ok(1280));
        // 2^-30 GiB is one byte, written out exactly.
        assert_eq!(parse_size("0.000000000931322574615478515625GiB"), Ok(1));
        assert_eq!(parse_size("16777215TiB"), Ok(16_777_215 << 40));
        // Above 2^53, where f64 loses bytes.
        assert_eq!(
            parse_size("18446744073709551104"),
            Ok(18_446_744_073_709_551_104)
        );
        assert_eq!(parse_size("18446744073709551615"), Ok(u64::MAX));
        // Fractions of a byte are errors, not rounded.
        for s in ["511.6", "100.4", "0.3B", "1.0000000001GiB", "0.1KiB"] {
            let e = parse_size(s).unwrap_err();
            assert!(e.contains("not a whole number of bytes"), "{s}: {e}");
        }
        // Overflow is an error, not clamped.
        for s in [
            "18446744073709551616",
            "16777216TiB",
            "99999999999999999999999",
        ] {
            let e = parse_size(s).unwrap_err();
            assert!(e.contains("too large"), "{s}: {e}");
        }
        for s in ["", ".", "-1", "1.2.3", "KiB", "4XB", "1e3"] {
            assert!(parse_size(s).is_err(), "{s:?}");
        }
    }

    #[test]
    fn durations_do_not_overflow_device_time() {
        assert_eq!(parse_duration_s("213d"), Ok(213.0 * 86400.0));
        for s in ["214d", "99999999999999999999999d"] {
            let e = parse_duration_s(s).unwrap_err();
            assert!(e.contains("duration too long"), "{s}: {e}");
        }
        let e = spec("regions = 2\nregion_threshold = -5\n")
            .err()
            .unwrap()
            .to_string();
        assert!(e.starts_with("s.toml:2: region_threshold"), "{e}");
        let e = spec("regions = 2\nregion_threshold = inf\n")
            .err()
            .unwrap()
            .to_string();
        assert!(e.starts_with("s.toml:2: region_threshold"), "{e}");
        let e = spec("regions = 2\nregion_threshold = 1e30\n")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("duration too long"), "{e}");
    }

    #[test]
    fn integers_for_32_bit_fields_are_not_truncated() {
        for key in [
            "wear_threshold",
            "low_water",
            "high_water",
            "failure_reserve",
            "blocks",
            "page_size",
            "spare_size",
            "pages_per_block",
            "nop",
            "endurance",
        ] {
            let e = spec(&format!("{key} = 4294967297\n"))
                .err()
                .unwrap_or_else(|| panic!("{key} accepted 2^32 + 1"))
                .to_string();
            assert!(
                e.starts_with(&format!("s.toml:1: {key}: 4294967297 is too large")),
                "{e}"
            );
            let mut s = Spec::new();
            let e = s.set_flag(key, &["4294967296"]).unwrap_err().to_string();
            assert!(e.contains("too large"), "{e}");
        }
        let j = spec("wear_threshold = 4294967295\npolicy = \"greedy\"\n")
            .unwrap()
            .expand()
            .unwrap();
        assert_eq!(j[0].config.fms.wear_threshold, Some(u32::MAX));
        let j = spec("low_water = 5\nhigh_water = 7\npolicy = \"greedy\"\n")
            .unwrap()
            .expand()
            .unwrap();
        assert_eq!(
            (j[0].config.fms.low_water, j[0].config.fms.high_water),
            (5, 7)
        );
    }

    /// Options that did not apply to a job are null in its options (and so in its id):
    /// `device` under a device file, `written` and `unit` for a trace; jobs that become
    /// the same are one job.
    #[test]
    fn inert_options_are_null() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("d.json");
        let intel = DeviceSpec::preset("intel-series2plus-24m").unwrap();
        std::fs::write(&file, serde_json::to_string(&intel).unwrap()).unwrap();
        let f = file.display().to_string().replace('\\', "/");
        let jobs = spec(&format!(
            "device = [\"intel-series2plus-24m\", \"nandsim-256m\"]\ndevice_file = [\"none\", \"{f}\"]\n\
             workload = [\"trace:t.csv\", \"random\"]\nwritten = [\"1MiB\", \"2MiB\"]\npolicy = \"cat\"\n"
        ))
        .unwrap()
        .expand()
        .unwrap();
        // 2 presets + 1 file, each with 1 trace job + 2 random jobs.
        assert_eq!(jobs.len(), 9);
        let ids: std::collections::BTreeSet<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
        assert_eq!(ids.len(), 9);
        for j in &jobs {
            let o = &j.options;
            let trace = o["workload"].as_str().unwrap().starts_with("trace:");
            assert_eq!(o["written"].is_null(), trace, "{o:?}");
            assert_eq!(o["unit"].is_null(), trace, "{o:?}");
            assert_eq!(o["device"].is_null(), !o["device_file"].is_null(), "{o:?}");
            assert_eq!(j.config.device_file.is_some(), !o["device_file"].is_null());
        }
        // A device given beside a device file that gives every job's device is refused.
        let e = spec(&format!(
            "device = \"nandsim-256m\"\ndevice_file = \"{f}\"\n"
        ))
        .unwrap()
        .expand()
        .err()
        .unwrap()
        .to_string();
        assert!(e.starts_with("s.toml:1: device: has no effect"), "{e}");
    }

    /// A dotted key or a `[table]` is named as what it is, at its line (QA stop 27: a
    /// dotted key gave a type error about borrowed strings).
    #[test]
    fn tables_are_refused_at_their_line() {
        for text in [
            "written = \"1MiB\"\npolicy.x = \"greedy\"\n",
            "written = \"1MiB\"\n[policy]\nx = \"greedy\"\n",
        ] {
            let e = spec(text).err().expect("refused").to_string();
            assert_eq!(
                e, "s.toml:2: policy: tables are not supported: write every key at the top level",
                "{text}"
            );
        }
        // A parser error that does not name the key gets it from its line.
        let e = spec("written = \"1MiB\"\nseed = 99999999999999999999999\n")
            .err()
            .expect("refused")
            .to_string();
        assert!(e.starts_with("s.toml:2: seed: number too large"), "{e}");
    }

    #[test]
    fn options_without_effect_are_errors() {
        let err = |text: &str| spec(text).unwrap().expand().err().unwrap().to_string();
        let e = err("workload = \"trace:t.csv\"\nwritten = \"1MiB\"\n");
        assert!(
            e.starts_with("s.toml:2: written: has no effect: a trace workload"),
            "{e}"
        );
        let e = err("unit = \"8KiB\"\nworkload = \"trace:t.csv\"\n");
        assert!(e.starts_with("s.toml:1: unit: has no effect"), "{e}");
        // The default device (the Intel card) has no spare area (QA stop 27).
        let e = err("spare_read_us = 5000\n");
        assert!(
            e.starts_with("s.toml:1: spare_read_us: has no effect"),
            "{e}"
        );
        assert!(e.contains("has no spare area"), "{e}");
        let e = err("arrival = \"trace\"\nworkload = \"random\"\n");
        assert!(e.starts_with("s.toml:1: arrival: has no effect"), "{e}");
        let e = err("arrival = [\"closed\", \"trace\"]\n");
        assert!(
            e.starts_with("s.toml:1: arrival: trace has no effect"),
            "{e}"
        );
        let e = err("trace_limit = 10\n");
        assert!(e.contains("trace_limit: has no effect"), "{e}");
        let e = err("policy = \"greedy\"\ncb_age = \"invalidation\"\n");
        assert!(e.starts_with("s.toml:2: cb_age: has no effect"), "{e}");
        let e = err("policy = \"greedy\"\ncat_age = \"log\"\n");
        assert!(e.contains("cat_age: has no effect"), "{e}");
        let e = err("failure_reserve = 0\nfailure_reserve_from = \"start\"\n");
        assert!(
            e.starts_with(
                "s.toml:2: failure_reserve_from: has no effect: there is no failure reserve"
            ),
            "{e}"
        );
        assert!(
            spec("failure_reserve = 2\nfailure_reserve_from = \"start\"\n")
                .unwrap()
                .expand()
                .is_ok()
        );
        let e = err("policy = \"cat\"\nadaptive_window = 100\n");
        assert!(e.contains("adaptive_window: has no effect"), "{e}");
        let e = err("region_threshold = \"30m\"\n");
        assert!(e.contains("region_threshold: has no effect"), "{e}");
        let e = err("demotion = \"region-average\"\n");
        assert!(e.contains("demotion: has no effect"), "{e}");
        let e = err("promotion = \"region-average\"\n");
        assert!(e.contains("promotion: has no effect"), "{e}");
        let e = spec("regions = 2\ndemotion = \"never\"\n").err().unwrap();
        assert!(e.to_string().contains("unknown rule 'never'"), "{e}");
        let e = err("regions = 4\nredistribution = \"m1\"\n");
        assert!(e.contains("redistribution: has no effect"), "{e}");
        let e = err("policy = \"cat\"\nredistribution = \"m1\"\nhot_half_life = 5\n");
        assert!(
            e.starts_with("s.toml:3: hot_half_life: has no effect"),
            "{e}"
        );
        // The paper pairing of greedy is m1; DAC replaces the redistribution.
        let e = err("policy = \"greedy\"\nhot_half_life = 5\n");
        assert!(e.contains("hot_half_life: has no effect"), "{e}");
        let e = err("policy = \"cat\"\nregions = 2\nhot_half_life = 5\n");
        assert!(e.contains("hot_half_life: has no effect"), "{e}");
        let e = err("readonly_separation = false\n");
        assert!(
            e.starts_with(
                "s.toml:1: readonly_separation: has no effect: there is no read-only data"
            ),
            "{e}"
        );
        let mut s = Spec::new();
        s.set_flag("readonly_separation", &["false"]).unwrap();
        let e = s.expand().err().unwrap().to_string();
        assert!(
            e.starts_with("--no-readonly-separation: has no effect"),
            "{e}"
        );
        let mut s = Spec::new();
        s.set_flag("workload", &["trace:t.csv"]).unwrap();
        s.set_flag("written", &["1MiB"]).unwrap();
        let e = s.expand().err().unwrap().to_string();
        assert!(e.starts_with("--written: has no effect"), "{e}");
        // A value used by some job of the grid is fine; defaults are never checked.
        for ok in [
            "workload = [\"trace:t.csv\", \"random\"]\nwritten = \"1MiB\"\n",
            "workload = [\"trace:t.csv\", \"random\"]\narrival = \"trace\"\n",
            "regions = [1, 4]\nregion_threshold = [\"none\", \"30m\"]\nredistribution = \"m1\"\n",
            "policy = [\"greedy\", \"cost-benefit\"]\ncb_age = \"invalidation\"\n",
            "cat_age = \"log\"\n",
            "workload = \"trace:t.csv\"\n",
            "policy = \"cat\"\nhot_half_life = 5\n",
            "policy = \"greedy\"\nredistribution = [\"m1\", \"m3\"]\nhot_half_life = 5\n",
            "readonly_fraction = [0, 0.2]\nreadonly_separation = false\n",
        ] {
            spec(ok)
                .unwrap()
                .expand()
                .unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
    }

    /// `paper` and the redistribution it pairs with a policy run the same job: one job, the
    /// first in the grid (QA stop 28: `--redistribution paper,m1` ran greedy twice, under
    /// two ids).
    #[test]
    fn paper_and_the_redistribution_it_gives_are_one_job() {
        let jobs = spec("policy = [\"greedy\", \"cat\"]\nredistribution = [\"paper\", \"m1\"]\n")
            .unwrap()
            .expand()
            .unwrap();
        let got: Vec<(String, String)> = jobs
            .iter()
            .map(|j| {
                let t = |k: &str| j.options[k].as_str().unwrap().to_string();
                (t("policy"), t("redistribution"))
            })
            .collect();
        let want = [("greedy", "paper"), ("cat", "paper"), ("cat", "m1")];
        assert_eq!(
            got,
            want.map(|(a, b)| (a.to_string(), b.to_string())),
            "{jobs:?}"
        );
        // The other order keeps m1, and its id is the one m1 alone gives.
        let first = spec("policy = \"greedy\"\nredistribution = [\"m1\", \"paper\"]\n")
            .unwrap()
            .expand()
            .unwrap();
        let alone = spec("policy = \"greedy\"\nredistribution = \"m1\"\n")
            .unwrap()
            .expand()
            .unwrap();
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].id, alone[0].id);
    }

    /// With region-average promotion and demotion no threshold is read (`Dac::on_update`,
    /// `on_clean`): the threshold is null in such a job's options and its jobs with and
    /// without one are one job (QA stop 25: they ran twice under two ids); alone it is
    /// refused as an option with no effect.
    #[test]
    fn a_threshold_region_average_rules_never_read_is_inert() {
        let jobs = spec(
            "policy = \"cat\"\nregions = 2\nregion_threshold = [\"none\", \"30m\"]\n\
             promotion = [\"threshold\", \"region-average\"]\n\
             demotion = [\"threshold\", \"region-average\"]\n",
        )
        .unwrap()
        .expand()
        .unwrap();
        assert_eq!(jobs.len(), 7);
        let avg = |j: &Job| {
            j.options["promotion"] == "region-average" && j.options["demotion"] == "region-average"
        };
        let both: Vec<&Job> = jobs.iter().filter(|j| avg(j)).collect();
        assert_eq!(both.len(), 1);
        assert!(both[0].options["region_threshold"].is_null());
        assert!(jobs
            .iter()
            .any(|j| !avg(j) && !j.options["region_threshold"].is_null()));
        let e = spec(
            "policy = \"cat\"\nregions = 2\nregion_threshold = \"30m\"\n\
             promotion = \"region-average\"\ndemotion = \"region-average\"\n",
        )
        .unwrap()
        .expand()
        .err()
        .unwrap()
        .to_string();
        assert!(
            e.contains("region_threshold: has no effect: with region-average"),
            "{e}"
        );
    }

    /// `SimResult::FIELDS` is the serialized order of a result's fields, and
    /// `InFieldOrder` gives a result read back as JSON that order.
    #[test]
    fn fields_are_the_serialized_order() {
        let jobs = spec("written = \"256KiB\"\npolicy = \"adaptive\"\n")
            .unwrap()
            .expand()
            .unwrap();
        let r = crate::driver::run(&jobs[0].config).unwrap();
        let text = serde_json::to_string(&r).unwrap();
        let Value::Object(map) = serde_json::to_value(&r).unwrap() else {
            panic!("an object");
        };
        assert_eq!(map.len(), SimResult::FIELDS.len());
        let at: Vec<usize> = SimResult::FIELDS
            .iter()
            .map(|f| text.find(&format!("\"{f}\":")).unwrap())
            .collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{text}");
        assert_eq!(
            serde_json::to_string(&InFieldOrder(&map)).unwrap(),
            text,
            "read back and ordered"
        );
    }

    #[test]
    fn metrics_are_the_numeric_result_fields() {
        // A small device, so the run cleans (adaptive reports a share once it has chosen).
        let jobs = spec(
            "written = \"1MiB\"\nblocks = 32\nfill = 0.75\npolicy = \"adaptive\"\nwear_threshold = 50\n",
        )
            .unwrap()
            .expand()
            .unwrap();
        let r = serde_json::to_value(crate::driver::run(&jobs[0].config).unwrap()).unwrap();
        let obj = r.as_object().unwrap();
        let numeric: std::collections::BTreeSet<&str> = obj
            .iter()
            .filter(|(_, v)| v.is_number())
            .map(|(k, _)| k.as_str())
            .collect();
        let listed: std::collections::BTreeSet<&str> = SimResult::metrics()
            .filter(|k| *k != "region_threshold_s")
            .collect();
        assert_eq!(numeric, listed);
        assert!(obj.contains_key("region_threshold_s"));
    }

    /// `SimResult::has_metric` says which metrics a run reports as numbers, so a plot of
    /// one that no job of a grid has is refused before the grid runs.
    #[test]
    fn has_metric_is_what_the_results_have() {
        let jobs = spec(
            "written = \"1MiB\"\nblocks = 32\nfill = 0.75\npolicy = [\"greedy\", \"adaptive\"]\n\
             regions = [1, 2]\nregion_threshold = [\"none\", \"30m\"]\n\
             wear_threshold = [\"none\", 50]\n",
        )
        .unwrap()
        .expand()
        .unwrap();
        // One region applies no threshold: its two thresholds are one job each.
        assert_eq!(jobs.len(), 12);
        for j in &jobs {
            let r = serde_json::to_value(crate::driver::run(&j.config).unwrap()).unwrap();
            // Every result has the types a resumed sweep checks (`check_types`).
            assert_eq!(SimResult::check_types(r.as_object().unwrap()), Ok(()));
            for m in SimResult::metrics() {
                assert_eq!(
                    SimResult::has_metric(&j.config, m),
                    r[m].is_number(),
                    "{m} in {:?}",
                    j.options
                );
                assert_eq!(
                    SimResult::metric_needs(m).is_some(),
                    [
                        "policy_greedy_share",
                        "region_threshold_s",
                        "wear_threshold",
                        "unit_bytes"
                    ]
                    .contains(&m),
                    "{m}"
                );
            }
        }
    }

    #[test]
    fn grid_size_checked_before_expanding() {
        let values: Vec<String> = (1..=200).map(|i| i.to_string()).collect();
        let list = format!("[{}]", values.join(", "));
        let text = format!(
            "seed = {list}\nlow_water = {list}\nhigh_water = {list}\nadaptive_window = {list}\nwear_threshold = {list}\n"
        );
        let s = spec(&text).unwrap();
        assert_eq!(s.len(), 4 * 200usize.pow(5));
        let e = s.expand().err().unwrap().to_string();
        assert!(
            e.starts_with("s.toml: grid too large: 1280000000000 jobs (policy 4 x wear_threshold 200 x low_water 200 x high_water 200 x adaptive_window 200 x seed 200), at most 100000"),
            "{e}"
        );
        // Overflowing products are refused too, not wrapped.
        let big: Vec<String> = (1..=5000).map(|i| i.to_string()).collect();
        let list = format!("[{}]", big.join(", "));
        let keys = [
            "seed",
            "low_water",
            "high_water",
            "adaptive_window",
            "wear_threshold",
            "blocks",
        ];
        let text: String = keys.iter().map(|k| format!("{k} = {list}\n")).collect();
        let e = spec(&text).unwrap().expand().err().unwrap().to_string();
        assert!(e.contains("more than 18446744073709551615 jobs"), "{e}");
        // At the limit is fine (counted, not built here).
        let s = spec("seed = [1, 2]\n").unwrap();
        assert!(s.check_size().is_ok());
    }

    #[test]
    fn values_are_quoted_as_written() {
        let e = spec("seed = [1, 1.0]\n").err().unwrap().to_string();
        assert!(e.contains("'1.0' is not a whole number"), "{e}");
        let e = spec("seed = 2.50\n").err().unwrap().to_string();
        assert!(e.contains("'2.50' is not a whole number"), "{e}");
        let e = spec("written = 1.5e6\n").err().unwrap().to_string();
        assert!(
            e.starts_with("s.toml:1: written: '1.5e6' is a float; a size is a whole number"),
            "{e}"
        );
        let e = spec("written = [\"1MiB\", # c, d\n 1.5e6]\n")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("'1.5e6' is a float"), "{e}");
        assert_eq!(
            array_items("[1, \"a,b\", 'c]', 2.0e3 ]"),
            Some(vec![
                "1".into(),
                "\"a,b\"".into(),
                "'c]'".into(),
                "2.0e3".into()
            ])
        );
        // From flags, floats keep their point.
        assert_eq!(Scalar::Float(1.0, None).text(), "1.0");
    }

    #[test]
    fn inputs_name_traces_and_device_files() {
        let s = spec(
            "workload = [\"trace:t.msr\", \"random\"]\ndevice_file = [\"none\", \"d.toml\"]\n",
        )
        .unwrap();
        let files: Vec<(&str, PathBuf)> = s.inputs().into_iter().map(|(k, p, _)| (k, p)).collect();
        assert_eq!(
            files,
            vec![
                ("device_file", PathBuf::from("d.toml")),
                ("workload", PathBuf::from("t.msr"))
            ]
        );
    }

    /// Jobs that read no file keep the ids they always had (results files of earlier
    /// versions resume; `sim --json` ids do not move).
    #[test]
    fn ids_of_jobs_without_files_are_unchanged() {
        let j = spec("policy = \"greedy\"\nwritten = \"256KiB\"\n")
            .unwrap()
            .expand()
            .unwrap();
        assert_eq!(j[0].id, "b3eac94af9f55e94");
        let j = spec("policy = [\"greedy\",\"cat\"]\nfill = [0.8, 0.85]\nworkload=\"random\"\n")
            .unwrap()
            .expand()
            .unwrap();
        let ids: Vec<&str> = j.iter().map(|j| j.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "9247f3ef11367c87",
                "8ecbbfd6856f4019",
                "5a0df48b12c32834",
                "970924ff84e573c0"
            ]
        );
        // A key added since (`LATE_KEYS`) changes the id only away from its default.
        let j =
            spec("policy = \"greedy\"\nwritten = \"256KiB\"\nindex_wear_gap = [8, \"none\", 2]\n")
                .unwrap()
                .expand()
                .unwrap();
        assert_eq!(j[0].id, "b3eac94af9f55e94");
        assert_eq!(j[0].config.fms.index_wear_gap, Some(8));
        assert_ne!(j[1].id, j[0].id);
        assert_eq!(j[1].config.fms.index_wear_gap, None);
        assert_eq!(j[2].config.fms.index_wear_gap, Some(2));
        assert!(j[2].id != j[0].id && j[2].id != j[1].id);
    }

    /// `failure_reserve` (stop 33) keeps ids at its default, but a result from before it
    /// in which blocks went bad ran without the reserve: resuming refuses it as stale. One
    /// in which none did is the job's.
    /// A result line of job `id` run with `options`: every metric 0 but
    /// `retired_segments`, the texts "x", no trace.
    fn result_line(id: &str, options: &BTreeMap<String, Value>, retired: u64) -> Value {
        let mut result: serde_json::Map<String, Value> = SimResult::FIELDS
            .iter()
            .map(|&k| {
                let v = match k {
                    "trace" => Value::Null,
                    "device" | "workload" | "policy" | "redistribution" | "arrival" => {
                        Value::from("x")
                    }
                    _ => Value::from(0),
                };
                (k.to_string(), v)
            })
            .collect();
        result.insert("retired_segments".into(), Value::from(retired));
        let mut r = serde_json::json!({ "job": id, "options": options });
        r.as_object_mut().unwrap().extend(result);
        r
    }

    #[test]
    fn results_from_before_the_failure_reserve_with_bad_blocks_are_stale() {
        let jobs = spec("policy = \"greedy\"\nwritten = \"256KiB\"\n")
            .unwrap()
            .expand()
            .unwrap();
        assert_eq!(jobs[0].id, "b3eac94af9f55e94", "the id from before the key");
        assert_eq!(jobs[0].options["failure_reserve"], Value::from(1));
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("r.jsonl");
        let mut options = jobs[0].options.clone();
        options.remove("failure_reserve");
        let record = |retired: u64| result_line(&jobs[0].id, &options, retired);
        std::fs::write(&out, format!("{}\n", record(0))).unwrap();
        let (done, _) = load_done(&out, &jobs).unwrap();
        assert!(done.contains_key(&jobs[0].id));
        std::fs::write(&out, format!("{}\n", record(2))).unwrap();
        let e = load_done(&out, &jobs).unwrap_err().to_string();
        assert!(
            e.contains(":1: job b3eac94af9f55e94 is stale: blocks went bad"),
            "{e}"
        );
    }

    /// A reserve of more than one segment that does not fit whole is raised by one since
    /// stop 34 (it was all or nothing): a result from before `failure_reserve_from` with such a
    /// reserve and blocks gone bad is stale; one of stop 34 (the key present) and one
    /// without bad blocks are not.
    #[test]
    fn results_with_a_larger_reserve_from_before_stop_34_with_bad_blocks_are_stale() {
        let jobs = spec("policy = \"greedy\"\nwritten = \"256KiB\"\nfailure_reserve = 2\n")
            .unwrap()
            .expand()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("r.jsonl");
        let record = |retired: u64, from_key: bool| {
            let mut options = jobs[0].options.clone();
            if !from_key {
                options.remove("failure_reserve_from");
            }
            result_line(&jobs[0].id, &options, retired)
        };
        for (retired, from_key) in [(0, false), (2, true)] {
            std::fs::write(&out, format!("{}\n", record(retired, from_key))).unwrap();
            let (done, _) = load_done(&out, &jobs).unwrap();
            assert!(done.contains_key(&jobs[0].id), "{retired} {from_key}");
        }
        std::fs::write(&out, format!("{}\n", record(2, false))).unwrap();
        let e = load_done(&out, &jobs).unwrap_err().to_string();
        assert!(e.contains("is stale: blocks went bad"), "{e}");
        assert!(e.contains("before stop 34"), "{e}");
    }

    /// A result whose fields do not have a result's types (edited by hand: a metric that
    /// is a string or null, a name that is a number) is refused naming the line, the job
    /// and the field (QA stop 35: `"erasures": "x"` was taken and printed as x, a null
    /// `cleaning_cost` as NaN); nulls where a metric may be null are taken.
    #[test]
    fn results_of_the_wrong_types_are_refused() {
        let jobs = spec("policy = \"greedy\"\nwritten = \"256KiB\"\n")
            .unwrap()
            .expand()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("r.jsonl");
        let id = &jobs[0].id;
        for (key, value, ok) in [
            ("erasures", Value::from("x"), false),
            ("cleaning_cost", Value::Null, false),
            ("policy", Value::from(3), false),
            ("trace", Value::from("t.csv"), false),
            ("write_amplification", Value::Null, true),
            ("wear_threshold", Value::Null, true),
        ] {
            let mut r = result_line(id, &jobs[0].options, 0);
            r[key] = value.clone();
            std::fs::write(&out, format!("{r}\n")).unwrap();
            match load_done(&out, &jobs) {
                Ok((done, _)) => assert!(ok && done.contains_key(id), "{key}: {value}"),
                Err(e) => {
                    let e = e.to_string();
                    assert!(!ok, "{key}: {e}");
                    assert!(
                        e.contains(&format!(":1: job {id}'s result: `{key}` is")),
                        "{e}"
                    );
                }
            }
        }
    }

    /// A job's id covers the contents of the files it reads: an edited device file or
    /// trace is another job (a resumed sweep must not reuse the old result), the same
    /// contents are the same job.
    #[test]
    fn ids_cover_the_contents_of_input_files() {
        let dir = tempfile::tempdir().unwrap();
        let dev = dir.path().join("dv.json");
        let trace = dir.path().join("t.csv");
        let device = serde_json::to_string(&DeviceSpec::preset("nandsim-256m").unwrap()).unwrap();
        std::fs::write(&dev, &device).unwrap();
        std::fs::write(&trace, "0,h,0,Write,0,4096,10\n").unwrap();
        let text = format!(
            "device_file = \"{}\"\nworkload = \"trace:{}\"\npolicy = \"greedy\"\n",
            dev.display(),
            trace.display()
        );
        let id = || spec(&text).unwrap().expand().unwrap()[0].id.clone();
        let first = id();
        assert_eq!(id(), first, "same contents, same id");
        let mut d: serde_json::Value = serde_json::from_str(&device).unwrap();
        d["timing"]["erase_us"] = Value::from(d["timing"]["erase_us"].as_f64().unwrap() * 2.0);
        std::fs::write(&dev, d.to_string()).unwrap();
        let edited = id();
        assert_ne!(edited, first, "an edited device file is another job");
        std::fs::write(&trace, "0,h,0,Write,0,8192,10\n").unwrap();
        let other = id();
        assert_ne!(other, edited, "an edited trace is another job");
        std::fs::write(&trace, "0,h,0,Write,0,4096,10\n").unwrap();
        assert_eq!(id(), edited, "the trace back as it was: the job it was");
        // Results of the edited job's options with the old id are refused as stale.
        let jobs = spec(&text).unwrap().expand().unwrap();
        let out = dir.path().join("r.jsonl");
        let old = serde_json::json!({ "job": first, "options": jobs[0].options });
        std::fs::write(&out, format!("{old}\n")).unwrap();
        let e = load_done(&out, &jobs).unwrap_err().to_string();
        assert!(
            e.contains("r.jsonl:1: job ") && e.contains(" is stale: it ran on other contents of "),
            "{e}"
        );
        assert!(
            e.contains("dv.json and ") && e.contains("t.csv (now job "),
            "{e}"
        );
    }

    /// Relative paths in a sweep file are relative to its directory.
    #[test]
    fn spec_paths_are_relative_to_the_spec() {
        let at = |path: &str, text: &str| {
            let s = Spec::from_toml_str(text, Path::new(path)).unwrap();
            s.inputs()
                .into_iter()
                .map(|(_, p, _)| p)
                .collect::<Vec<_>>()
        };
        let text = "workload = [\"trace:w.csv\", \"trace:/abs/x.csv\", \"random\"]\n\
                    device_file = [\"none\", \"d/dv.json\"]\n";
        assert_eq!(
            at("sub/t.toml", text),
            [
                PathBuf::from("sub/d/dv.json"),
                PathBuf::from("sub/w.csv"),
                PathBuf::from("/abs/x.csv")
            ]
        );
        // `./t.toml` and `t.toml` give the same options, hence the same ids.
        for p in ["t.toml", "./t.toml"] {
            assert_eq!(
                at(p, text),
                [
                    PathBuf::from("d/dv.json"),
                    PathBuf::from("w.csv"),
                    PathBuf::from("/abs/x.csv")
                ]
            );
        }
        // Flags are relative to the current directory, as always.
        let mut s = Spec::new();
        s.set_flag("workload", &["trace:w.csv"]).unwrap();
        assert_eq!(s.inputs()[0].1, PathBuf::from("w.csv"));
    }

    #[test]
    fn ordered_writer_orders() {
        let w = OrderedWriter::new(Vec::new());
        w.put(2, Some("c".into()));
        w.put(0, Some("a".into()));
        w.put(1, None);
        w.put(3, Some("d".into()));
        assert_eq!(String::from_utf8(w.finish().unwrap()).unwrap(), "a\nc\nd\n");
    }
}
