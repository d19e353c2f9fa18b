//! The `flashkit` command line: argument parsing and dispatch only. Each subcommand lives
//! in its own file under `cmd/` (see `cmd/mod.rs` for how to add one); printing helpers
//! are in `output.rs`.

mod cmd;
mod output;
mod progress;

use std::collections::BTreeSet;
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};

/// flashkit: a flash-memory storage stack and the laboratory to study it.
#[derive(Parser, Debug)]
#[command(name = "flashkit", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// `flashkit sim`: the grid options it shares with `bench`, then the plot options that only
// `sim` has (bench draws no figures, so it must not offer them).
#[derive(clap::Args, Debug)]
struct SimCmd {
    #[command(flatten)]
    args: cmd::sim::SimArgs,
    #[command(flatten)]
    plot: output::PlotArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List the built-in flash device presets with every figure.
    Devices(cmd::devices::DevicesArgs),
    /// Raw NAND image tools: format, info.
    #[command(subcommand)]
    Nand(Box<cmd::nand::NandCmd>),
    /// Simulate the Flash Memory Server on synthetic workloads or block traces (the
    /// flagship comparison of cleaning policies with no options).
    #[command(after_long_help = cmd::sim::AFTER_HELP)]
    Sim(Box<SimCmd>),
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
    /// The Flash Memory Server on a NAND image file: format, info, write, read, trim, check.
    #[command(subcommand)]
    Fms(Box<cmd::fms::FmsCmd>),
    /// The FTL on a NAND image as one disk-image file under FUSE (mkfs.fat, mtools, fio
    /// and dd use it): mount.
    #[command(subcommand)]
    Blockdev(Box<cmd::blockdev::BlockdevCmd>),
    /// Block traces: stats, convert between formats, generate synthetic traces.
    #[command(subcommand)]
    Trace(Box<cmd::trace::TraceCmd>),
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Devices(a) => cmd::devices::run(a),
        Command::Nand(c) => cmd::nand::run(*c),
        Command::Sim(c) => {
            let SimCmd { mut args, plot } = *c;
            args.plot = plot;
            cmd::sim::run(args)
        }
        Command::Sweep(a) => cmd::sweep::run(*a),
        Command::Reproduce(a) => cmd::reproduce::run(a),
        Command::Bench(a) => cmd::bench::run(*a),
        Command::Torture(a) => cmd::torture::run(*a),
        Command::Fms(c) => cmd::fms::run(*c),
        Command::Blockdev(c) => cmd::blockdev::run(*c),
        Command::Trace(c) => cmd::trace::run(*c),
    }
}

/// Parse the command line. Help and version print as clap prints them; any other clap
/// error becomes one `flashkit: …` line with exit code 2, like every other bad input.
fn parse() -> Result<Cli, ExitCode> {
    let parsed = negatives_are_values(Cli::command())
        .mut_subcommand("bench", cmd::bench::without_trace_input)
        .try_get_matches()
        .and_then(|m| Ok((Cli::from_arg_matches(&m)?, m)));
    let (mut cli, matches) = match parsed {
        Ok(p) => p,
        Err(e) => {
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                // clap's own help or version output (and exit code); a stdout that
                // cannot take it fails as every report's does (`--help > /dev/full`
                // exited 0), a closed pipe (`--help | head`) does not.
                let printed = e
                    .print()
                    .and_then(|()| std::io::Write::flush(&mut std::io::stdout()));
                return Err(match printed {
                    Ok(()) => ExitCode::from(e.exit_code().clamp(0, 255) as u8),
                    Err(io) if io.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
                    Err(io) => {
                        eprintln!("flashkit: cannot write to stdout: {io}");
                        ExitCode::FAILURE
                    }
                });
            }
            eprintln!("flashkit: {}", clap_error_line(&e.render().to_string()));
            return Err(ExitCode::from(2));
        }
    };
    // Options left at their defaults, for the commands that must tell them apart from
    // values given (an option given that has no effect is an error).
    let defaulted = defaulted_ids(&matches);
    match &mut cli.command {
        Command::Sim(a) => a.args.defaulted = defaulted,
        Command::Bench(a) => a.sim.defaulted = defaulted,
        _ => {}
    }
    Ok(cli)
}

/// Let every option that takes a value take a negative number (`--seed -1`), so it is
/// refused by the option's own check instead of read as an unknown flag.
fn negatives_are_values(cmd: clap::Command) -> clap::Command {
    let subs: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    let mut cmd = cmd.mut_args(|a| {
        if a.get_action().takes_values() {
            a.allow_negative_numbers(true)
        } else {
            a
        }
    });
    for name in subs {
        cmd = cmd.mut_subcommand(name, negatives_are_values);
    }
    cmd
}

/// The ids of the arguments of the innermost subcommand that took their default value.
fn defaulted_ids(matches: &ArgMatches) -> BTreeSet<String> {
    let mut m = matches;
    while let Some((_, sub)) = m.subcommand() {
        m = sub;
    }
    m.ids()
        .filter(|id| m.value_source(id.as_str()) == Some(ValueSource::DefaultValue))
        .map(|id| id.to_string())
        .collect()
}

/// clap's error message on one line: the text before its usage and `--help` hint, without
/// the `error: ` prefix, with hint lines (`[possible values: …]`, `tip: …`) folded in.
fn clap_error_line(rendered: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for line in rendered.lines() {
        let line = line.trim();
        if line.starts_with("Usage:") || line.starts_with("For more information") {
            break;
        }
        if !line.is_empty() {
            parts.push(line.strip_prefix("error: ").unwrap_or(line));
        }
    }
    parts.join(" ")
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
    let cli = match parse() {
        Ok(cli) => cli,
        Err(e) => return e,
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if output::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) if e.downcast_ref::<output::Reported>().is_some() => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("flashkit: {}", output::error_line(&e));
            ExitCode::FAILURE
        }
    }
}
