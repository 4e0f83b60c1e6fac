//! What the next server inherits when one's life ends (it exited, or the wrapper retired it).
//!
//! Each request of the client's is answered once, and truly. One whose line reached the old
//! server, even in part, gets an error: it may have run. One whose line still waits for the
//! server's stdin reached nobody: it stays, and the next server answers it (failing it would
//! tell the client a tool call failed that then never runs, or, were it written anyway, runs
//! after the client was told it failed). The rest of a line begun for the old server never
//! reaches the new one (it would read a broken line), nor does what meant something only to
//! the old one: the wrapper's own lines, the client's answers to its requests, cancellations
//! of requests it had (each one is answered by now, or dropped with its line).
//!
//! The same rule holds within one life: a request the wrapper answered itself (at its deadline)
//! while its line still waited is taken out of the queue ([`Queue::withdraw`]), so that no
//! server runs what the client was told failed; one begun is cancelled instead. So is a
//! request the client cancelled: no server runs what nobody awaits, and no cancellation goes
//! for a request the server never saw.

use memchr::memchr;

use super::ids;
use super::shared::{Outgoing, Pending, Queue, Shared};
use crate::id_map::IdSet;
use crate::lock::lock;
use crate::message::{ErrorObject, Message, RequestId};

impl Shared {
    /// The server's life ended and nothing more is written to it: the queue keeps what the
    /// next server is to get ([`Queue::keep_for_next_server`]) and every request in flight
    /// whose line is not kept there is answered with `error`. Returns whether the client's own
    /// `initialize` is kept (it then goes as it is, not replayed).
    pub(super) fn end_life(&self, error: &ErrorObject) -> bool {
        let (failed, client_init_kept) = {
            // Queue first, as `send` files a request with its line: none is between the two.
            let mut queue = lock(&self.queue);
            queue.lose_direct();
            let mut pending = lock(&self.pending);
            let kept = queue.keep_for_next_server(|id| pending.contains_key(id));
            let client_init_kept = kept
                .iter()
                .any(|id| pending.get(id).is_some_and(|p| p.method == "initialize"));
            let gone: Vec<RequestId> = pending
                .keys()
                .filter(|id| !kept.contains(*id))
                .cloned()
                .collect();
            let failed: Vec<Pending> = gone.iter().filter_map(|id| pending.remove(id)).collect();
            (failed, client_init_kept)
        };
        for p in failed {
            p.responder.respond(Err(error.clone()));
        }
        client_init_kept
    }
}

impl Queue {
    /// Keeps only what the next server is to get, each line on its own (it is paced anew):
    /// the client's requests still `owed` an answer (by the client's id), its notifications
    /// but cancellations; drops the rest of a line written in part, the wrapper's own lines,
    /// the client's answers and cancellations. Returns the client's ids of the requests kept.
    pub(super) fn keep_for_next_server(&mut self, owed: impl Fn(&RequestId) -> bool) -> IdSet {
        let mut kept = IdSet::default();
        let mut next = Vec::new();
        while let Some(line) = self.pop_front() {
            if line.own {
                continue;
            }
            if !line.continues {
                // One whole line, as queued: only a request's is judged by more than its kind.
                if keeps(line.request.as_ref(), &line.bytes, &owed, &mut kept) {
                    next.push(line);
                }
                continue;
            }
            let mut bytes = &line.bytes[..];
            if line.begun {
                bytes = memchr(b'\n', bytes).map_or(&[][..], |end| &bytes[end + 1..]);
            }
            // Whole lines gathered for a server that took batches: read apart.
            for one in bytes.split_inclusive(|b| *b == b'\n') {
                if one.last() != Some(&b'\n') {
                    continue; // not a whole line (cannot happen: gathered lines are whole)
                }
                let request = match Message::from_slice(one) {
                    Ok(Message::Request(r)) => Some(r.id),
                    _ => None,
                };
                if keeps(request.as_ref(), one, &owed, &mut kept) {
                    next.push(Outgoing {
                        bytes: one.to_vec(),
                        continues: false,
                        begun: false,
                        own: false,
                        request,
                    });
                }
            }
        }
        for line in next {
            self.push_back(line);
        }
        kept
    }
}

impl Queue {
    /// Takes the client's `notifications/initialized` out of the queue, where it waits (for a
    /// restarted server: the lines kept are whole by then), so that the replayed handshake
    /// puts it in its place, right behind `initialize`, instead of sending one of its own.
    pub(super) fn take_client_initialized(&mut self) -> Option<Outgoing> {
        let at = self.lines().iter().position(|line| {
            !line.own
                && !line.continues
                && line.request.is_none()
                && memchr::memmem::find(&line.bytes, b"notifications/initialized").is_some()
                && matches!(Message::from_slice(&line.bytes),
                    Ok(Message::Notification(n)) if n.method == "notifications/initialized")
        })?;
        self.remove(at)
    }
}

impl Queue {
    /// Takes out of the queue the lines of the requests in `ids` (as the server sees them) that
    /// were not begun, and returns those ids: they are to reach no server. A request not among
    /// them was begun (written, even in part, or in the writer's hands) and may run.
    pub(super) fn withdraw(&mut self, ids: &IdSet) -> IdSet {
        let mut taken = IdSet::default();
        if !self.gathered.is_empty() {
            // Gathered in the loop's pass: whole lines, none written.
            let gathered = std::mem::take(&mut self.gathered);
            self.gathered = without(&gathered, 0, ids, &mut taken);
        }
        self.retain_mut(|line| {
            if !line.continues {
                let cancelled = line.request.as_ref().is_some_and(|id| ids.contains(id));
                if cancelled {
                    taken.extend(line.request.take());
                }
                return !cancelled;
            }
            // Whole lines, but for the rest of one begun, which goes as it is.
            let from = if line.begun {
                memchr(b'\n', &line.bytes).map_or(line.bytes.len(), |end| end + 1)
            } else {
                0
            };
            line.bytes = without(&line.bytes, from, ids, &mut taken);
            !line.bytes.is_empty()
        });
        taken
    }
}

/// `bytes` without those of its whole lines from `from` on that are requests in `ids` (their
/// ids added to `taken`).
fn without(bytes: &[u8], from: usize, ids: &IdSet, taken: &mut IdSet) -> Vec<u8> {
    let mut out = bytes[..from].to_vec();
    for one in bytes[from..].split_inclusive(|b| *b == b'\n') {
        match Message::from_slice(one) {
            Ok(Message::Request(r)) if ids.contains(&r.id) => {
                taken.insert(r.id);
            }
            _ => out.extend_from_slice(one),
        }
    }
    out
}

/// Whether the next server is to get this whole line (`request`: its id as the server sees
/// it, when it is a request); a request kept is added to `kept` under the client's id.
fn keeps(
    request: Option<&RequestId>,
    line: &[u8],
    owed: &impl Fn(&RequestId) -> bool,
    kept: &mut IdSet,
) -> bool {
    if let Some(sent) = request {
        let client = if ids::is_reserved(sent) {
            ids::client_id(sent)
        } else {
            Some(sent.clone())
        };
        return match client {
            Some(client) if owed(&client) => {
                kept.insert(client);
                true
            }
            _ => false, // answered already (a deadline, a cancellation), or the wrapper's own
        };
    }
    match Message::from_slice(line) {
        Ok(Message::Notification(n)) => n.method != "notifications/cancelled",
        Ok(_) => false, // the client's answer to a request of the old server's
        // Every line queued is one message the loop read: one that does not read is broken.
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Notification, Request};

    fn request(id: RequestId) -> Message {
        Message::Request(Request {
            id,
            method: "tools/call".to_owned(),
            params: None,
        })
    }

    fn notification(method: &str) -> Message {
        Message::Notification(Notification {
            method: method.to_owned(),
            params: None,
        })
    }

    fn texts(queue: &mut Queue) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(line) = queue.pop_front() {
            assert!(!line.continues && !line.begun, "each line on its own");
            out.push(String::from_utf8(line.bytes).unwrap());
        }
        out
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_rest_of_a_line_the_loop_wrote_in_part_is_not_kept_for_the_next_server() {
        use std::os::fd::AsFd;
        let shared = Shared::new(crate::wrap::Wrapper::new("unused", ["x"]).pacing(false));
        let (_reader, writer) = std::io::pipe().unwrap();
        let pipe = crate::sys::set_pipe_capacity(writer.as_fd(), 4096).unwrap();
        let direct = crate::sys::reopen_nonblocking(writer.as_fd(), true).unwrap();
        lock(&shared.queue).direct = Some(direct);
        // A line longer than the pipe: the loop writes what fits, the rest waits.
        let big = Message::Request(Request {
            id: RequestId::from(1),
            method: "tools/call".to_owned(),
            params: Some(serde_json::json!({ "pad": "x".repeat(4 * pipe) })),
        });
        shared.to_server(&big);
        shared.to_server(&request(RequestId::from(2)));
        assert_eq!(
            lock(&shared.queue).lines().len(),
            2,
            "a rest, and a line behind it"
        );
        // The server died before the writer took the rest.
        let mut queue = lock(&shared.queue);
        queue.lose_direct();
        let kept = queue.keep_for_next_server(|_| true);
        assert_eq!(kept, [RequestId::from(2)].into_iter().collect());
        let line = String::from_utf8(request(RequestId::from(2)).to_line()).unwrap();
        assert_eq!(texts(&mut queue), [line]);
    }

    #[test]
    fn the_next_server_gets_no_tail_of_a_line_begun_and_only_requests_still_owed() {
        let mut queue = Queue::default();
        let line = |m: &Message| String::from_utf8(m.to_line()).unwrap();
        // The rest of request 1, written in part straight from the loop.
        let one = request(RequestId::from(1)).to_line();
        queue.push_back(Outgoing {
            bytes: one[10..].to_vec(),
            continues: true,
            begun: true,
            own: false,
            request: Some(RequestId::from(1)),
        });
        // Gathered lines written in part: the rest of request 2, then 3 and a notification.
        let gathered = [
            request(RequestId::from(2)).to_line(),
            request(RequestId::from(3)).to_line(),
            notification("notifications/roots/list_changed").to_line(),
        ]
        .concat();
        queue.push_back(Outgoing::chunk(gathered[5..].to_vec(), true));
        // Gathered lines not written at all: request 4 (renamed for the server: the client's
        // id is under the wrapper's prefix) and a cancellation.
        let renamed = ids::renamed(&RequestId::from("mcpipe-wrap-x"));
        let gathered = [
            request(renamed.clone()).to_line(),
            notification("notifications/cancelled").to_line(),
        ]
        .concat();
        queue.push_back(Outgoing::chunk(gathered, false));
        // Whole lines: 5 (owed), 6 (answered at its deadline), the wrapper's own ping, the
        // client's answer to a request of the old server's.
        queue.push_back(Outgoing::new(&request(RequestId::from(5))));
        queue.push_back(Outgoing::new(&request(RequestId::from(6))));
        queue.push_back(Outgoing::own(&request(RequestId::from(
            "mcpipe-wrap-nudge-1",
        ))));
        let answer = br#"{"jsonrpc":"2.0","id":"s1","result":{}}"#.to_vec();
        queue.push_back(Outgoing::forwarded(answer, None));
        let owed = |id: &RequestId| *id != RequestId::from(6);
        let kept = queue.keep_for_next_server(owed);
        let want: IdSet = [3.into(), RequestId::from("mcpipe-wrap-x"), 5.into()]
            .into_iter()
            .collect();
        assert_eq!(kept, want);
        let waiting = queue.waiting();
        let got = texts(&mut queue);
        assert_eq!(
            got,
            [
                line(&request(RequestId::from(3))),
                line(&notification("notifications/roots/list_changed")),
                line(&request(renamed)),
                line(&request(RequestId::from(5))),
            ]
        );
        assert_eq!(waiting, got.iter().map(String::len).sum::<usize>());
    }

    #[test]
    fn a_request_answered_by_the_wrapper_is_taken_back_only_where_none_of_it_was_written() {
        let mut queue = Queue::default();
        let line = |m: &Message| String::from_utf8(m.to_line()).unwrap();
        // The rest of request 1 (begun), then request 2 and a notification, gathered.
        let one = request(RequestId::from(1)).to_line();
        let gathered = [
            one[10..].to_vec(),
            request(RequestId::from(2)).to_line(),
            notification("notifications/roots/list_changed").to_line(),
        ]
        .concat();
        queue.push_back(Outgoing::chunk(gathered, true));
        // Whole lines: 3, then 4.
        queue.push_back(Outgoing::new(&request(RequestId::from(3))));
        queue.push_back(Outgoing::new(&request(RequestId::from(4))));
        // Gathered in the loop's pass, not written yet: 5.
        queue.gathered = request(RequestId::from(5)).to_line();
        let asked: IdSet = [1, 2, 3, 5, 7].into_iter().map(RequestId::from).collect();
        let taken = queue.withdraw(&asked);
        let want: IdSet = [2, 3, 5].into_iter().map(RequestId::from).collect();
        assert_eq!(taken, want, "1 was begun, 7 is not queued");
        assert!(queue.gathered.is_empty());
        let rest = queue.pop_front().unwrap();
        assert!(
            rest.continues && rest.begun,
            "the rest of 1 still goes next"
        );
        let after = line(&notification("notifications/roots/list_changed"));
        assert_eq!(rest.bytes, [&one[10..], after.as_bytes()].concat());
        let waiting = queue.waiting();
        assert_eq!(texts(&mut queue), [line(&request(RequestId::from(4)))]);
        assert_eq!(waiting, request(RequestId::from(4)).to_line().len());
    }
}
