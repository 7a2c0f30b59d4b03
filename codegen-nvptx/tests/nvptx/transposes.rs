//! The nvptx backend's transpose kernels on small modules: which transposes go through shared
//! memory (those moving the minor dimension) and which stay loop kernels, the tile grid for odd
//! sizes and batch dimensions, and the barrier and shared tile in the PTX. Where ptxas is
//! present (`$AXLE_PTXAS` or `PATH`), the PTX is assembled for `sm_80` and `sm_90`.

use axle_codegen_nvptx::{plan_kernels, KernelKind};
use axle_ir::Module;

mod common;
use common::{module, ptx_checked};

/// A module transposing `f32[dims]` by `perm` into `f32[out]`, fused with a negate of its
/// input.
fn transpose(dims: &str, out: &str, perm: &str) -> Module {
    module(&format!(
        r#"
HloModule t
fused {{
  p = f32[{dims}] parameter(0)
  n = f32[{dims}] negate(p)
  ROOT t = f32[{out}] transpose(n), dimensions={{{perm}}}
}}
ENTRY e {{
  a = f32[{dims}] parameter(0)
  ROOT f = f32[{out}] fusion(a), kind=kInput, calls=fused
}}
"#
    ))
}

/// The grid of `m`'s one kernel when it is a transpose kernel.
fn tiled_grid(m: &Module) -> Option<u64> {
    let ks = plan_kernels(m).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ks.len(), 1, "{ks:?}");
    matches!(ks[0].kind, KernelKind::Transpose(_)).then_some(ks[0].plan.grid)
}

#[test]
fn minor_moving_transposes_are_tiled_through_shared_memory() {
    // 100 x 70: 4 x 3 tiles of 32.
    let m = transpose("100,70", "70,100", "1,0");
    assert_eq!(tiled_grid(&m), Some(12));
    for p in ptx_checked(&m, "transpose") {
        assert!(p.contains("bar.sync") && p.contains(".shared"), "{p}");
        // The tile is 32 rows of 33 f32.
        assert!(p.contains("[4224]"), "{p}");
    }
    // Batch dimensions: [5, 40, 33] -> [33, 5, 40] moves the minor dimension; 5 batches of
    // 2 x 2 tiles.
    let m = transpose("5,40,33", "33,5,40", "2,0,1");
    assert_eq!(tiled_grid(&m), Some(20));
}

#[test]
fn transposes_keeping_the_minor_dimension_stay_loop_kernels() {
    // Rows move whole: reads and writes are already coalesced.
    let m = transpose("4,6,32", "6,4,32", "1,0,2");
    assert_eq!(tiled_grid(&m), None);
    // A one-element dimension: a reshape in effect.
    let m = transpose("1,64", "64,1", "1,0");
    assert_eq!(tiled_grid(&m), None);
}
