//! Benchmarks for Axle: divan benches, model and large-graph generators and the side-by-side harness.
#![deny(missing_docs)]
