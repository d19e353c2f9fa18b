//! Progress bars on stderr (indicatif) with rate and ETA, drawn only when stderr is a
//! terminal: piped or redirected runs print nothing extra, so `--json` output and logs stay
//! clean. A bar is `Sync` and may be advanced from worker threads.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

pub struct Progress {
    bar: ProgressBar,
}

/// Whether progress is drawn at all.
pub fn visible() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("FLASHKIT_NO_PROGRESS").is_none()
}

impl Progress {
    /// A bar of `total` units, or a counter without bar or ETA when the total is unknown.
    fn new(total: Option<u64>, unit: &str) -> Progress {
        if !visible() {
            return Progress {
                bar: ProgressBar::hidden(),
            };
        }
        let bar = ProgressBar::with_draw_target(total, ProgressDrawTarget::stderr());
        let template = if total.is_some() {
            format!(
                "{{spinner}} {{elapsed_precise}} [{{wide_bar}}] {{human_pos}}/{{human_len}} \
                 {unit} ({{rate}}/s, ETA {{eta}}) {{msg}}"
            )
        } else {
            format!("{{spinner}} {{elapsed_precise}} {{human_pos}} {unit} ({{rate}}/s) {{msg}}")
        };
        bar.set_style(
            ProgressStyle::with_template(&template)
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .with_key("rate", |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                    let r = s.per_sec();
                    let _ = if r >= 100.0 {
                        write!(w, "{}", indicatif::HumanCount(r as u64))
                    } else {
                        write!(w, "{r:.1}")
                    };
                })
                .progress_chars("=> "),
        );
        bar.enable_steady_tick(Duration::from_millis(200));
        Progress { bar }
    }

    /// Jobs of a grid, sweep or reproduction.
    pub fn jobs(total: u64) -> Progress {
        Progress::new(Some(total), "jobs")
    }

    /// Requests of one simulation run (`None`: not known before the end, as for a trace
    /// read without a limit).
    pub fn requests(total: Option<u64>) -> Progress {
        Progress::new(total, "requests")
    }

    pub fn inc(&self, n: u64) {
        self.bar.inc(n);
    }

    pub fn set(&self, pos: u64) {
        self.bar.set_position(pos);
    }

    pub fn set_total(&self, total: u64) {
        self.bar.set_length(total);
    }

    /// Remove the bar from the terminal.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if !self.bar.is_finished() {
            self.bar.finish_and_clear();
        }
    }
}
