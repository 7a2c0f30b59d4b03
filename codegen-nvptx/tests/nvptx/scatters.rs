//! The nvptx backend's `scatter` (a copy kernel, then an update kernel whose threads own
//! disjoint output elements, or, for an order-independent exact combiner, one thread per
//! update element combining it atomically) and `select-and-scatter` (one kernel gathering per output
//! element) on the host simulator against the evaluator: duplicate indices, indices out of
//! bounds, overlapping windows, non-add and non-commutative combiners, several operands,
//! batching dimensions, a scatter at a fusion's root; ties, padding and overlapping windows for
//! select-and-scatter. Their PTX is assembled for `sm_80` and `sm_90` where ptxas is present.
//!
//! Every result is compared exactly, floats included: both kernels apply the combiner to each
//! element in the evaluator's order (scatter indices in row-major order; windows in the
//! source's row-major order), so the bits agree. A float sum that reordered duplicate updates
//! would differ from the evaluator in the last bits on these inputs. The atomic update
//! kernels (integer and pred combiners whose result does not depend on the order) are
//! compared exactly too, and run as racing OS threads on the simulator.

use axle_codegen_nvptx::scatter::{AtomicCombiner, ScatterKernel, ScatterPass, UpdateStrategy};
use axle_codegen_nvptx::{plan_kernels, KernelKind, KernelOptions};
use axle_ir::{Module, Tolerance};

mod common;
use common::{atomic_ops, matches_evaluator, module, ptx_checked, update_strategies};

/// The scatter kernels of `m`'s one scatter: the copy's and the update's thread counts.
fn scatter_threads(m: &Module) -> (u64, u64) {
    let ks = plan_kernels(m).unwrap_or_else(|e| panic!("{e}"));
    let passes: Vec<(ScatterPass, u64)> = ks
        .iter()
        .filter_map(|k| match &k.kind {
            KernelKind::Scatter(ScatterKernel { pass, .. }) => Some((*pass, k.plan.elements)),
            _ => None,
        })
        .collect();
    assert_eq!(passes.len(), 2, "{ks:?}");
    assert_eq!(
        (passes[0].0, passes[1].0),
        (ScatterPass::Copy, ScatterPass::Update)
    );
    (passes[0].1, passes[1].1)
}

fn check(m: &Module, name: &str) {
    matches_evaluator(m, Tolerance::Exact);
    ptx_checked(m, name);
}

const ADD: &str =
    "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n";

#[test]
fn duplicate_rows_add_in_index_order() {
    // Rows 1 (three times), 3, 6, 0: an embedding gradient; the window spans dimension 1
    // whole, so its 5 columns are owned and each thread also owns rows (7 x 5 threads). The
    // updates come from a kernel of their own (a fusion).
    let m = module(&format!(
        "HloModule s\n{ADD}neg {{\n  p = f32[6,5] parameter(0)\n  ROOT n = f32[6,5] negate(p)\n}}\n\
         ENTRY e {{\n  x = f32[7,5] parameter(0)\n  p = f32[6,5] parameter(1)\n  \
         u = f32[6,5] fusion(p), kind=kLoop, calls=neg\n  \
         i = s32[6,1] constant({{{{1}},{{3}},{{1}},{{6}},{{0}},{{1}}}})\n  \
         ROOT s = f32[7,5] scatter(x, i, u), update_window_dims={{1}}, inserted_window_dims={{0}}, \
         scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=add\n}}\n"
    ));
    assert_eq!(scatter_threads(&m), (35, 35));
    assert_eq!(plan_kernels(&m).map(|ks| ks.len()).ok(), Some(3));
    check(&m, "rows");
}

#[test]
fn out_of_bounds_and_overlapping_windows_with_a_non_commutative_combiner() {
    // 2 x 3 windows into 6 x 5: (0,0) and (1,1) overlap, (2,2) repeats (1,1)'s neighbourhood;
    // (5,0), (-1,1) and (3,3) leave the operand (partly) and are skipped whole. The combiner
    // `x / 2 + y` gives a different result in any other order.
    let m = module(
        r#"
HloModule s
half {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  h = f32[] constant(0.5)
  p = f32[] multiply(x, h)
  ROOT s = f32[] add(p, y)
}
ENTRY e {
  x = f32[6,5] parameter(0)
  u = f32[7,2,3] parameter(1)
  i = s32[7,2] constant({{0,0},{4,2},{5,0},{-1,1},{1,1},{3,3},{1,1}})
  ROOT s = f32[6,5] scatter(x, i, u), update_window_dims={1,2}, inserted_window_dims={}, scatter_dims_to_operand_dims={0,1}, index_vector_dim=1, to_apply=half, indices_are_sorted=true, unique_indices=true
}
"#,
    );
    // No dimension is spanned whole; both are owned (6 x 5 threads, work 3 x 2 times the
    // updates').
    assert_eq!(scatter_threads(&m), (30, 30));
    check(&m, "overlap");
}

#[test]
fn single_elements_set_and_minimum_with_duplicates() {
    // Scalar updates at (row, column) pairs with duplicates, the last one wins (`set`); and
    // the same with `minimum` on integers, indices as u8 and the index vector first.
    let m = module(
        r#"
HloModule s
set {
  x = f32[] parameter(0)
  ROOT y = f32[] parameter(1)
}
ENTRY e {
  x = f32[4,8] parameter(0)
  u = f32[9] parameter(1)
  i = s32[9,2] constant({{0,1},{3,7},{0,1},{2,2},{4,0},{3,7},{1,1},{0,1},{2,-2}})
  ROOT s = f32[4,8] scatter(x, i, u), update_window_dims={}, inserted_window_dims={0,1}, scatter_dims_to_operand_dims={0,1}, index_vector_dim=1, to_apply=set
}
"#,
    );
    check(&m, "set");
    let m = module(
        r#"
HloModule s
mn {
  x = s32[] parameter(0)
  y = s32[] parameter(1)
  ROOT s = s32[] minimum(x, y)
}
ENTRY e {
  x = s32[5,3] parameter(0)
  u = s32[6] parameter(1)
  i = u8[2,6] constant({{0,4,0,2,9,4},{1,2,1,0,0,2}})
  ROOT s = s32[5,3] scatter(x, i, u), update_window_dims={}, inserted_window_dims={0,1}, scatter_dims_to_operand_dims={0,1}, index_vector_dim=0, to_apply=mn
}
"#,
    );
    check(&m, "min_u8_indices");
}

#[test]
fn several_operands_scatter_together() {
    // An argmax-style combiner over (value, index) pairs, with ties and duplicates.
    let m = module(
        r#"
HloModule s
argmax {
  a = f32[] parameter(0)
  ai = s32[] parameter(1)
  b = f32[] parameter(2)
  bi = s32[] parameter(3)
  g = pred[] compare(b, a), direction=GT
  v = f32[] select(g, b, a)
  k = s32[] select(g, bi, ai)
  ROOT t = (f32[], s32[]) tuple(v, k)
}
ENTRY e {
  x = f32[5,3] parameter(0)
  xi = s32[5,3] parameter(1)
  u = f32[4,3] parameter(2)
  ui = s32[4,3] parameter(3)
  i = s64[4] constant({2,0,2,4})
  ROOT s = (f32[5,3], s32[5,3]) scatter(x, xi, i, u, ui), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=argmax
}
"#,
    );
    check(&m, "argmax");
}

/// take_along_axis's gradient: per batch row of `ty[4,6]`, scalar updates at a column
/// (duplicates and out-of-bounds columns included), combined by `op`.
fn batching_scatter(ty: &str, op: &str) -> Module {
    module(&format!(
        r#"
HloModule s
c {{
  x = {ty}[] parameter(0)
  y = {ty}[] parameter(1)
  ROOT s = {ty}[] {op}(x, y)
}}
ENTRY e {{
  z = {ty}[] constant(0)
  x = {ty}[4,6] broadcast(z), dimensions={{}}
  i = s32[4,3,1] constant({{{{{{0}},{{5}},{{0}}}},{{{{2}},{{2}},{{2}}}},{{{{6}},{{1}},{{-1}}}},{{{{3}},{{4}},{{5}}}}}})
  u = {ty}[4,3] parameter(0)
  ROOT s = {ty}[4,6] scatter(x, i, u), update_window_dims={{}}, inserted_window_dims={{1}}, scatter_dims_to_operand_dims={{1}}, input_batching_dims={{0}}, scatter_indices_batching_dims={{0}}, index_vector_dim=2, to_apply=c
}}
"#
    ))
}

/// A fusion whose root is a `ty` scatter adding (`add(args)`), its operand, indices and
/// updates computed in it.
fn fused_scatter(ty: &str, args: &str) -> Module {
    module(&format!(
        r#"
HloModule s
add {{
  x = {ty}[] parameter(0)
  y = {ty}[] parameter(1)
  ROOT s = {ty}[] add({args})
}}
fused {{
  p = {ty}[9,4] parameter(0)
  q = s32[5] parameter(1)
  r = {ty}[5,4] parameter(2)
  n = {ty}[9,4] negate(p)
  one = s32[] constant(1)
  ob = s32[5] broadcast(one), dimensions={{}}
  qi = s32[5] add(q, ob)
  i = s32[5,1] reshape(qi)
  e = {ty}[5,4] multiply(r, r)
  ROOT s = {ty}[9,4] scatter(n, i, e), update_window_dims={{1}}, inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=add
}}
ENTRY e {{
  p = {ty}[9,4] parameter(0)
  q = s32[5] constant({{7,-1,3,7,8}})
  r = {ty}[5,4] parameter(1)
  ROOT f = {ty}[9,4] fusion(p, q, r), kind=kLoop, calls=fused
}}
"#
    ))
}

#[test]
fn batching_dimensions_and_a_fused_scatter() {
    check(&batching_scatter("f32", "add"), "batching");
    let m = fused_scatter("f32", "x, y");
    scatter_threads(&m);
    check(&m, "fused");
}

#[test]
fn a_scatter_inside_a_fusion_other_than_at_its_root_is_refused_naming_it() {
    let m = module(&format!(
        "HloModule s\n{ADD}fused {{\n  x = f32[4] parameter(0)\n  u = f32[2] parameter(1)\n  \
         i = s32[2,1] constant({{{{1}},{{2}}}})\n  sc = f32[4] scatter(x, i, u), \
         update_window_dims={{}}, inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, \
         index_vector_dim=1, to_apply=add\n  ROOT n = f32[4] negate(sc)\n}}\n\
         ENTRY e {{\n  x = f32[4] parameter(0)\n  u = f32[2] parameter(1)\n  \
         ROOT f = f32[4] fusion(x, u), kind=kLoop, calls=fused\n}}\n"
    ));
    let e = plan_kernels(&m).unwrap_err();
    assert_eq!(
        (e.instruction.as_str(), e.opcode.as_str()),
        ("sc", "scatter")
    );
}

/// A select-and-scatter of `f32[od]` windows (`window`) of `x` (`f32[xd]`, parameter 0 or the
/// constant `xv`), selecting by `dir`, scattering parameter `s` (`f32[sd]`) with `scatter`
/// from `init`.
fn sas(xd: &str, xv: Option<&str>, sd: &str, window: &str, dir: &str, scatter: &str) -> Module {
    let x = match xv {
        Some(v) => format!("x = f32[{xd}] constant({v})"),
        None => format!("x = f32[{xd}] parameter(1)"),
    };
    module(&format!(
        r#"
HloModule m
sel {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction={dir}
}}
sc {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] {scatter}(a, b)
}}
ENTRY e {{
  s = f32[{sd}] parameter(0)
  {x}
  z = f32[] constant(0.25)
  ROOT r = f32[{xd}] select-and-scatter(x, s, z), window={{{window}}}, select=sel, scatter=sc
}}
"#
    ))
}

fn one_gathering_kernel(m: &Module) {
    let ks = plan_kernels(m).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ks.len(), 1, "{ks:?}");
    assert_eq!(ks[0].kind, KernelKind::SelectAndScatter);
}

#[test]
fn select_and_scatter_ties_take_the_first_or_the_last_in_window_order() {
    // Ties everywhere: `GE` keeps the first of equal values, `GT` moves to the last.
    let ties = "{{1,1,2,2,0,3},{1,1,2,2,3,3},{5,0,0,5,1,1},{5,5,5,5,1,1}}";
    for dir in ["GE", "GT", "LE"] {
        let m = sas("4,6", Some(ties), "2,3", "size=2x2 stride=2x2", dir, "add");
        one_gathering_kernel(&m);
        check(&m, &format!("ties_{dir}"));
    }
}

#[test]
fn select_and_scatter_with_padding_and_overlapping_windows() {
    // 3x3 windows, stride 2, padding 1 on each side: windows overlap, and the ones at the
    // edges hang over the padding (never selected); the source is 3 x 4.
    let m = sas(
        "5,7",
        None,
        "3,4",
        "size=3x3 stride=2x2 pad=1_1x1_1",
        "GE",
        "add",
    );
    one_gathering_kernel(&m);
    check(&m, "padded_overlap");
    // Stride 1 (every element in up to 9 windows), a multiplying scatter, and a window
    // entirely in the padding (pad 3 before a window of 2 selects nothing).
    let m = sas(
        "4,5",
        None,
        "7,4",
        "size=2x2 stride=1x1 pad=3_1x0_0",
        "GT",
        "multiply",
    );
    check(&m, "stride1_multiply");
    // Windows larger than the stride in one dimension and smaller in the other, rank 3.
    let m = sas(
        "2,9,4",
        None,
        "2,4,2",
        "size=1x3x1 stride=1x2x3 pad=0_0x1_0x0_1",
        "GE",
        "maximum",
    );
    check(&m, "rank3");
}

/// A module scattering `ty` updates (the squares of parameter 1, so 8-bit sums wrap) into
/// parameter 0 (`[6,5,4]`) with each combiner of `ops` (`x op y`, or `y op x` for every second
/// one), its results a tuple: windows of 2 x 3 x 4 at seven (row, column) indices, with a
/// duplicate, overlaps, and three windows that leave the operand (skipped whole).
fn combiners(ty: &str, ops: &[&str]) -> Module {
    let mut comps = String::new();
    let mut scatters = String::new();
    let mut names = Vec::new();
    for (k, op) in ops.iter().enumerate() {
        let (a, b) = if k % 2 == 0 { ("x", "y") } else { ("y", "x") };
        comps += &format!(
            "c{k} {{\n  x = {ty}[] parameter(0)\n  y = {ty}[] parameter(1)\n  \
             ROOT r = {ty}[] {op}({a}, {b})\n}}\n"
        );
        scatters += &format!(
            "  s{k} = {ty}[6,5,4] scatter(x, i, q), update_window_dims={{1,2,3}}, \
             inserted_window_dims={{}}, scatter_dims_to_operand_dims={{0,1}}, \
             index_vector_dim=1, to_apply=c{k}\n"
        );
        names.push(format!("s{k}"));
    }
    let tys = vec![format!("{ty}[6,5,4]"); ops.len()].join(", ");
    module(&format!(
        "HloModule s\n{comps}ENTRY e {{\n  x = {ty}[6,5,4] parameter(0)\n  \
         u = {ty}[7,2,3,4] parameter(1)\n  q = {ty}[7,2,3,4] multiply(u, u)\n  \
         i = s32[7,2] constant({{{{0,0}},{{4,2}},{{5,0}},{{-1,1}},{{1,1}},{{3,3}},{{1,1}}}})\n\
         {scatters}  ROOT t = ({tys}) tuple({})\n}}\n",
        names.join(", ")
    ))
}

/// The PTX of `m` (every architecture) combines with `n` global atomics or reductions at
/// least (a kernel that stored plain values instead would have none).
fn atomics_in_ptx(m: &Module, name: &str, n: usize) {
    for p in ptx_checked(m, name) {
        let found = p
            .lines()
            .filter(|l| l.contains("atom.global.") || l.contains("red.global."))
            .count();
        assert!(found >= n, "{name}: {found} global atomics, want {n}:\n{p}");
    }
}

#[test]
fn integer_combiners_take_the_atomic_path_and_match_the_evaluator() {
    use AtomicCombiner::*;
    let ops = ["add", "minimum", "maximum", "and", "or", "xor"];
    for ty in ["s32", "u32", "s64", "u64", "s8", "u8", "s16", "u16"] {
        let m = combiners(ty, &ops);
        let (min, max) = if ty.starts_with('s') {
            (Min, Max)
        } else {
            (UMin, UMax)
        };
        assert_eq!(
            atomic_ops(&m, &KernelOptions::default()),
            [Add, min, max, And, Or, Xor].map(Some),
            "{ty}"
        );
        matches_evaluator(&m, Tolerance::Exact);
        atomics_in_ptx(&m, ty, ops.len());
    }
}

#[test]
fn pred_combiners_take_the_atomic_path_but_add() {
    use AtomicCombiner::*;
    // Rows of a `pred[9,3]` (one-row windows, an embedding's shape) at duplicate and
    // out-of-bounds indices.
    let ops = ["and", "or", "xor", "minimum", "maximum", "add"];
    let mut comps = String::new();
    let mut scatters = String::new();
    for (k, op) in ops.iter().enumerate() {
        comps += &format!(
            "c{k} {{\n  x = pred[] parameter(0)\n  y = pred[] parameter(1)\n  \
             ROOT r = pred[] {op}(x, y)\n}}\n"
        );
        scatters += &format!(
            "  s{k} = pred[9,3] scatter(x, i, u), update_window_dims={{1}}, \
             inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, \
             index_vector_dim=1, to_apply=c{k}\n"
        );
    }
    // The operand and updates are `a > 0` of integer noise, about half of them true.
    let m = module(&format!(
        "HloModule s\n{comps}ENTRY e {{\n  a = s32[9,3] parameter(0)\n  \
         b = s32[8,3] parameter(1)\n  z = s32[] constant(0)\n  \
         za = s32[9,3] broadcast(z), dimensions={{}}\n  zb = s32[8,3] broadcast(z), dimensions={{}}\n  \
         x = pred[9,3] compare(a, za), direction=GT\n  u = pred[8,3] compare(b, zb), direction=GT\n  \
         i = s64[8,1] constant({{{{2}},{{8}},{{2}},{{9}},{{0}},{{-1}},{{2}},{{5}}}})\n\
         {scatters}  ROOT t = (pred[9,3], pred[9,3], pred[9,3], pred[9,3], pred[9,3], \
         pred[9,3]) tuple(s0, s1, s2, s3, s4, s5)\n}}\n"
    ));
    assert_eq!(
        atomic_ops(&m, &KernelOptions::default()),
        [Some(And), Some(Or), Some(Xor), Some(UMin), Some(UMax), None]
    );
    matches_evaluator(&m, Tolerance::Exact);
    atomics_in_ptx(&m, "pred", 5);
}

#[test]
fn an_embedding_gradient_of_integers_gets_a_thread_per_update_element() {
    // 6 rows of 5 into `s32[7,5]`, rows 1 (three times), 3, 6, 0: 30 update threads where the
    // owner path has 35 (one per element, each looping over the 6 indices).
    let m = module(
        r#"
HloModule s
add {
  x = s32[] parameter(0)
  y = s32[] parameter(1)
  ROOT s = s32[] add(x, y)
}
ENTRY e {
  x = s32[7,5] parameter(0)
  u = s32[6,5] parameter(1)
  i = s32[6,1] constant({{1},{3},{1},{6},{0},{1}})
  ROOT s = s32[7,5] scatter(x, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
}
"#,
    );
    assert_eq!(scatter_threads(&m), (35, 30));
    assert_eq!(
        update_strategies(&m, &KernelOptions::default()),
        [UpdateStrategy::Atomic {
            op: AtomicCombiner::Add,
            updates: vec![6, 5]
        }]
    );
    check(&m, "embedding_s32");
    atomics_in_ptx(&m, "embedding_s32", 1);
}

#[test]
fn atomic_scatters_with_batching_dimensions_and_at_a_fusions_root() {
    let m = batching_scatter("u16", "maximum");
    assert_eq!(
        atomic_ops(&m, &KernelOptions::default()),
        [Some(AtomicCombiner::UMax)]
    );
    check(&m, "batching_u16");
    let m = fused_scatter("s64", "y, x");
    assert_eq!(
        atomic_ops(&m, &KernelOptions::default()),
        [Some(AtomicCombiner::Add)]
    );
    check(&m, "fused_s64");
    atomics_in_ptx(&m, "fused_s64", 1);
}

#[test]
fn the_owner_path_stays_where_the_order_could_show() {
    // Float add (rounding depends on the order), float minimum and maximum (NaN and signed
    // zeros), multiply (no atomic form), a non-commutative combiner, overwriting even with
    // `unique_indices=true` (a hint that may be false), sub-byte integers (no byte of their
    // own), a combiner that is more than one op, and several operands: all keep the owner
    // update.
    let one = |ty: &str, body: &str, attrs: &str| {
        module(&format!(
            "HloModule s\nc {{\n  x = {ty}[] parameter(0)\n  y = {ty}[] parameter(1)\n  \
             {body}\n}}\nENTRY e {{\n  x = {ty}[5,3] parameter(0)\n  u = {ty}[4,3] parameter(1)\n  \
             i = s32[4,1] constant({{{{2}},{{0}},{{2}},{{4}}}})\n  \
             ROOT s = {ty}[5,3] scatter(x, i, u), update_window_dims={{1}}, \
             inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, \
             to_apply=c{attrs}\n}}\n"
        ))
    };
    let cases = [
        ("f32", "ROOT r = f32[] add(x, y)", ""),
        ("f16", "ROOT r = f16[] add(x, y)", ""),
        ("f64", "ROOT r = f64[] add(y, x)", ""),
        ("f32", "ROOT r = f32[] maximum(x, y)", ""),
        ("bf16", "ROOT r = bf16[] minimum(x, y)", ""),
        ("s32", "ROOT r = s32[] multiply(x, y)", ""),
        ("s32", "ROOT r = s32[] subtract(x, y)", ""),
        (
            "s32",
            "ROOT r = s32[] parameter(1)",
            ", unique_indices=true",
        ),
        ("u8", "ROOT r = u8[] parameter(1)", ", unique_indices=true"),
        ("s4", "ROOT r = s4[] add(x, y)", ""),
        ("u4", "ROOT r = u4[] maximum(x, y)", ""),
        ("s32", "a = s32[] add(x, y)\n  ROOT r = s32[] add(a, y)", ""),
        ("s32", "ROOT r = s32[] add(x, x)", ""),
    ];
    for (ty, body, attrs) in cases {
        let m = one(ty, body, attrs);
        assert_eq!(
            atomic_ops(&m, &KernelOptions::default()),
            [None],
            "{ty}: {body}{attrs}"
        );
    }
    // The float sum runs on the owner path, bit-identical to the evaluator.
    check(&one("f32", "ROOT r = f32[] add(x, y)", ""), "f32_add_owner");
    // Two integer operands added together stay on the owner path too.
    let m = module(
        r#"
HloModule s
add2 {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  x = s32[] add(a, c)
  y = s32[] add(b, d)
  ROOT t = (s32[], s32[]) tuple(x, y)
}
ENTRY e {
  x = s32[5,3] parameter(0)
  y = s32[5,3] parameter(1)
  u = s32[4,3] parameter(2)
  v = s32[4,3] parameter(3)
  i = s32[4,1] constant({{2},{0},{2},{4}})
  ROOT s = (s32[5,3], s32[5,3]) scatter(x, y, i, u, v), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add2
}
"#,
    );
    assert_eq!(atomic_ops(&m, &KernelOptions::default()), [None]);
}
