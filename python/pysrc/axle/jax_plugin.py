"""Axle as a JAX backend: the ``jax_plugins`` entry point of the ``axle`` wheel.

JAX imports this module at start-up and calls :func:`initialize`, which registers the platform
``axle`` with the wheel's own shared library (``axle._axle``, which exports ``GetPjrtApi``) as
the PJRT plugin. Select it with ``JAX_PLATFORMS=axle`` (or ``jax.devices("axle")``); it is
registered below JAX's CPU backend, so installing the wheel does not change JAX's default.

JAX hands a PJRT plugin StableHLO as a portable artifact (VHLO bytecode). The plugin turns it
into HLO with the jaxlib of this process (:func:`_mlir_to_hlo`), so it reads every StableHLO
version this jaxlib writes and carries no MLIR of its own.
"""

# Below JAX's cpu backend (priority 0): axle runs only when selected.
PRIORITY = -100


def _stablehlo_versions():
    try:
        from jaxlib.mlir.dialects import stablehlo
    except ImportError:
        return None
    parse = lambda v: [int(x) for x in str(v).split(".")]  # noqa: E731
    return parse(stablehlo.get_current_version()), parse(stablehlo.get_minimum_version())


def _mlir_to_hlo(code: bytes) -> bytes:
    """A serialized HloModuleProto of a StableHLO program: a portable artifact (VHLO bytecode) or
    MLIR text."""
    from jax._src.interpreters import mlir
    from jax._src.lib import _jax

    if code[:4] == b"ML\xefR":
        ctx = mlir.make_ir_context()
        module = _jax.mlir.deserialize_portable_artifact(code, ctx)
        code = mlir.module_to_bytecode(module)
    comp = _jax.mlir.mlir_module_to_xla_computation(code, use_tuple_args=False, return_tuple=False)
    return comp.as_serialized_hlo_module_proto()


def initialize():
    """Registers the ``axle`` platform with JAX (called by JAX's plugin discovery)."""
    from jax._src import xla_bridge

    from . import _axle

    versions = _stablehlo_versions()
    if versions is not None:
        _axle._pjrt_set_stablehlo_versions(*versions)
    xla_bridge.register_plugin("axle", priority=PRIORITY, library_path=_axle.__file__)
    _enable_donation()
    _use_cpu_linalg_lowerings()


# Linear algebra JAX lowers for XLA CPU to LAPACK custom-calls (`lapack_sgeqrf_ffi`, ...), which
# Axle's cpu backend runs where it implements the routine (potrf, getrf, trsm, geqrf, geqp3,
# orgqr/ungqr, ormqr/unmqr, sytrd/hetrd, gehrd, gees, geev, gtsv, JAX's
# tridiagonal_solve_perturbed, syevd/heevd and gesdd/gesvd) and refuses by name otherwise. For any
# other platform JAX emits TPU custom-calls ("Qr", "LuDecomposition", "Eigh") that only XLA's TPU
# expanders know.
_CPU_LINALG = frozenset(
    (
        "cholesky",
        "eig",
        "eigh",
        "geqp3",
        "geqrf",
        "hessenberg",
        "householder_product",
        "lu",
        "ormqr",
        "schur",
        "svd",
        "triangular_solve",
        "tridiagonal",
        "tridiagonal_solve",
    )
)


def _use_cpu_linalg_lowerings():
    """Lowers JAX's linear algebra for ``axle`` as for ``cpu`` (see ``_CPU_LINALG``)."""
    try:
        import jax._src.lax.linalg  # noqa: F401 - registers the cpu lowerings
        from jax._src.interpreters import mlir
    except ImportError:
        return
    table = getattr(mlir, "_platform_specific_lowerings", None)
    if table is None:
        return
    ours = table.get("axle", {})
    for prim, entry in list(table.get("cpu", {}).items()):
        if str(prim) in _CPU_LINALG and prim not in ours:
            mlir.register_lowering(prim, entry.rule, platform="axle", inline=entry.inline)


def _enable_donation():
    """Lets ``donate_argnums`` reach Axle: JAX lowers donation to ``input_output_alias`` only for
    the platforms in its list (there is no public hook), and the plugin honours the alias (the
    output takes the donated array's memory, which is then deleted)."""
    try:
        from jax._src.interpreters import mlir
    except ImportError:
        return
    platforms = getattr(mlir, "_platforms_with_donation", None)
    if isinstance(platforms, list) and "axle" not in platforms:
        platforms.append("axle")
