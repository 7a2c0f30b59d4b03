//! The LLVM layer both LLVM backends (`codegen-cpu`, `codegen-nvptx`) emit through: what computes
//! one element, written once and parametrised by a small [`Target`] trait.
//!
//! - [`cg`]: the code generator of one LLVM module (builder, loops, branches, calls);
//! - [`forms`]: the register and memory forms of every element type (loads, stores, constants);
//! - [`ops`]: the scalar semantics of every op, XLA's rules included (FTZ, integer edge cases),
//!   dispatching to [`real`] and [`complex`]; [`minifloat`] the 8- and 4-bit float conversions,
//!   [`math`] the inline math approximations, [`libm_fallback`] inline forms of the math
//!   library functions for a target without one, [`lanes`] the instructions both run on
//!   scalars or vectors;
//! - [`elemental`]: the elemental generators, from an output index to the value at that index,
//!   composed across operands;
//! - [`contraction`]: a dot's dimension numbers, a convolution's geometry, the elemental forms
//!   of both, their accumulation type and step;
//! - [`rng_bit_generator`]: the bits of `rng-bit-generator` (XLA's ThreeFry and Philox) per
//!   work item, the body both backends' kernels for it run;
//! - [`error`]: the errors, which name the instruction they are about;
//! - [`object_loader`]: relocatable host object files linked into the process (ORC), for the
//!   backends' JITs.
//!
//! What differs between machines (address spaces, function attributes, vector width, how a
//! math library function is called, thread indexing) is asked of the [`Target`] a [`cg::Cg`] is
//! made for; nothing here knows a backend. Loop nests, kernels, GEMM and runtimes are the
//! backends' own. This crate also finds and links LLVM 19 (its build script), for every crate
//! above it.
#![deny(missing_docs)]
// Index loops over several parallel arrays of per-dimension values read better than zips.
#![allow(clippy::needless_range_loop)]

pub mod cg;
pub mod complex;
pub mod contraction;
pub mod elemental;
pub mod error;
pub mod forms;
pub mod lanes;
pub mod libm_fallback;
pub mod llvm_options;
pub mod math;
pub mod minifloat;
pub mod object_loader;
pub mod ops;
pub mod real;
pub mod rng_bit_generator;
pub mod target;

pub use error::CodegenError;
pub use target::{Target, ThreadRegisters};
