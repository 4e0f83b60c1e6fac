//! One-line descriptions of bad input on stderr, rate-limited so a flood of garbage cannot flood
//! the log.

use std::time::{Duration, Instant};

/// At most this many lines per window; the rest are counted and summarised.
const LINES_PER_WINDOW: u32 = 10;
const WINDOW: Duration = Duration::from_secs(1);

/// Counts bad input and describes it on stderr without flooding it.
#[derive(Debug)]
pub(crate) struct Diagnostics {
    window_start: Option<Instant>,
    printed_in_window: u32,
    suppressed: u64,
    /// Whether to print at all (tests of floods turn it off; counting goes on).
    pub(crate) enabled: bool,
}

impl Diagnostics {
    pub(crate) fn new(enabled: bool) -> Diagnostics {
        Diagnostics {
            window_start: None,
            printed_in_window: 0,
            suppressed: 0,
            enabled,
        }
    }

    /// Describes one event on stderr, unless the window's quota is spent.
    pub(crate) fn report(&mut self, describe: impl FnOnce() -> String) {
        if !self.enabled {
            return;
        }
        let now = Instant::now();
        let window_over = self
            .window_start
            .is_none_or(|start| now.duration_since(start) >= WINDOW);
        if window_over {
            if self.suppressed > 0 {
                eprintln!(
                    "mcpipe: {} more bad input lines were not described",
                    self.suppressed
                );
                self.suppressed = 0;
            }
            self.window_start = Some(now);
            self.printed_in_window = 0;
        }
        if self.printed_in_window < LINES_PER_WINDOW {
            self.printed_in_window += 1;
            eprintln!("mcpipe: {}", describe());
        } else {
            self.suppressed += 1;
        }
    }
}

/// The start of a line, made printable, for a diagnostic.
pub(crate) fn excerpt(line: &[u8]) -> String {
    const MAX: usize = 80;
    let shown = &line[..line.len().min(MAX)];
    let mut text: String = String::from_utf8_lossy(shown)
        .chars()
        .map(|c| if c.is_control() { '.' } else { c })
        .collect();
    if line.len() > MAX {
        text.push_str(&format!("... ({} bytes)", line.len()));
    }
    text
}
