//! The exporters' hasher for their hot maps.
//!
//! Owns a multiply-rotate hasher (and the map and set types built on it)
//! for short, trusted keys: ids, tids, names. Never used where keys come
//! from an adversary: it does not resist collisions made on purpose.

use std::collections::HashMap;

/// FNV-style over bytes, one multiply and rotate per integer (SipHash
/// costs more than the rest of a row's work).
#[derive(Default, Clone, Copy)]
pub struct FastHasher(u64);
impl std::hash::Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut h = self.0 ^ 0xcbf2_9ce4_8422_2325;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let v = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            h = (h ^ v).wrapping_mul(0x0000_0100_0000_01b3).rotate_left(23);
        }
        for b in chunks.remainder() {
            h = (h ^ *b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.0 = h;
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(29);
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    fn write_i64(&mut self, v: i64) {
        self.write_u64(v as u64);
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
}
pub type Fast = std::hash::BuildHasherDefault<FastHasher>;
pub type FastMap<K, V> = HashMap<K, V, Fast>;
