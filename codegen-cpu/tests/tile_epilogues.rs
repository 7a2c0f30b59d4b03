//! Output fusions whose epilogue runs on the GEMM's register tiles, a tile row at a time
//! (`CpuOptions::tile_epilogues`, `codegen-cpu/src/epilogue.rs`): bias and ReLU, scaling and a
//! bias, the core returned beside its epilogue, a result narrower than the core, and a residual
//! alone or scaled (which keep the epilogue on finished blocks), on `f32`, `f64`, `bf16` and
//! `f16` dots of odd sizes (1, 3, 17, 255, and a contraction long enough to take several `K`
//! blocks), with partial tiles at the right and bottom edges, transposed and batched operands.
//!
//! Every case must give the evaluator's results exactly, and the same bits with the epilogue
//! applied to each tile as with it applied to each finished block (the option off), on 1 and 8
//! threads, with fresh outputs and with reused ones that hold NaN garbage. Inputs are multiples
//! of 1/8 in [-2, 2], so every sum the dot makes is exact in its accumulation type and any
//! rounding (of a narrow core, of the epilogue's own arithmetic) happens once, where the
//! evaluator does it too.

use axle_analysis::eval::evaluate;
use axle_codegen_cpu::{compile, emit_text, kernel_plan, CpuOptions, Emit, HostBuffer};
use axle_ir::{compare_arrays, parse_module, ArrayLiteral, Literal, Tolerance};
use axle_testkit::{noise, real_array};

/// The epilogues checked, each reading the dot `d` (of type `T`).
#[derive(Clone, Copy, Debug)]
enum Epi {
    /// `max(d + bias, 0)`.
    BiasRelu,
    /// `d * 0.125 + bias`.
    ScaleBias,
    /// `(d, d + bias)`: the core is an output beside its epilogue.
    CoreAndSum,
    /// `d + res`: a residual as large as the core keeps the epilogue on finished blocks.
    Residual,
    /// `d * 0.125 + res`: scaled, with a residual (on finished blocks too).
    ScaleResidual,
    /// `convert(d + bias)` to `bf16`: the core goes to a scratch buffer.
    Narrowed,
}

/// One output fusion: `dot` of element type `ty`, `[batch?, m, k] x [batch?, k, n]` with
/// either operand transposed in memory, then `epi`.
#[derive(Clone, Copy, Debug)]
struct Case {
    ty: &'static str,
    batch: Option<i64>,
    m: i64,
    k: i64,
    n: i64,
    ta: bool,
    tb: bool,
    epi: Epi,
}

fn list(d: &[i64]) -> String {
    d.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

impl Case {
    fn text(&self) -> String {
        let Case {
            ty,
            m,
            k,
            n,
            ta,
            tb,
            ..
        } = *self;
        let lead: Vec<i64> = self.batch.into_iter().collect();
        let b = lead.len();
        let with = |d: [i64; 2]| list(&[&lead[..], &d[..]].concat());
        let (lhs, lc) = if ta {
            (with([k, m]), b)
        } else {
            (with([m, k]), b + 1)
        };
        let (rhs, rc) = if tb {
            (with([n, k]), b + 1)
        } else {
            (with([k, n]), b)
        };
        let out = with([m, n]);
        let batch_dims = if b == 1 {
            "lhs_batch_dims={0}, rhs_batch_dims={0}, "
        } else {
            ""
        };
        let t = format!("{ty}[{out}]");
        let bias = format!("  bb = {t} broadcast(bias), dimensions={{{}}}\n", b + 1);
        let (body, root_ty) = match self.epi {
            Epi::BiasRelu => (
                format!(
                    "{bias}  s = {t} add(d, bb)\n  z = {ty}[] constant(0)\n  \
                     zb = {t} broadcast(z), dimensions={{}}\n  ROOT o = {t} maximum(s, zb)\n"
                ),
                t.clone(),
            ),
            Epi::ScaleBias => (
                format!(
                    "{bias}  c = {ty}[] constant(0.125)\n  cb = {t} broadcast(c), dimensions={{}}\n  \
                     sc = {t} multiply(d, cb)\n  ROOT o = {t} add(sc, bb)\n"
                ),
                t.clone(),
            ),
            Epi::CoreAndSum => (
                format!("{bias}  r = {t} add(d, bb)\n  ROOT o = ({t}, {t}) tuple(d, r)\n"),
                format!("({t}, {t})"),
            ),
            Epi::Residual => (format!("  ROOT o = {t} add(d, res)\n"), t.clone()),
            Epi::ScaleResidual => (
                format!(
                    "  c = {ty}[] constant(0.125)\n  cb = {t} broadcast(c), dimensions={{}}\n  \
                     sc = {t} multiply(d, cb)\n  ROOT o = {t} add(sc, res)\n"
                ),
                t.clone(),
            ),
            Epi::Narrowed => (
                format!("{bias}  s = {t} add(d, bb)\n  ROOT o = bf16[{out}] convert(s)\n"),
                format!("bf16[{out}]"),
            ),
        };
        let params = format!(
            "  a = {ty}[{lhs}] parameter(0)\n  w = {ty}[{rhs}] parameter(1)\n  \
             bias = {ty}[{n}] parameter(2)\n  res = {t} parameter(3)\n"
        );
        format!(
            "HloModule tile_epilogue\n\nfused {{\n{params}  d = {t} dot(a, w), {batch_dims}\
             lhs_contracting_dims={{{lc}}}, rhs_contracting_dims={{{rc}}}\n{body}}}\n\n\
             ENTRY main {{\n{params}  ROOT f = {root_ty} fusion(a, w, bias, res), kind=kOutput, \
             calls=fused\n}}\n"
        )
    }
}

/// Multiples of 1/8 in [-2, 2] for every entry parameter.
fn eighths(m: &axle_ir::Module) -> Vec<Literal> {
    m.params(m.entry())
        .iter()
        .enumerate()
        .map(|(p, &id)| {
            let a = m.array_shape(id).expect("array parameters");
            real_array(a.ty, &a.dims, |i| {
                (16.0 * noise(p as u64 + 7, i as u64)).round() / 8.0
            })
        })
        .collect()
}

/// The result leaves' bytes of one compilation, with fresh outputs and with reused ones that
/// start as NaN garbage.
fn run(m: &axle_ir::Module, args: &[Literal], opts: &CpuOptions) -> [Vec<Vec<u8>>; 2] {
    let exe = compile(m, opts).unwrap_or_else(|e| panic!("compiles: {e}"));
    let inputs: Vec<&[u8]> = args
        .iter()
        .map(|l| match l {
            Literal::Array(a) => &a.data[..],
            Literal::Tuple(_) => panic!("array parameters"),
        })
        .collect();
    let bytes = |outs: Vec<HostBuffer>| outs.iter().map(|o| o.bytes().to_vec()).collect();
    let mut fresh = exe.alloc_outputs();
    exe.execute(&inputs, &mut fresh).expect("runs");
    let mut reused: Vec<HostBuffer> = exe
        .alloc_outputs()
        .iter()
        .map(|o| HostBuffer::from_bytes(&vec![0xff; o.len()]))
        .collect();
    exe.execute(&inputs, &mut reused).expect("runs");
    exe.execute(&inputs, &mut reused).expect("runs");
    [bytes(fresh), bytes(reused)]
}

fn check(case: Case) {
    let text = case.text();
    let m = parse_module(&text).unwrap_or_else(|e| panic!("{text}\n{e}"));
    let args = eighths(&m);
    let want = axle_testkit::leaves(&evaluate(&m, &args).expect("the evaluator runs it"));
    // One kernel: the GEMM with the epilogue around its core.
    let plan = kernel_plan(&m).expect("plans");
    assert!(
        plan.len() == 1
            && plan[0].starts_with("Gemm f root=o ")
            && plan[0].contains("epilogue core=d"),
        "{case:?}: {plan:?}"
    );
    let opts = |tile_epilogues, threads| CpuOptions {
        threads,
        tile_epilogues,
        ..Default::default()
    };
    let runs: Vec<_> = [
        ("blocks, 8 threads", opts(false, 8)),
        ("blocks, 1 thread", opts(false, 1)),
        ("tiles, 1 thread", opts(true, 1)),
        ("tiles, 8 threads", opts(true, 8)),
    ]
    .into_iter()
    .flat_map(|(what, opts)| {
        let [fresh, reused] = run(&m, &args, &opts);
        [((what, "fresh"), fresh), ((what, "reused"), reused)]
    })
    .collect();
    let expected = &runs[0].1;
    for ((what, policy), got) in &runs {
        assert!(
            got == expected,
            "{case:?}, {what}, {policy} outputs: not the bits of the block epilogue\n{text}"
        );
        for (k, (w, g)) in want.iter().zip(got).enumerate() {
            let g = ArrayLiteral {
                shape: w.shape.clone(),
                data: g.clone(),
            };
            compare_arrays(w, &g, Tolerance::Exact).unwrap_or_else(|e| {
                panic!("{case:?}, {what}, {policy} outputs, out{k}: {e}\n{text}")
            });
        }
    }
}

/// Sizes `(m, k, n)`: single elements, odd sizes around the `8 x 32` (AVX-512) or `6 x 16`
/// (AVX2) tile, and a dot with several `K` blocks that 8 threads split into blocks of rows and
/// columns, partial tiles at both edges.
const SIZES: &[(i64, i64, i64)] = &[(1, 1, 1), (3, 17, 255), (17, 255, 3), (67, 600, 100)];

const EPILOGUES: &[Epi] = &[
    Epi::BiasRelu,
    Epi::ScaleBias,
    Epi::CoreAndSum,
    Epi::Narrowed,
    Epi::Residual,
    Epi::ScaleResidual,
];

fn case(ty: &'static str, (m, k, n): (i64, i64, i64), epi: Epi) -> Case {
    Case {
        ty,
        batch: None,
        m,
        k,
        n,
        ta: false,
        tb: false,
        epi,
    }
}

#[test]
fn f32_epilogues_on_tiles_are_the_bits_of_block_epilogues() {
    for &size in SIZES {
        for &epi in EPILOGUES {
            check(case("f32", size, epi));
        }
    }
    // f64 sums: half as many lanes, a tile half as wide.
    for size in [(3, 17, 255), (67, 600, 100)] {
        check(case("f64", size, Epi::ScaleBias));
    }
}

#[test]
fn transposed_and_batched_operands() {
    for size in [(255, 3, 17), (67, 600, 100)] {
        for epi in [Epi::BiasRelu, Epi::CoreAndSum] {
            check(Case {
                ta: true,
                tb: true,
                ..case("f32", size, epi)
            });
        }
    }
    for (size, tb) in [((3, 17, 33), false), ((17, 300, 40), true)] {
        for epi in [Epi::ScaleBias, Epi::Narrowed] {
            check(Case {
                batch: Some(2),
                tb,
                ..case("f32", size, epi)
            });
        }
    }
}

#[test]
fn narrow_cores_are_rounded_once_before_their_epilogue() {
    // A bf16 or f16 dot keeps its sums in registers over the whole contraction and rounds
    // them once: the epilogue reads the rounded value, as it reads it from memory.
    for ty in ["bf16", "f16"] {
        for size in [(17, 255, 3), (67, 600, 100)] {
            for epi in [Epi::BiasRelu, Epi::ScaleBias] {
                check(case(ty, size, epi));
            }
        }
    }
}

/// The optimized LLVM IR of `case` compiled with the epilogue on tiles or on blocks.
fn ir(case: Case, tiles: bool) -> String {
    let m = parse_module(&case.text()).expect("parses");
    let opts = CpuOptions {
        tile_epilogues: tiles,
        threads: 1,
        ..Default::default()
    };
    emit_text(&m, &opts, Emit::LlvmIr).expect("compiles")
}

#[test]
fn tile_epilogues_stay_vector_loops() {
    // With 256 columns every tile row is a full `NR` wide, a trip count LLVM knows: unrolled
    // before the loop vectorizer ran, the row's loop became `NR` scalar additions of the
    // bias in every copy of the epilogue. The tile rows' loops carry
    // `llvm.loop.unroll.disable` and stay vector loops, so scalar additions remain only in
    // the loops' remainders: one per copy of the epilogue (the GEMM emits the tile, and so
    // its epilogue, once for each way it reads its operands: packing `A` or `B` as it goes,
    // or reading them packed), far fewer than one unrolled row's `NR` (32 lanes of `f32`
    // with AVX-512, 16 with AVX2).
    let case = case("f32", (64, 64, 256), Epi::BiasRelu);
    let (tiles, blocks) = (ir(case, true), ir(case, false));
    let scalar_adds = |t: &str| t.matches("fadd float ").count();
    assert!(tiles.contains("llvm.loop.unroll.disable"), "{tiles}");
    assert!(!blocks.contains("llvm.loop.unroll.disable"), "{blocks}");
    assert!(
        scalar_adds(&tiles) < 16,
        "tiles: {} scalar adds, blocks: {}\n{tiles}",
        scalar_adds(&tiles),
        scalar_adds(&blocks)
    );
}

#[test]
fn residuals_as_large_as_the_core_keep_the_block_epilogue() {
    // A bias is read a tile row at a time from one short vector: the tile path takes it, and
    // the code differs from the block path's. A residual would be read in short pieces of
    // rows far apart: the option changes nothing.
    let size = (67, 600, 100);
    let bias = case("f32", size, Epi::BiasRelu);
    assert_ne!(ir(bias, true), ir(bias, false), "{bias:?}");
    for epi in [Epi::Residual, Epi::ScaleResidual] {
        let res = case("f32", size, epi);
        assert_eq!(ir(res, true), ir(res, false), "{res:?}");
    }
}
