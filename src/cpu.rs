//! The `cpu` backend: modules compiled to native code through LLVM (`axle-codegen-cpu`), with
//! host memory as device memory. Compilation lowers on the `schedule` crate's buffer
//! assignment; a run executes the JIT-compiled entry point on a thread pool.
//!
//! With a compilation cache ([`CacheMode::Dir`]), the key covers the module's fingerprint (the
//! SHA-256 of its canonical text), the pass pipeline, the code generator's options (the thread
//! count too: the GEMM splits its work by it), the backend's version (a hash of the compiler's
//! sources, [`axle_codegen_cpu::BACKEND_VERSION`]) and the target (triple, CPU name and
//! features); an entry holds the object file with the facts to run it, and the module's text
//! after the pipeline when there is one. A hit links the object code and skips verification,
//! the pipeline and LLVM. A miss compiles with the same directory as a kernel cache
//! ([`KernelStore`], entries under `cpu-kernels/`): each LLVM module of kernels compiled before
//! by any program, for this build, target and options, is loaded rather than compiled.
//!
//! Its default pipeline (what `axle run`, `bench` and `compile` run unless told otherwise) is the
//! standard `cpu` pipeline: simplification, then fusion for the cpu target.

use std::time::Instant;

pub use axle_codegen_cpu::{
    Artifact, CodegenError, CpuExecutable as Jitted, CpuOptions, HostBuffer, KernelProfile,
};
use axle_codegen_cpu::{Emit, BACKEND_VERSION};
use axle_ir::{ArrayLiteral, Literal, Module};

use crate::array::ArrayRef;
use crate::backend::{
    check_host_arrays, BackendError, CacheMode, CompileOptions, Compiler, DeviceBuffer, DeviceInfo,
    Executable, ExecutableStats, HostExecutable, Phase, Platform, TransferManager, ValueShape,
};
use crate::cache::{CacheKey, CacheOutcome, DiskCache};

const NAME: &str = "cpu";

/// The kernel cache's subdirectory of the compilation cache.
const KERNELS: &str = "cpu-kernels";

/// The code generator's kernel cache on a compilation cache's directory: an entry per module of
/// kernels, keyed by the SHA-256 of the key material the code generator gives.
pub struct KernelStore(DiskCache);

impl KernelStore {
    /// The kernel cache kept in `cache`'s directory.
    pub fn new(cache: &DiskCache) -> KernelStore {
        KernelStore(cache.clone())
    }
}

impl axle_codegen_cpu::KernelCache for KernelStore {
    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.0.get(KERNELS, &CacheKey::new(&[key]))
    }

    fn put(&self, key: &[u8], value: &[u8]) {
        // A cache that cannot be written only costs later compilations their hits.
        let _ = self.0.put(KERNELS, &CacheKey::new(&[key]), value);
    }
}

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

impl CpuCompiler {
    /// The code generator's options for a compilation with `opts`.
    pub fn options_for(&self, opts: &CompileOptions) -> CpuOptions {
        let mut o = self.options.clone();
        if let Some(t) = opts.threads {
            o.threads = t;
        }
        o.opt_level = opts.opt_level.number();
        o
    }
}

/// The cache key of compiling `m` with `opts` and code generator options `cpu`.
fn cache_key(m: &Module, opts: &CompileOptions, cpu: &CpuOptions) -> CacheKey {
    let (triple, name, features) = axle_codegen_cpu::host_target();
    // Every code generator option counts, the thread count included: the GEMM's work split
    // depends on it.
    let settings = format!("{cpu:?} pipeline={:?}", opts.pipeline);
    CacheKey::new(&[
        NAME.as_bytes(),
        BACKEND_VERSION.as_bytes(),
        triple.as_bytes(),
        name.as_bytes(),
        features.as_bytes(),
        settings.as_bytes(),
        axle_ir::print_module(m).as_bytes(),
    ])
}

/// A cache entry's payload: the module's text after the pipeline (empty without one) and the
/// artifact.
fn encode_entry(optimized: Option<&Module>, artifact: &Artifact) -> Vec<u8> {
    let text = optimized.map(axle_ir::print_module).unwrap_or_default();
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(&artifact.to_bytes());
    out
}

/// The module and executable of a cache entry; `m` is the module compiled (when the entry has
/// no text of its own).
fn decode_entry(payload: &[u8], m: Module, cpu: &CpuOptions) -> Result<(Module, Jitted), String> {
    let len = payload
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")) as usize)
        .ok_or("truncated entry")?;
    let text = payload.get(8..8 + len).ok_or("truncated entry")?;
    let artifact = Artifact::from_bytes(&payload[8 + len..])?;
    let m = if text.is_empty() {
        m
    } else {
        let text = std::str::from_utf8(text).map_err(|e| e.to_string())?;
        axle_ir::parse_module(text).map_err(|e| e.to_string())?
    };
    let exe = axle_codegen_cpu::load_artifact(&artifact, cpu).map_err(|e| e.to_string())?;
    Ok((m, exe))
}

impl Compiler for CpuCompiler {
    fn compile(
        &self,
        m: Module,
        opts: &CompileOptions,
    ) -> Result<Box<dyn Executable>, BackendError> {
        let t0 = Instant::now();
        let mut m = m;
        one_device_collectives(&mut m);
        let cpu = self.options_for(opts);
        let cache = match &opts.cache {
            CacheMode::Off => None,
            CacheMode::Dir(d) => Some(DiskCache::new(d)),
        };
        let Some(cache) = cache else {
            let (m, phases) = crate::backend::prepare_module_phases(NAME, m, opts)?;
            let exe = axle_codegen_cpu::compile(&m, &cpu)
                .map_err(|e| BackendError::new(NAME, e.to_string()))?;
            return Ok(Box::new(CpuExecutable::new(
                m,
                exe,
                cpu,
                t0,
                CacheOutcome::Off,
                phases,
            )));
        };
        let key = cache_key(&m, opts, &cpu);
        if let Some(payload) = cache.get(NAME, &key) {
            match decode_entry(&payload, m.clone(), &cpu) {
                Ok((m, exe)) => {
                    let phases = vec![Phase {
                        name: "load from the cache".into(),
                        time: t0.elapsed(),
                    }];
                    return Ok(Box::new(CpuExecutable::new(
                        m,
                        exe,
                        cpu,
                        t0,
                        CacheOutcome::Hit,
                        phases,
                    )));
                }
                // An entry that passed the checksum but does not load (written by a build whose
                // version string collided, or a loader failure): compile instead and replace it.
                Err(_) => {
                    let _ = std::fs::remove_file(cache.path(NAME, &key));
                }
            }
        }
        let pipeline = opts.pipeline.is_some();
        let (m, phases) = crate::backend::prepare_module_phases(NAME, m, opts)?;
        let (exe, artifact) =
            axle_codegen_cpu::compile_with_kernel_cache(&m, &cpu, &KernelStore::new(&cache))
                .map_err(|e| BackendError::new(NAME, e.to_string()))?;
        let payload = encode_entry(pipeline.then_some(&m), &artifact);
        let stored = cache.put(NAME, &key, &payload).is_ok();
        Ok(Box::new(CpuExecutable::new(
            m,
            exe,
            cpu,
            t0,
            CacheOutcome::Miss { stored },
            phases,
        )))
    }
}

/// A module compiled for one device (without `--devices`, or for one device of the PJRT
/// plugin), as XLA CPU runs one replica of one partition: in a module for one device (`replica_count` and
/// `num_partitions` 1), an `all-reduce`, `all-gather`, `reduce-scatter` or `all-to-all` of one
/// array whose groups hold only that device (no groups, `{}`, or `{{0}}`) and whose result has
/// its operand's shape meets only itself, so it is its operand; an `all-reduce` of several
/// arrays with such groups is the tuple of its operands. Other collectives are left for the
/// code generator to refuse by name (a module written for more devices among them).
pub fn one_device_collectives(m: &mut Module) {
    use axle_ir::collective::ReplicaGroups;
    use axle_ir::{AttrKey, AttrValue, Opcode};
    if m.replica_count() != 1 || m.num_partitions() != 1 {
        return;
    }
    let lone: Vec<_> = m
        .live_ids()
        .into_iter()
        .filter_map(|id| {
            let op = m.opcode(id);
            let kind = matches!(
                op,
                Opcode::AllReduce | Opcode::AllGather | Opcode::ReduceScatter | Opcode::AllToAll
            );
            let groups = match m.attr(id, &AttrKey::ReplicaGroups) {
                None => true,
                Some(AttrValue::ReplicaGroups(g)) => match &**g {
                    ReplicaGroups::List(l) => l.iter().all(|g| g.iter().all(|&d| d == 0)),
                    ReplicaGroups::Iota(_) => false,
                },
                Some(_) => false,
            };
            if !kind || !groups {
                return None;
            }
            match (m.operands(id), m.shape(id)) {
                ([x], s) if s == m.shape(*x) => Some((id, Some(*x))),
                (xs, axle_ir::Shape::Tuple(parts))
                    if op == Opcode::AllReduce
                        && xs.len() == parts.len()
                        && xs
                            .iter()
                            .zip(parts)
                            .all(|(x, &p)| m.shape(*x) == m.shape_of(p)) =>
                {
                    Some((id, None))
                }
                _ => None,
            }
        })
        .collect();
    if lone.is_empty() {
        return;
    }
    let mut rw = m.rewriter();
    for (id, x) in lone {
        let x = match x {
            Some(x) => x,
            None => {
                let m = rw.module();
                let inst = axle_ir::NewInst {
                    opcode: Opcode::Tuple,
                    shape: m.shape_id(id),
                    layout: m.layout_id(id),
                    operands: m.operands(id).iter().map(|&o| rw.resolve(o)).collect(),
                    attrs: Vec::new(),
                    name: None,
                };
                let comp = m.parent(id);
                rw.add(comp, inst)
            }
        };
        rw.replace_all_uses(id, x);
    }
    rw.finish();
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
    fn new(
        module: Module,
        exe: Jitted,
        options: CpuOptions,
        t0: Instant,
        cache: CacheOutcome,
        mut phases: Vec<Phase>,
    ) -> CpuExecutable {
        let root = ValueShape::of_shape(&module, module.shape(module.root(module.entry())));
        if cache != CacheOutcome::Hit {
            let t = exe.timings();
            for (name, time) in [
                ("schedule and buffer assignment", t.schedule),
                ("lowering", t.lower),
                ("LLVM emission", t.emit),
                ("LLVM optimization", t.optimize),
                ("LLVM code generation and linking", t.codegen),
            ] {
                phases.push(Phase {
                    name: name.into(),
                    time,
                });
            }
            if t.cached_modules > 0 {
                phases.push(Phase {
                    name: format!(
                        "({} of {} kernel modules from the kernel cache)",
                        t.cached_modules, t.kernel_modules
                    ),
                    time: std::time::Duration::ZERO,
                });
            }
        }
        let stats = ExecutableStats {
            compile_time: t0.elapsed(),
            instructions: module.num_live_insts(),
            temp_bytes: Some(exe.temp_bytes()),
            scratch_bytes: Some(exe.scratch_bytes()),
            cache,
            phases,
        };
        CpuExecutable {
            module,
            exe,
            root,
            stats,
            options,
        }
    }

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

impl HostExecutable for CpuExecutable {
    fn execute(&self, args: &[ArrayRef<'_>], outs: &mut [&mut [u8]]) -> Result<(), BackendError> {
        // The code reads raw bytes, which the JIT checks only by size: element types and
        // dimensions are checked here too, so no caller of this public method, checked or
        // not, has bits reinterpreted (a few comparisons per argument).
        check_host_arrays(
            NAME,
            "argument",
            self.exe.param_shapes(),
            args.iter().map(|a| (a.ty(), a.dims())),
        )?;
        let mut inputs: [&[u8]; 8] = [&[]; 8];
        let spill: Vec<&[u8]>;
        let inputs: &[&[u8]] = if args.len() <= inputs.len() {
            for (slot, a) in inputs.iter_mut().zip(args) {
                *slot = a.bytes();
            }
            &inputs[..args.len()]
        } else {
            spill = args.iter().map(|a| a.bytes()).collect();
            &spill
        };
        self.exe
            .execute(inputs, outs)
            .map_err(|e| BackendError::new(NAME, e.to_string()))
    }

    fn donated_outputs(&self) -> &[(u32, u32)] {
        self.exe.donated_outputs()
    }

    fn execute_donated(
        &self,
        args: &[Option<ArrayRef<'_>>],
        outs: &mut [&mut [u8]],
    ) -> Result<(), BackendError> {
        let params = self.exe.param_shapes();
        if args.len() != params.len() {
            return Err(BackendError::new(
                NAME,
                format!("{} arguments for {} parameters", args.len(), params.len()),
            ));
        }
        // Given arguments are checked as `execute` checks them; one left in its output buffer
        // is checked there (by size) by the executable.
        for (k, (a, p)) in args.iter().zip(params).enumerate() {
            if let Some(a) = a
                .as_ref()
                .filter(|a| a.ty() != p.ty || a.dims() != &p.dims[..])
            {
                return Err(BackendError::new(
                    NAME,
                    format!(
                        "argument {k}: {}{:?} expected, {}{:?} given",
                        p.ty.name(),
                        &p.dims[..],
                        a.ty().name(),
                        a.dims()
                    ),
                ));
            }
        }
        let inputs: Vec<Option<&[u8]>> =
            args.iter().map(|a| a.as_ref().map(|a| a.bytes())).collect();
        self.exe
            .execute_donated(&inputs, outs)
            .map_err(|e| BackendError::new(NAME, e.to_string()))
    }
}

/// The payload of a `cpu` buffer: the array leaves of a value, depth-first.
pub struct HostValue {
    /// One aligned buffer per array leaf.
    pub leaves: Vec<HostBuffer>,
}

fn host_value(buf: &DeviceBuffer) -> Result<&HostValue, BackendError> {
    buf.payload_of(NAME, "a cpu value")
}

impl Executable for CpuExecutable {
    fn backend(&self) -> &str {
        NAME
    }

    fn execute(&self, args: &[&DeviceBuffer]) -> Result<DeviceBuffer, BackendError> {
        let inputs = self.inputs(args)?;
        let mut outs = self
            .exe
            .try_alloc_outputs()
            .map_err(|e| BackendError::new(NAME, e.to_string()))?;
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

    fn execute_into(
        &self,
        args: &[&DeviceBuffer],
        out: &mut DeviceBuffer,
    ) -> Result<(), BackendError> {
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

    fn host(&self) -> Option<&dyn HostExecutable> {
        Some(self)
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
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
        fn flat(l: &Literal, out: &mut Vec<HostBuffer>) -> Result<(), BackendError> {
            match l {
                Literal::Array(a) => {
                    let b = HostBuffer::try_from_bytes(&a.data).ok_or_else(|| {
                        BackendError::new(
                            NAME,
                            format!(
                                "the system refused the {} bytes to copy an argument",
                                a.data.len()
                            ),
                        )
                    })?;
                    out.push(b);
                    Ok(())
                }
                Literal::Tuple(es) => es.iter().try_for_each(|e| flat(e, out)),
            }
        }
        let mut leaves = Vec::new();
        flat(lit, &mut leaves)?;
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
