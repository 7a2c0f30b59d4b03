//! Axle's IR: an ECS-style arena of HLO instructions.
//!
//! Instructions and computations are dense columns indexed by typed `u32` ids ([`InstId`],
//! [`CompId`]); shapes and layouts are interned ([`ShapeId`], [`LayoutId`]). This crate also owns
//! XLA's HLO text format (parser and printer), shape inference, the verifier, the builder API and
//! host literals with `.npy` I/O.
//!
//! Features: `generators` (the `gen` and `hostile` module generators, with quickcheck and
//! arbitrary) and `npy-write` ([`npy::write_npy`], with tempfile); both off by default, so a
//! library user builds neither crate.
#![deny(missing_docs)]

pub mod attrs;
pub mod builder;
pub mod collective;
pub mod compare;
pub mod conv_geo;
pub mod entity;
pub mod filetest;
#[cfg(feature = "generators")]
pub mod gen;
#[cfg(feature = "generators")]
pub mod hostile;
pub mod ids;
pub mod json;
pub mod literal;
pub mod memory;
pub mod module;
mod name_index;
pub mod npy;
pub mod op_errors;
pub mod opcode;
pub mod parser;
pub mod pass;
pub mod pass_manager;
pub mod passes;
pub mod pipeline;
pub mod printer;
pub mod runnable;
pub mod schedule;
mod schedule_check;
pub mod sdy;
pub mod shape_inference;
pub mod stack;
pub mod traversal;
pub mod tree_reduction;
pub mod types;
pub mod verify;

/// The regular expressions of [`PassManagerOptions::dump_after`].
pub use regex_lite;

pub use attrs::{Attr, AttrKey, AttrValue, ConvDims, WindowDim};
pub use compare::{compare_arrays, compare_literals, Mismatch, MismatchKind, Tolerance};
pub use conv_geo::{conv_geo, ConvGeo, ConvGeoError};
pub use literal::{ArrayLiteral, ElementTextError, Literal, LiteralError, NativeElement};
pub use module::{
    BufferId, CompId, ConstValue, DebugTable, EntryLayout, InstId, InstsByComp, LayoutId, Module,
    NewInst, Remap, Rewriter, ShapeId, SrcLoc,
};
#[cfg(feature = "npy-write")]
pub use npy::write_npy;
pub use npy::{read_npy, read_npy_as, read_npy_within, NpyError, NpyErrorKind};
pub use opcode::{is_annotation_target, Opcode, PLACEMENT_ANNOTATIONS, SHARDING_ANNOTATIONS};
pub use parser::{parse_module, ParseError};
pub use pass::{
    Analysis, AnalysisCache, Changed, Counters, OptKind, OptSpec, OptValue, Pass, PassCx,
    PassError, PassInfo, PassOptionError, PassOptions, PassRegistry,
};
pub use pass_manager::{
    CompactPolicy, PassManager, PassManagerError, PassManagerOptions, StatsRow, UnknownVerifyMode,
    VerifyMode,
};
pub use passes::verify::InvalidModule;
pub use pipeline::{Pipeline, PipelineError, PipelineItem};
pub use printer::print_module;
pub use runnable::check_runnable;
pub use schedule::Schedule;
pub use shape_inference::{infer_shape, InvalidShape, OwnedShape, ProgramShape, ShapeError};
pub use types::{
    ArrayLayout, ArrayShape, ArrayShapeError, ComparisonDirection, ComparisonType, ElementType,
    FusionKind, Layout, Shape,
};
pub use verify::{verify, Entity, VerifyError, VerifyErrors};
