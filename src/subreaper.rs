//! A process that adopts the orphans of its descendants (Linux `PR_SET_CHILD_SUBREAPER`), so
//! that a server's daemonised grandchild (a double fork into a session of its own, done before
//! any scan of the server's tree could see it) is still found and ended. `mcpipe wrap` and
//! `mcpipe probe` use it; a program that starts servers and must leave nothing behind can too.

use std::io;
use std::thread;
use std::time::{Duration, Instant};

use crate::deadline;
use crate::process_tree::ProcessTree;
use crate::sys;

/// How long [`Subreaper::end_descendants`] waits for killed processes to be gone.
const END_WAIT: Duration = Duration::from_millis(500);

/// This process as a child subreaper: a descendant orphaned below it becomes its child
/// instead of init's, so [`end_descendants`](Subreaper::end_descendants) can find it.
/// [`Client::close`](crate::Client::close) reaps the adopted orphans it ends itself (those
/// it saw while the server lived), so they do not wait here as zombies.
///
/// Linux only; elsewhere (macOS) [`Subreaper::new`] fails and an orphan goes to init.
///
/// # Example
/// ```no_run
/// # use std::time::Duration;
/// // Before starting servers; after closing them all, nothing they started outlives them.
/// let reaper = mcpipe::Subreaper::new().ok();
/// // ... start, use and close clients ...
/// let left = reaper.map_or(0, |r| r.end_descendants(Duration::from_millis(200)));
/// eprintln!("{left} processes outlived their servers");
/// ```
#[derive(Debug)]
pub struct Subreaper(());

impl Subreaper {
    /// Makes this process a child subreaper, for the rest of its life.
    ///
    /// # Errors
    /// `Unsupported` outside Linux; the `prctl` error otherwise.
    pub fn new() -> io::Result<Subreaper> {
        sys::become_child_subreaper().map(|()| Subreaper(()))
    }

    /// Gives every process below this one up to `grace` to be gone by itself (one that
    /// [`Client::close`](crate::Client::close) signalled may still be dying), then sends
    /// SIGKILL to the rest and reaps them; returns how many got SIGKILL. Waits at most half a
    /// second more for them to be gone.
    ///
    /// It ends *every* descendant, so call it only when nothing this process started should
    /// still run: after every client is closed.
    pub fn end_descendants(&self, grace: Duration) -> usize {
        end_descendants(grace)
    }
}

/// [`Subreaper::end_descendants`], also for a caller that could not become a subreaper (it
/// then finds only the descendants still linked to it).
pub(crate) fn end_descendants(grace: Duration) -> usize {
    let until = deadline::from_now(grace);
    let mut mine = loop {
        while sys::reap_any().is_some() {}
        let mut mine = ProcessTree::new(std::process::id());
        mine.scan();
        if mine.is_empty() || Instant::now() >= until {
            break mine;
        }
        thread::sleep(Duration::from_millis(1));
    };
    let found = mine.len();
    mine.kill_all();
    let until = Instant::now() + END_WAIT;
    loop {
        while sys::reap_any().is_some() {}
        let mut again = ProcessTree::new(std::process::id());
        again.scan();
        if again.is_empty() || Instant::now() >= until {
            return found;
        }
        thread::sleep(Duration::from_millis(1));
    }
}
