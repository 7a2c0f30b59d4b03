#!/usr/bin/env python3
"""Counts what issue 33 tracks about errors, unsafe and function length, in the Rust sources of
the repository given (default: this one), outside `target/`, `.git` and `fuzz/cargo-fuzz`:

- `pub-result-string`: public functions (`pub`, `pub(crate)`, `pub(super)`) whose signature
  (from `fn` to the body's `{` or the `;`) holds `Result<..., String>`, per crate folder;
- `unsafe-without-safety`: `unsafe {` blocks (and `unsafe impl`) with no `SAFETY:` comment on
  the same line, within the 4 lines above, or in the comment block directly above;
- `fns-over-150`: functions whose body (from the `fn` line to its closing brace) spans more
  than 150 lines, with the longest listed.

Usage: bench/scripts/health-counts.py [REPO] [--list]
"""
import os
import re
import sys

root = next((a for a in sys.argv[1:] if not a.startswith("--")), os.path.join(os.path.dirname(__file__), "..", ".."))
listing = "--list" in sys.argv


def files():
    for d, subdirs, names in os.walk(root):
        subdirs[:] = [s for s in subdirs if s not in ("target", ".git") and not (s == "cargo-fuzz" and d.endswith("fuzz"))]
        for n in names:
            if n.endswith(".rs"):
                yield os.path.join(d, n)


def strip(text):
    """Blanks comments, strings and char literals (keeping newlines), so braces can be counted."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'r(#*)"', text[i:])
            end = '"' + m.group(1)
            j = text.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'])'", text[i:])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


pub_rs = {}
unsafe_total = unsafe_bad = 0
unsafe_list = []
long_fns = []
for path in sorted(files()):
    rel = os.path.relpath(path, root)
    raw = open(path, encoding="utf-8", errors="replace").read()
    lines = raw.split("\n")
    code = strip(raw)
    clines = code.split("\n")
    crate = rel.split(os.sep)[0] if os.sep in rel else "."
    # unsafe blocks / impls
    for ln, cl in enumerate(clines):
        for m in re.finditer(r"\bunsafe\s*(\{|impl\b)", cl):
            unsafe_total += 1
            window = lines[max(0, ln - 4): ln + 1]
            # The comment block (and attributes) directly above, as clippy's
            # `undocumented_unsafe_blocks` reads it.
            k = ln - 1
            while k >= 0 and re.match(r"\s*(//|#\[)", lines[k]):
                window.append(lines[k])
                k -= 1
            if not any("SAFETY:" in w for w in window):
                unsafe_bad += 1
                unsafe_list.append(f"{rel}:{ln + 1}")
    # functions: signature and body length
    for m in re.finditer(r"(?m)^[ \t]*((?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?(?:extern\s+\"[^\"]*\"\s+)?)fn\s+(\w+)", code):
        start = m.start()
        # find end of signature: first '{' or ';' at depth 0 of () and <>
        j, depth = m.end(), 0
        while j < len(code):
            ch = code[j]
            if ch in "([":
                depth += 1
            elif ch in ")]":
                depth -= 1
            elif depth == 0 and ch in "{;":
                break
            j += 1
        sig_code = code[start:j]
        sig_raw = raw[start:j]
        if m.group(1).strip().startswith("pub") and re.search(r"Result<[\s\S]*,\s*String\s*>", sig_raw):
            pub_rs[crate] = pub_rs.get(crate, 0) + 1
            if listing:
                print("pub-result-string", f"{rel}:{code.count(chr(10), 0, start) + 1}", m.group(2))
        if j >= len(code) or code[j] == ";":
            continue
        d, k = 0, j
        while k < len(code):
            if code[k] == "{":
                d += 1
            elif code[k] == "}":
                d -= 1
                if d == 0:
                    break
            k += 1
        first = code.count("\n", 0, start) + 1
        last = code.count("\n", 0, k) + 1
        if last - first + 1 > 150:
            long_fns.append((last - first + 1, f"{rel}:{first}", m.group(2)))

print("pub-result-string", sum(pub_rs.values()), " ".join(f"{k}={v}" for k, v in sorted(pub_rs.items())))
print("unsafe-total", unsafe_total)
print("unsafe-without-safety", unsafe_bad)
if listing:
    for u in unsafe_list:
        print("  unsafe", u)
long_fns.sort(reverse=True)
print("fns-over-150", len(long_fns))
for n, where, name in long_fns[: (len(long_fns) if listing else 10)]:
    print(f"  {n:4} {where} {name}")
