//! Memory-aware scheduling, alias analysis, buffer liveness and buffer assignment, target
//! independent: the `cpu` backend takes its buffers from here, and so will NVPTX.
//!
//! The data path: [`memory_schedule`] flattens the call graph ([`flatten_call_graph`]) and
//! orders every computation ([`list_scheduler`], [`dfs_scheduler`], [`post_order_scheduler`],
//! the best by simulated peak, [`memory_model`]) into the module's schedule side table
//! ([`axle_ir::schedule`]); [`buffer_assignment::assign`] then builds the flattened
//! [`program`], its [`liveness`], the may-aliases ([`alias`]) and places the temporaries with the
//! [`heap_simulator`]. [`check`] verifies an assignment independently, by running the program
//! on shadow memory. [`render`] prints it (text, JSON, an SVG timeline).
//!
//! Passes: `memory-schedule{heuristic=list|dfs|postorder|best}`, `flatten-call-graph` and
//! `batch-split{min_bytes=N,slice_bytes=N,max_slices=N}` ([`batch_split`]: a batched chain
//! whose intermediates dwarf its inputs and outputs runs one batch slice at a time)
//! ([`register`]).
#![deny(missing_docs)]

pub mod alias;
pub mod batch_split;
pub mod buffer_assignment;
pub mod call_graph;
pub mod check;
pub mod computation_view;
pub mod dep_graph;
pub mod dfs_scheduler;
pub mod error;
pub mod flatten_call_graph;
pub mod heap_simulator;
pub mod leaves;
pub mod list_scheduler;
pub mod liveness;
pub mod memory_model;
pub mod memory_schedule;
pub mod post_order_scheduler;
pub mod program;
pub mod render;
pub mod rules;
pub mod views;

pub use buffer_assignment::{assign, Buffer, BufferAssignment, Memory, Move, Role, ALIGN};
pub use error::ScheduleError;
pub use heap_simulator::Strategy;
pub use memory_schedule::{compute_schedule, schedule_module, Choice, Heuristic, ScheduleReport};
pub use rules::{BufferRules, FusionRun, HloRules, Scratch, ScratchPlace};

use axle_ir::{PassInfo, PassRegistry};

/// Registers `memory-schedule`, `flatten-call-graph` and `batch-split`.
pub fn register(reg: &mut PassRegistry) {
    reg.register(PassInfo {
        name: "memory-schedule",
        doc: "flattens the call graph and orders every computation to keep live memory low (list, dfs, postorder, or the best of them by simulated peak); the module is then scheduled",
        options: memory_schedule::OPTIONS,
        create: |o| {
            Box::new(memory_schedule::MemorySchedule {
                heuristic: Heuristic::from_name(o.str("heuristic"))
                    .unwrap_or(Heuristic::Best),
            })
        },
    });
    reg.register(PassInfo {
        name: "flatten-call-graph",
        doc: "gives every computation run as a step (loop bodies, branches, calls, fusions) its own copy per call site",
        options: &[],
        create: |_| Box::new(flatten_call_graph::FlattenCallGraph),
    });
    reg.register(PassInfo {
        name: "batch-split",
        doc: "runs a batched chain (a batched dot and what follows it batch by batch) whose largest intermediate outweighs its inputs and outputs one batch slice at a time, so one slice of each intermediate is live at once",
        options: batch_split::OPTIONS,
        create: |o| {
            Box::new(batch_split::BatchSplit {
                min_bytes: o.int("min_bytes"),
                slice_bytes: o.int("slice_bytes"),
                max_slices: o.int("max_slices"),
            })
        },
    });
}
