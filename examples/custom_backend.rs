//! A third party adds a backend: implement `Platform`, `Compiler`, `Executable` and
//! `TransferManager` in your own crate, register the platform, and every Axle entry point that
//! takes a backend name (`axle::run::run_module`, the CLI when linked in) can use it.
//!
//! This backend keeps device buffers as shared host literals and counts the runs of each
//! executable; to compute, it delegates to the reference evaluator. A real backend would lower the
//! module to its own code in `compile` and keep buffers in device memory.
//!
//! Run it with `cargo run --example custom_backend`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axle::backend::{
    BackendError, CompileOptions, Compiler, DeviceBuffer, DeviceInfo, Executable, ExecutableStats,
    Platform, TransferManager, ValueShape,
};
use axle::backends::registry;
use axle::ir::{Literal, Module};

const NAME: &str = "counting-host";

struct CountingPlatform {
    compiler: CountingCompiler,
    transfer: CountingTransfer,
}

struct CountingCompiler;
struct CountingTransfer;

struct CountingExecutable {
    module: Module,
    runs: AtomicUsize,
}

impl Platform for CountingPlatform {
    fn name(&self) -> &str {
        NAME
    }
    fn devices(&self) -> Vec<DeviceInfo> {
        vec![DeviceInfo {
            ordinal: 0,
            description: "host memory, counted runs".into(),
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

impl Compiler for CountingCompiler {
    fn compile(
        &self,
        m: Module,
        _opts: &CompileOptions,
    ) -> Result<Box<dyn Executable>, BackendError> {
        axle::verify_module(&m).map_err(|e| BackendError::with_source(NAME, e))?;
        Ok(Box::new(CountingExecutable {
            module: m,
            runs: AtomicUsize::new(0),
        }))
    }
}

fn literal_of(buf: &DeviceBuffer) -> Result<Arc<Literal>, BackendError> {
    buf.payload
        .downcast_ref::<Arc<Literal>>()
        .cloned()
        .ok_or_else(|| BackendError::new(NAME, format!("not a {NAME} buffer")))
}

impl Executable for CountingExecutable {
    fn backend(&self) -> &str {
        NAME
    }
    // `run` (the entry point callers use) has checked the arguments against the parameters.
    fn execute(&self, args: &[&DeviceBuffer]) -> Result<DeviceBuffer, BackendError> {
        let n = self.runs.fetch_add(1, Ordering::Relaxed) + 1;
        let lits: Vec<Literal> = args
            .iter()
            .map(|b| literal_of(b).map(|l| (*l).clone()))
            .collect::<Result<_, _>>()?;
        let out = axle::analysis::eval::evaluate(&self.module, &lits)
            .map_err(|e| BackendError::new(NAME, e.to_string()))?;
        eprintln!("[{NAME}] run #{n} of module '{}'", self.module.name);
        Ok(DeviceBuffer {
            platform: NAME.into(),
            device: 0,
            shape: ValueShape::of_literal(&out),
            payload: Box::new(Arc::new(out)),
        })
    }
    fn module(&self) -> &Module {
        &self.module
    }
    fn compiled_text(&self) -> String {
        axle::ir::print_module(&self.module)
    }
    fn stats(&self) -> ExecutableStats {
        ExecutableStats {
            instructions: self.module.num_live_insts(),
            ..Default::default()
        }
    }
}

impl TransferManager for CountingTransfer {
    fn to_device(&self, lit: &Literal, device: usize) -> Result<DeviceBuffer, BackendError> {
        Ok(DeviceBuffer {
            platform: NAME.into(),
            device,
            shape: ValueShape::of_literal(lit),
            payload: Box::new(Arc::new(lit.clone())),
        })
    }
    fn from_device(&self, buf: &DeviceBuffer) -> Result<Literal, BackendError> {
        literal_of(buf).map(|l| (*l).clone())
    }
}

fn main() -> Result<(), String> {
    registry().register(Arc::new(CountingPlatform {
        compiler: CountingCompiler,
        transfer: CountingTransfer,
    }));
    println!("backends: {}", registry().names().join(", "));
    let text = "HloModule axpy\n\nENTRY main {\n  a = f32[] parameter(0)\n  x = f32[4]{0} parameter(1)\n  \
                y = f32[4]{0} parameter(2)\n  ab = f32[4]{0} broadcast(a), dimensions={}\n  \
                ax = f32[4]{0} multiply(ab, x)\n  ROOT r = f32[4]{0} add(ax, y)\n}\n";
    let m = axle::ir::parse_module(text).map_err(|e| e.render("axpy.hlo"))?;
    let opts = axle::run::RunOptions {
        backend: NAME.into(),
        repeat: 3,
        seed: 7,
        ..Default::default()
    };
    let report = axle::run::run_module(m, &opts).map_err(|e| e.to_string())?;
    print!("{}", axle::run::summary(&report));
    Ok(())
}
