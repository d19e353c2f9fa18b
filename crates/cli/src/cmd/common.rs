//! Arguments and helpers shared by subcommands: choosing a device (a preset by name or a
//! TOML/JSON description file) and overriding its geometry, timing and endurance.
//!
//! A subcommand that needs a device flattens [`DeviceArgs`] into its arguments and calls
//! [`DeviceArgs::resolve`] (device required) or [`DeviceArgs::resolve_or`] (with a default
//! preset):
//!
//! ```ignore
//! #[derive(clap::Args)]
//! pub struct SimArgs {
//!     #[command(flatten)]
//!     device: common::DeviceArgs,
//! }
//! let spec = args.device.resolve_or("nandsim-256m")?;
//! ```

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use nand::DeviceSpec;

/// `--device PRESET | --device-file FILE` plus per-field overrides.
#[derive(Args, Debug, Clone, Default)]
pub struct DeviceArgs {
    /// Device preset (see `flashkit devices`).
    #[arg(
        long,
        value_name = "PRESET",
        conflicts_with = "device_file",
        help_heading = "Device"
    )]
    pub device: Option<String>,
    /// Device description file (TOML, or JSON when it ends in .json) with the fields of
    /// `flashkit devices --json`.
    #[arg(long, value_name = "FILE.toml", help_heading = "Device")]
    pub device_file: Option<PathBuf>,
    #[command(flatten)]
    pub overrides: SpecOverrides,
}

/// Fields that may be changed on top of the chosen device. Every override is validated
/// together with the rest of the description.
#[derive(Args, Debug, Clone, Default)]
pub struct SpecOverrides {
    /// Number of erase blocks.
    #[arg(long, value_name = "N", help_heading = "Device overrides")]
    pub blocks: Option<u32>,
    /// Data bytes per page (a size: 2048, 2KiB).
    #[arg(long, value_name = "BYTES", help_heading = "Device overrides", value_parser = size_u32)]
    pub page_size: Option<u32>,
    /// Spare (OOB) bytes per page (a size: 64, 0).
    #[arg(long, value_name = "BYTES", help_heading = "Device overrides", value_parser = size_u32)]
    pub spare_size: Option<u32>,
    /// Pages per erase block.
    #[arg(long, value_name = "N", help_heading = "Device overrides")]
    pub pages_per_block: Option<u32>,
    /// Partial programs allowed per page between erases (0 = unlimited).
    #[arg(long, value_name = "N", help_heading = "Device overrides")]
    pub nop: Option<u32>,
    /// Pages of a block must be programmed in ascending order (true/false, yes/no, on/off,
    /// as a sweep spec takes it).
    #[arg(long, value_name = "BOOL", help_heading = "Device overrides",
          value_parser = clap::builder::TypedValueParser::map(
              clap::builder::PossibleValuesParser::new(["true", "false", "yes", "no", "on", "off"]),
              |s: String| matches!(s.as_str(), "true" | "yes" | "on")))]
    pub in_order: Option<bool>,
    /// Erase cycles a block survives.
    #[arg(long, value_name = "CYCLES", help_heading = "Device overrides")]
    pub endurance: Option<u32>,
    /// Fixed cost of a page read, µs.
    #[arg(long, value_name = "US", help_heading = "Device overrides")]
    pub read_us: Option<f64>,
    /// Cost of a spare-area read, µs.
    #[arg(long, value_name = "US", help_heading = "Device overrides")]
    pub spare_read_us: Option<f64>,
    /// Fixed cost of a program, µs.
    #[arg(long, value_name = "US", help_heading = "Device overrides")]
    pub program_us: Option<f64>,
    /// Cost of a block erase, µs.
    #[arg(long, value_name = "US", help_heading = "Device overrides")]
    pub erase_us: Option<f64>,
}

impl SpecOverrides {
    /// The overrides given, as `--flag value` strings (for error messages).
    pub fn describe(&self) -> Vec<String> {
        let mut v = Vec::new();
        let mut add = |flag: &str, val: Option<String>| {
            if let Some(val) = val {
                v.push(format!("--{flag} {val}"));
            }
        };
        add("blocks", self.blocks.map(|x| x.to_string()));
        add("page-size", self.page_size.map(|x| x.to_string()));
        add("spare-size", self.spare_size.map(|x| x.to_string()));
        add(
            "pages-per-block",
            self.pages_per_block.map(|x| x.to_string()),
        );
        add("nop", self.nop.map(|x| x.to_string()));
        add("in-order", self.in_order.map(|x| x.to_string()));
        add("endurance", self.endurance.map(|x| x.to_string()));
        add("read-us", self.read_us.map(nand::quoted_number));
        add("spare-read-us", self.spare_read_us.map(nand::quoted_number));
        add("program-us", self.program_us.map(nand::quoted_number));
        add("erase-us", self.erase_us.map(nand::quoted_number));
        v
    }

    /// Apply the overrides to `spec` and validate the result; errors name the field.
    pub fn apply(&self, mut spec: DeviceSpec) -> Result<DeviceSpec> {
        let given = self.describe();
        if given.is_empty() {
            return Ok(spec);
        }
        let g = &mut spec.geometry;
        let t = &mut spec.timing;
        set(&mut g.blocks, self.blocks);
        set(&mut g.page_size, self.page_size);
        set(&mut g.spare_size, self.spare_size);
        set(&mut g.pages_per_block, self.pages_per_block);
        set(&mut g.nop, self.nop);
        set(&mut g.in_order, self.in_order);
        set(&mut spec.endurance, self.endurance);
        set(&mut t.read_us, self.read_us);
        set(&mut t.spare_read_us, self.spare_read_us);
        set(&mut t.program_us, self.program_us);
        set(&mut t.erase_us, self.erase_us);
        spec.validate()
            .with_context(|| format!("device {} with {}", spec.name, given.join(" ")))?;
        Ok(spec)
    }
}

fn set<T>(field: &mut T, value: Option<T>) {
    if let Some(v) = value {
        *field = v;
    }
}

impl DeviceArgs {
    /// True when neither `--device` nor `--device-file` was given.
    pub fn is_unset(&self) -> bool {
        self.device.is_none() && self.device_file.is_none()
    }

    /// The chosen device with overrides applied; an error when none was chosen.
    pub fn resolve(&self) -> Result<DeviceSpec> {
        if self.is_unset() {
            bail!("no device given: pass --device PRESET (see `flashkit devices`) or --device-file FILE.toml");
        }
        self.resolve_or("")
    }

    /// The chosen device, or the preset `default` when none was chosen, with overrides.
    pub fn resolve_or(&self, default: &str) -> Result<DeviceSpec> {
        let spec = match (&self.device, &self.device_file) {
            (_, Some(path)) => load_device_file(path)?,
            (Some(name), None) => preset(name).map_err(|e| anyhow::anyhow!("--device: {e}"))?,
            (None, None) => preset(default)?,
        };
        self.overrides.apply(spec)
    }
}

/// The DAC and redistribution options of the commands that run the FMS on a medium
/// (`torture`, and the `fms` commands and `blockdev mount` through `MountArgs`; `sim`
/// takes them through the sweep keys), on top of `fms`: `--redistribution` (refused with
/// more than one region, which replace it), `--regions` 1..8, and `--region-select` and
/// `--region-threshold` (refused with one region).
pub fn apply_dac(
    fms: &mut ftl::fms::FmsConfig,
    redistribution: Option<&str>,
    regions: Option<u8>,
    region_select: Option<&str>,
    region_threshold: Option<&str>,
) -> Result<()> {
    let regions = regions.unwrap_or(fms.regions);
    if let Some(r) = redistribution {
        if regions > 1 {
            bail!("--redistribution: has no effect: DAC regions (--regions > 1) replace the redistribution");
        }
        fms.redistribution = r
            .parse()
            .map_err(|e| anyhow::anyhow!("--redistribution: {e}"))?;
    }
    if !(1..=8).contains(&regions) {
        bail!("--regions: {regions} must be 1..8");
    }
    fms.regions = regions;
    if regions == 1 {
        for (set, name) in [
            (region_select.is_some(), "--region-select"),
            (region_threshold.is_some(), "--region-threshold"),
        ] {
            if set {
                bail!("{name}: has no effect: it applies to DAC (--regions > 1) only");
            }
        }
    }
    if let Some(r) = region_select {
        fms.region_select = r
            .parse()
            .map_err(|e| anyhow::anyhow!("--region-select: {e}"))?;
    }
    if let Some(t) = region_threshold {
        let s = sim::sweep::parse_duration_s(t)
            .map_err(|e| anyhow::anyhow!("--region-threshold: {e}"))?;
        fms.region_threshold_ps = Some((s * 1e12) as u64);
    }
    Ok(())
}

/// `--index-wear-gap N|none` of the commands that run the FMS (`sim` takes it through the
/// sweep keys): a number of erasures, or `none` for the in-place wrap.
pub fn parse_index_wear_gap(text: &str) -> Result<Option<u32>> {
    match text {
        "none" => Ok(None),
        n => parse_erasures(n)
            .map(Some)
            .map_err(|e| anyhow::anyhow!("--index-wear-gap: {e}")),
    }
}

/// `--wear-threshold N|none` of the commands that run the FMS (`sim` takes it through
/// the sweep keys, `none` included): a number of erasures, or `none` (off, the default).
pub fn parse_wear_threshold(text: &str) -> std::result::Result<WearThreshold, String> {
    match text {
        "none" => Ok(WearThreshold(None)),
        n => parse_erasures(n).map(|n| WearThreshold(Some(n))),
    }
}

/// A number of erasures (32 bits): a number too large says so, rather than that it is no
/// number (QA stop 32).
fn parse_erasures(n: &str) -> std::result::Result<u32, String> {
    match n.parse::<u64>() {
        Ok(x) => u32::try_from(x).map_err(|_| format!("{x} is too large (at most {})", u32::MAX)),
        Err(_) => Err(format!("'{n}' is not a number of erasures or `none`")),
    }
}

/// A `--wear-threshold` given: `None` for `none`.
#[derive(Clone, Copy, Debug)]
pub struct WearThreshold(pub Option<u32>);

/// A preset by name; the error lists the known presets.
pub fn preset(name: &str) -> Result<DeviceSpec> {
    Ok(DeviceSpec::preset(name)?)
}

/// Read a device description from a TOML file (JSON when the name ends in `.json`); errors
/// name the file.
pub fn load_device_file(path: &Path) -> Result<DeviceSpec> {
    DeviceSpec::from_file(path).with_context(|| format!("device file {}", path.display()))
}

/// Parse a block list such as `3,7,10-12` (ranges inclusive) of a device with `blocks`
/// erase blocks; errors quote the part that is wrong.
pub fn parse_block_list(text: &str, blocks: u32) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    // An empty list names no block; an empty item of a list (`3,,7`, `,`) is a mistake.
    if text.trim().is_empty() {
        return Ok(out);
    }
    for (i, part) in text.split(',').map(str::trim).enumerate() {
        if part.is_empty() {
            bail!("item {} of '{text}' is empty", i + 1);
        }
        let num = |s: &str| -> Result<u32> {
            let b = s.trim().parse::<u32>().map_err(|_| {
                anyhow::anyhow!("'{part}' is not a block number or range (e.g. 3,7,10-12)")
            })?;
            if b >= blocks {
                bail!(
                    "block {b} out of range (device has {blocks} blocks, 0-{})",
                    blocks.saturating_sub(1)
                );
            }
            Ok(b)
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    bail!("range '{part}' is backwards");
                }
                out.extend(a..=b);
            }
            None => out.push(num(part)?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_lists() {
        assert_eq!(parse_block_list("3,7", 16).unwrap(), vec![3, 7]);
        assert_eq!(parse_block_list("9, 1-3,2", 16).unwrap(), vec![1, 2, 3, 9]);
        assert!(parse_block_list("x", 16).is_err());
        assert!(parse_block_list("5-2", 16).is_err());
        let e = parse_block_list("-1", 16).unwrap_err().to_string();
        assert!(e.starts_with("'-1' is not a block number"), "{e}");
        let e = parse_block_list("2,3-x", 16).unwrap_err().to_string();
        assert!(e.starts_with("'3-x' is not a block number"), "{e}");
        // Checked before a range is expanded (no 4 billion entries for a typo).
        let e = parse_block_list("0-4294967295", 16)
            .unwrap_err()
            .to_string();
        assert!(e.contains("block 4294967295 out of range"), "{e}");
        // Empty items are refused, an empty list names no block.
        for t in [",", "3,,7", "3,"] {
            let e = parse_block_list(t, 16).unwrap_err().to_string();
            assert!(e.contains("is empty"), "{t}: {e}");
        }
        assert!(parse_block_list(" ", 16).unwrap().is_empty());
    }

    #[test]
    fn overrides_apply_and_validate() {
        let base = DeviceSpec::preset("nandsim-256m").unwrap();
        let o = SpecOverrides {
            blocks: Some(64),
            nop: Some(1),
            ..Default::default()
        };
        let s = o.apply(base.clone()).unwrap();
        assert_eq!((s.geometry.blocks, s.geometry.nop), (64, 1));
        let bad = SpecOverrides {
            pages_per_block: Some(0),
            ..Default::default()
        };
        let err = format!("{:#}", bad.apply(base).unwrap_err());
        assert!(err.contains("pages_per_block"), "{err}");
        assert!(err.contains("--pages-per-block 0"), "{err}");
    }

    #[test]
    fn resolve_requires_a_device() {
        assert!(DeviceArgs::default().resolve().is_err());
        let d = DeviceArgs::default().resolve_or("mlc2-2g").unwrap();
        assert_eq!(d.name, "mlc2-2g");
    }
}

/// Byte sizes (`4KiB`, `192MiB`) and durations (`30m`, `2h`), shared with sweep files.
#[allow(unused_imports)]
pub use sim::sweep::{parse_duration_s, parse_size};

/// A size option that fits 32 bits (`2048`, `2KiB`), as every size option takes units
/// (QA stop 28: `--page-size 2KiB` was refused).
pub fn size_u32(s: &str) -> std::result::Result<u32, String> {
    let v = parse_size(s)?;
    u32::try_from(v).map_err(|_| format!("{v} bytes does not fit 32 bits"))
}

#[cfg(test)]
mod parse_tests {
    use super::*;

    #[test]
    fn sizes_and_durations() {
        assert_eq!(parse_size("192MiB").unwrap(), 192 << 20);
        assert_eq!(parse_size("4KiB").unwrap(), 4096);
        assert_eq!(parse_size("512").unwrap(), 512);
        assert!(parse_size("4XB").is_err());
        assert_eq!(parse_duration_s("30m").unwrap(), 1800.0);
        assert_eq!(parse_duration_s("2h").unwrap(), 7200.0);
        assert!(parse_duration_s("soon").is_err());
    }
}

/// Refuse to write `output` when it is the file `input` (opening it for writing would
/// truncate what is about to be read). A missing output is never the input.
pub fn refuse_same_file(output: &Path, input: &Path, what: &str) -> Result<()> {
    if sim::trace::same_file(output, input) {
        bail!(
            "{}: is the {what} itself; writing it would destroy it",
            output.display()
        );
    }
    Ok(())
}

/// Refuse a `--csv` that names one of the command's input files (image, device file,
/// trace): writing the report would replace the input; or that cannot be written, which
/// would otherwise fail only after the command's work (a torture, a mount session).
pub fn refuse_csv_over(report: &crate::output::ReportArgs, inputs: &[(&Path, &str)]) -> Result<()> {
    if let Some(csv) = report.csv.as_deref() {
        for (input, what) in inputs {
            refuse_same_file(csv, input, what).map_err(|e| anyhow::anyhow!("--csv: {e}"))?;
        }
        sim::plot::check_writable(csv, "--csv")?;
    }
    Ok(())
}

/// The files a grid run writes (`outputs`: flag and path) must be writable (a `--csv`
/// that cannot be written would fail only after every job ran) and be neither the spec
/// file, nor a file the grid reads (a `trace:FILE` workload, a `device_file`), nor one
/// another: writing one would destroy the other. Checked before anything runs.
pub fn check_outputs(
    outputs: &[(&str, Option<&Path>)],
    spec: &sim::sweep::Spec,
    spec_file: Option<&Path>,
) -> Result<()> {
    let given: Vec<(&str, &Path)> = outputs
        .iter()
        .filter_map(|(f, p)| p.map(|p| (*f, p)))
        .collect();
    if let Some((flag, csv)) = given.iter().find(|(f, _)| *f == "--csv") {
        sim::plot::check_writable(csv, flag)?;
    }
    let inputs = spec.inputs();
    for (i, (flag, path)) in given.iter().enumerate() {
        if spec_file.is_some_and(|s| sim::trace::same_file(path, s)) {
            bail!(
                "{flag}: {} is the sweep spec; write the results to another file",
                path.display()
            );
        }
        if let Some((key, input, origin)) = inputs
            .iter()
            .find(|(_, input, _)| sim::trace::same_file(path, input))
        {
            let at = match origin {
                sim::sweep::Origin::File { path, line } => format!("{}:{line}: ", path.display()),
                sim::sweep::Origin::Flag => String::new(),
            };
            let (noun, what) = if *key == "workload" {
                ("trace being read", "a trace")
            } else {
                ("device file", "a device file")
            };
            match spec_file {
                // Given by flags: the words of every other command's check.
                None => {
                    refuse_same_file(path, input, noun).map_err(|e| anyhow::anyhow!("{flag}: {e}"))?
                }
                Some(_) => bail!(
                    "{flag}: {} is {what} the sweep reads ({at}{key}); write the results to another file",
                    input.display()
                ),
            }
        }
        if let Some((other, _)) = given[..i]
            .iter()
            .find(|(_, p)| sim::trace::same_file(path, p))
        {
            bail!("{flag}: {} is also the {other} file", path.display());
        }
    }
    Ok(())
}

/// Open a NAND image as a device (`writable`: for commands that change it; otherwise on a
/// read-only open whose changes stay in RAM), telling on stderr what the open repaired: a
/// corrupt block-table entry costs its block (taken as grown bad), not the image.
pub fn open_image(path: &Path, writable: bool) -> Result<nand::Nand> {
    let nand = if writable {
        nand::image::open_device(path)?
    } else {
        nand::image::open_device_readonly(path)?
    };
    // Every line when a few entries were repaired; the first ones and a count when many
    // were (a block table overwritten whole would print a line per block).
    const SHOWN: usize = 8;
    let repairs = nand.open_repairs();
    let shown = if repairs.len() > SHOWN {
        SHOWN - 1
    } else {
        repairs.len()
    };
    for r in &repairs[..shown] {
        eprintln!("flashkit: {}: {r}", path.display());
    }
    if repairs.len() > shown {
        eprintln!(
            "flashkit: {}: and {} more block-table entries corrupt, each block taken as grown bad ({} of the image's {} blocks)",
            path.display(),
            repairs.len() - shown,
            repairs.len(),
            nand.geometry().blocks
        );
    }
    Ok(nand)
}
