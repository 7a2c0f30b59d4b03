//! XLA's serialized `HloModuleProto` (format `"hlo"` of PJRT, what PyTorch/XLA and other PJRT
//! clients send, and what XLA writes with `--xla_dump_hlo_as_proto`) read into and written from
//! Axle's IR, natively, with prost's types generated from XLA's protos (`pjrt-sys`).
//!
//! Invariants:
//! - [`read_module`] builds the module the HLO text parser builds from the text XLA prints for
//!   the same module (same opcodes, attributes, shapes, layouts, literals, names), and verifies
//!   it as the text path does; any input, however malformed, gives a module or a
//!   [`ProtoError`], never a panic.
//! - [`write_module`] is its inverse on modules: `print(read(write(m))) == print(m)`.
//! - This crate depends on `axle-ir` alone among Axle's crates.
//!
//! Files: `read.rs` and `write.rs` (modules, computations, instructions, ids), `attrs.rs`
//! (instruction attributes), `verbatim.rs` (attributes the IR keeps as text), `shape.rs`
//! (element types, shapes, layouts), `literal.rs` (constants), `wire.rs` (the fields read and
//! written below prost), `error.rs`.
#![deny(missing_docs)]

pub mod attrs;
pub mod error;
pub mod literal;
mod read;
pub mod shape;
pub mod verbatim;
mod wire;
mod write;

pub use error::ProtoError;
pub use read::read_module;
pub use write::write_module;

/// Module frontend attributes `axle.header.N` hold header attribute `N` as `key=value`.
const HEADER_PREFIX: &str = "axle.header.";
/// Module frontend attributes `axle.debug.N` hold debug table `N`: its title and lines.
const DEBUG_PREFIX: &str = "axle.debug.";
/// A module frontend attribute saying the module has no `entry_computation_layout`.
const NO_ENTRY_LAYOUT: &str = "axle.no_entry_layout";

/// Whether `head`, the first bytes of a file, start like a serialized `HloModuleProto` as XLA
/// and [`write_module`] write one: field 1 (the module's name, an HLO name of fewer than 128
/// bytes) first, then field 2 (the entry computation's name). No HLO text starts so (text
/// would need a newline, then a control character), so a reader can pick the format by content.
pub fn looks_like_proto(head: &[u8]) -> bool {
    let [0x0a, n, rest @ ..] = head else {
        return false;
    };
    let n = *n as usize;
    n < 0x80
        && rest.len() > n
        && rest[..n]
            .iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-' | b'$'))
        && rest[n] == 0x12
}
