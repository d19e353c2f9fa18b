//! `flashkit nand …`: raw NAND image tools (format, info).

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{ArgGroup, Args, Subcommand};
use nand::{image, BadState, DeviceSpec, Nand};
use serde::Serialize;

use super::common::{self, DeviceArgs};
use super::devices::{nop_text, yes_no};
use crate::output::{self, Fields, ReportArgs};

#[derive(Subcommand, Debug)]
pub enum NandCmd {
    /// Create an erased NAND image file for a device.
    ///
    /// `--json` describes the new image as `nand info --json` does.
    Format(Box<FormatArgs>),
    /// Show an image's device, erase-count summary and bad blocks.
    Info(InfoArgs),
}

pub fn run(cmd: NandCmd) -> Result<()> {
    match cmd {
        NandCmd::Format(a) => format(*a),
        NandCmd::Info(a) => info(a),
    }
}

#[derive(Args, Debug)]
#[command(group(
    ArgGroup::new("device_source")
        .args(["device", "device_file"])
        .required(true)
))]
pub struct FormatArgs {
    /// Image file to create.
    pub image: PathBuf,
    #[command(flatten)]
    pub device: DeviceArgs,
    /// Overwrite IMAGE if it exists.
    #[arg(long)]
    pub force: bool,
    /// Factory-bad blocks, e.g. `3,7,100-103`.
    #[arg(long, value_name = "LIST")]
    pub bad_blocks: Option<String>,
    /// Also mark a fraction F of the blocks factory-bad (F × blocks, rounded, chosen at
    /// random by --seed).
    #[arg(long, value_name = "F")]
    pub bad_fraction: Option<f64>,
    /// Seed for --bad-fraction.
    #[arg(long, value_name = "S", default_value_t = 0, requires = "bad_fraction")]
    pub seed: u64,
    // `--json`: the new image as `nand info --json` describes it (device, geometry,
    // timing, endurance, bad blocks), instead of the one-line summary.
    #[command(flatten)]
    pub report: ReportArgs,
}

fn format(a: FormatArgs) -> Result<()> {
    let spec = a.device.resolve()?;
    let blocks = spec.geometry.blocks;
    let listed = match &a.bad_blocks {
        Some(text) => common::parse_block_list(text, blocks).context("--bad-blocks")?,
        None => Vec::new(),
    };
    if let Some(f) = a.bad_fraction {
        if !(0.0..=1.0).contains(&f) {
            bail!("--bad-fraction: must be between 0 and 1, got {f}");
        }
    }
    // (QA stop 27: `--csv` over the device file replaced it, exit 0.)
    let mut inputs = vec![(a.image.as_path(), "image being created")];
    if let Some(f) = a.device.device_file.as_deref() {
        inputs.push((f, "device file"));
    }
    super::common::refuse_csv_over(&a.report, &inputs)?;
    if !a.force && a.image.exists() {
        bail!(
            "{} already exists; pass --force to overwrite it",
            a.image.display()
        );
    }
    let mut nand = image::create_device(&a.image, &spec, a.force)?;
    nand.mark_factory_bad(&listed)?;
    if let Some(f) = a.bad_fraction {
        nand.mark_factory_bad_seeded(f, a.seed)?;
    }
    nand.sync()?;
    let r = info_report(&a.image, &nand);
    if let Some(path) = &a.report.csv {
        output::write_csv(path, std::slice::from_ref(&r))?;
    }
    if a.report.json {
        return output::print_json(&r);
    }
    let g = &spec.geometry;
    let bad = bad_lists(&nand);
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "formatted {}: {}, {} ({} blocks × {} pages × {}+{} B), {} factory-bad block(s){}",
        a.image.display(),
        sim::trace::escape_controls(&spec.name),
        output::bytes(g.capacity_bytes()),
        g.blocks,
        g.pages_per_block,
        g.page_size,
        g.spare_size,
        bad.factory.len(),
        if bad.factory.is_empty() {
            String::new()
        } else {
            format!(": {}", output::block_list(&bad.factory, 20))
        }
    )?;
    Ok(())
}

#[derive(Args, Debug)]
pub struct InfoArgs {
    /// Image file to inspect.
    pub image: PathBuf,
    #[command(flatten)]
    pub report: ReportArgs,
}

/// `flashkit nand info --json`.
#[derive(Serialize, Debug)]
pub struct InfoReport {
    pub image: String,
    pub name: String,
    pub page_size: u32,
    pub spare_size: u32,
    pub pages_per_block: u32,
    pub blocks: u32,
    pub capacity_bytes: u64,
    pub nop: u32,
    pub in_order: bool,
    pub endurance: u32,
    pub read_us: f64,
    pub read_ns_per_byte: f64,
    pub spare_read_us: f64,
    pub program_us: f64,
    pub program_ns_per_byte: f64,
    pub erase_us: f64,
    /// Erase-count summary over blocks that are not factory-bad (the contract's wear
    /// metrics).
    pub wear_min: u32,
    pub wear_mean: f64,
    pub wear_max: u32,
    pub wear_stddev: f64,
    pub erase_total: u64,
    /// Every bad block, factory and grown, ascending.
    pub bad_blocks: Vec<u32>,
    pub factory_bad: usize,
    pub grown_bad: usize,
    pub factory_bad_blocks: Vec<u32>,
    pub grown_bad_blocks: Vec<u32>,
}

/// An image's bad blocks, factory and grown, ascending.
pub(crate) struct BadLists {
    pub factory: Vec<u32>,
    pub grown: Vec<u32>,
}

pub(crate) fn bad_lists(nand: &Nand) -> BadLists {
    let mut l = BadLists {
        factory: Vec::new(),
        grown: Vec::new(),
    };
    for b in 0..nand.geometry().blocks {
        match nand.block_info(b).bad {
            BadState::Good => {}
            BadState::Factory => l.factory.push(b),
            BadState::Grown => l.grown.push(b),
        }
    }
    l
}

fn info_report(image: &std::path::Path, nand: &Nand) -> InfoReport {
    let spec: &DeviceSpec = nand.spec();
    let g = &spec.geometry;
    let t = &spec.timing;
    let wear = nand.wear();
    let bad = bad_lists(nand);
    let mut all: Vec<u32> = bad.factory.iter().chain(&bad.grown).copied().collect();
    all.sort_unstable();
    InfoReport {
        image: image.display().to_string(),
        name: spec.name.clone(),
        page_size: g.page_size,
        spare_size: g.spare_size,
        pages_per_block: g.pages_per_block,
        blocks: g.blocks,
        capacity_bytes: g.capacity_bytes(),
        nop: g.nop,
        in_order: g.in_order,
        endurance: spec.endurance,
        read_us: t.read_us,
        read_ns_per_byte: t.read_ns_per_byte,
        spare_read_us: t.spare_read_us,
        program_us: t.program_us,
        program_ns_per_byte: t.program_ns_per_byte,
        erase_us: t.erase_us,
        wear_min: wear.min,
        wear_mean: wear.mean,
        wear_max: wear.max,
        wear_stddev: wear.stddev,
        erase_total: wear.total,
        bad_blocks: all,
        factory_bad: bad.factory.len(),
        grown_bad: bad.grown.len(),
        factory_bad_blocks: bad.factory,
        grown_bad_blocks: bad.grown,
    }
}

fn info(a: InfoArgs) -> Result<()> {
    super::common::refuse_csv_over(&a.report, &[(&a.image, "image being read")])?;
    // Inspection only: a read-only image can be described.
    let nand = super::common::open_image(&a.image, false)?;
    let r = info_report(&a.image, &nand);
    if let Some(path) = &a.report.csv {
        output::write_csv(path, std::slice::from_ref(&r))?;
    }
    if a.report.json {
        return output::print_json(&r);
    }
    let list = |v: &[u32]| {
        if v.is_empty() {
            String::new()
        } else {
            format!(": {}", output::block_list(v, 20))
        }
    };
    let mut f = Fields::new();
    f.add("image", &r.image)
        .add("device", &r.name)
        .add(
            "capacity",
            format!(
                "{} ({} bytes)",
                output::bytes(r.capacity_bytes),
                r.capacity_bytes
            ),
        )
        .add(
            "geometry",
            format!(
                "{} blocks × {} pages × ({}+{}) B",
                r.blocks, r.pages_per_block, r.page_size, r.spare_size
            ),
        )
        .add("nop", nop_text(r.nop))
        .add("in-order", yes_no(r.in_order))
        .add("endurance", format!("{} erase cycles", r.endurance))
        .add(
            "timing",
            format!(
                "read {}, spare read {}, program {}, erase {}",
                output::op_cost(r.read_us, r.read_ns_per_byte),
                // No spare area, nothing to read there ("-", as `flashkit devices`).
                if r.spare_size == 0 {
                    "-".into()
                } else {
                    output::op_cost(r.spare_read_us, r.read_ns_per_byte)
                },
                output::op_cost(r.program_us, r.program_ns_per_byte),
                output::duration_us(r.erase_us)
            ),
        )
        .add(
            "erase counts",
            format!(
                "min {}, mean {:.2}, max {}, stddev {:.2} (total {})",
                r.wear_min, r.wear_mean, r.wear_max, r.wear_stddev, r.erase_total
            ),
        )
        .add("bad blocks", r.bad_blocks.len().to_string())
        .add(
            "  factory",
            format!("{}{}", r.factory_bad, list(&r.factory_bad_blocks)),
        )
        .add(
            "  grown",
            format!("{}{}", r.grown_bad, list(&r.grown_bad_blocks)),
        );
    f.print()
}
