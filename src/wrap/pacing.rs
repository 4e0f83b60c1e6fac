//! How many lines the wrapper may hand the server at once.
//!
//! A server that polls its stdin and then reads through a buffered reader may take several
//! lines out of the pipe, handle one, and sleep in poll while the others wait in its buffer.
//! Handing it one line at a time (the next only once the pipe is empty) makes that impossible,
//! but costs a round trip per line. So the wrapper starts that way and, once, probes: two
//! requests in one write (atomic below `PIPE_BUF`, so a reader takes both at once). A server
//! that answers both without being sent anything else handles what it buffered: from then on
//! queued lines go in batches. One that does not is paced for the rest of its life (and the
//! request it holds is freed by the next line, or by a ping the wrapper sends).

use std::time::{Duration, Instant};

use crate::message::RequestId;

/// How long a probe may wait for its two answers before the server counts as one that holds
/// buffered lines (or is merely slow: either way it stays paced).
pub(super) const PROBE_WAIT: Duration = Duration::from_millis(200);

/// The most bytes written at once to a server proven to handle batches.
pub(super) const MAX_BATCH_BYTES: usize = 1 << 20;

/// The pacing state of one life of the server.
#[derive(Debug, Default)]
pub(super) struct Pacing {
    /// The server answered both requests of a probe: batches are safe.
    proven: bool,
    /// A probe failed: one line at a time for the rest of this life.
    paced_for_good: bool,
    /// The requests of the probe in the pipe, not yet answered, and when it was written.
    probe: Option<(Vec<RequestId>, Instant)>,
}

/// What the writer may do next.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Mode {
    /// Everything queued, in one write, without waiting for the pipe to empty.
    Batch,
    /// Two requests in one write, as a probe.
    Probe,
    /// One line, once the pipe is empty.
    Single,
    /// Nothing until the probe in flight is settled.
    Hold,
}

impl Pacing {
    /// A fresh server: unproven.
    pub(super) fn reset(&mut self) {
        *self = Pacing::default();
    }

    /// What the writer may do, given whether the next two queued lines are whole requests.
    pub(super) fn mode(&self, two_requests_first: bool) -> Mode {
        if self.proven {
            Mode::Batch
        } else if self.probe.is_some() {
            Mode::Hold
        } else if two_requests_first && !self.paced_for_good {
            Mode::Probe
        } else {
            Mode::Single
        }
    }

    /// Whether a probe is in the pipe (nothing else may be written meanwhile: another line
    /// would wake a server that holds a buffered line, and prove nothing).
    pub(super) fn probing(&self) -> bool {
        self.probe.is_some()
    }

    /// Whether the server proved it handles lines that arrive together.
    pub(super) fn batches_allowed(&self) -> bool {
        self.proven
    }

    /// The probe's two requests were written at `now`.
    pub(super) fn probe_written(&mut self, ids: Vec<RequestId>, now: Instant) {
        self.probe = Some((ids, now));
    }

    /// The server answered `id`. Returns `true` when that settled the probe in its favour.
    pub(super) fn answered(&mut self, id: &RequestId) -> bool {
        let Some((ids, _)) = &mut self.probe else {
            return false;
        };
        ids.retain(|i| i != id);
        if !ids.is_empty() {
            return false;
        }
        self.probe = None;
        self.proven = true;
        true
    }

    /// At `now`, whether the probe ran out of time: the server stays paced (and may hold a
    /// request in its buffer, which the caller frees by writing something).
    pub(super) fn probe_expired(&mut self, now: Instant) -> bool {
        match &self.probe {
            Some((_, since)) if now.duration_since(*since) >= PROBE_WAIT => {
                self.probe = None;
                self.paced_for_good = true;
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: i64) -> RequestId {
        RequestId::from(n)
    }

    #[test]
    fn a_server_that_answers_both_probed_requests_gets_batches() {
        let mut p = Pacing::default();
        assert_eq!(p.mode(false), Mode::Single);
        assert_eq!(p.mode(true), Mode::Probe);
        let t = Instant::now();
        p.probe_written(vec![id(1), id(2)], t);
        assert_eq!(p.mode(true), Mode::Hold);
        assert!(p.probing());
        assert!(!p.answered(&id(7)), "an unrelated answer settles nothing");
        assert!(!p.answered(&id(1)));
        assert_eq!(p.mode(false), Mode::Hold);
        assert!(p.answered(&id(2)));
        assert_eq!(p.mode(false), Mode::Batch);
    }

    #[test]
    fn a_server_that_holds_a_probed_request_stays_paced_for_good() {
        let mut p = Pacing::default();
        let t = Instant::now();
        p.probe_written(vec![id(1), id(2)], t);
        assert!(!p.answered(&id(1)));
        assert!(!p.probe_expired(t + PROBE_WAIT / 2));
        assert!(p.probe_expired(t + PROBE_WAIT));
        assert_eq!(p.mode(true), Mode::Single, "never probed again");
        assert!(!p.answered(&id(2)), "a late answer proves nothing");
        assert_eq!(p.mode(true), Mode::Single);
        p.reset();
        assert_eq!(
            p.mode(true),
            Mode::Probe,
            "a restarted server is a new server"
        );
    }
}
