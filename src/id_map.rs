//! Maps and sets keyed by request ids, with a hasher much cheaper than the standard one, and
//! the short memory of requests given up on ([`GivenUp`]).
//!
//! The standard hasher (SipHash) resists chosen-key flooding at about 60 instructions per
//! id; a relay hashes each id four times on its way through. Flooding does not apply to
//! these maps: the ids in them are in flight, and the loop bounds how many requests are in
//! flight, so even ids that all collide cost a scan of that many entries, not an unbounded
//! one.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use crate::message::RequestId;

/// A map from in-flight request ids.
pub(crate) type IdMap<V> = HashMap<RequestId, V, BuildHasherDefault<IdHasher>>;

/// A set of in-flight request ids.
pub(crate) type IdSet = HashSet<RequestId, BuildHasherDefault<IdHasher>>;

/// How many requests given up on are remembered (a few KiB of ids at most).
const GIVEN_UP_KEPT: usize = 1024;

/// Requests given up on while the other side may still answer them (their deadline passed, or
/// they were cancelled after they were sent), newest last, the last [`GIVEN_UP_KEPT`]: a late
/// answer to one is expected, and is dropped without being taken for a stray.
#[derive(Debug, Default)]
pub(crate) struct GivenUp(VecDeque<RequestId>);

impl GivenUp {
    /// Remembers `id`, forgetting the oldest beyond the bound.
    pub(crate) fn note(&mut self, id: RequestId) {
        if self.0.len() == GIVEN_UP_KEPT {
            self.0.pop_front();
        }
        self.0.push_back(id);
    }

    /// Whether `id` was given up on; it is forgotten, as a request gets one answer.
    pub(crate) fn take(&mut self, id: &RequestId) -> bool {
        match self.0.iter().rposition(|kept| kept == id) {
            Some(at) => {
                self.0.remove(at);
                true
            }
            None => false,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A multiply-rotate hash over machine words (the scheme of rustc's own `FxHasher`).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

/// An odd constant with well-spread bits (2^64 divided by the golden ratio, made odd).
const SPREAD: u64 = 0x9e37_79b9_7f4a_7c15;

impl IdHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SPREAD);
    }
}

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, Hash};

    fn hash(id: &RequestId) -> u64 {
        BuildHasherDefault::<IdHasher>::default().hash_one(id)
    }

    #[test]
    fn ids_that_differ_hash_apart_and_equal_ids_alike() {
        let ids: Vec<RequestId> = (0..1000)
            .map(RequestId::from)
            .chain((0..1000).map(|n| RequestId::from(format!("id-{n}").as_str())))
            .chain([
                RequestId::from("1"),
                RequestId::from(""),
                RequestId::from("abcdefgh"),
            ])
            .collect();
        let mut seen = HashSet::new();
        for id in &ids {
            assert!(seen.insert(hash(id)), "{id} collides");
            assert_eq!(hash(id), hash(&id.clone()));
        }
        // The low bits pick the bucket: consecutive integers must spread over them.
        let buckets: HashSet<u64> = (0..64).map(|n| hash(&RequestId::from(n)) & 63).collect();
        assert!(buckets.len() > 32, "{} of 64 buckets", buckets.len());
        // The top bits are the bucket's tag.
        let tags: HashSet<u64> = (0..64).map(|n| hash(&RequestId::from(n)) >> 57).collect();
        assert!(tags.len() > 32, "{} of 64 tags", tags.len());
        let mut h = IdHasher::default();
        "x".hash(&mut h);
        assert_ne!(h.finish(), 0);
    }

    #[test]
    fn given_up_ids_are_taken_once_and_the_oldest_forgotten_beyond_the_bound() {
        let mut given_up = GivenUp::default();
        for n in 0..=GIVEN_UP_KEPT as i64 {
            given_up.note(RequestId::from(n));
        }
        assert!(
            !given_up.take(&RequestId::from(0)),
            "the oldest is forgotten"
        );
        assert!(given_up.take(&RequestId::from(1)));
        assert!(!given_up.take(&RequestId::from(1)), "taken once");
        assert!(given_up.take(&RequestId::from(GIVEN_UP_KEPT as i64)));
    }
}
