//! Indented JSON ([`Options::indent`](crate::Options::indent)), laid out as Python's
//! `json.dumps(indent=n)` lays it out — what `json_format.MessageToJson` prints: every member
//! of a non-empty object or array on a line of its own, indented by `n` spaces per level,
//! `": "` after a key, `,` at the end of a line, empty containers as `{}` and `[]`.
//!
//! The direct path renders compact JSON and [`reindent`] lays it out again, copying every
//! token unchanged and adding only whitespace; the reference path writes the same layout
//! straight from its tree (`json::write_indented`). The differential tests hold the two
//! equal, and the oracle test holds the layout to Python's.

/// Lays out the compact JSON in `out[start..]` (as the renderers write it: no whitespace
/// outside strings) indented by `width` spaces per level. Any bytes are taken (nothing here
/// panics); only the renderers' output is laid out as Python does.
pub(crate) fn reindent_tail(out: &mut Vec<u8>, start: usize, width: u8) {
    let Some(compact) = out.get(start..) else {
        return;
    };
    let laid = reindent(compact, width);
    out.truncate(start);
    out.extend_from_slice(&laid);
}

fn reindent(compact: &[u8], width: u8) -> Vec<u8> {
    let mut out = Vec::with_capacity(compact.len() * 2);
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(&c) = compact.get(i) {
        match c {
            b'"' => {
                // The string through its closing quote, escapes and all.
                let from = i;
                i += 1;
                while let Some(&s) = compact.get(i) {
                    i += if s == b'\\' { 2 } else { 1 };
                    if s == b'"' {
                        break;
                    }
                }
                out.extend_from_slice(&compact[from..i.min(compact.len())]);
                continue;
            }
            b'{' | b'[' => {
                let end = if c == b'{' { b'}' } else { b']' };
                out.push(c);
                if compact.get(i + 1) == Some(&end) {
                    out.push(end);
                    i += 1;
                } else {
                    depth += 1;
                    newline(&mut out, depth, width);
                }
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth, width);
                out.push(c);
            }
            b',' => {
                out.push(b',');
                newline(&mut out, depth, width);
            }
            b':' => out.extend_from_slice(b": "),
            _ => out.push(c),
        }
        i += 1;
    }
    out
}

/// A line break and the indentation of `depth` levels.
pub(crate) fn newline(out: &mut Vec<u8>, depth: usize, width: u8) {
    out.push(b'\n');
    out.resize(out.len() + depth * usize::from(width), b' ');
}

#[cfg(test)]
mod tests {
    use super::reindent;

    fn laid(compact: &str, width: u8) -> String {
        String::from_utf8(reindent(compact.as_bytes(), width)).unwrap()
    }

    #[test]
    fn lays_out_as_python_json_dumps() {
        // python3 -c 'import json; print(json.dumps({"a": 1, "b": [1, {}], "c": {"d": []}, "e": "x,{:}\"y"}, indent=2))'
        assert_eq!(
            laid(r#"{"a":1,"b":[1,{}],"c":{"d":[]},"e":"x,{:}\"y"}"#, 2),
            "{\n  \"a\": 1,\n  \"b\": [\n    1,\n    {}\n  ],\n  \"c\": {\n    \"d\": []\n  },\n  \"e\": \"x,{:}\\\"y\"\n}"
        );
        assert_eq!(laid("{}", 4), "{}");
        assert_eq!(laid(r#"[["\\"]]"#, 1), "[\n [\n  \"\\\\\"\n ]\n]");
    }

    #[test]
    fn takes_any_bytes() {
        for bad in ["}}]", "\"unterminated\\", "{\"a\":", "[[[", "\\"] {
            let out = reindent(bad.as_bytes(), 2);
            // Only whitespace added: the tokens are the input's.
            let tokens: Vec<u8> = out
                .iter()
                .copied()
                .filter(|b| !b.is_ascii_whitespace())
                .collect();
            assert_eq!(tokens, bad.as_bytes(), "{bad}");
        }
    }
}
