"""N devices in the PJRT plugin: ``AXLE_DEVICES=4`` gives JAX four ``axle`` devices, on which
``shard_map`` and ``pmap`` programs with collectives run and give XLA CPU's outputs.

A JAX process creates its clients once, so the programs (``devices_cases.py``) run in two
subprocesses, one on ``axle`` with 4 devices and one on XLA CPU with 4 forced host devices, on
the same inputs; integers must match bit for bit, floats within the dtype's tolerance.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "devices_cases.py")

# rtol, atol for float outputs (the reduction order of a collective may differ from XLA's). The
# bf16 psum is compared bit for bit: the cpu pipeline sums bf16 all-reduces in f32 and rounds
# once (collective-upcast), as XLA CPU does.
TOLERANCE = (1e-5, 1e-6)


def run_cases(tmp, platform):
    out = os.path.join(tmp, f"{platform}.npz")
    env = dict(os.environ, JAX_PLATFORMS=platform, PYTHONDONTWRITEBYTECODE="1")
    if platform == "axle":
        env["AXLE_DEVICES"] = "4"
    else:
        env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    r = subprocess.run(
        [sys.executable, CASES, out], env=env, timeout=600, capture_output=True, text=True
    )
    assert r.returncode == 0, f"{platform} run failed:\n{r.stdout}\n{r.stderr}"
    return dict(np.load(out))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("devices"))
    return run_cases(tmp, "axle"), run_cases(tmp, "cpu")


def test_jax_sees_four_axle_devices(runs):
    axle, _ = runs
    assert axle["devices"].tolist() == [[0, 0], [1, 0], [2, 0], [3, 0]]
    assert axle["kinds"].tolist() == ["cpu"] * 4
    # y on device 2, jit(y) on device 2, its copy on device 3, and the copy's values.
    assert axle["placed"].tolist() == [2, 2, 3, 0, 2, 4, 6, 8, 10]


CASE_NAMES = [
    "psum",
    "all_gather",
    "psum_scatter",
    "ppermute",
    "all_to_all",
    "axis_index",
    "pmap_psum",
    "dp_mlp_step",
    "int32",
    "bf16",
    "mesh_2x2",
    "after_refusal",
]


@pytest.mark.parametrize("case", CASE_NAMES)
def test_outputs_match_xla_cpu(runs, case):
    axle, cpu = runs
    for run, platform in ((axle, "axle"), (cpu, "cpu")):
        assert f"error.{case}" not in run, f"{platform}: {run[f'error.{case}']}"
    keys = sorted(k for k in cpu if k.startswith(case + "."))
    assert keys and keys == sorted(k for k in axle if k.startswith(case + "."))
    for k in keys:
        got, want = axle[k], cpu[k]
        assert got.shape == want.shape and got.dtype == want.dtype, k
        if case == "bf16":
            # uint16 bit patterns.
            np.testing.assert_array_equal(got, want, err_msg=k)
        elif np.issubdtype(want.dtype, np.floating):
            rtol, atol = TOLERANCE
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=k)
        else:
            np.testing.assert_array_equal(got, want, err_msg=k)


def test_automatic_partitioning_is_refused_by_name(runs):
    axle, _ = runs
    msg = str(axle["refused.auto"])
    assert "automatic SPMD partitioning" in msg and "sine" in msg, msg
