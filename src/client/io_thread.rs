//! The IO thread of a [`SharedClient`](super::SharedClient): it owns the [`Client`], obeys
//! the callers' commands, delivers answers and progress to the calls waiting for them (the
//! session keeps their deadlines), and sleeps in the server's poll between events.

use std::ops::ControlFlow;
use std::sync::mpsc::{Receiver, Sender, TryRecvError};
use std::time::{Duration, Instant};

use super::call_events::Event;
use super::link::{Command, Detached, Ended, Link, View};
use super::process::{Shutdown, ShutdownStage};
use super::{dead_error, server_has_exited, Client, Dead, Until};
use crate::error::Error;
use crate::handler::catch_panic;
use crate::lock::lock;

impl Client {
    pub(super) fn view(&self) -> View {
        View {
            stats: self.session.stats().clone(),
            era: self.session.era(),
            protocol_version: self.session.protocol_version().to_owned(),
            pid: self.pid(),
            initialize_result: self.initialize_result.clone(),
            discover_result: self.discover_result.clone(),
            capabilities: self.session.capabilities().clone(),
        }
    }

    /// The IO thread: obeys commands, routes answers and progress to the calls waiting for
    /// them, expires their deadlines, and sleeps in the server's poll between events.
    pub(super) fn serve(&mut self, commands: &Receiver<Command>, link: &Link) {
        let mut waker_pid = self.pid();
        loop {
            link.taking_commands();
            loop {
                match commands.try_recv() {
                    Ok(command) => {
                        if self.obey(command, link).is_break() {
                            return;
                        }
                    }
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => return self.stop_serving(None, link),
                }
            }
            if self.pid() != waker_pid {
                // A new server process (restarted for a retry): wake its poll from now on,
                // and look at the queue again, since a command may have woken the old one.
                waker_pid = self.pid();
                *lock(&link.0.waker) = self.process.as_ref().map(|p| p.waker());
                *link.view() = self.view();
                continue;
            }
            self.handle_buffered(&mut None);
            self.publish(link);
            if self.check_usable().is_err() {
                // Closed or dead: nothing to wait for but the next command.
                self.fail_detached();
                self.publish(link);
                match commands.recv() {
                    Ok(command) => {
                        if self.obey(command, link).is_break() {
                            return;
                        }
                    }
                    Err(_) => return self.stop_serving(None, link),
                }
                continue;
            }
            let Some(process) = self.process.as_mut() else {
                continue;
            };
            process.flush();
            if server_has_exited(process) {
                // Takes what it wrote before it went (routed to the calls), then marks it dead.
                let _ = self.settle_death(&mut None, Until::Deadline);
                continue;
            }
            let now = Instant::now();
            let Ok(heartbeat_due) = self.heartbeat_step(now) else {
                continue;
            };
            // Calls past their deadline end here (the session cancels them on the wire).
            let expiry = self.session.expire(now);
            self.dispatch(&mut None);
            self.flush_outbox();
            let wake = [expiry, heartbeat_due].into_iter().flatten().min();
            let Client {
                process, on_stderr, ..
            } = self;
            let Some(process) = process.as_mut() else {
                continue;
            };
            let mut sink = |line: &[u8]| {
                if let Some(callback) = on_stderr {
                    callback(line);
                }
            };
            if process.read_available(&mut sink) || process.may_have_input() {
                continue;
            }
            // THE ONE PLACE THE IO THREAD SLEEPS. The command queue was empty (a command sent
            // since then has woken the poll through the waker), every buffered line has been
            // handled, and both pipes said `WouldBlock`, so sleeping cannot leave an answer
            // unread or a request unsent. The sleep ends at the first deadline.
            let timeout = wake.map(|d| d.saturating_duration_since(Instant::now()));
            if process.wait(timeout).is_err() {
                // Polling itself failed: this connection cannot go on.
                process.kill();
                self.dead = Some(Dead::Exited {
                    status: process.check_exit(),
                    stderr_tail: process.stderr_tail(),
                });
            }
        }
    }

    /// Carries out one command; `Break` once the client is closed.
    fn obey(&mut self, command: Command, link: &Link) -> ControlFlow<()> {
        match command {
            Command::Start {
                key,
                method,
                params,
                plan,
                retrying,
                events,
            } => {
                let usable = self
                    .restart_if_dead(retrying)
                    .and_then(|()| self.check_usable());
                if let Err(e) = usable {
                    events.send(Event::Done(Err(e)));
                    return ControlFlow::Continue(());
                }
                let timing = self.timing(&plan.options(), Instant::now());
                // Written with the other commands' requests once the queue is taken
                // (`handle_buffered`): one write for all of them.
                let id = self
                    .session
                    .start(&method, params, plan.wants_progress, timing);
                self.detached.insert(id, Detached { key, events });
            }
            Command::Cancel { key } => {
                let id = self
                    .detached
                    .iter()
                    .find(|(_, call)| call.key == key)
                    .map(|(id, _)| id.clone());
                if let Some(id) = id {
                    if let Some(call) = self.detached.remove(&id) {
                        self.session.cancel(&id, "cancelled by the client");
                        self.flush_outbox();
                        call.answer(Err(Error::Cancelled));
                    }
                }
            }
            Command::Notify {
                method,
                params,
                reply,
            } => {
                let _ = reply.send(self.notify(&method, params));
            }
            Command::Fulfil { input, reply } => {
                let _ = reply.send(self.fulfil(&input));
            }
            Command::Restart { reply } => {
                self.end_calls_in_flight("the client is restarting the server");
                let restarted = self.restart();
                *link.view() = self.view();
                let _ = reply.send(restarted);
            }
            Command::Close { terminate, reply } => {
                self.stop_serving(Some((terminate, reply)), link);
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    }

    /// Before the server goes (a close, a restart): cancels every call in flight on the wire,
    /// giving `reason` (the server may stop the work at once rather than finish it for nobody,
    /// and exit sooner), and fails each with [`Error::Closed`].
    fn end_calls_in_flight(&mut self, reason: &str) {
        if self.dead.is_none() {
            let ids: Vec<_> = self.detached.keys().cloned().collect();
            for id in ids {
                self.session.cancel(&id, reason);
            }
            self.flush_outbox();
        }
        self.closed = true;
        self.fail_detached();
    }

    /// Fails every waiting call with [`Error::Closed`] first, then shuts the server down.
    fn stop_serving(&mut self, close: Option<(Option<Duration>, Sender<Shutdown>)>, link: &Link) {
        self.end_calls_in_flight("the client is closing");
        let shutdown = match close.as_ref().and_then(|(terminate, _)| *terminate) {
            Some(grace) => self.terminate(grace),
            None => self.close(),
        };
        let mut view = link.view();
        view.stats = self.session.stats().clone();
        view.pid = None;
        drop(view);
        link.end(Ended {
            shutdown,
            panic: None,
        });
        if let Some((_, reply)) = close {
            let _ = reply.send(shutdown);
        }
    }

    /// Fails every waiting call: the server died, or the client is closing.
    pub(super) fn fail_detached(&mut self) {
        self.session.fail_all();
        for (_, call) in self.detached.drain() {
            let error = match (&self.dead, self.closed) {
                (Some(dead), false) => dead_error(dead),
                _ => Error::Closed,
            };
            call.answer(Err(error));
        }
    }

    /// After a callback panicked on the IO thread: fails every waiting call with that panic,
    /// then shuts the server down in order (a callback panicking again meanwhile cuts that
    /// short: the server is then killed as the client drops).
    pub(super) fn end_after_panic(mut self, panic: String, link: &Link) {
        self.closed = true;
        self.session.fail_all();
        for (_, call) in self.detached.drain() {
            call.answer(Err(Error::CallbackPanicked(panic.clone())));
        }
        let shutdown = catch_panic(|| self.close()).unwrap_or(Shutdown {
            status: None,
            stage: ShutdownStage::Killed,
            elapsed: Duration::ZERO,
        });
        link.view().pid = None;
        link.end(Ended {
            shutdown,
            panic: Some(panic),
        });
    }

    /// Publishes counters and queued notifications to the handles.
    pub(super) fn publish(&mut self, link: &Link) {
        if !self.notifications.is_empty() {
            let mut dropped = 0;
            let mut queue = lock(&link.0.notifications);
            for notification in self.notifications.drain(..) {
                if queue.len() >= self.settings.max_queued_notifications {
                    queue.pop_front();
                    dropped += 1;
                }
                queue.push_back(notification);
            }
            link.0.notified.notify_all();
            drop(queue);
            self.notifications_dropped(dropped);
        }
        let mut view = link.view();
        if view.stats != *self.session.stats() {
            view.stats = self.session.stats().clone();
        }
    }
}
