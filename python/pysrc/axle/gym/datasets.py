"""Benchmarks for :mod:`axle.gym`: named HLO programs grouped in datasets, each with a fixed
train/test split.

A benchmark is named by a URI, ``DATASET/NAME``:

- ``corpus/NAME``: the shared corpus (real JAX programs, ``$AXLE_SHARED/corpus/NAME.hlo``);
- ``models/NAME``: the model programs (``$AXLE_SHARED/models/NAME.hlo``: BERT, GPT-2, ResNet-50,
  U-Net, LSTM, attention, Adam);
- ``generated/SEED``: the fuzz campaigns' program generator decoding bytes drawn from ``SEED``
  (any non-negative integer; the dataset lists seeds ``0..count``);
- ``large/NAME``: realistic-size and large graphs (``$AXLE_SHARED/baseline/NAME.hlo`` or
  ``.hlo.gz``, up to 300k instructions);
- ``dump:PATH``: one HLO text file, such as XLA writes under ``XLA_DUMP_TO``; a
  :class:`DumpDataset` lists a whole dump directory.

The split is a function of the URI alone: a benchmark is in ``test`` when the first eight bytes
of ``sha256(uri)``, read as a little-endian integer, are divisible by 4 (about one in four), else
in ``train``. It never changes when a
dataset grows, and every process and platform computes the same one.

``$AXLE_SHARED`` is the shared data directory; without it, ``../shared`` from the current
directory is tried (the layout of the repository's checkout).
"""

import gzip
import json
import os
import pathlib
import hashlib

from .. import AxleError
from .. import _axle

__all__ = [
    "Benchmark",
    "Dataset",
    "DumpDataset",
    "benchmark",
    "dataset",
    "datasets",
    "shared_dir",
    "split_of",
]

TEST_MODULUS = 4


def split_of(uri):
    """``"test"`` or ``"train"``: the fixed split of the benchmark named ``uri``."""
    h = int.from_bytes(hashlib.sha256(uri.encode()).digest()[:8], "little")
    return "test" if h % TEST_MODULUS == 0 else "train"


def shared_dir():
    """The shared data directory: ``$AXLE_SHARED``, else ``../shared`` if it exists."""
    env = os.environ.get("AXLE_SHARED")
    if env:
        return pathlib.Path(env)
    p = pathlib.Path.cwd().parent / "shared"
    if p.is_dir():
        return p
    raise AxleError("no shared data directory: set AXLE_SHARED to the directory holding "
                    "corpus/, models/ and baseline/")


def _read_text(path):
    path = pathlib.Path(path)
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rt") as f:
                return f.read()
        return path.read_text()
    except OSError as e:
        raise AxleError(f"cannot read benchmark {path}: {e}") from None


class Benchmark:
    """One program: ``uri``, ``dataset``, ``name``, ``split`` and :meth:`hlo_text`."""

    def __init__(self, uri, loader):
        self.uri = uri
        if uri.startswith("dump:"):
            self.dataset, self.name = "dump", uri[len("dump:"):]
        else:
            self.dataset, _, self.name = uri.partition("/")
        self.split = split_of(uri)
        self._loader = loader

    def hlo_text(self):
        """The program as HLO text."""
        return self._loader()

    def __repr__(self):
        return f"Benchmark({self.uri!r}, split={self.split!r})"


class Dataset:
    """A named, ordered list of benchmarks with the fixed split (:func:`split_of`)."""

    def __init__(self, name, description, uris, loader):
        self.name = name
        self.description = description
        self._uris = list(uris)
        self._loader = loader

    def uris(self, split=None):
        """Benchmark URIs in order, all or those of ``split`` (``"train"`` or ``"test"``)."""
        if split not in (None, "train", "test"):
            raise AxleError(f"split must be 'train' or 'test', not {split!r}")
        return [u for u in self._uris if split is None or split_of(u) == split]

    def benchmarks(self, split=None):
        """The benchmarks in order, all or those of ``split``."""
        return [self.benchmark(u) for u in self.uris(split)]

    def benchmark(self, uri):
        """The benchmark ``uri`` (or its name within this dataset)."""
        if "/" not in uri and not uri.startswith("dump:"):
            uri = f"{self.name}/{uri}"
        return Benchmark(uri, lambda: self._loader(uri))

    def __len__(self):
        return len(self._uris)

    def __repr__(self):
        return f"Dataset({self.name!r}, {len(self)} benchmarks)"


def _files(directory, suffixes, exclude=()):
    d = pathlib.Path(directory)
    if not d.is_dir():
        raise AxleError(f"dataset directory {d} does not exist")
    out = []
    for p in sorted(d.iterdir()):
        for s in suffixes:
            if p.name.endswith(s) and not any(p.name.endswith(x) for x in exclude):
                out.append((p.name[: -len(s)], p))
                break
    return out


def _corpus():
    d = shared_dir() / "corpus"
    try:
        cases = json.loads((d / "manifest.json").read_text())["cases"]
        names = [c["name"] for c in cases]
    except (OSError, KeyError, ValueError):
        names = [n for n, _ in _files(d, [".hlo"], (".opt.hlo", ".debug.hlo"))]
    return Dataset("corpus", "real JAX programs of the shared corpus (one op family each)",
                   [f"corpus/{n}" for n in sorted(names)],
                   lambda uri: _read_text(d / f"{uri.split('/', 1)[1]}.hlo"))


def _models():
    d = shared_dir() / "models"
    names = [n for n, _ in _files(d, [".hlo"], (".opt.hlo",))]
    return Dataset("models", "JAX model programs (training steps and inference)",
                   [f"models/{n}" for n in names],
                   lambda uri: _read_text(d / f"{uri.split('/', 1)[1]}.hlo"))


def _large():
    d = shared_dir() / "baseline"
    files = dict(_files(d, [".hlo.gz", ".hlo"]))
    return Dataset("large", "realistic-size programs and large generated graphs (to 300k "
                   "instructions)", [f"large/{n}" for n in sorted(files)],
                   lambda uri: _read_text(files[uri.split("/", 1)[1]]))


def _generated_text(uri):
    seed = uri.split("/", 1)[1]
    if not seed.isdigit():
        raise AxleError(f"generated benchmarks are named generated/SEED, not {uri!r}")
    return _axle.generated_hlo(int(seed))


def generated(count=200):
    """The generated programs of seeds ``0..count``."""
    return Dataset("generated", "programs of the fuzz generator, one per seed",
                   [f"generated/{s}" for s in range(count)], _generated_text)


class DumpDataset(Dataset):
    """The HLO text files of a directory: XLA's ``XLA_DUMP_TO`` output (its
    ``*.before_optimizations.txt`` modules, the compiler's inputs, when there are any) or, failing
    that, every ``*.hlo`` and ``*.txt`` file in it (HloEnv's directories of HLO text). Benchmarks
    are ``dump:PATH``."""

    def __init__(self, directory):
        d = pathlib.Path(directory)
        files = [p for _, p in _files(d, [".before_optimizations.txt"])]
        if not files:
            files = [p for _, p in _files(d, [".hlo", ".hlo.gz", ".txt"])]
        super().__init__("dump", f"HLO text dumped to {d}",
                         [f"dump:{p}" for p in files],
                         lambda uri: _read_text(uri[len("dump:"):]))


_BUILTIN = {"corpus": _corpus, "models": _models, "large": _large, "generated": generated}


def datasets():
    """The names of the built-in datasets."""
    return list(_BUILTIN)


def dataset(name):
    """The built-in dataset ``name`` (``corpus``, ``models``, ``generated``, ``large``) or, for
    a directory path, a :class:`DumpDataset` of it."""
    if name in _BUILTIN:
        return _BUILTIN[name]()
    if os.path.isdir(name):
        return DumpDataset(name)
    raise AxleError(f"unknown dataset {name!r}: one of {', '.join(_BUILTIN)}, or a directory")


def benchmark(uri):
    """The benchmark named ``uri`` (``corpus/NAME``, ``generated/SEED``, ``dump:PATH``, ...)."""
    if isinstance(uri, Benchmark):
        return uri
    if not isinstance(uri, str):
        raise AxleError(f"a benchmark is named by a string URI, not {type(uri).__name__}")
    if uri.startswith("dump:"):
        return Benchmark(uri, lambda: _read_text(uri[len("dump:"):]))
    ds, sep, name = uri.partition("/")
    if not sep or not name:
        raise AxleError(f"benchmark URI {uri!r} is not DATASET/NAME or dump:PATH")
    if ds == "generated":
        if not name.isdigit():
            raise AxleError(f"generated benchmarks are named generated/SEED, not {uri!r}")
        return Benchmark(uri, lambda: _generated_text(uri))
    d = dataset(ds)
    if uri not in d.uris():
        raise AxleError(f"no benchmark {uri!r} in dataset {ds}")
    return d.benchmark(uri)
