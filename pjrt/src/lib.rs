//! Axle as a PJRT plugin: [`GetPjrtApi`] returns the PJRT C API table (`pjrt_c_api.h`, API 0.54)
//! over Axle's compiler and its `cpu` backend, so a framework that loads PJRT plugins (JAX with
//! `JAX_PLATFORMS=axle`, PyTorch/XLA, gopjrt) compiles and runs its programs with Axle.
//!
//! The objects of the C API are this crate's types behind opaque pointers: [`client::Client`]
//! (with its devices and memories), [`buffer::Buffer`], [`executable::Executable`] and
//! [`executable::LoadedExecutable`], [`event::Event`]. Programs come in as StableHLO (through the
//! converter the host process registers, [`set_mlir_converter`]) or HLO ([`program`]).
//!
//! Invariants:
//! - No panic unwinds into the client: every entry point runs under [`error::guard`], and every
//!   failure is a `PJRT_Error` carrying Axle's message.
//! - Work is synchronous: a transfer or an execution is complete when its call returns, so
//!   every event the plugin hands out is ready.
//! - The table has no null slot ([`api`]).

#![allow(clippy::missing_safety_doc)]
// The C API's enum constants keep their C names, also in patterns.
#![allow(non_upper_case_globals)]

pub mod api;
pub mod buffer;
pub mod client;
pub mod element;
pub mod error;
pub mod event;
pub mod executable;
pub mod memory_stats;
pub mod named;
pub mod options;
pub mod partition;
pub mod program;

use std::sync::OnceLock;

pub use client::set_plugin_attributes;
pub use named::Value;
pub use program::{set_mlir_converter, MlirConverter};

struct Api(pjrt_sys::PJRT_Api);

// SAFETY: the table holds function pointers and null extension pointers; it is never mutated.
unsafe impl Sync for Api {}
// SAFETY: as above.
unsafe impl Send for Api {}

/// The PJRT C API table: what a client's `dlsym(handle, "GetPjrtApi")` finds.
#[no_mangle]
pub extern "C" fn GetPjrtApi() -> *const pjrt_sys::PJRT_Api {
    static API: OnceLock<Api> = OnceLock::new();
    &API.get_or_init(|| Api(api::table())).0
}
