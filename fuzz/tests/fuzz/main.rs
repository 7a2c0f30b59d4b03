//! The fuzz crate's tests in one test binary, a module per area: the campaign runner and its
//! generator, the planted bug of the self-test, and the replay of every minimized finding in
//! `fuzz/regressions/`.
//!
//! Each test file is a module loaded through `#[path]`, so the `mod` items in it resolve in this
//! folder. One binary for all of them is one link, and their tests share one pool of test threads.
//!
//! These modules are `pub`, so a file's public items stay exported as at the root of a crate of
//! their own, and the dead-code lint judges them the same way.

#[path = "campaigns.rs"]
pub mod campaigns;
#[path = "planted.rs"]
pub mod planted;
#[path = "regressions.rs"]
pub mod regressions;
