//! JSON mutations: the renderings of generated messages fed back changed (keys renamed to
//! their aliases, values swapped, escapes, structure broken, unknown keys, flipped bytes), and
//! MessagePack bytes mutated.

use std::collections::HashMap;

use transcode::DescriptorPool;

use crate::common::Rng;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Tk {
    Open,
    Close,
    Colon,
    Comma,
    Str,
    Num,
    Lit,
}

/// Token kind, start, end.
pub type Tok = (Tk, usize, usize);

/// Splits (well-formed, usually compact) JSON text into tokens.
pub fn tokenize(s: &[u8]) -> Vec<Tok> {
    let mut v = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let st = i;
        let kind = match s[i] {
            b'{' | b'[' => {
                i += 1;
                Tk::Open
            }
            b'}' | b']' => {
                i += 1;
                Tk::Close
            }
            b':' => {
                i += 1;
                Tk::Colon
            }
            b',' => {
                i += 1;
                Tk::Comma
            }
            b'"' => {
                i += 1;
                while i < s.len() && s[i] != b'"' {
                    if s[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                i = (i + 1).min(s.len());
                Tk::Str
            }
            b' ' | b'\t' | b'\n' | b'\r' => {
                i += 1;
                continue;
            }
            b'-' | b'0'..=b'9' => {
                while i < s.len() && matches!(s[i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
                {
                    i += 1;
                }
                Tk::Num
            }
            _ => {
                while i < s.len() && s[i].is_ascii_alphabetic() {
                    i += 1;
                }
                if i == st {
                    i += 1;
                }
                Tk::Lit
            }
        };
        v.push((kind, st, i));
    }
    v
}

pub fn is_key(toks: &[Tok], i: usize) -> bool {
    toks[i].0 == Tk::Str && toks.get(i + 1).map(|t| t.0) == Some(Tk::Colon)
}

/// Index of the last token of the value starting at token `i`.
pub fn value_end(toks: &[Tok], i: usize) -> usize {
    if toks[i].0 != Tk::Open {
        return i;
    }
    let mut depth = 0usize;
    for (j, t) in toks.iter().enumerate().skip(i) {
        match t.0 {
            Tk::Open => depth += 1,
            Tk::Close => {
                depth -= 1;
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    toks.len() - 1
}

pub fn splice(src: &[u8], start: usize, end: usize, with: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(src.len() + with.len());
    v.extend_from_slice(&src[..start]);
    v.extend_from_slice(with);
    v.extend_from_slice(&src[end..]);
    v
}

pub fn unquote(t: &[u8]) -> &[u8] {
    if t.len() >= 2 { &t[1..t.len() - 1] } else { t }
}

pub const MUTATIONS: &[&str] = &[
    "flip",
    "truncate",
    "whitespace",
    "dup-key",
    "dup-key-alias",
    "num-to-string",
    "string-to-num",
    "num-form",
    "rename-key",
    "value-swap",
    "null-value",
    "unknown-enum",
    "escape",
    "structure",
];

pub const FLIP_BYTES: &[u8] = b"\"{}[],:\\0a -.eE\x00\x80\xff\t";

pub const VALUE_SWAPS: &[&str] = &[
    "null",
    "true",
    "false",
    "\"x\"",
    "\"\"",
    "[]",
    "{}",
    "[null]",
    "1.5",
    "-1",
    "0",
    "1e400",
    "-1e400",
    "18446744073709551616",
    "-9223372036854775809",
    "9223372036854775807",
    "4294967296",
    "\"NaN\"",
    "\"-Infinity\"",
    "\"2024-01-01T00:00:00Z\"",
    "\"1.5s\"",
    "\"AQID\"",
    "\"_-8=\"",
    "\"COLOR_BLUE\"",
    "{\"@type\":\"type.googleapis.com/google.protobuf.Empty\"}",
    "{\"@type\":\"type.googleapis.com/google.protobuf.Int32Value\",\"value\":5}",
    "1E2",
    "-0",
    "-0.0",
];

pub const UNKNOWN_VALUES: &[&str] = &[
    "1",
    "\"x\"",
    "null",
    "[true,{}]",
    "{\"a\":[1,2,{\"b\":null}]}",
    "-1.5e300",
];

/// Applies one random mutation to JSON text; returns its name, the text, and whether unknown
/// fields should be ignored for it.
pub fn mutate_json(
    rng: &mut Rng,
    src: &[u8],
    aliases: &HashMap<String, String>,
) -> (&'static str, Vec<u8>, bool) {
    let toks = tokenize(src);
    let keys: Vec<usize> = (0..toks.len()).filter(|&i| is_key(&toks, i)).collect();
    let text = |t: &Tok| &src[t.1..t.2];
    let alias_of = |t: &Tok| -> Option<&String> {
        std::str::from_utf8(unquote(text(t)))
            .ok()
            .and_then(|k| aliases.get(k))
    };
    let flip = |rng: &mut Rng| -> Vec<u8> {
        let mut v = src.to_vec();
        if !v.is_empty() {
            let i = rng.index(v.len());
            v[i] = *rng.pick(FLIP_BYTES);
        }
        v
    };
    let name = *rng.pick(MUTATIONS);
    let out = match name {
        "flip" => flip(rng),
        "truncate" => src[..rng.index(src.len().max(1))].to_vec(),
        "whitespace" => {
            let bad = rng.chance(0.05);
            let mut v = Vec::with_capacity(src.len() * 2);
            for t in &toks {
                if rng.chance(0.3) {
                    let ws: &[u8] = if bad {
                        rng.pick::<&[u8]>(&[b"\x0b", "\u{a0}".as_bytes(), b"\x0c"])
                    } else {
                        rng.pick::<&[u8]>(&[b" ", b"\n", b"\t", b"\r\n", b"  \n  "])
                    };
                    v.extend_from_slice(ws);
                }
                v.extend_from_slice(text(t));
            }
            if rng.chance(0.3) {
                v.extend_from_slice(b" \n");
            }
            v
        }
        "dup-key" | "dup-key-alias" | "rename-key" | "value-swap" | "null-value"
            if !keys.is_empty() =>
        {
            let with_alias: Vec<usize> = keys
                .iter()
                .copied()
                .filter(|&k| alias_of(&toks[k]).is_some())
                .collect();
            let k = if name != "value-swap" && name != "null-value" && !with_alias.is_empty() {
                *rng.pick(&with_alias)
            } else {
                *rng.pick(&keys)
            };
            let end = value_end(&toks, k + 2);
            let (ks, ke) = (toks[k].1, toks[k].2);
            let (vs, ve) = (toks[k + 2].1, toks[end].2);
            let alias = alias_of(&toks[k]).map(|a| format!("\"{a}\""));
            match name {
                "dup-key" | "dup-key-alias" => {
                    let key: Vec<u8> = match (&alias, name) {
                        (Some(a), "dup-key-alias") => a.as_bytes().to_vec(),
                        _ => src[ks..ke].to_vec(),
                    };
                    let mut member = b",".to_vec();
                    member.extend_from_slice(&key);
                    member.push(b':');
                    member.extend_from_slice(&src[vs..ve]);
                    splice(src, ve, ve, &member)
                }
                "rename-key" => {
                    let key = alias.unwrap_or_else(|| "\"no_such_field\"".to_owned());
                    splice(src, ks, ke, key.as_bytes())
                }
                "value-swap" => splice(src, vs, ve, rng.pick(VALUE_SWAPS).as_bytes()),
                _ => splice(src, vs, ve, b"null"),
            }
        }
        "num-to-string" | "num-form" => {
            let nums: Vec<&Tok> = toks.iter().filter(|t| t.0 == Tk::Num).collect();
            if nums.is_empty() {
                flip(rng)
            } else {
                let t = *rng.pick(&nums);
                let n = String::from_utf8_lossy(text(t)).into_owned();
                let with = if name == "num-to-string" {
                    format!("\"{n}\"")
                } else if n.bytes().all(|c| c.is_ascii_digit() || c == b'-') {
                    let f = *rng.pick(&["{n}.0", "{n}e0", "{n}E+0", "{n}0e-1", "{n}.5", "{n}.0e1"]);
                    f.replace("{n}", &n)
                } else {
                    format!("{n}0")
                };
                splice(src, t.1, t.2, with.as_bytes())
            }
        }
        "string-to-num" => {
            let is_int = |b: &[u8]| {
                let d = b.strip_prefix(b"-").unwrap_or(b);
                !d.is_empty() && d.iter().all(u8::is_ascii_digit)
            };
            let strs: Vec<usize> = (0..toks.len())
                .filter(|&i| toks[i].0 == Tk::Str && !is_key(&toks, i))
                .collect();
            let ints: Vec<usize> = strs
                .iter()
                .copied()
                .filter(|&i| is_int(unquote(text(&toks[i]))))
                .collect();
            let pool = if ints.is_empty() || rng.chance(0.1) {
                &strs
            } else {
                &ints
            };
            if pool.is_empty() {
                flip(rng)
            } else {
                let t = toks[*rng.pick(pool)];
                splice(src, t.1, t.2, unquote(text(&t)))
            }
        }
        "escape" => {
            let strs: Vec<&Tok> = toks.iter().filter(|t| t.0 == Tk::Str).collect();
            if strs.is_empty() {
                flip(rng)
            } else {
                let t = *rng.pick(&strs);
                match std::str::from_utf8(unquote(text(t))) {
                    Ok(inner) if t.2 - t.1 >= 2 => {
                        let escaped = escape_some(rng, inner);
                        splice(src, t.1 + 1, t.2 - 1, escaped.as_bytes())
                    }
                    _ => flip(rng),
                }
            }
        }
        "structure" => structure_mutation(rng, src, &toks),
        "unknown-enum" => {
            let enums: Vec<&Tok> = toks
                .iter()
                .filter(|t| t.0 == Tk::Str && text(t).starts_with(b"\"COLOR_"))
                .collect();
            let v = if enums.is_empty() {
                inject_unknown_key(rng, src)
            } else {
                let t = *rng.pick(&enums);
                splice(src, t.1, t.2, b"\"COLOR_PURPLE\"")
            };
            return (name, v, true);
        }
        _ => flip(rng),
    };
    (name, out, false)
}

/// Rewrites some characters of a JSON string body as escapes (`\u00e9`, surrogate pairs,
/// `\/`); sometimes adds an invalid escape.
pub fn escape_some(rng: &mut Rng, inner: &str) -> String {
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            // An existing escape is copied as it is.
            out.push(c);
            if let Some(e) = chars.next() {
                out.push(e);
                if e == 'u' {
                    out.extend(chars.by_ref().take(4));
                }
            }
            continue;
        }
        if !rng.chance(0.5) {
            out.push(c);
            continue;
        }
        let upper = rng.chance(0.5);
        let hex = |u: u32| {
            if upper {
                format!("\\u{u:04X}")
            } else {
                format!("\\u{u:04x}")
            }
        };
        match c as u32 {
            0x2f if rng.chance(0.5) => out.push_str("\\/"),
            u @ 0..=0xffff => out.push_str(&hex(u)),
            u => {
                let v = u - 0x1_0000;
                out.push_str(&hex(0xd800 + (v >> 10)));
                out.push_str(&hex(0xdc00 + (v & 0x3ff)));
            }
        }
    }
    if rng.chance(0.15) || inner.is_empty() {
        let boundaries: Vec<usize> = out
            .char_indices()
            .map(|(i, _)| i)
            .chain([out.len()])
            .collect();
        let at = *rng.pick(&boundaries);
        let bad = *rng.pick(&[
            "\\ud800",
            "\\udc00x",
            "\\ud83d\\u0041",
            "\\u12",
            "\\x41",
            "\\U0041",
            "\\u0000",
            "\\ud83d\\ude00",
            "\t",
        ]);
        out.insert_str(at, bad);
    }
    out
}

/// Breaks (or nearly breaks) the structure of JSON text: trailing commas, missing commas,
/// trailing data, a byte-order mark, `=` for `:`, single quotes, deep nesting.
pub fn structure_mutation(rng: &mut Rng, src: &[u8], toks: &[Tok]) -> Vec<u8> {
    let of_kind = |k: Tk| -> Vec<usize> { (0..toks.len()).filter(|&i| toks[i].0 == k).collect() };
    match rng.below(7) {
        0 => {
            let closes: Vec<usize> = of_kind(Tk::Close)
                .into_iter()
                .filter(|&j| j > 0 && toks[j - 1].0 != Tk::Open)
                .collect();
            if closes.is_empty() {
                [src, b","].concat()
            } else {
                let j = *rng.pick(&closes);
                splice(src, toks[j].1, toks[j].1, b",")
            }
        }
        1 => {
            let commas = of_kind(Tk::Comma);
            if commas.is_empty() {
                [b"{", src].concat()
            } else {
                let t = toks[*rng.pick(&commas)];
                splice(src, t.1, t.2, b"")
            }
        }
        2 => {
            let tail = *rng.pick::<&[u8]>(&[b" x", b"{}", b"]", b",", b"\0", b" null", b"\n\n"]);
            [src, tail].concat()
        }
        3 => ["\u{feff}".as_bytes(), src].concat(),
        4 => {
            let colons = of_kind(Tk::Colon);
            if colons.is_empty() {
                src.get(1..).unwrap_or_default().to_vec()
            } else {
                let t = toks[*rng.pick(&colons)];
                splice(src, t.1, t.2, b"=")
            }
        }
        5 => {
            let strs: Vec<usize> = of_kind(Tk::Str)
                .into_iter()
                .filter(|&i| {
                    toks[i].2 - toks[i].1 >= 2 && !src[toks[i].1..toks[i].2].contains(&b'\'')
                })
                .collect();
            if strs.is_empty() {
                src.to_vec()
            } else {
                let t = toks[*rng.pick(&strs)];
                let mut v = src.to_vec();
                v[t.1] = b'\'';
                v[t.2 - 1] = b'\'';
                v
            }
        }
        _ => {
            // A value wrapped in arrays, sometimes beyond the container limit.
            let keys: Vec<usize> = (0..toks.len()).filter(|&i| is_key(toks, i)).collect();
            let n = if rng.chance(0.5) {
                rng.irange(1, 4)
            } else {
                rng.irange(190, 260)
            } as usize;
            if keys.is_empty() {
                src.to_vec()
            } else {
                let k = *rng.pick(&keys);
                let end = value_end(toks, k + 2);
                let (vs, ve) = (toks[k + 2].1, toks[end].2);
                let wrapped = [
                    "[".repeat(n).as_bytes(),
                    &src[vs..ve],
                    "]".repeat(n).as_bytes(),
                ]
                .concat();
                splice(src, vs, ve, &wrapped)
            }
        }
    }
}

/// Adds a key no message declares to a random object (the root most often).
pub fn inject_unknown_key(rng: &mut Rng, src: &[u8]) -> Vec<u8> {
    let toks = tokenize(src);
    let objs: Vec<usize> = (0..toks.len())
        .filter(|&i| toks[i].0 == Tk::Open && src[toks[i].1] == b'{')
        .collect();
    if objs.is_empty() {
        return src.to_vec();
    }
    let i = if rng.chance(0.6) {
        objs[0]
    } else {
        *rng.pick(&objs)
    };
    let empty = toks.get(i + 1).map(|t| t.0) == Some(Tk::Close);
    let member = format!(
        "\"zzUnknownKey\":{}{}",
        rng.pick(UNKNOWN_VALUES),
        if empty { "" } else { "," }
    );
    splice(src, toks[i].2, toks[i].2, member.as_bytes())
}

pub fn mutate_bytes(rng: &mut Rng, src: &[u8]) -> Vec<u8> {
    let mut v = src.to_vec();
    match rng.below(3) {
        0 if !v.is_empty() => {
            let at = rng.index(v.len());
            v.truncate(at);
        }
        1 if !v.is_empty() => {
            let i = rng.index(v.len());
            v[i] = rng.u64() as u8;
        }
        _ => {
            let i = rng.index(v.len() + 1);
            v.insert(i, rng.u64() as u8);
        }
    }
    v
}

/// json_name ↔ proto name, for every field of the pool where they differ.
pub fn name_aliases(pool: &DescriptorPool) -> HashMap<String, String> {
    let mut m = HashMap::new();
    for msg in pool.all_messages() {
        for f in msg.fields() {
            if f.json_name() != f.name() {
                m.entry(f.json_name().to_owned())
                    .or_insert_with(|| f.name().to_owned());
                m.entry(f.name().to_owned())
                    .or_insert_with(|| f.json_name().to_owned());
            }
        }
    }
    m
}
