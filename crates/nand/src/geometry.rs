//! Device geometry, timing and the named presets.
//!
//! A device is `blocks` erase blocks of `pages_per_block` pages; each page has `page_size`
//! data bytes followed by `spare_size` spare (OOB) bytes. Within a page, a *column* addresses
//! the data bytes at `0..page_size` and the spare bytes at `page_size..page_size+spare_size`,
//! as on a real NAND part.

use serde::{Deserialize, Serialize};

use crate::error::{NandError, Result};

/// Shape of the device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Geometry {
    /// Data bytes per page (the program unit).
    pub page_size: u32,
    /// Spare (OOB) bytes per page.
    pub spare_size: u32,
    /// Pages per erase block.
    pub pages_per_block: u32,
    /// Number of erase blocks.
    pub blocks: u32,
    /// Partial programs allowed per page between erases; 0 means unlimited (NOR-style
    /// bit clearing, as the Flash Memory Server uses to clear "obsolete" flags).
    pub nop: u32,
    /// Pages of a block must be programmed in ascending order (MLC).
    pub in_order: bool,
}

impl Geometry {
    /// Bytes of one page including spare.
    #[inline]
    pub fn raw_page_size(&self) -> u32 {
        self.page_size + self.spare_size
    }
    /// Data bytes of one erase block.
    #[inline]
    pub fn block_bytes(&self) -> u64 {
        self.page_size as u64 * self.pages_per_block as u64
    }
    /// Total pages.
    #[inline]
    pub fn pages(&self) -> u64 {
        self.pages_per_block as u64 * self.blocks as u64
    }
    /// User-visible capacity (data area only).
    #[inline]
    pub fn capacity_bytes(&self) -> u64 {
        self.block_bytes() * self.blocks as u64
    }
    /// Block holding page `ppn`.
    #[inline]
    pub fn block_of(&self, ppn: u64) -> u32 {
        (ppn / self.pages_per_block as u64) as u32
    }
    /// First page of `block`.
    #[inline]
    pub fn first_page(&self, block: u32) -> u64 {
        block as u64 * self.pages_per_block as u64
    }

    /// Reject shapes no device can have; names the offending field.
    pub fn validate(&self) -> Result<()> {
        let bad =
            |field: &str, why: &str| Err(NandError::config(format!("geometry.{field}: {why}")));
        if self.page_size == 0 {
            return bad("page_size", "must be > 0");
        }
        if self.page_size > 1 << 20 {
            return bad("page_size", "must be at most 1 MiB");
        }
        if self.spare_size > self.page_size {
            return bad("spare_size", "must not exceed page_size");
        }
        if self.pages_per_block == 0 {
            return bad("pages_per_block", "must be > 0");
        }
        if self.blocks == 0 {
            return bad("blocks", "must be > 0");
        }
        if self.nop > 255 {
            return bad("nop", "must be 0 (unlimited) or at most 255");
        }
        if self.pages() > 1 << 40 {
            return bad("blocks", "device too large");
        }
        Ok(())
    }
}

/// Latency model. Every operation costs a fixed part plus a per-byte part, so both NAND
/// (fixed page times) and NOR-style cards (per-byte programming) are expressed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timing {
    /// Fixed cost of a page (data) read, µs.
    pub read_us: f64,
    /// Additional cost per byte read, ns.
    #[serde(default)]
    pub read_ns_per_byte: f64,
    /// Cost of reading only the spare area, µs (plus per-byte read cost).
    pub spare_read_us: f64,
    /// Fixed cost of one program operation, µs.
    pub program_us: f64,
    /// Additional cost per byte programmed, ns.
    #[serde(default)]
    pub program_ns_per_byte: f64,
    /// Cost of erasing one block, µs.
    pub erase_us: f64,
}

/// The largest fixed cost of one operation, µs (10 000 s, about 2.8 hours; a test drives
/// erases this slow to make queues of weeks). In picoseconds, 1e16: a batch of even a
/// thousand such operations stays below 2^64.
pub const MAX_OP_US: f64 = 1e10;
/// The largest cost per byte, ns (1 ms a byte).
pub const MAX_NS_PER_BYTE: f64 = 1e6;

impl Timing {
    pub fn validate(&self) -> Result<()> {
        let fields = [
            ("read_us", self.read_us),
            ("read_ns_per_byte", self.read_ns_per_byte),
            ("spare_read_us", self.spare_read_us),
            ("program_us", self.program_us),
            ("program_ns_per_byte", self.program_ns_per_byte),
            ("erase_us", self.erase_us),
        ];
        let shown = quoted_number;
        for (name, v) in fields {
            if !v.is_finite() || v < 0.0 {
                return Err(NandError::config(format!(
                    "timing.{name}: must be a finite number >= 0, got {}",
                    shown(v)
                )));
            }
            // Bounds far above any flash (an erase takes milliseconds) that keep one
            // operation's cost, in integer picoseconds, far from overflowing.
            let max = if name.ends_with("_us") {
                MAX_OP_US
            } else {
                MAX_NS_PER_BYTE
            };
            if v > max {
                let unit = if name.ends_with("_us") { "µs" } else { "ns" };
                return Err(NandError::config(format!(
                    "timing.{name}: {} is more than {max:e} {unit}, far beyond any flash",
                    shown(v)
                )));
            }
        }
        Ok(())
    }
}

/// A number as a message quotes it: as written for ordinary magnitudes, in scientific
/// notation when plain digits would run long (`1e308`, not 309 digits; `1e-300`, not 300
/// zeros). Every layer's messages use it.
pub fn quoted_number(v: f64) -> String {
    let plain = v.to_string();
    if plain.len() > 20 {
        format!("{v:e}")
    } else {
        plain
    }
}

/// A complete device description: geometry, timing, endurance.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceSpec {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub geometry: Geometry,
    pub timing: Timing,
    /// Erase cycles a block survives; the erase after that fails and the block goes bad.
    pub endurance: u32,
}

impl DeviceSpec {
    /// What an image opened from disk must satisfy: [`DeviceSpec::validate`] but the
    /// rules on the name's characters, which came later (stop 32), so that an image made
    /// before them, with an empty name, still opens.
    pub fn validate_stored(&self) -> Result<()> {
        self.geometry.validate()?;
        self.timing.validate()?;
        if self.endurance == 0 {
            return Err(NandError::config("endurance: must be > 0"));
        }
        if self.name.len() > 63 {
            return Err(NandError::config("name: at most 63 bytes"));
        }
        Ok(())
    }

    /// A device a command may make or run: [`DeviceSpec::validate_stored`], and a name
    /// that is not empty and holds no control character.
    pub fn validate(&self) -> Result<()> {
        self.validate_stored()?;
        // The image header keeps the name NUL-padded, and reports print it: an empty name
        // or a control character (a NUL would cut it short) is refused (QA stop 32).
        if self.name.trim().is_empty() {
            return Err(NandError::config("name: must not be empty"));
        }
        if self.name.chars().any(char::is_control) {
            return Err(NandError::config(
                "name: must not hold control characters (NUL, newline, ...)",
            ));
        }
        Ok(())
    }

    /// Parse a TOML device description: the nested form (`[geometry]`, `[timing]`) or
    /// the flat one of `flashkit devices --json` ([`FlatSpec`]).
    pub fn from_toml(text: &str) -> Result<Self> {
        let err = |e: toml::de::Error| NandError::config(e.to_string().replace('\n', " "));
        let table: toml::Table = toml::from_str(text).map_err(err)?;
        // JSON has no NaN or infinity: converted, they would be nulls, reported as "invalid
        // type: null" without the field.
        if let Some((key, v)) = non_finite(&table, "") {
            return Err(NandError::config(format!(
                "{key}: must be a finite number, got {v}"
            )));
        }
        Self::from_value(serde_json::to_value(table).map_err(|e| NandError::config(e.to_string()))?)
    }

    /// Parse a JSON device description, nested or flat as [`DeviceSpec::from_toml`].
    pub fn from_json(text: &str) -> Result<Self> {
        Self::from_value(serde_json::from_str(text).map_err(|e| NandError::config(e.to_string()))?)
    }

    /// Read a device description file: TOML, or JSON when its name ends in `.json`.
    /// Errors do not name the file; callers do.
    pub fn from_file(path: &std::path::Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| NandError::config(e.to_string()))?;
        if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"))
        {
            Self::from_json(&text)
        } else {
            Self::from_toml(&text)
        }
    }

    /// One device, nested or flat.
    fn from_value(value: serde_json::Value) -> Result<Self> {
        // The field a type error is about is named (`geometry.page_size: invalid type:
        // string "big", expected u32`): serde alone says only what it expected.
        let err = |e: serde_path_to_error::Error<serde_json::Error>| {
            let path = e.path().to_string();
            match path.as_str() {
                "" | "." => NandError::config(e.into_inner().to_string()),
                _ => NandError::config(format!("{path}: {}", e.into_inner())),
            }
        };
        let Some(obj) = value.as_object() else {
            return Err(NandError::config(
                "expected one device (an object); `flashkit devices --json` prints a list: save one of its objects",
            ));
        };
        let spec = if obj.contains_key("geometry") || obj.contains_key("timing") {
            serde_path_to_error::deserialize::<_, DeviceSpec>(value).map_err(err)?
        } else {
            serde_path_to_error::deserialize::<_, FlatSpec>(value)
                .map_err(err)?
                .try_into()?
        };
        spec.validate()?;
        Ok(spec)
    }

    /// Look a preset up by name.
    pub fn preset(name: &str) -> Result<Self> {
        presets()
            .into_iter()
            .find(|p| p.name == name)
            .ok_or_else(|| {
                let names: Vec<String> = presets().into_iter().map(|p| p.name).collect();
                NandError::config(format!(
                    "unknown device preset '{name}' (known: {})",
                    names.join(", ")
                ))
            })
    }
}

/// The first float of `table` (depth first, in key order) that is NaN or infinite, with
/// its dotted key.
fn non_finite(table: &toml::Table, prefix: &str) -> Option<(String, f64)> {
    for (k, v) in table {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            toml::Value::Float(f) if !f.is_finite() => return Some((key, *f)),
            toml::Value::Table(t) => {
                if let Some(found) = non_finite(t, &key) {
                    return Some(found);
                }
            }
            _ => {}
        }
    }
    None
}

/// A device description in one flat table, as `flashkit devices --json` and `--csv` print
/// it and as device files may give it. `capacity_bytes` is derived; when given it must
/// match the geometry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlatSpec {
    pub name: String,
    pub page_size: u32,
    pub spare_size: u32,
    pub pages_per_block: u32,
    pub blocks: u32,
    #[serde(default)]
    pub capacity_bytes: Option<u64>,
    pub read_us: f64,
    pub read_ns_per_byte: f64,
    pub spare_read_us: f64,
    pub program_us: f64,
    pub program_ns_per_byte: f64,
    pub erase_us: f64,
    pub nop: u32,
    pub in_order: bool,
    pub endurance: u32,
    #[serde(default)]
    pub description: String,
}

impl From<&DeviceSpec> for FlatSpec {
    fn from(s: &DeviceSpec) -> Self {
        let (g, t) = (&s.geometry, &s.timing);
        FlatSpec {
            name: s.name.clone(),
            page_size: g.page_size,
            spare_size: g.spare_size,
            pages_per_block: g.pages_per_block,
            blocks: g.blocks,
            capacity_bytes: Some(g.capacity_bytes()),
            read_us: t.read_us,
            read_ns_per_byte: t.read_ns_per_byte,
            spare_read_us: t.spare_read_us,
            program_us: t.program_us,
            program_ns_per_byte: t.program_ns_per_byte,
            erase_us: t.erase_us,
            nop: g.nop,
            in_order: g.in_order,
            endurance: s.endurance,
            description: s.description.clone(),
        }
    }
}

impl TryFrom<FlatSpec> for DeviceSpec {
    type Error = NandError;
    fn try_from(f: FlatSpec) -> Result<DeviceSpec> {
        let spec = DeviceSpec {
            name: f.name,
            description: f.description,
            geometry: Geometry {
                page_size: f.page_size,
                spare_size: f.spare_size,
                pages_per_block: f.pages_per_block,
                blocks: f.blocks,
                nop: f.nop,
                in_order: f.in_order,
            },
            timing: Timing {
                read_us: f.read_us,
                read_ns_per_byte: f.read_ns_per_byte,
                spare_read_us: f.spare_read_us,
                program_us: f.program_us,
                program_ns_per_byte: f.program_ns_per_byte,
                erase_us: f.erase_us,
            },
            endurance: f.endurance,
        };
        spec.geometry.validate()?;
        if let Some(c) = f
            .capacity_bytes
            .filter(|&c| c != spec.geometry.capacity_bytes())
        {
            return Err(NandError::config(format!(
                "capacity_bytes: {c} does not match the geometry ({} bytes)",
                spec.geometry.capacity_bytes()
            )));
        }
        Ok(spec)
    }
}

const MIB: u64 = 1 << 20;

fn spec(
    name: &str,
    description: &str,
    geometry: Geometry,
    timing: Timing,
    endurance: u32,
) -> DeviceSpec {
    DeviceSpec {
        name: name.into(),
        description: description.into(),
        geometry,
        timing,
        endurance,
    }
}

/// The built-in presets, each from the paper or datasheet named in its description.
pub fn presets() -> Vec<DeviceSpec> {
    vec![
        spec(
            "intel-series2plus-24m",
            "Intel Series 2+ 24 MB flash card of the Chiang papers (Table 1): 128 KiB erase \
             segments, NOR-style unlimited bit clearing, program 6-9 us/byte (7.5 used), \
             erase 0.6-0.8 s (0.7 used), read 150-250 ns/byte (200 used). The 4 KiB 'page' is \
             only the bookkeeping unit: any bytes may be programmed any number of times.",
            Geometry {
                page_size: 4096,
                spare_size: 0,
                pages_per_block: 32,
                blocks: (24 * MIB / (128 * 1024)) as u32,
                nop: 0,
                in_order: false,
            },
            Timing {
                read_us: 0.0,
                read_ns_per_byte: 200.0,
                spare_read_us: 0.0,
                program_us: 0.0,
                program_ns_per_byte: 7500.0,
                erase_us: 700_000.0,
            },
            1_000_000,
        ),
        spec(
            "nandsim-256m",
            "ScaleFFS Table IV (Linux nandsim, small-block SLC): 256 MiB, 512+16 B pages, \
             32 pages/block, read page 55.7 us, read spare 27.0 us, program 237.7 us, erase \
             2005 us, NOP 4.",
            Geometry {
                page_size: 512,
                spare_size: 16,
                pages_per_block: 32,
                blocks: (256 * MIB / (16 * 1024)) as u32,
                nop: 4,
                in_order: false,
            },
            Timing {
                read_us: 55.7,
                read_ns_per_byte: 0.0,
                spare_read_us: 27.0,
                program_us: 237.7,
                program_ns_per_byte: 0.0,
                erase_us: 2005.0,
            },
            100_000,
        ),
        spec(
            "chang-kuo-16g",
            "Chang & Kuo 2005 Table IV: 16 GiB small-block SLC, 512+16 B pages, 16 KiB \
             blocks, read 230 us, program 459 us, erase 925 us, spare read 40 us. NOP 4 as \
             for small-block SLC parts (the paper does not say).",
            Geometry {
                page_size: 512,
                spare_size: 16,
                pages_per_block: 32,
                blocks: (16 * 1024 * MIB / (16 * 1024)) as u32,
                nop: 4,
                in_order: false,
            },
            Timing {
                read_us: 230.0,
                read_ns_per_byte: 0.0,
                spare_read_us: 40.0,
                program_us: 459.0,
                program_ns_per_byte: 0.0,
                erase_us: 925.0,
            },
            1_000_000,
        ),
        spec(
            "slc-large-1g",
            "Large-block SLC, 1 Gbit class (Samsung K9F1G08U0B datasheet): 2048+64 B pages, \
             64 pages/block, tR 25 us + 2112 B at tRC 25 ns (77.8 us page, 26.6 us spare), \
             tPROG 200 us, tBERS 1.5 ms, NOP 4.",
            Geometry {
                page_size: 2048,
                spare_size: 64,
                pages_per_block: 64,
                blocks: (1024 * MIB / (128 * 1024)) as u32,
                nop: 4,
                in_order: false,
            },
            Timing {
                read_us: 77.8,
                read_ns_per_byte: 0.0,
                spare_read_us: 26.6,
                program_us: 200.0,
                program_ns_per_byte: 0.0,
                erase_us: 1500.0,
            },
            100_000,
        ),
        spec(
            "mlc2-2g",
            "MLC, 2 bits/cell (Samsung K9G8G08U0A class): 2048+64 B pages, 128 pages/block, \
             tR 60 us + transfer (112.8 us page, 61.6 us spare), tPROG 800 us, tBERS 1.5 ms, \
             NOP 1, pages programmed in order.",
            Geometry {
                page_size: 2048,
                spare_size: 64,
                pages_per_block: 128,
                blocks: (2048 * MIB / (256 * 1024)) as u32,
                nop: 1,
                in_order: true,
            },
            Timing {
                read_us: 112.8,
                read_ns_per_byte: 0.0,
                spare_read_us: 61.6,
                program_us: 800.0,
                program_ns_per_byte: 0.0,
                erase_us: 1500.0,
            },
            10_000,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_valid_and_sized_as_documented() {
        for p in presets() {
            p.validate().unwrap();
        }
        let intel = DeviceSpec::preset("intel-series2plus-24m").unwrap();
        assert_eq!(intel.geometry.capacity_bytes(), 24 * MIB);
        assert_eq!(intel.geometry.block_bytes(), 128 * 1024);
        let ck = DeviceSpec::preset("chang-kuo-16g").unwrap();
        assert_eq!(ck.geometry.pages(), 32 * 1024 * 1024);
        assert!(DeviceSpec::preset("nope").is_err());
    }

    /// A device's name is printed and kept NUL-padded in image headers: empty names and
    /// control characters are refused (QA stop 32: an empty one was accepted, one with a
    /// NUL was cut at it), as are names above 63 bytes.
    #[test]
    fn names_are_printable_and_short() {
        let mut d = DeviceSpec::preset("nandsim-256m").unwrap();
        for (name, want) in [
            ("", "must not be empty"),
            ("  ", "must not be empty"),
            ("a\0b", "control characters"),
            ("a\nb", "control characters"),
            (&"x".repeat(64), "at most 63 bytes"),
        ] {
            d.name = name.to_string();
            let e = d.validate().unwrap_err().to_string();
            assert!(e.contains(want), "{name:?}: {e}");
        }
        d.name = "my chip 2.0".into();
        d.validate().unwrap();
    }

    #[test]
    fn toml_roundtrip_and_field_errors() {
        let intel = DeviceSpec::preset("nandsim-256m").unwrap();
        let text = toml::to_string(&intel).unwrap();
        assert_eq!(DeviceSpec::from_toml(&text).unwrap(), intel);
        let broken = text.replace("pages_per_block = 32", "pages_per_block = 0");
        let err = DeviceSpec::from_toml(&broken).unwrap_err().to_string();
        assert!(err.contains("pages_per_block"), "{err}");
        // A value of the wrong type names its field (QA stop 25: "invalid type: string
        // "big", expected u32" named none), nested or flat.
        let typed = text.replace("page_size = 512", "page_size = \"big\"");
        let err = DeviceSpec::from_toml(&typed).unwrap_err().to_string();
        assert!(err.contains("geometry.page_size: invalid type"), "{err}");
        let err = DeviceSpec::from_json(r#"{"name": "x", "page_size": "big"}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("page_size: invalid type"), "{err}");
        // TOML's nan and inf name their field (JSON has neither: they became nulls).
        let re = set_value(&text, "erase_us = ", "nan");
        let err = DeviceSpec::from_toml(&re).unwrap_err().to_string();
        assert!(
            err.contains("timing.erase_us: must be a finite number, got NaN"),
            "{err}"
        );
        let re = set_value(&text, "read_us = ", "-inf");
        let err = DeviceSpec::from_toml(&re).unwrap_err().to_string();
        assert!(err.contains("timing.read_us"), "{err}");
        // A huge value is shown as given, not as 309 digits (QA stop 24).
        let re = set_value(&text, "erase_us = ", "1e308");
        let err = DeviceSpec::from_toml(&re).unwrap_err().to_string();
        assert!(
            err.contains("timing.erase_us: 1e308 is more than") && err.len() < 200,
            "{err}"
        );
    }

    /// `text` with the value after the first `key` (to the end of its line) set to `v`.
    fn set_value(text: &str, key: &str, v: &str) -> String {
        let at = text.find(key).unwrap() + key.len();
        let end = at + text[at..].find('\n').unwrap();
        format!("{}{v}{}", &text[..at], &text[end..])
    }
}
