//! Memory-aware scheduling, the schedule side table, buffer liveness and buffer assignment.
//!
//! Not built yet: this crate will own the scheduler heuristics and the heap simulator.
#![deny(missing_docs)]
