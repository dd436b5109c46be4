//! Who still speaks JSON and what it costs: per method, exact totals by
//! request and response format; the top clients by volume in bounded memory; unknown-field
//! drops; the JSON share of the last 24 h; and the cost of conversions.
//!
//! # Bounds
//! At most `max_clients` (method, client) rows in the whole gateway. A new client gets a free
//! row while there is one; once all are taken, a method holding less than its share
//! (`max_clients` / methods seen) takes one from a method holding more (its smallest row),
//! and otherwise the client takes the method's own smallest row (Space-Saving, `table.rs`).
//! What leaves a row is added to the method's `other` row, so a method's rows plus `other`
//! always equal its totals, which are exact. Per row: ≤ 5 versions. Per method: ≤ 64
//! (path, field number) drops with ≤ 3 clients each, a 17 KiB ring, fixed counters. At most
//! [`MAX_METHODS`] methods (they come from the schema).
//!
//! # Cost of a record
//! A read lock on the method map (shared; written once per new method), then the method's
//! own mutex for a hash lookup of the client and a few counter updates. No allocation when the
//! client has a row and its version is known; a new client allocates its name once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

use transcode::{Format, UnknownField};

use super::client::ClientId;
use super::figures::number;
use super::series::Series;
use super::sunset::{RefusalReason, Verdict};
use super::table::{Table, TopK};
use crate::downgrade::Reason;
use crate::protocol::Protocol;

/// The default of `migration.max_clients`.
pub const DEFAULT_MAX_CLIENTS: usize = 1_000;

/// Methods tracked at most; records for more are ignored (counted in
/// [`Tracker::ignored`]). Methods come from the schema, so this is never reached in practice.
pub const MAX_METHODS: usize = 10_000;

/// (path, field number) pairs of unknown-field drops kept per method; the rest are counted
/// together.
pub const MAX_DROPPED_FIELDS: usize = 64;

/// Dropped fields of one answer looked at one by one; the rest are counted together.
const MAX_DROPS_PER_ANSWER: usize = 64;

/// The longest path of a dropped field kept, in bytes.
const MAX_PATH_BYTES: usize = 256;

/// The formats in the order every table and array here uses.
pub const FORMATS: [Format; 3] = [Format::Json, Format::Msgpack, Format::Protobuf];

/// The downgrade reasons in the order [`Counts::downgrades`] uses.
pub const REASONS: [Reason; 4] = [
    Reason::JsonRequested,
    Reason::AcceptFallback,
    Reason::UnknownFields,
    Reason::JsonDeprecated,
];

pub(super) fn format_index(f: Format) -> usize {
    match f {
        Format::Json => 0,
        Format::Msgpack => 1,
        Format::Protobuf => 2,
    }
}

fn reason_index(r: Reason) -> usize {
    match r {
        Reason::JsonRequested => 0,
        Reason::AcceptFallback => 1,
        Reason::UnknownFields => 2,
        Reason::JsonDeprecated => 3,
    }
}

fn refusal_index(r: RefusalReason) -> usize {
    match r {
        RefusalReason::Sunset => 0,
        RefusalReason::Brownout => 1,
    }
}

/// The downgrade reasons one request saw (a set: a stream counts each reason once).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DowngradeSet(u8);

impl DowngradeSet {
    pub fn insert(&mut self, r: Reason) {
        self.0 |= 1 << reason_index(r);
    }

    pub fn with(mut self, r: Reason) -> DowngradeSet {
        self.insert(r);
        self
    }

    pub fn contains(self, r: Reason) -> bool {
        self.0 & (1 << reason_index(r)) != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The reasons in the set, in [`REASONS`] order.
    pub fn iter(self) -> impl Iterator<Item = Reason> {
        REASONS.into_iter().filter(move |r| self.contains(*r))
    }
}

impl FromIterator<Reason> for DowngradeSet {
    fn from_iter<I: IntoIterator<Item = Reason>>(iter: I) -> DowngradeSet {
        let mut s = DowngradeSet::default();
        for r in iter {
            s.insert(r);
        }
        s
    }
}

/// One conversion between protobuf and another format, timed by the caller around the
/// transcoder's call (`Instant::now()` before and after).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conversion {
    /// The other side's format (a protobuf pass-through: `Protobuf`, the same bytes on both
    /// sides and no time).
    pub format: Format,
    pub protobuf_bytes: usize,
    /// The bytes in `format`: the rendering of an answer, or the request body as sent.
    pub format_bytes: usize,
    pub elapsed: Duration,
}

impl Conversion {
    /// Protobuf passed through: `len` bytes on both sides, no conversion time.
    pub fn passed_through(len: usize) -> Conversion {
        Conversion {
            format: Format::Protobuf,
            protobuf_bytes: len,
            format_bytes: len,
            elapsed: Duration::ZERO,
        }
    }
}

/// Which way a conversion went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// A request body into protobuf.
    Request,
    /// An answer (one message; a stream has one per message) out of protobuf.
    Answer,
}

/// One finished request, as [`Tracker::record`] counts it.
#[derive(Debug, Clone, Copy)]
pub struct Finished<'a> {
    /// The client protocol the request came in.
    pub protocol: Protocol,
    pub request: Format,
    /// The format the client is answered in. A refused JSON request counts as JSON (its
    /// refusal is).
    pub response: Format,
    /// Every downgrade counted for the request (in `protogate_downgrades_total`), including
    /// `json_deprecated`.
    pub downgrades: DowngradeSet,
    /// The unknown fields the answer's rendering dropped.
    pub dropped: &'a [UnknownField],
    /// What the sunset policy decided, for a JSON answer.
    pub verdict: Verdict,
    /// The request body's conversion, when there was one (unary and server-stream calls).
    pub request_conversion: Option<Conversion>,
    /// The answer's conversion, for a unary answer (a stream records each message with
    /// [`Tracker::record_conversion`] instead).
    pub answer_conversion: Option<Conversion>,
}

impl Finished<'_> {
    /// A request with nothing else to say about it.
    pub fn new(request: Format, response: Format) -> Finished<'static> {
        Finished {
            protocol: Protocol::Http,
            request,
            response,
            downgrades: DowngradeSet::default(),
            dropped: &[],
            verdict: Verdict::Allowed,
            request_conversion: None,
            answer_conversion: None,
        }
    }
}

/// Requests by (request format, response format), indexed in [`FORMATS`] order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FormatMix(pub [[u64; 3]; 3]);

impl FormatMix {
    pub fn get(&self, request: Format, response: Format) -> u64 {
        self.0[format_index(request)][format_index(response)]
    }

    pub fn total(&self) -> u64 {
        self.0.iter().flatten().sum()
    }

    /// Requests answered in `response`.
    pub fn answered(&self, response: Format) -> u64 {
        self.0.iter().map(|row| row[format_index(response)]).sum()
    }

    /// Requests sent in `request`.
    pub fn sent(&self, request: Format) -> u64 {
        self.0[format_index(request)].iter().sum()
    }

    fn merge(&mut self, o: &FormatMix) {
        for (a, b) in self.0.iter_mut().flatten().zip(o.0.iter().flatten()) {
            *a += b;
        }
    }
}

/// What a set of requests did: the format mix per client protocol, downgrades by reason,
/// JSON refused by reason, exempt JSON answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// The format mix of each client protocol, in [`Protocol::LABELS`] order (joint, so
    /// per-client series can carry both labels exactly).
    pub by_protocol: [FormatMix; 4],
    /// In [`REASONS`] order.
    pub downgrades: [u64; 4],
    /// In [`RefusalReason::ALL`] order.
    pub refused: [u64; 2],
    pub exempt: u64,
}

impl Counts {
    pub fn requests(&self) -> u64 {
        self.by_protocol.iter().map(FormatMix::total).sum()
    }

    /// The format mix over every protocol.
    pub fn mix(&self) -> FormatMix {
        let mut mix = FormatMix::default();
        for m in &self.by_protocol {
            mix.merge(m);
        }
        mix
    }

    pub fn json_answers(&self) -> u64 {
        self.by_protocol
            .iter()
            .map(|m| m.answered(Format::Json))
            .sum()
    }

    pub fn downgrades(&self, r: Reason) -> u64 {
        self.downgrades[reason_index(r)]
    }

    pub fn refused(&self, r: RefusalReason) -> u64 {
        self.refused[refusal_index(r)]
    }

    /// Requests that came in `protocol`.
    pub fn protocol(&self, protocol: Protocol) -> u64 {
        self.by_protocol[protocol.index()].total()
    }

    /// Requests by client protocol, in [`Protocol::LABELS`] order.
    pub fn protocols(&self) -> [u64; 4] {
        self.by_protocol.map(|m| m.total())
    }

    fn add(&mut self, f: &Finished<'_>) {
        self.by_protocol[f.protocol.index()].0[format_index(f.request)]
            [format_index(f.response)] += 1;
        for r in f.downgrades.iter() {
            self.downgrades[reason_index(r)] += 1;
        }
        match f.verdict {
            Verdict::Allowed | Verdict::Deprecated => {}
            Verdict::Exempt => self.exempt += 1,
            Verdict::Refused(r) => self.refused[refusal_index(r)] += 1,
        }
    }

    /// These counts less `o`'s, each at least 0.
    pub fn minus(&self, o: &Counts) -> Counts {
        let mut out = *self;
        for (a, b) in out.by_protocol.iter_mut().zip(&o.by_protocol) {
            for (x, y) in a.0.iter_mut().flatten().zip(b.0.iter().flatten()) {
                *x = x.saturating_sub(*y);
            }
        }
        for (a, b) in out.downgrades.iter_mut().zip(o.downgrades) {
            *a = a.saturating_sub(b);
        }
        for (a, b) in out.refused.iter_mut().zip(o.refused) {
            *a = a.saturating_sub(b);
        }
        out.exempt = out.exempt.saturating_sub(o.exempt);
        out
    }

    /// Adds `o`'s counts to these.
    pub fn merge(&mut self, o: &Counts) {
        for (a, b) in self.by_protocol.iter_mut().zip(&o.by_protocol) {
            a.merge(b);
        }
        for (a, b) in self.downgrades.iter_mut().zip(o.downgrades) {
            *a += b;
        }
        for (a, b) in self.refused.iter_mut().zip(o.refused) {
            *a += b;
        }
        self.exempt += o.exempt;
    }
}

/// Conversions of one format in one direction, summed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConversionTotals {
    pub count: u64,
    pub protobuf_bytes: u64,
    pub format_bytes: u64,
    pub nanos: u64,
}

impl ConversionTotals {
    fn add(&mut self, c: &Conversion) {
        self.count += 1;
        self.protobuf_bytes += c.protobuf_bytes as u64;
        self.format_bytes += c.format_bytes as u64;
        self.nanos = self
            .nanos
            .saturating_add(u64::try_from(c.elapsed.as_nanos()).unwrap_or(u64::MAX));
    }

    /// The format's bytes per protobuf byte (`None` before any protobuf byte).
    pub fn bytes_ratio(&self) -> Option<f64> {
        (self.count > 0 && self.protobuf_bytes > 0)
            .then(|| self.format_bytes as f64 / self.protobuf_bytes as f64)
    }

    /// Microseconds of conversion each (`None` before any).
    pub fn micros_each(&self) -> Option<f64> {
        (self.count > 0).then(|| self.nanos as f64 / self.count as f64 / 1000.0)
    }
}

/// What conversions cost on one method, by format ([`FORMATS`] order).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cost {
    pub answers: [ConversionTotals; 3],
    pub requests: [ConversionTotals; 3],
}

impl Cost {
    pub fn answers(&self, f: Format) -> &ConversionTotals {
        &self.answers[format_index(f)]
    }

    pub fn requests(&self, f: Format) -> &ConversionTotals {
        &self.requests[format_index(f)]
    }

    fn add(&mut self, direction: Direction, c: &Conversion) {
        let i = format_index(c.format);
        match direction {
            Direction::Request => self.requests[i].add(c),
            Direction::Answer => self.answers[i].add(c),
        }
    }

    /// "JSON answers on this method are 2.3× the protobuf bytes and cost 14 µs of gateway CPU
    /// each." (and a sentence on JSON requests when there were some), or `None` before any
    /// JSON answer was measured.
    pub fn summary(&self) -> Option<String> {
        let answers = self.answers(Format::Json);
        let mut s = match (answers.bytes_ratio(), answers.micros_each()) {
            (Some(ratio), Some(us)) => format!(
                "JSON answers on this method are {}× the protobuf bytes and cost {} µs of gateway CPU each.",
                number(ratio),
                number(us)
            ),
            (None, Some(us)) => format!(
                "JSON answers on this method cost {} µs of gateway CPU each.",
                number(us)
            ),
            _ => return None,
        };
        let requests = self.requests(Format::Json);
        if let Some(us) = requests.micros_each() {
            s.push_str(&format!(
                " Reading a JSON request costs {} µs more",
                number(us)
            ));
            if let Some(ratio) = requests.bytes_ratio() {
                s.push_str(&format!(" ({}× the protobuf bytes)", number(ratio)));
            }
            s.push('.');
        }
        Some(s)
    }
}

/// The tracker: one per gateway, shared by every request.
pub struct Tracker {
    max_clients: usize,
    /// Read-mostly: written when a method is first seen.
    methods: RwLock<Methods>,
    /// Methods in the map (for the share), read without the lock.
    method_count: AtomicUsize,
    /// Rows in use over every method; never above `max_clients`.
    rows: AtomicUsize,
    ignored: AtomicU64,
}

/// The tracked methods by name (names from the schema).
// Keyed by the schema's method names (a client's unknown path never gets here): a fast hasher.
type Methods = HashMap<Arc<str>, MethodSlot, foldhash::fast::RandomState>;

struct MethodSlot {
    /// Rows this method holds, readable without its lock (to find a donor).
    rows: AtomicUsize,
    state: Mutex<MethodState>,
}

#[derive(Default)]
pub(super) struct MethodState {
    pub(super) totals: Counts,
    pub(super) table: Table<Counts>,
    /// What no row holds: clients that never had one and rows that were given up.
    pub(super) other: Counts,
    /// Rows given up (to another client or method).
    pub(super) evicted: u64,
    pub(super) drops: FieldDrops,
    pub(super) series: Option<Box<Series>>,
    pub(super) cost: Cost,
}

/// Unknown-field drops of a method by (path with indices and keys elided, number).
#[derive(Debug, Default)]
pub(super) struct FieldDrops {
    pub(super) entries: Vec<FieldDrop>,
    /// Drops not in an entry: over [`MAX_DROPPED_FIELDS`] pairs, or over
    /// [`MAX_DROPS_PER_ANSWER`] in one answer.
    pub(super) other: u64,
}

#[derive(Debug)]
pub(super) struct FieldDrop {
    pub(super) number: u32,
    /// `items[].extra`: the path with `[3]` and `[key]` written `[]`.
    pub(super) path: Box<str>,
    pub(super) drops: u64,
    pub(super) last_seen: SystemTime,
    pub(super) clients: TopK<3>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

// === impl Tracker ===

impl Tracker {
    /// A tracker keeping at most `max_clients` (method, client) rows (0: every client counts
    /// in `other`).
    pub fn new(max_clients: usize) -> Tracker {
        Tracker {
            max_clients,
            methods: RwLock::new(Methods::default()),
            method_count: AtomicUsize::new(0),
            rows: AtomicUsize::new(0),
            ignored: AtomicU64::new(0),
        }
    }

    pub fn max_clients(&self) -> usize {
        self.max_clients
    }

    /// (method, client) rows in use.
    pub fn tracked_clients(&self) -> usize {
        self.rows.load(Ordering::Relaxed)
    }

    /// Records not kept because [`MAX_METHODS`] methods were already tracked.
    pub fn ignored(&self) -> u64 {
        self.ignored.load(Ordering::Relaxed)
    }

    /// Counts one finished request of `method` (a name from the schema, never from the
    /// request: methods are not bounded otherwise) by `client`, at `now`.
    pub fn record(
        &self,
        method: &Arc<str>,
        client: &ClientId<'_>,
        finished: &Finished<'_>,
        now: SystemTime,
    ) {
        self.with_method(method, |methods, slot| {
            let mut guard = lock(&slot.state);
            let st = &mut *guard;
            st.totals.add(finished);
            st.series
                .get_or_insert_with(|| Box::new(Series::new()))
                .add(now, finished.response == Format::Json);
            if let Some(c) = &finished.request_conversion {
                st.cost.add(Direction::Request, c);
            }
            if let Some(c) = &finished.answer_conversion {
                st.cost.add(Direction::Answer, c);
            }
            let name = client.name();
            let row = match st.table.find(name) {
                Some(i) => {
                    st.table.bump(i);
                    Some(i)
                }
                None => self.admit(methods, slot, st, name, now),
            };
            let row = row.map(|i| {
                let r = st.table.row_mut(i);
                r.counts.add(finished);
                r.last_seen = r.last_seen.max(now);
                if let Some(v) = client.version() {
                    r.versions.add(v, || Arc::from(v));
                }
                r.unverified += u64::from(!client.is_verified());
                &r.name
            });
            if row.is_none() {
                st.other.add(finished);
            }
            if !finished.dropped.is_empty() {
                st.drops.add(finished.dropped, name, row, now);
            }
        });
    }

    /// Counts one conversion (for a stream, each message's).
    pub fn record_conversion(&self, method: &Arc<str>, direction: Direction, c: &Conversion) {
        self.with_method(method, |_, slot| lock(&slot.state).cost.add(direction, c));
    }

    /// Runs `f` on the method's slot (made on first sight) with the map read-locked.
    fn with_method(&self, method: &Arc<str>, f: impl FnOnce(&Methods, &MethodSlot)) {
        {
            let methods = self.methods.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(slot) = methods.get(&**method) {
                f(&methods, slot);
                return;
            }
        }
        {
            let mut methods = self.methods.write().unwrap_or_else(PoisonError::into_inner);
            if !methods.contains_key(&**method) {
                if methods.len() >= MAX_METHODS {
                    self.ignored.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                methods.insert(
                    Arc::clone(method),
                    MethodSlot {
                        rows: AtomicUsize::new(0),
                        state: Mutex::new(MethodState::default()),
                    },
                );
                self.method_count.store(methods.len(), Ordering::Relaxed);
            }
        }
        let methods = self.methods.read().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = methods.get(&**method) {
            f(&methods, slot);
        }
    }

    /// A row for a client the method has none for, or `None` (it counts in `other`).
    fn admit(
        &self,
        methods: &Methods,
        me: &MethodSlot,
        st: &mut MethodState,
        name: &str,
        now: SystemTime,
    ) -> Option<usize> {
        if self.max_clients == 0 {
            return None;
        }
        let free = self
            .rows
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max_clients).then_some(n + 1)
            })
            .is_ok();
        let share = (self.max_clients / self.method_count.load(Ordering::Relaxed).max(1)).max(1);
        if free || (st.table.len() < share && self.take_row(methods, me, share)) {
            let slot = st.table.push(Arc::from(name), now);
            me.rows.store(st.table.len(), Ordering::Relaxed);
            return Some(slot);
        }
        let (slot, old) = st.table.replace_min(Arc::from(name), now)?;
        st.other.merge(&old.counts);
        st.evicted += 1;
        Some(slot)
    }

    /// Takes a row from a method holding more than `share` (its smallest, added to its
    /// `other`), for a method holding less. `try_lock` only: never waits, never deadlocks.
    fn take_row(&self, methods: &Methods, me: &MethodSlot, share: usize) -> bool {
        for donor in methods.values() {
            if std::ptr::eq(donor, me) || donor.rows.load(Ordering::Relaxed) <= share {
                continue;
            }
            let Ok(mut st) = donor.state.try_lock() else {
                continue;
            };
            if st.table.len() <= share {
                continue;
            }
            if let Some(old) = st.table.pop_min() {
                st.other.merge(&old.counts);
                st.evicted += 1;
                donor.rows.store(st.table.len(), Ordering::Relaxed);
                return true;
            }
        }
        false
    }

    /// Runs `f` on each method's state (locked one at a time) whose name `keep` accepts.
    pub(super) fn each_method(
        &self,
        mut keep: impl FnMut(&str) -> bool,
        mut f: impl FnMut(&str, &MethodState),
    ) {
        let methods = self.methods.read().unwrap_or_else(PoisonError::into_inner);
        for (name, slot) in methods.iter() {
            if keep(name) {
                f(name, &lock(&slot.state));
            }
        }
    }
}

// === impl FieldDrops ===

impl FieldDrops {
    fn add(
        &mut self,
        dropped: &[UnknownField],
        client: &str,
        client_row: Option<&Arc<str>>,
        now: SystemTime,
    ) {
        let (each, rest) = dropped.split_at(dropped.len().min(MAX_DROPS_PER_ANSWER));
        self.other += rest.len() as u64;
        for field in each {
            let found = self
                .entries
                .iter()
                .position(|e| e.number == field.number && path_matches(&e.path, &field.path));
            let at = match found {
                Some(at) => at,
                None if self.entries.len() < MAX_DROPPED_FIELDS => {
                    self.entries.push(FieldDrop {
                        number: field.number,
                        path: normalize_path(&field.path).into(),
                        drops: 0,
                        last_seen: now,
                        clients: TopK::default(),
                    });
                    self.entries.len() - 1
                }
                None => {
                    self.other += 1;
                    continue;
                }
            };
            let entry = &mut self.entries[at];
            entry.drops += 1;
            entry.last_seen = entry.last_seen.max(now);
            entry.clients.add(client, || {
                client_row.map_or_else(|| Arc::from(client), Arc::clone)
            });
        }
    }
}

/// The bytes of a path with the contents of each `[...]` elided (`items[3].x` → `items[].x`,
/// `labels[a.b]` → `labels[]`), at most [`MAX_PATH_BYTES`]. A key may hold `]`: a bracket
/// closes only before `.`, `[` or the end.
fn normalized(path: &str) -> impl Iterator<Item = u8> + '_ {
    let b = path.as_bytes();
    let mut i = 0;
    let mut pending_close = false;
    std::iter::from_fn(move || {
        if pending_close {
            pending_close = false;
            return Some(b']');
        }
        let c = *b.get(i)?;
        i += 1;
        if c == b'[' {
            // Skip to the closing bracket.
            let mut j = i;
            while j < b.len() {
                if b[j] == b']' && matches!(b.get(j + 1), None | Some(b'.') | Some(b'[')) {
                    break;
                }
                j += 1;
            }
            i = j + 1;
            pending_close = true;
        }
        Some(c)
    })
    .take(MAX_PATH_BYTES)
}

fn normalize_path(path: &str) -> String {
    String::from_utf8_lossy(&normalized(path).collect::<Vec<u8>>()).into_owned()
}

fn path_matches(kept: &str, path: &str) -> bool {
    kept.bytes().eq(normalized(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn t(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_800_000_000 + secs)
    }

    fn arc(s: &str) -> Arc<str> {
        Arc::from(s)
    }

    #[test]
    fn paths_lose_their_indices_and_keys() {
        for (raw, norm) in [
            ("", ""),
            ("items[3].extra", "items[].extra"),
            ("items[3].sub[12]", "items[].sub[]"),
            ("labels[a.b]", "labels[]"),
            ("labels[a]b].x", "labels[].x"),
            ("m[k][2]", "m[][]"),
        ] {
            assert_eq!(normalize_path(raw), norm, "{raw}");
            assert!(path_matches(norm, raw));
        }
        assert_eq!(normalize_path(&"a".repeat(1000)).len(), MAX_PATH_BYTES);
    }

    #[test]
    fn format_mix_of_three_clients_in_three_formats() {
        let tracker = Tracker::new(DEFAULT_MAX_CLIENTS);
        let m = arc("demo.shop.v1.Shop/GetOrder");
        let script = [
            ("web", Format::Json, Format::Json, 5),
            ("web", Format::Json, Format::Protobuf, 1),
            ("ios", Format::Msgpack, Format::Msgpack, 3),
            ("ios", Format::Protobuf, Format::Json, 2),
            ("batch", Format::Protobuf, Format::Protobuf, 7),
            ("batch", Format::Json, Format::Json, 1),
        ];
        for (i, (client, req, resp, n)) in script.into_iter().enumerate() {
            for _ in 0..n {
                let mut f = Finished::new(req, resp);
                if resp == Format::Json {
                    f.downgrades.insert(Reason::JsonRequested);
                }
                tracker.record(
                    &m,
                    &ClientId::new(client, Some("1.0")),
                    &f,
                    t(i as u64 * 60),
                );
            }
        }
        let report = tracker.raw(&m);
        assert_eq!(report.totals.requests(), 19);
        assert_eq!(report.totals.json_answers(), 8);
        assert_eq!(report.totals.mix().get(Format::Json, Format::Json), 6);
        assert_eq!(report.totals.mix().get(Format::Protobuf, Format::Json), 2);
        assert_eq!(report.totals.mix().sent(Format::Protobuf), 9);
        assert_eq!(report.totals.downgrades(Reason::JsonRequested), 8);
        assert_eq!(report.other, Counts::default());
        let web = &report.rows["web"];
        assert_eq!(web.mix().get(Format::Json, Format::Json), 5);
        assert_eq!(web.mix().get(Format::Json, Format::Protobuf), 1);
        assert_eq!(web.requests(), 6);
        let ios = &report.rows["ios"];
        assert_eq!(ios.mix().get(Format::Msgpack, Format::Msgpack), 3);
        assert_eq!(ios.json_answers(), 2);
        let batch = &report.rows["batch"];
        assert_eq!(batch.mix().get(Format::Protobuf, Format::Protobuf), 7);
        assert_eq!(batch.downgrades(Reason::JsonRequested), 1);
    }

    #[test]
    fn a_flood_of_client_ids_stays_bounded_and_totals_stay_exact() {
        let max = 1_000;
        let tracker = Tracker::new(max);
        let methods: Vec<Arc<str>> = (0..4).map(|i| arc(&format!("p.S/M{i}"))).collect();
        // A steady client on every method, first.
        for m in &methods {
            for _ in 0..500 {
                tracker.record(m, &ClientId::new("steady", None), &json(), t(0));
            }
        }
        // 100,000 new ids, most on one method.
        for i in 0..100_000u64 {
            let m = &methods[if i % 10 == 0 { 1 } else { 0 }];
            let id = format!("attacker-{i}");
            let f = if i % 2 == 0 {
                json()
            } else {
                Finished::new(Format::Protobuf, Format::Protobuf)
            };
            tracker.record(m, &ClientId::new(&id, Some(&id)), &f, t(i / 100));
            // The steady client keeps sending on method 0, one in twenty.
            if i % 20 == 0 {
                tracker.record(
                    &methods[0],
                    &ClientId::new("steady", None),
                    &json(),
                    t(i / 100),
                );
            }
        }
        assert!(tracker.tracked_clients() <= max);
        let mut rows = 0;
        let mut total = 0;
        for m in &methods {
            let r = tracker.raw(m);
            rows += r.rows.len();
            total += r.totals.requests();
            // Rows plus other are the totals, exactly.
            let mut sum = r.other;
            for c in r.rows.values() {
                sum.merge(c);
            }
            assert_eq!(sum, r.totals, "{m}");
            assert!(
                r.rows.contains_key("steady"),
                "{m}: the steady client kept its row"
            );
        }
        assert_eq!(rows, tracker.tracked_clients());
        assert!(rows <= max);
        assert_eq!(total, 4 * 500 + 100_000 + 5_000);
        let m0 = tracker.raw(&methods[0]);
        assert_eq!(m0.rows["steady"].requests(), 500 + 5_000);
        assert!(m0.other.requests() > 80_000, "{:?}", m0.other);
        // The quiet methods kept rows of their own: the flood took at most their surplus.
        let m2 = tracker.raw(&methods[2]);
        assert_eq!(m2.rows.len(), 1);
        let m1 = tracker.raw(&methods[1]);
        assert!(
            m1.rows.len() >= max / 4,
            "method 1 got its share: {}",
            m1.rows.len()
        );
    }

    #[test]
    fn a_method_below_its_share_takes_rows_from_one_above() {
        let tracker = Tracker::new(10);
        let (a, b) = (arc("p.S/A"), arc("p.S/B"));
        for i in 0..10 {
            tracker.record(&a, &ClientId::new(&format!("a{i}"), None), &json(), t(0));
        }
        assert_eq!(tracker.tracked_clients(), 10);
        for i in 0..10 {
            tracker.record(&b, &ClientId::new(&format!("b{i}"), None), &json(), t(0));
        }
        assert_eq!(tracker.tracked_clients(), 10);
        assert_eq!(tracker.raw(&a).rows.len(), 5);
        assert_eq!(tracker.raw(&b).rows.len(), 5);
        assert_eq!(tracker.raw(&a).other.requests(), 5);
        assert_eq!(tracker.raw(&b).other.requests(), 5);
        let zero = Tracker::new(0);
        zero.record(&a, &ClientId::new("x", None), &json(), t(0));
        assert_eq!(zero.raw(&a).other.requests(), 1);
    }

    #[test]
    fn versions_and_times_per_row() {
        let tracker = Tracker::new(10);
        let m = arc("p.S/M");
        for (i, v) in ["1", "2", "2", "3", "4", "5", "6", "2"]
            .into_iter()
            .enumerate()
        {
            tracker.record(&m, &ClientId::new("app", Some(v)), &json(), t(i as u64));
        }
        // An earlier time (a slow request finishing late) does not move last_seen back.
        tracker.record(&m, &ClientId::new("app", Some("2")), &json(), t(1));
        tracker.each_method(
            |_| true,
            |_, st| {
                let row = &st.table.rows()[0];
                assert_eq!(row.first_seen, t(0));
                assert_eq!(row.last_seen, t(7));
                let v = row.versions.sorted();
                assert_eq!(v.len(), 5);
                assert_eq!(v[0], ("2".to_string(), 4));
            },
        );
    }

    #[test]
    fn unknown_field_drops_by_path_and_number() {
        let tracker = Tracker::new(10);
        let m = arc("p.S/M");
        let field = |path: &str, number| UnknownField {
            path: path.into(),
            number,
        };
        let dropped = [field("items[0]", 7), field("items[1]", 7), field("", 9)];
        let mut f = json();
        f.dropped = &dropped;
        tracker.record(&m, &ClientId::new("web", None), &f, t(0));
        tracker.record(&m, &ClientId::new("ios", None), &f, t(60));
        let many: Vec<UnknownField> = (0..200).map(|n| field("x", n)).collect();
        f.dropped = &many;
        tracker.record(&m, &ClientId::new("web", None), &f, t(60));
        tracker.each_method(
            |_| true,
            |_, st| {
                let d = &st.drops;
                assert_eq!(d.entries.len(), MAX_DROPPED_FIELDS);
                let items = d.entries.iter().find(|e| e.number == 7).unwrap();
                assert_eq!(&*items.path, "items[]");
                assert_eq!(items.drops, 4);
                assert_eq!(items.clients.sorted().len(), 2);
                assert_eq!(items.last_seen, t(60));
                // 200 in one answer: 64 looked at (62 new pairs fit), 136 + 2 counted together.
                assert_eq!(d.other, 136 + 2);
            },
        );
    }

    #[test]
    fn costs_sum_by_format_and_direction() {
        let tracker = Tracker::new(10);
        let m = arc("p.S/M");
        let conv = |format, pb, bytes, us| Conversion {
            format,
            protobuf_bytes: pb,
            format_bytes: bytes,
            elapsed: Duration::from_micros(us),
        };
        for _ in 0..4 {
            let mut f = json();
            f.answer_conversion = Some(conv(Format::Json, 100, 230, 14));
            f.request_conversion = Some(conv(Format::Json, 40, 90, 3));
            tracker.record(&m, &ClientId::new("web", None), &f, t(0));
        }
        let mut f = Finished::new(Format::Protobuf, Format::Protobuf);
        f.answer_conversion = Some(conv(Format::Protobuf, 100, 100, 0));
        tracker.record(&m, &ClientId::new("ios", None), &f, t(0));
        tracker.record_conversion(&m, Direction::Answer, &conv(Format::Msgpack, 100, 120, 6));
        let cost = tracker.raw(&m).cost;
        let json = cost.answers(Format::Json);
        assert_eq!(
            (
                json.count,
                json.protobuf_bytes,
                json.format_bytes,
                json.nanos
            ),
            (4, 400, 920, 56_000)
        );
        assert_eq!(json.bytes_ratio(), Some(2.3));
        assert_eq!(json.micros_each(), Some(14.0));
        assert_eq!(cost.answers(Format::Protobuf).micros_each(), Some(0.0));
        assert_eq!(cost.answers(Format::Msgpack).bytes_ratio(), Some(1.2));
        assert_eq!(
            cost.summary().unwrap(),
            "JSON answers on this method are 2.3× the protobuf bytes and cost 14 µs of gateway \
             CPU each. Reading a JSON request costs 3.0 µs more (2.2× the protobuf bytes)."
        );
        assert_eq!(Cost::default().summary(), None);
    }

    #[test]
    fn verdicts_are_counted() {
        let tracker = Tracker::new(10);
        let m = arc("p.S/M");
        for v in [
            Verdict::Allowed,
            Verdict::Deprecated,
            Verdict::Exempt,
            Verdict::Refused(RefusalReason::Brownout),
            Verdict::Refused(RefusalReason::Sunset),
            Verdict::Refused(RefusalReason::Sunset),
        ] {
            let mut f = json();
            f.verdict = v;
            tracker.record(&m, &ClientId::new("web", None), &f, t(0));
        }
        let c = tracker.raw(&m).rows["web"];
        assert_eq!(c.exempt, 1);
        assert_eq!(c.refused(RefusalReason::Sunset), 2);
        assert_eq!(c.refused(RefusalReason::Brownout), 1);
    }

    #[test]
    fn concurrent_records_lose_nothing() {
        let tracker = Arc::new(Tracker::new(50));
        let methods: Vec<Arc<str>> = (0..3).map(|i| arc(&format!("p.S/M{i}"))).collect();
        std::thread::scope(|s| {
            for th in 0..4u64 {
                let tracker = &tracker;
                let methods = &methods;
                s.spawn(move || {
                    for i in 0..20_000u64 {
                        let id = format!("c{}", (i * 7 + th) % 97);
                        let m = &methods[(i % 3) as usize];
                        tracker.record(m, &ClientId::new(&id, None), &json(), t(i / 1000));
                    }
                });
            }
        });
        let mut total = 0;
        let mut rows = 0;
        for m in &methods {
            let r = tracker.raw(m);
            total += r.totals.requests();
            rows += r.rows.len();
            let mut sum = r.other;
            for c in r.rows.values() {
                sum.merge(c);
            }
            assert_eq!(sum, r.totals);
        }
        assert_eq!(total, 80_000);
        assert_eq!(rows, tracker.tracked_clients());
        assert!(rows <= 50);
    }

    /// What `record` costs, in ns per call (run in release:
    /// `cargo test -p protogate-edge --lib --release migration::tracker::tests::record_cost
    /// -- --ignored --nocapture`).
    #[test]
    #[ignore]
    fn record_cost() {
        use std::time::Instant;
        const N: u64 = 2_000_000;
        let methods: Vec<Arc<str>> = (0..20)
            .map(|i| arc(&format!("bench.v1.Svc/M{i}")))
            .collect();
        let report = |what: &str, n: u64, elapsed: Duration| {
            println!(
                "{what}: {:.0} ns/record",
                elapsed.as_nanos() as f64 / n as f64
            );
        };
        // A known client (x-client-id and a User-Agent version), a JSON answer with its
        // downgrade and conversion: the common case.
        let tracker = Tracker::new(DEFAULT_MAX_CLIENTS);
        let headers = {
            let mut h = http::HeaderMap::new();
            h.insert(
                "x-client-id",
                http::HeaderValue::from_static("checkout-web"),
            );
            h.insert(
                http::header::USER_AGENT,
                http::HeaderValue::from_static("okhttp/4.12.0 (Linux)"),
            );
            h
        };
        let mut f = json();
        f.downgrades.insert(Reason::JsonRequested);
        f.answer_conversion = Some(Conversion {
            format: Format::Json,
            protobuf_bytes: 120,
            format_bytes: 300,
            elapsed: Duration::from_micros(3),
        });
        let m = &methods[0];
        let start = Instant::now();
        for i in 0..N {
            let client = ClientId::from_request(&headers, None, None);
            tracker.record(m, &client, &f, t(i / 10_000));
        }
        report(
            "known client, JSON answer (ClientId included)",
            N,
            start.elapsed(),
        );
        let client = ClientId::from_request(&headers, None, None);
        let start = Instant::now();
        for i in 0..N {
            tracker.record(m, &client, &f, t(i / 10_000));
        }
        report(
            "known client, JSON answer (record alone)",
            N,
            start.elapsed(),
        );
        let proto = Finished::new(Format::Protobuf, Format::Protobuf);
        let start = Instant::now();
        for i in 0..N {
            tracker.record(m, &client, &proto, t(i / 10_000));
        }
        report("known client, protobuf", N, start.elapsed());
        // A flood of new ids over a full tracker: every record replaces a row.
        let ids: Vec<String> = (0..N).map(|i| format!("attacker-{i:x}")).collect();
        let tracker = Tracker::new(DEFAULT_MAX_CLIENTS);
        let start = Instant::now();
        for (i, id) in ids.iter().enumerate() {
            let m = &methods[i % methods.len()];
            tracker.record(m, &ClientId::new(id, None), &f, t(i as u64 / 10_000));
        }
        report(
            "a new client id per request, 20 methods",
            N,
            start.elapsed(),
        );
        assert!(tracker.tracked_clients() <= DEFAULT_MAX_CLIENTS);
        // Two threads on one method (the two cores of this machine).
        let tracker = Tracker::new(DEFAULT_MAX_CLIENTS);
        let start = Instant::now();
        std::thread::scope(|s| {
            for th in 0..2 {
                let (tracker, f, m) = (&tracker, &f, &methods[0]);
                s.spawn(move || {
                    let name = format!("client-{th}");
                    let client = ClientId::new(&name, Some("1.0"));
                    for i in 0..N / 2 {
                        tracker.record(m, &client, f, t(i / 10_000));
                    }
                });
            }
        });
        report(
            "two threads, one method (wall time per record)",
            N,
            start.elapsed(),
        );
    }

    fn json() -> Finished<'static> {
        Finished::new(Format::Json, Format::Json)
    }

    /// A method's counts as plain maps, for the tests.
    pub(crate) struct Raw {
        pub(crate) totals: Counts,
        pub(crate) other: Counts,
        pub(crate) rows: HashMap<String, Counts>,
        pub(crate) cost: Cost,
    }

    impl Tracker {
        pub(crate) fn raw(&self, method: &str) -> Raw {
            let mut raw = None;
            self.each_method(
                |m| m == method,
                |_, st| {
                    st.table.check();
                    raw = Some(Raw {
                        totals: st.totals,
                        other: st.other,
                        rows: st
                            .table
                            .rows()
                            .iter()
                            .map(|r| (r.name.to_string(), r.counts))
                            .collect(),
                        cost: st.cost,
                    });
                },
            );
            raw.unwrap()
        }
    }
}
