//! Property: on generated modules rich in the patterns the simplifier rewrites (splat constants
//! of every special value, identity and absorbing operands, conversion chains, reshape,
//! transpose, slice and broadcast chains, trivial reduces and dots, selects and compares), every
//! simplification pass and the `algsimp`-centred pipelines keep the evaluator's results
//! bit-identical on inputs full of special values, verify after every pass, and give the same
//! output at 1 and 8 threads. The generator is a list of small steps turned into HLO text;
//! steps whose operands are missing are skipped, so shrinking always yields a valid module.

use axle_analysis::{same_results, Equivalence};
use axle_ir::filetest::run_pipeline_text;
use axle_ir::{parse_module, PassRegistry, Tolerance};
use quickcheck::{QuickCheck, TestResult};

/// Value classes: (HLO type, name prefix).
const CLASSES: &[&str] = &[
    "f32[2,3]{1,0}",  // 0 F
    "s32[2,3]{1,0}",  // 1 I
    "u8[2,3]{1,0}",   // 2 U
    "pred[2,3]{1,0}", // 3 P
    "f32[6]{0}",      // 4 F6
    "f32[3,2]{1,0}",  // 5 FT
    "f32[1,6]{1,0}",  // 6 F16
    "f32[3]{0}",      // 7 F3
    "f64[2,3]{1,0}",  // 8 D
    "bf16[2,3]{1,0}", // 9 B
];
const F: usize = 0;
const I: usize = 1;
const U: usize = 2;
const P: usize = 3;
const F6: usize = 4;
const FT: usize = 5;
const F16: usize = 6;
const F3: usize = 7;
const D: usize = 8;
const B: usize = 9;

fn scalar_ty(class: usize) -> &'static str {
    match class {
        I => "s32",
        U => "u8",
        P => "pred",
        D => "f64",
        B => "bf16",
        _ => "f32",
    }
}

const FLOATS: &[&str] = &[
    "0", "-0", "1", "-1", "2", "0.5", "4", "3", "inf", "-inf", "nan", "0.25",
];
const INTS: &[&str] = &["0", "1", "-1", "2", "2147483647", "-2147483648", "7"];
const UINTS: &[&str] = &["0", "1", "255", "2"];

struct Gen {
    text: Vec<String>,
    pools: Vec<Vec<String>>,
    n: usize,
    reducers: Vec<String>,
    /// Extra computations (loop bodies and conditions), as text.
    comps: Vec<String>,
}

impl Gen {
    fn pick(&self, class: usize, k: u8) -> Option<String> {
        let p = &self.pools[class];
        (!p.is_empty()).then(|| p[k as usize % p.len()].clone())
    }

    fn emit(&mut self, class: usize, rhs: String) -> String {
        self.n += 1;
        let name = format!("v{}", self.n);
        self.text
            .push(format!("  {name} = {} {rhs}", CLASSES[class]));
        self.pools[class].push(name.clone());
        name
    }

    fn splat(&mut self, class: usize, v: &str) -> String {
        self.n += 1;
        let s = format!("s{}", self.n);
        self.text
            .push(format!("  {s} = {}[] constant({v})", scalar_ty(class)));
        self.emit(class, format!("broadcast({s}), dimensions={{}}"))
    }

    fn reducer(&mut self, op: &str) -> String {
        let name = format!("red_{op}");
        if !self.reducers.contains(&name) {
            self.reducers.push(name.clone());
        }
        name
    }
}

fn palette(class: usize) -> &'static [&'static str] {
    match class {
        I => INTS,
        U => UINTS,
        P => &["true", "false"],
        _ => FLOATS,
    }
}

fn build(steps: &[(u8, u8, u8, u8)]) -> String {
    let mut g = Gen {
        text: Vec::new(),
        pools: vec![Vec::new(); CLASSES.len()],
        n: 0,
        reducers: Vec::new(),
        comps: Vec::new(),
    };
    for (k, class) in [F, I, U, P, F].iter().enumerate() {
        g.text
            .push(format!("  p{k} = {} parameter({k})", CLASSES[*class]));
        g.pools[*class].push(format!("p{k}"));
    }
    for &(kind, a, b, c) in steps {
        let fc = [F, D, B][c as usize % 3];
        match kind % 20 {
            0 | 1 => {
                let class = [F, I, U, P, D, B][a as usize % 6];
                let pal = palette(class);
                let v = pal[b as usize % pal.len()];
                g.splat(class, v);
            }
            2 | 3 => {
                let ops = [
                    "add", "subtract", "multiply", "divide", "maximum", "minimum", "power",
                ];
                if let (Some(x), Some(y)) = (g.pick(fc, a), g.pick(fc, b)) {
                    g.emit(fc, format!("{}({x}, {y})", ops[c as usize % ops.len()]));
                }
            }
            4 => {
                let ops = [
                    "add",
                    "subtract",
                    "multiply",
                    "maximum",
                    "minimum",
                    "and",
                    "or",
                    "xor",
                    "shift-left",
                    "power",
                    "divide",
                ];
                let class = if c % 2 == 0 { I } else { U };
                if let (Some(x), Some(y)) = (g.pick(class, a), g.pick(class, b)) {
                    g.emit(
                        class,
                        format!("{}({x}, {y})", ops[c as usize / 2 % ops.len()]),
                    );
                }
            }
            5 => {
                let ops = ["and", "or", "xor"];
                if let (Some(x), Some(y)) = (g.pick(P, a), g.pick(P, b)) {
                    g.emit(P, format!("{}({x}, {y})", ops[c as usize % 3]));
                }
                if let Some(x) = g.pick(P, b) {
                    g.emit(P, format!("not({x})"));
                }
            }
            6 => {
                let ops = [
                    "negate",
                    "abs",
                    "floor",
                    "ceil",
                    "sign",
                    "round-nearest-even",
                    "copy",
                    "exponential",
                ];
                if let Some(x) = g.pick(fc, a) {
                    g.emit(fc, format!("{}({x})", ops[b as usize % ops.len()]));
                }
            }
            7 => {
                let ops = ["negate", "abs", "not", "sign"];
                if let Some(x) = g.pick(I, a) {
                    g.emit(I, format!("{}({x})", ops[b as usize % ops.len()]));
                }
            }
            8 => {
                let dirs = ["EQ", "NE", "LT", "LE", "GT", "GE"];
                let class = [F, I, P][c as usize % 3];
                if let (Some(x), Some(y)) = (g.pick(class, a), g.pick(class, b)) {
                    let y = if b % 3 == 0 { x.clone() } else { y };
                    let total = if class == F && c % 2 == 1 {
                        ", type=TOTALORDER"
                    } else {
                        ""
                    };
                    g.emit(
                        P,
                        format!(
                            "compare({x}, {y}), direction={}{total}",
                            dirs[a as usize % dirs.len()]
                        ),
                    );
                }
            }
            9 => {
                let class = [F, I][c as usize % 2];
                if let (Some(p), Some(x), Some(y)) =
                    (g.pick(P, c), g.pick(class, a), g.pick(class, b))
                {
                    let y = if b % 3 == 0 { x.clone() } else { y };
                    g.emit(class, format!("select({p}, {x}, {y})"));
                }
            }
            10 => {
                // Conversion chains.
                let (from, to) = [
                    (F, D),
                    (D, F),
                    (I, F),
                    (F, I),
                    (U, I),
                    (I, U),
                    (P, F),
                    (P, I),
                    (F, B),
                    (B, F),
                    (I, D),
                    (D, I),
                ][c as usize % 12];
                if let Some(x) = g.pick(from, a) {
                    let y = g.emit(to, format!("convert({x})"));
                    if b % 2 == 0 {
                        g.emit(from, format!("convert({y})"));
                    }
                }
            }
            11 => {
                // Reshape chains F -> F6 -> FT / F16 and back.
                let (from, to) = [
                    (F, F6),
                    (F6, FT),
                    (FT, F6),
                    (F6, F),
                    (F6, F16),
                    (F16, F6),
                    (F, F),
                ][c as usize % 7];
                if let Some(x) = g.pick(from, a) {
                    g.emit(to, format!("reshape({x})"));
                }
            }
            12 => {
                if c % 2 == 0 {
                    if let Some(x) = g.pick(F, a) {
                        g.emit(FT, format!("transpose({x}), dimensions={{1,0}}"));
                    }
                } else if let Some(x) = g.pick(FT, a) {
                    g.emit(F, format!("transpose({x}), dimensions={{1,0}}"));
                }
            }
            13 => {
                // Slices of F6 and their concatenations, slices of slices.
                if let Some(x) = g.pick(F6, a) {
                    let lo = (b % 4) as i64;
                    let s = g.emit(F3, format!("slice({x}), slice={{[{lo}:{}]}}", lo + 3));
                    if c % 2 == 0 {
                        if let Some(y) = g.pick(F3, c) {
                            g.emit(F6, format!("concatenate({s}, {y}), dimensions={{0}}"));
                        }
                    } else {
                        g.emit(F3, format!("slice({s}), slice={{[0:3]}}"));
                    }
                }
            }
            14 => {
                // Broadcasts: F3 along either dimension of F or FT, broadcast of broadcast.
                if let Some(x) = g.pick(F3, a) {
                    if c % 2 == 0 {
                        g.emit(F, format!("broadcast({x}), dimensions={{1}}"));
                    } else {
                        g.emit(FT, format!("broadcast({x}), dimensions={{0}}"));
                    }
                }
            }
            15 => {
                // Reduces over a size-1 dimension (trivial) or a real one, with special inits.
                let ops = ["add", "maximum", "multiply", "minimum"];
                let op = ops[c as usize % ops.len()];
                let red = g.reducer(op);
                let init = FLOATS[b as usize % FLOATS.len()];
                g.n += 1;
                let iname = format!("i{}", g.n);
                g.text.push(format!("  {iname} = f32[] constant({init})"));
                if a % 2 == 0 {
                    if let Some(x) = g.pick(F16, a) {
                        g.emit(
                            F6,
                            format!("reduce({x}, {iname}), dimensions={{0}}, to_apply={red}"),
                        );
                    }
                } else if let Some(x) = g.pick(F, a) {
                    g.emit(
                        F3,
                        format!("reduce({x}, {iname}), dimensions={{0}}, to_apply={red}"),
                    );
                }
            }
            16 => {
                // Dots: a real one (F x FT -> f32[2,2], reshaped back through F6? no: summed),
                // and contracting one element (F16^T x F16).
                if let (Some(x), Some(y)) = (g.pick(F16, a), g.pick(F16, b)) {
                    g.n += 1;
                    let name = format!("d{}", g.n);
                    g.text.push(format!(
                        "  {name} = f32[6,6]{{1,0}} dot({x}, {y}), lhs_contracting_dims={{0}}, rhs_contracting_dims={{0}}"
                    ));
                    g.n += 1;
                    let sl = format!("d{}", g.n);
                    g.text.push(format!(
                        "  {sl} = f32[1,6]{{1,0}} slice({name}), slice={{[{}:{}], [0:6]}}",
                        c % 6,
                        c % 6 + 1
                    ));
                    g.pools[F16].push(sl);
                }
            }
            17 => {
                // Pads with zero widths, reverses, iotas, dynamic slices with constant starts.
                match c % 4 {
                    0 => {
                        if let Some(x) = g.pick(F, a) {
                            g.n += 1;
                            let z = format!("z{}", g.n);
                            g.text.push(format!("  {z} = f32[] constant(0)"));
                            g.emit(F, format!("pad({x}, {z}), padding=0_0x0_0"));
                        }
                    }
                    1 => {
                        if let Some(x) = g.pick(F16, a) {
                            let r = g.emit(F16, format!("reverse({x}), dimensions={{0}}"));
                            g.emit(F16, format!("reverse({r}), dimensions={{1}}"));
                        }
                    }
                    2 => {
                        g.emit(I, format!("iota(), iota_dimension={}", b % 2));
                    }
                    _ => {
                        if let Some(x) = g.pick(F6, a) {
                            g.n += 1;
                            let s = format!("k{}", g.n);
                            g.text.push(format!(
                                "  {s} = s32[] constant({})",
                                [0, 2, 5, -3, 100][b as usize % 5]
                            ));
                            g.emit(
                                F3,
                                format!("dynamic-slice({x}, {s}), dynamic_slice_sizes={{3}}"),
                            );
                        }
                    }
                }
            }
            18 => {
                // Negation algebra: x + (-y), x - (-y), (-x) * (-y), abs(-x), -(-x).
                if let (Some(x), Some(y)) = (g.pick(fc, a), g.pick(fc, b)) {
                    let ny = g.emit(fc, format!("negate({y})"));
                    let ops = ["add", "subtract", "multiply"];
                    g.emit(fc, format!("{}({x}, {ny})", ops[c as usize % 3]));
                    g.emit(fc, format!("abs({ny})"));
                }
            }
            _ if c % 2 == 1 => {
                // A counted loop: an accumulator (variant), a pass-through element with an
                // invariant computation on it, and an element the result may or may not read.
                if let (Some(x), Some(y), Some(z)) = (g.pick(F, a), g.pick(F, b), g.pick(F, c)) {
                    g.n += 1;
                    let k = g.n;
                    let st = format!("(s32[], {f}, {f}, {f})", f = CLASSES[F]);
                    let trips = [0, 1, 2, 3][(b / 2) as usize % 4];
                    let inv_op = ["exponential", "negate", "floor"][a as usize % 3];
                    g.comps.push(format!(
                        "cond_{k} {{\n  l{k}.cp = {st} parameter(0)\n  l{k}.ci = s32[] get-tuple-element(l{k}.cp), index=0\n  l{k}.lim = s32[] constant({trips})\n  ROOT l{k}.lt = pred[] compare(l{k}.ci, l{k}.lim), direction=LT\n}}\n\nbody_{k} {{\n  l{k}.bp = {st} parameter(0)\n  l{k}.bi = s32[] get-tuple-element(l{k}.bp), index=0\n  l{k}.one = s32[] constant(1)\n  l{k}.nx = s32[] add(l{k}.bi, l{k}.one)\n  l{k}.ac = {f} get-tuple-element(l{k}.bp), index=1\n  l{k}.kk = {f} get-tuple-element(l{k}.bp), index=2\n  l{k}.dd = {f} get-tuple-element(l{k}.bp), index=3\n  l{k}.iv = {f} {inv_op}(l{k}.kk)\n  l{k}.ac2 = {f} add(l{k}.ac, l{k}.iv)\n  l{k}.dd2 = {f} sine(l{k}.dd)\n  ROOT l{k}.bt = {st} tuple(l{k}.nx, l{k}.ac2, l{k}.kk, l{k}.dd2)\n}}\n",
                        f = CLASSES[F]
                    ));
                    g.text.push(format!("  l{k}.z = s32[] constant(0)"));
                    g.text
                        .push(format!("  l{k}.in = {st} tuple(l{k}.z, {x}, {y}, {z})"));
                    g.text.push(format!(
                        "  l{k}.w = {st} while(l{k}.in), condition=cond_{k}, body=body_{k}"
                    ));
                    g.emit(F, format!("get-tuple-element(l{k}.w), index=1"));
                    if a % 2 == 0 {
                        g.emit(F, format!("get-tuple-element(l{k}.w), index=3"));
                    }
                    if a % 3 == 1 {
                        g.emit(F, format!("get-tuple-element(l{k}.w), index=2"));
                    }
                }
            }
            _ => {
                // A tuple taken apart again.
                if let (Some(x), Some(y)) = (g.pick(F, a), g.pick(I, b)) {
                    g.n += 1;
                    let t = format!("t{}", g.n);
                    g.text.push(format!(
                        "  {t} = ({}, {}) tuple({x}, {y})",
                        CLASSES[F], CLASSES[I]
                    ));
                    g.emit(F, format!("get-tuple-element({t}), index=0"));
                }
            }
        }
    }
    // The result: the last value of every class.
    let outs: Vec<(usize, String)> = (0..CLASSES.len())
        .filter_map(|c| g.pools[c].last().map(|v| (c, v.clone())))
        .collect();
    let tys: Vec<&str> = outs.iter().map(|(c, _)| CLASSES[*c]).collect();
    let names: Vec<&str> = outs.iter().map(|(_, n)| n.as_str()).collect();
    let mut text = String::from("HloModule generated\n\n");
    for r in &g.reducers {
        let op = r.trim_start_matches("red_");
        text.push_str(&format!(
            "{r} {{\n  {r}.a = f32[] parameter(0)\n  {r}.b = f32[] parameter(1)\n  ROOT {r}.r = f32[] {op}({r}.a, {r}.b)\n}}\n\n"
        ));
    }
    for c in &g.comps {
        text.push_str(c);
        text.push('\n');
    }
    text.push_str("ENTRY main {\n");
    for l in &g.text {
        text.push_str(l);
        text.push('\n');
    }
    text.push_str(&format!(
        "  ROOT result = ({}) tuple({})\n}}\n",
        tys.join(", "),
        names.join(", ")
    ));
    text
}

fn registry() -> PassRegistry {
    let mut reg = PassRegistry::new();
    axle_ir::passes::register(&mut reg);
    axle_fusion::register(&mut reg);
    reg
}

const PIPELINES: &[&str] = &[
    "while-simplify,dce",
    "fixpoint(max=6)[while-simplify,inline,tuple-simplify,algsimp,cse,dce]",
    "algsimp",
    "algsimp,dce",
    "fixpoint(max=6)[algsimp,cse,dce]",
    "fixpoint(max=6)[algsimp,constant-folding,reshape-mover,broadcast-canonicalize,tuple-simplify,zero-sized-elim,cse,dce]",
    "constant-folding,dce",
    "reshape-mover,algsimp,dce",
    "broadcast-canonicalize,algsimp",
];

fn keeps_results(steps: Vec<(u8, u8, u8, u8)>, pick: u8, seed: u64) -> TestResult {
    let text = build(&steps);
    let m = match parse_module(&text) {
        Ok(m) => m,
        Err(e) => return TestResult::error(format!("generated text: {}\n{text}", e.render("gen"))),
    };
    if let Err(e) = axle_ir::verify::verify(&m) {
        return TestResult::error(format!("generated module does not verify: {e}\n{text}"));
    }
    let reg = registry();
    let pipeline = PIPELINES[pick as usize % PIPELINES.len()];
    let out1 = match run_pipeline_text(&reg, pipeline, &m, 1) {
        Ok(o) => o,
        Err(e) => return TestResult::error(format!("{pipeline}: {e}\n{text}")),
    };
    match run_pipeline_text(&reg, pipeline, &m, 8) {
        Ok(o8) if o8 == out1 => {}
        Ok(_) => return TestResult::error(format!("{pipeline}: 1 and 8 threads differ\n{text}")),
        Err(e) => return TestResult::error(format!("{pipeline} at 8 threads: {e}")),
    }
    let out = parse_module(&out1).expect("printed output parses");
    match same_results(&m, &out, seed, 3, Tolerance::Exact) {
        Ok(Equivalence::Same(_)) => TestResult::passed(),
        Ok(Equivalence::NotComparable(e)) => {
            TestResult::error(format!("generated modules evaluate: {e}\n{text}"))
        }
        Err(e) => TestResult::error(format!(
            "{pipeline}: {e}\n--- before ---\n{text}\n--- after ---\n{out1}"
        )),
    }
}

#[test]
fn simplification_keeps_results_on_pattern_rich_modules() {
    QuickCheck::new()
        .tests(400)
        .rng(quickcheck::Gen::new(40))
        .quickcheck(keeps_results as fn(Vec<(u8, u8, u8, u8)>, u8, u64) -> TestResult);
}

#[test]
fn the_generator_reaches_most_rules() {
    // A fixed, seeded set of step lists, and the rules they fire: the property above is only
    // as good as the patterns its generator makes.
    let reg = registry();
    let mut fired: std::collections::BTreeSet<String> = Default::default();
    let mut loop_rules: std::collections::BTreeSet<String> = Default::default();
    let mut rng = axle_analysis::equivalence::SplitMix::new(5);
    for _ in 0..300 {
        let n = 5 + rng.below(40) as usize;
        let steps: Vec<(u8, u8, u8, u8)> = (0..n)
            .map(|_| {
                let r = rng.next_u64();
                (r as u8, (r >> 8) as u8, (r >> 16) as u8, (r >> 24) as u8)
            })
            .collect();
        let mut m = parse_module(&build(&steps)).expect("parses");
        let mut pm = axle_ir::PassManager::new(
            &reg,
            "fixpoint(max=6)[algsimp,dce]",
            axle_ir::PassManagerOptions::default(),
        )
        .expect("pipeline");
        pm.run(&mut m).expect("runs");
        for r in pm.stats() {
            for (k, _) in &r.counters {
                fired.insert(k.clone());
            }
        }
        let mut m = parse_module(&build(&steps)).expect("parses");
        let mut pm = axle_ir::PassManager::new(
            &reg,
            "fixpoint(max=6)[while-simplify,inline,tuple-simplify,dce]",
            axle_ir::PassManagerOptions::default(),
        )
        .expect("pipeline");
        pm.run(&mut m).expect("runs");
        for r in pm.stats().iter().filter(|r| r.pass == "while-simplify") {
            for (k, _) in &r.counters {
                loop_rules.insert(k.clone());
            }
        }
    }
    for rule in [
        "trip-count-zero",
        "trip-count-one",
        "dead-element",
        "invariant-hoist",
        "pass-through",
    ] {
        assert!(
            loop_rules.contains(rule),
            "{rule} never fired: {loop_rules:?}"
        );
    }
    assert!(
        fired.len() >= 35,
        "only {} rules fired: {fired:?}",
        fired.len()
    );
}

/// A module the property once caught: `x + (-y)` turned into `x - y` flips the sign of a NaN
/// result, and a total-order compare sees it.
#[test]
fn nan_sign_is_kept_under_total_order() {
    let steps = vec![
        (0, 0, 0, 0),
        (138, 1, 0, 0),
        (0, 0, 0, 0),
        (108, 221, 7, 255),
    ];
    for pick in 0..PIPELINES.len() as u8 {
        for seed in [271, 272, 273] {
            let r = keeps_results(steps.clone(), pick, seed);
            assert!(
                !r.is_failure() && !r.is_error(),
                "pipeline {pick}, seed {seed}"
            );
        }
    }
}
