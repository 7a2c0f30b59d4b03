//! The `interpreter` backend: the reference evaluator behind the backend interface. Its device
//! memory is host memory, its "compilation" verifies the module, and running evaluates it.

use std::time::Instant;

use axle_analysis::eval::evaluate;
use axle_ir::{Literal, Module};

use crate::backend::{
    BackendError, CompileOptions, Compiler, DeviceBuffer, DeviceInfo, Executable, ExecutableStats,
    Platform, TransferManager, ValueShape,
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
        let m = crate::backend::prepare_module(NAME, m, opts)?;
        let instructions = m.num_live_insts();
        Ok(Box::new(InterpreterExecutable {
            module: m,
            stats: ExecutableStats {
                compile_time: t0.elapsed(),
                instructions,
                temp_bytes: None,
            },
        }))
    }
}

/// A verified module, evaluated on each run.
pub struct InterpreterExecutable {
    module: Module,
    stats: ExecutableStats,
}

fn host_literal(buf: &DeviceBuffer) -> Result<&Literal, BackendError> {
    if buf.platform != NAME {
        return Err(BackendError::new(
            NAME,
            format!("buffer belongs to backend '{}'", buf.platform),
        ));
    }
    buf.payload
        .downcast_ref::<Literal>()
        .ok_or_else(|| BackendError::new(NAME, "buffer payload is not a host literal"))
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
        let out =
            evaluate(&self.module, &lits).map_err(|e| BackendError::new(NAME, e.to_string()))?;
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
