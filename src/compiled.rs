//! The embedding API's entry point: [`compile`] a module on a backend once, then [`Compiled::run`]
//! it any number of times, from any number of threads, on borrowed host arrays ([`ArrayRef`]),
//! writing into caller-owned results ([`Array`]).
//!
//! Arguments and results are the array leaves of the entry parameters and of the root,
//! depth-first (a tuple parameter takes one argument per element). Every run checks them against
//! the compiled program (count, element type, dimensions) with [`check_host_arrays`], so a wrong
//! argument is an [`Error`] value, never a reinterpretation of bytes. Backends whose memory is
//! host memory run in place ([`crate::backend::HostExecutable`]: `cpu` reads the arguments
//! where they are and writes the results into `outs`); others go through their transfer
//! manager.

use std::sync::Arc;

use axle_ir::{ArrayShape, Literal, Module};

use crate::array::{Array, ArrayRef};
use crate::backend::{
    check_host_arrays, registry, BackendError, CompileOptions, Executable, ExecutableStats,
    Platform, ValueShape,
};
use crate::error::Error;

/// A module compiled on a backend, ready to run. `Send + Sync`: share it (`Arc`) between threads
/// and run it concurrently.
pub struct Compiled {
    platform: Arc<dyn Platform>,
    exe: Box<dyn Executable>,
    /// Each entry parameter's shape.
    params: Vec<ValueShape>,
    param_leaves: Vec<ArrayShape>,
    output_leaves: Vec<ArrayShape>,
}

/// Compiles `m` (verified first) on the backend named `backend` (`cpu`, `interpreter`, or one
/// registered with [`crate::backend::registry`]).
pub fn compile(backend: &str, m: Module, opts: &CompileOptions) -> Result<Compiled, Error> {
    let platform = registry().get(backend)?;
    let exe = platform.compiler().compile(m, opts)?;
    Ok(Compiled::new(platform, exe))
}

/// Parses HLO text and compiles it as [`compile`] does; a parse or verification error names the
/// line and column.
pub fn compile_text(backend: &str, hlo: &str, opts: &CompileOptions) -> Result<Compiled, Error> {
    let m = axle_ir::parse_module(hlo).map_err(|e| Error::Parse(e.render("<hlo>")))?;
    crate::verify_for_cli(&m, hlo, "<hlo>").map_err(Error::Parse)?;
    compile(backend, m, opts)
}

fn leaves(s: &ValueShape) -> Vec<ArrayShape> {
    s.leaves().into_iter().cloned().collect()
}

impl Compiled {
    /// Wraps an executable of `platform`.
    pub fn new(platform: Arc<dyn Platform>, exe: Box<dyn Executable>) -> Compiled {
        let m = exe.module();
        let params: Vec<ValueShape> = m
            .params(m.entry())
            .iter()
            .map(|&p| ValueShape::of_shape(m, m.shape(p)))
            .collect();
        let param_leaves = params.iter().flat_map(leaves).collect();
        let output_leaves = leaves(&ValueShape::of_shape(m, m.shape(m.root(m.entry()))));
        Compiled {
            platform,
            exe,
            params,
            param_leaves,
            output_leaves,
        }
    }

    /// The backend's name.
    pub fn backend(&self) -> &str {
        self.platform.name()
    }

    /// The arguments a run takes: the entry parameters' array leaves, depth-first.
    pub fn param_shapes(&self) -> &[ArrayShape] {
        &self.param_leaves
    }

    /// The results a run writes: the root's array leaves, depth-first.
    pub fn output_shapes(&self) -> &[ArrayShape] {
        &self.output_leaves
    }

    /// The backend's executable (its module, compiled text, statistics; `as_any` reaches the
    /// backend's own type).
    pub fn executable(&self) -> &dyn Executable {
        &*self.exe
    }

    /// The executable's statistics (compile time, cache outcome, ...).
    pub fn stats(&self) -> ExecutableStats {
        self.exe.stats()
    }

    /// Zeroed result arrays of the right shapes, to pass to [`Compiled::run`] (and reuse).
    pub fn alloc_outputs(&self) -> Result<Vec<Array>, Error> {
        Ok(self
            .output_leaves
            .iter()
            .map(Array::zeros_like)
            .collect::<Result<_, _>>()?)
    }

    /// Runs on `args` (borrowed, not copied by host backends), writing the results into `outs`
    /// (from [`Compiled::alloc_outputs`] or made to the shapes of [`Compiled::output_shapes`]).
    /// A wrong number, element type or dimensions of an argument or output is an error, and
    /// nothing runs.
    pub fn run(&self, args: &[ArrayRef<'_>], outs: &mut [Array]) -> Result<(), Error> {
        let backend = self.platform.name();
        check_host_arrays(
            backend,
            "argument",
            &self.param_leaves,
            args.iter().map(|a| (a.ty(), a.dims())),
        )?;
        check_host_arrays(
            backend,
            "output",
            &self.output_leaves,
            outs.iter().map(|a| (a.ty(), a.dims())),
        )?;
        if let Some(h) = self.exe.host() {
            return Ok(h.execute(args, outs)?);
        }
        self.run_transferred(args, outs)
    }

    /// Runs on `args` and returns fresh result arrays.
    pub fn call(&self, args: &[ArrayRef<'_>]) -> Result<Vec<Array>, Error> {
        let mut outs = self.alloc_outputs()?;
        self.run(args, &mut outs)?;
        Ok(outs)
    }

    /// [`Compiled::run`] through the transfer manager, for backends without a host run.
    fn run_transferred(&self, args: &[ArrayRef<'_>], outs: &mut [Array]) -> Result<(), Error> {
        let tm = self.platform.transfer_manager();
        let mut next = args.iter();
        let bufs = self
            .params
            .iter()
            .map(|s| Ok(tm.to_device(&literal_of(self.backend(), s, &mut next)?, 0)?))
            .collect::<Result<Vec<_>, Error>>()?;
        let refs: Vec<&_> = bufs.iter().collect();
        let out = tm.from_device(&self.exe.run(&refs)?)?;
        for (o, l) in outs.iter_mut().zip(crate::run::flatten(out)) {
            *o = Array::from_literal(&l);
        }
        Ok(())
    }
}

/// A parameter's literal built from the next (already counted) arguments.
fn literal_of<'a>(
    backend: &str,
    s: &ValueShape,
    args: &mut impl Iterator<Item = &'a ArrayRef<'a>>,
) -> Result<Literal, Error> {
    Ok(match s {
        ValueShape::Array(_) => Literal::Array(
            args.next()
                .ok_or_else(|| BackendError::new(backend, "too few arguments"))?
                .to_literal(),
        ),
        ValueShape::Tuple(es) => Literal::Tuple(
            es.iter()
                .map(|e| literal_of(backend, e, args))
                .collect::<Result<_, _>>()?,
        ),
        ValueShape::Token => Literal::Tuple(Vec::new()),
    })
}
