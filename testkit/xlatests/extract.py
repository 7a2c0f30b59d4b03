#!/usr/bin/env python3
"""Extracts the HLO modules that XLA's own tests hold as C++ raw strings.

Usage: extract.py XLA_DIR OUT_JSON

Reads `xla/tests/*.cc` and `xla/hlo/evaluator/hlo_evaluator_test.cc` under XLA_DIR (a checkout
of openxla/xla), finds every raw string literal (`R"(...)"`, `R"delim(...)delim"`) whose text
holds `ENTRY`, and writes one record per module: a name (`FILE_STEM_K`, K counting the modules
of that file from 0), its origin (file and line of the literal) and its text. Templates the C++
fills at run time (`$name` substitutions, `%s`/`%d` formats) are listed as skipped with that
reason, so the count of what was left out is visible.
"""
import glob
import json
import os
import re
import sys

SOURCES = ["xla/tests/*.cc", "xla/hlo/evaluator/hlo_evaluator_test.cc"]

RAW = re.compile(r'R"([^()\\ ]{0,16})\(')
# absl::Substitute (`$0`, `$name`) and absl::StrFormat (`%s`, `%d`, ...) placeholders; an HLO
# name sigil (`%sum`, `%d.1`) goes on with a name character, a format does not.
PLACEHOLDER = re.compile(r"\$[A-Za-z0-9_{]|%(?:l{0,2}[sduvfg])(?![A-Za-z0-9_.\-])")


def raw_strings(src):
    """(line, text) of every raw string literal in C++ source text."""
    pos = 0
    while True:
        m = RAW.search(src, pos)
        if not m:
            return
        # Skip a match inside an identifier (e.g. `FOOR"(`): a raw string starts a token.
        if m.start() > 0 and (src[m.start() - 1].isalnum() or src[m.start() - 1] == "_"):
            pos = m.end()
            continue
        end = src.find(")" + m.group(1) + '"', m.end())
        if end < 0:
            return
        yield src.count("\n", 0, m.start()) + 1, src[m.end():end]
        pos = end + len(m.group(1)) + 2


def main():
    xla, out = sys.argv[1], sys.argv[2]
    files = sorted(f for pat in SOURCES for f in glob.glob(os.path.join(xla, pat)))
    modules, skipped = [], []
    for path in files:
        rel = os.path.relpath(path, xla)
        stem = os.path.splitext(os.path.basename(path))[0]
        src = open(path, encoding="utf-8").read()
        k = 0
        for line, text in raw_strings(src):
            if "ENTRY" not in text:
                continue
            name = f"{stem}_{k}"
            k += 1
            origin = {"file": rel, "line": line}
            hole = PLACEHOLDER.search(text)
            if hole:
                skipped.append({"name": name, "origin": origin,
                                "reason": f"template placeholder {hole.group(0)!r}"})
                continue
            modules.append({"name": name, "origin": origin, "text": text.strip() + "\n"})
    json.dump({"modules": modules, "skipped": skipped}, open(out, "w"), indent=1)
    print(f"{len(modules)} modules, {len(skipped)} templates skipped, from {len(files)} files")


if __name__ == "__main__":
    main()
