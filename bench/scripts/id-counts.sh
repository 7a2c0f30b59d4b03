#!/usr/bin/env bash
# Counts what issue 33 tracks about typed ids and graph walks, in the Rust sources of the
# repository given (default: this one), outside `target/`:
# - `.index()]`: vectors subscripted by an id's index, outside the `ir` crate;
# - `HashMap`/`HashSet` keyed by an id type (or a tuple starting with one);
# - hand-written ordered walks (files and lines): explicit depth-first stacks of `(node, next
#   edge)` or `(node, visited)` pairs and per-node `u8` state maps, outside `ir/src/traversal.rs`
#   (a heuristic: reachability walks with a plain stack and a seen-set are not counted).
# Usage: bench/scripts/id-counts.sh [REPO]
set -euo pipefail
cd "${1:-$(dirname "$0")/../..}"
ids='InstId|CompId|ShapeId|LayoutId|BufferId|ValueId|BufId'
src() { grep -rnE --include=*.rs "$@" . --exclude-dir=target --exclude-dir=.git || true; }
echo "index-subscripts-outside-ir $(src '\.index\(\)\]' | grep -v '^\./ir/' | wc -l)"
echo "hash-keyed-by-ids $(src "Hash(Map|Set)<\(?($ids)\b" | wc -l)"
walks=$(src -e 'stack(: Vec<\(\w+, (usize|u32|bool)\)>| = vec!\[\(\w+, (0|false)\)\])' \
    -e 'state(: HashMap<\w+, u8>| = vec!\[0u8)' -e 'Vec<\(\w+, Cow<' |
    grep -v '^\./ir/src/traversal\.rs' | grep -v '/tests/' | cut -d: -f1 | sort | uniq -c)
echo "hand-written-walk-files $(echo "$walks" | grep -c . || true)"
echo "$walks"
