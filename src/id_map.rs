//! Maps and sets keyed by request ids, with a hasher much cheaper than the standard one.
//!
//! The standard hasher (SipHash) resists chosen-key flooding at about 60 instructions per
//! id; a relay hashes each id four times on its way through. Flooding does not apply to
//! these maps: the ids in them are in flight, and the loop bounds how many requests are in
//! flight, so even ids that all collide cost a scan of that many entries, not an unbounded
//! one.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

use crate::message::RequestId;

/// A map from in-flight request ids.
pub(crate) type IdMap<V> = HashMap<RequestId, V, BuildHasherDefault<IdHasher>>;

/// A set of in-flight request ids.
pub(crate) type IdSet = HashSet<RequestId, BuildHasherDefault<IdHasher>>;

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
}
