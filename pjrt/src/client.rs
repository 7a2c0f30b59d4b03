//! The plugin's client and what it owns: [`Client`] (`PJRT_Client`), [`Device`] (`PJRT_Device`),
//! [`DeviceDescription`] (`PJRT_DeviceDescription`), [`Memory`] (`PJRT_Memory`) and the client's
//! [`Topology`] (`PJRT_TopologyDescription`), with their entry points and the plugin's own
//! (`PJRT_Plugin_Initialize`, `PJRT_Plugin_Attributes`).
//!
//! Invariants:
//! - One process, N devices (`AXLE_DEVICES`, or the create option `axle_devices`; 1 by
//!   default): device `d` has id, local hardware id and memory id `d`, kind `cpu` (Axle's `cpu`
//!   backend), process index 0, and one memory of kind `device` (host memory) of its own. All
//!   are addressable; a program for several of them runs each device on a thread of this
//!   process ([`crate::executable`]).
//! - The client is a leaked `Box<Client>`; its devices, memories, descriptions and topology live
//!   in it at fixed addresses until `PJRT_Client_Destroy`, so every pointer to them the client
//!   hands out stays valid that long.

use std::ffi::c_char;
use std::sync::OnceLock;

use pjrt_sys::*;

use crate::error::{entry, PluginError, PluginResult};
use crate::named::{self, NamedValues, Value};
use crate::options::Options;

/// The platform name clients select (`JAX_PLATFORMS=axle`).
pub const PLATFORM_NAME: &str = "axle";

/// Attributes the host process sets before it creates a client (the Python package sets the
/// StableHLO version its jaxlib reads and writes).
static EXTRA_ATTRIBUTES: OnceLock<Vec<(String, Value)>> = OnceLock::new();

/// Adds plugin attributes (`stablehlo_current_version`, `stablehlo_minimum_version`) that only
/// the host process knows; the first call wins.
pub fn set_plugin_attributes(attrs: Vec<(String, Value)>) {
    let _ = EXTRA_ATTRIBUTES.set(attrs);
}

fn plugin_attributes() -> &'static NamedValues {
    static ATTRS: OnceLock<NamedValues> = OnceLock::new();
    ATTRS.get_or_init(|| {
        let mut pairs: Vec<(&str, Value)> = vec![(
            "xla_version",
            // PJRT's own: what "an XLA of this age" supports; Axle claims the C API version it
            // was built against.
            Value::Int(PJRT_API_MINOR as i64),
        )];
        if let Some(extra) = EXTRA_ATTRIBUTES.get() {
            pairs.extend(extra.iter().map(|(n, v)| (n.as_str(), v.clone())));
        }
        NamedValues::new(pairs)
    })
}

/// A device's description.
pub struct DeviceDescription {
    id: i32,
    kind: String,
    debug: String,
    to_string: String,
    attributes: NamedValues,
}

/// A memory space.
pub struct Memory {
    id: i32,
    kind: String,
    debug: String,
    to_string: String,
    devices: Vec<*mut PJRT_Device>,
}

/// A device.
pub struct Device {
    /// The client that owns it.
    pub client: *const Client,
    description: DeviceDescription,
    local_hardware_id: i32,
    memories: Vec<*mut PJRT_Memory>,
}

/// The client's topology: its devices' descriptions.
pub struct Topology {
    descriptions: Vec<*mut PJRT_DeviceDescription>,
    attributes: NamedValues,
}

/// A client: the devices, memories and options of one `PJRT_Client_Create`.
pub struct Client {
    /// Never resized after `Client::new`, so the devices stay where the pointers point.
    devices: Vec<Device>,
    device_ptrs: Vec<*mut PJRT_Device>,
    memories: Vec<Memory>,
    memory_ptrs: Vec<*mut PJRT_Memory>,
    topology: Topology,
    platform_version: String,
    /// The options compilations start from.
    pub options: Options,
}

/// The most devices a client may have.
pub const MAX_DEVICES: i64 = 1024;

/// The number of devices `value` asks for (from `what`), or an error naming it.
fn device_count(value: &Value, what: &str) -> PluginResult<usize> {
    match value {
        Value::Int(n) if (1..=MAX_DEVICES).contains(n) => Ok(*n as usize),
        _ => Err(PluginError::invalid(format!(
            "axle: {what} takes a number of devices from 1 to {MAX_DEVICES}, got {value:?}"
        ))),
    }
}

/// The number of devices of the environment (`AXLE_DEVICES`; 1 when unset or empty).
fn devices_from_env() -> PluginResult<usize> {
    match std::env::var("AXLE_DEVICES") {
        Ok(v) if !v.trim().is_empty() => {
            let n = v.trim().parse::<i64>().map_err(|_| {
                PluginError::invalid(format!("axle: AXLE_DEVICES={v} is not a number of devices"))
            })?;
            device_count(&Value::Int(n), "AXLE_DEVICES")
        }
        _ => Ok(1),
    }
}

impl Client {
    pub(crate) fn new(options: Options, num_devices: usize) -> Box<Client> {
        let mut c = Box::new(Client {
            devices: Vec::new(),
            device_ptrs: Vec::new(),
            memories: Vec::new(),
            memory_ptrs: Vec::new(),
            topology: Topology {
                descriptions: Vec::new(),
                attributes: NamedValues::default(),
            },
            platform_version: format!("axle {}", env!("CARGO_PKG_VERSION")),
            options,
        });
        let client: *const Client = &*c;
        for d in 0..num_devices as i32 {
            c.devices.push(Device {
                client,
                description: DeviceDescription {
                    id: d,
                    kind: "cpu".into(),
                    debug: format!("AxleCpuDevice(id={d})"),
                    to_string: format!("AxleCpuDevice(id={d})"),
                    attributes: NamedValues::default(),
                },
                local_hardware_id: d,
                memories: Vec::new(),
            });
            c.memories.push(Memory {
                id: d,
                kind: "device".into(),
                debug: format!("AxleHostMemory(id={d})"),
                to_string: format!("AxleHostMemory(id={d})"),
                devices: Vec::new(),
            });
        }
        c.device_ptrs = c
            .devices
            .iter_mut()
            .map(|d| d as *mut Device as *mut PJRT_Device)
            .collect();
        c.memory_ptrs = c
            .memories
            .iter_mut()
            .map(|m| m as *mut Memory as *mut PJRT_Memory)
            .collect();
        let (devs, mems) = (c.device_ptrs.clone(), c.memory_ptrs.clone());
        for (d, m) in c.devices.iter_mut().zip(&mems) {
            d.memories = vec![*m];
        }
        for (m, d) in c.memories.iter_mut().zip(&devs) {
            m.devices = vec![*d];
        }
        c.topology.descriptions = c
            .devices
            .iter_mut()
            .map(|d| &mut d.description as *mut DeviceDescription as *mut PJRT_DeviceDescription)
            .collect();
        c
    }

    /// The client behind a pointer.
    pub fn get<'a>(p: *mut PJRT_Client) -> PluginResult<&'a Client> {
        // SAFETY: client pointers come from `PJRT_Client_Create`.
        unsafe { (p as *const Client).as_ref() }
            .ok_or_else(|| PluginError::invalid("axle: null PJRT_Client"))
    }

    /// The device the client's computations run on when none is named.
    pub fn default_device(&self) -> *mut PJRT_Device {
        self.device_ptrs[0]
    }

    /// The number of devices.
    pub fn num_devices(&self) -> usize {
        self.device_ptrs.len()
    }

    /// The device of id `id`, if there is one.
    pub fn device_by_id(&self, id: i64) -> Option<*mut PJRT_Device> {
        usize::try_from(id)
            .ok()
            .and_then(|k| self.device_ptrs.get(k).copied())
    }

    /// The id of device `d` (one of this client's).
    pub fn device_id(&self, d: *mut PJRT_Device) -> PluginResult<usize> {
        self.device_ptrs
            .iter()
            .position(|&p| p == d)
            .ok_or_else(|| PluginError::invalid("axle: the device is not this client's"))
    }

    /// Checks that `d` is one of this client's devices (null: the default).
    pub fn device(&self, d: *mut PJRT_Device) -> PluginResult<*mut PJRT_Device> {
        if d.is_null() {
            return Ok(self.default_device());
        }
        self.device_id(d).map(|_| d)
    }

    /// The default memory of device `d` (one of this client's).
    pub fn memory_of(&self, d: *mut PJRT_Device) -> PluginResult<*mut PJRT_Memory> {
        Ok(self.memory_ptrs[self.device_id(d)?])
    }

    /// Where a new buffer goes when the client names a device, a memory, both or neither: the
    /// memory's device, the device's memory, or device 0 and its memory. A memory of another
    /// device than the one named is an error.
    pub fn placement(
        &self,
        d: *mut PJRT_Device,
        m: *mut PJRT_Memory,
    ) -> PluginResult<(*mut PJRT_Device, *mut PJRT_Memory)> {
        if m.is_null() {
            let d = self.device(d)?;
            return Ok((d, self.memory_of(d)?));
        }
        let k = self
            .memory_ptrs
            .iter()
            .position(|&p| p == m)
            .ok_or_else(|| PluginError::invalid("axle: the memory is not this client's"))?;
        let owner = self.device_ptrs[k];
        if !d.is_null() && d != owner {
            return Err(PluginError::invalid(format!(
                "axle: memory {k} belongs to device {k}, not to device {}",
                self.device_id(d)?
            )));
        }
        Ok((owner, m))
    }
}

impl Device {
    /// The device behind a pointer.
    pub fn get<'a>(p: *mut PJRT_Device) -> PluginResult<&'a Device> {
        // SAFETY: device pointers come from a live client.
        unsafe { (p as *const Device).as_ref() }
            .ok_or_else(|| PluginError::invalid("axle: null PJRT_Device"))
    }
}

fn description<'a>(p: *mut PJRT_DeviceDescription) -> PluginResult<&'a DeviceDescription> {
    // SAFETY: description pointers come from a live client.
    unsafe { (p as *const DeviceDescription).as_ref() }
        .ok_or_else(|| PluginError::invalid("axle: null PJRT_DeviceDescription"))
}

fn memory<'a>(p: *mut PJRT_Memory) -> PluginResult<&'a Memory> {
    // SAFETY: memory pointers come from a live client.
    unsafe { (p as *const Memory).as_ref() }
        .ok_or_else(|| PluginError::invalid("axle: null PJRT_Memory"))
}

fn out_str(s: &str) -> (*const c_char, usize) {
    (s.as_ptr() as *const c_char, s.len())
}

entry! {
    /// `PJRT_Plugin_Initialize`: nothing to do.
    fn plugin_initialize(_args: PJRT_Plugin_Initialize_Args) {
        Ok(())
    }
}

entry! {
    /// `PJRT_Plugin_Attributes`.
    fn plugin_attributes_entry(args: PJRT_Plugin_Attributes_Args) {
        let (p, n) = plugin_attributes().as_raw();
        args.attributes = p;
        args.num_attributes = n;
        Ok(())
    }
}

entry! {
    /// `PJRT_Client_Create`: the options are [`Options`]' names and `axle_devices` (the number
    /// of devices, overriding `AXLE_DEVICES`); the key-value store (several processes) is not
    /// used.
    fn client_create(args: PJRT_Client_Create_Args) {
        let mut options = Options::from_env()?;
        let mut devices = devices_from_env()?;
        // SAFETY: the client's option list.
        for (name, value) in unsafe { named::read(args.create_options, args.num_options)? } {
            if name == "axle_devices" {
                devices = device_count(&value, "option axle_devices")?;
            } else {
                options.set(&name, &value)?;
            }
        }
        args.client = Box::into_raw(Client::new(options, devices)) as *mut PJRT_Client;
        Ok(())
    }
}

entry! {
    /// `PJRT_Client_Destroy`.
    fn client_destroy(args: PJRT_Client_Destroy_Args) {
        if !args.client.is_null() {
            // SAFETY: made by `client_create`, destroyed once.
            drop(unsafe { Box::from_raw(args.client as *mut Client) });
        }
        Ok(())
    }
}

entry! {
    /// `PJRT_Client_PlatformName`: `axle`.
    fn client_platform_name(args: PJRT_Client_PlatformName_Args) {
        Client::get(args.client)?;
        (args.platform_name, args.platform_name_size) = out_str(PLATFORM_NAME);
        Ok(())
    }
}

entry! {
    /// `PJRT_Client_ProcessIndex`: 0.
    fn client_process_index(args: PJRT_Client_ProcessIndex_Args) {
        Client::get(args.client)?;
        args.process_index = 0;
        Ok(())
    }
}

entry! {
    /// `PJRT_Client_PlatformVersion`.
    fn client_platform_version(args: PJRT_Client_PlatformVersion_Args) {
        let c = Client::get(args.client)?;
        (args.platform_version, args.platform_version_size) = out_str(&c.platform_version);
        Ok(())
    }
}

entry! {
    /// `PJRT_Client_Devices`.
    fn client_devices(args: PJRT_Client_Devices_Args) {
        let c = Client::get(args.client)?;
        args.devices = c.device_ptrs.as_ptr();
        args.num_devices = c.device_ptrs.len();
        Ok(())
    }
}

entry! {
    /// `PJRT_Client_AddressableDevices`: every device.
    fn client_addressable_devices(args: PJRT_Client_AddressableDevices_Args) {
        let c = Client::get(args.client)?;
        args.addressable_devices = c.device_ptrs.as_ptr();
        args.num_addressable_devices = c.device_ptrs.len();
        Ok(())
    }
}

entry! {
    /// `PJRT_Client_LookupDevice`.
    fn client_lookup_device(args: PJRT_Client_LookupDevice_Args) {
        let c = Client::get(args.client)?;
        let id = args.id;
        args.device = c
            .devices
            .iter()
            .zip(&c.device_ptrs)
            .find(|(d, _)| d.description.id == id)
            .map(|(_, p)| *p)
            .ok_or_else(|| PluginError::invalid(format!("axle: no device with id {id}")))?;
        Ok(())
    }
}

entry! {
    /// `PJRT_Client_LookupAddressableDevice`.
    fn client_lookup_addressable_device(args: PJRT_Client_LookupAddressableDevice_Args) {
        let c = Client::get(args.client)?;
        let id = args.local_hardware_id;
        args.addressable_device = c
            .devices
            .iter()
            .zip(&c.device_ptrs)
            .find(|(d, _)| d.local_hardware_id == id)
            .map(|(_, p)| *p)
            .ok_or_else(|| {
                PluginError::invalid(format!("axle: no device with local hardware id {id}"))
            })?;
        Ok(())
    }
}

entry! {
    /// `PJRT_Client_AddressableMemories`.
    fn client_addressable_memories(args: PJRT_Client_AddressableMemories_Args) {
        let c = Client::get(args.client)?;
        args.addressable_memories = c.memory_ptrs.as_ptr();
        args.num_addressable_memories = c.memory_ptrs.len();
        Ok(())
    }
}

entry! {
    /// `PJRT_Client_DefaultDeviceAssignment`: replica `r` of partition `p` on device
    /// `r * num_partitions + p` (the order of [`axle::ir::collective::DeviceMesh`]).
    fn client_default_device_assignment(args: PJRT_Client_DefaultDeviceAssignment_Args) {
        let c = Client::get(args.client)?;
        let (r, p) = (args.num_replicas, args.num_partitions);
        let n = (r.max(0) as usize).saturating_mul(p.max(0) as usize);
        if r < 1 || p < 1 || n > c.num_devices() {
            return Err(PluginError::invalid(format!(
                "axle: {r} replicas x {p} partitions need {} devices; this client has {} \
                 (set AXLE_DEVICES)",
                i64::from(r) * i64::from(p),
                c.num_devices()
            )));
        }
        if args.default_assignment_size < n || args.default_assignment.is_null() {
            return Err(PluginError::invalid(
                "PJRT_Client_DefaultDeviceAssignment: no room for the assignment",
            ));
        }
        for d in 0..n {
            // SAFETY: the client's array of `default_assignment_size` ints.
            unsafe { *args.default_assignment.add(d) = d as i32 };
        }
        Ok(())
    }
}

entry! {
    /// `PJRT_Client_TopologyDescription`: owned by the client.
    fn client_topology_description(args: PJRT_Client_TopologyDescription_Args) {
        let c = Client::get(args.client)?;
        args.topology = &c.topology as *const Topology as *mut PJRT_TopologyDescription;
        Ok(())
    }
}

entry! {
    /// `PJRT_DeviceDescription_Id`.
    fn device_description_id(args: PJRT_DeviceDescription_Id_Args) {
        args.id = description(args.device_description)?.id;
        Ok(())
    }
}

entry! {
    /// `PJRT_DeviceDescription_ProcessIndex`: 0.
    fn device_description_process_index(args: PJRT_DeviceDescription_ProcessIndex_Args) {
        description(args.device_description)?;
        args.process_index = 0;
        Ok(())
    }
}

entry! {
    /// `PJRT_DeviceDescription_Attributes`: none.
    fn device_description_attributes(args: PJRT_DeviceDescription_Attributes_Args) {
        let (p, n) = description(args.device_description)?.attributes.as_raw();
        args.attributes = p;
        args.num_attributes = n;
        Ok(())
    }
}

entry! {
    /// `PJRT_DeviceDescription_Kind`: `cpu`.
    fn device_description_kind(args: PJRT_DeviceDescription_Kind_Args) {
        (args.device_kind, args.device_kind_size) = out_str(&description(args.device_description)?.kind);
        Ok(())
    }
}

entry! {
    /// `PJRT_DeviceDescription_DebugString`.
    fn device_description_debug_string(args: PJRT_DeviceDescription_DebugString_Args) {
        (args.debug_string, args.debug_string_size) = out_str(&description(args.device_description)?.debug);
        Ok(())
    }
}

entry! {
    /// `PJRT_DeviceDescription_ToString`.
    fn device_description_to_string(args: PJRT_DeviceDescription_ToString_Args) {
        (args.to_string, args.to_string_size) = out_str(&description(args.device_description)?.to_string);
        Ok(())
    }
}

entry! {
    /// `PJRT_Device_GetDescription`.
    fn device_get_description(args: PJRT_Device_GetDescription_Args) {
        let d = Device::get(args.device)?;
        args.device_description = &d.description as *const DeviceDescription as *mut PJRT_DeviceDescription;
        Ok(())
    }
}

entry! {
    /// `PJRT_Device_IsAddressable`: true (every device is this process's).
    fn device_is_addressable(args: PJRT_Device_IsAddressable_Args) {
        Device::get(args.device)?;
        args.is_addressable = true;
        Ok(())
    }
}

entry! {
    /// `PJRT_Device_LocalHardwareId`.
    fn device_local_hardware_id(args: PJRT_Device_LocalHardwareId_Args) {
        args.local_hardware_id = Device::get(args.device)?.local_hardware_id;
        Ok(())
    }
}

entry! {
    /// `PJRT_Device_AddressableMemories`.
    fn device_addressable_memories(args: PJRT_Device_AddressableMemories_Args) {
        let d = Device::get(args.device)?;
        args.memories = d.memories.as_ptr();
        args.num_memories = d.memories.len();
        Ok(())
    }
}

entry! {
    /// `PJRT_Device_DefaultMemory`.
    fn device_default_memory(args: PJRT_Device_DefaultMemory_Args) {
        args.memory = Device::get(args.device)?.memories[0];
        Ok(())
    }
}

entry! {
    /// `PJRT_Device_MemoryStats`: the bytes of live buffers now and at their peak, the
    /// buffers made and the largest ([`crate::memory_stats::memory_stats`]).
    fn device_memory_stats(args: PJRT_Device_MemoryStats_Args) {
        Device::get(args.device)?;
        let st = crate::memory_stats::memory_stats();
        args.bytes_in_use = st.bytes_in_use;
        args.peak_bytes_in_use = st.peak_bytes_in_use;
        args.peak_bytes_in_use_is_set = true;
        args.num_allocs = st.num_allocs;
        args.num_allocs_is_set = true;
        args.largest_alloc_size = st.largest_alloc_size;
        args.largest_alloc_size_is_set = true;
        Ok(())
    }
}

entry! {
    /// `PJRT_Memory_Id`.
    fn memory_id(args: PJRT_Memory_Id_Args) {
        args.id = memory(args.memory)?.id;
        Ok(())
    }
}

entry! {
    /// `PJRT_Memory_Kind`: `device`.
    fn memory_kind(args: PJRT_Memory_Kind_Args) {
        (args.kind, args.kind_size) = out_str(&memory(args.memory)?.kind);
        Ok(())
    }
}

entry! {
    /// `PJRT_Memory_Kind_Id`: 0.
    fn memory_kind_id(args: PJRT_Memory_Kind_Id_Args) {
        memory(args.memory)?;
        args.kind_id = 0;
        Ok(())
    }
}

entry! {
    /// `PJRT_Memory_DebugString`.
    fn memory_debug_string(args: PJRT_Memory_DebugString_Args) {
        (args.debug_string, args.debug_string_size) = out_str(&memory(args.memory)?.debug);
        Ok(())
    }
}

entry! {
    /// `PJRT_Memory_ToString`.
    fn memory_to_string(args: PJRT_Memory_ToString_Args) {
        (args.to_string, args.to_string_size) = out_str(&memory(args.memory)?.to_string);
        Ok(())
    }
}

entry! {
    /// `PJRT_Memory_AddressableByDevices`.
    fn memory_addressable_by_devices(args: PJRT_Memory_AddressableByDevices_Args) {
        let m = memory(args.memory)?;
        args.devices = m.devices.as_ptr();
        args.num_devices = m.devices.len();
        Ok(())
    }
}

fn topology<'a>(p: *mut PJRT_TopologyDescription) -> PluginResult<&'a Topology> {
    // SAFETY: topology pointers come from a live client.
    unsafe { (p as *const Topology).as_ref() }
        .ok_or_else(|| PluginError::invalid("axle: null PJRT_TopologyDescription"))
}

entry! {
    /// `PJRT_TopologyDescription_Destroy`: the only topology is the client's, which the client
    /// frees; nothing to do.
    fn topology_destroy(_args: PJRT_TopologyDescription_Destroy_Args) {
        Ok(())
    }
}

entry! {
    /// `PJRT_TopologyDescription_PlatformName`.
    fn topology_platform_name(args: PJRT_TopologyDescription_PlatformName_Args) {
        topology(args.topology)?;
        (args.platform_name, args.platform_name_size) = out_str(PLATFORM_NAME);
        Ok(())
    }
}

entry! {
    /// `PJRT_TopologyDescription_PlatformVersion`.
    fn topology_platform_version(args: PJRT_TopologyDescription_PlatformVersion_Args) {
        topology(args.topology)?;
        (args.platform_version, args.platform_version_size) = out_str(env!("CARGO_PKG_VERSION"));
        Ok(())
    }
}

entry! {
    /// `PJRT_TopologyDescription_GetDeviceDescriptions`.
    fn topology_get_device_descriptions(args: PJRT_TopologyDescription_GetDeviceDescriptions_Args) {
        let t = topology(args.topology)?;
        args.descriptions = t.descriptions.as_ptr();
        args.num_descriptions = t.descriptions.len();
        Ok(())
    }
}

entry! {
    /// `PJRT_TopologyDescription_Attributes`: none.
    fn topology_attributes(args: PJRT_TopologyDescription_Attributes_Args) {
        let (p, n) = topology(args.topology)?.attributes.as_raw();
        args.attributes = p;
        args.num_attributes = n;
        Ok(())
    }
}
