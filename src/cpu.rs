//! The `cpu` backend: modules compiled to native code through LLVM (`axle-codegen-cpu`), with
//! host memory as device memory. Compilation lowers on the `schedule` crate's buffer
//! assignment; a run executes the JIT-compiled entry point on a thread pool. Its default
//! pipeline (what `axle run`, `bench` and `compile` run unless told otherwise) is the standard
//! `cpu` pipeline: simplification, then fusion for the cpu target.

use std::time::Instant;

use axle_codegen_cpu::{CpuExecutable as Jitted, CpuOptions, Emit, HostBuffer};
use axle_ir::{ArrayLiteral, Literal, Module};

use crate::backend::{
    BackendError, CompileOptions, Compiler, DeviceBuffer, DeviceInfo, Executable, ExecutableStats,
    Platform, TransferManager, ValueShape,
};

const NAME: &str = "cpu";

/// The CPU platform: one device, the host.
#[derive(Default)]
pub struct CpuPlatform {
    compiler: CpuCompiler,
    transfer: CpuTransfer,
}

impl CpuPlatform {
    /// The platform.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Platform for CpuPlatform {
    fn name(&self) -> &str {
        NAME
    }

    fn devices(&self) -> Vec<DeviceInfo> {
        let (triple, cpu, _) = axle_codegen_cpu::host_target();
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        vec![DeviceInfo {
            ordinal: 0,
            description: format!("host {triple} ({cpu}, {threads} threads)"),
            memory_bytes: None,
        }]
    }

    fn compiler(&self) -> &dyn Compiler {
        &self.compiler
    }

    fn transfer_manager(&self) -> &dyn TransferManager {
        &self.transfer
    }

    fn default_pipeline(&self) -> Option<&str> {
        Some("cpu")
    }
}

/// Compiles modules to native code.
#[derive(Default)]
pub struct CpuCompiler {
    /// Options for the code generator.
    pub options: CpuOptions,
}

impl Compiler for CpuCompiler {
    fn compile(
        &self,
        m: Module,
        opts: &CompileOptions,
    ) -> Result<Box<dyn Executable>, BackendError> {
        let t0 = Instant::now();
        let m = crate::backend::prepare_module(NAME, m, opts)?;
        let exe = axle_codegen_cpu::compile(&m, &self.options)
            .map_err(|e| BackendError::new(NAME, e.to_string()))?;
        let root = ValueShape::of_shape(&m, m.shape(m.root(m.entry())));
        let stats = ExecutableStats {
            compile_time: t0.elapsed(),
            instructions: m.num_live_insts(),
            temp_bytes: Some(exe.temp_bytes()),
        };
        Ok(Box::new(CpuExecutable {
            module: m,
            exe,
            root,
            stats,
            options: self.options.clone(),
        }))
    }
}

/// A JIT-compiled module.
pub struct CpuExecutable {
    module: Module,
    exe: Jitted,
    root: ValueShape,
    stats: ExecutableStats,
    options: CpuOptions,
}

impl CpuExecutable {
    /// The compiled code and its runtime facts.
    pub fn jitted(&self) -> &Jitted {
        &self.exe
    }

    fn inputs<'a>(&self, args: &'a [&'a DeviceBuffer]) -> Result<Vec<&'a [u8]>, BackendError> {
        let mut leaves = Vec::new();
        for b in args {
            for l in &host_value(b)?.leaves {
                leaves.push(l.bytes());
            }
        }
        Ok(leaves)
    }
}

/// The payload of a `cpu` buffer: the array leaves of a value, depth-first.
pub struct HostValue {
    /// One aligned buffer per array leaf.
    pub leaves: Vec<HostBuffer>,
}

fn host_value(buf: &DeviceBuffer) -> Result<&HostValue, BackendError> {
    if buf.platform != NAME {
        return Err(BackendError::new(
            NAME,
            format!("buffer belongs to backend '{}'", buf.platform),
        ));
    }
    buf.payload
        .downcast_ref::<HostValue>()
        .ok_or_else(|| BackendError::new(NAME, "buffer payload is not a cpu value"))
}

impl Executable for CpuExecutable {
    fn run(&self, args: &[&DeviceBuffer]) -> Result<DeviceBuffer, BackendError> {
        let inputs = self.inputs(args)?;
        let mut outs = self.exe.alloc_outputs();
        self.exe
            .execute(&inputs, &mut outs)
            .map_err(|e| BackendError::new(NAME, e.to_string()))?;
        Ok(DeviceBuffer {
            platform: NAME.into(),
            device: 0,
            shape: self.root.clone(),
            payload: Box::new(HostValue { leaves: outs }),
        })
    }

    fn run_into(&self, args: &[&DeviceBuffer], out: &mut DeviceBuffer) -> Result<(), BackendError> {
        let inputs = self.inputs(args)?;
        if out.platform != NAME || out.shape != self.root {
            return Err(BackendError::new(
                NAME,
                "the output buffer does not come from this executable",
            ));
        }
        let v = out
            .payload
            .downcast_mut::<HostValue>()
            .ok_or_else(|| BackendError::new(NAME, "buffer payload is not a cpu value"))?;
        self.exe
            .execute(&inputs, &mut v.leaves)
            .map_err(|e| BackendError::new(NAME, e.to_string()))
    }

    fn module(&self) -> &Module {
        &self.module
    }

    fn compiled_text(&self) -> String {
        axle_codegen_cpu::emit_text(&self.module, &self.options, Emit::LlvmIr)
            .unwrap_or_else(|e| format!("; {e}"))
    }

    fn stats(&self) -> ExecutableStats {
        self.stats.clone()
    }
}

/// Host "transfers": a buffer holds an aligned copy of each leaf.
#[derive(Default)]
pub struct CpuTransfer;

impl TransferManager for CpuTransfer {
    fn to_device(&self, lit: &Literal, device: usize) -> Result<DeviceBuffer, BackendError> {
        if device != 0 {
            return Err(BackendError::new(NAME, format!("no device {device}")));
        }
        fn flat(l: &Literal, out: &mut Vec<HostBuffer>) {
            match l {
                Literal::Array(a) => out.push(HostBuffer::from_bytes(&a.data)),
                Literal::Tuple(es) => es.iter().for_each(|e| flat(e, out)),
            }
        }
        let mut leaves = Vec::new();
        flat(lit, &mut leaves);
        Ok(DeviceBuffer {
            platform: NAME.into(),
            device,
            shape: ValueShape::of_literal(lit),
            payload: Box::new(HostValue { leaves }),
        })
    }

    fn from_device(&self, buf: &DeviceBuffer) -> Result<Literal, BackendError> {
        let v = host_value(buf)?;
        let mut next = 0;
        fn build(s: &ValueShape, v: &HostValue, next: &mut usize) -> Result<Literal, BackendError> {
            Ok(match s {
                ValueShape::Array(a) => {
                    let l = v
                        .leaves
                        .get(*next)
                        .ok_or_else(|| BackendError::new(NAME, "buffer has too few leaves"))?;
                    *next += 1;
                    Literal::Array(ArrayLiteral {
                        shape: a.clone(),
                        data: l.bytes().to_vec(),
                    })
                }
                ValueShape::Tuple(es) => Literal::Tuple(
                    es.iter()
                        .map(|e| build(e, v, next))
                        .collect::<Result<_, _>>()?,
                ),
                ValueShape::Token => Literal::Tuple(Vec::new()),
            })
        }
        build(&buf.shape, v, &mut next)
    }
}
