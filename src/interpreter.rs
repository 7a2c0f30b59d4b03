//! The `interpreter` backend: the reference evaluator behind the backend interface. Its device
//! memory is host memory, its "compilation" verifies the module, and running evaluates it.

use std::time::Instant;

use axle_analysis::eval::{evaluate, evaluate_devices, is_collective, EvalOptions};
use axle_ir::collective::DeviceMesh;
use axle_ir::{ArrayShape, Literal, Module};

use crate::array::ArrayRef;
use crate::backend::{
    check_host_arrays, BackendError, CompileOptions, Compiler, DeviceBuffer, DeviceInfo,
    Executable, ExecutableStats, HostExecutable, Platform, TransferManager, ValueShape,
};

const NAME: &str = "interpreter";

/// The interpreter platform: one host "device".
#[derive(Default)]
pub struct InterpreterPlatform {
    compiler: InterpreterCompiler,
    transfer: InterpreterTransfer,
}

impl InterpreterPlatform {
    /// The platform.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Platform for InterpreterPlatform {
    fn name(&self) -> &str {
        NAME
    }

    fn devices(&self) -> Vec<DeviceInfo> {
        vec![DeviceInfo {
            ordinal: 0,
            description: "host (reference evaluator)".into(),
            memory_bytes: None,
        }]
    }

    fn compiler(&self) -> &dyn Compiler {
        &self.compiler
    }

    fn transfer_manager(&self) -> &dyn TransferManager {
        &self.transfer
    }
}

/// Verifies modules and wraps them as executables.
#[derive(Default)]
pub struct InterpreterCompiler;

impl Compiler for InterpreterCompiler {
    fn compile(
        &self,
        m: Module,
        opts: &CompileOptions,
    ) -> Result<Box<dyn Executable>, BackendError> {
        let t0 = Instant::now();
        let (m, phases) = crate::backend::prepare_module_phases(NAME, m, opts)?;
        let instructions = m.num_live_insts();
        let collectives = m.live_ids().into_iter().any(|i| is_collective(m.opcode(i)));
        Ok(Box::new(InterpreterExecutable {
            collectives,
            module: m,
            stats: ExecutableStats {
                compile_time: t0.elapsed(),
                instructions,
                temp_bytes: None,
                phases,
                ..Default::default()
            },
        }))
    }
}

/// How long a collective of a one-device run may wait for its group (which is only itself, so
/// it never waits).
const ONE_DEVICE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// A verified module, evaluated on each run.
pub struct InterpreterExecutable {
    module: Module,
    /// Whether the module holds collectives: a run is then a one-device mesh run, where every
    /// group is the one device (as XLA runs a module with one replica and one partition).
    collectives: bool,
    stats: ExecutableStats,
}

fn host_literal(buf: &DeviceBuffer) -> Result<&Literal, BackendError> {
    buf.payload_of(NAME, "a host literal")
}

impl InterpreterExecutable {
    /// Evaluates the module on `lits`: on one device, collectives included.
    fn evaluate(&self, lits: Vec<Literal>) -> Result<Literal, BackendError> {
        let err = |e: axle_analysis::eval::EvalError| BackendError::new(NAME, e.to_string());
        if !self.collectives {
            return evaluate(&self.module, &lits).map_err(err);
        }
        let m = &self.module;
        let mesh = DeviceMesh::for_module(m, 1).map_err(|e| BackendError::new(NAME, e))?;
        let opts = EvalOptions::default();
        let mut outs = evaluate_devices(m, m.entry(), mesh, &[lits], &opts, ONE_DEVICE_TIMEOUT)
            .map_err(err)?;
        Ok(outs.swap_remove(0))
    }
}

impl Executable for InterpreterExecutable {
    fn backend(&self) -> &str {
        NAME
    }

    fn execute(&self, args: &[&DeviceBuffer]) -> Result<DeviceBuffer, BackendError> {
        let lits: Vec<Literal> = args
            .iter()
            .map(|b| host_literal(b).cloned())
            .collect::<Result<_, _>>()?;
        let out = self.evaluate(lits)?;
        Ok(DeviceBuffer {
            platform: NAME.into(),
            device: 0,
            shape: ValueShape::of_literal(&out),
            payload: Box::new(out),
        })
    }

    fn module(&self) -> &Module {
        &self.module
    }

    fn compiled_text(&self) -> String {
        axle_ir::print_module(&self.module)
    }

    fn stats(&self) -> ExecutableStats {
        self.stats.clone()
    }

    fn host(&self) -> Option<&dyn HostExecutable> {
        Some(self)
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

impl HostExecutable for InterpreterExecutable {
    /// The evaluator owns its values, so the arguments are copied once into literals (the
    /// transfer path copies them twice) and the result leaves once into `outs`.
    fn execute(&self, args: &[ArrayRef<'_>], outs: &mut [&mut [u8]]) -> Result<(), BackendError> {
        let m = &self.module;
        // The same check, and message, as every host run (see the cpu backend's).
        let params: Vec<ArrayShape> = m
            .params(m.entry())
            .iter()
            .flat_map(|&p| {
                let s = ValueShape::of_shape(m, m.shape(p));
                s.leaves().into_iter().cloned().collect::<Vec<_>>()
            })
            .collect();
        check_host_arrays(
            NAME,
            "argument",
            &params,
            args.iter().map(|a| (a.ty(), a.dims())),
        )?;
        let mut leaves = args.iter();
        let lits = m
            .params(m.entry())
            .iter()
            .map(|&p| rebuild(&ValueShape::of_shape(m, m.shape(p)), &mut leaves))
            .collect::<Result<Vec<_>, _>>()?;
        let out = self.evaluate(lits)?;
        let mut k = 0;
        copy_leaves(&out, outs, &mut k)
    }
}

/// A parameter's literal from the next array leaves.
fn rebuild<'a>(
    s: &ValueShape,
    leaves: &mut impl Iterator<Item = &'a ArrayRef<'a>>,
) -> Result<Literal, BackendError> {
    Ok(match s {
        ValueShape::Array(_) => {
            let a = leaves
                .next()
                .ok_or_else(|| BackendError::new(NAME, "too few arguments"))?;
            Literal::Array(a.to_literal())
        }
        ValueShape::Tuple(es) => Literal::Tuple(
            es.iter()
                .map(|e| rebuild(e, leaves))
                .collect::<Result<_, _>>()?,
        ),
        ValueShape::Token => Literal::Tuple(Vec::new()),
    })
}

/// Copies the array leaves of `l`, depth-first, into `outs[k..]`.
fn copy_leaves(l: &Literal, outs: &mut [&mut [u8]], k: &mut usize) -> Result<(), BackendError> {
    match l {
        Literal::Array(a) => {
            let o = outs
                .get_mut(*k)
                .ok_or_else(|| BackendError::new(NAME, "too few output arrays"))?;
            *k += 1;
            if o.len() != a.data.len() {
                return Err(BackendError::new(
                    NAME,
                    "an output array has the wrong size",
                ));
            }
            o.copy_from_slice(&a.data);
            Ok(())
        }
        Literal::Tuple(es) => es.iter().try_for_each(|e| copy_leaves(e, outs, k)),
    }
}

/// Host "transfers": the buffer holds a copy of the literal.
#[derive(Default)]
pub struct InterpreterTransfer;

impl TransferManager for InterpreterTransfer {
    fn to_device(&self, lit: &Literal, device: usize) -> Result<DeviceBuffer, BackendError> {
        if device != 0 {
            return Err(BackendError::new(NAME, format!("no device {device}")));
        }
        Ok(DeviceBuffer {
            platform: NAME.into(),
            device,
            shape: ValueShape::of_literal(lit),
            payload: Box::new(lit.clone()),
        })
    }

    fn from_device(&self, buf: &DeviceBuffer) -> Result<Literal, BackendError> {
        host_literal(buf).cloned()
    }
}
