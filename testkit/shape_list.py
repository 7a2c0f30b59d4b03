"""Splitting a comma-separated list in HLO text (shapes of an `entry_computation_layout`,
operands) at its top level, for the Python tools that read HLO headers
(testkit/xlatests/gen.py, bench/xla/side_by_side.py).

Invariant: commas inside (), [] or {} never split; the parts are stripped and an empty tail
is dropped.
"""


def split_top(s):
    """Splits `s` at the commas outside brackets."""
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out
