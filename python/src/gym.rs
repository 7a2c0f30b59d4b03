//! The native side of `axle.gym`: [`GymModule`], one module an environment optimizes, and the
//! observations, evaluations and measurements an environment step needs, computed here so a
//! step on a module of ten thousand instructions stays within milliseconds; [`kernel_costs`],
//! every kernel's measured time beside the cost model's prediction (`axle.gym.calibrate`).
//!
//! Invariants:
//! - A module is modified only by [`GymModule::apply`], which runs a pipeline through the pass
//!   manager (verifying after every pass that changes the module, compacting at the end) and
//!   restores the module as it was when a pass fails, so a failed action leaves no half-done
//!   state behind.
//! - Every observation is a function of the module alone: nodes are the live instructions in id
//!   order (after compaction, creation order), edges are sorted by source and then by
//!   destination, and nothing iterates a hash map, so the same module gives the same bytes at
//!   any thread count.
//! - Arrays cross to Python as `bytes` in the machine's byte order with a little-endian NumPy
//!   dtype string beside them (every host Axle compiles for is little-endian); `axle.gym` wraps
//!   them with `numpy.frombuffer`, no copy on that side.
//! - Passes run in the module's own thread pool when it was made with a thread count, else in
//!   rayon's global pool; the count never changes a result (DESIGN.md rule 4).

use std::collections::hash_map::DefaultHasher;
use std::hash::BuildHasherDefault;
use std::sync::Arc;
use std::time::Instant;

use axle::analysis::{inst_cost, module_cost, Cost};
use axle::ir::entity::{dense_map, EntitySet, SecondaryMap};
use axle::ir::{
    compare_literals, ArrayLiteral, CompId, CompactPolicy, ElementType, InstId, Literal, Module,
    Opcode, PassManagerOptions, Shape, Tolerance, VerifyMode,
};
use axle::{ArrayRef, CacheMode, CompileOptions};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::err;

/// The cpu fusion target's price of one byte of memory traffic, in arithmetic operations
/// (`CpuFusionTarget`'s `byte_cost`), used by [`scalar_cost`].
pub const BYTE_COST: f64 = 6.0;
/// The cpu fusion target's price of one transcendental operation, in arithmetic operations
/// (`CpuFusionTarget`'s `transcendental_cost`).
pub const TRANSCENDENTAL_COST: f64 = 12.0;

/// The names of the cost features, in the order [`GymModule::cost_features`] returns them.
pub const COST_FEATURES: &[&str] = &[
    "instructions",
    "computations",
    "fusions",
    "flops",
    "transcendentals",
    "bytes",
    "cost",
];

/// One number for the cost model's estimate, in arithmetic-operation equivalents: flops, plus
/// transcendentals and bytes at the cpu fusion target's prices. Lower is better.
pub fn scalar_cost(c: &Cost) -> f64 {
    c.flops + (TRANSCENDENTAL_COST - 1.0) * c.transcendentals + BYTE_COST * c.bytes
}

/// See `GymModule.kernels`.
fn kernels(m: &Module) -> usize {
    let entry = m.entry();
    if entry.is_none() {
        return 0;
    }
    let by_comp = m.insts_by_comp();
    let mut host: EntitySet<CompId> = EntitySet::with_capacity(m.comp_capacity());
    let mut stack = vec![entry];
    host.insert(entry);
    let mut n = 0;
    while let Some(c) = stack.pop() {
        for &i in &by_comp[c] {
            use Opcode::*;
            match m.opcode(i) {
                Call | While | Conditional => {
                    for cc in m.called_comps_iter(i) {
                        if !cc.is_none() && cc.index() < m.comp_capacity() && host.insert(cc) {
                            stack.push(cc);
                        }
                    }
                }
                Parameter | Constant | Tuple | GetTupleElement | Bitcast | AfterAll => {}
                _ => n += 1,
            }
        }
    }
    n
}

/// A module an environment optimizes, with the thread pool its passes run in.
#[pyclass(module = "axle._axle")]
pub struct GymModule {
    module: Module,
    pool: Option<Arc<rayon::ThreadPool>>,
}

fn pool(threads: Option<usize>) -> PyResult<Option<Arc<rayon::ThreadPool>>> {
    match threads {
        None => Ok(None),
        Some(0) => Err(err("threads must be at least 1")),
        Some(n) => rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .map(|p| Some(Arc::new(p)))
            .map_err(err),
    }
}

impl GymModule {
    fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Some(p) => p.install(f),
            None => f(),
        }
    }
}

/// A `bytes` object holding `v`'s elements in machine order.
fn le_bytes<'py, T: Copy>(py: Python<'py>, v: &[T]) -> Bound<'py, PyBytes> {
    // SAFETY: `T` is a plain number type (i32, i64, f64 below), whose bytes are all initialized.
    let b =
        unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) };
    PyBytes::new(py, b)
}

fn element_type_index(t: ElementType) -> i32 {
    ElementType::ALL.iter().position(|&x| x == t).unwrap_or(0) as i32
}

/// Tolerance for comparing a rewritten module's `ty` results with the original's: exact for
/// integers and `pred`, else the corpus's loosest tolerance for the type (passes may reorder
/// float sums, as `tree-reduce` and `reduction-split` do).
fn tolerance(ty: ElementType) -> Tolerance {
    if !(ty.is_float() || ty.is_complex()) {
        return Tolerance::Exact;
    }
    match ty.bits() {
        64 | 128 => Tolerance::Close {
            rtol: 1e-12,
            atol: 1e-13,
        },
        32 => Tolerance::Close {
            rtol: 1e-4,
            atol: 1e-5,
        },
        _ => Tolerance::Close {
            rtol: 2e-2,
            atol: 2e-2,
        },
    }
}

/// Reference outputs of a module: the evaluator's results on inputs drawn from a seed.
#[pyclass(frozen, module = "axle._axle")]
pub struct Outputs {
    leaves: Vec<ArrayLiteral>,
    seed: u64,
}

#[pymethods]
impl Outputs {
    /// The seed the inputs were drawn from.
    #[getter]
    fn seed(&self) -> u64 {
        self.seed
    }

    /// The number of array leaves.
    fn __len__(&self) -> usize {
        self.leaves.len()
    }
}

fn inputs(m: &Module, seed: u64) -> Vec<Literal> {
    // Finite values no larger than 64 apart from the specials (±0, ±inf, NaN, subnormals):
    // rewrites that reorder a float sum stay within tolerance, as they do on real data.
    axle::analysis::equivalence::adversarial_inputs_with_huge(m, seed, 64.0)
}

fn evaluate(m: &Module, seed: u64) -> Result<Vec<ArrayLiteral>, String> {
    let args = inputs(m, seed);
    let out = axle::analysis::evaluate_with(m, &args, &axle::analysis::equivalence::ieee())
        .map_err(|e| e.to_string())?;
    Ok(out.into_leaves())
}

#[pymethods]
impl GymModule {
    /// Parses and verifies `hlo_text`; passes run with `threads` threads (None: rayon's
    /// global pool).
    #[new]
    #[pyo3(signature = (hlo_text, threads = None))]
    fn new(py: Python<'_>, hlo_text: &str, threads: Option<usize>) -> PyResult<GymModule> {
        let pool = pool(threads)?;
        let module = py.allow_threads(|| {
            let m = axle::ir::parse_module(hlo_text).map_err(|e| e.render("<hlo>"))?;
            axle::verify_for_cli(&m, hlo_text, "<hlo>")?;
            Ok::<Module, String>(m)
        });
        Ok(GymModule {
            module: module.map_err(err)?,
            pool,
        })
    }

    /// An independent copy (same thread pool).
    fn copy(&self) -> GymModule {
        GymModule {
            module: self.module.clone(),
            pool: self.pool.clone(),
        }
    }

    /// Runs `pipeline` (a pass with options, or any pipeline text); returns whether it changed
    /// the module and its wall time in seconds. On error the module is left unchanged and
    /// `AxleError` is raised.
    fn apply(&mut self, py: Python<'_>, pipeline: &str) -> PyResult<(bool, f64)> {
        let before = self.module.clone();
        let opts = PassManagerOptions {
            verify: VerifyMode::Each,
            compact: CompactPolicy::AtEnd,
            label: Some("gym".to_string()),
            ..Default::default()
        };
        let t = Instant::now();
        let pool = self.pool.clone();
        let m = &mut self.module;
        let run = || axle::passes::optimize(m, pipeline, opts);
        let r = py.allow_threads(|| match pool {
            Some(p) => p.install(run),
            None => run(),
        });
        let wall = t.elapsed().as_secs_f64();
        match r {
            Ok(rows) => Ok((rows.iter().any(|r| r.changed), wall)),
            Err(e) => {
                self.module = before;
                Err(err(e))
            }
        }
    }

    /// The number of live instructions (every computation).
    fn instructions(&self) -> usize {
        self.module.num_live_insts()
    }

    /// The cost model's scalar estimate: [`scalar_cost`] by default, or with `weights` =
    /// (per flop, per transcendental, per byte, per kernel), such as a calibration fits in
    /// seconds, `flops * w0 + transcendentals * w1 + bytes * w2 + kernels() * w3`.
    #[pyo3(signature = (weights = None))]
    fn cost(&self, py: Python<'_>, weights: Option<(f64, f64, f64, f64)>) -> f64 {
        py.allow_threads(|| {
            let c = self.install(|| module_cost(&self.module));
            match weights {
                None => scalar_cost(&c),
                Some((f, t, b, k)) => {
                    c.flops * f
                        + c.transcendentals * t
                        + c.bytes * b
                        + kernels(&self.module) as f64 * k
                }
            }
        })
    }

    /// The instructions that run as kernels of their own if nothing more is fused: those of the
    /// entry computation and of the computations it reaches through `call`, `while` and
    /// `conditional`, except parameters, constants, tuples, `get-tuple-element`s, bitcasts,
    /// tokens and the control flow itself.
    #[pyo3(name = "kernels")]
    fn py_kernels(&self) -> usize {
        kernels(&self.module)
    }

    /// The cost features, in the order of `cost_feature_names()`, as float64 bytes.
    fn cost_features<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let m = &self.module;
        let c = py.allow_threads(|| self.install(|| module_cost(m)));
        let fusions = m
            .live_ids()
            .iter()
            .filter(|&&i| m.opcode(i) == Opcode::Fusion)
            .count();
        let v = [
            m.num_live_insts() as f64,
            m.computations().len() as f64,
            fusions as f64,
            c.flops,
            c.transcendentals,
            c.bytes,
            scalar_cost(&c),
        ];
        le_bytes(py, &v)
    }

    /// Live instructions per opcode, one int64 per entry of `opcode_names()`, as bytes.
    fn opcode_counts<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let mut counts = vec![0i64; Opcode::ALL.len()];
        for i in self.module.live_ids() {
            counts[self.module.opcode(i) as usize] += 1;
        }
        le_bytes(py, &counts)
    }

    /// The module as a graph for a GNN, a dict of arrays as (dtype, bytes): nodes are the live
    /// instructions in id order with `opcode` (index into `opcode_names()`), `element_type`
    /// (index into `element_type_names()`, -1 for tuples and tokens), `rank`, `elements`,
    /// `dims` (every node's dimensions one after another, `rank` of them per node),
    /// `result_bytes`, `flops`, `transcendentals`, `bytes` (the instruction's own cost) and
    /// `computation` (a dense index, the entry's is 0); edges in CSR form (`indptr` over source
    /// nodes, `indices` the destinations, `edge_type` beside them): 0 for operand to user, 1 for
    /// a called computation's root to the calling instruction.
    fn graph<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let m = &self.module;
        let ids = m.live_ids();
        let n = ids.len();
        let mut node: SecondaryMap<InstId, u32> = dense_map(m.inst_capacity(), u32::MAX);
        for (k, &i) in ids.iter().enumerate() {
            node[i] = k as u32;
        }
        // Computations numbered densely with the entry first.
        let mut comp: SecondaryMap<CompId, i32> = dense_map(m.comp_capacity(), -1);
        let mut next = 0;
        let entry = m.entry();
        if !entry.is_none() {
            comp[entry] = 0;
            next = 1;
        }
        for c in m.computations() {
            if comp[c] < 0 {
                comp[c] = next;
                next += 1;
            }
        }
        let mut opcode = Vec::with_capacity(n);
        let mut ety = Vec::with_capacity(n);
        let mut rank = Vec::with_capacity(n);
        let mut elements = Vec::with_capacity(n);
        let mut dims: Vec<i64> = Vec::with_capacity(2 * n);
        let mut rbytes = Vec::with_capacity(n);
        let mut flops = Vec::with_capacity(n);
        let mut trans = Vec::with_capacity(n);
        let mut cbytes = Vec::with_capacity(n);
        let mut computation = Vec::with_capacity(n);
        let mut degree = vec![0i64; n + 1];
        let mut edges: Vec<(u32, u32, i8)> = Vec::new();
        for (k, &i) in ids.iter().enumerate() {
            opcode.push(m.opcode(i) as i32);
            match m.shape(i) {
                Shape::Array(a) => {
                    ety.push(element_type_index(a.ty));
                    rank.push(a.dims.len() as i32);
                    elements.push(a.num_elements().max(0));
                    dims.extend_from_slice(&a.dims);
                }
                _ => {
                    ety.push(-1);
                    rank.push(0);
                    elements.push(0);
                }
            }
            rbytes.push(axle::analysis::result_bytes(m, i));
            let c = inst_cost(m, i);
            flops.push(c.flops);
            trans.push(c.transcendentals);
            cbytes.push(c.bytes);
            let p = m.parent(i);
            computation.push(if p.is_none() { -1 } else { comp[p] });
            for &o in m.operands(i) {
                if !o.is_none() && node[o] != u32::MAX {
                    edges.push((node[o], k as u32, 0));
                }
            }
            for c in m.called_comps_iter(i) {
                if !c.is_none() && m.is_live_comp(c) {
                    let r = m.root(c);
                    if !r.is_none() && node[r] != u32::MAX {
                        edges.push((node[r], k as u32, 1));
                    }
                }
            }
        }
        // Edges were made in destination order; a stable sort by source keeps destinations
        // ascending within each source.
        edges.sort_by_key(|e| e.0);
        let mut indices = Vec::with_capacity(edges.len());
        let mut etype = Vec::with_capacity(edges.len());
        for &(s, d, t) in &edges {
            degree[s as usize + 1] += 1;
            indices.push(d as i32);
            etype.push(t);
        }
        for k in 1..=n {
            degree[k] += degree[k - 1];
        }
        let d = PyDict::new(py);
        d.set_item("opcode", ("<i4", le_bytes(py, &opcode)))?;
        d.set_item("element_type", ("<i4", le_bytes(py, &ety)))?;
        d.set_item("rank", ("<i4", le_bytes(py, &rank)))?;
        d.set_item("elements", ("<i8", le_bytes(py, &elements)))?;
        d.set_item("dims", ("<i8", le_bytes(py, &dims)))?;
        d.set_item("result_bytes", ("<f8", le_bytes(py, &rbytes)))?;
        d.set_item("flops", ("<f8", le_bytes(py, &flops)))?;
        d.set_item("transcendentals", ("<f8", le_bytes(py, &trans)))?;
        d.set_item("bytes", ("<f8", le_bytes(py, &cbytes)))?;
        d.set_item("computation", ("<i4", le_bytes(py, &computation)))?;
        d.set_item("indptr", ("<i8", le_bytes(py, &degree)))?;
        d.set_item("indices", ("<i4", le_bytes(py, &indices)))?;
        d.set_item("edge_type", ("<i1", le_bytes(py, &etype)))?;
        Ok(d)
    }

    /// The module as HLO text.
    fn hlo_text(&self, py: Python<'_>) -> String {
        py.allow_threads(|| axle::ir::print_module(&self.module))
    }

    /// A 64-bit hash of the module's contents (equal modules hash equal; the same module gives
    /// the same hash in every process of the same build).
    fn hash(&self, py: Python<'_>) -> u64 {
        let b = BuildHasherDefault::<DefaultHasher>::default();
        py.allow_threads(|| self.install(|| axle::ir::pass_manager::module_hash(&self.module, &b)))
    }

    /// The reference evaluator's results on inputs drawn from `seed` (finite values, signed
    /// zeros, infinities, NaN and subnormals).
    #[pyo3(signature = (seed = 0))]
    fn evaluate(&self, py: Python<'_>, seed: u64) -> PyResult<Outputs> {
        let leaves = py
            .allow_threads(|| evaluate(&self.module, seed))
            .map_err(err)?;
        Ok(Outputs { leaves, seed })
    }

    /// Evaluates this module on the inputs `expected` was computed from and compares: exact for
    /// integers and `pred`, per-type tolerances for floats, NaN matching NaN. Returns None when
    /// they agree, else a message saying what differs.
    fn compare(&self, py: Python<'_>, expected: &Outputs) -> PyResult<Option<String>> {
        let actual = py.allow_threads(|| evaluate(&self.module, expected.seed));
        let actual = match actual {
            Ok(a) => a,
            Err(e) => return Ok(Some(format!("the module does not evaluate: {e}"))),
        };
        if actual.len() != expected.leaves.len() {
            return Ok(Some(format!(
                "{} results expected, {} computed",
                expected.leaves.len(),
                actual.len()
            )));
        }
        for (k, (e, a)) in expected.leaves.iter().zip(actual).enumerate() {
            let tol = tolerance(e.shape.ty);
            if let Err(m) = compare_literals(&Literal::Array(e.clone()), &Literal::Array(a), tol) {
                return Ok(Some(format!("result {k}: {m}")));
            }
        }
        Ok(None)
    }

    /// Compiles the module as it stands (no further passes) on `backend` with `threads` threads
    /// per run, runs it `warmup` times, then `repeat` times timed, on inputs drawn from `seed`;
    /// returns (compile seconds, the timed runs' seconds in order). With `cache_dir`, the
    /// compilation cache there: kernels compiled before for another module (another pass
    /// order of the same program) are loaded, not compiled again.
    #[pyo3(signature = (backend = "cpu", threads = 1, warmup = 2, repeat = 7, seed = 0, cache_dir = None))]
    #[allow(clippy::too_many_arguments)]
    fn measure(
        &self,
        py: Python<'_>,
        backend: &str,
        threads: usize,
        warmup: usize,
        repeat: usize,
        seed: u64,
        cache_dir: Option<std::path::PathBuf>,
    ) -> PyResult<(f64, Vec<f64>)> {
        if threads == 0 || repeat == 0 {
            return Err(err("threads and repeat must be at least 1"));
        }
        let m = self.module.clone();
        py.allow_threads(|| {
            let args = inputs(&m, seed);
            let t = Instant::now();
            let cache = cache_dir.map_or(CacheMode::Off, CacheMode::Dir);
            let opts = CompileOptions::default().threads(threads).cache(cache);
            let exe = axle::compile(backend, m, &opts)?;
            let compile = t.elapsed().as_secs_f64();
            let leaves: Vec<ArrayLiteral> =
                args.into_iter().flat_map(Literal::into_leaves).collect();
            let refs: Vec<ArrayRef<'_>> = leaves.iter().map(ArrayRef::from).collect();
            let mut outs = exe.alloc_outputs()?;
            for _ in 0..warmup {
                exe.run(&refs, &mut outs)?;
            }
            let mut times = Vec::with_capacity(repeat);
            for _ in 0..repeat {
                let t = Instant::now();
                exe.run(&refs, &mut outs)?;
                times.push(t.elapsed().as_secs_f64());
            }
            Ok::<_, axle::Error>((compile, times))
        })
        .map_err(err)
    }
}

/// Every opcode's name, in the order of `GymModule.opcode_counts` and the graph's `opcode`.
#[pyfunction]
pub fn opcode_names() -> Vec<&'static str> {
    Opcode::ALL.iter().map(|o| o.name()).collect()
}

/// Every element type's name, in the order of the graph's `element_type`.
#[pyfunction]
pub fn element_type_names() -> Vec<&'static str> {
    ElementType::ALL.iter().map(|t| t.name()).collect()
}

/// The names of `GymModule.cost_features`.
#[pyfunction]
pub fn cost_feature_names() -> Vec<&'static str> {
    COST_FEATURES.to_vec()
}

/// The registered passes with their options: (name, doc, [(option, kind, default, choices,
/// min, max)]), where kind is `int`, `bool`, `choice` or `str` (the fusion passes' `target`
/// is a `choice` of the registry's fusion targets).
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn pass_specs() -> Vec<(
    String,
    String,
    Vec<(String, String, String, Vec<String>, i64, i64)>,
)> {
    use axle::ir::OptKind;
    axle::passes::registry()
        .passes()
        .into_iter()
        .map(|p| {
            let opts = p
                .options
                .iter()
                .map(|o| {
                    let (kind, choices, lo, hi) = match o.kind {
                        OptKind::Int { min, max } => ("int", vec![], min, max),
                        OptKind::Bool => ("bool", vec![], 0, 1),
                        OptKind::Choice(c) => {
                            ("choice", c.iter().map(|s| s.to_string()).collect(), 0, 0)
                        }
                        // The fusion passes' `target` names one of the known fusion targets.
                        OptKind::Str if o.name == "target" => (
                            "choice",
                            axle::passes::FUSION_TARGETS
                                .iter()
                                .map(|s| s.to_string())
                                .collect(),
                            0,
                            0,
                        ),
                        OptKind::Str => ("str", vec![], 0, 0),
                    };
                    (
                        o.name.to_string(),
                        kind.to_string(),
                        o.default.to_string(),
                        choices,
                        lo,
                        hi,
                    )
                })
                .collect();
            (p.name.to_string(), p.doc.to_string(), opts)
        })
        .collect()
}

/// The HLO text of the generated program of `seed`: the fuzz campaigns' program generator
/// (`axle_ir::gen::Program`) decoding `size` bytes drawn from the seed by SplitMix64.
#[pyfunction]
#[pyo3(signature = (seed, size = 256))]
pub fn generated_hlo(seed: u64, size: usize) -> PyResult<String> {
    if size == 0 || size > 1 << 16 {
        return Err(err("size must be in 1..=65536"));
    }
    let mut r = axle::analysis::equivalence::SplitMix::new(seed);
    let bytes: Vec<u8> = (0..size).map(|_| r.next_u64() as u8).collect();
    let m = axle_ir::gen::Program::from_bytes(&bytes).build();
    Ok(axle::ir::print_module(&m))
}

/// The predicted cost of the kernel computing `i`: its own cost, plus for a fusion the
/// arithmetic of its fused computation (whose values never reach memory).
fn kernel_cost(m: &Module, by_comp: &axle::ir::InstsByComp, i: axle::ir::InstId) -> Cost {
    let mut c = inst_cost(m, i);
    if m.opcode(i) == Opcode::Fusion {
        for callee in m.called_comps_iter(i) {
            if callee.is_none() || callee.index() >= m.comp_capacity() {
                continue;
            }
            for &j in &by_comp[callee] {
                let f = inst_cost(m, j);
                c.flops += f.flops;
                c.transcendentals += f.transcendentals;
            }
        }
    }
    c
}

/// One profiled kernel: (name `kN.inst (opcode)`, what it computes, calls per run, seconds
/// per run, and the cost model's flops, transcendentals and bytes for all its calls in a run).
type KernelRow = (String, String, f64, f64, f64, f64, f64);

/// Runs `pipeline` on the module in `hlo_text`, compiles the result for the CPU with
/// `threads` threads per run (no further passes), times every kernel over `repeat` runs after
/// `warmup` (inputs from `seed`), and pairs each kernel with the cost model's prediction for
/// the instruction it computes (NaN when the kernel's name names no instruction of the
/// optimized module).
#[pyfunction]
#[pyo3(signature = (hlo_text, pipeline = "cpu", threads = 1, warmup = 2, repeat = 5, seed = 0))]
pub fn kernel_costs(
    py: Python<'_>,
    hlo_text: &str,
    pipeline: &str,
    threads: usize,
    warmup: usize,
    repeat: usize,
    seed: u64,
) -> PyResult<Vec<KernelRow>> {
    if repeat == 0 || threads == 0 {
        return Err(err("threads and repeat must be at least 1"));
    }
    py.allow_threads(|| {
        let mut m = axle::ir::parse_module(hlo_text).map_err(|e| e.render("<hlo>"))?;
        axle::verify_for_cli(&m, hlo_text, "<hlo>")?;
        let text = axle::passes::standard_pipeline(pipeline).unwrap_or(pipeline);
        axle::passes::optimize(&mut m, text, PassManagerOptions::default())
            .map_err(|e| e.to_string())?;
        axle::ir::check_runnable(&m).map_err(|e| e.to_string())?;
        let cpu = axle::codegen_cpu::CpuOptions {
            threads,
            ..Default::default()
        };
        let exe = axle::codegen_cpu::compile(&m, &cpu).map_err(|e| e.to_string())?;
        let leaves: Vec<ArrayLiteral> = inputs(&m, seed)
            .into_iter()
            .flat_map(Literal::into_leaves)
            .collect();
        let data: Vec<&[u8]> = leaves.iter().map(|a| &a.data[..]).collect();
        let mut outs = exe.alloc_outputs();
        for _ in 0..warmup {
            exe.execute(&data, &mut outs).map_err(|e| e.to_string())?;
        }
        exe.set_profiling(true);
        for _ in 0..repeat {
            exe.execute(&data, &mut outs).map_err(|e| e.to_string())?;
        }
        // Kernels are named `kN.LABEL (opcode)`, LABEL the instruction's name (or
        // `opcode_index` when it has none) with every character but ASCII letters and digits
        // made `_`, cut at 40 characters; labels two instructions share match neither.
        let label = |i: axle::ir::InstId| -> String {
            let n = match m.name(i) {
                "" => format!("{}_{}", m.opcode(i).name(), i.index()),
                n => n.to_string(),
            };
            n.chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .take(40)
                .collect()
        };
        let mut by_label: std::collections::HashMap<String, Option<axle::ir::InstId>> =
            std::collections::HashMap::new();
        for i in m.live_ids() {
            by_label
                .entry(label(i))
                .and_modify(|v| *v = None)
                .or_insert(Some(i));
        }
        let by_comp = m.insts_by_comp();
        let runs = repeat as f64;
        Ok::<_, String>(
            exe.profile()
                .into_iter()
                .map(|k| {
                    let inst = k
                        .name
                        .split_once('.')
                        .map(|(_, rest)| rest.rsplit_once(" (").map_or(rest, |(n, _)| n))
                        .and_then(|n| by_label.get(n).copied().flatten());
                    let c = inst.map_or(
                        Cost {
                            flops: f64::NAN,
                            transcendentals: f64::NAN,
                            bytes: f64::NAN,
                        },
                        |i| kernel_cost(&m, &by_comp, i),
                    );
                    let calls = k.calls as f64 / runs;
                    (
                        k.name,
                        k.detail,
                        calls,
                        k.total.as_secs_f64() / runs,
                        c.flops * calls,
                        c.transcendentals * calls,
                        c.bytes * calls,
                    )
                })
                .collect(),
        )
    })
    .map_err(err)
}
