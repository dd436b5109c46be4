#!/usr/bin/env python3
"""List import cycles between the modules of each crate under crates/*/src.

Usage:
    python3 tests/tools/module_cycles.py [--vertical] [--edges] [--ignore MOD]... [CRATE_DIR]...

With no CRATE_DIR, every crates/*/ of the repository (found from this file's place) is
checked. Prints each strongly connected component of more than one module with the edges
that close it (file:line and the path as written), and exits 1 if there is one (2 on a usage
or read error). Python 3 standard library only; no build needed.

The graph
- A module is a file: `x.rs` is `x`, `x/mod.rs` is `x`, `lib.rs` / `main.rs` the crate root
  (written `crate`). Modules are found by following `mod x;` from lib.rs and main.rs (main.rs
  is a crate of its own when lib.rs is there too). Inline `mod x { … }` blocks are folded into
  the file that holds them.
- `mod x;` is a declaration, not an import: it makes no edge.
- Edges come from `use` declarations (`crate::`, `super::`, `self::` and child-relative
  paths, nested `{…}` trees included) and from paths in code (`crate::a::b::Item`,
  `super::Item`, `child::Item`, and `m::Item` after `use crate::m;`: a module imported by
  name counts where its items are named). A path is resolved the way rustc resolves it, as far as a
  token scan can: segments walk down through module files, and the first item segment is
  looked up in the module reached; an item that module only imports (`use`/`pub use`) is
  followed to the module that defines it. So `crate::EdgeError`, re-exported by lib.rs from
  error.rs, is an edge to `error`, and a `pub use` shim left at an old place sends its users to
  the new home. Paths into other crates make no edge.
- Glob imports (`use super::*`, `use crate::x::*`, `use child::*`): each identifier the file
  uses that the glob brings in (and the file does not define or import itself) is resolved as
  above, so `use super::*` is an edge to the parent for the parent's own items and to the
  owner of whatever the parent imports.
- `#[cfg(test)]` items (`mod tests { … }`, a `#[cfg(test)] mod tests;` file, test-only
  `use`s and fns) are ignored, as are comments (doc links included) and string literals.

Parent/child edges
A module and its ancestors (its parent, their parents, the crate root) are nested on purpose:
a child sees its parent's private items, a parent re-exports its children and is made of
them. An edge between a module and one of its own ancestors, either way, is "vertical" and
is left out of the cycle graph by default; only edges between modules neither of which
contains the other ("horizontal") can close a cycle. A child that uses, through
`use super::*`, an item its parent imports from a sibling has an edge to that sibling (the
owner), which is horizontal and counts. `--vertical` puts the vertical edges in too (still
never `mod x;` declarations) and shows which parent/child pairs use each other.

Options
  --vertical     include edges between a module and its ancestors.
  --edges        print every edge kept, not only those of cycles.
  --ignore MOD   leave out modules MOD and below (e.g. `edge::service`); repeatable.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field

KEYWORDS = {
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum",
    "extern", "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move",
    "mut", "pub", "ref", "return", "self", "Self", "static", "struct", "super", "trait",
    "true", "type", "unsafe", "use", "where", "while", "union", "gen", "macro_rules",
}
ITEM_KEYWORDS = {"fn", "struct", "enum", "trait", "type", "const", "static", "union", "mod"}
ROOT = "crate"


# --------------------------------------------------------------------------------------------
# Lexing


def strip_comments_and_literals(src: str) -> str:
    """The source with comments and the contents of string and char literals blanked out
    (newlines kept, so line numbers stay right)."""
    out = []
    i, n = 0, len(src)

    def blank(s: str) -> str:
        return "".join("\n" if c == "\n" else " " for c in s)

    while i < n:
        c = src[i]
        nxt = src[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(blank(src[i:j]))
            i = j
        elif c == "/" and nxt == "*":
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(blank(src[i:j]))
            i = j
        elif c in "rbc" and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            # raw strings r"…", r#"…"#, br"…", cr"…"; byte / C strings b"…", c"…"
            m = re.match(r'(?:br|cr|r)(#*)"', src[i:i + 300])
            if m:
                hashes = m.group(1)
                start = i + m.end()
                end = src.find('"' + hashes, start)
                end = n if end < 0 else end + 1 + len(hashes)
                out.append(src[i:start] + blank(src[start:end - 1 - len(hashes)]) + '"' + hashes)
                i = end
                continue
            if c in "bc" and nxt == '"':
                out.append(c)
                i += 1
                continue
            if c == "b" and nxt == "'":
                out.append(c)
                i += 1
                continue
            out.append(c)
            i += 1
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append('"' + blank(src[i + 1:j]) + '"')
            i = j + 1
        elif c == "'":
            # a char literal ('a', '\n', '\u{..}') or a lifetime ('a)
            if nxt == "\\":
                j = i + 2
                while j < n and src[j] != "'":
                    j += 2 if src[j] == "\\" else 1
                out.append("'" + blank(src[i + 1:j]) + "'")
                i = j + 1
            elif i + 2 < n and src[i + 2] == "'":
                out.append("' '")
                i += 3
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


TOKEN_RE = re.compile(r"r#[A-Za-z_][A-Za-z0-9_]*|[A-Za-z_][A-Za-z0-9_]*|::|\d[\w.]*|\S")


@dataclass
class Tok:
    text: str
    line: int


def tokenize(src: str) -> list[Tok]:
    toks = []
    for lineno, line in enumerate(strip_comments_and_literals(src).split("\n"), 1):
        for m in TOKEN_RE.finditer(line):
            t = m.group(0)
            if t.startswith("r#"):
                t = t[2:]
            toks.append(Tok(t, lineno))
    return toks


def is_ident(t: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", t))


def matching(toks: list[Tok], i: int) -> int:
    """Index of the bracket closing the one at i."""
    open_, close = toks[i].text, {"{": "}", "(": ")", "[": "]"}[toks[i].text]
    depth = 0
    for j in range(i, len(toks)):
        if toks[j].text == open_:
            depth += 1
        elif toks[j].text == close:
            depth -= 1
            if depth == 0:
                return j
    return len(toks) - 1


def item_end(toks: list[Tok], i: int) -> int:
    """Index of the last token of the item (or statement) starting at i: its `;` at depth 0, or
    the `}` closing its first top-level brace block."""
    j = i
    while j < len(toks):
        t = toks[j].text
        if t in "([":
            j = matching(toks, j) + 1
            continue
        if t == "{":
            return matching(toks, j)
        if t in ";}":
            return j
        j += 1
    return len(toks) - 1


def drop_cfg_test(toks: list[Tok]) -> tuple[list[Tok], set[str]]:
    """The tokens without `#[cfg(test)]` items; and the names of `#[cfg(test)] mod x;` files."""
    out, test_mods = [], set()
    i = 0
    pattern = ["#", "[", "cfg", "(", "test", ")", "]"]
    while i < len(toks):
        if [t.text for t in toks[i:i + 7]] == pattern:
            j = i + 7
            while j < len(toks) and toks[j].text == "#" and j + 1 < len(toks) and toks[j + 1].text == "[":
                j = matching(toks, j + 1) + 1
            k = j
            while k < len(toks) and toks[k].text in ("pub", "(", "crate", "super", ")", "in"):
                k += 1
            if k + 2 < len(toks) and toks[k].text == "mod" and toks[k + 2].text == ";":
                test_mods.add(toks[k + 1].text)
            i = item_end(toks, j) + 1
            continue
        out.append(toks[i])
        i += 1
    return out, test_mods


# --------------------------------------------------------------------------------------------
# Modules


@dataclass
class UseLeaf:
    path: list[str]  # segments; the last is the imported name, or "*" for a glob
    alias: str | None
    line: int
    text: str
    public: bool
    inline_depth: int


@dataclass
class Module:
    name: str  # "crate", "upstream", "upstream::pool"
    file: str
    parent: str | None
    children: dict[str, str] = field(default_factory=dict)  # file children: name -> module
    inline_mods: set[str] = field(default_factory=set)
    defs: dict[str, bool] = field(default_factory=dict)  # name -> public
    imports: dict[str, UseLeaf] = field(default_factory=dict)  # local name -> leaf
    globs: list[UseLeaf] = field(default_factory=list)
    toks: list[Tok] = field(default_factory=list)
    inline_depth: list[int] = field(default_factory=list)  # per token
    use_spans: list[tuple[int, int]] = field(default_factory=list)
    test_mods: set[str] = field(default_factory=set)


def child_name(parent: str, name: str) -> str:
    return name if parent == ROOT else f"{parent}::{name}"


def is_ancestor(a: str, b: str) -> bool:
    """a is a strict ancestor of b."""
    return a != b and (a == ROOT or b.startswith(a + "::"))


def parse_use_tree(toks: list[Tok], i: int, prefix: list[str], out: list, line_of_use: int) -> int:
    """Parse a use tree starting at toks[i]; append (segments, alias) pairs; return the index
    after the tree."""
    segs = list(prefix)
    while i < len(toks):
        t = toks[i].text
        if t == "{":
            close = matching(toks, i)
            j = i + 1
            while j < close:
                j = parse_use_tree(toks, j, segs, out, line_of_use)
                if j < close and toks[j].text == ",":
                    j += 1
            return close + 1
        if t == "*":
            out.append((segs + ["*"], None))
            return i + 1
        if t == "::":
            i += 1
            continue
        if is_ident(t):
            segs.append(t)
            i += 1
            if i < len(toks) and toks[i].text == "::":
                continue
            alias = None
            if i + 1 < len(toks) and toks[i].text == "as":
                alias = toks[i + 1].text
                i += 2
            out.append((segs, alias))
            return i
        return i + 1
    return i


def scan_module(mod: Module) -> None:
    """Fill defs, imports, globs, inline mods and the per-token inline depth."""
    toks = mod.toks
    depth_stack: list[int] = []  # brace depth at which each enclosing inline mod's body opened
    brace = 0
    i = 0
    mod.inline_depth = [0] * len(toks)
    while i < len(toks):
        mod.inline_depth[i] = len(depth_stack)
        t = toks[i].text
        at_item_level = brace == (depth_stack[-1] + 1 if depth_stack else 0)
        if t == "{":
            brace += 1
        elif t == "}":
            brace -= 1
            if depth_stack and brace == depth_stack[-1]:
                depth_stack.pop()
        elif t == "use" and (i + 1 < len(toks) and toks[i + 1].text != "<") and (i == 0 or toks[i - 1].text != "."):
            public = i > 0 and (toks[i - 1].text == "pub" or (toks[i - 1].text == ")" and _vis_before(toks, i - 1)))
            leaves: list = []
            end = parse_use_tree(toks, i + 1, [], leaves, toks[i].line)
            while end < len(toks) and toks[end].text != ";":
                end += 1
            text = " ".join(x.text for x in toks[i:end + 1]).replace(" :: ", "::")
            for segs, alias in leaves:
                if segs and segs[-1] == "self":
                    segs = segs[:-1]
                    alias = alias or (segs[-1] if segs else None)
                if not segs:
                    continue
                leaf = UseLeaf(segs, alias, toks[i].line, text, public, len(depth_stack))
                if segs[-1] == "*":
                    mod.globs.append(leaf)
                else:
                    name = alias or segs[-1]
                    if name != "_" and at_item_level and not depth_stack:
                        mod.imports[name] = leaf
                    elif name != "_":
                        # a use inside a fn or an inline mod: still an edge, but not part of
                        # the file module's namespace
                        mod.imports.setdefault(f"#local{i}:{name}", leaf)
            for k in range(i, min(end + 1, len(toks))):
                mod.inline_depth[k] = len(depth_stack)
            mod.use_spans.append((i, end))
            i = end + 1
            continue
        elif t in ITEM_KEYWORDS and at_item_level and i + 1 < len(toks) and is_ident(toks[i + 1].text) \
                and toks[i + 1].text not in KEYWORDS and (i == 0 or toks[i - 1].text not in (".", "::")):
            name = toks[i + 1].text
            public = _is_public(toks, i)
            if t == "mod":
                if i + 2 < len(toks) and toks[i + 2].text == "{":
                    mod.inline_mods.add(name)
                    depth_stack.append(brace)
                    brace += 1
                    mod.inline_depth[i + 2] = len(depth_stack)
                    i += 3
                    continue
            elif not depth_stack:
                mod.defs[name] = public
        elif t == "macro_rules" and i + 2 < len(toks) and toks[i + 1].text == "!":
            mod.defs[toks[i + 2].text] = False
        i += 1


def _vis_before(toks: list[Tok], close: int) -> bool:
    j = close
    while j >= 0 and toks[j].text != "(":
        j -= 1
    return j > 0 and toks[j - 1].text == "pub"


def _is_public(toks: list[Tok], i: int) -> bool:
    j = i - 1
    while j >= 0 and toks[j].text in ("const", "async", "unsafe", "extern"):
        j -= 1
    if j >= 0 and toks[j].text == "pub":
        return True
    return j >= 0 and toks[j].text == ")" and _vis_before(toks, j)


def find_mod_decls(toks: list[Tok]) -> list[tuple[str, str | None]]:
    """`mod x;` declarations at the file's top level, with a `#[path]` if any."""
    out = []
    brace = 0
    for i, t in enumerate(toks):
        if t.text == "{":
            brace += 1
        elif t.text == "}":
            brace -= 1
        elif t.text == "mod" and brace == 0 and i + 2 < len(toks) and toks[i + 2].text == ";":
            out.append((toks[i + 1].text, None))
    return out


def load_crate(src_dir: str, root_file: str, errors: list[str]) -> dict[str, Module]:
    mods: dict[str, Module] = {}

    def load(name: str, path: str, parent: str | None) -> None:
        try:
            with open(path, encoding="utf-8") as f:
                raw = f.read()
        except OSError as e:
            errors.append(f"{path}: {e}")
            return
        # #[path = "…"] attributes are looked for in the raw text (they are string literals)
        paths = dict(re.findall(r'#\[path\s*=\s*"([^"]+)"\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)', raw))
        paths = {v: k for k, v in paths.items()}
        toks, test_mods = drop_cfg_test(tokenize(raw))
        mod = Module(name, path, parent, toks=toks, test_mods=test_mods)
        mods[name] = mod
        scan_module(mod)
        base = os.path.dirname(path)
        fname = os.path.basename(path)
        if fname not in ("lib.rs", "main.rs", "mod.rs"):
            base = os.path.join(base, fname[:-3])
        for child, _ in find_mod_decls(toks):
            if child in paths:
                cand = [os.path.join(os.path.dirname(path), paths[child])]
            else:
                cand = [os.path.join(base, child + ".rs"), os.path.join(base, child, "mod.rs")]
            found = next((c for c in cand if os.path.isfile(c)), None)
            if found is None:
                errors.append(f"{path}: no file for `mod {child};`")
                continue
            cname = child_name(name, child)
            mod.children[child] = cname
            load(cname, found, name)

    load(ROOT, os.path.join(src_dir, root_file), None)
    return mods


# --------------------------------------------------------------------------------------------
# Resolution


class Resolver:
    def __init__(self, mods: dict[str, Module]):
        self.mods = mods

    def name(self, mod: str, name: str, asker: str, seen: frozenset = frozenset()):
        """Where `name`, looked up in module `mod` by module `asker`, comes from:
        ("module", m) for a module, ("item", m) for an item defined in m, None for another
        crate or an unknown name."""
        key = (mod, name)
        if key in seen or mod not in self.mods:
            return None
        seen = seen | {key}
        m = self.mods[mod]
        own = asker == mod or is_ancestor(mod, asker)
        if name in m.children:
            return ("module", m.children[name])
        if name in m.inline_mods:
            return ("module", mod)
        if name in m.defs and (own or m.defs[name]):
            return ("item", mod)
        if name in m.imports and (own or m.imports[name].public):
            leaf = m.imports[name]
            return self.path(mod, leaf.path, leaf.inline_depth, seen)
        for g in m.globs:
            if g.inline_depth or not (own or g.public):
                continue
            target = self.path(mod, g.path[:-1], g.inline_depth, seen)
            if target and target[0] == "module":
                r = self.name(target[1], name, asker, seen)
                if r:
                    return r
        return None

    def path(self, mod: str, segs: list[str], inline_depth: int = 0, seen: frozenset = frozenset()):
        """Resolve a path as written in module `mod` (inside `inline_depth` inline mods)."""
        if not segs:
            return None
        i = 0
        if segs[0] == "crate":
            cur, i = ROOT, 1
        elif segs[0] in ("super", "self"):
            cur = mod
            while i < len(segs) and segs[i] in ("super", "self"):
                if segs[i] == "super":
                    if inline_depth:
                        inline_depth -= 1
                    else:
                        cur = self.mods[cur].parent if cur in self.mods else None
                        if cur is None:
                            return None
                i += 1
        else:
            first = self.name(mod, segs[0], mod, seen)
            if first is None:
                return None  # another crate, a primitive, a local
            if first[0] == "item":
                return first
            cur, i = first[1], 1
        while i < len(segs):
            r = self.name(cur, segs[i], mod, seen)
            if r is None:
                return ("item", cur)  # a variant, an associated item, a macro: cur's
            if r[0] == "item":
                return r
            cur = r[1]
            i += 1
        return ("module", cur)


# --------------------------------------------------------------------------------------------
# Edges


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    file: str
    line: int
    text: str


def collect_edges(mods: dict[str, Module], res: Resolver) -> list[Edge]:
    edges = []
    for mod in mods.values():
        def add(r, line: int, text: str) -> None:
            if r and r[1] != mod.name:
                edges.append(Edge(mod.name, r[1], mod.file, line, text))

        # use declarations; a module imported by name (`use crate::server;`) makes its edges
        # where its items are named (`server::ListenerTls`), below
        module_aliases: dict[str, str] = {}
        for key, leaf in mod.imports.items():
            r = res.path(mod.name, leaf.path, leaf.inline_depth)
            if r and r[0] == "module":
                module_aliases[key.split(":", 1)[1] if key.startswith("#local") else key] = r[1]
                continue
            add(r, leaf.line, leaf.text)
        in_use = set()
        for a, b in mod.use_spans:
            in_use.update(range(a, b + 1))
        toks = mod.toks
        # paths in code
        local_names = set(mod.defs) | {k for k in mod.imports if not k.startswith("#local")}
        local_names |= local_bindings(toks)
        glob_names: dict[str, tuple[Tok, list[str]]] = {}
        i = 0
        while i < len(toks):
            if i in in_use:
                i += 1
                continue
            t = toks[i]
            prev = toks[i - 1].text if i else ""
            if not is_ident(t.text) or prev in ("::", ".", "$", "'"):
                i += 1
                continue
            segs = [t.text]
            j = i + 1
            while j + 1 < len(toks) and toks[j].text == "::" and is_ident(toks[j + 1].text):
                segs.append(toks[j + 1].text)
                j += 2
            if prev == "in" and i >= 3 and toks[i - 2].text == "(" and toks[i - 3].text == "pub":
                i = j
                continue
            if len(segs) > 1 and (segs[0] in ("crate", "super", "self") or segs[0] in mod.children
                                  or segs[0] in mod.inline_mods):
                add(res.path(mod.name, segs, mod.inline_depth[i]), t.line, "::".join(segs))
            elif len(segs) > 1 and segs[0] in module_aliases:
                add(res.path(module_aliases[segs[0]], ["self"] + segs[1:]), t.line, "::".join(segs))
            elif segs[0] not in KEYWORDS and segs[0] not in local_names and mod.globs:
                nxt = toks[j].text if j < len(toks) else ""
                if not (nxt == ":" or prev in ITEM_KEYWORDS or prev == "let"):
                    glob_names.setdefault(segs[0], (t, segs))
            i = j
        # names brought in by globs
        for name, (t, segs) in glob_names.items():
            for g in mod.globs:
                target = res.path(mod.name, g.path[:-1], g.inline_depth)
                if not target or target[0] != "module":
                    continue
                r = res.name(target[1], name, mod.name)
                if r and r[0] == "module":
                    # a module brought in by the glob is used only as the head of a path
                    r = res.path(r[1], ["self"] + segs[1:]) if len(segs) > 1 else None
                if r:
                    add(r, t.line, f"{'::'.join(segs)} (by {g.text})")
                    break
    return edges


def local_bindings(toks: list[Tok]) -> set[str]:
    """Names the file binds as locals: `let x`, `let (a, b)`, `let Some(x)`, closure and fn
    parameters, fields (`x: T`), `for x in`; a glob's item of the same name is not looked for
    under them."""
    out = set()
    skip_to = -1
    for i, t in enumerate(toks):
        if i <= skip_to:
            continue
        if t.text in ("let", "for"):
            j = i + 1
            if j < len(toks) and toks[j].text in ("(", "["):
                close = matching(toks, j)
                out.update(x.text for x in toks[j:close] if is_ident(x.text) and x.text[0].islower())
            else:
                while j < len(toks) and toks[j].text in ("mut", "ref"):
                    j += 1
                if j < len(toks) and is_ident(toks[j].text):
                    out.add(toks[j].text)
        elif t.text == "|" and i and toks[i - 1].text in ("(", ",", "=", "move", "{", ";", "return", ">"):
            # a closure's parameters, up to the closing `|`
            j = i + 1
            while j < len(toks) and toks[j].text != "|" and j - i < 20:
                if is_ident(toks[j].text) and toks[j].text[0].islower() and toks[j - 1].text != "::" \
                        and (j + 1 >= len(toks) or toks[j + 1].text != "::"):
                    out.add(toks[j].text)
                j += 1
            skip_to = j
        elif is_ident(t.text) and i + 1 < len(toks) and toks[i + 1].text == ":" and t.text[0].islower():
            out.add(t.text)
    return out - KEYWORDS


# --------------------------------------------------------------------------------------------
# Components


def sccs(nodes: list[str], adj: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    out = []
    counter = [0]
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(adj.get(start, ()))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(adj.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def main(argv: list[str]) -> int:
    vertical = show_edges = False
    ignore: list[str] = []
    dirs: list[str] = []
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--vertical":
            vertical = True
        elif a == "--edges":
            show_edges = True
        elif a == "--ignore" and args:
            ignore.append(args.pop(0))
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        elif a.startswith("-"):
            print(f"unknown option {a}", file=sys.stderr)
            return 2
        else:
            dirs.append(a)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if not dirs:
        cdir = os.path.join(repo, "crates")
        dirs = sorted(os.path.join(cdir, d) for d in os.listdir(cdir)
                      if os.path.isdir(os.path.join(cdir, d, "src")))
    found = 0
    errors: list[str] = []
    for d in dirs:
        crate = os.path.basename(os.path.normpath(d))
        src = os.path.join(d, "src")
        roots = [r for r in ("lib.rs", "main.rs") if os.path.isfile(os.path.join(src, r))]
        for root_file in roots:
            label = crate if root_file == "lib.rs" or len(roots) == 1 else f"{crate} (main.rs)"
            mods = load_crate(src, root_file, errors)
            res = Resolver(mods)
            edges = collect_edges(mods, res)

            def full(m: str) -> str:
                return crate if m == ROOT else f"{crate}::{m}"

            def ignored(m: str) -> bool:
                f = full(m)
                return any(f == p or f.startswith(p + "::") for p in ignore)

            kept = [e for e in edges if not ignored(e.src) and not ignored(e.dst)
                    and (vertical or not (is_ancestor(e.src, e.dst) or is_ancestor(e.dst, e.src)))]
            adj: dict[str, set[str]] = {}
            for e in kept:
                adj.setdefault(e.src, set()).add(e.dst)
            rel = lambda p: os.path.relpath(p, repo)  # noqa: E731
            if show_edges:
                print(f"== {label}: {len(set(kept))} edges")
                for e in sorted(set(kept), key=lambda e: (e.src, e.dst, e.line)):
                    print(f"  {full(e.src)} -> {full(e.dst)}   {rel(e.file)}:{e.line}  {e.text}")
            comps = sccs(sorted(mods), adj)
            for comp in comps:
                found += 1
                cs = set(comp)
                print(f"cycle in {label}: {', '.join(full(m) for m in comp)}")
                seen = set()
                for e in sorted(kept, key=lambda e: (e.src, e.dst, e.line)):
                    if e.src in cs and e.dst in cs and (e.src, e.dst, e.line, e.text) not in seen:
                        seen.add((e.src, e.dst, e.line, e.text))
                        print(f"  {full(e.src)} -> {full(e.dst)}   {rel(e.file)}:{e.line}  {e.text}")
    for e in errors:
        print(f"error: {e}", file=sys.stderr)
    if errors:
        return 2
    if not found:
        print("no module cycles" + (" (vertical edges included)" if vertical else ""))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
