//! Whether buffered input may hold a cancellation: the loop parses buffered lines ahead of the
//! one it handles only then (so that a cancellation arriving in the same read as its request
//! drops the request), and otherwise parses each line when its turn comes, which keeps one
//! message's allocations live at a time instead of a whole read's.
//!
//! A cancellation's line names the cancel method. Written plainly, its bytes are in the line;
//! written with escapes, the line holds a `\u` (any character) or a `\/` (a slash). So new input
//! that holds none of these holds no cancellation: a conservative test, one pass of `memmem`
//! and one of `memchr` over each read.

use memchr::memmem::Finder;

/// Follows the input stream by position (bytes since it started) and remembers where the last
/// read that may hold a cancellation ended.
#[derive(Debug, Default)]
pub(crate) struct CancelSpotter {
    /// The finder of the cancel method's name; `None` without a cancel method.
    finder: Option<Finder<'static>>,
    /// How many bytes before a read are looked at again with it: a name or an escape may
    /// straddle two reads.
    overlap: usize,
    /// Whether the name has a `/`, which `\/` can spell.
    slash: bool,
    /// Stream position just past the last read that may hold a cancellation.
    candidate_end: u64,
}

impl CancelSpotter {
    /// A spotter of `method` for a stream at position `stream_end`: every byte before it counts
    /// as a possible cancellation, as none was looked at for this method.
    pub(crate) fn new(method: Option<&str>, stream_end: u64) -> CancelSpotter {
        let Some(method) = method else {
            return CancelSpotter::default();
        };
        CancelSpotter {
            finder: Some(Finder::new(method.as_bytes()).into_owned()),
            overlap: method.len().max(2),
            slash: method.contains('/'),
            candidate_end: stream_end,
        }
    }

    /// How many bytes before a read [`CancelSpotter::look`] wants to see with it.
    pub(crate) fn overlap(&self) -> usize {
        self.overlap
    }

    /// Looks at `recent`, the input's bytes that end at stream position `end` (a read, with up to
    /// [`CancelSpotter::overlap`] bytes before it).
    pub(crate) fn look(&mut self, recent: &[u8], end: u64) {
        let Some(finder) = &self.finder else {
            return;
        };
        let escape = memchr::memchr_iter(b'\\', recent).any(|i| match recent.get(i + 1) {
            Some(b'u') => true,
            Some(b'/') => self.slash,
            // A backslash that ends the read is looked at again with the next one (the overlap).
            _ => false,
        });
        if escape || finder.find(recent).is_some() {
            self.candidate_end = end;
        }
    }

    /// Whether the input from stream position `parsed` (what has been parsed so far) on may hold
    /// a cancellation.
    pub(crate) fn may_hold(&self, parsed: u64) -> bool {
        self.candidate_end > parsed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CANCEL: &str = "notifications/cancelled";

    /// Feeds `reads` one after the other (with the overlap, as the session does) and says
    /// whether the input from `parsed` on may hold a cancellation.
    fn spotted(reads: &[&str], parsed: u64) -> bool {
        let mut spotter = CancelSpotter::new(Some(CANCEL), 0);
        let mut stream = Vec::new();
        for read in reads {
            let from = stream.len().saturating_sub(spotter.overlap());
            stream.extend_from_slice(read.as_bytes());
            spotter.look(&stream[from..], stream.len() as u64);
        }
        spotter.may_hold(parsed)
    }

    #[test]
    fn plain_input_holds_no_cancellation() {
        let request =
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"text":"a\nb \\ c/d"}}"#;
        assert!(!spotted(&[request, request], 0));
        // `notifications/cancel` is not the method.
        assert!(!spotted(&[r#"{"method":"notifications/cancel"}"#], 0));
    }

    #[test]
    fn the_method_or_an_escape_that_could_spell_it_is_spotted() {
        let plain =
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#;
        assert!(spotted(&[plain], 0));
        assert!(spotted(
            &[r#"{"method":"\u006eotifications/cancelled"}"#],
            0
        ));
        assert!(spotted(&[r#"{"method":"notifications\/cancelled"}"#], 0));
        // Split over two reads, anywhere.
        for cut in 1..plain.len() {
            assert!(spotted(&[&plain[..cut], &plain[cut..]], 0), "cut at {cut}");
        }
        let escaped = r#"{"method":"notifications\/cancelled"}"#;
        let at = escaped.find('\\').unwrap() + 1;
        assert!(spotted(&[&escaped[..at], &escaped[at..]], 0));
    }

    #[test]
    fn only_input_not_yet_parsed_counts() {
        let plain = r#"{"method":"notifications/cancelled"}"#;
        let request = r#"{"method":"tools/call"}"#;
        let end = (plain.len() + request.len()) as u64;
        assert!(spotted(&[plain, request], 0));
        // Parsed past the read that held it: nothing left.
        assert!(!spotted(&[plain, request], end));
        // A later plain read does not make the earlier one count again.
        assert!(!spotted(&[request, request], request.len() as u64));
    }

    #[test]
    fn what_was_buffered_before_the_method_was_known_is_a_candidate() {
        let mut spotter = CancelSpotter::new(Some(CANCEL), 100);
        assert!(spotter.may_hold(50));
        assert!(!spotter.may_hold(100));
        spotter.look(b"{}", 102);
        assert!(!spotter.may_hold(100));
        // Without a slash in the method, `\/` cannot spell it.
        let mut spotter = CancelSpotter::new(Some("cancel"), 0);
        spotter.look(br#"{"a":"\/"}"#, 10);
        assert!(!spotter.may_hold(0));
        // Without a method, nothing is ever a candidate.
        let mut spotter = CancelSpotter::new(None, 100);
        spotter.look(CANCEL.as_bytes(), 123);
        assert!(!spotter.may_hold(0));
    }
}
