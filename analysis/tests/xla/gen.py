"""Differential reference cases for the evaluator: small HLO modules on edge-case inputs, run
through XLA CPU (jax/jaxlib 0.10.2, the corpus's version). Writes NAME.hlo, NAME.inK.npy,
NAME.outK.npy and manifest.json next to this file.

    python gen.py        (needs the jax venv: python3 -m venv .venv-jax &&
                          .venv-jax/bin/pip install jax==0.10.2 jaxlib==0.10.2 numpy)

Each case covers semantics the corpus does not pin down: IEEE maximum/minimum on signed zeros,
integer power and division edge cases, shifts, saturating converts and double rounding,
f16/bf16 arithmetic, reduce-precision, total-order compares, bit counts, rng-bit-generator
(ThreeFry and Philox, several shapes and types), FFT, Cholesky, triangular solve, convolution
with batch groups, gather and scatter out of bounds, windows with dilation, sort, top-k,
conditionals and complex arithmetic, and flush-to-zero of complex components, f8e8m0fnu and
remainder.
"""
import json, os, re, sys
import numpy as np
import ml_dtypes
import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(os.environ.get("AXLE_SHARED") or os.path.join(ROOT, "..", "shared"),
                                "baseline"))
from baseline import compile_hlo_text  # noqa: E402
BF16 = np.dtype(ml_dtypes.bfloat16)
CASES = []


def run_xla(text, ins):
    exe = compile_hlo_text(text)
    dev = jax.devices("cpu")[0]
    return [np.asarray(o) for o in exe.execute([jax.device_put(x, dev) for x in ins])]


def dname(x):
    if x.dtype == BF16:
        return "bf16"
    return {"float16": "f16", "float32": "f32", "float64": "f64", "int8": "s8", "int16": "s16",
            "int32": "s32", "int64": "s64", "uint8": "u8", "uint16": "u16", "uint32": "u32",
            "uint64": "u64", "bool": "pred", "complex64": "c64", "complex128": "c128"}[x.dtype.name]


def save(x, path):
    np.save(path, x.view(np.uint16) if x.dtype == BF16 else x)


def case(name, text, ins, tol="exact", view=None, listed=True):
    """One case; `view` reinterprets outputs as the declared types where XLA returns the
    bits with another dtype (rng-bit-generator returns unsigned bits for every type). A case
    not `listed` is written but left out of the manifest (so out of the evaluator's and the
    raw cpu backend's harnesses); a test of its own reads it."""
    if not text.startswith("HloModule"):
        text = "HloModule " + name + "\n\n" + text.strip() + "\n"
    outs = run_xla(text, ins)
    if view:
        outs = [o.view(v) if v is not None else o for o, v in zip(outs, view)]
    with open(os.path.join(HERE, name + ".hlo"), "w") as f:
        f.write(text)
    entry = {"name": name, "hlo": name + ".hlo", "inputs": [], "outputs": []}
    for k, x in enumerate(ins):
        save(x, os.path.join(HERE, f"{name}.in{k}.npy"))
        entry["inputs"].append({"file": f"{name}.in{k}.npy", "dtype": dname(x), "shape": list(x.shape)})
    for k, x in enumerate(outs):
        save(x, os.path.join(HERE, f"{name}.out{k}.npy"))
        t = tol[k] if isinstance(tol, list) else tol
        entry["outputs"].append({"file": f"{name}.out{k}.npy", "dtype": dname(x), "shape": list(x.shape), "tolerance": t})
    if listed:
        CASES.append(entry)


def ew(name, ty, n_in, exprs, ins, tol="exact"):
    """Elementwise ops: exprs are (result type, op text using p0, p1, ...)."""
    n = ins[0].shape[0]
    lines = [f"  p{i} = {ty}[{n}] parameter({i})" for i in range(n_in)]
    names = []
    for i, (rt, e) in enumerate(exprs):
        lines.append(f"  r{i} = {rt}[{n}] {e}")
        names.append(f"r{i}")
    shapes = ", ".join(f"{rt}[{n}]" for rt, _ in exprs)
    lines.append(f"  ROOT t = ({shapes}) tuple({', '.join(names)})")
    case(name, "ENTRY main {\n" + "\n".join(lines) + "\n}", ins, tol)


nan, inf = np.nan, np.inf
rel = {"rtol": 1e-6, "atol": 1e-7}

# --- maximum/minimum/clamp on signed zeros and NaN, per float type.
for ty, dt in [("f32", np.float32), ("f64", np.float64), ("f16", np.float16), ("bf16", BF16)]:
    a = np.array([-0.0, 0.0, -0.0, nan, 1.0, -inf, 2.5, nan], dt)
    b = np.array([0.0, -0.0, -0.0, 1.0, nan, 3.0, 2.5, nan], dt)
    ew(f"minmax_{ty}", ty, 2, [(ty, "maximum(p0, p1)"), (ty, "minimum(p0, p1)")], [a, b])
x = np.array([-0.0, 0.0, 5.0, -5.0, nan, 0.5], np.float32)
case("clamp_zeros_nan", """
ENTRY main {
  lo = f32[6] parameter(0)
  x = f32[6] parameter(1)
  hi = f32[6] parameter(2)
  ROOT c = f32[6] clamp(lo, x, hi)
}""", [np.array([0.0, -0.0, -1.0, -1.0, 0.0, nan], np.float32), x,
       np.array([1.0, 1.0, 1.0, 1.0, 1.0, 1.0], np.float32)])

# --- integer division, remainder, power, shifts, bit counts.
for ty, dt in [("s8", np.int8), ("s16", np.int16), ("s32", np.int32), ("s64", np.int64),
               ("u8", np.uint8), ("u32", np.uint32), ("u64", np.uint64)]:
    info = np.iinfo(dt)
    a = np.array([7, info.min, info.max, 0, 5, info.min, 3, 100, 2], dt)
    if info.min < 0:
        b = np.array([0, -1, -1, 0, -2, 1, 2, -7, 65], dt)
    else:
        b = np.array([0, 1, 3, 0, 2, 1, 2, 7, 65], dt)
    ew(f"intdiv_{ty}", ty, 2, [(ty, "divide(p0, p1)"), (ty, "remainder(p0, p1)"),
                                (ty, "power(p0, p1)"), (ty, "maximum(p0, p1)"),
                                (ty, "add(p0, p1)"), (ty, "multiply(p0, p1)")], [a, b])
    bits = info.bits
    amounts = np.array([0, 1, bits - 1, bits, bits + 1, 2 * bits, 3, min(100, info.max), 7], dt)
    if info.min < 0:
        amounts[-1] = -1
    xs = np.array([1, -1 if info.min < 0 else info.max, info.min, info.max, 5, 3, info.min, 9, 12], dt)
    ew(f"shift_{ty}", ty, 2, [(ty, "shift-left(p0, p1)"), (ty, "shift-right-arithmetic(p0, p1)"),
                               (ty, "shift-right-logical(p0, p1)")], [xs, amounts])
    signed_ops = [(ty, "negate(p0)"), (ty, "abs(p0)"), (ty, "sign(p0)")] if info.min < 0 else []
    ew(f"bits_{ty}", ty, 1, [(ty, "count-leading-zeros(p0)"), (ty, "popcnt(p0)"), (ty, "not(p0)")]
       + signed_ops, [xs])

ew("power_s32_edges", "s32", 2, [("s32", "power(p0, p1)")],
   [np.array([3, 2, -2, -1, -1, 5, 7, 0, 3, 3, 1, -1], np.int32),
    np.array([-5, -1, -3, -5, -6, -64, -65, 0, 64, 65, -7, 63], np.int32)])
ew("power_u8_edges", "u8", 2, [("u8", "power(p0, p1)")],
   [np.array([3, 2, 255, 255, 1, 5, 7, 0, 3, 3], np.uint8),
    np.array([251, 255, 253, 251, 200, 128, 129, 0, 64, 127], np.uint8)])

# --- subnormals: XLA CPU runs float arithmetic with DAZ and FTZ.
sa = np.array([1e-45, -1e-45, 1e-40, 3e-5, 1e-38, 3e-39], np.float32)
sb = np.array([1e-45, 0.0, -100.0, -90.0, 0.5, 0.0], np.float32)
ew("subnormal_f32", "f32", 2, [("f32", "add(p0, p1)"), ("f32", "multiply(p0, p1)"), ("f32", "maximum(p0, p1)"),
                               ("f32", "minimum(p0, p1)"), ("f32", "negate(p0)"), ("f32", "abs(p0)"),
                               ("f32", "floor(p0)"), ("f32", "ceil(p0)"), ("f32", "sign(p0)"), ("f32", "sqrt(p0)"),
                               ("f32", "exponential(p1)"), ("f16", "convert(p0)"), ("bf16", "convert(p0)"),
                               ("f64", "convert(p0)"), ("pred", "compare(p0, p1), direction=EQ"),
                               ("pred", "compare(p0, p1), direction=LT, type=TOTALORDER"), ("pred", "convert(p0)"),
                               ("f32", "divide(p0, p1)")], [sa, sb])
ew("subnormal_f64", "f64", 2, [("f64", "add(p0, p1)"), ("f64", "multiply(p0, p1)"), ("f32", "convert(p0)"),
                               ("bf16", "convert(p0)")],
   [np.array([5e-324, 1e-300, 1e-310, 1e-40], np.float64), np.array([5e-324, 1e-10, 1.0, 1.0], np.float64)])
ew("subnormal_bf16", "bf16", 2, [("bf16", "add(p0, p1)"), ("f32", "convert(p0)"), ("f64", "convert(p0)")],
   [np.array([1e-40, 1e-39, 1.0], BF16), np.array([1e-40, 0, 0], BF16)])
case("subnormal_reduce_dot", """
add {
  add.x = f32[] parameter(0)
  add.y = f32[] parameter(1)
  ROOT add.s = f32[] add(add.x, add.y)
}

ENTRY main {
  a = f32[4] parameter(0)
  b = f32[4,1] parameter(1)
  z = f32[] constant(0)
  r = f32[] reduce(a, z), dimensions={0}, to_apply=add
  d = f32[1] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  ROOT t = (f32[], f32[1]) tuple(r, d)
}""", [np.full(4, 1e-40, np.float32), np.ones((4, 1), np.float32)])

# --- converts.
fx = np.array([nan, inf, -inf, 3e9, -3e9, 2.7, -2.7, -0.0, 255.5, 65535.9, 1e20, -1e20, 127.5, -128.9], np.float32)
ew("convert_f32_to_ints", "f32", 1, [(t, "convert(p0)") for t in
   ["s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "pred"]], [fx])
dx = np.array([nan, inf, -inf, 1e300, 9.3e18, -9.3e18, 1.8e19, 2.5, -0.5, 1 + 2.0 ** -9 + 2.0 ** -30,
               1 + 2.0 ** -8, 3.0000001, 65520.0, 6e-8, 1e-45, 1e-320], np.float64)
ew("convert_f64", "f64", 1, [(t, "convert(p0)") for t in
   ["f32", "f16", "bf16", "s32", "s64", "u64", "u8"]], [dx])
ix = np.array([0, 1, -1, 2 ** 24 + 1, 2 ** 53 + 1, -(2 ** 63), 2 ** 63 - 1, 257, 65519, 65520, 2 ** 31], np.int64)
ew("convert_s64", "s64", 1, [(t, "convert(p0)") for t in
   ["f32", "f64", "f16", "bf16", "s8", "u32", "pred"]], [ix])
ux = np.array([0, 1, 2 ** 64 - 1, 2 ** 63, 2 ** 24 + 1, 3], np.uint64)
ew("convert_u64", "u64", 1, [(t, "convert(p0)") for t in ["f32", "f64", "s32", "bf16"]], [ux])
hx = np.array([nan, inf, 65504.0, -0.0, 6e-8, 1.0009765625, 3.14], np.float16)
ew("convert_f16", "f16", 1, [(t, "convert(p0)") for t in ["bf16", "f32", "s8", "u16", "pred"]], [hx])
bx = np.array([nan, inf, 3.0e38, -0.0, 1e-40, 1.0078125, 257.0, 65536.0], BF16)
ew("convert_bf16", "bf16", 1, [(t, "convert(p0)") for t in ["f16", "f32", "f64", "s32", "u8"]], [bx])
px = np.array([True, False, True], np.bool_)
ew("convert_pred", "pred", 1, [(t, "convert(p0)") for t in ["f32", "bf16", "s8", "u64"]], [px])

# --- 8-bit and 4-bit floats: converts (overflow to inf, NaN or saturation per format) and
# arithmetic computed in f32 and rounded back.
f8x = np.array([0.1, 1.0, 1.0625, 1.1875, -3.3, 448, 460, 500, 1e6, nan, -inf, 1e-5, -0.0, 0.3, 2.5e-3, 17.0],
               np.float32)
for ty in ["f8e5m2", "f8e4m3fn", "f8e4m3", "f8e4m3fnuz", "f8e5m2fnuz", "f8e4m3b11fnuz", "f8e3m4", "f8e8m0fnu",
           "f4e2m1fn"]:
    case(f"f8_{ty}", f"""
ENTRY main {{
  a = f32[16] parameter(0)
  c = {ty}[16] convert(a)
  s = {ty}[16] add(c, c)
  m = {ty}[16] multiply(c, c)
  b = f32[16] convert(c)
  d = f32[16] convert(s)
  e = f32[16] convert(m)
  h = f16[16] convert(c)
  ROOT t = (f32[16], f32[16], f32[16], f16[16]) tuple(b, d, e, h)
}}""", [f8x])

# --- f16 / bf16 arithmetic rounded after each op.
for ty, dt in [("f16", np.float16), ("bf16", BF16)]:
    a = np.array([1.0, 1.0009765625, 65504.0, 3.0, 1e-3, -2.5, 0.1, 7.0], dt)
    b = np.array([0.00048828125, 0.00048828125, 16.0, 7.0, 3e-4, 0.3, 0.2, 3.0], dt)
    ew(f"arith_{ty}", ty, 2, [(ty, "add(p0, p1)"), (ty, "subtract(p0, p1)"), (ty, "multiply(p0, p1)"),
                              (ty, "divide(p0, p1)"), (ty, "remainder(p0, p1)"), (ty, "power(p0, p1)")],
       [a, b], tol=["exact", "exact", "exact", "exact", "exact", {"rtol": 1e-2, "atol": 1e-3}])
    ew(f"unary_{ty}", ty, 1, [(ty, "sqrt(p0)"), (ty, "round-nearest-even(p0)"), (ty, "round-nearest-afz(p0)"),
                              (ty, "floor(p0)"), (ty, "sign(p0)"), (ty, "negate(p0)"), (ty, "abs(p0)")],
       [np.array([0.5, 1.5, 2.5, -0.5, -2.5, 4.0, 2.0, -0.0], dt)])
    ew(f"chain_{ty}", ty, 2, [(ty, "add(p0, p1)")], [np.array([1.0, 2.0], dt), np.array([1e-3, 1e-3], dt)])

# --- reduce-precision.
rx = np.array([1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, nan, -nan, inf, 1e-40, 70000.0, -1e-6, 1e-38, 3.4e38,
               np.float32(1.0) + np.float32(2.0 ** -23)], np.float32)
ew("reduce_precision", "f32", 1, [("f32", "reduce-precision(p0), exponent_bits=8, mantissa_bits=7"),
                                   ("f32", "reduce-precision(p0), exponent_bits=5, mantissa_bits=10"),
                                   ("f32", "reduce-precision(p0), exponent_bits=4, mantissa_bits=3"),
                                   ("f32", "reduce-precision(p0), exponent_bits=5, mantissa_bits=0")], [rx])

# --- compares.
ca = np.array([nan, -nan, 1.0, -0.0, 0.0, -inf, nan, 2.0], np.float32)
cb = np.array([nan, nan, nan, 0.0, -0.0, -nan, -inf, 2.0], np.float32)
ew("compare_f32", "f32", 2, [("pred", f"compare(p0, p1), direction={d}") for d in ["EQ", "NE", "LT", "LE", "GT", "GE"]] +
   [("pred", f"compare(p0, p1), direction={d}, type=TOTALORDER") for d in ["EQ", "NE", "LT", "LE", "GT", "GE"]], [ca, cb])

# --- transcendentals (XLA's are approximations: compare with a tolerance).
tx = np.array([0.5, -1.25, 2.0, 1e-4, -30.0, 10.0, 0.0, -0.0], np.float32)
ew("transcendental_f32", "f32", 1, [("f32", f"{op}(p0)") for op in
   ["exponential", "exponential-minus-one", "tanh", "logistic", "erf", "cbrt", "sine", "cosine", "tan"]],
   [tx], tol={"rtol": 2e-6, "atol": 1e-6})
lx = np.array([0.5, 1.25, 2.0, 1e-4, 30.0, 0.0, -0.5, 1e-30], np.float32)
ew("log_f32", "f32", 1, [("f32", "log(p0)"), ("f32", "log-plus-one(p0)"), ("f32", "rsqrt(p0)"), ("f32", "sqrt(p0)")],
   [lx], tol={"rtol": 2e-6, "atol": 1e-6})
ew("atan2_pow_f32", "f32", 2, [("f32", "atan2(p0, p1)"), ("f32", "power(p0, p1)")],
   [np.array([0.0, -0.0, 1.0, -1.0, 2.0, -8.0, 0.0, inf], np.float32),
    np.array([-1.0, -1.0, 0.0, 0.0, 0.5, 1.0 / 3, 0.0, -2.0], np.float32)], tol={"rtol": 2e-6, "atol": 1e-6})
ew("is_finite", "f32", 1, [("pred", "is-finite(p0)")], [np.array([nan, inf, -inf, 0.0, 1e-45, 3e38], np.float32)])

# --- rng-bit-generator.
for algo in ["rng_three_fry", "rng_philox", "rng_default"]:
    for shape in ["u32[]", "u32[7]", "u32[3,5]", "u32[2,3]", "u32[5,1,3]", "u64[5]", "u64[2,2]", "u8[9]",
                  "u16[2,5]", "s32[4]", "f32[3]", "f64[3]", "s64[3]"]:
        st = "u64[3]" if algo == "rng_philox" and shape == "u32[7]" else "u64[2]"
        sname = re.sub(r"[^a-z0-9]+", "_", shape).strip("_")
        state = np.array([0x1234567890abcdef, 0xfffffffffffffffe, 7][: 3 if st == "u64[3]" else 2], np.uint64)
        np_ty = {"u32": np.uint32, "u64": np.uint64, "u8": np.uint8, "u16": np.uint16, "s32": np.int32,
                 "f32": np.float32, "f64": np.float64, "s64": np.int64}[shape.split("[")[0]]
        case(f"rng_{algo[4:]}_{sname}", f"""
ENTRY main {{
  s = {st} parameter(0)
  ROOT r = ({st}, {shape}) rng-bit-generator(s), algorithm={algo}
}}""", [state], view=[None, np_ty])

# --- FFT, Cholesky, triangular solve.
rng = np.random.default_rng(0)
fx = rng.standard_normal((2, 4, 6)).astype(np.float32)
case("fft_all", """
ENTRY main {
  x = f32[2,4,6] parameter(0)
  r = c64[2,4,4] fft(x), fft_type=RFFT, fft_length={4,6}
  c = c64[2,4,6] convert(x)
  f = c64[2,4,6] fft(c), fft_type=FFT, fft_length={6}
  i = c64[2,4,6] fft(f), fft_type=IFFT, fft_length={4,6}
  b = f32[2,4,6] fft(r), fft_type=IRFFT, fft_length={4,6}
  ROOT t = (c64[2,4,4], c64[2,4,6], c64[2,4,6], f32[2,4,6]) tuple(r, f, i, b)
}""", [fx], tol={"rtol": 1e-5, "atol": 1e-5})
m = rng.standard_normal((2, 4, 4))
spd = (m @ np.swapaxes(m, 1, 2) + 4 * np.eye(4)).astype(np.float32)
bb = rng.standard_normal((2, 4, 3)).astype(np.float32)
case("cholesky_solve", """
ENTRY main {
  a = f32[2,4,4] parameter(0)
  b = f32[2,4,3] parameter(1)
  l = f32[2,4,4] cholesky(a), lower=true
  u = f32[2,4,4] cholesky(a), lower=false
  x = f32[2,4,3] triangular-solve(l, b), left_side=true, lower=true, transpose_a=NO_TRANSPOSE
  y = f32[2,4,3] triangular-solve(l, b), left_side=true, lower=true, transpose_a=TRANSPOSE, unit_diagonal=true
  bt = f32[2,3,4] transpose(b), dimensions={0,2,1}
  z = f32[2,3,4] triangular-solve(u, bt), left_side=false, lower=false, transpose_a=NO_TRANSPOSE
  w = f32[2,3,4] triangular-solve(u, bt), left_side=false, lower=false, transpose_a=ADJOINT
  ROOT t = (f32[2,4,4], f32[2,4,4], f32[2,4,3], f32[2,4,3], f32[2,3,4], f32[2,3,4]) tuple(l, u, x, y, z, w)
}""", [spd, bb], tol={"rtol": 1e-4, "atol": 1e-5})

# XLA CPU computes f32 and c64 Cholesky, triangular solve and FFT in f32 (checked against f64
# results rounded once: hundreds of ulps apart on FFTs, tens on the factorizations), and makes
# the whole factor NaN when a matrix is not positive definite. The FFT case overflows f32 in
# the first axis it transforms: XLA transforms the innermost axis first (then infinity minus
# infinity along the outer one gives NaN; in f64 nothing overflows until the final rounding).
npd = np.stack([spd[0], np.array([[4, 2, 1, 0], [2, 1, 1, 0], [1, 1, -5, 0], [0, 0, 0, 1]], np.float32),
                np.array([[np.nan, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [0, 0, 0, 1]], np.float32)])
case("cholesky_not_positive_definite", """
ENTRY main {
  a = f32[3,4,4] parameter(0)
  c = c64[3,4,4] convert(a)
  l = f32[3,4,4] cholesky(a), lower=true
  u = c64[3,4,4] cholesky(c), lower=false
  ROOT t = (f32[3,4,4], c64[3,4,4]) tuple(l, u)
}""", [npd], tol={"rtol": 1e-4, "atol": 1e-5})
case("fft_f32_overflow", """
ENTRY main {
  x = c64[2,2] parameter(0)
  y = c128[2,2] convert(x)
  f = c64[2,2] fft(x), fft_type=FFT, fft_length={2,2}
  g = c128[2,2] fft(y), fft_type=FFT, fft_length={2,2}
  ROOT t = (c64[2,2], c128[2,2]) tuple(f, g)
}""", [np.array([[3e38, 3e38], [-3e38, -3e38]], np.complex64)], tol={"rtol": 1e-5, "atol": 1e-5})

# --- convolution with batch groups and window reversal, integer conv.
case("conv_groups", """
ENTRY main {
  x = f32[4,5,3] parameter(0)
  k = f32[3,3,4] parameter(1)
  k2 = f32[3,1,6] parameter(2)
  a = f32[2,5,4] convolution(x, k), window={size=3 pad=1_1}, dim_labels=b0f_0io->b0f, batch_group_count=2
  b = f32[4,5,6] convolution(x, k2), window={size=3 stride=2 pad=2_1 lhs_dilate=2 rhs_dilate=1}, dim_labels=b0f_0io->b0f, feature_group_count=3
  ROOT t = (f32[2,5,4], f32[4,5,6]) tuple(a, b)
}""", [rng.standard_normal((4, 5, 3)).astype(np.float32), rng.standard_normal((3, 3, 4)).astype(np.float32),
       rng.standard_normal((3, 1, 6)).astype(np.float32)], tol={"rtol": 1e-5, "atol": 1e-5})
case("conv_int8", """
ENTRY main {
  x = s8[1,6,2] parameter(0)
  k = s8[3,2,2] parameter(1)
  ROOT a = s32[1,4,2] convolution(x, k), window={size=3}, dim_labels=b0f_0io->b0f
}""", [rng.integers(-128, 127, (1, 6, 2)).astype(np.int8), rng.integers(-128, 127, (3, 2, 2)).astype(np.int8)])
case("dot_mixed", """
ENTRY main {
  a = s8[3,4] parameter(0)
  b = s8[4,2] parameter(1)
  c = f16[3,4] parameter(2)
  d = f16[4,2] parameter(3)
  x = s32[3,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  y = f16[3,2] dot(c, d), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  z = f32[3,2] dot(c, d), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = (s32[3,2], f16[3,2], f32[3,2]) tuple(x, y, z)
}""", [rng.integers(-128, 127, (3, 4)).astype(np.int8), rng.integers(-128, 127, (4, 2)).astype(np.int8),
       (rng.standard_normal((3, 4)) * 100).astype(np.float16), (rng.standard_normal((4, 2)) * 100).astype(np.float16)],
     tol=["exact", {"rtol": 1e-3, "atol": 1e-2}, {"rtol": 1e-5, "atol": 1e-4}])

# --- gather/scatter out of bounds, windows.
case("scatter_oob", """
add {
  add.a = f32[] parameter(0)
  add.b = f32[] parameter(1)
  ROOT add.c = f32[] add(add.a, add.b)
}

ENTRY main {
  x = f32[5,3] parameter(0)
  i = s32[4,2] parameter(1)
  u = f32[4,2,2] parameter(2)
  ROOT s = f32[5,3] scatter(x, i, u), update_window_dims={1,2}, inserted_window_dims={}, scatter_dims_to_operand_dims={0,1}, index_vector_dim=1, to_apply=add
}""", [np.zeros((5, 3), np.float32), np.array([[0, 0], [4, 0], [3, 1], [-1, 0]], np.int32),
       np.arange(16, dtype=np.float32).reshape(4, 2, 2) + 1])
case("gather_oob", """
ENTRY main {
  x = f32[5,3] parameter(0)
  i = s32[4,2] parameter(1)
  ROOT g = f32[4,2,2] gather(x, i), offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0,1}, index_vector_dim=1, slice_sizes={2,2}
}""", [np.arange(15, dtype=np.float32).reshape(5, 3), np.array([[0, 0], [4, 2], [-3, 1], [2, 7]], np.int32)])
case("windows", """
max {
  max.a = f32[] parameter(0)
  max.b = f32[] parameter(1)
  ROOT max.c = f32[] maximum(max.a, max.b)
}

ge {
  ge.a = f32[] parameter(0)
  ge.b = f32[] parameter(1)
  ROOT ge.c = pred[] compare(ge.a, ge.b), direction=GE
}

add {
  add.a = f32[] parameter(0)
  add.b = f32[] parameter(1)
  ROOT add.c = f32[] add(add.a, add.b)
}

ENTRY main {
  x = f32[6,5] parameter(0)
  s = f32[3,3] parameter(1)
  ninf = f32[] constant(-inf)
  zero = f32[] constant(0)
  a = f32[6,4] reduce-window(x, ninf), window={size=3x2 stride=1x1 pad=1_1x0_1 lhs_dilate=1x1 rhs_dilate=1x2}, to_apply=max
  b = f32[10,5] reduce-window(x, zero), window={size=2x2 pad=0_0x1_0 lhs_dilate=2x1}, to_apply=add
  c = f32[6,5] select-and-scatter(x, s, zero), window={size=3x2 stride=2x2 pad=1_1x0_1}, select=ge, scatter=add
  ROOT t = (f32[6,4], f32[10,5], f32[6,5]) tuple(a, b, c)
}""", [np.round(rng.standard_normal((6, 5)), 1).astype(np.float32), rng.standard_normal((3, 3)).astype(np.float32)],
     tol=["exact", {"rtol": 1e-6, "atol": 1e-6}, {"rtol": 1e-6, "atol": 1e-6}])

# --- variadic scatter and reduce-window (argmax over windows).
case("variadic_scatter_window", """
sum2 {
  a0 = f32[] parameter(0)
  a1 = s32[] parameter(1)
  b0 = f32[] parameter(2)
  b1 = s32[] parameter(3)
  sum.0 = f32[] add(a0, b0)
  prod.1 = s32[] multiply(a1, b1)
  ROOT sum.t = (f32[], s32[]) tuple(sum.0, prod.1)
}

argmax {
  x0 = f32[] parameter(0)
  i0 = s32[] parameter(1)
  x1 = f32[] parameter(2)
  i1 = s32[] parameter(3)
  gt = pred[] compare(x0, x1), direction=GT
  eq = pred[] compare(x0, x1), direction=EQ
  lt = pred[] compare(i0, i1), direction=LT
  tie = pred[] and(eq, lt)
  take = pred[] or(gt, tie)
  v = f32[] select(take, x0, x1)
  k = s32[] select(take, i0, i1)
  ROOT r = (f32[], s32[]) tuple(v, k)
}

ENTRY main {
  x = f32[6] parameter(0)
  y = s32[6] parameter(1)
  idx = s32[4,1] parameter(2)
  u = f32[4] parameter(3)
  w = s32[4] parameter(4)
  sc = (f32[6], s32[6]) scatter(x, y, idx, u, w), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=sum2
  io = s32[6] iota(), iota_dimension=0
  ninf = f32[] constant(-inf)
  m1 = s32[] constant(-1)
  rw = (f32[3], s32[3]) reduce-window(x, io, ninf, m1), window={size=3 stride=2 pad=1_0}, to_apply=argmax
  a = f32[6] get-tuple-element(sc), index=0
  b = s32[6] get-tuple-element(sc), index=1
  c = f32[3] get-tuple-element(rw), index=0
  d = s32[3] get-tuple-element(rw), index=1
  ROOT t = (f32[6], s32[6], f32[3], s32[3]) tuple(a, b, c, d)
}""", [np.array([1, 5, 5, -2, 7, 7], np.float32), np.array([1, 2, 3, 4, 5, 6], np.int32),
       np.array([[1], [1], [4], [9]], np.int32), np.array([10, 20, 30, 40], np.float32),
       np.array([2, 3, 4, 5], np.int32)])

# --- sort and top-k with NaN and ties.
sx = np.array([[3.0, nan, -0.0, 0.0, -inf, 3.0, -nan, 1.0]], np.float32)
case("sort_topk", """
lt {
  lt.a = f32[] parameter(0)
  lt.b = f32[] parameter(1)
  lt.i = s32[] parameter(2)
  lt.j = s32[] parameter(3)
  ROOT lt.c = pred[] compare(lt.a, lt.b), direction=LT, type=TOTALORDER
}

ENTRY main {
  x = f32[1,8] parameter(0)
  io = s32[1,8] iota(), iota_dimension=1
  s = (f32[1,8], s32[1,8]) sort(x, io), dimensions={1}, is_stable=true, to_apply=lt
  sv = f32[1,8] get-tuple-element(s), index=0
  si = s32[1,8] get-tuple-element(s), index=1
  k = (f32[1,5], s32[1,5]) topk(x), k=5, largest=true
  kv = f32[1,5] get-tuple-element(k), index=0
  ki = s32[1,5] get-tuple-element(k), index=1
  ROOT t = (f32[1,8], s32[1,8], f32[1,5], s32[1,5]) tuple(sv, si, kv, ki)
}""", [sx])

# --- conditional on a predicate, dynamic slices with unsigned and negative starts.
case("cond_pred", """
t {
  t.x = f32[3] parameter(0)
  ROOT t.y = f32[3] negate(t.x)
}

f {
  f.x = f32[3] parameter(0)
  ROOT f.y = f32[3] add(f.x, f.x)
}

ENTRY main {
  p = pred[] parameter(0)
  x = f32[3] parameter(1)
  ROOT c = f32[3] conditional(p, x, x), true_computation=t, false_computation=f
}""", [np.array(False), np.array([1.0, 2.0, 3.0], np.float32)])
for ity, idt, iv, jv in [("u32", np.uint32, 4000000000, 1), ("s32", np.int32, -7, 3)]:
    case(f"dynamic_slices_{ity}", f"""
ENTRY main {{
  x = f32[4,5] parameter(0)
  i = {ity}[] parameter(1)
  j = {ity}[] parameter(2)
  u = f32[2,2] parameter(3)
  a = f32[2,3] dynamic-slice(x, i, j), dynamic_slice_sizes={{2,3}}
  b = f32[4,5] dynamic-update-slice(x, u, i, j)
  ROOT t = (f32[2,3], f32[4,5]) tuple(a, b)
}}""", [np.arange(20, dtype=np.float32).reshape(4, 5), np.array(iv, idt), np.array(jv, idt),
           np.array([[-1, -2], [-3, -4]], np.float32)])

# --- complex arithmetic.
za = np.array([1 + 2j, -3 + 0.5j, 0j, 2 - 1j], np.complex64)
zb = np.array([0.5 - 1j, 2 + 2j, 1 + 0j, -1j], np.complex64)
ew("complex_c64", "c64", 2, [("c64", "add(p0, p1)"), ("c64", "multiply(p0, p1)"), ("c64", "divide(p0, p1)"),
                              ("f32", "abs(p0)"), ("c64", "exponential(p0)"), ("c64", "sqrt(p0)"),
                              ("f32", "real(p0)"), ("f32", "imag(p0)"), ("c64", "negate(p1)"),
                              ("c64", "subtract(p0, p1)"), ("c64", "sign(p0)"), ("c64", "power(p0, p1)"),
                              ("c64", "tanh(p0)"), ("c64", "sine(p0)"), ("c64", "cosine(p0)"),
                              ("pred", "compare(p0, p1), direction=EQ"), ("pred", "compare(p0, p1), direction=NE")],
   [za, zb], tol={"rtol": 1e-5, "atol": 1e-6})
zl = np.array([1 + 2j, -3 + 0.5j, 0.5 - 0.25j, 2 - 1j], np.complex64)
ew("complex_log", "c64", 1, [("c64", "log(p0)"), ("c64", "log-plus-one(p0)"), ("c64", "exponential-minus-one(p0)"),
                             ("c64", "rsqrt(p0)")], [zl], tol={"rtol": 1e-5, "atol": 1e-6})
ew("complex_c128", "c128", 2, [("c128", "multiply(p0, p1)"), ("c128", "divide(p0, p1)"), ("f64", "abs(p0)"),
                                ("c128", "sqrt(p0)")],
   [za.astype(np.complex128), zb.astype(np.complex128)], tol={"rtol": 1e-12, "atol": 1e-14})
ew("complex_build", "f32", 2, [("c64", "complex(p0, p1)")], [np.array([1, -2, 0], np.float32),
                                                              np.array([0.5, 3, -0.0], np.float32)])

# --- batch norm (XLA expands it; the evaluator uses the expander's formulas).
bx = rng.standard_normal((4, 3, 5)).astype(np.float32)
case("batch_norm", """
ENTRY main {
  x = f32[4,3,5] parameter(0)
  s = f32[3] parameter(1)
  o = f32[3] parameter(2)
  m = f32[3] parameter(3)
  v = f32[3] parameter(4)
  g = f32[4,3,5] parameter(5)
  i = f32[4,3,5] batch-norm-inference(x, s, o, m, v), epsilon=0.001, feature_index=1
  t = (f32[4,3,5], f32[3], f32[3]) batch-norm-training(x, s, o), epsilon=0.001, feature_index=1
  ty = f32[4,3,5] get-tuple-element(t), index=0
  tm = f32[3] get-tuple-element(t), index=1
  tv = f32[3] get-tuple-element(t), index=2
  d = (f32[4,3,5], f32[3], f32[3]) batch-norm-grad(x, s, m, v, g), epsilon=0.001, feature_index=1
  dx = f32[4,3,5] get-tuple-element(d), index=0
  ds = f32[3] get-tuple-element(d), index=1
  do = f32[3] get-tuple-element(d), index=2
  ROOT r = (f32[4,3,5], f32[4,3,5], f32[3], f32[3], f32[4,3,5], f32[3], f32[3]) tuple(i, ty, tm, tv, dx, ds, do)
}""", [bx, np.array([1.5, -0.5, 2.0], np.float32), np.array([0.1, 0.2, -0.3], np.float32),
       np.array([0.05, -0.1, 0.2], np.float32), np.array([1.2, 0.8, 1.1], np.float32),
       rng.standard_normal((4, 3, 5)).astype(np.float32)], tol={"rtol": 1e-5, "atol": 1e-5})

# --- a long f32 sum: a left-to-right fold drifts past rtol 1e-5; XLA's does not.
case("reduce_long_f32_sum", """
add {
  add.x = f32[] parameter(0)
  add.y = f32[] parameter(1)
  ROOT add.s = f32[] add(add.x, add.y)
}

ENTRY main {
  a = f32[262144] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(a, z), dimensions={0}, to_apply=add
}""", [np.random.default_rng(7).uniform(0, 1, 262144).astype(np.float32)], tol={"rtol": 1e-6, "atol": 1e-6})

# --- LAPACK custom calls JAX emits for linear algebra on CPU.
def jcase(name, f, ins, tol):
    case(name, jax.jit(f).lower(*ins).as_text(dialect="hlo"), ins, tol)


lin = {"rtol": 2e-4, "atol": 2e-5}
g = rng.standard_normal((2, 5, 5))
spd5 = (g @ np.swapaxes(g, 1, 2) + 5 * np.eye(5)).astype(np.float32)
jcase("lapack_potrf", lambda x: (jnp.linalg.cholesky(x), jax.lax.linalg.cholesky(x, symmetrize_input=False)),
      [spd5], lin)
jcase("lapack_potrf_f64_upper", lambda x: jnp.linalg.cholesky(x, upper=True), [spd5.astype(np.float64)], lin)
sq = rng.standard_normal((2, 5, 5)).astype(np.float32)
jcase("lapack_getrf", lambda x: jax.lax.linalg.lu(x), [sq], lin)
jcase("lapack_getrf_rect", lambda x: jax.lax.linalg.lu(x), [rng.standard_normal((3, 6, 4)).astype(np.float64)], lin)
jcase("lapack_solve_inv_det", lambda x: (jnp.linalg.solve(x, x[..., :2]), jnp.linalg.inv(x), jnp.linalg.det(x)),
      [sq], lin)
jcase("lapack_trsm", lambda a, b: (
    jax.scipy.linalg.solve_triangular(a, b, lower=True),
    jax.scipy.linalg.solve_triangular(a, b, lower=False, trans=1, unit_diagonal=True),
    jax.lax.linalg.triangular_solve(a, b, left_side=False, lower=True, transpose_a=True)),
    [sq + 5 * np.eye(5, dtype=np.float32), rng.standard_normal((2, 5, 5)).astype(np.float32)], lin)
jcase("lapack_qr", lambda x: jnp.linalg.qr(x), [rng.standard_normal((2, 6, 4)).astype(np.float32)], lin)
jcase("lapack_qr_complete", lambda x: jnp.linalg.qr(x, mode="complete"),
      [rng.standard_normal((5, 3)).astype(np.float64)], lin)
zc = (rng.standard_normal((4, 4)) + 1j * rng.standard_normal((4, 4))).astype(np.complex64)
zspd = (zc @ zc.conj().T + 4 * np.eye(4)).astype(np.complex64)
jcase("lapack_complex", lambda x, y: (jnp.linalg.cholesky(x), jax.lax.linalg.lu(y)), [zspd, zc],
      {"rtol": 2e-4, "atol": 2e-4})

# --- flush-to-zero (DAZ/FTZ) beyond real f32/f64: complex components, f8e8m0fnu computed in
# f32 (2^-127 is an f32 subnormal), and remainder's fmod. Appended after the cases above.
strict = {"rtol": 1e-5, "atol": 0.0}
for ty, dt, s in [("c64", np.complex64, 1e-39), ("c128", np.complex128, 1e-309)]:
    rt = "f32" if ty == "c64" else "f64"
    tiny = 1e-20 if ty == "c64" else 1e-160
    za = np.array([s + 3 * s * 1j, 2 + s * 1j, -0.1 * s - 0j, tiny + tiny * 1j, 3 + 4j, s * 1j, -s + 0j,
                   1 + 1j, 0j, 1 + 1j], dt)
    zb = np.array([1 + 0j, s + s * 1j, 2 + 2j, tiny + tiny * 1j, s + 0j, 1 + 0j, 1j, 2 + 0j, s + s * 1j,
                   tiny + 0j], dt)
    ew(f"ftz_complex_{ty}", ty, 2, [(ty, "add(p0, p1)"), (ty, "subtract(p0, p1)"), (ty, "multiply(p0, p1)"),
                                     (ty, "divide(p0, p1)"), (rt, "abs(p0)"), (ty, "sign(p0)"), (ty, "sqrt(p0)"),
                                     (ty, "rsqrt(p0)"), (ty, "exponential(p0)"), (ty, "exponential-minus-one(p0)"),
                                     (ty, "sine(p0)"), (ty, "cosine(p0)"), (ty, "tanh(p0)"),
                                     ("pred", "compare(p0, p1), direction=EQ"),
                                     ("pred", "compare(p0, p1), direction=NE"), (rt, "real(p0)"), (rt, "imag(p0)"),
                                     (ty, "negate(p0)")], [za, zb], tol=strict)
case("ftz_complex_convert", """
ENTRY main {
  a = c64[4] parameter(0)
  b = c128[4] parameter(1)
  f = f32[4] parameter(2)
  ab = c128[4] convert(a)
  ba = c64[4] convert(b)
  fa = c64[4] convert(f)
  fb = c128[4] convert(f)
  ROOT t = (c128[4], c64[4], c64[4], c128[4]) tuple(ab, ba, fa, fb)
}""", [np.array([1e-39 + 3e-39j, 2 + 1e-39j, 1e-40 - 2j, 1 + 1j], np.complex64),
       np.array([1e-39 + 3e-39j, 2 + 1e-39j, 1e-300 - 2j, 1e-310 + 1j], np.complex128),
       np.array([1e-39, 2, -1e-40, 1e-45], np.float32)])
case("ftz_complex_dot_reduce", """
add {
  a = c64[] parameter(0)
  b = c64[] parameter(1)
  ROOT s = c64[] add(a, b)
}

ENTRY main {
  x = c64[2,2] parameter(0)
  d = c64[2,2] dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  z = c64[] constant((0, 0))
  r = c64[2] reduce(x, z), dimensions={1}, to_apply=add
  ROOT t = (c64[2,2], c64[2]) tuple(d, r)
}""", [np.array([[1e-20 + 1e-20j, 1e-39 + 0j], [1 + 1e-39j, 3e-39 + 0j]], np.complex64)], tol=strict)
# f8e8m0fnu as bits: 0 is 2^-127, 127 is 1, 255 is NaN.
e8a = np.array([0, 0, 1, 126, 127, 0, 1, 27, 200, 255, 0, 2], np.uint8)
e8b = np.array([0, 127, 127, 1, 0, 1, 0, 100, 200, 0, 254, 1], np.uint8)
e8ops = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "remainder"]
e8un = ["sqrt", "rsqrt", "exponential", "log", "abs", "negate", "floor"]
lines = ["  pa = u8[12] parameter(0)", "  pb = u8[12] parameter(1)",
         "  a = f8e8m0fnu[12] bitcast-convert(pa)", "  b = f8e8m0fnu[12] bitcast-convert(pb)"]
outs = []
for i, op in enumerate(e8ops):
    lines += [f"  x{i} = f8e8m0fnu[12] {op}(a, b)", f"  q{i} = u8[12] bitcast-convert(x{i})"]
    outs.append((f"q{i}", "u8"))
for i, op in enumerate(e8un):
    lines += [f"  y{i} = f8e8m0fnu[12] {op}(a)", f"  w{i} = u8[12] bitcast-convert(y{i})"]
    outs.append((f"w{i}", "u8"))
for d in ["EQ", "NE", "LT", "GE"]:
    lines.append(f"  c{d} = pred[12] compare(a, b), direction={d}")
    outs.append((f"c{d}", "pred"))
for t in ["f32", "f16", "f64"]:
    lines.append(f"  v{t} = {t}[12] convert(a)")
    outs.append((f"v{t}", t))
lines.append(f"  ROOT t = ({', '.join(t + '[12]' for _, t in outs)}) tuple({', '.join(n for n, _ in outs)})")
case("ftz_f8e8m0fnu", "ENTRY main {\n" + "\n".join(lines) + "\n}", [e8a, e8b])
ew("ftz_remainder_f32", "f32", 2, [("f32", "remainder(p0, p1)")],
   [np.array([1e-39, 1e-39, 5.877471754111438e-39, 2.0, -1e-39, 3e-39, 1.5e-38, 7.0], np.float32),
    np.array([1.0, 2e-39, 1.0, 1e-39, 1.0, 1e-39, 1e-38, 0.0], np.float32)])
ew("ftz_remainder_f64", "f64", 2, [("f64", "remainder(p0, p1)")],
   [np.array([1e-309, 1e-309, 2.0, -1e-309, 3e-308, 7.0]), np.array([1.0, 2e-309, 1e-309, 1.0, 2e-308, 0.0])])

# Converts of the 8-bit floats to pred compare in f32 under DAZ: f8e8m0fnu's 2^-127 (bits 0) is
# an f32 subnormal and converts to false.
lines = ["  pa = u8[6] parameter(0)"]
outs = []
for i, t in enumerate(["f8e8m0fnu", "f8e4m3fn", "f8e5m2"]):
    lines += [f"  a{i} = {t}[6] bitcast-convert(pa)", f"  p{i} = pred[6] convert(a{i})"]
    outs.append(f"p{i}")
lines.append(f"  ROOT t = ({', '.join('pred[6]' for _ in outs)}) tuple({', '.join(outs)})")
case("ftz_minifloat_to_pred", "ENTRY main {\n" + "\n".join(lines) + "\n}",
     [np.array([0, 1, 127, 255, 128, 0x80], np.uint8)])

# Complex to real converts take the real part (subnormal, NaN, infinite and out-of-range parts).
cre = np.array([2.7, -3.5, 1e-39, -1e-40, 3e9, -3e9, nan, inf, -inf, 70000.0, -0.0, 255.5])
cim = np.array([5.0, 1.0, 1e-39, 2.0, -1.0, 0.0, 1.0, nan, 3.0, 1.0, 7.0, -2.0])
for ty, dt in [("c64", np.complex64), ("c128", np.complex128)]:
    ew(f"convert_{ty}_to_real", ty, 1,
       [(t, "convert(p0)") for t in ["f32", "f64", "f16", "bf16", "s32", "u8", "s64"]],
       [(cre + 1j * cim).astype(dt)])

# Cholesky of singular and indefinite matrices: the factor is rounding noise where a pivot is
# near zero, so only XLA's exact operations give its NaN pattern (a zero pivot leaves a NaN
# diagonal, a negative one a factor of NaNs). XLA's expansion accumulates each L L^H dot from
# zero (fused multiply-adds for f32, not for f64 or complex) and multiplies the column by the
# pivot's reciprocal (real types) or divides it (complex). Exact: the evaluator and the cpu
# backend share that recurrence (analysis/src/cholesky.rs).
crng = np.random.default_rng(20261124)
def eighths(shape):
    return crng.integers(-64, 64, size=shape) / 8.0
sing = []
for b in range(40):
    rows = [3, 2, 1, 6][b % 4]
    x = eighths((rows, 4))
    a = x.T @ x
    if b % 5 == 4:
        s = eighths((4, 4))
        a = s + s.T
    if b % 7 == 0:
        a[b % 4, (b // 4) % 4] = 0.0
    sing.append(a)
sing = np.array(sing, np.float32)
zs = []
for b in range(20):
    x = eighths((2 if b % 3 else 4, 3)) + 1j * eighths((2 if b % 3 else 4, 3))
    zs.append(x.conj().T @ x)
zs = np.array(zs, np.complex64)
ds = []
for b in range(20):
    x = eighths((5 if b % 2 else 9, 7))
    ds.append(1.1 * (x.T @ x))
ds = np.array(ds, np.float64)
case("cholesky_singular", """
ENTRY main {
  a = f32[40,4,4] parameter(0)
  z = c64[20,3,3] parameter(1)
  d = f64[20,7,7] parameter(2)
  la = f32[40,4,4] cholesky(a), lower=true
  ua = f32[40,4,4] cholesky(a), lower=false
  lz = c64[20,3,3] cholesky(z), lower=true
  uz = c64[20,3,3] cholesky(z), lower=false
  ld = f64[20,7,7] cholesky(d), lower=true
  ROOT t = (f32[40,4,4], f32[40,4,4], c64[20,3,3], c64[20,3,3], f64[20,7,7]) tuple(la, ua, lz, uz, ld)
}""", [sing, zs, ds])

# Long reductions of narrow floats: XLA CPU computes a reduce with a reduced dimension longer
# than 32 as windows of 32 (SAME padding by the init value), level after level, each folded
# left to right with the reducer's rounding at every step; a sequential bf16 fold of 1000 ones
# stops at 256. Exact: the evaluator and the cpu backend (its tree-reduce pass) follow that
# order (ir/src/tree_reduction.rs). Also a 48-element sum over short dimensions (one left
# fold), a non-identity init (padding is skipped, not folded as the init), maximum, and a
# reducer that is not one op (on whole windows: the cpu backend pads with the reducer's
# identity, which such a reducer lacks).
trng = np.random.default_rng(20261125)
case("tree_reduce_narrow", """
absadd {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ab = bf16[] abs(b)
  ROOT s = bf16[] add(a, ab)
}
addb {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT s = bf16[] add(a, b)
}
addh {
  a = f16[] parameter(0)
  b = f16[] parameter(1)
  ROOT s = f16[] add(a, b)
}
maxh {
  a = f16[] parameter(0)
  b = f16[] parameter(1)
  ROOT s = f16[] maximum(a, b)
}
ENTRY main {
  ones = bf16[1000] parameter(0)
  u = bf16[8,125] parameter(1)
  w = bf16[8,128] parameter(4)
  h = f16[3,70,40] parameter(2)
  c = bf16[4,3,4] parameter(3)
  zb = bf16[] constant(0)
  zh = f16[] constant(0.5)
  mh = f16[] constant(-inf)
  r0 = bf16[] reduce(ones, zb), dimensions={0}, to_apply=addb
  r1 = bf16[] reduce(u, zb), dimensions={0,1}, to_apply=addb
  r2 = bf16[8] reduce(w, zb), dimensions={1}, to_apply=absadd
  r3 = f16[70] reduce(h, zh), dimensions={0,2}, to_apply=addh
  r4 = f16[3] reduce(h, mh), dimensions={1,2}, to_apply=maxh
  r5 = f16[40] reduce(h, zh), dimensions={0,1}, to_apply=addh
  r6 = bf16[] reduce(c, zb), dimensions={0,1,2}, to_apply=addb
  ROOT t = (bf16[], bf16[], bf16[8], f16[70], f16[3], f16[40], bf16[]) tuple(r0, r1, r2, r3, r4, r5, r6)
}""", [np.ones(1000, BF16), trng.uniform(-0.5, 1, size=(8, 125)).astype(BF16),
       trng.uniform(-1, 4, size=(3, 70, 40)).astype(np.float16),
       (trng.integers(-64, 64, size=(4, 3, 4)) / 17.0).astype(BF16),
       trng.uniform(-0.5, 1, size=(8, 128)).astype(BF16)])

# --- sharding annotations that change only the layout, as JAX writes around a transpose (a key
# array's `k.T`, whose transpose XLA lays out as a bitcast): the values are the operand's. Not
# listed: the cpu backend runs annotations only after algsimp, so tests/cpu.rs's
# `sharding_layout_change_gives_xla_outputs` runs it through the backend interface.
case("sharding_layout", """HloModule sharding_layout, entry_computation_layout={(u32[2,3,2]{2,1,0}, f32[2,3]{1,0})->(u32[3,2,2]{2,1,0}, f32[3,2]{1,0})}

ENTRY main {
  k = u32[2,3,2]{2,1,0} parameter(0)
  a = u32[2,3,2]{2,1,0} custom-call(k), custom_call_target="Sharding", sharding={replicated}
  t = u32[3,2,2]{2,0,1} transpose(a), dimensions={1,0,2}
  r = u32[3,2,2]{2,1,0} custom-call(t), custom_call_target="Sharding", sharding={replicated}
  x = f32[2,3]{1,0} parameter(1)
  xt = f32[3,2]{0,1} transpose(x), dimensions={1,0}
  y = f32[3,2]{1,0} custom-call(xt), custom_call_target="Sharding", sharding={replicated}
  ROOT o = (u32[3,2,2]{2,1,0}, f32[3,2]{1,0}) tuple(r, y)
}
""", [np.arange(12, dtype=np.uint32).reshape(2, 3, 2) * 7 + 1,
      np.array([[1.5, -0.0, np.nan], [np.inf, -2.25, 3.0]], np.float32)], listed=False)

with open(os.path.join(HERE, "manifest.json"), "w") as f:
    json.dump({"generator": "gen.py", "jax_version": jax.__version__, "cases": CASES}, f, indent=1)
print(len(CASES), "cases")
