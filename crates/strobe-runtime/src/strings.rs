//! The interned names of one runtime (regions, markers): each text gets
//! one id, from 1, for the life of the runtime.
//!
//! Owns the table and the leaked copies of the texts. Takes a lock and
//! allocates: never used in a signal handler. Never writes a ring (the
//! caller defines a name in its thread's ring, see `events`).

use std::collections::HashMap;
use std::sync::Mutex;

/// Interned names of one runtime: text → id (ids start at 1). Each
/// runtime (a forked child gets a new one) has its own table, so a lock
/// held by a thread of the parent at `fork` is never taken in the child.
#[derive(Default)]
pub struct Strings(Mutex<HashMap<&'static [u8], u32>>);

/// The process-wide id of `bytes` and its interned copy.
pub fn intern(strings: &Strings, bytes: &[u8]) -> (u32, &'static [u8]) {
    let mut table = strings.0.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((text, id)) = table.get_key_value(bytes) {
        return (*id, text);
    }
    let text: &'static [u8] = Box::leak(bytes.to_vec().into_boxed_slice());
    let id = table.len() as u32 + 1;
    table.insert(text, id);
    (id, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interned_names_get_one_id_each_from_one() {
        let strings = Strings::default();
        let (a, text_a) = intern(&strings, b"alpha");
        let (b, _) = intern(&strings, b"beta");
        let (a_again, text_again) = intern(&strings, b"alpha");
        assert_eq!((a, b, a_again), (1, 2, 1));
        assert_eq!(text_a, b"alpha");
        assert!(std::ptr::eq(text_a, text_again), "one copy per name");
        let (empty, _) = intern(&strings, b"");
        assert_eq!(empty, 3);
    }
}
