//! Graph families for compile-time studies: HLO text at any size.
//!
//! Each family takes a size knob (its natural unit: blocks, chains, layers or steps) and writes
//! HLO text that Axle and XLA both parse; [`Family::generate`] picks the unit count for a target
//! number of instructions from the family's measured instructions per unit. The families:
//!
//! - `layer_stack`: the shared baseline's residual MLP + layernorm tower ([`crate::layer_stack`]);
//! - `deep_dag`: a deep chain with skip connections over `f32[64,256]`, a 256x256 dot every 4th
//!   block and a mean-centering row reduction every 8th (the shared baseline's `deep_dag`);
//! - `wide`: many independent short elementwise chains over `f32[16]` rows, each reduced to a
//!   scalar, concatenated at the end (the shared baseline's `wide`);
//! - `transformer`: pre-layernorm transformer layers (4-head self-attention over `f32[128,256]`,
//!   softmax, a GELU MLP), weights sliced from stacked parameters;
//! - `random_dag`: a random DAG from a seed over `f32[16,32]` (unary, binary, dot, row reductions),
//!   each step using the previous one so that every instruction is live;
//! - `conv_stack`: a MobileNet-style stack (3x3 stride-2 convolution, then depthwise 3x3 and
//!   pointwise 1x1 convolutions with bias and ReLU6, a global mean and a classifier) whose weights
//!   are elided constants, `constant({...})`, as in XLA's own benchmark models;
//! - `dot_chains`: 8 interleaved chains of residual layers over `f32[8,16]`, each layer a
//!   `16x16` dot scaled by its own scalar constant (distinct in every layer, so CSE cannot merge
//!   layers), a bias and a tanh, and a mean-centering row normalization every 4th layer: small
//!   dots with epilogues in every layer (issue 30's graph).
//!
//! Invariants: the text is deterministic in the arguments; every computation is defined before
//! it is called; instruction names are unique; the module has an `entry_computation_layout`.

use std::fmt::Write;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A graph family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Residual MLP + layernorm tower.
    LayerStack,
    /// Deep chain with skip connections, dots and reductions.
    DeepDag,
    /// Many short independent chains.
    Wide,
    /// Transformer layers.
    Transformer,
    /// A random DAG from a seed.
    RandomDag,
    /// MobileNet-style convolutions with elided weights.
    ConvStack,
    /// Interleaved chains of small dot layers, each with its own constant.
    DotChains,
}

impl Family {
    /// Every family, in the order of [`Family::name`]s the CLI lists.
    pub const ALL: [Family; 7] = [
        Family::LayerStack,
        Family::DeepDag,
        Family::Wide,
        Family::Transformer,
        Family::RandomDag,
        Family::ConvStack,
        Family::DotChains,
    ];

    /// The family's name.
    pub fn name(self) -> &'static str {
        match self {
            Family::LayerStack => "layer_stack",
            Family::DeepDag => "deep_dag",
            Family::Wide => "wide",
            Family::Transformer => "transformer",
            Family::RandomDag => "random_dag",
            Family::ConvStack => "conv_stack",
            Family::DotChains => "dot_chains",
        }
    }

    /// The family called `name`.
    pub fn from_name(name: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.name() == name)
    }

    /// About how many instructions one unit of the size knob adds (measured on the output).
    pub fn insts_per_unit(self) -> f64 {
        match self {
            Family::LayerStack => crate::INSTS_PER_LAYER as f64,
            Family::DeepDag => 9.0,
            Family::Wide => 18.0,
            Family::Transformer => 67.0,
            Family::RandomDag => 1.0,
            Family::ConvStack => 16.0,
            Family::DotChains => 7.5,
        }
    }

    /// HLO text with `units` units of the size knob (`seed` is used by `random_dag` only).
    pub fn generate_units(self, units: usize, seed: u64) -> String {
        let units = units.max(1);
        match self {
            Family::LayerStack => crate::layer_stack(units),
            Family::DeepDag => deep_dag(units),
            Family::Wide => wide(units),
            Family::Transformer => transformer(units),
            Family::RandomDag => random_dag(units, seed),
            Family::ConvStack => conv_stack(units),
            Family::DotChains => dot_chains(units),
        }
    }

    /// HLO text of about `instructions` instructions.
    pub fn generate(self, instructions: usize, seed: u64) -> String {
        let units = (instructions as f64 / self.insts_per_unit()).round() as usize;
        self.generate_units(units, seed)
    }
}

/// Writes one instruction per call, naming it from a running counter.
struct Text {
    out: String,
    next: usize,
}

impl Text {
    fn new(header: &str) -> Text {
        let mut out = String::with_capacity(1 << 16);
        out.push_str(header);
        out.push('\n');
        Text { out, next: 0 }
    }

    /// Emits `NAME = SHAPE BODY` into the current computation and returns the name.
    fn inst(&mut self, shape: &str, body: &str) -> String {
        let name = format!("v{}", self.next);
        self.next += 1;
        let _ = writeln!(self.out, "  {name} = {shape} {body}");
        name
    }

    /// Emits a named instruction (parameters, the root).
    fn named(&mut self, name: &str, shape: &str, body: &str) {
        let _ = writeln!(self.out, "  {name} = {shape} {body}");
    }

    /// A scalar f32 constant broadcast to `shape`.
    fn splat(&mut self, shape: &str, v: f64) -> String {
        let c = self.inst("f32[]", &format!("constant({v})"));
        self.inst(shape, &format!("broadcast({c}), dimensions={{}}"))
    }
}

/// The scalar `add` and `max` reducers every family uses.
const REDUCERS: &str = "\nadd_f32 {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  \
                        ROOT s = f32[] add(a, b)\n}\n\nmax_f32 {\n  a = f32[] parameter(0)\n  \
                        b = f32[] parameter(1)\n  ROOT m = f32[] maximum(a, b)\n}\n\nENTRY main {";

/// A deep chain of `blocks` blocks with skip connections (see the module docs).
pub fn deep_dag(blocks: usize) -> String {
    let (m, row) = ("f32[64,256]{1,0}", "f32[64]{0}");
    let mut t = Text::new(&format!(
        "HloModule deep_dag, entry_computation_layout={{({m}, f32[256,256]{{1,0}}, f32[256]{{0}})->{m}}}\n{REDUCERS}"
    ));
    t.named("x", m, "parameter(0)");
    t.named("w", "f32[256,256]{1,0}", "parameter(1)");
    t.named("v", "f32[256]{0}", "parameter(2)");
    let vb = t.inst(m, "broadcast(v), dimensions={1}");
    let half = t.splat(m, 0.5);
    let zero = t.inst("f32[]", "constant(0)");
    let inv_n = t.splat(m, 1.0 / 256.0);
    let mut hist = vec!["x".to_string()];
    for i in 0..blocks {
        let h = hist.last().expect("not empty").clone();
        let c = t.splat(m, 1.0 + (i % 97) as f64 * 1e-3);
        let a = t.inst(m, &format!("multiply({h}, {c})"));
        let a = t.inst(m, &format!("add({a}, {vb})"));
        let mut a = t.inst(m, &format!("tanh({a})"));
        if i % 4 == 3 {
            a = t.inst(
                m,
                &format!("dot({a}, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}"),
            );
        }
        if i % 8 == 7 {
            let s = t.inst(
                row,
                &format!("reduce({a}, {zero}), dimensions={{1}}, to_apply=add_f32"),
            );
            let s = t.inst(m, &format!("broadcast({s}), dimensions={{0}}"));
            let mean = t.inst(m, &format!("multiply({s}, {inv_n})"));
            a = t.inst(m, &format!("subtract({a}, {mean})"));
        }
        let skip = &hist[hist.len() - hist.len().min(5)];
        let s = t.inst(m, &format!("multiply({skip}, {half})"));
        let h = t.inst(m, &format!("add({a}, {s})"));
        hist.push(h);
        if hist.len() > 8 {
            hist.remove(0);
        }
    }
    let last = hist.last().expect("not empty");
    t.named("ROOT out", m, &format!("copy({last})"));
    t.out.push_str("}\n");
    t.out
}

/// `chains` independent chains over rows of `f32[64,16]`, each reduced to a scalar; the result
/// concatenates them into `f32[chains]`.
pub fn wide(chains: usize) -> String {
    let r = "f32[16]{0}";
    let mut t = Text::new(&format!(
        "HloModule wide, entry_computation_layout={{(f32[64,16]{{1,0}}, {r})->f32[{chains}]{{0}}}}\n{REDUCERS}"
    ));
    t.named("x", "f32[64,16]{1,0}", "parameter(0)");
    t.named("v", r, "parameter(1)");
    let zero = t.inst("f32[]", "constant(0)");
    let mut outs = Vec::with_capacity(chains);
    for k in 0..chains {
        let row = k % 64;
        let s = t.inst(
            "f32[1,16]{1,0}",
            &format!("slice(x), slice={{[{row}:{}], [0:16]}}", row + 1),
        );
        let mut h = t.inst(r, &format!("reshape({s})"));
        for j in 0..4 {
            if j % 2 == 0 {
                let c = t.splat(r, 1.0 + 0.01 * k as f64);
                let a = t.inst(r, &format!("multiply({h}, {c})"));
                let a = t.inst(r, &format!("add({a}, v)"));
                h = t.inst(r, &format!("sine({a})"));
            } else {
                let sq = t.inst(r, &format!("multiply({h}, {h})"));
                let n = t.inst(r, &format!("negate({sq})"));
                let e = t.inst(r, &format!("exponential({n})"));
                h = t.inst(r, &format!("subtract({e}, {h})"));
            }
        }
        let s = t.inst(
            "f32[]",
            &format!("reduce({h}, {zero}), dimensions={{0}}, to_apply=add_f32"),
        );
        outs.push(t.inst("f32[1]{0}", &format!("reshape({s})")));
    }
    t.named(
        "ROOT out",
        &format!("f32[{chains}]{{0}}"),
        &format!("concatenate({}), dimensions={{0}}", outs.join(", ")),
    );
    t.out.push_str("}\n");
    t.out
}

/// Layernorm over the last dimension of `x: f32[s,d]` (no scale), as JAX writes it.
fn layernorm(t: &mut Text, x: &str, s: usize, d: usize, zero: &str) -> String {
    let m = format!("f32[{s},{d}]{{1,0}}");
    let row = format!("f32[{s}]{{0}}");
    let inv_d = t.splat(&m, 1.0 / d as f64);
    let sum = t.inst(
        &row,
        &format!("reduce({x}, {zero}), dimensions={{1}}, to_apply=add_f32"),
    );
    let mu = t.inst(&m, &format!("broadcast({sum}), dimensions={{0}}"));
    let mu = t.inst(&m, &format!("multiply({mu}, {inv_d})"));
    let c = t.inst(&m, &format!("subtract({x}, {mu})"));
    let sq = t.inst(&m, &format!("multiply({c}, {c})"));
    let var = t.inst(
        &row,
        &format!("reduce({sq}, {zero}), dimensions={{1}}, to_apply=add_f32"),
    );
    let var = t.inst(&m, &format!("broadcast({var}), dimensions={{0}}"));
    let var = t.inst(&m, &format!("multiply({var}, {inv_d})"));
    let eps = t.splat(&m, 1e-5);
    let var = t.inst(&m, &format!("add({var}, {eps})"));
    let rs = t.inst(&m, &format!("rsqrt({var})"));
    t.inst(&m, &format!("multiply({c}, {rs})"))
}

/// `layers` pre-layernorm transformer layers over `f32[128,256]` with 4 heads (see the module
/// docs); layer `i` uses the weights at `i % 8` of the stacked parameters.
pub fn transformer(layers: usize) -> String {
    const S: usize = 128;
    const D: usize = 256;
    const H: usize = 4;
    const DH: usize = D / H;
    let m = format!("f32[{S},{D}]{{1,0}}");
    let mut t = Text::new(&format!(
        "HloModule transformer, entry_computation_layout={{({m}, f32[8,4,{D},{D}]{{3,2,1,0}})->{m}}}\n{REDUCERS}"
    ));
    t.named("x", &m, "parameter(0)");
    t.named("W", &format!("f32[8,4,{D},{D}]{{3,2,1,0}}"), "parameter(1)");
    let zero = t.inst("f32[]", "constant(0)");
    let ninf = t.inst("f32[]", "constant(-inf)");
    let mut h = "x".to_string();
    for i in 0..layers {
        let k = i % 8;
        let w = |t: &mut Text, j: usize| {
            let s = t.inst(
                &format!("f32[1,1,{D},{D}]{{3,2,1,0}}"),
                &format!(
                    "slice(W), slice={{[{k}:{}], [{j}:{}], [0:{D}], [0:{D}]}}",
                    k + 1,
                    j + 1
                ),
            );
            t.inst(&format!("f32[{D},{D}]{{1,0}}"), &format!("reshape({s})"))
        };
        let dot = |t: &mut Text, a: &str, b: &str| {
            t.inst(
                &format!("f32[{S},{D}]{{1,0}}"),
                &format!("dot({a}, {b}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}"),
            )
        };
        let n = layernorm(&mut t, &h, S, D, &zero);
        let heads = |t: &mut Text, x: &str| {
            let r = t.inst(
                &format!("f32[{S},{H},{DH}]{{2,1,0}}"),
                &format!("reshape({x})"),
            );
            t.inst(
                &format!("f32[{H},{S},{DH}]{{2,1,0}}"),
                &format!("transpose({r}), dimensions={{1,0,2}}"),
            )
        };
        let wq = w(&mut t, 0);
        let q = dot(&mut t, &n, &wq);
        let q = heads(&mut t, &q);
        let wk = w(&mut t, 1);
        let kk = dot(&mut t, &n, &wk);
        let kk = heads(&mut t, &kk);
        let wv = w(&mut t, 2);
        let v = dot(&mut t, &n, &wv);
        let v = heads(&mut t, &v);
        let hss = format!("f32[{H},{S},{S}]{{2,1,0}}");
        let hs = format!("f32[{H},{S}]{{1,0}}");
        let sc = t.inst(
            &hss,
            &format!(
                "dot({q}, {kk}), lhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, \
                 rhs_batch_dims={{0}}, rhs_contracting_dims={{2}}"
            ),
        );
        let scale = t.splat(&hss, 1.0 / (DH as f64).sqrt());
        let sc = t.inst(&hss, &format!("multiply({sc}, {scale})"));
        let mx = t.inst(
            &hs,
            &format!("reduce({sc}, {ninf}), dimensions={{2}}, to_apply=max_f32"),
        );
        let mx = t.inst(&hss, &format!("broadcast({mx}), dimensions={{0,1}}"));
        let e = t.inst(&hss, &format!("subtract({sc}, {mx})"));
        let e = t.inst(&hss, &format!("exponential({e})"));
        let sum = t.inst(
            &hs,
            &format!("reduce({e}, {zero}), dimensions={{2}}, to_apply=add_f32"),
        );
        let sum = t.inst(&hss, &format!("broadcast({sum}), dimensions={{0,1}}"));
        let p = t.inst(&hss, &format!("divide({e}, {sum})"));
        let o = t.inst(
            &format!("f32[{H},{S},{DH}]{{2,1,0}}"),
            &format!(
                "dot({p}, {v}), lhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, \
                 rhs_batch_dims={{0}}, rhs_contracting_dims={{1}}"
            ),
        );
        let o = t.inst(
            &format!("f32[{S},{H},{DH}]{{2,1,0}}"),
            &format!("transpose({o}), dimensions={{1,0,2}}"),
        );
        let o = t.inst(&m, &format!("reshape({o})"));
        let wo = w(&mut t, 3);
        let o = dot(&mut t, &o, &wo);
        let r = t.inst(&m, &format!("add({h}, {o})"));
        // The MLP: GELU (tanh form) between two dots with the query and key weights.
        let n2 = layernorm(&mut t, &r, S, D, &zero);
        let y = dot(&mut t, &n2, &wq);
        let y3 = t.inst(&m, &format!("multiply({y}, {y})"));
        let y3 = t.inst(&m, &format!("multiply({y3}, {y})"));
        let c0 = t.splat(&m, 0.044715);
        let g = t.inst(&m, &format!("multiply({y3}, {c0})"));
        let g = t.inst(&m, &format!("add({y}, {g})"));
        let c1 = t.splat(&m, 0.797_884_6);
        let g = t.inst(&m, &format!("multiply({g}, {c1})"));
        let g = t.inst(&m, &format!("tanh({g})"));
        let one = t.splat(&m, 1.0);
        let g = t.inst(&m, &format!("add({g}, {one})"));
        let g = t.inst(&m, &format!("multiply({y}, {g})"));
        let hf = t.splat(&m, 0.5);
        let g = t.inst(&m, &format!("multiply({g}, {hf})"));
        let y = dot(&mut t, &g, &wk);
        h = t.inst(&m, &format!("add({r}, {y})"));
    }
    t.named("ROOT out", &m, &format!("copy({h})"));
    t.out.push_str("}\n");
    t.out
}

/// A random DAG of `steps` instructions over `f32[16,32]` from `seed` (see the module docs).
pub fn random_dag(steps: usize, seed: u64) -> String {
    let m = "f32[16,32]{1,0}";
    let mut t = Text::new(&format!(
        "HloModule random_dag, entry_computation_layout={{({m}, {m}, f32[32,32]{{1,0}})->{m}}}\n{REDUCERS}"
    ));
    t.named("x", m, "parameter(0)");
    t.named("y", m, "parameter(1)");
    t.named("w", "f32[32,32]{1,0}", "parameter(2)");
    let zero = t.inst("f32[]", "constant(0)");
    let scale = t.splat(m, 1.0 / 32.0);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut vals = vec!["x".to_string(), "y".to_string()];
    let mut prev = "x".to_string();
    while t.next < steps {
        let other = if rng.random_bool(0.5) {
            let lo = vals.len().saturating_sub(16);
            vals[rng.random_range(lo..vals.len())].clone()
        } else {
            vals[rng.random_range(0..vals.len())].clone()
        };
        let v = match rng.random_range(0..20) {
            0..=4 => {
                let op = ["tanh", "negate", "abs", "sine", "cosine"][rng.random_range(0..5)];
                t.inst(m, &format!("{op}({prev})"))
            }
            5..=15 => {
                let op =
                    ["add", "multiply", "subtract", "maximum", "minimum"][rng.random_range(0..5)];
                t.inst(m, &format!("{op}({prev}, {other})"))
            }
            16..=17 => {
                let d = t.inst(
                    m,
                    &format!(
                        "dot({prev}, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}"
                    ),
                );
                t.inst(m, &format!("multiply({d}, {scale})"))
            }
            _ => {
                let s = t.inst(
                    "f32[16]{0}",
                    &format!("reduce({prev}, {zero}), dimensions={{1}}, to_apply=add_f32"),
                );
                let b = t.inst(m, &format!("broadcast({s}), dimensions={{0}}"));
                let b = t.inst(m, &format!("multiply({b}, {scale})"));
                t.inst(m, &format!("subtract({other}, {b})"))
            }
        };
        // Keep values bounded whatever the draw: a tanh every few steps.
        let v = if rng.random_range(0..4) == 0 {
            t.inst(m, &format!("tanh({v})"))
        } else {
            v
        };
        vals.push(v.clone());
        prev = v;
    }
    t.named("ROOT out", m, &format!("copy({prev})"));
    t.out.push_str("}\n");
    t.out
}

/// A MobileNet-style stack of `blocks` depthwise-separable blocks over a `f32[1,32,32,3]` image
/// (see the module docs); every weight and bias is an elided constant.
pub fn conv_stack(blocks: usize) -> String {
    let mut t = Text::new(
        "HloModule conv_stack, entry_computation_layout={(f32[1,32,32,3]{3,2,1,0})->f32[1,10]{1,0}}\n\
         \nadd_f32 {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\
         \nENTRY main {",
    );
    t.named("x", "f32[1,32,32,3]{3,2,1,0}", "parameter(0)");
    let img = |hw: usize, c: usize| format!("f32[1,{hw},{hw},{c}]{{3,2,1,0}}");
    let zero = t.inst("f32[]", "constant(0)");
    let six = t.inst("f32[]", "constant(6)");
    let bias_relu6 = |t: &mut Text, x: &str, hw: usize, c: usize| {
        let b = t.inst(&format!("f32[{c}]{{0}}"), "constant({...})");
        let b = t.inst(&img(hw, c), &format!("broadcast({b}), dimensions={{3}}"));
        let y = t.inst(&img(hw, c), &format!("add({x}, {b})"));
        let lo = t.inst(&img(hw, c), &format!("broadcast({zero}), dimensions={{}}"));
        let hi = t.inst(&img(hw, c), &format!("broadcast({six}), dimensions={{}}"));
        t.inst(&img(hw, c), &format!("clamp({lo}, {y}, {hi})"))
    };
    let (mut hw, mut c) = (16, 8);
    let k = t.inst("f32[3,3,3,8]{3,2,1,0}", "constant({...})");
    let y = t.inst(
        &img(hw, c),
        &format!(
            "convolution(x, {k}), window={{size=3x3 stride=2x2 pad=0_1x0_1}}, \
             dim_labels=b01f_01io->b01f"
        ),
    );
    let mut h = bias_relu6(&mut t, &y, hw, c);
    for i in 0..blocks {
        let dk = t.inst(&format!("f32[3,3,1,{c}]{{3,2,1,0}}"), "constant({...})");
        let stride = if i % 3 == 2 && hw > 2 { 2 } else { 1 };
        let out_hw = hw / stride;
        let pad = if stride == 2 { "0_1x0_1" } else { "1_1x1_1" };
        let y = t.inst(
            &img(out_hw, c),
            &format!(
                "convolution({h}, {dk}), window={{size=3x3 stride={stride}x{stride} pad={pad}}}, \
                 dim_labels=b01f_01io->b01f, feature_group_count={c}"
            ),
        );
        hw = out_hw;
        let y = bias_relu6(&mut t, &y, hw, c);
        let oc = if stride == 2 { (c * 2).min(64) } else { c };
        let pk = t.inst(&format!("f32[1,1,{c},{oc}]{{3,2,1,0}}"), "constant({...})");
        let y = t.inst(
            &img(hw, oc),
            &format!("convolution({y}, {pk}), window={{size=1x1}}, dim_labels=b01f_01io->b01f"),
        );
        c = oc;
        h = bias_relu6(&mut t, &y, hw, c);
    }
    let s = t.inst(
        &format!("f32[1,{c}]{{1,0}}"),
        &format!("reduce({h}, {zero}), dimensions={{1,2}}, to_apply=add_f32"),
    );
    let inv = t.inst("f32[]", &format!("constant({})", 1.0 / (hw * hw) as f64));
    let inv = t.inst(
        &format!("f32[1,{c}]{{1,0}}"),
        &format!("broadcast({inv}), dimensions={{}}"),
    );
    let s = t.inst(
        &format!("f32[1,{c}]{{1,0}}"),
        &format!("multiply({s}, {inv})"),
    );
    let wc = t.inst(&format!("f32[{c},10]{{1,0}}"), "constant({...})");
    t.named(
        "ROOT out",
        "f32[1,10]{1,0}",
        &format!("dot({s}, {wc}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}"),
    );
    t.out.push_str("}\n");
    t.out
}

/// The number of chains [`dot_chains`] interleaves.
const DOT_CHAINS: usize = 8;

/// `layers` residual dot layers spread over eight interleaved chains (see the module
/// docs); the result concatenates the chains into `f32[64,16]`.
pub fn dot_chains(layers: usize) -> String {
    let (m, row) = ("f32[8,16]{1,0}", "f32[8]{0}");
    let mut t = Text::new(&format!(
        "HloModule dot_chains, entry_computation_layout={{(f32[64,16]{{1,0}}, f32[16,16]{{1,0}}, \
         f32[16]{{0}})->f32[64,16]{{1,0}}}}\n{REDUCERS}"
    ));
    t.named("x", "f32[64,16]{1,0}", "parameter(0)");
    t.named("w", "f32[16,16]{1,0}", "parameter(1)");
    t.named("b", "f32[16]{0}", "parameter(2)");
    let bias = t.inst(m, "broadcast(b), dimensions={1}");
    let zero = t.inst("f32[]", "constant(0)");
    let inv_n = t.splat(m, 1.0 / 16.0);
    let mut h: Vec<String> = (0..DOT_CHAINS)
        .map(|j| {
            t.inst(
                m,
                &format!("slice(x), slice={{[{}:{}], [0:16]}}", 8 * j, 8 * j + 8),
            )
        })
        .collect();
    for i in 0..layers {
        let j = i % DOT_CHAINS;
        let d = t.inst(
            m,
            &format!(
                "dot({}, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}",
                h[j]
            ),
        );
        // Distinct in every layer: 0.5 + i * 2^-24 is exact in f64 and prints uniquely.
        let c = t.splat(m, 0.5 + i as f64 / 16_777_216.0);
        let a = t.inst(m, &format!("multiply({d}, {c})"));
        let a = t.inst(m, &format!("add({a}, {bias})"));
        let a = t.inst(m, &format!("tanh({a})"));
        let mut y = t.inst(m, &format!("add({}, {a})", h[j]));
        if i / DOT_CHAINS % 4 == 3 {
            let s = t.inst(
                row,
                &format!("reduce({y}, {zero}), dimensions={{1}}, to_apply=add_f32"),
            );
            let s = t.inst(m, &format!("broadcast({s}), dimensions={{0}}"));
            let mean = t.inst(m, &format!("multiply({s}, {inv_n})"));
            y = t.inst(m, &format!("subtract({y}, {mean})"));
        }
        h[j] = y;
    }
    t.named(
        "ROOT out",
        "f32[64,16]{1,0}",
        &format!("concatenate({}), dimensions={{0}}", h.join(", ")),
    );
    t.out.push_str("}\n");
    t.out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_parses_verifies_and_hits_its_size() {
        for f in Family::ALL {
            for target in [300, 3000] {
                let text = f.generate(target, 1);
                let m = axle_ir::parse_module(&text)
                    .unwrap_or_else(|e| panic!("{}: {}", f.name(), e.render("gen")));
                axle_ir::verify::verify(&m).unwrap_or_else(|e| panic!("{}: {e}", f.name()));
                let n = m.num_live_insts();
                let per = f.insts_per_unit();
                assert!(
                    (n as f64 - target as f64).abs() <= 0.25 * target as f64 + 2.0 * per + 40.0,
                    "{}: {n} instructions for a target of {target}",
                    f.name()
                );
            }
        }
    }

    #[test]
    fn random_dag_depends_on_its_seed_only() {
        assert_eq!(random_dag(500, 3), random_dag(500, 3));
        assert_ne!(random_dag(500, 3), random_dag(500, 4));
    }
}
