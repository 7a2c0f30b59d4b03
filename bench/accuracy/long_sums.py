"""Accuracy of long f32 sums: Axle cpu and interpreter against XLA CPU, each against numpy's f64.

    /work/jaxenv/bin/python bench/accuracy/long_sums.py [--axle target/debug/axle] [--only dot]

Builds HLO programs whose every output is one long f32 sum (reductions over rows and columns, a
GEMM with a long K, matrix-vector products, convolutions with long windows), fills their inputs
from a fixed seed, runs each on XLA CPU (compiled from the same text as
shared/baseline/baseline.py's compile_hlo_text does) and on `axle run --backend cpu` and
`--backend interpreter`, and prints the max and mean relative error of every output element
against the f64 result computed by numpy from the same f32 inputs.

The error of an element is |y - ref| / sum(|terms|), where the terms are the products (or
elements) the sum adds: for the default inputs, uniform in [0, 1), that is |y - ref| / |ref|;
with `--dist normal` it stays meaningful where the sum cancels. `--dist uniform` is the one the
issue's figures use: no cancellation, so the error of a sequential chain grows with its length.
"""
import argparse
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "xla"))
from differential import axle_outputs  # noqa: E402
from side_by_side import compile_hlo_text  # noqa: E402

ADD = """add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""


def reduce_rows(n, rows=64):
    text = ADD + f"""ENTRY e {{
  x = f32[{rows},{n}] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[{rows}] reduce(x, z), dimensions={{1}}, to_apply=add
}}"""
    return text, [(rows, n)], lambda x: (x.sum(1), np.abs(x).sum(1))


def reduce_cols(n, cols=64):
    text = ADD + f"""ENTRY e {{
  x = f32[{n},{cols}] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[{cols}] reduce(x, z), dimensions={{0}}, to_apply=add
}}"""
    return text, [(n, cols)], lambda x: (x.sum(0), np.abs(x).sum(0))


def reduce_all(n):
    text = ADD + f"""ENTRY e {{
  x = f32[{n}] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(x, z), dimensions={{0}}, to_apply=add
}}"""
    return text, [(n,)], lambda x: (x.sum(), np.abs(x).sum())


def dot(k, m=16, n=16):
    text = f"""ENTRY e {{
  a = f32[{m},{k}] parameter(0)
  b = f32[{k},{n}] parameter(1)
  ROOT d = f32[{m},{n}] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}"""
    return text, [(m, k), (k, n)], lambda a, b: (a @ b, np.abs(a) @ np.abs(b))


def vecmat(k, n=256):
    text = f"""ENTRY e {{
  x = f32[{k}] parameter(0)
  w = f32[{k},{n}] parameter(1)
  ROOT d = f32[{n}] dot(x, w), lhs_contracting_dims={{0}}, rhs_contracting_dims={{0}}
}}"""
    return text, [(k,), (k, n)], lambda x, w: (x @ w, np.abs(x) @ np.abs(w))


def matvec(k, n=256):
    text = f"""ENTRY e {{
  w = f32[{n},{k}] parameter(0)
  x = f32[{k}] parameter(1)
  ROOT d = f32[{n}] dot(w, x), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}"""
    return text, [(n, k), (k,)], lambda w, x: (w @ x, np.abs(w) @ np.abs(x))


def conv_ref(x, w):
    """NWC x WIO -> NWO, valid padding, stride 1."""
    kw = w.shape[0]
    win = np.lib.stride_tricks.sliding_window_view(x, kw, axis=1)  # N, W', C, KW
    return np.einsum("nwck,kco->nwo", win, w)


def conv1d(kw, c=64, o=16, extra=31):
    wd = kw + extra
    text = f"""ENTRY e {{
  x = f32[1,{wd},{c}] parameter(0)
  w = f32[{kw},{c},{o}] parameter(1)
  ROOT y = f32[1,{extra + 1},{o}] convolution(x, w), window={{size={kw}}}, dim_labels=b0f_0io->b0f
}}"""
    return text, [(1, wd, c), (kw, c, o)], lambda x, w: (conv_ref(x, w), conv_ref(np.abs(x), np.abs(w)))


def conv2d_ref(x, w):
    """NHWC x HWIO -> NHWO, valid padding, stride 1."""
    kh, kw = w.shape[:2]
    win = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(1, 2))  # N,H',W',C,KH,KW
    return np.einsum("nhwcij,ijco->nhwo", win, w)


def conv2d(c, hw=10, o=16):
    text = f"""ENTRY e {{
  x = f32[1,{hw},{hw},{c}] parameter(0)
  w = f32[3,3,{c},{o}] parameter(1)
  ROOT y = f32[1,{hw - 2},{hw - 2},{o}] convolution(x, w), window={{size=3x3}}, dim_labels=b01f_01io->b01f
}}"""
    return text, [(1, hw, hw, c), (3, 3, c, o)], lambda x, w: (
        conv2d_ref(x, w), conv2d_ref(np.abs(x), np.abs(w)))


def conv_wgrad(c=16, hw=12, b=8, o=72):
    """A weight gradient's form: the batch as features, a whole image as the window."""
    text = f"""ENTRY e {{
  x = f32[{c},{hw},{hw},{b}] parameter(0)
  w = f32[{c},{hw},{hw},{o}] parameter(1)
  ROOT y = f32[1,1,{b},{o}] convolution(x, w), window={{size={hw}x{hw}}}, dim_labels=f01b_i01o->01bf
}}"""
    ref = lambda x, w: np.einsum("cijb,cijo->bo", x, w)[None, None]
    return text, [(c, hw, hw, b), (c, hw, hw, o)], lambda x, w: (ref(x, w), ref(np.abs(x), np.abs(w)))


# (kind, label, program) with the sizes around the four (K = 25,600 dot, K = 1025
# matrix-vector product, 1000-long reduce, long convolution windows).
CASES = (
    [("reduce", f"rows  f32[64,{n}] -> [64]", reduce_rows(n)) for n in (100, 1000, 10000, 100000)]
    + [("reduce", f"cols  f32[{n},64] -> [64]", reduce_cols(n)) for n in (1000, 10000)]
    + [("reduce", f"all   f32[{n}] -> []", reduce_all(n)) for n in (1000, 1000000)]
    + [("dot", f"gemm  16x{k} @ {k}x16", dot(k)) for k in (1024, 4096, 25600)]
    + [("matvec", f"v@W   {k} @ {k}x256", vecmat(k)) for k in (257, 1025, 4097)]
    + [("matvec", f"W@v   256x{k} @ {k}", matvec(k)) for k in (257, 1025, 4097)]
    + [("conv", f"1d    w={kw} c=64 (K={kw * 64})", conv1d(kw)) for kw in (16, 64, 400)]
    + [("conv", f"2d    3x3 c={c} (K={9 * c})", conv2d(c)) for c in (128, 1024)]
    + [("conv", "wgrad 12x12 window, 16 features (K=2304)", conv_wgrad())]
)


def rel_err(y, ref, scale):
    e = np.abs(np.asarray(y, np.float64) - ref) / np.maximum(scale, np.finfo(np.float64).tiny)
    return float(e.max()), float(e.mean())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--axle", default=os.path.join(ROOT, "target", "debug", "axle"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dist", choices=["uniform", "normal"], default="uniform")
    ap.add_argument("--only", default=None, help="run only the cases of this kind")
    ap.add_argument("--no-interpreter", action="store_true")
    a = ap.parse_args()
    import jax
    dev = jax.devices("cpu")[0]
    d = tempfile.mkdtemp(prefix="acc-")
    backends = ["cpu"] + ([] if a.no_interpreter else ["interpreter"])
    cols = ["XLA"] + [f"axle {b}" for b in backends]
    print(f"relative error vs f64 (max / mean), inputs {a.dist}, seed {a.seed}")
    print(f"| kind | program | " + " | ".join(f"{c} max | {c} mean" for c in cols) + " | worst / XLA |")
    print("|---|---|" + "---|---|" * len(cols) + "---|")
    for n, (kind, label, (text, shapes, ref_fn)) in enumerate(CASES):
        if a.only and kind != a.only:
            continue
        rng = np.random.default_rng(a.seed + n)
        if a.dist == "uniform":
            inputs = [rng.random(s, dtype=np.float32) for s in shapes]
        else:
            inputs = [rng.standard_normal(s, dtype=np.float32) for s in shapes]
        ref, scale = ref_fn(*[x.astype(np.float64) for x in inputs])
        path = os.path.join(d, f"case{n}.hlo")
        open(path, "w").write(text)
        paths = []
        for k, x in enumerate(inputs):
            p = os.path.join(d, f"case{n}_in{k}.npy")
            np.save(p, x)
            paths.append(p)
        exe = compile_hlo_text(text)
        outs = exe.execute_sharded([jax.device_put(x, dev) for x in inputs])
        xla = np.asarray(outs.disassemble_into_single_device_arrays()[0][0])
        errs = [rel_err(xla, ref, scale)]
        for b in backends:
            y = axle_outputs(a.axle, path, paths, b, os.path.join(d, f"case{n}_{b}"))[0]
            errs.append(rel_err(y, ref, scale))
        worst = max(e[0] for e in errs[1:]) / max(errs[0][0], 1e-30)
        cells = " | ".join(f"{mx:.2e} | {mn:.2e}" for mx, mn in errs)
        print(f"| {kind} | {label} | {cells} | {worst:.2f} |", flush=True)


if __name__ == "__main__":
    main()
