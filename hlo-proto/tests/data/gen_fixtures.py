"""Serialized HloModuleProto fixtures written by XLA itself, for hlo-proto/tests/xla_fixtures.rs.

Each fixture NAME.pb is what XLA (jaxlib 0.10.2) gives for an HLO text:
`xla_client.hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto()`, the bytes a PJRT
client sends as format "hlo". The texts are corpus cases of the shared data (CASES below,
`$AXLE_SHARED/corpus/FILE`), `literals.hlo` here (constants of every element type XLA's literal
proto stores differently: sub-byte integers, the newer 8- and 4-bit floats, complex, and an
array in a non-default layout) `mulhi.hlo` here (`mulhi`, which no corpus case has), `psum_scan.hlo` here (a `pmap` of a
`lax.scan` with `psum` over one device: an all-reduce with replica groups and global device ids)
and `dot_algorithms.hlo` here (dots naming each f32/f64 algorithm of XLA's enum, JAX's
`DotAlgorithmPreset`s).

Regenerate (from the repository root):
    /work/jaxenv/bin/python hlo-proto/tests/data/gen_fixtures.py
"""

import os
import sys

from jax._src.lib import xla_client

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.environ.get("AXLE_SHARED", os.path.join(HERE, "../../../../shared"))
if not os.path.isdir(SHARED):
    SHARED = "/work/shared"

# (fixture name, corpus file): convolutions, batched dot, gather and scatter, while and
# conditional, a reduce of a tuple, sort, bf16, and an optimized (scheduled, fused, custom-call)
# module.
CASES = [
    ("conv_nhwc_stride", "conv_nhwc_stride.hlo"),
    ("conv_nchw_depthwise_dilated", "conv_nchw_depthwise_dilated.hlo"),
    ("dot_general_batch", "dot_general_batch.hlo"),
    ("gather_embedding", "gather_embedding.hlo"),
    ("scatter_add_set", "scatter_add_set.hlo"),
    ("while_collatz", "while_collatz.hlo"),
    ("cond_switch", "cond_switch.hlo"),
    ("argmax_multi_reduce", "argmax_multi_reduce.hlo"),
    ("sort_multi_operand", "sort_multi_operand.hlo"),
    ("bf16_mlp", "bf16_mlp.hlo"),
    ("maxpool_grad", "maxpool_grad.hlo"),
    ("topk_logsumexp_opt", "topk_logsumexp.opt.hlo"),
]


def write(name, text):
    module = xla_client.hlo.hlo_module_from_text(text)
    data = module.as_serialized_hlo_module_proto()
    with open(os.path.join(HERE, name + ".pb"), "wb") as f:
        f.write(data)
    print(f"{name}.pb: {len(data)} bytes")


def main():
    for name, file in CASES:
        with open(os.path.join(SHARED, "corpus", file)) as f:
            write(name, f.read())
    for name in ["literals", "mulhi", "psum_scan", "dot_algorithms"]:
        with open(os.path.join(HERE, name + ".hlo")) as f:
            write(name, f.read())


if __name__ == "__main__":
    sys.exit(main())
