"""JAX on Axle through the PJRT plugin: run with ``JAX_PLATFORMS=axle`` (``make pytest`` does).

Every jitted function here is compiled and run by Axle (the plugin in the ``axle`` wheel) and
checked against NumPy, or against JAX's own CPU results computed in a subprocess where NumPy
has no direct counterpart. Bad programs must raise Python exceptions and leave the interpreter
working.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

import jax
import jax.numpy as jnp
from jax import lax

if jax.default_backend() != "axle":  # pragma: no cover - a misconfigured run must not pass
    raise RuntimeError(
        f"these tests need JAX_PLATFORMS=axle; the default backend is {jax.default_backend()}"
    )

RNG = np.random.default_rng(0)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def close(got, want, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=atol)


def test_the_device_is_axle():
    d = jax.devices()
    assert len(d) == 1 and d[0].platform == "axle" and d[0].device_kind == "cpu"
    x = jnp.ones(3)
    assert x.devices() == {d[0]}


def test_dense_layer():
    x, w, b = rand(8, 64), rand(64, 64), rand(64)
    f = jax.jit(lambda x, w, b: jnp.tanh(x @ w + b))
    close(f(x, w, b), np.tanh(x @ w + b), rtol=1e-4, atol=1e-5)


def test_grad_of_a_loss():
    x, w = rand(16, 8), rand(8, 4)

    def loss(w):
        return jnp.mean((x @ w) ** 2)

    g = jax.jit(jax.grad(loss))(w)
    close(g, 2 * x.T @ (x @ w) / (16 * 4), rtol=1e-4, atol=1e-5)


def test_control_flow():
    def f(n, x):
        return lax.fori_loop(0, n, lambda i, c: c * 2 + i, x)

    close(jax.jit(f)(5, jnp.float32(1.0)), 1 * 32 + (0 * 16 + 1 * 8 + 2 * 4 + 3 * 2 + 4))

    def g(p, x):
        return lax.cond(p, lambda v: v + 1, lambda v: v - 1, x)

    assert float(jax.jit(g)(True, 1.0)) == 2.0
    assert float(jax.jit(g)(False, 1.0)) == 0.0

    def cumsum(xs):
        return lax.scan(lambda c, x: (c + x, c + x), 0.0, xs)[1]

    xs = rand(10)
    close(jax.jit(cumsum)(xs), np.cumsum(xs), rtol=1e-5)


@pytest.mark.parametrize(
    "dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8, np.int8, np.float16, np.bool_]
)
def test_round_trip_and_arithmetic_by_dtype(dtype):
    jax.config.update("jax_enable_x64", True)
    try:
        if dtype == np.bool_:
            x = RNG.integers(0, 2, (5, 3)).astype(bool)
            got = jax.jit(lambda a: jnp.logical_not(a))(x)
            np.testing.assert_array_equal(np.asarray(got), ~x)
            return
        x = (RNG.standard_normal((5, 3)) * 10).astype(dtype)
        y = jax.device_put(x)
        np.testing.assert_array_equal(np.asarray(y), x)
        got = jax.jit(lambda a: a * 2 + 1)(x)
        np.testing.assert_array_equal(np.asarray(got), (x * 2 + 1).astype(dtype))
    finally:
        jax.config.update("jax_enable_x64", False)


def test_bf16_and_complex():
    x = rand(4, 4).astype(jnp.bfloat16)
    got = jax.jit(lambda a: a * a)(x)
    assert got.dtype == jnp.bfloat16
    close(np.asarray(got, np.float32), np.asarray(x, np.float32) ** 2, rtol=1e-2)
    z = (rand(6) + 1j * rand(6)).astype(np.complex64)
    close(jax.jit(lambda a: jnp.exp(a) * jnp.conj(a))(z), np.exp(z) * np.conj(z), rtol=1e-5)


@pytest.mark.parametrize(
    "preset",
    ["BF16_BF16_F32_X3", "BF16_BF16_F32_X6", "BF16_BF16_F32_X9", "TF32_TF32_F32",
     "TF32_TF32_F32_X3", "F32_F32_F32"],
)
def test_f32_dot_algorithms(preset):
    # Each reaches Axle as its number in XLA's enum (X9 is 13, after F64_F64_F64); Axle computes
    # every one at least as precisely as it asks (f32 operands, f32 accumulation).
    x, w = rand(3, 4), rand(4, 3)
    got = jax.jit(lambda a, b: lax.dot(a, b, precision=getattr(lax.DotAlgorithmPreset, preset)))(
        x, w
    )
    close(got, x.astype(np.float64) @ w.astype(np.float64), rtol=1e-5, atol=1e-5)


def test_non_contiguous_host_arrays():
    x = rand(6, 8)
    for view in (x.T, x[::2, 1::3], x[::-1]):
        close(jax.jit(lambda a: a + 0)(view), view)


def test_sort_reduce_gather_and_random():
    x = rand(100)
    close(jax.jit(jnp.sort)(x), np.sort(x))
    assert int(jax.jit(jnp.argmax)(x)) == int(np.argmax(x))
    idx = np.array([3, 1, 4, 1, 5], np.int32)
    close(jax.jit(lambda a, i: a[i])(x, idx), x[idx])
    # Threefry: unsigned 32-bit arithmetic, shifts and bitcasts; the same bits as on XLA.
    bits = jax.jit(lambda k: jax.random.bits(k, (8,)))(jax.random.key(0))
    assert bits.dtype == jnp.uint32 and len(set(np.asarray(bits).tolist())) == 8


def test_jax_cpu_agrees_on_random_and_special_functions():
    """The same jitted functions on XLA CPU (a subprocess) and on Axle give the same numbers."""
    code = (
        "import jax, jax.numpy as jnp, numpy as np\n"
        "k = jax.random.key(42)\n"
        "u = jax.random.uniform(k, (64,))\n"
        "n = jax.random.normal(jax.random.fold_in(k, 1), (64,))\n"
        "s = jax.scipy.special.erf(n) + jax.nn.gelu(n) + jax.nn.softmax(n)\n"
        "np.save(OUT, np.stack([np.asarray(u), np.asarray(n), np.asarray(s)]))\n"
    )
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cpu.npy")
        env = dict(os.environ, JAX_PLATFORMS="cpu")
        subprocess.run(
            [sys.executable, "-c", f"OUT={out!r}\n" + code], check=True, env=env, timeout=300
        )
        want = np.load(out)
    k = jax.random.key(42)
    u = jax.random.uniform(k, (64,))
    n = jax.random.normal(jax.random.fold_in(k, 1), (64,))
    s = jax.scipy.special.erf(n) + jax.nn.gelu(n) + jax.nn.softmax(n)
    np.testing.assert_array_equal(np.asarray(u), want[0])
    close(n, want[1], rtol=1e-6, atol=1e-6)
    close(s, want[2], rtol=1e-5, atol=1e-6)


def test_compiler_options_reach_axle_and_unknown_ones_are_errors():
    x = rand(16)
    f = jax.jit(lambda a: jnp.sin(a) * 2, compiler_options={"axle_pipeline": "none"})
    close(f(x), np.sin(x) * 2, rtol=1e-5)
    g = jax.jit(lambda a: jnp.sin(a) * 3, compiler_options={"axle_threads": 1, "axle_opt_level": 1})
    close(g(x), np.sin(x) * 3, rtol=1e-5)
    with pytest.raises(Exception, match="xla_no_such_option"):
        jax.jit(lambda a: a + 1, compiler_options={"xla_no_such_option": True})(x)


def test_cost_and_memory_analysis():
    x, w = rand(32, 64), rand(64, 16)
    c = jax.jit(lambda x, w: x @ w).lower(x, w).compile()
    cost = c.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    assert cost["flops"] == pytest.approx(2 * 32 * 64 * 16, rel=0.01)
    mem = c.memory_analysis()
    assert mem.argument_size_in_bytes == (32 * 64 + 64 * 16) * 4
    assert mem.output_size_in_bytes == 32 * 16 * 4


def test_serialized_executables_load_and_run():
    from jax.experimental.serialize_executable import deserialize_and_load, serialize

    x = rand(8)
    c = jax.jit(lambda a: jnp.cos(a) + 1).lower(x).compile()
    payload, in_tree, out_tree = serialize(c)
    loaded = deserialize_and_load(payload, in_tree, out_tree)
    close(loaded(x), np.cos(x) + 1, rtol=1e-6)


def _client_compile(program):
    from jax._src.lib import _jax

    dev = jax.devices()[0]
    return dev.client.compile_and_load(program, _jax.DeviceList((dev,)))


def _mlir(body, args="%a: tensor<4xf32>", result="tensor<4xf32>"):
    return (
        "module @bad {\n"
        f"  func.func public @main({args}) -> ({result}) {{\n{body}\n  }}\n}}\n"
    )


BAD_PROGRAMS = [
    b"",
    b"\x00\x01\x02 not a program",
    b"ML\xefR truncated bytecode",
    "module { this is not mlir }",
    _mlir('    %0 = stablehlo.custom_call @no_such_target(%a) : (tensor<4xf32>) -> tensor<4xf32>\n'
          '    return %0 : tensor<4xf32>'),
    _mlir('    %0 = "stablehlo.all_reduce"(%a) ({\n'
          '    ^bb0(%x: tensor<f32>, %y: tensor<f32>):\n'
          '      %s = stablehlo.add %x, %y : tensor<f32>\n'
          '      stablehlo.return %s : tensor<f32>\n'
          '    }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, channel_handle = '
          '#stablehlo.channel_handle<handle = 1, type = 0>} : (tensor<4xf32>) -> tensor<4xf32>\n'
          '    return %0 : tensor<4xf32>'),
    _mlir('    %0 = stablehlo.add %a, %a : tensor<4xf32>\n    return %0 : tensor<4xi32>',
          result="tensor<4xi32>"),
    _mlir('    %0 = stablehlo.reshape %a : (tensor<4xf32>) -> tensor<5xf32>\n'
          '    return %0 : tensor<5xf32>', result="tensor<5xf32>"),
    _mlir('    %t = stablehlo.create_token : !stablehlo.token\n'
          '    %0:2 = "stablehlo.infeed"(%t) {infeed_config = ""} : (!stablehlo.token) -> '
          '(tensor<4xf32>, !stablehlo.token)\n    return %0#0 : tensor<4xf32>'),
    _mlir('    %0 = stablehlo.custom_call @lapack_sgeqrf_ffi(%a) : (tensor<4xf32>) -> '
          'tensor<4xf32>\n    return %0 : tensor<4xf32>'),
]


def test_bad_programs_raise_and_the_interpreter_goes_on():
    for k, program in enumerate(BAD_PROGRAMS):
        with pytest.raises(Exception) as info:
            _client_compile(program)
        assert str(info.value), f"bad program {k} raised an empty error"
    # The custom-call names its target.
    with pytest.raises(Exception, match="no_such_target"):
        _client_compile(BAD_PROGRAMS[4])
    # And a good one still compiles and runs.
    x = rand(4)
    close(jax.jit(lambda a: a * 3)(x), x * 3)


def test_dispatch_of_many_calls():
    f = jax.jit(lambda x, w: jnp.tanh(x @ w))
    x, w = rand(8, 64), rand(64, 64)
    want = np.tanh(x @ w)
    for _ in range(200):
        out = f(x, w)
    close(out, want, rtol=1e-4, atol=1e-5)


def test_donated_arguments_keep_values_correct():
    f = jax.jit(lambda a: a + 1, donate_argnums=0)
    x = jnp.arange(6.0)
    y = f(x)
    close(y, np.arange(6.0) + 1)


def test_donation_reuses_the_donated_array():
    import warnings

    x0 = rand(1024)
    u = rand(16)

    def step(x, u):
        return lax.dynamic_update_slice(x, u * 2.0, (100,)), u + 1.0

    f = jax.jit(step, donate_argnums=0)
    x = jnp.asarray(x0)
    where = x.unsafe_buffer_pointer()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Some donated buffers were not usable" fails the test
        y, v = f(x, u)
    assert y.unsafe_buffer_pointer() == where  # the output took the donated memory
    want = x0.copy()
    want[100:116] = u * 2.0
    close(y, want)
    close(v, u + 1.0)
    assert x.is_deleted()
    with pytest.raises(RuntimeError):
        np.asarray(x)
    # A donated array held elsewhere (a NumPy view) is copied, never written under the view.
    x = jnp.asarray(x0)
    view = np.asarray(x)
    y, _ = f(x, u)
    close(y, want)
    close(view, x0)
    # A non-donated call leaves its argument alone.
    g = jax.jit(step)
    x = jnp.asarray(x0)
    g(x, u)
    assert not x.is_deleted()
    close(x, x0)


def test_memory_stats_count_live_buffers():
    dev = jax.devices()[0]
    before = dev.memory_stats()
    assert before["bytes_in_use"] >= 0
    x = jnp.asarray(np.ones((256, 1024), np.float32))  # 1 MiB
    x.block_until_ready()
    held = dev.memory_stats()
    assert held["bytes_in_use"] - before["bytes_in_use"] >= 1 << 20
    assert held["peak_bytes_in_use"] >= held["bytes_in_use"]
    assert held["largest_alloc_size"] >= 1 << 20
    x.delete()
    after = dev.memory_stats()
    assert after["bytes_in_use"] <= held["bytes_in_use"] - (1 << 20)
    assert after["peak_bytes_in_use"] >= held["bytes_in_use"]


def test_linear_algebra_lowers_as_for_xla_cpu():
    # qr and lu reach Axle as LAPACK custom-calls (geqrf/orgqr, getrf), as JAX sends XLA CPU,
    # not as TPU custom-calls ("Qr", "LuDecomposition") that no CPU compiler expands.
    a = rand(6, 4)
    q, r = jax.jit(jnp.linalg.qr)(a)
    close(q @ r, a, rtol=1e-4, atol=1e-5)
    close(q.T @ q, np.eye(4, dtype=np.float32), rtol=1e-4, atol=1e-5)
    s = a.T @ a + 4 * np.eye(4, dtype=np.float32)
    lu, piv = jax.jit(jax.scipy.linalg.lu_factor)(s)
    x = jax.scipy.linalg.lu_solve((lu, piv), a[:4])
    close(s @ x, a[:4], rtol=1e-4, atol=1e-4)
    text = jax.jit(jnp.linalg.qr).lower(a).compile().as_text()
    assert "lapack_sgeqrf_ffi" in text or "geqrf" in text.lower()


def test_layouts_and_optimized_module_are_the_same_each_time():
    # JAX reads parameter and output layouts from the optimized module (the plugin has no
    # layouts extension) and asks for it several times per compile; the plugin makes it once.
    f = jax.jit(lambda x, y: (jnp.tanh(x @ y), x.sum()))
    c = f.lower(rand(8, 4), rand(4, 3)).compile()
    ins = jax.tree.leaves(c.input_formats)
    outs = jax.tree.leaves(c.output_formats)
    assert [i.layout.major_to_minor for i in ins] == [(0, 1), (0, 1)]
    assert [o.layout.major_to_minor for o in outs] == [(0, 1), ()]
    text = c.as_text()
    assert text == c.as_text() and "tanh" in text
