//! The comparison harness: both paths on one input, their outcomes compared (output bytes,
//! findings, error text, panics), the direct path asked whether it answered itself, and the
//! tally behind the summary and the floors. `run_wire_case` takes one generated message
//! through every comparison.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use transcode::{Error, Findings, Format, MessageDescriptor, Options, Schema, reference};

use crate::common::Rng;
use crate::gen_json::{inject_unknown_key, mutate_bytes, mutate_json};
use crate::gen_wire::{ADV_NAMES, Ctx, Gen};

pub type ConvFn = fn(
    &Schema,
    &MessageDescriptor,
    Format,
    &[u8],
    &mut Vec<u8>,
    &Options,
) -> Result<Findings, Error>;

pub fn prod_from(
    s: &Schema,
    d: &MessageDescriptor,
    f: Format,
    i: &[u8],
    o: &mut Vec<u8>,
    opts: &Options,
) -> Result<Findings, Error> {
    s.from_protobuf(d, f, i, o, opts)
}

pub fn prod_to(
    s: &Schema,
    d: &MessageDescriptor,
    f: Format,
    i: &[u8],
    o: &mut Vec<u8>,
    opts: &Options,
) -> Result<Findings, Error> {
    s.to_protobuf(d, f, i, o, opts)
}

pub fn ref_from(
    _: &Schema,
    d: &MessageDescriptor,
    f: Format,
    i: &[u8],
    o: &mut Vec<u8>,
    opts: &Options,
) -> Result<Findings, Error> {
    reference::from_protobuf(d, f, i, o, opts)
}

pub fn ref_to(
    _: &Schema,
    d: &MessageDescriptor,
    f: Format,
    i: &[u8],
    o: &mut Vec<u8>,
    opts: &Options,
) -> Result<Findings, Error> {
    reference::to_protobuf(d, f, i, o, opts)
}

/// The direct transcoder alone (`from`, `to`): its output, or `None` where it bails to the
/// reference path.
pub type DirectFn =
    fn(&Schema, &MessageDescriptor, Format, Format, &[u8], &Options) -> Option<Vec<u8>>;

/// `Schema::direct_only`: what the fast path answered through the very dispatch of
/// `Schema::{to,from}_protobuf` (it returns whether the direct path answered), or `None`.
pub fn direct_only(
    s: &Schema,
    d: &MessageDescriptor,
    from: Format,
    to: Format,
    i: &[u8],
    opts: &Options,
) -> Option<Vec<u8>> {
    s.direct_only(d, from, to, i, opts)
}

/// Bytes already in `out` before a conversion: both paths must append after them.
pub const PREFIX: &[u8] = b"\xA5pre";

/// One path's result: the whole output buffer (with [`PREFIX`]) and findings or error text.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub out: Vec<u8>,
    pub res: Result<Findings, String>,
}

impl Outcome {
    /// Runs one conversion; a panic is an outcome too (and a difference from any result).
    pub fn run(f: impl FnOnce(&mut Vec<u8>) -> Result<Findings, Error>) -> Outcome {
        let mut out = PREFIX.to_vec();
        let res = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mut out))) {
            Ok(r) => r.map_err(|e| e.to_string()),
            Err(p) => {
                let msg = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                Err(format!("PANIC: {msg}"))
            }
        };
        Outcome { out, res }
    }

    /// What was appended after the prefix.
    pub fn body(&self) -> &[u8] {
        self.out.get(PREFIX.len()..).unwrap_or(&[])
    }
}

/// Why two outcomes differ, or `None` when they agree.
pub fn diff(production: &Outcome, reference: &Outcome) -> Option<&'static str> {
    match (&production.res, &reference.res) {
        (Ok(p), Ok(r)) => {
            if production.out != reference.out {
                Some("output bytes differ")
            } else if p != r {
                Some("findings differ")
            } else {
                None
            }
        }
        (Err(p), Err(r)) => (p != r).then_some("error messages differ"),
        (Ok(_), Err(_)) => Some("production succeeded, reference failed"),
        (Err(_), Ok(_)) => Some("production failed, reference succeeded"),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    From,
    To,
}

pub fn fmt_name(f: Format) -> &'static str {
    f.as_str()
}

pub fn dump(bytes: &[u8], text: bool) -> String {
    const MAX: usize = 400;
    if text {
        let s = String::from_utf8_lossy(&bytes[..bytes.len().min(MAX)]);
        let more = if bytes.len() > MAX { "…" } else { "" };
        format!("{} bytes: {s}{more}", bytes.len())
    } else {
        let mut s = String::new();
        for b in &bytes[..bytes.len().min(MAX / 2)] {
            s.push_str(&format!("{b:02x}"));
        }
        let more = if bytes.len() > MAX / 2 { "…" } else { "" };
        format!("{} bytes: {s}{more}", bytes.len())
    }
}

pub fn describe(o: &Outcome, text: bool) -> String {
    match &o.res {
        Ok(f) => format!("Ok {}; {f:?}", dump(o.body(), text)),
        Err(e) => format!(
            "Err {e:?}{}",
            if o.out == PREFIX {
                ""
            } else {
                " (and output left in the buffer)"
            }
        ),
    }
}

pub const MAX_REPORTED: usize = 20;

pub fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// The least share (in percent) of each direction's agreed conversions that the direct path must
/// answer itself rather than hand to the reference: the two paths agreeing proves nothing about
/// the direct one if it bails on every message.
#[derive(Clone, Copy, Debug)]
pub struct Floors {
    /// Protobuf → JSON / MessagePack (`Dir::From`).
    pub from: f64,
    /// JSON / MessagePack → protobuf (`Dir::To`).
    pub to: f64,
}

pub struct Harness<'s> {
    pub schema: &'s Schema,
    pub prod_from: ConvFn,
    pub prod_to: ConvFn,
    /// The direct path alone, asked after every comparison whether it answered itself or bailed
    /// (`None` when the production paths under test are not `Schema`'s).
    pub direct: Option<DirectFn>,
    /// Case being checked, for failure reports.
    pub case: String,
    /// `dir label` → [ok-both, err-both, mismatch, answered by the direct path].
    pub table: BTreeMap<String, [u64; 4]>,
    /// Generator and findings statistics.
    pub counts: BTreeMap<String, u64>,
    pub failures: Vec<String>,
    pub mismatches: u64,
    pub comparisons: u64,
    /// Errors after which production left bytes in `out` (informational).
    pub prod_output_on_error: u64,
    /// Why the unmutated inputs failed (both paths agreeing), by error class.
    pub errors: BTreeMap<String, u64>,
}

/// Comparisons whose (agreed) errors are classified in the summary.
pub const ERROR_CLASS_LABELS: &[&str] = &["default json", "json default", "body json"];

/// An error message without its path and with numbers blanked, for counting.
pub fn error_class(e: &str) -> String {
    // The path is everything before the first ": " followed by the start of a message.
    const STARTS: &[&str] = &[
        "malformed",
        "expected",
        "unknown field",
        "field given",
        "oneof",
        "invalid UTF-8",
        "nesting",
        "Timestamp",
        "Duration",
        "FieldMask",
        "google.protobuf",
    ];
    let cut = STARTS
        .iter()
        .filter_map(|start| e.find(&format!(": {start}")))
        .min()
        .map_or(0, |i| i + 2);
    let mut s = String::new();
    let mut last_hash = false;
    let mut quoted = false;
    let mut escaped = false;
    for c in e[cut..].chars() {
        if quoted {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                quoted = false;
                s.push_str("…\"");
            }
            continue;
        }
        if c == '"' {
            quoted = true;
            s.push('"');
            last_hash = false;
        } else if c.is_ascii_digit() {
            if !last_hash {
                s.push('#');
            }
            last_hash = true;
        } else {
            s.push(c);
            last_hash = false;
        }
    }
    s.chars().take(90).collect()
}

impl<'s> Harness<'s> {
    pub fn new(schema: &'s Schema) -> Self {
        Self::with_paths(schema, prod_from, prod_to, Some(direct_only))
    }

    pub fn with_paths(
        schema: &'s Schema,
        prod_from: ConvFn,
        prod_to: ConvFn,
        direct: Option<DirectFn>,
    ) -> Self {
        Harness {
            schema,
            prod_from,
            prod_to,
            direct,
            case: String::new(),
            table: BTreeMap::new(),
            counts: BTreeMap::new(),
            failures: Vec::new(),
            mismatches: 0,
            comparisons: 0,
            prod_output_on_error: 0,
            errors: BTreeMap::new(),
        }
    }

    pub fn count(&mut self, key: impl Into<String>) {
        *self.counts.entry(key.into()).or_default() += 1;
    }

    /// Runs both paths in one direction and records the comparison; returns the reference's
    /// outcome.
    pub fn check(
        &mut self,
        dir: Dir,
        label: &str,
        desc: &MessageDescriptor,
        fmt: Format,
        input: &[u8],
        opts: &Options,
    ) -> Outcome {
        let (prod, refr) = match dir {
            Dir::From => (self.prod_from, ref_from as ConvFn),
            Dir::To => (self.prod_to, ref_to as ConvFn),
        };
        let schema = self.schema;
        let p = Outcome::run(|o| prod(schema, desc, fmt, input, o, opts));
        let r = Outcome::run(|o| refr(schema, desc, fmt, input, o, opts));
        self.comparisons += 1;
        let dir_name = if dir == Dir::From { "from" } else { "to" };
        let slot = self
            .table
            .entry(format!("{dir_name:4} {label}"))
            .or_default();
        // Did the direct path answer, or bail to the reference? An answer must be what `Schema`
        // returned (a panic was reported above and is not asked again).
        let mut direct_differs = false;
        if let Some(direct) = self.direct
            && !p.res.as_ref().is_err_and(|e| e.starts_with("PANIC"))
        {
            let (from, to) = match dir {
                Dir::From => (Format::Protobuf, fmt),
                Dir::To => (fmt, Format::Protobuf),
            };
            if let Some(answer) = direct(schema, desc, from, to, input, opts) {
                slot[3] += 1;
                direct_differs = p.res.is_err() || p.body() != answer;
            }
        }
        let verdict = match diff(&p, &r) {
            None if direct_differs => {
                Some("the direct path answered, but not what Schema returned")
            }
            other => other,
        };
        match verdict {
            None if r.res.is_ok() => slot[0] += 1,
            None => {
                slot[1] += 1;
                if p.out != PREFIX {
                    self.prod_output_on_error += 1;
                }
                if ERROR_CLASS_LABELS.contains(&label)
                    && let Err(e) = &r.res
                {
                    let key = format!("{dir_name} {label}: {}", error_class(e));
                    *self.errors.entry(key).or_default() += 1;
                }
            }
            Some(why) => {
                slot[2] += 1;
                self.mismatches += 1;
                if self.failures.len() < MAX_REPORTED {
                    let (in_text, out_text) = match dir {
                        Dir::From => (false, fmt == Format::Json),
                        Dir::To => (fmt == Format::Json, false),
                    };
                    self.failures.push(format!(
                        "{why}: case {} [{dir_name} {label}] {} {} opts {opts:?}\n    input: {}\n    production: {}\n    reference:  {}",
                        self.case,
                        desc.full_name(),
                        fmt_name(fmt),
                        dump(input, in_text),
                        describe(&p, out_text),
                        describe(&r, out_text),
                    ));
                }
            }
        }
        r
    }

    pub fn merge(&mut self, other: Harness<'_>) {
        for (k, v) in other.table {
            let slot = self.table.entry(k).or_default();
            for i in 0..4 {
                slot[i] += v[i];
            }
        }
        for (k, v) in other.counts {
            *self.counts.entry(k).or_default() += v;
        }
        for f in other.failures {
            if self.failures.len() < MAX_REPORTED {
                self.failures.push(f);
            }
        }
        self.mismatches += other.mismatches;
        self.comparisons += other.comparisons;
        self.prod_output_on_error += other.prod_output_on_error;
        for (k, v) in other.errors {
            *self.errors.entry(k).or_default() += v;
        }
    }

    pub fn summary(&self, title: &str, started: Instant) -> String {
        let mut s = format!(
            "differential [{title}]: {} comparisons, {} mismatches, {:.1}s\n",
            self.comparisons,
            self.mismatches,
            started.elapsed().as_secs_f64()
        );
        if !self.counts.is_empty() {
            s.push_str("  generated inputs (cases in which each kind occurs):\n");
            for (k, v) in &self.counts {
                s.push_str(&format!("    {k:44} {v:>7}\n"));
            }
        }
        s.push_str(&format!(
            "  {:44} {:>7} {:>7} {:>8} {:>7}\n",
            "comparison", "ok-both", "err-both", "MISMATCH", "direct"
        ));
        for (k, [ok, err, bad, direct]) in &self.table {
            s.push_str(&format!(
                "    {k:42} {ok:>7} {err:>7} {bad:>8} {direct:>7}\n"
            ));
        }
        for dir in ["from", "to"] {
            let (ok, direct) = self.direct_share(dir);
            s.push_str(&format!(
                "  {dir:4}: the direct path answered {direct} of {ok} agreed conversions ({:.1} %)\n",
                percent(direct, ok)
            ));
        }
        if !self.errors.is_empty() {
            s.push_str("  agreed errors of unmutated inputs, by class:\n");
            for (k, v) in &self.errors {
                s.push_str(&format!("    {v:>7}  {k}\n"));
            }
        }
        if self.prod_output_on_error > 0 {
            s.push_str(&format!(
                "  note: production left bytes in the output buffer on {} errors (the reference never does)\n",
                self.prod_output_on_error
            ));
        }
        s
    }

    /// Agreed conversions of direction `dir` ("from" or "to") and how many of them the direct
    /// path answered.
    pub fn direct_share(&self, dir: &str) -> (u64, u64) {
        self.table
            .iter()
            .filter(|(k, _)| k.split_whitespace().next() == Some(dir))
            .fold((0, 0), |(ok, direct), (_, v)| (ok + v[0], direct + v[3]))
    }

    /// Where the direct path answered less than `floors` asks, one line per direction.
    pub fn below_floors(&self, floors: Floors) -> Vec<String> {
        [("from", floors.from), ("to", floors.to)]
            .into_iter()
            .filter_map(|(dir, floor)| {
                let (ok, direct) = self.direct_share(dir);
                (percent(direct, ok) < floor).then(|| {
                    format!(
                        "{dir}: the direct path answered {direct} of {ok} agreed conversions ({:.1} %), below the floor of {floor} %",
                        percent(direct, ok)
                    )
                })
            })
            .collect()
    }

    /// Prints the summary; panics with the first failures if any comparison disagreed, if
    /// nothing was compared, or if the direct path answered less than `floors` (not checked on
    /// a rerun of one case, `PROTOGATE_DIFF_CASE`, whose share is anyone's guess).
    pub fn finish(&self, title: &str, started: Instant, floors: Floors) {
        let summary = self.summary(title, started);
        eprintln!("{summary}");
        assert!(
            self.comparisons > 0,
            "differential [{title}]: nothing was compared\n{summary}"
        );
        if std::env::var_os("PROTOGATE_DIFF_CASE").is_none() {
            let below = self.below_floors(floors);
            assert!(
                below.is_empty(),
                "differential [{title}]: the direct path bails too often:\n  {}\n\n{summary}",
                below.join("\n  ")
            );
        }
        if self.mismatches > 0 {
            panic!(
                "{} of {} comparisons disagree between Schema (production) and transcode::reference; first {}:\n{}\n\n{summary}",
                self.mismatches,
                self.comparisons,
                self.failures.len(),
                self.failures.join("\n")
            );
        }
    }
}

pub fn option_variants() -> [(&'static str, Options); 5] {
    let d = Options::default();
    [
        ("default", d.clone()),
        (
            "proto-names",
            Options {
                proto_field_names: true,
                ..d.clone()
            },
        ),
        (
            "emit-defaults",
            Options {
                emit_defaults: true,
                ..d.clone()
            },
        ),
        (
            "enum-numbers",
            Options {
                enum_numbers: true,
                ..d.clone()
            },
        ),
        (
            "indented",
            Options {
                indent: 2,
                emit_defaults: true,
                ..d
            },
        ),
    ]
}

/// One generated message through every comparison: rendering with each option variant, then
/// the renderings (and mutations of them) back to protobuf.
pub fn run_wire_case(
    h: &mut Harness<'_>,
    ctx: &Ctx,
    aliases: &HashMap<String, String>,
    desc: &MessageDescriptor,
    seed: u64,
) {
    let mut g = Gen::new(seed, ctx);
    let wire = g.root(desc);
    h.count(format!("{} cases", desc.full_name()));
    for (i, hit) in g.hit.iter().enumerate() {
        if *hit {
            h.count(ADV_NAMES[i]);
        }
    }
    let variants = option_variants();
    let mut json: Vec<Option<Vec<u8>>> = Vec::new();
    let mut msgpack = None;
    for (oname, opts) in &variants {
        for fmt in [Format::Json, Format::Msgpack] {
            let r = h.check(
                Dir::From,
                &format!("{oname} {}", fmt_name(fmt)),
                desc,
                fmt,
                &wire,
                opts,
            );
            if *oname == "default" && fmt == Format::Json {
                match &r.res {
                    Ok(f) => {
                        h.count("rendered OK (default, JSON)");
                        if !f.unknown_fields.is_empty() {
                            h.count("findings: unknown_fields");
                        }
                        if !f.unresolved_any.is_empty() {
                            h.count("findings: unresolved_any");
                        }
                    }
                    Err(_) => h.count("rendering failed (default, JSON)"),
                }
            }
            let body = r.res.is_ok().then(|| r.body().to_vec());
            match fmt {
                Format::Json => json.push(body),
                _ if *oname == "default" => msgpack = body,
                _ => {}
            }
        }
    }
    let (Some(json0), Some(mp)) = (json[0].clone(), msgpack) else {
        return;
    };
    let default = Options::default();
    let ignoring = Options {
        ignore_unknown_fields: true,
        ..Options::default()
    };
    h.check(
        Dir::To,
        "json default",
        desc,
        Format::Json,
        &json0,
        &default,
    );
    h.check(
        Dir::To,
        "msgpack default",
        desc,
        Format::Msgpack,
        &mp,
        &default,
    );
    for (i, (oname, _)) in variants.iter().enumerate().skip(1) {
        if let Some(j) = &json[i] {
            h.check(
                Dir::To,
                &format!("json {oname}"),
                desc,
                Format::Json,
                j,
                &default,
            );
        }
    }
    let mut rng = Rng::new(seed ^ 0x5EED_F1A5);
    for _ in 0..3 {
        let base = match &json[1] {
            Some(j) if rng.chance(0.3) => j,
            _ => &json0,
        };
        let (name, text, ignore) = mutate_json(&mut rng, base, aliases);
        let ignore = ignore || rng.chance(0.2);
        h.check(
            Dir::To,
            &format!("json mut {name}{}", if ignore { " +ignore" } else { "" }),
            desc,
            Format::Json,
            &text,
            if ignore { &ignoring } else { &default },
        );
    }
    let text = inject_unknown_key(&mut rng, &json0);
    h.check(
        Dir::To,
        "json unknown key +ignore",
        desc,
        Format::Json,
        &text,
        &ignoring,
    );
    h.check(
        Dir::To,
        "json unknown key",
        desc,
        Format::Json,
        &text,
        &default,
    );
    // Depth limits: how levels are counted (maps, Any, well-known types) must agree.
    let shallow = Options {
        max_depth: rng.irange(1, 8) as usize,
        ..Options::default()
    };
    h.check(
        Dir::From,
        "small max_depth json",
        desc,
        Format::Json,
        &wire,
        &shallow,
    );
    h.check(
        Dir::To,
        "json small max_depth",
        desc,
        Format::Json,
        &json0,
        &shallow,
    );
    let bad = mutate_bytes(&mut rng, &mp);
    h.check(
        Dir::To,
        "msgpack mut",
        desc,
        Format::Msgpack,
        &bad,
        &default,
    );
}
