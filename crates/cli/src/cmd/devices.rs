//! `flashkit devices`: the built-in device presets with every figure.

use anyhow::Result;
use clap::Args;
use nand::DeviceSpec;
use serde::Serialize;

use crate::output::{self, ReportArgs, Table};

#[derive(Args, Debug)]
pub struct DevicesArgs {
    #[command(flatten)]
    pub report: ReportArgs,
}

/// One preset, flat, as printed by `--json` and `--csv`.
#[derive(Serialize, Debug)]
pub struct DeviceRow {
    pub name: String,
    pub page_size: u32,
    pub spare_size: u32,
    pub pages_per_block: u32,
    pub blocks: u32,
    pub capacity_bytes: u64,
    pub read_us: f64,
    pub read_ns_per_byte: f64,
    pub spare_read_us: f64,
    pub program_us: f64,
    pub program_ns_per_byte: f64,
    pub erase_us: f64,
    pub nop: u32,
    pub in_order: bool,
    pub endurance: u32,
    pub description: String,
}

impl From<&DeviceSpec> for DeviceRow {
    fn from(s: &DeviceSpec) -> Self {
        let g = &s.geometry;
        let t = &s.timing;
        DeviceRow {
            name: s.name.clone(),
            page_size: g.page_size,
            spare_size: g.spare_size,
            pages_per_block: g.pages_per_block,
            blocks: g.blocks,
            capacity_bytes: g.capacity_bytes(),
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

/// `nop` for people: 0 means unlimited partial programs (NOR-style bit clearing).
pub fn nop_text(nop: u32) -> String {
    if nop == 0 {
        "unlimited".into()
    } else {
        nop.to_string()
    }
}

pub fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.into()
}

pub fn run(args: DevicesArgs) -> Result<()> {
    let presets = nand::presets();
    let rows: Vec<DeviceRow> = presets.iter().map(DeviceRow::from).collect();
    if let Some(path) = &args.report.csv {
        output::write_csv(path, &rows)?;
    }
    if args.report.json {
        return output::print_json(&rows);
    }
    let mut t = Table::new(&[
        "device",
        "capacity",
        "page+spare",
        "pages/block",
        "blocks",
        "read",
        "spare read",
        "program",
        "erase",
        "nop",
        "in-order",
        "endurance",
    ]);
    for s in &presets {
        let g = &s.geometry;
        let tm = &s.timing;
        t.row(vec![
            s.name.clone(),
            output::bytes(g.capacity_bytes()),
            format!("{}+{}", g.page_size, g.spare_size),
            g.pages_per_block.to_string(),
            g.blocks.to_string(),
            output::op_cost(tm.read_us, tm.read_ns_per_byte),
            if g.spare_size == 0 {
                "-".into()
            } else {
                output::op_cost(tm.spare_read_us, tm.read_ns_per_byte)
            },
            output::op_cost(tm.program_us, tm.program_ns_per_byte),
            output::duration_us(tm.erase_us),
            nop_text(g.nop),
            yes_no(g.in_order),
            output::count(s.endurance as u64),
        ]);
    }
    t.print()
}
