#!/usr/bin/env python3
"""The house's figures, measured from the source alone (no build): methods on `Gateway`,
the lines of the gateway's `lib.rs`, import circles between files of one crate, and the
median / p90 lines of a non-test file. Test code (`#[cfg(test)]` items, the files a
`#[cfg(test)] mod x;` names, `tests/`, `benches/`, `fuzz/`) is left out.

    scripts/house-figures.py            # the figures
    scripts/house-figures.py --circles  # and the files of each circle

A circle is a set of two or more files of one crate that reach each other through their
`use crate::...`/`super::...` imports and paths (a strongly connected component of the
file graph); a `mod x;` declaration is not an import.
"""
import os
import re
import statistics
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))


def strip_tests(text):
    """The text without `#[cfg(test)]` items (a `mod tests { ... }` or one item)."""
    out, i = [], 0
    while True:
        j = text.find("#[cfg(test)]", i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:j])
        k = j + len("#[cfg(test)]")
        semi, brace = text.find(";", k), text.find("{", k)
        if brace < 0 or (0 <= semi < brace):
            i = semi + 1
            continue
        depth, k = 0, brace
        while k < len(text):
            if text[k] == "{":
                depth += 1
            elif text[k] == "}":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        i = k + 1


def crates():
    """(crate name, its src directory) for every crate of the workspace."""
    found = [("fsgate", os.path.join(ROOT, "src"))]
    base = os.path.join(ROOT, "crates")
    for name in sorted(os.listdir(base)):
        found.append((name, os.path.join(base, name, "src")))
    return found


TEST_MOD_RE = re.compile(
    r"#\[cfg\((?:test|all\(test[^\]]*\))\)\]\s*((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;"
)
PATH_ATTR_RE = re.compile(r'#\[path\s*=\s*"([^"]+)"\]')


def test_files(src):
    """The files only tests compile: each named by a `#[cfg(test)] mod x;`, with all
    beneath it."""
    out = set()
    for dirpath, dirs, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(dirpath, f)
            stem = f[:-3]
            # A file's own modules live beside it (lib.rs, mod.rs) or in its directory.
            base = dirpath if stem in ("lib", "main", "mod") else os.path.join(dirpath, stem)
            for attrs, name in TEST_MOD_RE.findall(open(path, encoding="utf-8").read()):
                named = PATH_ATTR_RE.search(attrs)
                if named:
                    out.add(os.path.normpath(os.path.join(dirpath, named.group(1))))
                    continue
                out.add(os.path.join(base, name + ".rs"))
                out.add(os.path.join(base, name))
    return out


def sources(src):
    skip = test_files(src)
    for dirpath, dirs, files in os.walk(src):
        dirs[:] = [
            d for d in dirs if d not in ("tests", "bin") and os.path.join(dirpath, d) not in skip
        ]
        for f in files:
            path = os.path.join(dirpath, f)
            if f.endswith(".rs") and path not in skip:
                yield path


def module_of(src, path):
    """`a::b` for src/a/b.rs or src/a/b/mod.rs; "" for lib.rs/main.rs."""
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] == "mod" or (len(rel) == 1 and rel[0] in ("lib", "main")):
        rel = rel[:-1]
    return rel


def files_by_module(src):
    return {tuple(module_of(src, p)): p for p in sources(src)}


PATH_RE = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
USE_GROUP_RE = re.compile(r"\buse\s+(crate|super|self)::([^;]*);", re.S)


def referenced(module, text):
    """Module paths (lists of names) this file's code names."""
    refs = []
    own = list(module)
    # a file `a/b.rs` is module a::b; its `super` is a, `self` is a::b.
    def anchor(word):
        if word == "crate":
            return []
        if word == "self":
            return list(own)
        return own[:-1]
    for m in USE_GROUP_RE.finditer(text):
        head = anchor(m.group(1))
        body = m.group(2)
        for part in expand_group(body):
            refs.append(head + part)
    for m in PATH_RE.finditer(text):
        refs.append(anchor(m.group(1)) + m.group(2).split("::")[1:])
    # A module's own children are named without `self::` (`catalog::Catalog`, `use
    # conn::serve`): a path that starts with a child this file declares.
    for child in re.findall(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+([A-Za-z_][A-Za-z0-9_]*)\s*;", text, re.M):
        pat = r"(?<![:\w])" + child + r"((?:::[A-Za-z_][A-Za-z0-9_]*)*)::"
        for m in re.finditer(pat, text):
            refs.append(own + [child] + [n for n in m.group(1).split("::") if n])
        for m in re.finditer(r"\buse\s+" + child + r"::([^;]*);", text, re.S):
            for part in expand_group(m.group(1)):
                refs.append(own + [child] + part)
    return refs


def expand_group(body):
    """`a::{b, c::d}` -> [[a,b],[a,c,d]] (names only; `self` inside a group dropped)."""
    body = re.sub(r"\s+", "", body)
    out = []
    def walk(prefix, s):
        if "{" not in s:
            for piece in s.split(","):
                piece = piece.split("as")[0] if "as" in piece and False else piece
                names = [n for n in piece.split("::") if n and n != "self" and n != "*"]
                out.append(prefix + names)
            return
        i = s.index("{")
        pre = [n for n in s[:i].split("::") if n]
        inner, depth, start, parts = s[i + 1:], 0, 0, []
        for k, ch in enumerate(inner):
            if ch == "{":
                depth += 1
            elif ch == "}":
                if depth == 0:
                    parts.append(inner[start:k])
                    break
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(inner[start:k])
                start = k + 1
        for p in parts:
            if p:
                walk(prefix + pre, p)
    walk([], body)
    return out


def target_file(modules, path):
    """The file holding the longest prefix of `path` that is a module."""
    for n in range(len(path), -1, -1):
        key = tuple(path[:n])
        if key in modules:
            return modules[key]
    return None


def graph(src):
    modules = files_by_module(src)
    edges = {p: set() for p in modules.values()}
    for mod, path in modules.items():
        text = strip_tests(open(path, encoding="utf-8").read())
        text = re.sub(r"//[^\n]*", "", text)
        text = re.sub(r"pub\(in [^)]*\)", "pub", text)  # a visibility, not an import
        for ref in referenced(mod, text):
            t = target_file(modules, ref)
            if t and t != path:
                edges[path].add(t)
    return edges


def circles(edges):
    """Strongly connected components of two or more files (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(edges[nxt]))))
                    advanced = True
                    break
                if nxt in on:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def gateway_methods():
    count = 0
    src = os.path.join(ROOT, "crates", "fsgate-gateway", "src")
    for path in sources(src):
        text = strip_tests(open(path, encoding="utf-8").read())
        for m in re.finditer(r"\nimpl(?:<[^>]*>)?\s+Gateway\s*\{", text):
            depth, k = 0, m.end() - 1
            start = k
            while k < len(text):
                if text[k] == "{":
                    depth += 1
                elif text[k] == "}":
                    depth -= 1
                    if depth == 0:
                        break
                k += 1
            count += len(re.findall(r"\n    (?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?fn\s", text[start:k]))
    return count


def main():
    show = "--circles" in sys.argv
    lines, all_circles = [], []
    for name, src in crates():
        for path in sources(src):
            text = strip_tests(open(path, encoding="utf-8").read())
            lines.append(text.count("\n"))
        for comp in circles(graph(src)):
            all_circles.append((name, comp))
    lib = os.path.join(ROOT, "crates", "fsgate-gateway", "src", "lib.rs")
    lib_lines = strip_tests(open(lib, encoding="utf-8").read()).count("\n")
    lines.sort()
    p90 = lines[min(len(lines) - 1, int(round(0.9 * (len(lines) - 1))))]
    print(f"methods on Gateway: {gateway_methods()}")
    print(f"lines of crates/fsgate-gateway/src/lib.rs (no tests): {lib_lines}")
    print(f"import circles between files: {len(all_circles)}")
    print(f"non-test files: {len(lines)}; median / p90 lines: {statistics.median(lines):.0f} / {p90}")
    if show:
        for name, comp in all_circles:
            rel = [os.path.relpath(p, ROOT) for p in comp]
            print(f"  {name}: " + " <-> ".join(rel))


if __name__ == "__main__":
    main()
