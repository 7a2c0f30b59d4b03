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
    check_host_arrays, BackendError, CompileOptions, Executable, ExecutableStats, Platform,
    ValueShape,
};
use crate::backends::registry;
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
/// registered with [`crate::backends::registry`]).
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
        let backend = self.check_args(args)?;
        check_host_arrays(
            backend,
            "output",
            &self.output_leaves,
            outs.iter().map(|a| (a.ty(), a.dims())),
        )?;
        if let Some(h) = self.exe.host() {
            let mut slices: Vec<&mut [u8]> = outs.iter_mut().map(|o| o.bytes_mut()).collect();
            return Ok(h.execute(args, &mut slices)?);
        }
        let mut results = self.run_transferred(args)?;
        outs.swap_with_slice(&mut results);
        Ok(())
    }

    /// `(output leaf, parameter leaf)` pairs donated through the module's `input_output_alias`
    /// whose output the program leaves in the parameter's memory (host backends that write
    /// donated parameters; none elsewhere): see [`Compiled::run_donated`].
    pub fn donated_outputs(&self) -> &[(u32, u32)] {
        self.exe.host().map_or(&[], |h| h.donated_outputs())
    }

    /// [`Compiled::run`] where `args[k]` may be `None` for a pair `(j, k)` of
    /// [`Compiled::donated_outputs`]: the caller has moved the donated argument's bytes into
    /// `outs[j]` (its own memory, handed over), and the run updates them there with no copy.
    pub fn run_donated(
        &self,
        args: &[Option<ArrayRef<'_>>],
        outs: &mut [Array],
    ) -> Result<(), Error> {
        let backend = self.platform.name();
        check_host_arrays(
            backend,
            "output",
            &self.output_leaves,
            outs.iter().map(|a| (a.ty(), a.dims())),
        )?;
        let Some(h) = self.exe.host().filter(|_| args.iter().any(|a| a.is_none())) else {
            let given: Option<Vec<ArrayRef<'_>>> = args.iter().cloned().collect();
            return match given {
                Some(given) => self.run(&given, outs),
                None => Err(BackendError::new(
                    backend,
                    "an argument left in its output needs a host backend",
                )
                .into()),
            };
        };
        let mut slices: Vec<&mut [u8]> = outs.iter_mut().map(|o| o.bytes_mut()).collect();
        Ok(h.execute_donated(args, &mut slices)?)
    }

    /// [`Compiled::run`] writing the results as row-major bytes into caller memory of any kind
    /// (a numpy array's buffer, ...): one slice per result leaf, of exactly the leaf's byte size
    /// and aligned for its element type.
    pub fn run_into_slices(
        &self,
        args: &[ArrayRef<'_>],
        outs: &mut [&mut [u8]],
    ) -> Result<(), Error> {
        let backend = self.check_args(args)?;
        if outs.len() != self.output_leaves.len() {
            return Err(BackendError::new(
                backend,
                format!(
                    "{} output arrays expected, {} given",
                    self.output_leaves.len(),
                    outs.len()
                ),
            )
            .into());
        }
        for (k, (o, s)) in outs.iter().zip(&self.output_leaves).enumerate() {
            let need = axle_ir::literal::checked_size(s.ty, &s.dims)?.1;
            let align = s.ty.byte_size().max(1);
            if o.len() != need || (need > 0 && !(o.as_ptr() as usize).is_multiple_of(align)) {
                return Err(BackendError::new(
                    backend,
                    format!(
                        "output {k}: {need} bytes aligned to {align} expected, {} given",
                        o.len()
                    ),
                )
                .into());
            }
        }
        if let Some(h) = self.exe.host() {
            return Ok(h.execute(args, outs)?);
        }
        for (o, r) in outs.iter_mut().zip(self.run_transferred(args)?) {
            o.copy_from_slice(r.bytes());
        }
        Ok(())
    }

    /// Checks `args` against the parameters; returns the backend's name.
    fn check_args(&self, args: &[ArrayRef<'_>]) -> Result<&str, Error> {
        let backend = self.platform.name();
        check_host_arrays(
            backend,
            "argument",
            &self.param_leaves,
            args.iter().map(|a| (a.ty(), a.dims())),
        )?;
        Ok(backend)
    }

    /// Runs on `args` and returns fresh result arrays.
    pub fn call(&self, args: &[ArrayRef<'_>]) -> Result<Vec<Array>, Error> {
        let mut outs = self.alloc_outputs()?;
        self.run(args, &mut outs)?;
        Ok(outs)
    }

    /// The result leaves of a run through the transfer manager, for backends without a host
    /// run.
    fn run_transferred(&self, args: &[ArrayRef<'_>]) -> Result<Vec<Array>, Error> {
        let tm = self.platform.transfer_manager();
        let mut next = args.iter();
        let bufs = self
            .params
            .iter()
            .map(|s| Ok(tm.to_device(&literal_of(self.backend(), s, &mut next)?, 0)?))
            .collect::<Result<Vec<_>, Error>>()?;
        let refs: Vec<&_> = bufs.iter().collect();
        let out = tm.from_device(&self.exe.run(&refs)?)?;
        Ok(out.into_leaves().iter().map(Array::from_literal).collect())
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
