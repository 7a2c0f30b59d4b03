"""A pytest plugin that keeps one shard of the collected tests: with `JAXTESTS_SHARD=K/N`, the
tests whose node id hashes (CRC-32) to K modulo N. The hash of the id, not the position, picks
the shard, so a test falls in the same shard on every platform even where the platforms collect
different tests. run.sh loads it (`-p shard`) when SHARD is set.
"""

import os
import zlib


def pytest_collection_modifyitems(config, items):
    spec = os.environ.get("JAXTESTS_SHARD")
    if not spec:
        return
    k, n = (int(x) for x in spec.split("/"))
    keep = [it for it in items if zlib.crc32(it.nodeid.encode()) % n == k]
    config.hook.pytest_deselected(items=[it for it in items if it not in keep])
    items[:] = keep
