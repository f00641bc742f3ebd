//! One shared copy of each distinct compiled thing, found by the text it was compiled from.
//!
//! A hall of 8,000 relays repeats `contact == params.on` 8,000 times; compiling each copy cost
//! about 1.3 KiB of resident memory per relay and a CEL parse each. Entries are weak: a plant
//! that is dropped (a reload, a test) frees its programs, and dead entries are swept whenever the
//! table has doubled since the last sweep, so the table stays proportional to what is alive.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// A table of weakly held values by source text.
pub(crate) struct Interned<T> {
    table: Mutex<Table<T>>,
}

struct Table<T> {
    by_source: HashMap<String, Weak<T>>,
    /// Size after the last sweep: the next sweep runs at twice this.
    swept_at: usize,
}

impl<T> Interned<T> {
    /// An empty table (usable in a `static`).
    pub(crate) fn new() -> Interned<T> {
        Interned {
            table: Mutex::new(Table {
                by_source: HashMap::new(),
                swept_at: 0,
            }),
        }
    }

    /// The live value compiled from `source`, or `make()`'s, kept for the next caller. `make`
    /// runs outside the lock; an error is returned and nothing is kept.
    pub(crate) fn get_or_make<E>(
        &self,
        source: &str,
        make: impl FnOnce() -> Result<T, E>,
    ) -> Result<Arc<T>, E> {
        if let Some(live) = self.lock().by_source.get(source).and_then(Weak::upgrade) {
            return Ok(live);
        }
        let made = Arc::new(make()?);
        let mut t = self.lock();
        // Another thread may have compiled the same source meanwhile: keep one copy.
        if let Some(live) = t.by_source.get(source).and_then(Weak::upgrade) {
            return Ok(live);
        }
        t.by_source
            .insert(source.to_string(), Arc::downgrade(&made));
        if t.by_source.len() >= 2 * t.swept_at.max(64) {
            t.by_source.retain(|_, w| w.strong_count() > 0);
            t.swept_at = t.by_source.len();
        }
        Ok(made)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table<T>> {
        // A panic while holding the lock leaves a consistent map: keep using it.
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Entries in the table, live or not (tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().by_source.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_source_gives_the_same_copy_while_one_is_alive() {
        let t = Interned::<String>::new();
        let a = t.get_or_make("x", || Ok::<_, ()>("x".into())).unwrap();
        let b = t
            .get_or_make("x", || -> Result<String, ()> { panic!("compiled twice") })
            .unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        drop((a, b));
        let c = t.get_or_make("x", || Ok::<_, ()>("again".into())).unwrap();
        assert_eq!(
            *c, "again",
            "a dropped value is made again, not resurrected"
        );
    }

    #[test]
    fn an_error_keeps_nothing() {
        let t = Interned::<String>::new();
        assert_eq!(t.get_or_make("bad", || Err::<String, _>("no")), Err("no"));
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn dead_entries_are_swept_as_the_table_grows() {
        let t = Interned::<usize>::new();
        for i in 0..1000 {
            let _dropped_at_once = t.get_or_make(&i.to_string(), || Ok::<_, ()>(i)).unwrap();
        }
        assert!(t.len() <= 128, "{} entries kept for nothing alive", t.len());
    }
}
