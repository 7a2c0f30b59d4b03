//! Output fusions of a dot whose epilogue runs on the GEMM's register tiles, from the
//! registers or through a tile buffer, or on finished blocks, and of a convolution whose
//! epilogue runs on its register tiles or on finished blocks (`CpuOptions::epilogues`,
//! `codegen-cpu/src/epilogue.rs`, `lane_epilogue.rs`): bias and ReLU, scaling and a bias, the
//! core returned beside its epilogue, a result narrower than the core, a residual alone or
//! scaled (which keep the epilogue on finished blocks), the transcendentals of GELU (its tanh
//! form and its exact `erf` form) and the logistic, ReLU6's clamp, minimum, division, compare and select, a scale per row, a bias
//! per batch and column, and special values (NaN, infinities, -0 and subnormals) through all
//! of them, on
//! `f32`, `f64`, `bf16` and `f16` dots of odd sizes (1, 3, 17, 255, and a contraction long
//! enough to take several `K` blocks), with partial tiles at the right and bottom edges,
//! transposed and batched operands, and NHWC convolutions with partial pixel tiles and
//! feature strips.
//!
//! Every case must give the same bits with the epilogue in registers, on tile buffers and on
//! blocks of the generated GEMM, and (`f32` and `f64` dots) on the panels of the precompiled
//! GEMM (`CpuOptions::gemm_library`), on 1 and 8 threads, with fresh outputs and with reused ones that hold NaN garbage,
//! and the evaluator's results: exactly where the epilogue is exact arithmetic (inputs are
//! multiples of 1/8 in [-2, 2], so every sum the dot makes is exact in its accumulation type
//! and any rounding, of a narrow core or of the epilogue's own arithmetic, happens once, where
//! the evaluator does it too), within a few ulps where it calls a transcendental.

use axle_analysis::eval::evaluate;
use axle_codegen_cpu::{compile, emit_text, kernel_plan, CpuOptions, Emit, Epilogues, HostBuffer};
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
    /// GELU's tanh form of `d + bias`, as JAX writes it.
    Gelu,
    /// GELU's exact form of `d + bias`, `0.5 x (1 + erf(x / sqrt(2)))` (`approximate=False`
    /// in JAX and Flax, as MLP-Mixer and ViT use it).
    GeluErf,
    /// `logistic(d) * exp(bias)`.
    Logistic,
    /// `select(d > bias, min(d, 1), d / bias)`: a compare, a select, `minimum`, a division
    /// (by zeros and special values where `bias` holds them).
    SelectDivide,
    /// `d * rows`: a scale per row (a broadcast that does not vary along the columns).
    RowScale,
    /// `d + bias2`, a bias per batch and column (`[batch, n]`).
    BatchBias,
    /// ReLU6 of `d + bias`: `clamp(0, d + bias, 6)`.
    Relu6,
}

impl Epi {
    /// Whether the evaluator computes it with other approximations of transcendentals, so it
    /// matches within a tolerance rather than exactly.
    fn approximate(self) -> bool {
        matches!(self, Epi::Gelu | Epi::GeluErf | Epi::Logistic)
    }
}

/// A convolution core: NHWC input `[n, h, w, c]`, a `k x k` kernel `[k, k, c, o]`, stride 1
/// and padding that keeps `h x w`.
#[derive(Clone, Copy, Debug)]
struct Conv {
    n: i64,
    h: i64,
    w: i64,
    c: i64,
    o: i64,
    k: i64,
}

/// One output fusion: `dot` of element type `ty`, `[batch?, m, k] x [batch?, k, n]` with
/// either operand transposed in memory (or the convolution `conv` instead), then `epi`.
#[derive(Clone, Copy, Debug)]
struct Case {
    conv: Option<Conv>,
    ty: &'static str,
    batch: Option<i64>,
    m: i64,
    k: i64,
    n: i64,
    ta: bool,
    tb: bool,
    epi: Epi,
    /// Whether the epilogue's own operands (bias, scales) hold special values: NaN, both
    /// infinities, both zeros and subnormals.
    specials: bool,
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
        let batch_dims = if b == 1 {
            "lhs_batch_dims={0}, rhs_batch_dims={0}, "
        } else {
            ""
        };
        // The operands' shapes, the core's text and its result's dimensions.
        let (lhs, rhs, core, out_dims) = match self.conv {
            None => (
                lhs,
                rhs,
                format!("dot(a, w), {batch_dims}lhs_contracting_dims={{{lc}}}, rhs_contracting_dims={{{rc}}}"),
                [&lead[..], &[m, n][..]].concat(),
            ),
            Some(Conv { n, h, w, c, o, k }) => {
                let (lo, hi) = ((k - 1) / 2, k / 2);
                (
                    list(&[n, h, w, c]),
                    list(&[k, k, c, o]),
                    format!(
                        "convolution(a, w), window={{size={k}x{k} pad={lo}_{hi}x{lo}_{hi}}}, \
                         dim_labels=b01f_01io->b01f"
                    ),
                    vec![n, h, w, o],
                )
            }
        };
        let last = out_dims.len() - 1;
        // Batch-like leading dimensions (a dot's batch, a convolution's images).
        let lead = if self.conv.is_some() || b == 1 {
            vec![0]
        } else {
            vec![]
        };
        let out = list(&out_dims);
        let t = format!("{ty}[{out}]");
        let bias = format!("  bb = {t} broadcast(bias), dimensions={{{last}}}\n");
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
            Epi::Gelu => (
                format!(
                    "{bias}  x = {t} add(d, bb)\n  x2 = {t} multiply(x, x)\n  \
                     x3 = {t} multiply(x2, x)\n  c0 = {ty}[] constant(0.044715)\n  \
                     c0b = {t} broadcast(c0), dimensions={{}}\n  x3c = {t} multiply(x3, c0b)\n  \
                     in = {t} add(x, x3c)\n  c1 = {ty}[] constant(0.7978846)\n  \
                     c1b = {t} broadcast(c1), dimensions={{}}\n  ins = {t} multiply(in, c1b)\n  \
                     th = {t} tanh(ins)\n  one = {ty}[] constant(1)\n  \
                     oneb = {t} broadcast(one), dimensions={{}}\n  p = {t} add(th, oneb)\n  \
                     half = {ty}[] constant(0.5)\n  hb = {t} broadcast(half), dimensions={{}}\n  \
                     xh = {t} multiply(x, hb)\n  ROOT o = {t} multiply(xh, p)\n"
                ),
                t.clone(),
            ),
            Epi::GeluErf => (
                format!(
                    "{bias}  x = {t} add(d, bb)\n  c = {ty}[] constant(0.70710677)\n  \
                     cb = {t} broadcast(c), dimensions={{}}\n  xs = {t} multiply(x, cb)\n  \
                     e = {t} erf(xs)\n  one = {ty}[] constant(1)\n  \
                     oneb = {t} broadcast(one), dimensions={{}}\n  p = {t} add(e, oneb)\n  \
                     half = {ty}[] constant(0.5)\n  hb = {t} broadcast(half), dimensions={{}}\n  \
                     xh = {t} multiply(x, hb)\n  ROOT o = {t} multiply(xh, p)\n"
                ),
                t.clone(),
            ),
            Epi::Logistic => (
                format!(
                    "{bias}  l = {t} logistic(d)\n  e = {t} exponential(bb)\n  \
                     ROOT o = {t} multiply(l, e)\n"
                ),
                t.clone(),
            ),
            Epi::SelectDivide => (
                format!(
                    "{bias}  gt = pred[{out}] compare(d, bb), direction=GT\n  \
                     one = {ty}[] constant(1)\n  oneb = {t} broadcast(one), dimensions={{}}\n  \
                     mn = {t} minimum(d, oneb)\n  q = {t} divide(d, bb)\n  \
                     ROOT o = {t} select(gt, mn, q)\n"
                ),
                t.clone(),
            ),
            Epi::Relu6 => (
                format!(
                    "{bias}  s = {t} add(d, bb)\n  lo = {ty}[] constant(0)\n  \
                     hi = {ty}[] constant(6)\n  ROOT o = {t} clamp(lo, s, hi)\n"
                ),
                t.clone(),
            ),
            Epi::RowScale => (
                format!(
                    "  rb = {t} broadcast(rows), dimensions={{{}}}\n  ROOT o = {t} multiply(d, rb)\n",
                    list(&(0..last as i64).collect::<Vec<_>>())
                ),
                t.clone(),
            ),
            Epi::BatchBias => (
                format!(
                    "  b2 = {t} broadcast(bias2), dimensions={{{}}}\n  ROOT o = {t} add(d, b2)\n",
                    list(&[&lead[..], &[last as i64][..]].concat())
                ),
                t.clone(),
            ),
        };
        let cols = out_dims[last];
        let rows = list(&out_dims[..last]);
        let bias2 = list(
            &lead
                .iter()
                .map(|&d| out_dims[d as usize])
                .chain([cols])
                .collect::<Vec<_>>(),
        );
        let params = format!(
            "  a = {ty}[{lhs}] parameter(0)\n  w = {ty}[{rhs}] parameter(1)\n  \
             bias = {ty}[{cols}] parameter(2)\n  res = {t} parameter(3)\n  \
             rows = {ty}[{rows}] parameter(4)\n  bias2 = {ty}[{bias2}] parameter(5)\n"
        );
        format!(
            "HloModule epilogue\n\nfused {{\n{params}  d = {t} {core}\n{body}}}\n\n\
             ENTRY main {{\n{params}  ROOT f = {root_ty} fusion(a, w, bias, res, rows, bias2), \
             kind=kOutput, calls=fused\n}}\n"
        )
    }
}

/// Multiples of 1/8 in [-2, 2] for every entry parameter; with `specials`, every third element
/// of the epilogue's own operands (after the dot's two) a special value instead.
fn eighths(m: &axle_ir::Module, specials: bool) -> Vec<Literal> {
    const SPECIAL: [f64; 7] = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -0.0,
        0.0,
        1e-40,
        -1e-310,
    ];
    m.params(m.entry())
        .iter()
        .enumerate()
        .map(|(p, &id)| {
            let a = m.array_shape(id).expect("array parameters");
            real_array(a.ty, &a.dims, |i| {
                if specials && p >= 2 && i % 3 == 1 {
                    SPECIAL[(i / 3) % SPECIAL.len()]
                } else {
                    (16.0 * noise(p as u64 + 7, i as u64)).round() / 8.0
                }
            })
        })
        .collect()
}

/// The result leaves' bytes of one compilation, with fresh outputs and with reused ones that
/// start as NaN garbage.
fn run(m: &axle_ir::Module, args: &[Literal], opts: &CpuOptions) -> [Vec<Vec<u8>>; 2] {
    let exe = compile(m, opts).unwrap_or_else(|e| panic!("compiles: {e}"));
    let inputs = axle_testkit::array_bytes(args);
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
    let args = eighths(&m, case.specials);
    let want = axle_testkit::leaves(&evaluate(&m, &args).expect("the evaluator runs it"));
    // One kernel: the GEMM or the tiled convolution with the epilogue around its core.
    let plan = kernel_plan(&m).expect("plans");
    let kind = if case.conv.is_some() { "Conv" } else { "Gemm" };
    assert!(
        plan.len() == 1
            && plan[0].starts_with(&format!("{kind} f root=o "))
            && plan[0].contains("epilogue core=d"),
        "{case:?}: {plan:?}"
    );
    let opts = |epilogues, threads| CpuOptions {
        threads,
        epilogues,
        gemm_library: false,
        ..Default::default()
    };
    // `f32` and `f64` dots on the precompiled GEMM, the epilogue on its finished panels.
    let library = |threads| CpuOptions {
        threads,
        gemm_library: true,
        ..Default::default()
    };
    let runs: Vec<_> = [
        ("library, 8 threads", library(8)),
        ("library, 1 thread", library(1)),
        ("blocks, 8 threads", opts(Epilogues::Blocks, 8)),
        ("blocks, 1 thread", opts(Epilogues::Blocks, 1)),
        ("tiles, 1 thread", opts(Epilogues::Tiles, 1)),
        ("tiles, 8 threads", opts(Epilogues::Tiles, 8)),
        ("registers, 1 thread", opts(Epilogues::Registers, 1)),
        ("registers, 8 threads", opts(Epilogues::Registers, 8)),
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
        if case.specials {
            // Subnormal operands: the module flushes them (as XLA's CPU backend runs), the
            // evaluator does not; the paths above must still agree bit for bit.
            continue;
        }
        let tol = if case.epi.approximate() {
            Tolerance::Close {
                rtol: if case.ty == "f32" { 1e-5 } else { 1e-12 },
                atol: if case.ty == "f32" { 1e-6 } else { 1e-13 },
            }
        } else {
            Tolerance::Exact
        };
        for (k, (w, g)) in want.iter().zip(got).enumerate() {
            let g = ArrayLiteral {
                shape: w.shape.clone(),
                data: g.clone(),
            };
            compare_arrays(w, &g, tol).unwrap_or_else(|e| {
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
    Epi::Relu6,
];

fn case(ty: &'static str, (m, k, n): (i64, i64, i64), epi: Epi) -> Case {
    Case {
        conv: None,
        ty,
        batch: None,
        m,
        k,
        n,
        ta: false,
        tb: false,
        epi,
        specials: false,
    }
}

#[test]
fn f32_epilogues_in_registers_and_on_tiles_are_the_bits_of_block_epilogues() {
    for &size in SIZES {
        for &epi in EPILOGUES {
            check(case("f32", size, epi));
        }
    }
    // f64 sums: half as many lanes, a tile half as wide.
    for size in [(3, 17, 255), (67, 600, 100)] {
        for epi in [Epi::ScaleBias, Epi::SelectDivide, Epi::RowScale, Epi::Relu6] {
            check(case("f64", size, epi));
        }
    }
}

#[test]
fn special_values_through_every_admitted_op() {
    // NaN, infinities, zeros of both signs and subnormals in the bias and scales: `maximum`
    // and `minimum` propagate NaN and order -0 below +0, subnormals are flushed, division by
    // zeros and infinities; the register path must keep every bit of the scalar code.
    for ty in ["f32", "f64"] {
        for epi in [
            Epi::BiasRelu,
            Epi::SelectDivide,
            Epi::RowScale,
            Epi::Logistic,
            Epi::Gelu,
            Epi::GeluErf,
            Epi::Relu6,
        ] {
            check(Case {
                specials: true,
                ..case(ty, (67, 600, 100), epi)
            });
        }
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
        for epi in [Epi::ScaleBias, Epi::Narrowed, Epi::RowScale, Epi::BatchBias] {
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

/// The optimized LLVM IR of `case` compiled with its epilogue at `place` of the generated GEMM.
fn ir(case: Case, place: Epilogues) -> String {
    let m = parse_module(&case.text()).expect("parses");
    let opts = CpuOptions {
        epilogues: place,
        threads: 1,
        gemm_library: false,
        ..Default::default()
    };
    emit_text(&m, &opts, Emit::LlvmIr).expect("compiles")
}

/// The scalar `f32` additions in LLVM IR text.
fn scalar_adds(t: &str) -> usize {
    t.matches("fadd float ").count()
}

/// Whether LLVM IR text allocates a tile buffer on the stack.
fn tile_buffer(t: &str) -> bool {
    t.lines()
        .any(|l| l.trim_start().starts_with("%tile") && l.contains(" = alloca "))
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
    let (tiles, blocks) = (ir(case, Epilogues::Tiles), ir(case, Epilogues::Blocks));
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
fn register_epilogues_compute_on_the_accumulators() {
    // In registers the bias is added to each accumulator vector before its one store: no
    // scalar arithmetic (the block and tile paths keep scalar remainders for partial rows) and
    // no tile buffer. An epilogue the path does not compute on
    // vectors (a convert to `bf16`) or reading a residual as large as the result falls back
    // to blocks, with the block path's very code.
    for (size, epi) in [
        ((67, 600, 100), Epi::BiasRelu),
        ((64, 64, 256), Epi::Gelu),
        ((64, 64, 256), Epi::GeluErf),
        ((17, 300, 40), Epi::RowScale),
        ((3, 17, 255), Epi::Relu6),
    ] {
        let case = case("f32", size, epi);
        let (regs, blocks) = (ir(case, Epilogues::Registers), ir(case, Epilogues::Blocks));
        let scalar = |t: &str| scalar_adds(t) + t.matches("fmul float ").count();
        assert_eq!(scalar(&regs), 0, "{case:?}\n{regs}");
        assert!(scalar(&blocks) > 0, "{case:?}\n{blocks}");
        assert!(!tile_buffer(&regs), "{case:?}\n{regs}");
        assert!(!regs.contains("@erff("), "{case:?}: a libm call\n{regs}");
        let tiles = ir(case, Epilogues::Tiles);
        assert!(tile_buffer(&tiles), "{case:?}\n{tiles}");
    }
    for epi in [Epi::Residual, Epi::ScaleResidual, Epi::Narrowed] {
        let case = case("f32", (67, 600, 100), epi);
        assert_eq!(
            ir(case, Epilogues::Registers),
            ir(case, Epilogues::Blocks),
            "{case:?}"
        );
    }
}

#[test]
fn residuals_as_large_as_the_core_keep_the_block_epilogue() {
    // A bias is read a tile row at a time from one short vector: the tile path takes it, and
    // the code differs from the block path's. A residual would be read in short pieces of
    // rows far apart: the option changes nothing.
    let size = (67, 600, 100);
    let bias = case("f32", size, Epi::BiasRelu);
    assert_ne!(
        ir(bias, Epilogues::Tiles),
        ir(bias, Epilogues::Blocks),
        "{bias:?}"
    );
    for epi in [Epi::Residual, Epi::ScaleResidual] {
        let res = case("f32", size, epi);
        assert_eq!(
            ir(res, Epilogues::Tiles),
            ir(res, Epilogues::Blocks),
            "{res:?}"
        );
    }
}

/// A convolution case: `[2, 5, 7, 9] * [3, 3, 9, 40]` (70 pixels per image, not a multiple of
/// the 6-pixel tile; 40 features, a full strip and a partial one) or a 1x1 kernel of 3
/// features.
fn conv_case(ty: &'static str, epi: Epi, wide: bool) -> Case {
    let conv = if wide {
        Conv {
            n: 2,
            h: 5,
            w: 7,
            c: 9,
            o: 40,
            k: 3,
        }
    } else {
        Conv {
            n: 1,
            h: 3,
            w: 5,
            c: 4,
            o: 3,
            k: 1,
        }
    };
    Case {
        conv: Some(conv),
        ..case(ty, (1, 1, 1), epi)
    }
}

#[test]
fn convolution_epilogues_in_registers_are_the_bits_of_block_epilogues() {
    for ty in ["f32", "f64"] {
        for epi in [
            Epi::BiasRelu,
            Epi::ScaleBias,
            Epi::Gelu,
            Epi::GeluErf,
            Epi::SelectDivide,
            Epi::RowScale,
            Epi::BatchBias,
            Epi::Relu6,
            Epi::Residual,
            Epi::Narrowed,
        ] {
            for wide in [true, false] {
                check(conv_case(ty, epi, wide));
            }
        }
        for epi in [Epi::BiasRelu, Epi::Logistic, Epi::RowScale] {
            check(Case {
                specials: true,
                ..conv_case(ty, epi, true)
            });
        }
    }
    // A narrow convolution keeps its epilogue on blocks (its tile rounds once as it stores).
    check(conv_case("bf16", Epi::BiasRelu, true));
    check(conv_case("bf16", Epi::Relu6, true));
}

#[test]
fn convolution_register_epilogues_compute_on_the_accumulators() {
    let case = conv_case("f32", Epi::BiasRelu, true);
    let (regs, blocks) = (ir(case, Epilogues::Registers), ir(case, Epilogues::Blocks));
    let scalar = |t: &str| scalar_adds(t);
    assert_eq!(scalar(&regs), 0, "{case:?}\n{regs}");
    assert!(scalar(&blocks) > 0, "{case:?}\n{blocks}");
    let res = conv_case("f32", Epi::Residual, true);
    assert_eq!(
        ir(res, Epilogues::Registers),
        ir(res, Epilogues::Blocks),
        "{res:?}"
    );
}
