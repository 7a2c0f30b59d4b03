//! The CLI's progress bar on standard error: the phase of a long command and a count.
//!
//! Invariants: nothing is drawn when `--quiet` is given or standard error is not a terminal; the
//! bar stays hidden for the first second (short commands print nothing extra) and is cleared when
//! the command ends, so standard output is never touched.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How long a command runs before its bar appears.
const SHOW_AFTER: Duration = Duration::from_secs(1);

/// A progress bar over a fixed number of phases; inert when not shown.
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A bar over `phases` phases, drawn after a second unless `quiet` or standard error is not a
    /// terminal.
    pub fn new(quiet: bool, phases: u64) -> Progress {
        if quiet || !std::io::stderr().is_terminal() {
            return Progress { bar: None };
        }
        let bar = ProgressBar::with_draw_target(Some(phases), ProgressDrawTarget::hidden());
        let style = ProgressStyle::with_template("{spinner} [{elapsed_precise}] {pos}/{len} {msg}")
            .expect("a valid progress template");
        bar.set_style(style);
        bar.enable_steady_tick(Duration::from_millis(120));
        let shown = bar.clone();
        std::thread::spawn(move || {
            std::thread::sleep(SHOW_AFTER);
            if !shown.is_finished() {
                shown.set_draw_target(ProgressDrawTarget::stderr());
            }
        });
        Progress { bar: Some(bar) }
    }

    /// Starts the next phase: `name`, with a count such as the number of instructions.
    pub fn phase(&self, name: &str, count: Option<usize>) {
        if let Some(b) = &self.bar {
            if b.message().is_empty() {
                b.set_position(0);
            } else {
                b.inc(1);
            }
            b.set_message(match count {
                Some(n) => format!("{name} ({n} instructions)"),
                None => name.to_string(),
            });
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
