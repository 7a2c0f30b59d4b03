//! [`Executable`] (`PJRT_Executable`) and [`LoadedExecutable`] (`PJRT_LoadedExecutable`): a program
//! compiled by Axle for the `cpu` device, with `PJRT_Client_Compile`, execution,
//! serialization and the queries JAX makes of a compiled program.
//!
//! A program for `num_replicas` x `num_partitions` devices (the compile options) is loaded on
//! the devices of the options' device assignment (or devices 0..N-1), logical device
//! `replica * num_partitions + partition` being the executable's addressable device of that
//! index. It is compiled once, as the program one device runs ([`crate::partition`]), and an
//! execution runs it on every device at once, a thread per device meeting in the in-process
//! communicator ([`axle::codegen_cpu::execute_devices`]); a device that fails, or a collective
//! that waits longer than the timeout (`axle_timeout`), fails the whole execution with one
//! error.
//!
//! Invariants:
//! - Outputs are the array leaves of the entry root, depth-first (a tuple root is untupled), as
//!   PJRT clients expect; arguments are the entry parameters' array leaves likewise.
//! - Every `PJRT_Executable` handed out (`PJRT_LoadedExecutable_GetExecutable`) is its own leaked
//!   `Box<Arc<Executable>>`, freed by `PJRT_Executable_Destroy`; a `PJRT_LoadedExecutable` is a
//!   leaked `Box<LoadedExecutable>`, freed by `PJRT_LoadedExecutable_Destroy`.
//! - A serialized executable holds the program as the client sent it (format and code) and its
//!   compile options; loading it compiles again, through Axle's compilation cache when one is
//!   configured (`axle_cache_dir`, `AXLE_CACHE_DIR`), so a cached load does no code generation.
//! - The optimized program (`PJRT_Executable_OptimizedProgram`) is the module after Axle's
//!   pipeline as an `HloModuleProtoWithConfig` (format `hlo_with_config`), which is what clients
//!   parse (`jax.jit(f).lower(x).compile().as_text()`).

use std::ffi::c_char;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use axle::{ArrayRef, Compiled};
use pjrt_sys::protos::xla::{HloModuleConfigProto, HloModuleProto, HloModuleProtoWithConfig};
use pjrt_sys::*;
use prost::Message;
use sha2::{Digest, Sha256};

use crate::buffer::Buffer;
use crate::client::Client;
use crate::element;
use crate::error::{entry, PluginError, PluginResult};
use crate::event::Event;
use crate::named::{self, NamedValues, Value};
use crate::options::DEFAULT_TIMEOUT;
use crate::partition::{self, PerDevice};
use crate::program;

/// The memory kind of every output.
const OUTPUT_KIND: &str = "device";

/// What a serialized executable starts with.
const MAGIC: &[u8] = b"axle-pjrt-executable-1\n";

/// A compiled program.
pub struct Executable {
    compiled: Arc<Compiled>,
    name: String,
    /// The program as the client sent it, and the compile options it was compiled with
    /// (serialization).
    format: String,
    code: Vec<u8>,
    compile_options: Vec<u8>,
    fingerprint: String,
    /// The arguments the program's `input_output_alias` donates: deleted by every execution
    /// that does not mark them non-donatable.
    donated_params: Vec<usize>,
    out_types: Vec<PJRT_Buffer_Type>,
    out_dims: Vec<i64>,
    out_dim_sizes: Vec<usize>,
    out_kinds: Vec<*const c_char>,
    out_kind_sizes: Vec<usize>,
    cost: NamedValues,
    /// `num_replicas` x `num_partitions` of the compile options.
    replicas: u32,
    partitions: u32,
    /// How long a collective waits for its group.
    timeout: std::time::Duration,
    /// The shardings the program was written with, for the optimized program.
    param_shardings: Option<Vec<pjrt_sys::protos::xla::OpSharding>>,
    output_sharding: Option<pjrt_sys::protos::xla::OpSharding>,
    /// The optimized program's bytes ([`Executable::optimized_program`]), made on first use:
    /// clients ask for it several times per compile (its size, then its bytes, and for the
    /// parameter and output layouts, which jaxlib reads from it).
    optimized: OnceLock<Vec<u8>>,
}

// SAFETY: the raw pointers (`out_kinds`) point to a `'static` string; everything else is owned.
unsafe impl Send for Executable {}
// SAFETY: as above; shared access only reads.
unsafe impl Sync for Executable {}

/// A compiled program loaded on the client's devices.
pub struct LoadedExecutable {
    exe: Arc<Executable>,
    client: *const Client,
    /// The device of each logical device (`replica * num_partitions + partition`).
    devices: Vec<*mut PJRT_Device>,
    deleted: AtomicBool,
}

impl Executable {
    fn get<'a>(p: *mut PJRT_Executable) -> PluginResult<&'a Executable> {
        // SAFETY: executable pointers are leaked `Box<Arc<Executable>>`s.
        unsafe { (p as *const Arc<Executable>).as_ref() }
            .map(|a| &**a)
            .ok_or_else(|| PluginError::invalid("axle: null PJRT_Executable"))
    }

    /// The module after Axle's pipeline, a serialized `HloModuleProtoWithConfig`: made once,
    /// then handed out again.
    fn optimized_program(&self) -> PluginResult<&[u8]> {
        if let Some(bytes) = self.optimized.get() {
            return Ok(bytes);
        }
        let bytes = self.write_optimized_program()?;
        // Another thread may have set it meanwhile: the same bytes.
        Ok(self.optimized.get_or_init(|| bytes))
    }

    fn write_optimized_program(&self) -> PluginResult<Vec<u8>> {
        let module = axle_hlo_proto::write_module(self.compiled.executable().module())
            .map_err(|err| PluginError::internal(format!("axle: the optimized module: {err}")))?;
        let mut module = HloModuleProto::decode(module.as_slice())
            .map_err(|err| PluginError::internal(format!("axle: the optimized module: {err}")))?;
        with_layouts(&mut module);
        // Clients read the shardings of arguments and results from these (XLA's SPMD
        // partitioner leaves them there).
        module.spmd_output_sharding = self.output_sharding.clone();
        module.spmd_parameters_shardings = self.param_shardings.clone().unwrap_or_default();
        // Clients rebuild an `HloModule` from this; its config must carry the entry layout.
        let config = HloModuleConfigProto {
            entry_computation_layout: module.host_program_shape.clone(),
            replica_count: i64::from(self.replicas),
            num_partitions: i64::from(self.partitions),
            use_spmd_partitioning: self.partitions > 1,
            ..Default::default()
        };
        Ok(HloModuleProtoWithConfig {
            hlo_module: Some(module),
            config: Some(config),
        }
        .encode_to_vec())
    }
}

impl LoadedExecutable {
    fn get<'a>(p: *mut PJRT_LoadedExecutable) -> PluginResult<&'a LoadedExecutable> {
        // SAFETY: loaded executable pointers come from `compile_loaded`.
        unsafe { (p as *const LoadedExecutable).as_ref() }
            .ok_or_else(|| PluginError::invalid("axle: null PJRT_LoadedExecutable"))
    }
}

/// Why module `m` cannot run on one device, if it cannot: a collective whose replica groups or
/// source-target pairs name a device other than 0.
fn needs_several_devices(m: &axle::ir::Module) -> Option<String> {
    use axle::ir::AttrValue;
    for insts in m.insts_by_comp().values() {
        for &id in insts {
            for (_, v) in m.attrs(id) {
                let beyond = match v {
                    AttrValue::ReplicaGroups(g) => g
                        .expand()
                        .map_or(true, |gs| gs.iter().flatten().any(|&d| d != 0)),
                    AttrValue::Pairs(ps) => ps.iter().flatten().any(|&d| d != 0),
                    _ => false,
                };
                if beyond {
                    return Some(format!(
                        "%{} ({}) is a collective among several devices",
                        m.name(id),
                        m.opcode(id).name()
                    ));
                }
            }
        }
    }
    None
}

/// Compiles the program `code` of `format` with the client's options and the serialized
/// `compile_options`, and loads it on the client's device.
fn compile_loaded(
    client: &Client,
    format: &str,
    code: &[u8],
    compile_options: &[u8],
) -> PluginResult<*mut PJRT_LoadedExecutable> {
    let m = program::module(format, code)?;
    let (options, build) = client.options.with_compile_options(compile_options)?;
    let n = build.replicas.saturating_mul(build.partitions);
    let too_many = || {
        PluginError::invalid(format!(
            "axle: a program for {} replicas x {} partitions ({n} devices); this client has {} \
             (set AXLE_DEVICES={n} or the client option axle_devices)",
            build.replicas,
            build.partitions,
            client.num_devices()
        ))
    };
    if n > client.num_devices() as i64 {
        return Err(too_many());
    }
    let (replicas, partitions) = (
        u32::try_from(build.replicas).map_err(|_| too_many())?,
        u32::try_from(build.partitions).map_err(|_| too_many())?,
    );
    let ids: Vec<i64> = build.assignment.clone().unwrap_or_else(|| (0..n).collect());
    let mut devices = Vec::with_capacity(ids.len());
    for &id in &ids {
        let d = client.device_by_id(id).ok_or_else(|| {
            PluginError::invalid(format!(
                "axle: the device assignment names device {id}; this client has devices 0 to {}",
                client.num_devices() - 1
            ))
        })?;
        if devices.contains(&d) {
            return Err(PluginError::invalid(format!(
                "axle: the device assignment names device {id} twice"
            )));
        }
        devices.push(d);
    }
    if n == 1 {
        if let Some(why) = needs_several_devices(&m) {
            return Err(PluginError::unimplemented(format!(
                "axle: {why}, in a program compiled for one device"
            )));
        }
    }
    let PerDevice {
        module: m,
        param_shardings,
        output_sharding,
    } = partition::per_device(m, replicas, partitions)?;
    let name = m.name.clone();
    let cost = axle::analysis::cost::module_cost(&m);
    let mut donated_params: Vec<usize> = axle::schedule::alias::donations(&m)
        .into_iter()
        .map(|(_, k)| k as usize)
        .collect();
    donated_params.sort_unstable();
    donated_params.dedup();
    let compiled = axle::compile("cpu", m, &options.compile_options()?)?;
    let mut out_types = Vec::new();
    let mut out_dims = Vec::new();
    let mut out_dim_sizes = Vec::new();
    for s in compiled.output_shapes() {
        out_types.push(element::to_pjrt(s.ty)?);
        out_dims.extend_from_slice(&s.dims);
        out_dim_sizes.push(s.dims.len());
    }
    let n = out_types.len();
    let mut h = Sha256::new();
    h.update(format.as_bytes());
    h.update(code);
    h.update(compile_options);
    h.update(format!("{options:?}").as_bytes());
    let fingerprint = format!("{:x}", h.finalize());
    let exe = Executable {
        compiled: Arc::new(compiled),
        name,
        format: format.to_string(),
        code: code.to_vec(),
        compile_options: compile_options.to_vec(),
        fingerprint,
        donated_params,
        out_types,
        out_dims,
        out_dim_sizes,
        out_kinds: vec![OUTPUT_KIND.as_ptr() as *const c_char; n],
        out_kind_sizes: vec![OUTPUT_KIND.len(); n],
        cost: NamedValues::new(vec![
            ("flops", Value::Float(cost.flops as f32)),
            ("transcendentals", Value::Float(cost.transcendentals as f32)),
            ("bytes accessed", Value::Float(cost.bytes as f32)),
        ]),
        replicas,
        partitions,
        timeout: options.timeout.unwrap_or(DEFAULT_TIMEOUT),
        param_shardings,
        output_sharding,
        optimized: OnceLock::new(),
    };
    Ok(Box::into_raw(Box::new(LoadedExecutable {
        exe: Arc::new(exe),
        client,
        devices,
        deleted: AtomicBool::new(false),
    })) as *mut PJRT_LoadedExecutable)
}

entry! {
    /// `PJRT_Client_Compile`.
    fn client_compile(args: PJRT_Client_Compile_Args) {
        let client = Client::get(args.client)?;
        // SAFETY: the client's program.
        let prog = unsafe { args.program.as_ref() }
            .ok_or_else(|| PluginError::invalid("PJRT_Client_Compile: null program"))?;
        // SAFETY: the client's strings and bytes.
        let format = unsafe { named::str_arg(prog.format, prog.format_size, "program format")? };
        // SAFETY: as above.
        let code = unsafe { named::bytes_arg(prog.code, prog.code_size, "program")? };
        // SAFETY: as above.
        let options = unsafe { named::bytes_arg(args.compile_options, args.compile_options_size, "compile options")? };
        args.executable = compile_loaded(client, format, code, options)?;
        Ok(())
    }
}

entry! {
    /// `PJRT_Executable_DeserializeAndLoad`: compiles the serialized program again (through
    /// Axle's cache when one is configured).
    fn executable_deserialize_and_load(args: PJRT_Executable_DeserializeAndLoad_Args) {
        let client = Client::get(args.client)?;
        // SAFETY: the client's bytes.
        let b = unsafe { named::bytes_arg(args.serialized_executable, args.serialized_executable_size, "serialized executable")? };
        let mut rest = b
            .strip_prefix(MAGIC)
            .ok_or_else(|| PluginError::invalid("axle: not a serialized axle executable"))?;
        let mut field = || -> PluginResult<&[u8]> {
            let truncated = || PluginError::invalid("axle: truncated serialized executable");
            let n = rest.get(..8).ok_or_else(truncated)?;
            let n = u64::from_le_bytes(n.try_into().expect("8 bytes"));
            let n = usize::try_from(n).map_err(|_| truncated())?;
            let f = rest.get(8..8usize.saturating_add(n)).ok_or_else(truncated)?;
            rest = &rest[8 + n..];
            Ok(f)
        };
        let format = std::str::from_utf8(field()?)
            .map_err(|_| PluginError::invalid("axle: serialized executable: bad format name"))?;
        let options = field()?;
        let code = field()?;
        args.loaded_executable = compile_loaded(client, format, code, options)?;
        Ok(())
    }
}

/// The bytes of a serialized executable, owned by the client until it calls the deleter.
struct Serialized(Vec<u8>);

unsafe extern "C" fn serialized_deleter(p: *mut PJRT_SerializedExecutable) {
    if !p.is_null() {
        drop(Box::from_raw(p as *mut Serialized));
    }
}

entry! {
    /// `PJRT_Executable_Serialize`.
    fn executable_serialize(args: PJRT_Executable_Serialize_Args) {
        let e = Executable::get(args.executable as *mut PJRT_Executable)?;
        let mut out = MAGIC.to_vec();
        for f in [e.format.as_bytes(), &e.compile_options, &e.code] {
            out.extend_from_slice(&(f.len() as u64).to_le_bytes());
            out.extend_from_slice(f);
        }
        let s = Box::new(Serialized(out));
        args.serialized_bytes = s.0.as_ptr() as *const c_char;
        args.serialized_bytes_size = s.0.len();
        args.serialized_executable = Box::into_raw(s) as *mut PJRT_SerializedExecutable;
        args.serialized_executable_deleter = Some(serialized_deleter);
        Ok(())
    }
}

entry! {
    /// `PJRT_Executable_Destroy`.
    fn executable_destroy(args: PJRT_Executable_Destroy_Args) {
        if !args.executable.is_null() {
            // SAFETY: made by `loaded_executable_get_executable`, destroyed once.
            drop(unsafe { Box::from_raw(args.executable as *mut Arc<Executable>) });
        }
        Ok(())
    }
}

entry! {
    /// `PJRT_Executable_Name`: the module's name.
    fn executable_name(args: PJRT_Executable_Name_Args) {
        let e = Executable::get(args.executable)?;
        args.executable_name = e.name.as_ptr() as *const c_char;
        args.executable_name_size = e.name.len();
        Ok(())
    }
}

entry! {
    /// `PJRT_Executable_NumReplicas`: the compile options' `num_replicas`.
    fn executable_num_replicas(args: PJRT_Executable_NumReplicas_Args) {
        args.num_replicas = Executable::get(args.executable)?.replicas as usize;
        Ok(())
    }
}

entry! {
    /// `PJRT_Executable_NumPartitions`: the compile options' `num_partitions`.
    fn executable_num_partitions(args: PJRT_Executable_NumPartitions_Args) {
        args.num_partitions = Executable::get(args.executable)?.partitions as usize;
        Ok(())
    }
}

entry! {
    /// `PJRT_Executable_NumOutputs`: the root's array leaves.
    fn executable_num_outputs(args: PJRT_Executable_NumOutputs_Args) {
        args.num_outputs = Executable::get(args.executable)?.out_types.len();
        Ok(())
    }
}

entry! {
    /// `PJRT_Executable_SizeOfGeneratedCodeInBytes`: not measured; -1.
    fn executable_size_of_generated_code_in_bytes(args: PJRT_Executable_SizeOfGeneratedCodeInBytes_Args) {
        Executable::get(args.executable)?;
        args.size_in_bytes = -1;
        Ok(())
    }
}

entry! {
    /// `PJRT_Executable_GetCostAnalysis`: Axle's cost model of the program as compiled
    /// (`flops`, `transcendentals`, `bytes accessed`).
    fn executable_get_cost_analysis(args: PJRT_Executable_GetCostAnalysis_Args) {
        let (p, n) = Executable::get(args.executable)?.cost.as_raw();
        args.properties = p;
        args.num_properties = n;
        Ok(())
    }
}

entry! {
    /// `PJRT_Executable_OutputElementTypes`.
    fn executable_output_element_types(args: PJRT_Executable_OutputElementTypes_Args) {
        let e = Executable::get(args.executable)?;
        args.output_types = e.out_types.as_ptr() as *mut PJRT_Buffer_Type;
        args.num_output_types = e.out_types.len();
        Ok(())
    }
}

entry! {
    /// `PJRT_Executable_OutputDimensions`.
    fn executable_output_dimensions(args: PJRT_Executable_OutputDimensions_Args) {
        let e = Executable::get(args.executable)?;
        args.num_outputs = e.out_dim_sizes.len();
        args.dims = e.out_dims.as_ptr();
        args.dim_sizes = e.out_dim_sizes.as_ptr();
        Ok(())
    }
}

entry! {
    /// `PJRT_Executable_OutputMemoryKinds`: `device` for every output.
    fn executable_output_memory_kinds(args: PJRT_Executable_OutputMemoryKinds_Args) {
        let e = Executable::get(args.executable)?;
        args.num_outputs = e.out_kinds.len();
        args.memory_kinds = e.out_kinds.as_ptr();
        args.memory_kind_sizes = e.out_kind_sizes.as_ptr();
        Ok(())
    }
}

/// Gives every shape of `m` a layout (the default where the IR has none), as XLA's module
/// reader checks instruction shapes layouts included, and drops stack frame ids.
fn with_layouts(m: &mut HloModuleProto) {
    use axle_hlo_proto::shape::fill_layouts;
    let program = |p: &mut pjrt_sys::protos::xla::ProgramShapeProto| {
        p.parameters.iter_mut().for_each(fill_layouts);
        p.result.iter_mut().for_each(fill_layouts);
    };
    m.host_program_shape.iter_mut().for_each(program);
    for c in &mut m.computations {
        c.program_shape.iter_mut().for_each(program);
        for i in &mut c.instructions {
            i.shape.iter_mut().for_each(fill_layouts);
            // The module carries no stack frame index for XLA (Axle keeps its debug tables as
            // frontend attributes), so a frame id would point nowhere.
            if let Some(md) = &mut i.metadata {
                md.stack_frame_id = 0;
            }
        }
    }
}

/// The program format of [`executable_optimized_program`]'s output.
const OPTIMIZED_FORMAT: &str = "hlo_with_config";

entry! {
    /// `PJRT_Executable_OptimizedProgram`: the module after Axle's pipeline, a serialized
    /// `HloModuleProtoWithConfig`. With a null `code`, the size it needs.
    fn executable_optimized_program(args: PJRT_Executable_OptimizedProgram_Args) {
        let e = Executable::get(args.executable)?;
        // SAFETY: the client's program struct.
        let prog = unsafe { args.program.as_mut() }
            .ok_or_else(|| PluginError::invalid("PJRT_Executable_OptimizedProgram: null program"))?;
        let bytes = e.optimized_program()?;
        prog.format = OPTIMIZED_FORMAT.as_ptr() as *const c_char;
        prog.format_size = OPTIMIZED_FORMAT.len();
        if prog.code.is_null() {
            prog.code_size = bytes.len();
            return Ok(());
        }
        if prog.code_size < bytes.len() {
            return Err(PluginError::invalid(format!(
                "PJRT_Executable_OptimizedProgram: {} bytes of room for {}",
                prog.code_size,
                bytes.len()
            )));
        }
        // SAFETY: the client's buffer of `code_size` bytes.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), prog.code as *mut u8, bytes.len()) };
        prog.code_size = bytes.len();
        Ok(())
    }
}

entry! {
    /// `PJRT_Executable_Fingerprint`: SHA-256 of the program and its options.
    fn executable_fingerprint(args: PJRT_Executable_Fingerprint_Args) {
        let e = Executable::get(args.executable)?;
        args.executable_fingerprint = e.fingerprint.as_ptr() as *const c_char;
        args.executable_fingerprint_size = e.fingerprint.len();
        Ok(())
    }
}

entry! {
    /// `PJRT_Executable_GetCompiledMemoryStats`: argument, output and temporary bytes.
    fn executable_get_compiled_memory_stats(args: PJRT_Executable_GetCompiledMemoryStats_Args) {
        let e = Executable::get(args.executable)?;
        let size = |shapes: &[axle::ir::ArrayShape]| -> i64 {
            shapes.iter().map(|s| s.byte_size().unwrap_or(0) as i64).sum()
        };
        let stats = e.compiled.stats();
        args.generated_code_size_in_bytes = 0;
        args.argument_size_in_bytes = size(e.compiled.param_shapes());
        args.output_size_in_bytes = size(e.compiled.output_shapes());
        args.alias_size_in_bytes = 0;
        args.temp_size_in_bytes =
            (stats.temp_bytes.unwrap_or(0) + stats.scratch_bytes.unwrap_or(0)) as i64;
        args.host_generated_code_size_in_bytes = 0;
        args.host_argument_size_in_bytes = 0;
        args.host_output_size_in_bytes = 0;
        args.host_alias_size_in_bytes = 0;
        args.host_temp_size_in_bytes = 0;
        Ok(())
    }
}

entry! {
    /// `PJRT_LoadedExecutable_Destroy`.
    fn loaded_executable_destroy(args: PJRT_LoadedExecutable_Destroy_Args) {
        if !args.executable.is_null() {
            // SAFETY: made by `compile_loaded`, destroyed once.
            drop(unsafe { Box::from_raw(args.executable as *mut LoadedExecutable) });
        }
        Ok(())
    }
}

entry! {
    /// `PJRT_LoadedExecutable_GetExecutable`: a new handle the client destroys.
    fn loaded_executable_get_executable(args: PJRT_LoadedExecutable_GetExecutable_Args) {
        let le = LoadedExecutable::get(args.loaded_executable)?;
        args.executable = Box::into_raw(Box::new(le.exe.clone())) as *mut PJRT_Executable;
        Ok(())
    }
}

entry! {
    /// `PJRT_LoadedExecutable_AddressableDevices`.
    fn loaded_executable_addressable_devices(args: PJRT_LoadedExecutable_AddressableDevices_Args) {
        let le = LoadedExecutable::get(args.executable)?;
        args.addressable_devices = le.devices.as_ptr();
        args.num_addressable_devices = le.devices.len();
        Ok(())
    }
}

entry! {
    /// `PJRT_LoadedExecutable_Delete`: later executions fail.
    fn loaded_executable_delete(args: PJRT_LoadedExecutable_Delete_Args) {
        LoadedExecutable::get(args.executable)?.deleted.store(true, Ordering::Release);
        Ok(())
    }
}

entry! {
    /// `PJRT_LoadedExecutable_IsDeleted`.
    fn loaded_executable_is_deleted(args: PJRT_LoadedExecutable_IsDeleted_Args) {
        args.is_deleted = LoadedExecutable::get(args.executable)?.deleted.load(Ordering::Acquire);
        Ok(())
    }
}

entry! {
    /// `PJRT_LoadedExecutable_Fingerprint`.
    fn loaded_executable_fingerprint(args: PJRT_LoadedExecutable_Fingerprint_Args) {
        let e = &LoadedExecutable::get(args.executable)?.exe;
        args.executable_fingerprint = e.fingerprint.as_ptr() as *const c_char;
        args.executable_fingerprint_size = e.fingerprint.len();
        Ok(())
    }
}

/// The arguments an execution donates: those of the program's `input_output_alias`
/// (`donated`) unless the client marks them non-donatable or passes the same buffer as another
/// argument (then they are only read).
///
/// # Safety
/// `options` is null or points to the client's valid execute options.
unsafe fn donated_arguments(
    donated: &[usize],
    buffers: &[*mut PJRT_Buffer],
    options: *const PJRT_ExecuteOptions,
) -> Vec<usize> {
    if donated.is_empty() {
        return Vec::new();
    }
    let kept: &[i64] = match options.as_ref() {
        Some(o) if !o.non_donatable_input_indices.is_null() => std::slice::from_raw_parts(
            o.non_donatable_input_indices,
            o.num_non_donatable_input_indices,
        ),
        _ => &[],
    };
    donated
        .iter()
        .copied()
        .filter(|&k| {
            k < buffers.len()
                && !kept.contains(&(k as i64))
                && buffers.iter().filter(|&&b| b == buffers[k]).count() == 1
        })
        .collect()
}

entry! {
    /// `PJRT_LoadedExecutable_Execute`: runs on the executable's devices (one argument list
    /// per device) before returning; the completion events are ready.
    fn loaded_executable_execute(args: PJRT_LoadedExecutable_Execute_Args) {
        let le = LoadedExecutable::get(args.executable)?;
        if le.deleted.load(Ordering::Acquire) {
            return Err(PluginError::precondition("axle: the executable was deleted"));
        }
        // SAFETY: the client's live client.
        let client = unsafe { &*le.client };
        if args.argument_lists.is_null() || args.output_lists.is_null() {
            return Err(PluginError::invalid("PJRT_LoadedExecutable_Execute: null lists"));
        }
        if le.devices.len() > 1 {
            // SAFETY: the client's arguments, as the C API describes them.
            return unsafe { execute_on_devices(le, client, args) };
        }
        if args.num_devices != 1 {
            return Err(PluginError::invalid(format!(
                "axle: {} argument lists for a program compiled for one device",
                args.num_devices
            )));
        }
        let device = if args.execute_device.is_null() {
            le.devices[0]
        } else {
            client.device(args.execute_device)?
        };
        let compiled = &le.exe.compiled;
        let want = compiled.param_shapes().len();
        if args.num_args != want {
            return Err(PluginError::invalid(format!(
                "axle: {} arguments for a program of {want} parameters",
                args.num_args
            )));
        }
        // SAFETY: one argument list of `num_args` buffers.
        let arg_list = unsafe { *args.argument_lists };
        let buffers: Vec<*mut PJRT_Buffer> = if want == 0 {
            Vec::new()
        } else if arg_list.is_null() {
            return Err(PluginError::invalid("PJRT_LoadedExecutable_Execute: null argument list"));
        } else {
            // SAFETY: as above.
            unsafe { std::slice::from_raw_parts(arg_list, want) }.to_vec()
        };
        let arrays = buffers
            .iter()
            .enumerate()
            .map(|(k, &b)| {
                Buffer::get(b)?.array().map_err(|e| PluginError {
                    message: format!("{} (argument {k})", e.message),
                    ..e
                })
            })
            .collect::<PluginResult<Vec<_>>>()?;
        let mut outs = compiled.alloc_outputs()?;
        // SAFETY: the client's execute options, or null.
        let donated = unsafe { donated_arguments(&le.exe.donated_params, &buffers, args.options) };
        if donated.is_empty() {
            let views: Vec<ArrayRef<'_>> = arrays.iter().map(|a| a.view()).collect();
            compiled.run(&views, &mut outs)?;
        } else {
            // A donated argument's bytes become the output the program leaves in its memory
            // when nothing else holds them: the buffer is then deleted and the run updates them
            // in place. Otherwise the run copies them; every donated buffer is deleted after
            // the run, as PJRT's donation says.
            drop(arrays);
            let mut moved = vec![false; buffers.len()];
            let out_shapes = compiled.output_shapes();
            let in_place = compiled
                .donated_outputs()
                .iter()
                .map(|&(j, k)| (j as usize, k as usize))
                .filter(|(_, k)| donated.contains(k));
            for (j, k) in in_place {
                let b = Buffer::get(buffers[k])?;
                let s = &out_shapes[j];
                if b.ty != s.ty || b.dims.as_slice() != &s.dims[..] {
                    continue;
                }
                if let Some(a) = b.take_unique() {
                    outs[j] = a;
                    moved[k] = true;
                }
            }
            let arrays = buffers
                .iter()
                .zip(&moved)
                .map(|(&b, &m)| if m { Ok(None) } else { Buffer::get(b)?.array().map(Some) })
                .collect::<PluginResult<Vec<_>>>()?;
            let views: Vec<Option<ArrayRef<'_>>> =
                arrays.iter().map(|a| a.as_ref().map(|a| a.view())).collect();
            compiled.run_donated(&views, &mut outs)?;
            for &k in &donated {
                Buffer::get(buffers[k])?.delete();
            }
        }
        // SAFETY: one output list with room for every output.
        let out_list = unsafe { *args.output_lists };
        if out_list.is_null() && !outs.is_empty() {
            return Err(PluginError::invalid("PJRT_LoadedExecutable_Execute: null output list"));
        }
        let memory = client.memory_of(device)?;
        for (k, a) in outs.into_iter().enumerate() {
            // SAFETY: the client's output list has room for `NumOutputs` pointers.
            unsafe { *out_list.add(k) = Buffer::into_raw(Arc::new(a), device, memory) };
        }
        if !args.device_complete_events.is_null() {
            // SAFETY: room for one event per device.
            unsafe { *args.device_complete_events = Event::ready(Ok(())) };
        }
        Ok(())
    }
}

/// The arguments of device `d`'s list, checked to be on `device` and of the program's shapes.
///
/// # Safety
/// `args` is the client's valid execute arguments with `num_devices` > `d` lists of `num_args`
/// buffers.
unsafe fn device_arguments(
    compiled: &axle::Compiled,
    args: &PJRT_LoadedExecutable_Execute_Args,
    d: usize,
    device: *mut PJRT_Device,
) -> PluginResult<(Vec<*mut PJRT_Buffer>, Vec<Arc<axle::Array>>)> {
    let want = compiled.param_shapes();
    let list = *args.argument_lists.add(d);
    let buffers: Vec<*mut PJRT_Buffer> = if want.is_empty() {
        Vec::new()
    } else if list.is_null() {
        return Err(PluginError::invalid(format!(
            "PJRT_LoadedExecutable_Execute: null argument list for device {d}"
        )));
    } else {
        std::slice::from_raw_parts(list, want.len()).to_vec()
    };
    let mut arrays = Vec::with_capacity(buffers.len());
    for (k, (&b, s)) in buffers.iter().zip(want).enumerate() {
        let buf = Buffer::get(b)?;
        if buf.device() != device {
            return Err(PluginError::invalid(format!(
                "axle: argument {k} of logical device {d} is on another device than the one \
                 the executable runs it on"
            )));
        }
        let a = buf.array().map_err(|e| PluginError {
            message: format!("{} (argument {k} of logical device {d})", e.message),
            ..e
        })?;
        if a.ty() != s.ty || a.dims() != &s.dims[..] {
            return Err(PluginError::invalid(format!(
                "axle: argument {k} of logical device {d} is {}{:?}; the program takes {}{:?}",
                a.ty().name(),
                a.dims(),
                s.ty.name(),
                s.dims
            )));
        }
        arrays.push(a);
    }
    Ok((buffers, arrays))
}

/// `PJRT_LoadedExecutable_Execute` of an executable loaded on several devices: every device's
/// run at once, a thread each (see the module docs).
///
/// # Safety
/// `args` is the client's valid execute arguments.
unsafe fn execute_on_devices(
    le: &LoadedExecutable,
    client: &Client,
    args: &mut PJRT_LoadedExecutable_Execute_Args,
) -> PluginResult<()> {
    let exe = &le.exe;
    let n = le.devices.len();
    if args.num_devices != n {
        return Err(PluginError::invalid(format!(
            "axle: {} argument lists for a program on {n} devices",
            args.num_devices
        )));
    }
    if !args.execute_device.is_null() {
        return Err(PluginError::invalid(
            "axle: an execute device for a program on several devices",
        ));
    }
    let compiled = &exe.compiled;
    if args.num_args != compiled.param_shapes().len() {
        return Err(PluginError::invalid(format!(
            "axle: {} arguments for a program of {} parameters",
            args.num_args,
            compiled.param_shapes().len()
        )));
    }
    let mut buffers = Vec::with_capacity(n);
    let mut arrays = Vec::with_capacity(n);
    for (d, &device) in le.devices.iter().enumerate() {
        let (b, a) = device_arguments(compiled, args, d, device)?;
        buffers.push(b);
        arrays.push(a);
    }
    let jitted = compiled
        .executable()
        .as_any()
        .and_then(|a| a.downcast_ref::<axle::cpu::CpuExecutable>())
        .map(|c| c.jitted())
        .ok_or_else(|| PluginError::internal("axle: the cpu backend gave another executable"))?;
    let inputs: Vec<Vec<&[u8]>> = arrays
        .iter()
        .map(|a| a.iter().map(|x| x.bytes()).collect())
        .collect();
    let mesh = axle::ir::collective::DeviceMesh {
        replicas: exe.replicas,
        partitions: exe.partitions,
    };
    let run = axle::codegen_cpu::execute_devices(jitted, mesh, &inputs, 1, exe.timeout)
        .map_err(|e| PluginError::internal(format!("axle: {}", e.message)))?;
    drop(inputs);
    drop(arrays);
    // Donated arguments are read in place (several devices never update one in place) and
    // deleted, as donation promises.
    for list in &buffers {
        for k in donated_arguments(&exe.donated_params, list, args.options) {
            Buffer::get(list[k])?.delete();
        }
    }
    let shapes = compiled.output_shapes();
    for (d, outs) in run.outputs.into_iter().enumerate() {
        let out_list = *args.output_lists.add(d);
        if out_list.is_null() && !outs.is_empty() {
            return Err(PluginError::invalid(format!(
                "PJRT_LoadedExecutable_Execute: null output list for device {d}"
            )));
        }
        let device = le.devices[d];
        let memory = client.memory_of(device)?;
        for (k, (o, s)) in outs.iter().zip(shapes).enumerate() {
            let a = axle::Array::from_bytes(s.ty, &s.dims, o.bytes())
                .map_err(|e| PluginError::internal(e.to_string()))?;
            *out_list.add(k) = Buffer::into_raw(Arc::new(a), device, memory);
        }
        if !args.device_complete_events.is_null() {
            *args.device_complete_events.add(d) = Event::ready(Ok(()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pjrt_sys::protos::xla::{CompileOptionsProto, ExecutableBuildOptionsProto};

    const PSUM: &str = "HloModule m, num_partitions=2\n\nadd {\n  a = f32[] parameter(0)\n  \
                        b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\nENTRY e {\n  \
                        p = f32[3]{0} parameter(0)\n  ROOT r = f32[3]{0} all-reduce(p), \
                        channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, \
                        to_apply=add\n}\n";

    fn options(partitions: i64) -> Vec<u8> {
        CompileOptionsProto {
            executable_build_options: Some(ExecutableBuildOptionsProto {
                num_replicas: 1,
                num_partitions: partitions,
                ..Default::default()
            }),
            ..Default::default()
        }
        .encode_to_vec()
    }

    /// Runs `exe` with `lists` (one argument list per device); the outputs per device, or the
    /// error's message.
    fn execute(
        exe: *mut PJRT_LoadedExecutable,
        lists: &[Vec<*mut PJRT_Buffer>],
    ) -> Result<Vec<*mut PJRT_Buffer>, String> {
        let mut outs = vec![std::ptr::null_mut::<PJRT_Buffer>(); lists.len()];
        let out_lists: Vec<*mut *mut PJRT_Buffer> = outs
            .iter_mut()
            .map(|o| o as *mut *mut PJRT_Buffer)
            .collect();
        let arg_lists: Vec<*const *mut PJRT_Buffer> = lists.iter().map(|l| l.as_ptr()).collect();
        let mut args = PJRT_LoadedExecutable_Execute_Args {
            struct_size: std::mem::size_of::<PJRT_LoadedExecutable_Execute_Args>(),
            extension_start: std::ptr::null_mut(),
            executable: exe,
            options: std::ptr::null_mut(),
            argument_lists: arg_lists.as_ptr(),
            num_devices: lists.len(),
            num_args: 1,
            output_lists: out_lists.as_ptr(),
            device_complete_events: std::ptr::null_mut(),
            execute_device: std::ptr::null_mut(),
        };
        // SAFETY: the arguments describe live buffers and room for one output per device.
        let err = unsafe { loaded_executable_execute(&mut args) };
        if err.is_null() {
            Ok(outs)
        } else {
            // SAFETY: made by the entry point.
            let e = unsafe { Box::from_raw(err as *mut PluginError) };
            Err(e.message)
        }
    }

    fn values(b: *mut PJRT_Buffer) -> Vec<f32> {
        Buffer::get(b)
            .unwrap()
            .array()
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
    }

    #[test]
    fn a_program_for_two_devices_runs_on_both_and_refuses_wrong_arguments() {
        let client = Client::new(crate::options::Options::default(), 2);
        let c: &Client = &client;
        let exe = compile_loaded(c, "hlo_text", PSUM.as_bytes(), &options(2)).unwrap();
        let le = LoadedExecutable::get(exe).unwrap();
        assert_eq!(le.devices.len(), 2);
        let on = |d: usize, v: [f32; 3]| {
            let dev = c.device_by_id(d as i64).unwrap();
            let a = axle::Array::from_slice(&v, &[3]).unwrap();
            Buffer::into_raw(Arc::new(a), dev, c.memory_of(dev).unwrap())
        };
        let (x0, x1) = (on(0, [1.0, 2.0, 3.0]), on(1, [10.0, 20.0, 30.0]));
        let outs = execute(exe, &[vec![x0], vec![x1]]).unwrap();
        for (d, &o) in outs.iter().enumerate() {
            assert_eq!(values(o), vec![11.0, 22.0, 33.0]);
            assert_eq!(Buffer::get(o).unwrap().device(), le.devices[d]);
        }
        // One list for two devices, and an argument on the other device, are errors.
        let e = execute(exe, &[vec![x0]]).unwrap_err();
        assert!(
            e.contains("1 argument lists for a program on 2 devices"),
            "{e}"
        );
        let e = execute(exe, &[vec![x1], vec![x0]]).unwrap_err();
        assert!(e.contains("another device"), "{e}");
        // A program for more devices than the client has is refused when it is compiled.
        let e = compile_loaded(c, "hlo_text", PSUM.as_bytes(), &options(4)).unwrap_err();
        assert!(e.message.contains("AXLE_DEVICES"), "{}", e.message);
        for b in outs.into_iter().chain([x0, x1]) {
            // SAFETY: made by `Buffer::into_raw` or the execution, freed once.
            drop(unsafe { Box::from_raw(b as *mut Buffer) });
        }
        // SAFETY: made by `compile_loaded`, freed once.
        drop(unsafe { Box::from_raw(exe as *mut LoadedExecutable) });
    }
}
