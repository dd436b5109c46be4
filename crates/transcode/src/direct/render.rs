//! Protobuf wire bytes → JSON or MessagePack, written straight from one scan of the bytes,
//! counting unknown fields as it goes. Wire data in canonical order (fields by increasing number, each repeated
//! field in one run, no singular field twice, one member per oneof, no duplicate map keys) is
//! rendered here; anything else — and every error — makes it give up with [`Bail`] so the
//! reference path renders (or rejects) the whole message instead.

use std::collections::HashSet;

use super::Bail;
use super::plan::{Card, FieldPlan, MsgPlan, Plans};
use super::sink::Sink;
use crate::decode::{default_val, map_key_text};
use crate::error::PathSeg;
use crate::scalar::{Op, Scalar, is_default, read_scalar, read_val};
use crate::wire::{self, Reader};
use crate::{Findings, Options, UnknownField};

type R<T> = Result<T, Bail>;

/// The current path as links on the stack, innermost first: nothing is allocated unless a
/// path is reported (unknown fields, a well-known type handed to the reference). `None` is
/// the root.
#[derive(Clone, Copy)]
struct Path<'a> {
    seg: Seg<'a>,
    parent: Option<&'a Path<'a>>,
}

#[derive(Clone, Copy)]
enum Seg<'a> {
    Field(&'a str),
    Index(usize),
    Key(&'a str),
}

fn path_segs(mut path: Option<&Path<'_>>) -> Vec<PathSeg> {
    let mut segs = Vec::new();
    while let Some(p) = path {
        segs.push(match p.seg {
            Seg::Field(f) => PathSeg::Field(f.to_owned()),
            Seg::Index(i) => PathSeg::Index(i),
            Seg::Key(k) => PathSeg::Key(k.to_owned()),
        });
        path = p.parent;
    }
    segs.reverse();
    segs
}

struct Renderer<'p, 'f, 'i, K> {
    sink: K,
    /// The whole input: every message and string rendered is a slice of it.
    input: &'i [u8],
    plans: &'p Plans,
    opts: &'p Options,
    findings: &'f mut Findings,
    depth: usize,
    /// A short loop with repeated message fields is under way: nested plans of that kind
    /// take the general loop (see `message`).
    lists_open: bool,
}

/// Renders protobuf `input` of message plan `root` with `sink`'s format, appended to `out`.
pub(crate) fn render<K: Sink>(
    sink: K,
    plans: &Plans,
    root: usize,
    input: &[u8],
    out: &mut Vec<u8>,
    opts: &Options,
    findings: &mut Findings,
) -> R<()> {
    if plans.msgs[root].special {
        return Err(Bail);
    }
    let mut r = Renderer {
        sink,
        input,
        plans,
        opts,
        findings,
        depth: 0,
        lists_open: false,
    };
    r.message(root, input, out, None)
}

impl<'p, 'i, K: Sink> Renderer<'p, '_, 'i, K> {
    /// `b` (a slice of the input) and the input's bytes after it: the window a string is
    /// checked and copied from in whole words.
    #[inline]
    fn window(&self, b: &'i [u8]) -> &'i [u8] {
        let at = (b.as_ptr() as usize).wrapping_sub(self.input.as_ptr() as usize);
        match self.input.get(at..) {
            Some(w) if w.as_ptr() == b.as_ptr() && w.len() >= b.len() => w,
            _ => b,
        }
    }

    fn message(
        &mut self,
        plan_idx: usize,
        bytes: &'i [u8],
        out: &mut Vec<u8>,
        path: Option<&Path<'_>>,
    ) -> R<()> {
        let plan = &self.plans.msgs[plan_idx];
        // One short loop with repeated message fields at a time, and none under the general
        // loop that renders a message again after its short loop left: each element is
        // rendered at most twice, however deep. (Nested, each such loop that leaves would
        // double the work of those under it: 2^depth.)
        // The short loop skips defaults; printing them is the general loop's.
        if plan.flat
            && self.depth < self.opts.max_depth
            && !(plan.flat_lists && self.lists_open)
            && !self.opts.emit_defaults
        {
            let start = out.len();
            if !plan.flat_lists {
                if self.flat::<false>(plan, bytes, out, path)? {
                    return Ok(());
                }
                out.truncate(start);
            } else {
                let found = self.findings.lens();
                self.depth += 1;
                self.lists_open = true;
                let done = self.flat::<true>(plan, bytes, out, path);
                self.depth -= 1;
                let rendered = match done {
                    Ok(true) => Ok(()),
                    Ok(false) => {
                        out.truncate(start);
                        // Unknown fields its lists' elements reported: rendered again.
                        self.findings.truncate(found);
                        self.fields(plan_idx, bytes, out, path)
                    }
                    Err(bail) => Err(bail),
                };
                self.lists_open = false;
                return rendered;
            }
        }
        self.fields(plan_idx, bytes, out, path)
    }

    /// A message of a [`MsgPlan::flat`] plan, in canonical order with known fields only:
    /// written to `out` and true. False at anything else (an unknown field, a field out of
    /// order or twice, bad wire data), with `out` partly written and findings perhaps made
    /// by its lists' elements: the caller cuts both back and takes the general loop, which
    /// renders or bails. A bail from an element's message is the whole rendering's. The
    /// short loop keeps its few variables in registers, where the general one spills its
    /// many. `LISTS`: the plan has repeated message fields (`MsgPlan::flat_lists`). Built
    /// without them, the loop calls no function (a leaf's: records, log events, items) and
    /// saves no registers on entry; the call for the elements made every record's loop 2-4 %
    /// dearer. The caller counts the depth where there are elements.
    ///
    /// [`MsgPlan::flat`]: super::plan::MsgPlan::flat
    fn flat<const LISTS: bool>(
        &mut self,
        plan: &'p MsgPlan,
        bytes: &'i [u8],
        out: &mut Vec<u8>,
        path: Option<&Path<'_>>,
    ) -> R<bool> {
        let names = self.opts.proto_field_names;
        let object = self.sink.begin_object(out);
        let mut count = 0usize;
        let mut last_number = 0u32;
        let mut r = Reader::new(bytes, 0);
        while !r.is_empty() {
            let Some((fi, tag)) = r.tag_in(&plan.by_tag) else {
                return Ok(false);
            };
            let number = u32::from(tag >> 3);
            if number <= last_number {
                return Ok(false);
            }
            last_number = number;
            let Some(field) = plan.fields.get(fi) else {
                return Ok(false);
            };
            // The tag table holds a flat field's own wire type only.
            if field.op == Op::Str {
                let Ok((b, _)) = r.len_delimited() else {
                    return Ok(false);
                };
                if field.presence || !b.is_empty() {
                    self.sink.key(out, field, names);
                    count += 1;
                    if !self.sink.str_bytes(out, self.window(b), b.len()) {
                        return Ok(false);
                    }
                }
            } else if LISTS && let Some(m) = field.message {
                // A repeated message (the only message fields a flat plan has): its whole
                // run, while the next tag is this one's byte. The same field again later is
                // out of order. The general loop's run, with the key and the array's start
                // before it and its count in a register: one function for both loops
                // measured 3-4 % more instructions (BENCHMARKS.md, 2026-12-04
                // (b3f7337..e23038f), review).
                self.sink.key(out, field, names);
                count += 1;
                let mark = self.sink.begin_array(out);
                let list = Path {
                    seg: Seg::Field(&field.json_name),
                    parent: path,
                };
                let mut elems = 0;
                loop {
                    let Ok((sub, _)) = r.len_delimited() else {
                        return Ok(false);
                    };
                    self.sink.element(out);
                    let here = Path {
                        seg: Seg::Index(elems),
                        parent: Some(&list),
                    };
                    self.message(m, sub, out, Some(&here))?;
                    elems += 1;
                    if !r.next_is(tag) {
                        break;
                    }
                }
                self.sink.end_array(out, mark, elems);
            } else {
                // The common kinds each in an arm of their own: with the kind a constant
                // there, reading, the default test and writing fold to that kind's code, one
                // dispatch where the shared code takes three.
                let written = match field.op {
                    Op::Int64 => self.scalar_as(Op::Int64, field, &mut r, out, &mut count),
                    Op::Int32 => self.scalar_as(Op::Int32, field, &mut r, out, &mut count),
                    Op::Double => self.scalar_as(Op::Double, field, &mut r, out, &mut count),
                    Op::Bool => self.scalar_as(Op::Bool, field, &mut r, out, &mut count),
                    op => self.scalar_as(op, field, &mut r, out, &mut count),
                };
                if !written {
                    return Ok(false);
                }
            }
        }
        self.sink.end_object(out, object, count);
        Ok(true)
    }

    /// A singular scalar field of kind `op` (`field.op`), its tag read: written unless it
    /// is an implicit-presence default; false if its value is cut short.
    #[inline(always)]
    fn scalar_as(
        &self,
        op: Op,
        field: &FieldPlan,
        r: &mut Reader<'i>,
        out: &mut Vec<u8>,
        count: &mut usize,
    ) -> bool {
        let Ok(v) = read_scalar(op, r) else {
            return false;
        };
        if field.presence || !is_default(v) {
            self.sink.key(out, field, self.opts.proto_field_names);
            *count += 1;
            self.sink.value(out, field, v, self.opts.enum_numbers);
        }
        true
    }

    /// A message by the general loop: any field kind, any order (bailing where the
    /// reference is needed).
    fn fields(
        &mut self,
        plan_idx: usize,
        bytes: &'i [u8],
        out: &mut Vec<u8>,
        path: Option<&Path<'_>>,
    ) -> R<()> {
        let plans = self.plans;
        let plan = &plans.msgs[plan_idx];
        if plan.special {
            return self.well_known(plan, bytes, out, path);
        }
        self.depth += 1;
        if self.depth > self.opts.max_depth {
            return Err(Bail);
        }
        let names = self.opts.proto_field_names;
        let defaults = self.opts.emit_defaults;
        let object = self.sink.begin_object(out);
        let mut count = 0usize;
        let mut last_number = 0u32;
        // With `emit_defaults`: the next of `plan.implicit` not yet printed or seen.
        let mut implicit = 0usize;
        // The repeated or map field whose run is open, where its container starts once
        // written, and how many elements it has.
        let mut open: Option<usize> = None;
        let mut container: Option<usize> = None;
        let mut elems = 0usize;
        // Made on the first map entry: a `HashSet::new()` reads its random keys from a
        // thread-local, a cost every message would pay.
        let mut map_keys: Option<HashSet<u64>> = None;
        let mut oneofs = 0u64;
        let unknown_at = self.findings.unknown_fields.len();
        let mut unknown: Vec<u32> = Vec::new();
        let mut r = Reader::new(bytes, 0);
        while !r.is_empty() {
            // A one-byte tag of a field in a wire type it can have: one table lookup.
            let (number, wt, fi) = match r.tag_in(&plan.by_tag) {
                Some((fi, tag)) => (u32::from(tag >> 3), tag & 7, fi),
                None => {
                    let (number, wt) = r.tag().map_err(|_| Bail)?;
                    let Some(fi) = plan.by_number(number) else {
                        r.skip(number, wt, self.opts.max_depth).map_err(|_| Bail)?;
                        if !unknown.contains(&number) {
                            unknown.push(number);
                        }
                        continue;
                    };
                    (number, wt, fi)
                }
            };
            let field = &plan.fields[fi];
            if open != Some(fi) {
                if let Some(o) = open.take() {
                    count += self.close(&plan.fields[o], container.take(), elems, out);
                }
                if number <= last_number {
                    return Err(Bail);
                }
                last_number = number;
                if defaults {
                    count += self.defaults_below(plan, number, &mut implicit, out);
                }
                if let Some(o) = field.oneof {
                    if o >= 64 || oneofs & (1 << o) != 0 {
                        return Err(Bail);
                    }
                    oneofs |= 1 << o;
                }
                if field.card != Card::Single {
                    open = Some(fi);
                    elems = 0;
                    if let Some(keys) = &mut map_keys {
                        keys.clear();
                    }
                }
            }
            match field.card {
                Card::Single => {
                    if self.single(field, wt, &mut r, out, path)? {
                        count += 1;
                    }
                }
                Card::List => {
                    if let Some(m) = field.message {
                        if wt != wire::LEN {
                            return Err(Bail);
                        }
                        let list = Path {
                            seg: Seg::Field(&field.json_name),
                            parent: path,
                        };
                        // The run's elements while the next tag is this one's byte: a list of
                        // records skips the loop's bookkeeping between them.
                        let tag = (number < 16).then_some(((number as u8) << 3) | wt);
                        loop {
                            let (sub, _) = r.len_delimited().map_err(|_| Bail)?;
                            self.element(field, &mut container, &mut count, out);
                            let here = Path {
                                seg: Seg::Index(elems),
                                parent: Some(&list),
                            };
                            self.message(m, sub, out, Some(&here))?;
                            elems += 1;
                            if !tag.is_some_and(|t| r.next_is(t)) {
                                break;
                            }
                        }
                    } else if wt == wire::LEN && field.op.is_packable() {
                        let (packed, _) = r.len_delimited().map_err(|_| Bail)?;
                        let mut pr = Reader::new(packed, 0);
                        while !pr.is_empty() {
                            let v = read_scalar(field.op, &mut pr).map_err(|_| Bail)?;
                            self.element(field, &mut container, &mut count, out);
                            self.sink.value(out, field, v, self.opts.enum_numbers);
                            elems += 1;
                        }
                    } else if field.op == Op::Str {
                        if wt != wire::LEN {
                            return Err(Bail);
                        }
                        let (b, _) = r.len_delimited().map_err(|_| Bail)?;
                        self.element(field, &mut container, &mut count, out);
                        if !self.sink.str_bytes(out, self.window(b), b.len()) {
                            return Err(Bail);
                        }
                        elems += 1;
                    } else {
                        if wt != field.op.wire_type() {
                            return Err(Bail);
                        }
                        let v = read_scalar(field.op, &mut r).map_err(|_| Bail)?;
                        self.element(field, &mut container, &mut count, out);
                        self.sink.value(out, field, v, self.opts.enum_numbers);
                        elems += 1;
                    }
                }
                Card::Map => {
                    if wt != wire::LEN {
                        return Err(Bail);
                    }
                    let (entry, _) = r.len_delimited().map_err(|_| Bail)?;
                    if container.is_none() {
                        self.sink.key(out, field, names);
                        count += 1;
                        container = Some(self.sink.begin_map(out));
                    }
                    let keys = map_keys.get_or_insert_with(HashSet::new);
                    self.map_entry(field, entry, keys, out, path)?;
                    elems += 1;
                }
            }
        }
        if let Some(o) = open {
            count += self.close(&plan.fields[o], container, elems, out);
        }
        if defaults {
            count += self.defaults_below(plan, u32::MAX, &mut implicit, out);
        }
        self.sink.end_object(out, object, count);
        if !unknown.is_empty() {
            self.note_unknown(unknown, unknown_at, path);
        }
        self.depth -= 1;
        Ok(())
    }

    /// A well-known type: the reference renderer writes it.
    #[cold]
    fn well_known(
        &mut self,
        plan: &MsgPlan,
        bytes: &'i [u8],
        out: &mut Vec<u8>,
        path: Option<&Path<'_>>,
    ) -> R<()> {
        let tree =
            crate::decode::Renderer::at(self.opts, self.findings, path_segs(path), self.depth)
                .message(&plan.desc, bytes, 0)
                .map_err(|_| Bail)?;
        self.sink.tree(out, &tree);
        Ok(())
    }

    /// A singular field's value, with its key when it is written (a message always; a string
    /// or a scalar when it has presence or is not its default). Returns whether it was.
    #[inline(always)]
    fn single(
        &mut self,
        field: &FieldPlan,
        wt: u8,
        r: &mut Reader<'i>,
        out: &mut Vec<u8>,
        path: Option<&Path<'_>>,
    ) -> R<bool> {
        let names = self.opts.proto_field_names;
        if let Some(m) = field.message {
            if wt != wire::LEN {
                return Err(Bail);
            }
            let (sub, _) = r.len_delimited().map_err(|_| Bail)?;
            self.sink.key(out, field, names);
            let here = Path {
                seg: Seg::Field(&field.json_name),
                parent: path,
            };
            self.message(m, sub, out, Some(&here))?;
            Ok(true)
        } else if field.op == Op::Str {
            // UTF-8 checked while the string is escaped, not before.
            if wt != wire::LEN {
                return Err(Bail);
            }
            let (b, _) = r.len_delimited().map_err(|_| Bail)?;
            if !field.presence && b.is_empty() && !self.opts.emit_defaults {
                return Ok(false);
            }
            self.sink.key(out, field, names);
            if !self.sink.str_bytes(out, self.window(b), b.len()) {
                return Err(Bail);
            }
            Ok(true)
        } else {
            if wt != field.op.wire_type() {
                return Err(Bail);
            }
            let v = read_scalar(field.op, r).map_err(|_| Bail)?;
            if !field.presence && is_default(v) && !self.opts.emit_defaults {
                return Ok(false);
            }
            self.sink.key(out, field, names);
            self.sink.value(out, field, v, self.opts.enum_numbers);
            Ok(true)
        }
    }

    /// A message's own unknown fields, reported before its children's (as the reference
    /// does): spliced in at `at`, where the findings stood when the message began.
    #[cold]
    fn note_unknown(&mut self, unknown: Vec<u32>, at: usize, path: Option<&Path<'_>>) {
        let path = crate::error::format_path(&path_segs(path));
        let mine = unknown.into_iter().map(|number| UnknownField {
            path: path.clone(),
            number,
        });
        self.findings.unknown_fields.splice(at..at, mine);
    }

    /// Before a list element: the key and the array's start on the first one.
    #[inline]
    fn element(
        &self,
        field: &FieldPlan,
        container: &mut Option<usize>,
        count: &mut usize,
        out: &mut Vec<u8>,
    ) {
        if container.is_none() {
            self.sink.key(out, field, self.opts.proto_field_names);
            *count += 1;
            *container = Some(self.sink.begin_array(out));
        }
        self.sink.element(out);
    }

    /// Ends an open list or map. An empty run (a packed list of no elements) wrote nothing,
    /// not even its key: with `emit_defaults` it is printed empty, and 1 (the key it wrote)
    /// is returned.
    fn close(
        &self,
        field: &FieldPlan,
        container: Option<usize>,
        elems: usize,
        out: &mut Vec<u8>,
    ) -> usize {
        match container {
            Some(mark) if field.card == Card::Map => self.sink.end_map(out, mark, elems),
            Some(mark) => self.sink.end_array(out, mark, elems),
            None if self.opts.emit_defaults => {
                self.default_field(field, out);
                return 1;
            }
            None => {}
        }
        0
    }

    /// `emit_defaults`: prints the fields of `plan.implicit` from `*next` on whose numbers
    /// are below `number`, at their defaults (the wire data lacked them), and steps over the
    /// one numbered `number` (the field the wire data has next). Returns the keys written.
    #[cold]
    fn defaults_below(
        &self,
        plan: &MsgPlan,
        number: u32,
        next: &mut usize,
        out: &mut Vec<u8>,
    ) -> usize {
        let mut written = 0;
        while let Some(&fi) = plan.implicit.get(*next) {
            let field = &plan.fields[fi];
            if field.number >= number {
                if field.number == number {
                    *next += 1;
                }
                break;
            }
            self.default_field(field, out);
            written += 1;
            *next += 1;
        }
        written
    }

    /// A field without presence at its default: `[]`, `{}`, or its kind's zero value.
    fn default_field(&self, field: &FieldPlan, out: &mut Vec<u8>) {
        self.sink.key(out, field, self.opts.proto_field_names);
        match field.card {
            Card::List => {
                let mark = self.sink.begin_array(out);
                self.sink.end_array(out, mark, 0);
            }
            Card::Map => {
                let mark = self.sink.begin_map(out);
                self.sink.end_map(out, mark, 0);
            }
            Card::Single => {
                self.sink
                    .value(out, field, default_val(&field.kind), self.opts.enum_numbers)
            }
        }
    }

    fn map_entry(
        &mut self,
        field: &'p FieldPlan,
        entry: &'i [u8],
        keys: &mut HashSet<u64>,
        out: &mut Vec<u8>,
        path: Option<&Path<'_>>,
    ) -> R<()> {
        let (Some(key_kind), Some((value_kind, value_plan))) = (&field.map_key, &field.map_value)
        else {
            return Err(Bail);
        };
        let mut key: Option<Scalar<'_>> = None;
        let mut value: Option<Scalar<'_>> = None;
        let mut value_msg: Option<&[u8]> = None;
        let mut r = Reader::new(entry, 0);
        while !r.is_empty() {
            let (n, wt) = r.tag().map_err(|_| Bail)?;
            match n {
                1 if key.is_none() => {
                    key = Some(
                        read_val(key_kind, wt, &mut r)
                            .map_err(|_| Bail)?
                            .ok_or(Bail)?,
                    )
                }
                2 if value.is_none() && value_msg.is_none() => {
                    if value_plan.is_some() {
                        if wt != wire::LEN {
                            return Err(Bail);
                        }
                        value_msg = Some(r.len_delimited().map_err(|_| Bail)?.0);
                    } else {
                        value = Some(
                            read_val(value_kind, wt, &mut r)
                                .map_err(|_| Bail)?
                                .ok_or(Bail)?,
                        );
                    }
                }
                _ => return Err(Bail),
            }
        }
        // The key as text, borrowed or formatted on the stack: no allocation per entry.
        let mut digits = itoa::Buffer::new();
        let key = key.unwrap_or_else(|| default_val(key_kind));
        let key_text = map_key_text(key, &mut digits).ok_or(Bail)?;
        if !keys.insert(super::fnv(key_text.as_bytes())) {
            return Err(Bail);
        }
        self.sink.map_key(out, key_text);
        match value_plan {
            Some(m) => {
                let map = Path {
                    seg: Seg::Field(&field.json_name),
                    parent: path,
                };
                let here = Path {
                    seg: Seg::Key(key_text),
                    parent: Some(&map),
                };
                self.message(*m, value_msg.unwrap_or(&[]), out, Some(&here))?;
            }
            None => {
                let v = match value {
                    Some(v) => v,
                    None if matches!(value_kind, prost_reflect::Kind::Message(_)) => {
                        return Err(Bail);
                    }
                    None => default_val(value_kind),
                };
                self.sink.value(out, field, v, self.opts.enum_numbers);
            }
        }
        Ok(())
    }
}
