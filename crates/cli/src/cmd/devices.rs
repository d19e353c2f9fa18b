//! `flashkit devices`: the built-in device presets with every figure.

use anyhow::Result;
use clap::Args;
use nand::FlatSpec;

use crate::output::{self, ReportArgs, Table};

#[derive(Args, Debug)]
pub struct DevicesArgs {
    #[command(flatten)]
    pub report: ReportArgs,
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
    // One flat row per preset, the form device files may use too.
    let rows: Vec<FlatSpec> = presets.iter().map(FlatSpec::from).collect();
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
