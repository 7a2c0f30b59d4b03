//! `axle._axle`: the native part of the `axle` Python package (the Python side in `pysrc/axle`
//! turns numpy arrays into the byte buffers these functions take, and back).
//!
//! - `Executable`: a module compiled once ([`axle::compile_text`]); `run` reads each argument
//!   in place from a contiguous byte buffer (a `uint8` view of the numpy array) and writes each
//!   result into a writable one (a `uint8` view of a numpy array the caller allocated), with the
//!   GIL released while it runs, so numpy arrays go in and come out without a copy.
//! - `Session`: [`axle::passes::Session`], the pass-ordering environment: apply a pass or
//!   pipeline by name, observe instruction count and cost estimate, measure the run time.
//!
//! - `GymModule` (`gym.rs`): the module of an `axle.gym` environment, with its observations
//!   (opcode counts, cost features, the graph as CSR arrays), evaluation and measurement.
//!
//! Every Axle error is raised as `axle.AxleError` with Axle's message.

use std::sync::Arc;
use std::time::Instant;

use axle::ir::{ElementType, PassManagerOptions, VerifyMode};
use axle::{ArrayRef, CacheMode, CompileOptions, Compiled};
use pyo3::buffer::PyBuffer;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

mod gym;

create_exception!(_axle, AxleError, PyException, "An error reported by Axle.");

fn err(e: impl std::fmt::Display) -> PyErr {
    AxleError::new_err(e.to_string())
}

fn element_type(name: &str) -> PyResult<ElementType> {
    ElementType::from_name(name).ok_or_else(|| err(format!("unknown element type '{name}'")))
}

/// A compiled module.
#[pyclass(frozen, module = "axle._axle")]
struct Executable {
    inner: Arc<Compiled>,
}

fn specs(shapes: &[axle::ir::ArrayShape]) -> Vec<(String, Vec<i64>)> {
    shapes
        .iter()
        .map(|s| (s.ty.name().to_string(), s.dims.to_vec()))
        .collect()
}

/// Checks that a buffer is C-contiguous (and writable when `write`); returns its length.
fn check_buffer(b: &PyBuffer<u8>, write: bool, what: &str) -> PyResult<usize> {
    if !b.is_c_contiguous() {
        return Err(err(format!("{what} is not a contiguous buffer")));
    }
    if write && b.readonly() {
        return Err(err(format!("{what} is read-only")));
    }
    Ok(b.len_bytes())
}

/// An argument buffer's bytes.
fn arg_bytes<'a>(b: &'a PyBuffer<u8>, what: &str) -> PyResult<&'a [u8]> {
    let n = check_buffer(b, false, what)?;
    if n == 0 {
        return Ok(&[]);
    }
    // SAFETY: the buffer stays exported (so its memory stays put) while `b` lives, which
    // outlives the slice; it is `n` contiguous bytes. Python code could write to it from
    // another thread during the run, as with any buffer handed to native code.
    Ok(unsafe { std::slice::from_raw_parts(b.buf_ptr() as *const u8, n) })
}

/// A writable output buffer's bytes.
fn out_bytes<'a>(b: &'a mut PyBuffer<u8>, what: &str) -> PyResult<&'a mut [u8]> {
    let n = check_buffer(b, true, what)?;
    if n == 0 {
        return Ok(&mut []);
    }
    // SAFETY: as in `arg_bytes`; the buffer is writable and borrowed mutably for the slice.
    Ok(unsafe { std::slice::from_raw_parts_mut(b.buf_ptr() as *mut u8, n) })
}

#[pymethods]
impl Executable {
    /// The arguments: (element type name, dimensions) per array leaf of the entry parameters.
    fn param_specs(&self) -> Vec<(String, Vec<i64>)> {
        specs(self.inner.param_shapes())
    }

    /// The results: (element type name, dimensions) per array leaf of the root.
    fn output_specs(&self) -> Vec<(String, Vec<i64>)> {
        specs(self.inner.output_shapes())
    }

    /// Whether the root is a tuple (results come back as a tuple even with one leaf).
    fn output_is_tuple(&self) -> bool {
        let m = self.inner.executable().module();
        matches!(m.shape(m.root(m.entry())), axle::ir::Shape::Tuple(_))
    }

    /// The backend's name.
    fn backend(&self) -> String {
        self.inner.backend().to_string()
    }

    /// Compile statistics: seconds, instructions, temporary bytes, cache outcome.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.stats();
        let d = PyDict::new(py);
        d.set_item("compile_seconds", s.compile_time.as_secs_f64())?;
        d.set_item("instructions", s.instructions)?;
        d.set_item("temp_bytes", s.temp_bytes)?;
        d.set_item("cache", format!("{:?}", s.cache))?;
        Ok(d)
    }

    /// Runs on `args`, one (element type name, dimensions, uint8 buffer) per argument, writing
    /// into `outs`, one writable uint8 buffer per result.
    fn run(
        &self,
        py: Python<'_>,
        args: Vec<(String, Vec<i64>, PyBuffer<u8>)>,
        mut outs: Vec<PyBuffer<u8>>,
    ) -> PyResult<()> {
        let mut refs = Vec::with_capacity(args.len());
        for (k, (ty, dims, b)) in args.iter().enumerate() {
            let bytes = arg_bytes(b, &format!("argument {k}"))?;
            refs.push(ArrayRef::from_bytes(element_type(ty)?, dims, bytes).map_err(err)?);
        }
        let mut slices = Vec::with_capacity(outs.len());
        for (k, b) in outs.iter_mut().enumerate() {
            slices.push(out_bytes(b, &format!("output {k}"))?);
        }
        let exe = &self.inner;
        py.allow_threads(|| exe.run_into_slices(&refs, &mut slices))
            .map_err(err)
    }
}

/// Compiles HLO text on `backend` with `threads` threads per run (None: the backend's default)
/// and, when `cache_dir` is given, the compilation cache there.
#[pyfunction]
#[pyo3(signature = (hlo_text, backend = "cpu", threads = None, cache_dir = None, pipeline = None))]
fn compile(
    py: Python<'_>,
    hlo_text: &str,
    backend: &str,
    threads: Option<usize>,
    cache_dir: Option<std::path::PathBuf>,
    pipeline: Option<String>,
) -> PyResult<Executable> {
    // No pipeline asked for is the backend's default (`cpu`'s simplification and fusion).
    let platform = axle::backends::registry().get(backend).map_err(err)?;
    let opts = CompileOptions {
        threads,
        cache: cache_dir.map_or(CacheMode::Off, CacheMode::Dir),
        pipeline: axle::backend::pipeline_for(&*platform, pipeline.as_deref()),
        ..Default::default()
    };
    let exe = py
        .allow_threads(|| axle::compile_text(backend, hlo_text, &opts))
        .map_err(err)?;
    Ok(Executable {
        inner: Arc::new(exe),
    })
}

/// The pass-ordering environment: one module, passes applied one at a time by name.
#[pyclass(module = "axle._axle")]
struct Session {
    inner: axle::passes::Session,
}

fn observation<'py>(py: Python<'py>, m: &axle::ir::Module) -> PyResult<Bound<'py, PyDict>> {
    let o = axle::passes::observe(m);
    let d = PyDict::new(py);
    d.set_item("instructions", o.insts)?;
    d.set_item("flops", o.cost.flops)?;
    d.set_item("transcendentals", o.cost.transcendentals)?;
    d.set_item("bytes", o.cost.bytes)?;
    Ok(d)
}

#[pymethods]
impl Session {
    /// A session on the module in `hlo_text` (verified after every pass that changes it).
    #[new]
    fn new(hlo_text: &str) -> PyResult<Session> {
        let m = axle::ir::parse_module(hlo_text).map_err(|e| err(e.render("<hlo>")))?;
        axle::verify_for_cli(&m, hlo_text, "<hlo>").map_err(err)?;
        let opts = PassManagerOptions {
            verify: VerifyMode::Each,
            ..Default::default()
        };
        Ok(Session {
            inner: axle::passes::Session::new(m, opts),
        })
    }

    /// Applies a pass (or any pipeline text) and returns the observation after it, with
    /// `changed` and `wall_seconds` of the step.
    fn step<'py>(&mut self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyDict>> {
        let (rows, _) = self.inner.step(name).map_err(err)?;
        let d = observation(py, self.inner.module())?;
        d.set_item("changed", rows.iter().any(|r| r.changed))?;
        d.set_item(
            "wall_seconds",
            rows.iter().map(|r| r.wall_ns).sum::<u64>() as f64 * 1e-9,
        )?;
        Ok(d)
    }

    /// The observation of the module as it stands.
    fn observe<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        observation(py, self.inner.module())
    }

    /// The module as HLO text.
    fn hlo_text(&self) -> String {
        axle::ir::print_module(self.inner.module())
    }

    /// Compiles the module as it stands on `backend` and runs it `repeat` times on inputs
    /// generated from `seed` (the equivalence checker's, special values included); returns the
    /// median run time in seconds.
    #[pyo3(signature = (backend = "cpu", repeat = 5, seed = 0))]
    fn measure(&self, py: Python<'_>, backend: &str, repeat: usize, seed: u64) -> PyResult<f64> {
        let m = self.inner.module().clone();
        py.allow_threads(|| {
            let inputs = axle::analysis::adversarial_inputs(&m, seed);
            let exe = axle::compile(backend, m, &CompileOptions::default())?;
            let leaves: Vec<axle::ir::ArrayLiteral> = inputs
                .into_iter()
                .flat_map(axle::ir::Literal::into_leaves)
                .collect();
            let args: Vec<ArrayRef<'_>> = leaves.iter().map(ArrayRef::from).collect();
            let mut outs = exe.alloc_outputs()?;
            let mut times = Vec::with_capacity(repeat.max(1));
            for _ in 0..repeat.max(1) {
                let t = Instant::now();
                exe.run(&args, &mut outs)?;
                times.push(t.elapsed().as_secs_f64());
            }
            times.sort_by(f64::total_cmp);
            Ok::<f64, axle::Error>(times[times.len() / 2])
        })
        .map_err(err)
    }

    /// The statistics rows of every pass run so far, as (pass, changed, wall seconds,
    /// instructions before, after).
    fn history(&self) -> Vec<(String, bool, f64, usize, usize)> {
        self.inner
            .stats()
            .iter()
            .map(|r| {
                (
                    r.pass.clone(),
                    r.changed,
                    r.wall_ns as f64 * 1e-9,
                    r.insts_before,
                    r.insts_after,
                )
            })
            .collect()
    }
}

/// The registered passes' names.
#[pyfunction]
fn pass_names() -> Vec<String> {
    axle::passes::registry()
        .names()
        .into_iter()
        .map(str::to_string)
        .collect()
}

/// The standard pipelines: (name, pipeline text).
#[pyfunction]
fn standard_pipelines() -> Vec<(String, String)> {
    axle::passes::PIPELINES
        .iter()
        .map(|p| (p.name.to_string(), p.text.to_string()))
        .collect()
}

/// Calls `axle.jax_plugin._mlir_to_hlo` (jaxlib's StableHLO reader) for the PJRT plugin: a
/// serialized `HloModuleProto`.
fn mlir_to_hlo(code: &[u8]) -> Result<Vec<u8>, String> {
    Python::with_gil(|py| {
        py.import("axle.jax_plugin")?
            .call_method1("_mlir_to_hlo", (PyBytes::new(py, code),))?
            .extract::<Vec<u8>>()
    })
    .map_err(|e| e.to_string())
}

/// Tells the PJRT plugin the StableHLO versions this process's jaxlib reads (its plugin
/// attributes `stablehlo_current_version` and `stablehlo_minimum_version`).
#[pyfunction]
fn _pjrt_set_stablehlo_versions(current: Vec<i64>, minimum: Vec<i64>) {
    axle_pjrt::set_plugin_attributes(vec![
        (
            "stablehlo_current_version".to_string(),
            axle_pjrt::Value::Ints(current),
        ),
        (
            "stablehlo_minimum_version".to_string(),
            axle_pjrt::Value::Ints(minimum),
        ),
    ]);
}

#[pymodule]
fn _axle(m: &Bound<'_, PyModule>) -> PyResult<()> {
    axle_pjrt::set_mlir_converter(Box::new(mlir_to_hlo));
    m.add_function(wrap_pyfunction!(_pjrt_set_stablehlo_versions, m)?)?;
    m.add("AxleError", m.py().get_type::<AxleError>())?;
    m.add_class::<Executable>()?;
    m.add_class::<Session>()?;
    m.add_function(wrap_pyfunction!(compile, m)?)?;
    m.add_function(wrap_pyfunction!(pass_names, m)?)?;
    m.add_function(wrap_pyfunction!(standard_pipelines, m)?)?;
    m.add_class::<gym::GymModule>()?;
    m.add_class::<gym::Outputs>()?;
    m.add_function(wrap_pyfunction!(gym::opcode_names, m)?)?;
    m.add_function(wrap_pyfunction!(gym::element_type_names, m)?)?;
    m.add_function(wrap_pyfunction!(gym::cost_feature_names, m)?)?;
    m.add_function(wrap_pyfunction!(gym::pass_specs, m)?)?;
    m.add_function(wrap_pyfunction!(gym::generated_hlo, m)?)?;
    m.add_function(wrap_pyfunction!(gym::kernel_costs, m)?)?;
    Ok(())
}
