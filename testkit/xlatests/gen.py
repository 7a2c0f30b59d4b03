#!/usr/bin/env python3
"""Reference outputs from XLA CPU for the HLO modules of XLA's own tests.

Usage (with jax/jaxlib 0.10.2):
    gen.py MODULES_JSON [--out DIR] [--jobs N] [--timeout S] [--only-file NAMES] [--only NAME...]

MODULES_JSON is what extract.py writes. For each module this compiles the text on XLA CPU with
`compile_hlo_text` of $AXLE_SHARED/baseline/baseline.py (default ../shared), makes seeded inputs for the entry parameters (seed =
zlib.crc32(NAME)), runs it, and writes beside this file `NAME.hlo`, `NAME.inK.npy`,
`NAME.outK.npy` and a `manifest.json` in the format of ../shared/corpus (plus each case's origin
in XLA's sources). Modules that do not become a case are listed in `skipped.json` with the
reason: XLA rejects the text or fails to run it, a tuple or token parameter, an element type
`.npy` cannot carry, data too large to keep in the repository, or a run past the time limit.

A module that extract.py gives `replicas` and `partitions` (collectives its test runs on
several devices) runs on that many XLA CPU devices (the worker forces 8 host devices; replica r,
partition p is device r * partitions + p, XLA's default assignment), every device getting the
same inputs; device D's outputs are written as `NAME.dD.outK.npy` and the manifest entry records
`replicas` and `partitions` (its outputs' `file` names device 0's).

`--out DIR` writes the cases, `manifest.json` and `skipped.json` into DIR instead of beside
this file (the passes' cases are made in a scratch directory first: README). `--jobs N` runs N
modules at a time (one XLA process each); `--timeout S` gives each module S seconds (default TIMEOUT_S) before its process is killed and the module skipped as a timeout.
A module whose entry parameters and result (as its `entry_computation_layout` declares them)
exceed the size limit is skipped before XLA runs it.

With `--only NAME...` (or `--only-file` naming a file of names) only those modules are run: their files are replaced and their entries in
`manifest.json` and `skipped.json` updated, the rest left as they are.

Inputs: floats are normals with standard deviation 1 (complex: both parts), signed integers
uniform in [-3, 4], unsigned in [0, 7], pred fair coin flips. Small integers keep most indices of
gathers, dynamic slices and scatters in range; where one is out of range XLA's clamping or
skipping is defined and the case checks it. An entry parameter that is a runtime size (an
operand after the first of `set-dimension-size` or `dynamic-reshape`) is the number it is named
for (XLA's tests name them so: `two`, `nine`), else uniform in [0, bound] of the dimension it
sizes: a size out of range leaves XLA's answer undefined.

Dynamic results: XLA CPU returns an output with bounded dynamic dimensions in a buffer of its
bound, its defined elements packed at the front (row-major over the runtime sizes, as XLA's
literal holds them), the rest uninitialized. Its sizes come from a second module XLA runs on the same
inputs (the entry's result kept, `get-dimension-size` of each dynamic dimension of each leaf
returned instead), and the output written is the defined part (XLA's literal), its manifest
entry giving the padded shape as `bound`.
"""
import json
import multiprocessing as mp
import multiprocessing.connection  # noqa: F401 (mp.connection.wait)
import os
import re
import sys
import time
import zlib

import ml_dtypes
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "testkit"))
# XLA CPU is reached through the shared baseline's compile_hlo_text (imported in the worker,
# after JAX is configured).
sys.path.insert(0, os.path.join(os.environ.get("AXLE_SHARED") or os.path.join(ROOT, "..", "shared"),
                                "baseline"))
from shape_list import split_top  # noqa: E402
# Per case, the bytes of its inputs and outputs together: larger cases are skipped.
MAX_CASE_BYTES = 96 * 1024
# Host devices the worker's XLA CPU client has (the most any module here asks for).
HOST_DEVICES = 8
# Where the cases are written (`--out DIR`; default beside this file).
OUT = HERE
# Seconds XLA may take to compile and run one module.
TIMEOUT_S = 10

NP = {
    "pred": np.bool_, "s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64,
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
    "f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64,
    "c64": np.complex64, "c128": np.complex128, "s4": ml_dtypes.int4, "u4": ml_dtypes.uint4,
    "s2": ml_dtypes.int2, "u2": ml_dtypes.uint2,
}
# How each element type is stored in a .npy file (the corpus's conventions).
CARRIER = {"bf16": np.uint16, "s4": np.int8, "u4": np.uint8, "s2": np.int8, "u2": np.uint8}
TOLERANCE = {
    "f16": {"rtol": 1e-2, "atol": 1e-2}, "bf16": {"rtol": 2e-2, "atol": 2e-2},
    "f32": {"rtol": 1e-4, "atol": 1e-5}, "c64": {"rtol": 1e-4, "atol": 1e-5},
    "f64": {"rtol": 1e-10, "atol": 1e-12}, "c128": {"rtol": 1e-10, "atol": 1e-12},
}


def dname(dt):
    for k, v in NP.items():
        if np.dtype(v) == dt:
            return k
    raise ValueError(f"no element type for {dt}")


def entry_params(module_text):
    """The entry parameters' shapes, from the `entry_computation_layout` XLA prints."""
    header = re.sub(r"/\*.*?\*/", "", module_text.splitlines()[0])
    m = re.search(r"entry_computation_layout=\{\((.*)\)->", header)
    if not m:
        raise ValueError("no entry_computation_layout")
    params = []
    for p in split_top(m.group(1)):
        if p.startswith("(") or p.startswith("token"):
            raise ValueError(f"a tuple or token parameter ({p})")
        t = re.match(r"([a-z0-9]+)\[([0-9,]*)\]", p)
        if not t:
            raise ValueError(f"unreadable parameter shape {p}")
        dims = [int(d) for d in t.group(2).split(",") if d]
        params.append((t.group(1), dims))
    return params


# Bits per element of each type, for the size check before a module runs.
BITS = {"pred": 8, "s2": 2, "u2": 2, "s4": 4, "u4": 4, "bf16": 16, "c64": 64, "c128": 128}


# The largest array a module may hold anywhere (XLA CPU and the test would allocate it).
MAX_ARRAY_BYTES = 16 << 20


def array_bytes(text):
    """Bytes of each array shape written in `text` (a token counts nothing)."""
    sizes = []
    for ty, dims in re.findall(r"\b([a-z][a-z0-9]*)\[([0-9,]*)\]", text):
        if ty == "token":
            continue
        width = re.match(r"[a-z]+([0-9]*)", ty).group(1)
        bits = BITS.get(ty) or int(width or 8)
        n = 1
        for d in (int(d) for d in dims.split(",") if d):
            n *= d
        sizes.append(n * bits // 8)
    return sizes


def too_large(module_text):
    """Why a module (XLA's printed text) is too large to run and keep, or None: its entry's
    parameters and result as `entry_computation_layout` declares them exceed the size limit of
    a case, or some array inside it exceeds MAX_ARRAY_BYTES. Checked before XLA makes inputs."""
    header = re.sub(r"/\*.*?\*/", "", module_text.splitlines()[0])
    m = re.search(r"entry_computation_layout=\{(.*)\}", header)
    io = sum(array_bytes(m.group(1) if m else ""))
    if io > MAX_CASE_BYTES:
        return f"{io} bytes of parameters and results"
    largest = max(array_bytes(module_text), default=0)
    if largest > MAX_ARRAY_BYTES:
        return f"an array of {largest} bytes inside"
    return None


def make_input(rng, ty, dims):
    if ty not in NP:
        raise ValueError(f"element type {ty} has no .npy carrier")
    dt = NP[ty]
    if ty == "pred":
        return rng.integers(0, 2, dims).astype(np.bool_)
    if ty in ("c64", "c128"):
        return (rng.standard_normal(dims) + 1j * rng.standard_normal(dims)).astype(dt)
    if ty[0] == "f" or ty == "bf16":
        return rng.standard_normal(dims).astype(dt)
    if ty[0] == "s":
        return rng.integers(-3, 5, dims).astype(dt)
    return rng.integers(0, 8, dims).astype(dt)


# Sizes that XLA's tests name their size parameters by (`two = s32[] parameter(1)`): the value
# the C++ test passes.
NUMBER_WORDS = {w: k for k, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen".split())}


def entry_body(module_text):
    """The lines of the ENTRY computation of XLA's printed text: (index of its header line,
    index of its closing line)."""
    lines = module_text.splitlines()
    start = next(k for k, l in enumerate(lines) if l.startswith("ENTRY "))
    end = next(k for k in range(start + 1, len(lines)) if lines[k].startswith("}"))
    return lines, start, end


def leading_shape(s):
    """The shape at the start of `s` (a tuple in balanced parentheses, or an array)."""
    if not s.startswith("("):
        return s.split(" ")[0]
    depth = 0
    for k, ch in enumerate(s):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            return s[:k + 1]
    raise ValueError(f"unbalanced shape {s}")


def array_dims(shape):
    """(element type, [(size, dynamic)]) of an array shape's text."""
    t = re.match(r"([a-z0-9]+)\[([^\]]*)\]", shape)
    dims = [d.strip() for d in t.group(2).split(",") if d.strip()]
    return t.group(1), [(int(d.lstrip("<=")), d.startswith("<=")) for d in dims]


def leaves(shape):
    """The array leaves of a shape's text, depth-first: (tuple index path, shape text)."""
    if not shape.startswith("("):
        return [((), shape)]
    out = []
    for k, part in enumerate(split_top(shape[1:-1])):
        out += [((k,) + p, t) for p, t in leaves(part)]
    return out


def size_inputs(module_text, params, rng):
    """Values for the entry parameters that are runtime sizes (operands after the first of
    `set-dimension-size` and `dynamic-reshape`), by parameter number: the number the
    parameter is named for (XLA's tests name them so), else uniform in [0, bound] of the
    dimension it sizes. Random sizes are often negative or past the bound, where XLA's answer
    is undefined."""
    lines, start, end = entry_body(module_text)
    param_of = {}
    for l in lines[start + 1:end]:
        m = re.match(r"\s*(?:ROOT )?%?([\w.\-]+) = s32\[\]\S* parameter\((\d+)\)", l)
        if m:
            param_of[m.group(1)] = int(m.group(2))
    values = {}
    for l in lines[start + 1:end]:
        m = re.match(r"\s*(?:ROOT )?%?[\w.\-]+ = (\S+) (set-dimension-size|dynamic-reshape)\((.*?)\)", l)
        if not m:
            continue
        _, dims = array_dims(m.group(1))
        ops = [o.strip().split(" ")[-1].lstrip("%") for o in split_top(m.group(3))]
        if m.group(2) == "set-dimension-size":
            d = re.search(r"dimensions=\{(\d+)\}", l)
            sized = [(ops[1], dims[int(d.group(1))][0] if d else 0)]
        else:
            sized = [(o, dims[k][0]) for k, o in enumerate(ops[1:]) if k < len(dims)]
        for name, bound in sized:
            if name in param_of and param_of[name] not in values:
                word = NUMBER_WORDS.get(name)
                values[param_of[name]] = word if word is not None and word <= bound else \
                    int(rng.integers(0, bound + 1))
    return values


def sizes_module(module_text):
    """A module computing the runtime sizes of the entry result's dynamic dimensions (XLA's
    `get-dimension-size` of each, depth-first over the result's leaves, then dimension order),
    and those (leaf, dimension) pairs; None when the result has no dynamic dimension."""
    lines, start, end = entry_body(module_text)
    root = next(k for k in range(start + 1, end) if lines[k].lstrip().startswith("ROOT "))
    m = re.match(r"(\s*)ROOT %?([\w.\-]+) = (.*)", lines[root])
    indent, name, rest = m.groups()
    shape = leading_shape(rest)
    if "<=" not in shape:
        return None
    new, sizes, which = [], [], []
    for k, (path, leaf) in enumerate(leaves(shape)):
        _, dims = array_dims(leaf)
        if not any(dy for _, dy in dims):
            continue
        value = "%" + name
        for j, idx in enumerate(path):
            new.append(f"{indent}%gen.leaf.{k}.{j} = {leading_shape(path_shape(shape, path[:j + 1]))} "
                       f"get-tuple-element({value}), index={idx}")
            value = f"%gen.leaf.{k}.{j}"
        for d, (_, dy) in enumerate(dims):
            if dy:
                new.append(f"{indent}%gen.size.{k}.{d} = s32[] get-dimension-size({value}), dimensions={{{d}}}")
                sizes.append(f"%gen.size.{k}.{d}")
                which.append((k, d))
    new.append(f"{indent}ROOT %gen.sizes = ({', '.join(['s32[]'] * len(sizes))}) tuple({', '.join(sizes)})")
    head = re.sub(r",\s*entry_computation_layout=\{.*", "", lines[0])
    body = lines[1:start] + [re.sub(r"\s*\(.*", "", lines[start]) + " {"] + \
        lines[start + 1:root] + [lines[root].replace("ROOT ", "", 1)] + lines[root + 1:end] + new + lines[end:]
    return "\n".join([head] + body) + "\n", which


def path_shape(shape, path):
    """The element of tuple shape text `shape` at `path`."""
    for idx in path:
        shape = split_top(shape[1:-1])[idx]
    return shape


def worker(conn):
    """Runs the modules it receives one by one, sending back each one's answer."""
    os.environ["JAX_PLATFORMS"] = "cpu"
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               f" --xla_force_host_platform_device_count={HOST_DEVICES}")
    import jax
    jax.config.update("jax_enable_x64", True)
    conn.send("ready")
    while True:
        text, name, devices = conn.recv()
        conn.send(run_one(jax, text, name, devices))


def run_devices(jax, text, ins, replicas, partitions):
    """Runs a module on replicas x partitions XLA CPU devices, each with the same inputs: each
    device's outputs, in device order."""
    from jax._src.lib import _jax, xla_client as xc
    import jax._src.lib as L
    import jax._src.xla_bridge as xb
    from jax.sharding import Mesh, NamedSharding, PartitionSpec
    n = replicas * partitions
    mod = L.hlo.hlo_module_from_text(text)
    shlo = _jax.mlir.hlo_to_stablehlo(mod.as_serialized_hlo_module_proto())
    opts = xc.CompileOptions()
    opts.num_replicas, opts.num_partitions = replicas, partitions
    if partitions > 1:
        opts.executable_build_options.use_spmd_partitioning = True
    opts.device_assignment = xc.DeviceAssignment.create(np.arange(n).reshape(replicas, partitions))
    devs = jax.devices("cpu")[:n]
    exe = xb.get_backend("cpu").compile_and_load(shlo, devs, opts)
    same = NamedSharding(Mesh(np.array(devs), ("d",)), PartitionSpec())
    args = [jax.make_array_from_single_device_arrays(x.shape, same, [jax.device_put(x, d) for d in devs])
            for x in ins]
    per_out = exe.execute_sharded(args).disassemble_into_single_device_arrays()
    return [[np.asarray(o[d]) for o in per_out] for d in range(n)]


def run_one(jax, text, name, devices=None):
    """Compiles and runs one module on XLA CPU (on `devices` = (replicas, partitions) when
    given): ("ok", (inputs, outputs)), outputs per device for several devices, or an error."""
    try:
        import jax._src.lib as L
        from baseline import compile_hlo_text
        try:
            mod = L.hlo.hlo_module_from_text(text)
        except Exception as e:  # noqa: BLE001
            return ("xla-parse", str(e).strip().splitlines()[0][:300])
        text_xla = mod.to_string()
        large = too_large(text_xla)
        if large:
            return ("too-large", large)
        params = entry_params(text_xla)
        rng = np.random.default_rng(zlib.crc32(name.encode()))
        ins = [make_input(rng, ty, dims) for ty, dims in params]
        for k, v in size_inputs(text_xla, params, rng).items():
            ins[k] = np.array(v, dtype=NP["s32"])
        if devices:
            try:
                return ("ok", (ins, run_devices(jax, text, ins, *devices)))
            except Exception as e:  # noqa: BLE001
                return ("xla-devices", str(e).strip().splitlines()[0][:300])
        try:
            exe = compile_hlo_text(text)
        except Exception as e:  # noqa: BLE001
            return ("xla-compile", str(e).strip().splitlines()[0][:300])
        dev = jax.devices("cpu")[0]
        outs = [np.asarray(o) for o in exe.execute([jax.device_put(x, dev) for x in ins])]
        # A result with dynamic dimensions: XLA CPU packs its defined elements at the front of
        # the buffer (row-major over the runtime sizes; the rest is uninitialized). XLA's
        # literal is that defined part; its bound is recorded beside it.
        bounds = {}
        sized = sizes_module(text_xla)
        if sized:
            stext, which = sized
            got = compile_hlo_text(stext).execute([jax.device_put(x, dev) for x in ins])
            runtime = {}
            for (k, d), v in zip(which, got):
                runtime.setdefault(k, {})[d] = int(np.asarray(v))
            for k, dd in runtime.items():
                bounds[k] = list(outs[k].shape)
                dims = [min(max(dd.get(d, b), 0), b) for d, b in enumerate(bounds[k])]
                n = int(np.prod(dims))
                outs[k] = np.ascontiguousarray(outs[k].reshape(-1)[:n].reshape(dims))
        return ("ok", (ins, outs, bounds))
    except Exception as e:  # noqa: BLE001
        msg = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
        return ("error", msg)


def save(x, path):
    ty = dname(x.dtype)
    np.save(path, x.astype(CARRIER[ty]) if ty in ("s4", "u4", "s2", "u2") else
            x.view(CARRIER[ty]) if ty in CARRIER else x)


def start_worker(ctx):
    """A worker process, once it has loaded JAX (which a busy machine may take long to do, so
    no module's time limit counts it), and the parent's end of its pipe (only the worker holds
    the other end, so its death reads as the end of the pipe)."""
    conn, child = ctx.Pipe()
    proc = ctx.Process(target=worker, args=(child,), daemon=True)
    proc.start()
    child.close()
    if conn.recv() != "ready":
        sys.exit("a worker did not start")
    return conn, proc


def run_all(mods, jobs, timeout_s):
    """Runs `mods` on `jobs` worker processes, each module given `timeout_s` seconds (a worker
    that times out or dies is replaced): yields (module, status, payload) as each finishes."""
    ctx = mp.get_context("spawn")
    pending = list(mods)
    free = [start_worker(ctx) for _ in range(min(jobs, len(pending)))]
    busy = {}
    while pending or busy:
        while free and pending:
            conn, proc = free.pop()
            mod = pending.pop(0)
            devices = (mod["replicas"], mod["partitions"]) if "replicas" in mod else None
            conn.send((mod["text"], mod["name"], devices))
            busy[conn] = (proc, mod, time.monotonic() + timeout_s)
        wait_s = max(0.0, min(d for _, _, d in busy.values()) - time.monotonic())
        ready = mp.connection.wait(list(busy), wait_s)
        now = time.monotonic()
        for conn in list(busy):
            proc, mod, deadline = busy[conn]
            if conn in ready:
                try:
                    status, payload = conn.recv()
                except EOFError:
                    status, payload = ("crash", "XLA's process died")
            elif now >= deadline:
                status, payload = ("timeout", f"XLA took over {timeout_s} s")
            else:
                continue
            del busy[conn]
            if status in ("timeout", "crash"):
                proc.kill()
                proc.join()
                if pending:
                    free.append(start_worker(ctx))
            else:
                free.append((conn, proc))
            yield mod, status, payload
    for conn, proc in free:
        proc.kill()
        proc.join()


def option(name, default):
    """The value after `name` on the command line, or `default`."""
    return type(default)(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


def main():
    src = json.load(open(sys.argv[1]))
    only = None
    if "--only" in sys.argv:
        only = set(a for a in sys.argv[sys.argv.index("--only") + 1:] if not a.startswith("--"))
    if "--only-file" in sys.argv:
        only = set(open(option("--only-file", "")).read().split())
    jobs, timeout_s = option("--jobs", 1), option("--timeout", TIMEOUT_S)
    global OUT
    OUT = option("--out", HERE)
    os.makedirs(OUT, exist_ok=True)
    cases, skipped = [], list(src["skipped"]) if only is None else []
    for old in os.listdir(OUT):
        if (old.endswith(".npy") or old.endswith(".hlo")) and (
                only is None or old.split(".")[0] in only):
            os.remove(os.path.join(OUT, old))
    mods = [m for m in src["modules"] if only is None or m["name"] in only]
    for mod, status, payload in run_all(mods, jobs, timeout_s):
        name = mod["name"]
        devices = (mod["replicas"], mod["partitions"]) if "replicas" in mod else None
        if status != "ok":
            skipped.append({"name": name, "origin": mod["origin"], "reason": f"{status}: {payload}"})
            print(f"skip {name}: {status}: {payload}", flush=True)
            continue
        ins, outs = payload[0], payload[1]
        bounds = payload[2] if len(payload) > 2 else {}
        # Per device: each device's outputs under its own file names.
        per_device = outs if devices else [outs]
        out_name = ((lambda d, k: f"{name}.d{d}.out{k}.npy") if devices else
                    (lambda d, k: f"{name}.out{k}.npy"))
        size = sum(x.nbytes for x in ins) + sum(x.nbytes for o in per_device for x in o)
        if size > MAX_CASE_BYTES:
            skipped.append({"name": name, "origin": mod["origin"],
                            "reason": f"too large to keep: {size} bytes of data"})
            print(f"skip {name}: {size} bytes", flush=True)
            continue
        try:
            entry = {"name": name, "hlo": name + ".hlo", "origin": mod["origin"],
                     "inputs": [], "outputs": []}
            if devices:
                entry["replicas"], entry["partitions"] = devices
            for k, x in enumerate(ins):
                entry["inputs"].append({"file": f"{name}.in{k}.npy", "dtype": dname(x.dtype),
                                        "shape": list(x.shape)})
            for k, x in enumerate(per_device[0]):
                ty = dname(x.dtype)
                entry["outputs"].append({"file": out_name(0, k), "dtype": ty,
                                         "shape": list(x.shape),
                                         "tolerance": TOLERANCE.get(ty, "exact")})
                if k in bounds:
                    entry["outputs"][-1]["bound"] = bounds[k]
        except ValueError as e:
            skipped.append({"name": name, "origin": mod["origin"], "reason": str(e)})
            continue
        for k, x in enumerate(ins):
            save(x, os.path.join(OUT, f"{name}.in{k}.npy"))
        for d, o in enumerate(per_device):
            for k, x in enumerate(o):
                save(x, os.path.join(OUT, out_name(d, k)))
        with open(os.path.join(OUT, name + ".hlo"), "w") as f:
            f.write(mod["text"])
        cases.append(entry)
        print(f"ok {name}" + (f" on {devices[0]}x{devices[1]} devices" if devices else ""),
              flush=True)
    rank = {m["name"]: i for i, m in enumerate(src["modules"])}
    # Workers finish out of order: cases and skips go in extract.py's order.
    cases.sort(key=lambda c: rank[c["name"]])
    skipped.sort(key=lambda s: rank.get(s["name"], -1))
    if only is not None:
        # Keep every other entry where it was; a regenerated case takes its old place (a new
        # one goes after the cases of its file), and its old skipped entry goes.
        cases, skipped = merge(cases, skipped, only, src)
    json.dump({"generator": "gen.py", "jax_version": "0.10.2", "cases": cases},
              open(os.path.join(OUT, "manifest.json"), "w"), indent=1)
    json.dump({"skipped": skipped}, open(os.path.join(OUT, "skipped.json"), "w"), indent=1)
    print(f"{len(cases)} cases, {len(skipped)} skipped")


def merge(new_cases, new_skipped, only, src):
    """The manifest's and skipped.json's entries with those of `only` replaced, in the order of
    extract.py's modules (then its templates)."""
    old_cases = json.load(open(os.path.join(OUT, "manifest.json")))["cases"]
    old_skipped = json.load(open(os.path.join(OUT, "skipped.json")))["skipped"]
    case = {c["name"]: c for c in old_cases if c["name"] not in only}
    case.update({c["name"]: c for c in new_cases})
    skip = {s["name"]: s for s in old_skipped if s["name"] not in only}
    skip.update({s["name"]: s for s in new_skipped})
    order = [m["name"] for m in src["modules"]]
    rank = {n: i for i, n in enumerate(order)}
    cases = sorted(case.values(), key=lambda c: rank.get(c["name"], len(order)))
    # What extract.py skipped (templates, modules it cannot place on devices) as it says now.
    templates = list(src["skipped"])
    rest = sorted((s for s in skip.values() if s["name"] in rank), key=lambda s: rank[s["name"]])
    return cases, templates + rest


if __name__ == "__main__":
    main()
