#!/usr/bin/env bash
# Runs JAX's own test files on one platform and writes one JUnit XML per file.
#
#   bench/jaxtests/run.sh TESTS_DIR OUT_DIR PLATFORM FILE...
#
# TESTS_DIR is JAX's tests/ at tag jax-v0.10.2 (for example
# `git -C JAX_REPO archive jax-v0.10.2 tests | tar -x -C DIR`; ../shared/jaxtests holds five of
# them). PLATFORM is `cpu` (XLA CPU) or `axle`. OUT_DIR/PLATFORM/FILE.xml is read by compare.py.
# JAX_NUM_GENERATED_CASES (default here 3) and PYTHON (default /work/jaxenv/bin/python) may be set;
# PYTEST_K, if set, is passed to pytest as `-k PYTEST_K` (for example "Eigh or Svd").
# With SUBSET=1, only the tests that failed in OUT_DIR/axle/FILE.xml run, into
# OUT_DIR/PLATFORM-subset/ (compare.py then counts the rest as passing wherever axle passed).
set -u
tests=$1 out=$2 plat=$3
shift 3
py=${PYTHON:-/work/jaxenv/bin/python}
dir=$plat
[ -n "${SUBSET:-}" ] && dir=$plat-subset
mkdir -p "$out/$dir"
here=$(cd "$(dirname "$0")" && pwd)
for f in "$@"; do
    t0=$(date +%s)
    sel=("$f")
    if [ -n "${SUBSET:-}" ]; then
        mapfile -t sel < <(python3 "$here/failed_ids.py" "$out/axle/$f.xml")
        if [ ${#sel[@]} -eq 0 ]; then
            echo '<testsuites></testsuites>' >"$out/$dir/$f.xml"
            echo "$dir $f: no failures to rerun"
            continue
        fi
    fi
    (cd "$tests" && JAX_PLATFORMS=$plat JAX_NUM_GENERATED_CASES=${JAX_NUM_GENERATED_CASES:-3} \
        PYTHONDONTWRITEBYTECODE=1 timeout ${FILE_TIMEOUT:-3600} "$py" -m pytest -q -p no:cacheprovider \
        --junitxml="$out/$dir/$f.xml" ${PYTEST_K:+-k "$PYTEST_K"} "${sel[@]}" >"$out/$dir/$f.log" 2>&1)
    echo "$dir $f rc=$? $(( $(date +%s) - t0 ))s $(tail -1 "$out/$dir/$f.log")"
done
