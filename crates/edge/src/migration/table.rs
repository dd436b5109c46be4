//! Bounded summaries: a method's client rows as a Space-Saving table (Metwally et al., 2005)
//! over an indexed min-heap, and the small top-k lists (versions of a client, clients of a
//! dropped field).
//!
//! A row carries what its client did as a type parameter (`C`: the tracker's `Counts`), so
//! the table knows estimates and names, not what is counted.
//!
//! Space-Saving: a client already in the table adds one to its estimate; a new client, when
//! the table may not grow, takes the row of the client with the smallest estimate, and its
//! estimate starts at that smallest estimate plus one (the inherited part is its `error`).
//! Any client whose true count exceeds (requests seen) / (rows) is guaranteed a row, so
//! 100,000 one-off ids cannot push out a client that matters. The heap keeps the smallest
//! estimate at its root: an increment moves a row down a few levels at most, a replacement
//! is O(log rows), nothing scans the table.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

/// One tracked client of one method.
#[derive(Debug, Clone)]
pub(super) struct Row<C> {
    pub(super) name: Arc<str>,
    /// Space-Saving's estimate: requests counted in this row plus `error`.
    pub(super) estimate: u64,
    /// The estimate inherited from the row it replaced (0 for a fresh row).
    pub(super) error: u64,
    /// Where the row sits in the heap.
    pos: u32,
    /// When the row was given to its client, in the table's order of admissions (from 1):
    /// a client that lost its row and got another has a new one.
    pub(super) seq: u64,
    /// What this client did since it got the row (exact).
    pub(super) counts: C,
    pub(super) first_seen: SystemTime,
    pub(super) last_seen: SystemTime,
    pub(super) versions: TopK<5>,
    /// Requests whose client name was its own word, not verified (`x-client-id`, the
    /// User-Agent): a row with any is marked unverified.
    pub(super) unverified: u64,
}

/// A method's client rows: a name index, the rows, and a min-heap of row slots by estimate.
#[derive(Debug, Default)]
pub(super) struct Table<C> {
    index: HashMap<Arc<str>, u32>,
    rows: Vec<Row<C>>,
    heap: Vec<u32>,
    /// The last row's [`Row::seq`] (0 before any).
    last_seq: u64,
}

impl<C: Default> Table<C> {
    pub(super) fn len(&self) -> usize {
        self.rows.len()
    }

    pub(super) fn rows(&self) -> &[Row<C>] {
        &self.rows
    }

    pub(super) fn row_mut(&mut self, slot: usize) -> &mut Row<C> {
        &mut self.rows[slot]
    }

    /// The [`Row::seq`] of the row given last (0 before any).
    pub(super) fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// The slot of a client's row: a hash lookup, no allocation.
    pub(super) fn find(&self, name: &str) -> Option<usize> {
        self.index.get(name).map(|&s| s as usize)
    }

    /// One more request for the client in `slot`.
    pub(super) fn bump(&mut self, slot: usize) {
        self.rows[slot].estimate += 1;
        self.sift_down(self.rows[slot].pos as usize);
    }

    /// A new row (the caller checked it may grow), counting one request.
    pub(super) fn push(&mut self, name: Arc<str>, now: SystemTime) -> usize {
        let slot = self.rows.len();
        self.index.insert(Arc::clone(&name), slot as u32);
        self.last_seq += 1;
        self.rows
            .push(Row::new(name, 1, 0, slot as u32, self.last_seq, now));
        self.heap.push(slot as u32);
        self.sift_up(slot);
        slot
    }

    /// Space-Saving's replacement: the row with the smallest estimate goes to `name`, whose
    /// estimate becomes that estimate plus one. Returns the slot and the row replaced.
    pub(super) fn replace_min(
        &mut self,
        name: Arc<str>,
        now: SystemTime,
    ) -> Option<(usize, Row<C>)> {
        let slot = *self.heap.first()? as usize;
        let min = self.rows[slot].estimate;
        self.last_seq += 1;
        let row = Row::new(Arc::clone(&name), min + 1, min, 0, self.last_seq, now);
        let old = std::mem::replace(&mut self.rows[slot], row);
        self.index.remove(&old.name);
        self.index.insert(name, slot as u32);
        self.sift_down(0);
        Some((slot, old))
    }

    /// Removes and returns the row with the smallest estimate (its place goes to another
    /// method).
    pub(super) fn pop_min(&mut self) -> Option<Row<C>> {
        let slot = *self.heap.first()? as usize;
        let last = self.heap.len() - 1;
        self.swap(0, last);
        self.heap.pop();
        self.sift_down(0);
        // Move the last row into the freed slot.
        let old = self.rows.swap_remove(slot);
        self.index.remove(&old.name);
        if let Some(moved) = self.rows.get(slot) {
            let (pos, name) = (moved.pos as usize, Arc::clone(&moved.name));
            self.heap[pos] = slot as u32;
            if let Some(s) = self.index.get_mut(&*name) {
                *s = slot as u32;
            }
        }
        Some(old)
    }

    fn key(&self, pos: usize) -> u64 {
        self.rows[self.heap[pos] as usize].estimate
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        let (sa, sb) = (self.heap[a] as usize, self.heap[b] as usize);
        self.rows[sa].pos = a as u32;
        self.rows[sb].pos = b as u32;
    }

    fn sift_up(&mut self, mut pos: usize) {
        while pos > 0 {
            let parent = (pos - 1) / 2;
            if self.key(parent) <= self.key(pos) {
                break;
            }
            self.swap(parent, pos);
            pos = parent;
        }
    }

    fn sift_down(&mut self, mut pos: usize) {
        let n = self.heap.len();
        loop {
            let (l, r) = (2 * pos + 1, 2 * pos + 2);
            let mut least = pos;
            if l < n && self.key(l) < self.key(least) {
                least = l;
            }
            if r < n && self.key(r) < self.key(least) {
                least = r;
            }
            if least == pos {
                return;
            }
            self.swap(pos, least);
            pos = least;
        }
    }

    #[cfg(test)]
    pub(super) fn check(&self) {
        assert_eq!(self.heap.len(), self.rows.len());
        assert_eq!(self.index.len(), self.rows.len());
        for (pos, &slot) in self.heap.iter().enumerate() {
            assert_eq!(self.rows[slot as usize].pos as usize, pos);
            if pos > 0 {
                assert!(self.key((pos - 1) / 2) <= self.key(pos));
            }
        }
        for (name, &slot) in &self.index {
            assert_eq!(self.rows[slot as usize].name, *name);
        }
    }
}

impl<C: Default> Row<C> {
    fn new(
        name: Arc<str>,
        estimate: u64,
        error: u64,
        pos: u32,
        seq: u64,
        now: SystemTime,
    ) -> Row<C> {
        Row {
            name,
            estimate,
            error,
            pos,
            seq,
            counts: C::default(),
            first_seen: now,
            last_seen: now,
            versions: TopK::default(),
            unverified: 0,
        }
    }
}

/// At most `K` keys with counts, Space-Saving again: a new key, when full, takes the place
/// of the smallest count and starts one above it. A linear scan: `K` is a handful.
#[derive(Debug, Clone, Default)]
pub(super) struct TopK<const K: usize> {
    items: Vec<(Arc<str>, u64)>,
}

impl<const K: usize> TopK<K> {
    /// Counts `key` once; `make` makes its shared copy only if it is kept and new.
    pub(super) fn add(&mut self, key: &str, make: impl FnOnce() -> Arc<str>) {
        if let Some(item) = self.items.iter_mut().find(|(k, _)| **k == *key) {
            item.1 += 1;
        } else if self.items.len() < K {
            self.items.push((make(), 1));
        } else if let Some(min) = self.items.iter_mut().min_by_key(|(_, n)| *n) {
            *min = (make(), min.1 + 1);
        }
    }

    /// Largest count first (then by key).
    pub(super) fn sorted(&self) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = self
            .items
            .iter()
            .map(|(k, n)| (k.to_string(), *n))
            .collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(i: u64) -> Arc<str> {
        Arc::from(format!("c{i}"))
    }

    #[test]
    fn the_heap_stays_a_heap() {
        let now = SystemTime::UNIX_EPOCH;
        let mut t = Table::<()>::default();
        for i in 0..50 {
            t.push(name(i), now);
            for _ in 0..(i * 7 % 13) {
                t.bump(t.find(&format!("c{i}")).unwrap());
            }
            t.check();
        }
        for i in 50..200 {
            let (slot, old) = t.replace_min(name(i), now).unwrap();
            assert_eq!(t.rows()[slot].estimate, old.estimate + 1);
            assert_eq!(t.rows()[slot].error, old.estimate);
            assert!(t.find(&old.name).is_none());
            t.check();
        }
        let mut last = 0;
        while let Some(row) = t.pop_min() {
            assert!(row.estimate >= last, "popped in order");
            last = row.estimate;
            t.check();
        }
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn heavy_clients_survive_a_flood_of_new_ones() {
        let now = SystemTime::UNIX_EPOCH;
        let mut t = Table::<()>::default();
        for i in 0..10 {
            t.push(name(i), now);
        }
        // c0 sends every third request; the rest are one-off ids.
        for i in 0..30_000u64 {
            if i % 3 == 0 {
                let s = t.find("c0").unwrap();
                t.bump(s);
            } else {
                t.replace_min(name(1000 + i), now);
            }
        }
        assert!(t.find("c0").is_some());
        t.check();
    }

    #[test]
    fn top_k_keeps_the_frequent_keys() {
        let mut k = TopK::<3>::default();
        for key in ["a", "a", "a", "b", "b", "c", "d", "a"] {
            k.add(key, || Arc::from(key));
        }
        let v = k.sorted();
        assert_eq!(v.len(), 3);
        assert_eq!(v[0], ("a".to_string(), 4));
        assert_eq!(v[1], ("b".to_string(), 2));
        // d took c's place with c's count plus one.
        assert_eq!(v[2], ("d".to_string(), 2));
    }
}
