#!/usr/bin/env bash
# Runs JAX's own test files on one platform and writes one JUnit XML per file.
#
#   bench/jaxtests/run.sh TESTS_DIR OUT_DIR PLATFORM FILE...
#
# TESTS_DIR is JAX's tests/ at tag jax-v0.10.2 (for example
# `git -C JAX_REPO archive jax-v0.10.2 tests | tar -x -C DIR`; ../shared/jaxtests holds five of
# them). PLATFORM is `cpu` (XLA CPU) or `axle`. OUT_DIR/PLATFORM/FILE.xml is read by compare.py.
# JAX_NUM_GENERATED_CASES (default here 3) and PYTHON may be set; PYTHON's default is the venv of
# `make python` (target/python-venv: JAX, pytest, absl-py and the axle wheel);
# PYTEST_K, if set, is passed to pytest as `-k PYTEST_K` (for example "Eigh or Svd").
# With SUBSET=1, only the tests that failed or were skipped in OUT_DIR/axle/FILE.xml run, into
# OUT_DIR/PLATFORM-subset/ (compare.py then counts the rest as passing wherever axle passed).
# A big file runs in parts: SHARD=K/N runs the tests whose node id hashes to K modulo N
# (shard.py); its results go to FILE~K.xml, which compare.py adds up under FILE. IDS names a
# file of pytest node ids to run instead of the whole file (one a line; `failed_ids.py --all`
# lists those of a run, for example one interrupted on the other platform).
# DUT, if set, is JAX's `jax_test_dut` for the run (JAX's harness reads it as the platform under
# test; it is an absl flag, not read from the environment): DUT=cpu runs on axle the tests JAX
# keeps for `cpu` (`jtu.run_on_devices("cpu")`). Its results go to OUT_DIR/PLATFORM-dut-DUT/.
set -u
tests=$1 out=$2 plat=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-$here/../../target/python-venv/bin/python}
dir=$plat
[ -n "${SUBSET:-}" ] && dir=$plat-subset
[ -n "${DUT:-}" ] && dir=$dir-dut-$DUT
pytest=(-m pytest)
[ -n "${DUT:-}" ] && pytest=(-c "import sys, jax, jax._src.test_util, pytest
jax.config.update('jax_test_dut', '$DUT')
sys.exit(pytest.main(sys.argv[1:]))")
mkdir -p "$out/$dir"
for f in "$@"; do
    t0=$(date +%s)
    sel=("$f")
    name=$f${SHARD:+~${SHARD%/*}}
    [ -n "${IDS:-}" ] && mapfile -t sel <"$IDS"
    if [ -n "${SUBSET:-}" ]; then
        mapfile -t sel < <(python3 "$here/failed_ids.py" "$out/axle/$name.xml" --skipped)
        if [ ${#sel[@]} -eq 0 ]; then
            echo '<testsuites></testsuites>' >"$out/$dir/$name.xml"
            echo "$dir $name: no failures to rerun"
            continue
        fi
    fi
    (cd "$tests" && PYTHONPATH=$here${PYTHONPATH:+:$PYTHONPATH} JAXTESTS_SHARD=${SHARD:-} \
        JAX_PLATFORMS=$plat JAX_NUM_GENERATED_CASES=${JAX_NUM_GENERATED_CASES:-3} \
        PYTHONDONTWRITEBYTECODE=1 timeout ${FILE_TIMEOUT:-3600} \
        "$py" "${pytest[@]}" -q -p no:cacheprovider -p shard \
        --junitxml="$out/$dir/$name.xml" ${PYTEST_K:+-k "$PYTEST_K"} "${sel[@]}" >"$out/$dir/$name.log" 2>&1)
    echo "$dir $name rc=$? $(( $(date +%s) - t0 ))s $(tail -1 "$out/$dir/$name.log")"
done
