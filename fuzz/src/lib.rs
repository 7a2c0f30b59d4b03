//! Fuzz targets over the shared generators.
//!
//! Not built yet: the targets will drive the parser, the verifier and the passes.
#![deny(missing_docs)]
