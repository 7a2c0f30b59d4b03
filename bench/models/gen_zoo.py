"""Held-out-like real models for issue 28: other architectures and other precisions than the seven
of $AXLE_SHARED/models, in the same format, generated with the same harness.

    /work/jaxenv/bin/python bench/models/gen_zoo.py --out DIR [--only a,b]   generate (one process per case)
    /work/jaxenv/bin/python bench/models/gen_zoo.py --list                   list the cases
    /work/jaxenv/bin/python bench/models/gen_zoo.py --out DIR --verify       re-run NAME.hlo through XLA, compare

DIR (outside the repository, e.g. /work/zoodata) receives what `gen_models.py` writes for its own cases:
NAME.hlo, NAME.opt.hlo, NAME.inK.npy, NAME.outK.npy (computed by XLA CPU from the HLO text) and
manifest.json with per-output tolerances calibrated against XLA at one thread and a higher-precision run.
Nothing of the harness is copied: `gen_models` is imported from $AXLE_SHARED/models (default ../shared,
as bench/xla/jax_models.py does) and the cases below register with its `case` decorator, so `generate`,
the tolerance calibration and the manifest code are gen_models' own. Seeds: numpy.random.default_rng(
zlib.crc32(NAME)), so every run writes the same inputs.

Cases (sizes chosen so that the whole set stays under ~2 GB):
- the seven held-out-like models of earlier sessions: ViT-B/16 and MLP-Mixer B/16 inference (batch 4),
  a CIFAR ResNet-18 train step (batch-norm in training mode, SGD with momentum), a GPT-2 small one-token
  decoding step with a KV cache, a WaveNet-style stack of dilated causal 1-D convolutions, a graph network
  with gathers and segment sums (forward + backward), a bf16 transformer-layer train step;
- new ones: MobileNetV2 inference (depthwise convolutions, feature_group_count = channels), a top-2
  mixture-of-experts layer with gather/scatter dispatch (forward + backward), an f16 transformer encoder
  inference, an int8 weight-only quantized SwiGLU MLP (s8 weights dequantized to bf16, f32 accumulation),
  and a Mamba-like selective-scan stack through lax.associative_scan.
"""
import argparse
import math
import os
import subprocess
import sys
import time

import numpy as np

SHARED = os.environ.get("AXLE_SHARED", os.path.join(os.path.dirname(__file__), "../../../shared"))
sys.path.insert(0, os.path.join(SHARED, "models"))
import gen_models as gm  # noqa: E402
from gen_models import BF16, Params, case, conv2d, ln, merge_heads, softmax_attention, split_heads  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

FIRST = len(gm.CASES)  # the cases registered below are gm.CASES[FIRST:]
F16_TOL = (1e-2, 1e-2)


def transformer_block(d, h, x, H, gelu_approx, eps=1e-6):
    """Pre-LN encoder block with a fused qkv projection (weights h+'qkv.w' etc.)."""
    a = ln(x, d[h + "ln1.g"], d[h + "ln1.b"], eps)
    q, k, v = jnp.split(a @ d[h + "qkv.w"] + d[h + "qkv.b"], 3, axis=-1)
    o = merge_heads(softmax_attention(split_heads(q, H), split_heads(k, H), split_heads(v, H)))
    x = x + o @ d[h + "proj.w"] + d[h + "proj.b"]
    a = ln(x, d[h + "ln2.g"], d[h + "ln2.b"], eps)
    y = jax.nn.gelu(a @ d[h + "fc1.w"] + d[h + "fc1.b"], approximate=gelu_approx)
    return x + y @ d[h + "fc2.w"] + d[h + "fc2.b"]


def block_params(p, h, D, F, dtype=np.float32):
    p.gain(h + "ln1.g", D, dtype=dtype); p.bias(h + "ln1.b", D, dtype=dtype)
    p.fan_in(h + "qkv.w", (D, 3 * D), dtype=dtype); p.bias(h + "qkv.b", 3 * D, dtype=dtype)
    p.fan_in(h + "proj.w", (D, D), gain=0.5, dtype=dtype); p.bias(h + "proj.b", D, dtype=dtype)
    p.gain(h + "ln2.g", D, dtype=dtype); p.bias(h + "ln2.b", D, dtype=dtype)
    p.fan_in(h + "fc1.w", (D, F), dtype=dtype); p.bias(h + "fc1.b", F, dtype=dtype)
    p.fan_in(h + "fc2.w", (F, D), gain=0.5, dtype=dtype); p.bias(h + "fc2.b", D, dtype=dtype)


# ===========================================================================
# the seven held-out-like models of earlier sessions
# ===========================================================================
@case("vit_b16_infer", "ViT-B/16 inference (86M params: 16x16 patch convolution, class token, learned positions, 12 "
      "pre-LN layers, d 768, 12 heads, MLP 3072, exact GELU, 1000-class head on the class token), batch 4 x 224x224x3",
      tags=["model", "transformer", "vit", "convolution", "inference"])
def _(rng):
    B, P, D, H, F, L, NC = 4, 16, 768, 12, 3072, 12, 1000
    N = (224 // P) ** 2
    p = Params(rng)
    p.fan_in("patch.w", (P, P, 3, D)); p.bias("patch.b", D)
    p.normal("cls", (1, 1, D), 0.02); p.normal("pos", (1, N + 1, D), 0.02)
    for l in range(L):
        block_params(p, f"b{l}.", D, F)
    p.gain("ln_f.g", D); p.bias("ln_f.b", D)
    p.fan_in("head.w", (D, NC)); p.bias("head.b", NC)
    x = rng.standard_normal((B, 224, 224, 3)).astype(np.float32)

    def f(d):
        t = conv2d(d["images"], d["patch.w"], P, 0) + d["patch.b"]
        t = t.reshape(B, N, D)
        t = jnp.concatenate([jnp.broadcast_to(d["cls"], (B, 1, D)), t], 1) + d["pos"]
        for l in range(L):
            t = transformer_block(d, f"b{l}.", t, H, False)
        t = ln(t, d["ln_f.g"], d["ln_f.b"], 1e-6)
        return (t[:, 0] @ d["head.w"] + d["head.b"],)

    return dict(inputs=[("images", x)] + p.items, f=f, n_params=p.count(), out_names=["logits"])


@case("mixer_b16_infer", "MLP-Mixer B/16 inference (59M params: 16x16 patch convolution to 196 tokens x 768 channels, "
      "12 layers of token-mixing MLP 196-384-196 over the transposed tokens and channel MLP 768-3072-768, exact GELU, "
      "pre-LN, mean pool, 1000-class head), batch 4 x 224x224x3",
      tags=["model", "mlp-mixer", "convolution", "transpose", "inference"])
def _(rng):
    B, P, D, S, DS, DC, L, NC = 4, 16, 768, 196, 384, 3072, 12, 1000
    p = Params(rng)
    p.fan_in("stem.w", (P, P, 3, D)); p.bias("stem.b", D)
    for l in range(L):
        h = f"m{l}."
        p.gain(h + "ln1.g", D); p.bias(h + "ln1.b", D)
        p.fan_in(h + "tok1.w", (S, DS)); p.bias(h + "tok1.b", DS)
        p.fan_in(h + "tok2.w", (DS, S), gain=0.5); p.bias(h + "tok2.b", S)
        p.gain(h + "ln2.g", D); p.bias(h + "ln2.b", D)
        p.fan_in(h + "ch1.w", (D, DC)); p.bias(h + "ch1.b", DC)
        p.fan_in(h + "ch2.w", (DC, D), gain=0.5); p.bias(h + "ch2.b", D)
    p.gain("ln_f.g", D); p.bias("ln_f.b", D)
    p.fan_in("head.w", (D, NC)); p.bias("head.b", NC)
    x = rng.standard_normal((B, 224, 224, 3)).astype(np.float32)

    def f(d):
        t = (conv2d(d["images"], d["stem.w"], P, 0) + d["stem.b"]).reshape(B, S, D)
        for l in range(L):
            h = f"m{l}."
            y = jnp.swapaxes(ln(t, d[h + "ln1.g"], d[h + "ln1.b"], 1e-6), 1, 2)  # [B, D, S]
            y = jax.nn.gelu(y @ d[h + "tok1.w"] + d[h + "tok1.b"], approximate=False) @ d[h + "tok2.w"] + d[h + "tok2.b"]
            t = t + jnp.swapaxes(y, 1, 2)
            y = ln(t, d[h + "ln2.g"], d[h + "ln2.b"], 1e-6)
            t = t + jax.nn.gelu(y @ d[h + "ch1.w"] + d[h + "ch1.b"], approximate=False) @ d[h + "ch2.w"] + d[h + "ch2.b"]
        t = ln(t, d["ln_f.g"], d["ln_f.b"], 1e-6)
        return (jnp.mean(t, 1) @ d["head.w"] + d["head.b"],)

    return dict(inputs=[("images", x)] + p.items, f=f, n_params=p.count(), out_names=["logits"])


@case("resnet18_train_step", "CIFAR ResNet-18 train step (11M params: 3x3 stem, 4 stages of 2 basic blocks, 64/128/256/512 "
      "channels, 1x1 strided projections), batch-norm in training mode (batch statistics, running-statistics update), "
      "batch 32 x 32x32x3, 10 classes, softmax cross-entropy, full backward, SGD with momentum 0.9 and weight decay 5e-4; "
      "outputs loss, new params, new momentum buffers, new running means and variances",
      tags=["model", "cnn", "resnet", "convolution", "batchnorm", "train", "grad", "sgd"])
def _(rng):
    B, NC = 32, 10
    p = Params(rng)
    bn_names = []

    def convbn(name, k, cin, cout):
        p.normal(name + ".w", (k, k, cin, cout), math.sqrt(2.0 / (k * k * cin)))
        p.gain(name + ".g", cout, jitter=0.1); p.bias(name + ".b", cout, std=0.05)
        bn_names.append(name)

    convbn("stem", 3, 3, 64)
    blocks = []
    cin = 64
    for si, (w, s) in enumerate([(64, 1), (128, 2), (256, 2), (512, 2)]):
        for bi in range(2):
            nm = f"s{si}.{bi}"
            stride = s if bi == 0 else 1
            convbn(nm + ".c1", 3, cin, w)
            convbn(nm + ".c2", 3, w, w)
            down = stride != 1 or cin != w
            if down:
                convbn(nm + ".down", 1, cin, w)
            blocks.append((nm, stride, down))
            cin = w
    p.fan_in("fc.w", (512, NC)); p.bias("fc.b", NC)
    pnames = p.names()
    run_mean = [(0.1 * rng.standard_normal(p.items[pnames.index(n + ".g")][1].shape)).astype(np.float32)
                for n in bn_names]
    run_var = [rng.uniform(0.5, 1.5, m.shape).astype(np.float32) for m in run_mean]
    images = rng.standard_normal((B, 32, 32, 3)).astype(np.float32)
    labels = rng.integers(0, NC, B).astype(np.int32)

    def loss_fn(pp, x, y):
        d = dict(zip(pnames, pp))
        stats = {}

        def cbn(x, name, stride=1):
            k = d[name + ".w"].shape[0]
            z = conv2d(x, d[name + ".w"], stride, (k - 1) // 2)
            mu = jnp.mean(z, (0, 1, 2))
            var = jnp.mean(jnp.square(z - mu), (0, 1, 2))
            stats[name] = (mu, var)
            return (z - mu) * lax.rsqrt(var + 1e-5) * d[name + ".g"] + d[name + ".b"]

        h = jax.nn.relu(cbn(x, "stem"))
        for nm, stride, down in blocks:
            o = jax.nn.relu(cbn(h, nm + ".c1", stride))
            o = cbn(o, nm + ".c2")
            h = jax.nn.relu(o + (cbn(h, nm + ".down", stride) if down else h))
        logits = jnp.mean(h, (1, 2)) @ d["fc.w"] + d["fc.b"]
        lp = jax.nn.log_softmax(logits)
        loss = -jnp.mean(jnp.take_along_axis(lp, y[:, None], 1))
        return loss, [stats[n] for n in bn_names]

    g0 = jax.jit(jax.grad(lambda pp: loss_fn(pp, images, labels)[0]))([a for _, a in p.items])
    moms = gm.state_like_grads(rng, [np.asarray(g) for g in g0], "mom")
    lr, mom, wd, bnm = 0.1, 0.9, 5e-4, 0.1

    def f(d):
        pp = [d[n] for n in pnames]
        (loss, stats), gr = jax.value_and_grad(loss_fn, has_aux=True)(pp, d["images"], d["labels"])
        new_p, new_m = [], []
        for n, w, g in zip(pnames, pp, gr):
            g = g + wd * w if w.ndim >= 2 else g
            m = mom * d["mom." + n] + g
            new_p.append(w - lr * m); new_m.append(m)
        nrm, nrv = [], []
        for n, (mu, var) in zip(bn_names, stats):
            nrm.append((1 - bnm) * d["rm." + n] + bnm * mu)
            nrv.append((1 - bnm) * d["rv." + n] + bnm * var)
        return (loss, *new_p, *new_m, *nrm, *nrv)

    inputs = [("images", images), ("labels", labels)] + p.items + \
             [("mom." + n, a) for n, a in zip(pnames, moms)] + \
             [("rm." + n, a) for n, a in zip(bn_names, run_mean)] + [("rv." + n, a) for n, a in zip(bn_names, run_var)]
    outn = ["loss"] + ["new." + n for n in pnames] + ["new.mom." + n for n in pnames] + \
           ["new.rm." + n for n in bn_names] + ["new.rv." + n for n in bn_names]
    return dict(inputs=inputs, f=f, n_params=p.count(), out_names=outn)


@case("gpt2_small_decode_step", "GPT-2 small (124M params, vocab 50257) one-token decoding step at position 200 of a "
      "256-long KV cache: embeddings of the token and position, 12 layers each writing its new key/value into the cache "
      "with dynamic-update-slice and attending over the cache under a position mask; outputs logits [1, 50257] and the "
      "updated k/v caches [12, 1, 12, 256, 64]",
      tags=["model", "transformer", "gpt2", "decode", "kv-cache", "dynamic-update-slice", "inference"])
def _(rng):
    c = gm.GPT2
    L, D, H = c["L"], c["D"], c["H"]
    Dh, S, POS = D // H, 256, 200
    kc = np.zeros((L, 1, H, S, Dh), np.float32)
    vc = np.zeros((L, 1, H, S, Dh), np.float32)
    kc[:, :, :, :POS] = rng.standard_normal((L, 1, H, POS, Dh)).astype(np.float32)
    vc[:, :, :, :POS] = rng.standard_normal((L, 1, H, POS, Dh)).astype(np.float32)
    p = gm.gpt2_params(rng)
    token = rng.integers(0, c["V"], (1, 1)).astype(np.int32)

    def f(d):
        pos = d["position"]
        z = jnp.zeros((), pos.dtype)  # start indices of one type (the f64 calibration run enables x64)
        x = d["wte"][d["token"]] + lax.dynamic_slice_in_dim(d["wpe"], pos, 1)[None]  # [1, 1, D]
        visible = (jnp.arange(S) <= pos)[None, None, None, :]
        ks, vs = [], []
        for l in range(L):
            h = f"h{l}."
            a = ln(x, d[h + "ln_1.g"], d[h + "ln_1.b"])
            q, k, v = jnp.split(a @ d[h + "attn.c_attn.w"] + d[h + "attn.c_attn.b"], 3, axis=-1)
            q, k, v = split_heads(q, H), split_heads(k, H), split_heads(v, H)  # [1, H, 1, Dh]
            kl = lax.dynamic_update_slice(d["k_cache"][l], k, (z, z, pos, z))
            vl = lax.dynamic_update_slice(d["v_cache"][l], v, (z, z, pos, z))
            ks.append(kl); vs.append(vl)
            o = merge_heads(softmax_attention(q, kl, vl, visible))
            x = x + o @ d[h + "attn.c_proj.w"] + d[h + "attn.c_proj.b"]
            x = x + gm.gpt2_mlp(d, h, ln(x, d[h + "ln_2.g"], d[h + "ln_2.b"]))
        x = ln(x, d["ln_f.g"], d["ln_f.b"])
        return (jnp.einsum("btd,vd->btv", x, d["wte"])[:, 0], jnp.stack(ks), jnp.stack(vs))

    inputs = [("token", token), ("position", np.array(POS, np.int32)), ("k_cache", kc), ("v_cache", vc)] + p.items
    return dict(inputs=inputs, f=f, n_params=p.count(), out_names=["logits", "k_cache", "v_cache"])


@case("wavenet_dilated_conv1d", "WaveNet-style stack: causal 1-D input convolution to 64 channels, 2 stacks x 10 layers of "
      "dilated causal convolutions (kernel 2, dilation 1..512, 64 -> 2x64) with tanh x sigmoid gates, 1x1 residual and "
      "skip (256) convolutions, ReLU + two 1x1 convolutions to 256 logits; batch 4 x 4096 samples",
      tags=["model", "cnn", "wavenet", "convolution", "conv1d", "dilation", "inference"])
def _(rng):
    B, T, R, S, Q = 4, 4096, 64, 256, 256
    dil = [2 ** i for i in range(10)] * 2
    p = Params(rng)
    p.fan_in("in.w", (2, 1, R)); p.bias("in.b", R)
    for i in range(len(dil)):
        h = f"l{i}."
        p.fan_in(h + "dil.w", (2, R, 2 * R)); p.bias(h + "dil.b", 2 * R)
        p.fan_in(h + "res.w", (1, R, R), gain=0.5); p.bias(h + "res.b", R)
        p.fan_in(h + "skip.w", (1, R, S)); p.bias(h + "skip.b", S)
    p.fan_in("out1.w", (1, S, S), gain=1 / math.sqrt(len(dil))); p.bias("out1.b", S)
    p.fan_in("out2.w", (1, S, Q)); p.bias("out2.b", Q)
    wav = np.tanh(np.cumsum(0.05 * rng.standard_normal((B, T, 1)), 1)).astype(np.float32)

    def conv1d(x, w, dilation=1):
        k = w.shape[0]
        return lax.conv_general_dilated(x, w, (1,), [((k - 1) * dilation, 0)], rhs_dilation=(dilation,),
                                        dimension_numbers=("NWC", "WIO", "NWC"))

    def f(d):
        x = conv1d(d["audio"], d["in.w"]) + d["in.b"]
        skip = 0.0
        for i, dl in enumerate(dil):
            h = f"l{i}."
            z = conv1d(x, d[h + "dil.w"], dl) + d[h + "dil.b"]
            g = jnp.tanh(z[..., :R]) * jax.nn.sigmoid(z[..., R:])
            skip = skip + conv1d(g, d[h + "skip.w"]) + d[h + "skip.b"]
            x = x + conv1d(g, d[h + "res.w"]) + d[h + "res.b"]
        y = conv1d(jax.nn.relu(skip), d["out1.w"]) + d["out1.b"]
        return (conv1d(jax.nn.relu(y), d["out2.w"]) + d["out2.b"],)

    return dict(inputs=[("audio", wav)] + p.items, f=f, n_params=p.count(), out_names=["logits"])


@case("graph_net_segment_sum", "graph network, forward + backward: 8192 nodes, 65536 edges (src/dst indices), node and "
      "edge features encoded to 64, 3 message-passing rounds (edge MLP on [h_src, h_dst, e] gathered by index, "
      "segment_sum of messages to destinations = scatter-add, node MLP with residual, LayerNorm), node regression loss; "
      "outputs loss and the gradients of all 36 parameter arrays",
      tags=["model", "gnn", "gather", "scatter", "segment-sum", "train", "grad"])
def _(rng):
    N, E, FN, FE, D, R = 8192, 65536, 32, 16, 64, 3
    p = Params(rng)
    p.fan_in("enc_n.w", (FN, D)); p.bias("enc_n.b", D)
    p.fan_in("enc_e.w", (FE, D)); p.bias("enc_e.b", D)
    for r in range(R):
        h = f"r{r}."
        p.fan_in(h + "e1.w", (3 * D, D)); p.bias(h + "e1.b", D)
        p.fan_in(h + "e2.w", (D, D)); p.bias(h + "e2.b", D)
        p.fan_in(h + "n1.w", (2 * D, D)); p.bias(h + "n1.b", D)
        p.fan_in(h + "n2.w", (D, D), gain=0.5); p.bias(h + "n2.b", D)
        p.gain(h + "ln.g", D); p.bias(h + "ln.b", D)
    p.fan_in("dec.w", (D, 4)); p.bias("dec.b", 4)
    pnames = p.names()
    xn = rng.standard_normal((N, FN)).astype(np.float32)
    xe = rng.standard_normal((E, FE)).astype(np.float32)
    # a power-law-ish graph: destinations skewed towards low node ids, sources uniform
    dst = np.minimum((N * rng.power(0.6, E)).astype(np.int32), N - 1)
    src = rng.integers(0, N, E).astype(np.int32)
    tgt = rng.standard_normal((N, 4)).astype(np.float32)

    def loss_fn(pp, xn, xe, src, dst, tgt):
        d = dict(zip(pnames, pp))
        h = jax.nn.relu(xn @ d["enc_n.w"] + d["enc_n.b"])
        e = jax.nn.relu(xe @ d["enc_e.w"] + d["enc_e.b"])
        for r in range(R):
            k = f"r{r}."
            m = jnp.concatenate([h[src], h[dst], e], -1)
            m = jax.nn.relu(m @ d[k + "e1.w"] + d[k + "e1.b"]) @ d[k + "e2.w"] + d[k + "e2.b"]
            agg = jax.ops.segment_sum(m, dst, num_segments=N)
            u = jax.nn.relu(jnp.concatenate([h, agg], -1) @ d[k + "n1.w"] + d[k + "n1.b"]) @ d[k + "n2.w"] + d[k + "n2.b"]
            h = ln(h + u, d[k + "ln.g"], d[k + "ln.b"])
            e = e + m
        y = h @ d["dec.w"] + d["dec.b"]
        return jnp.mean(jnp.square(y - tgt))

    def f(d):
        loss, gr = jax.value_and_grad(loss_fn)([d[n] for n in pnames], d["node_x"], d["edge_x"], d["src"], d["dst"],
                                               d["target"])
        return (loss, *gr)

    inputs = [("node_x", xn), ("edge_x", xe), ("src", src), ("dst", dst), ("target", tgt)] + p.items
    return dict(inputs=inputs, f=f, n_params=p.count(), out_names=["loss"] + ["grad." + n for n in pnames])


@case("bf16_transformer_layer_train", "bf16 transformer layer train step: pre-LN (statistics in f32), d 1024, 16 heads, "
      "MLP 4096 (tanh GELU), causal attention, batch 2 x seq 512, bf16 weights and activations, f32 mean-squared loss "
      "against a target, full backward, SGD lr 0.01 on the bf16 weights; outputs loss (f32) and the new weights (bf16)",
      tags=["model", "transformer", "bf16", "mixed-precision", "train", "grad"], hp="f32")
def _(rng):
    B, T, D, H, F = 2, 512, 1024, 16, 4096
    p = Params(rng)
    block_params(p, "", D, F, dtype=BF16)
    pnames = p.names()
    x = rng.standard_normal((B, T, D)).astype(BF16)
    tgt = rng.standard_normal((B, T, D)).astype(BF16)

    def lnf(x, g, b):  # LayerNorm statistics in f32, as mixed-precision code does
        y = ln(x.astype(jnp.float32), g.astype(jnp.float32), b.astype(jnp.float32))
        return y.astype(x.dtype)

    def loss_fn(pp, x, tgt):
        d = dict(zip(pnames, pp))
        a = lnf(x, d["ln1.g"], d["ln1.b"])
        q, k, v = jnp.split(a @ d["qkv.w"] + d["qkv.b"], 3, axis=-1)
        mask = jnp.tril(jnp.ones((T, T), bool))
        o = merge_heads(softmax_attention(split_heads(q, H), split_heads(k, H), split_heads(v, H), mask))
        x = x + o @ d["proj.w"] + d["proj.b"]
        a = lnf(x, d["ln2.g"], d["ln2.b"])
        x = x + jax.nn.gelu(a @ d["fc1.w"] + d["fc1.b"], approximate=True) @ d["fc2.w"] + d["fc2.b"]
        return jnp.mean(jnp.square(x.astype(jnp.float32) - tgt.astype(jnp.float32)))

    def f(d):
        pp = [d[n] for n in pnames]
        loss, gr = jax.value_and_grad(loss_fn)(pp, d["x"], d["target"])
        return (loss, *[(w - 0.01 * g).astype(w.dtype) for w, g in zip(pp, gr)])

    return dict(inputs=[("x", x), ("target", tgt)] + p.items, f=f, n_params=p.count(),
                out_names=["loss"] + ["new." + n for n in pnames])


# ===========================================================================
# new architectures and precisions
# ===========================================================================
MBV2 = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]


@case("mobilenetv2_infer", "MobileNetV2 1.0 inference (3.5M params: 3x3/2 stem, 17 inverted residual blocks of 1x1 "
      "expansion, 3x3 depthwise convolution (feature_group_count = channels, strides 1 and 2) and 1x1 linear projection, "
      "batch-norm folded into scale/shift, ReLU6, 1x1 to 1280, global average pool, 1000-class dense), batch 8 x "
      "224x224x3",
      tags=["model", "cnn", "mobilenet", "convolution", "depthwise", "inference"])
def _(rng):
    B = 8
    p = Params(rng)

    def convbn(name, k, cin, cout, depthwise=False, last=False):
        shape = (k, k, 1, cout) if depthwise else (k, k, cin, cout)
        p.normal(name + ".w", shape, math.sqrt(2.0 / (k * k * (1 if depthwise else cin))))
        p.gain(name + ".scale", cout, center=0.3 if last else 1.0, jitter=0.1)
        p.bias(name + ".shift", cout, std=0.05)

    convbn("stem", 3, 3, 32)
    blocks = []
    cin = 32
    for bi, (t, c, n, s) in enumerate(MBV2):
        for i in range(n):
            nm = f"b{bi}.{i}"
            hid = cin * t
            if t != 1:
                convbn(nm + ".expand", 1, cin, hid)
            convbn(nm + ".dw", 3, hid, hid, depthwise=True)
            convbn(nm + ".project", 1, hid, c, last=True)
            blocks.append((nm, t != 1, s if i == 0 else 1, cin == c and (s if i == 0 else 1) == 1))
            cin = c
    convbn("head", 1, 320, 1280)
    p.fan_in("fc.w", (1280, 1000)); p.bias("fc.b", 1000)
    x = rng.standard_normal((B, 224, 224, 3)).astype(np.float32)

    def f(d):
        def cb(x, name, stride=1, groups=1):
            w = d[name + ".w"]
            k = w.shape[0]
            y = lax.conv_general_dilated(x, w, (stride, stride), [((k - 1) // 2, (k - 1) // 2)] * 2,
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=groups)
            return y * d[name + ".scale"] + d[name + ".shift"]

        relu6 = lambda v: jnp.clip(v, 0.0, 6.0)  # noqa: E731
        h = relu6(cb(d["images"], "stem", 2))
        for nm, expand, stride, resid in blocks:
            y = relu6(cb(h, nm + ".expand")) if expand else h
            y = relu6(cb(y, nm + ".dw", stride, groups=y.shape[-1]))
            y = cb(y, nm + ".project")
            h = h + y if resid else y
        h = relu6(cb(h, "head"))
        return (jnp.mean(h, (1, 2)) @ d["fc.w"] + d["fc.b"],)

    return dict(inputs=[("images", x)] + p.items, f=f, n_params=p.count(), out_names=["logits"])


@case("moe_top2_train", "mixture-of-experts layer, forward + backward: 1024 tokens (4 x 256) of d 512, pre-LN, softmax "
      "router over 8 experts with top-2 routing (lax.top_k), capacity 320 per expert (factor 1.25), dispatch by "
      "scatter of token ids into expert slots and gather of their rows, expert GELU MLPs 512-2048-512 as batched dots, "
      "combine by gate-weighted scatter-add, residual; loss = mean-squared error + 0.01 x load-balancing loss; outputs "
      "loss and the gradients of the input and of all parameters",
      tags=["model", "moe", "top-k", "gather", "scatter", "train", "grad"])
def _(rng):
    B, S, D, E, F, K = 4, 256, 512, 8, 2048, 2
    T = B * S
    C = int(math.ceil(K * T / E * 1.25))
    p = Params(rng)
    p.gain("ln.g", D); p.bias("ln.b", D)
    p.normal("router.w", (D, E), 0.1)
    p.fan_in("w1", (E, D, F), fan_in=D); p.bias("b1", (E, F))
    p.fan_in("w2", (E, F, D), fan_in=F, gain=0.5); p.bias("b2", (E, D))
    pnames = p.names()
    x = rng.standard_normal((B, S, D)).astype(np.float32)
    tgt = rng.standard_normal((B, S, D)).astype(np.float32)

    def loss_fn(pp, x, tgt):
        d = dict(zip(pnames, pp))
        xt = x.reshape(T, D)
        a = ln(xt, d["ln.g"], d["ln.b"])
        probs = jax.nn.softmax(a @ d["router.w"], -1)  # [T, E]
        gate, expert = lax.top_k(probs, K)  # [T, K]
        gate = gate / jnp.sum(gate, -1, keepdims=True)
        onehot = jax.nn.one_hot(expert, E, dtype=jnp.int32)  # [T, K, E]
        # slot of each (token, choice) in its expert: first choices before second choices, in token order
        order = jnp.transpose(onehot, (1, 0, 2)).reshape(K * T, E)
        pos = (jnp.cumsum(order, 0) - 1).reshape(K, T, E).transpose(1, 0, 2)
        pos = jnp.sum(pos * onehot, -1)  # [T, K]
        keep = pos < C
        slot = jnp.where(keep, expert * C + pos, E * C)  # dropped assignments go out of range
        tok = jnp.broadcast_to(jnp.arange(T, dtype=jnp.int32)[:, None], (T, K))
        slot_tok = jnp.zeros(E * C, jnp.int32).at[slot.reshape(-1)].set(tok.reshape(-1), mode="drop")
        slot_gate = jnp.zeros(E * C, a.dtype).at[slot.reshape(-1)].set((gate * keep).reshape(-1), mode="drop")
        xin = a[slot_tok].reshape(E, C, D)
        h = jax.nn.gelu(jnp.einsum("ecd,edf->ecf", xin, d["w1"]) + d["b1"][:, None], approximate=False)
        out = jnp.einsum("ecf,efd->ecd", h, d["w2"]) + d["b2"][:, None]
        y = jnp.zeros((T, D), a.dtype).at[slot_tok].add(out.reshape(E * C, D) * slot_gate[:, None])
        z = xt + y
        frac = jnp.mean(jnp.sum(onehot, 1).astype(probs.dtype), 0)  # tokens routed per expert
        aux = E * jnp.sum(frac * jnp.mean(probs, 0)) / K
        return jnp.mean(jnp.square(z - tgt.reshape(T, D))) + 0.01 * aux

    def f(d):
        loss, (gp, gx) = jax.value_and_grad(loss_fn, argnums=(0, 1))([d[n] for n in pnames], d["x"], d["target"])
        return (loss, gx, *gp)

    return dict(inputs=[("x", x), ("target", tgt)] + p.items, f=f, n_params=p.count(),
                out_names=["loss", "grad.x"] + ["grad." + n for n in pnames])


@case("f16_encoder_infer", "f16 transformer encoder inference: 4 pre-LN layers, d 512, 8 heads, MLP 2048 (tanh GELU), "
      "all weights and activations in f16 (LayerNorm statistics in f32), batch 8 x seq 256 -> f16 hidden states",
      tol=F16_TOL, tags=["model", "transformer", "f16", "inference"], hp=None)
def _(rng):
    B, T, D, H, F, L = 8, 256, 512, 8, 2048, 4
    p = Params(rng)
    for l in range(L):
        block_params(p, f"b{l}.", D, F, dtype=np.float16)
    x = rng.standard_normal((B, T, D)).astype(np.float16)

    def f(d):
        t = d["x"]
        for l in range(L):
            h = f"b{l}."
            a = ln(t.astype(jnp.float32), d[h + "ln1.g"], d[h + "ln1.b"]).astype(t.dtype)
            q, k, v = jnp.split(a @ d[h + "qkv.w"] + d[h + "qkv.b"], 3, axis=-1)
            o = merge_heads(softmax_attention(split_heads(q, H), split_heads(k, H), split_heads(v, H)))
            t = t + o @ d[h + "proj.w"] + d[h + "proj.b"]
            a = ln(t.astype(jnp.float32), d[h + "ln2.g"], d[h + "ln2.b"]).astype(t.dtype)
            t = t + jax.nn.gelu(a @ d[h + "fc1.w"] + d[h + "fc1.b"], approximate=True) @ d[h + "fc2.w"] + d[h + "fc2.b"]
        return (t,)

    return dict(inputs=[("x", x)] + p.items, f=f, n_params=p.count(), out_names=["hidden"])


@case("int8_weight_only_mlp", "int8 weight-only quantized SwiGLU MLP inference (LLaMA-style, d 1024, hidden 2816): s8 "
      "weight matrices with per-output-channel f32 scales, dequantized to bf16 and multiplied with bf16 activations "
      "(preferred_element_type f32), 256 tokens, two stacked MLPs with residuals -> bf16",
      tags=["model", "mlp", "int8", "quantized", "bf16", "mixed-precision", "inference"], hp="f32")
def _(rng):
    T, D, F, L = 256, 1024, 2816, 2
    items = []
    for l in range(L):
        for n, (k, m) in (("gate", (D, F)), ("up", (D, F)), ("down", (F, D))):
            w = rng.standard_normal((k, m)) / math.sqrt(k)
            s = np.abs(w).max(0) / 127.0
            items.append((f"l{l}.{n}.q", np.clip(np.round(w / s), -127, 127).astype(np.int8)))
            items.append((f"l{l}.{n}.scale", s.astype(np.float32)))
    x = rng.standard_normal((T, D)).astype(BF16)

    def f(d):
        def qdot(a, n):
            w = (d[n + ".q"].astype(jnp.float32) * d[n + ".scale"]).astype(a.dtype)
            return lax.dot(a, w, preferred_element_type=jnp.float32)

        t = d["x"]
        for l in range(L):
            h = f"l{l}."
            g = jax.nn.silu(qdot(t, h + "gate")) * qdot(t, h + "up")
            t = (t.astype(jnp.float32) + qdot(g.astype(t.dtype), h + "down")).astype(t.dtype)
        return (t,)

    return dict(inputs=[("x", x)] + items, f=f, n_params=int(sum(a.size for n, a in items if n.endswith(".q"))),
                out_names=["y"])


@case("mamba_selective_scan", "Mamba-like selective-scan stack, inference: 2 layers of RMSNorm, input projection d 256 -> "
      "2 x 512, causal depthwise 1-D convolution (kernel 4, feature_group_count 512), SiLU, input-dependent dt (rank 16, "
      "softplus), B and C (state 16), discretized linear recurrence h_t = exp(dt A) h_{t-1} + dt B x_t over 512 steps "
      "through lax.associative_scan, y = C h + D x gated by SiLU(z), output projection, residual; batch 2",
      tags=["model", "ssm", "mamba", "associative-scan", "conv1d", "depthwise", "inference"])
def _(rng):
    B, Lq, D, E, N, R, L = 2, 512, 256, 512, 16, 16, 2
    p = Params(rng)
    for l in range(L):
        h = f"l{l}."
        p.gain(h + "norm.g", D)
        p.fan_in(h + "in.w", (D, 2 * E))
        p.fan_in(h + "conv.w", (4, 1, E), fan_in=4); p.bias(h + "conv.b", E)
        p.fan_in(h + "x.w", (E, R + 2 * N))
        p.fan_in(h + "dt.w", (R, E)); p.add(h + "dt.b", np.log(np.expm1(rng.uniform(1e-3, 1e-1, E))).astype(np.float32))
        p.add(h + "A_log", np.log(np.tile(np.arange(1, N + 1, dtype=np.float32), (E, 1))))
        p.gain(h + "D", E)
        p.fan_in(h + "out.w", (E, D), gain=0.5)
    x = rng.standard_normal((B, Lq, D)).astype(np.float32)

    def f(d):
        t = d["x"]
        for l in range(L):
            h = f"l{l}."
            a = t * lax.rsqrt(jnp.mean(jnp.square(t), -1, keepdims=True) + 1e-5) * d[h + "norm.g"]
            u, z = jnp.split(a @ d[h + "in.w"], 2, -1)  # [B, L, E]
            u = lax.conv_general_dilated(u, d[h + "conv.w"], (1,), [(3, 0)], dimension_numbers=("NWC", "WIO", "NWC"),
                                         feature_group_count=E) + d[h + "conv.b"]
            u = jax.nn.silu(u)
            dbc = u @ d[h + "x.w"]
            dt = jax.nn.softplus(dbc[..., :R] @ d[h + "dt.w"] + d[h + "dt.b"])  # [B, L, E]
            Bm, Cm = dbc[..., R:R + N], dbc[..., R + N:]  # [B, L, N]
            A = -jnp.exp(d[h + "A_log"])  # [E, N]
            dA = jnp.exp(dt[..., None] * A)  # [B, L, E, N]
            dBx = (dt * u)[..., None] * Bm[:, :, None, :]

            def comb(p1, p2):
                return p2[0] * p1[0], p2[0] * p1[1] + p2[1]

            _, hs = lax.associative_scan(comb, (dA, dBx), axis=1)
            y = jnp.einsum("blen,bln->ble", hs, Cm) + d[h + "D"] * u
            t = t + (y * jax.nn.silu(z)) @ d[h + "out.w"]
        return (t,)

    return dict(inputs=[("x", x)] + p.items, f=f, n_params=p.count(), out_names=["y"])


CASES = gm.CASES[FIRST:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--only", default="")
    ap.add_argument("--case", default=None, help="(internal) generate one case in this process")
    ap.add_argument("--verify", action="store_true")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    names = [c["name"] for c in CASES]
    if a.list:
        print("\n".join(names))
        return
    if not a.out:
        ap.error("--out DIR is required (outside the repository)")
    os.makedirs(a.out, exist_ok=True)
    only = [x for x in a.only.split(",") if x]
    for n in only:
        if n not in names:
            ap.error(f"unknown case {n}")
    if a.verify:
        sys.exit(1 if gm.verify(a.out, only) else 0)
    if a.case:
        gm.generate(next(c for c in CASES if c["name"] == a.case), a.out)
        man = gm.load_manifest(a.out)
        man["generator"] = "bench/models/gen_zoo.py (harness: $AXLE_SHARED/models/gen_models.py)"
        gm.save_manifest(a.out, man)
        return
    failed = []
    for n in only or names:
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--case", n, "--out", a.out])
        print(f"== {n}: {'ok' if r.returncode == 0 else 'FAILED'} ({time.perf_counter() - t0:.0f} s)", flush=True)
        if r.returncode != 0:
            failed.append(n)
    if failed:
        print("FAILED:", ", ".join(failed))
        sys.exit(1)


if __name__ == "__main__":
    main()
