//! The `flashkit` command line: argument parsing and dispatch only. Each subcommand lives
//! in its own file under `cmd/` (see `cmd/mod.rs` for how to add one); printing helpers
//! are in `output.rs`.

mod cmd;
mod output;
mod progress;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// flashkit: a flash-memory storage stack and the laboratory to study it.
#[derive(Parser, Debug)]
#[command(name = "flashkit", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List the built-in flash device presets with every figure.
    Devices(cmd::devices::DevicesArgs),
    /// Raw NAND image tools: format, info.
    #[command(subcommand)]
    Nand(Box<cmd::nand::NandCmd>),
    /// Simulate the Flash Memory Server on synthetic workloads (the flagship comparison of
    /// cleaning policies with no options).
    Sim(Box<cmd::sim::SimArgs>),
    /// Run a grid of simulations from a TOML spec in parallel, streaming JSON lines
    /// (resumable with --out).
    Sweep(Box<cmd::sweep::SweepArgs>),
    /// Run a paper experiment and print the paper's figures beside ours.
    Reproduce(cmd::reproduce::ReproduceArgs),
    /// Measure how fast the simulator runs here: user and flash block writes per second of
    /// wall-clock time in steady-state cleaning, for any grid of `sim` options.
    Bench(Box<cmd::bench::BenchArgs>),
    /// Cut power at every program/erase of a workload, remount, check nothing durable
    /// was lost.
    Torture(Box<cmd::torture::TortureArgs>),
    /// The Flash Memory Server on a NAND image file: format, info, write, read.
    #[command(subcommand)]
    Fms(Box<cmd::fms::FmsCmd>),
    /// Block traces: stats, convert between formats, generate synthetic traces.
    #[command(subcommand)]
    Trace(Box<cmd::trace::TraceCmd>),
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Devices(a) => cmd::devices::run(a),
        Command::Nand(c) => cmd::nand::run(*c),
        Command::Sim(a) => cmd::sim::run(*a),
        Command::Sweep(a) => cmd::sweep::run(*a),
        Command::Reproduce(a) => cmd::reproduce::run(a),
        Command::Bench(a) => cmd::bench::run(*a),
        Command::Torture(a) => cmd::torture::run(*a),
        Command::Fms(c) => cmd::fms::run(*c),
        Command::Trace(c) => cmd::trace::run(*c),
    }
}

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let msg = msg.split_whitespace().collect::<Vec<_>>().join(" ");
        eprintln!("flashkit: internal error (a bug, please report it): {msg}{at}");
    }));
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if output::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("flashkit: {}", output::error_line(&e));
            ExitCode::FAILURE
        }
    }
}
