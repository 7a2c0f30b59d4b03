//! What running a module needs beyond [`crate::verify()`]: the checks every backend makes
//! before compiling or evaluating (the backend interface's `prepare_module`, the evaluator and
//! the CPU code generator call [`check_runnable`]), so every backend refuses the same modules
//! with the same message.
//!
//! A verified module may still be one no backend can run:
//! - **Unbounded dynamic dimensions** (`f32[?,4]`). XLA parses and verifies them (they come
//!   from StableHLO export) but its backends only run bounded shapes; so do ours. Every live
//!   instruction of every computation is checked. Bounded dynamic dimensions (`f32[<=8]`) run
//!   at their bound, on every backend: values hold the bound's elements and
//!   `get-dimension-size` reads the bound (an operation that would make the size smaller,
//!   `set-dimension-size`, is refused by the backends as unsupported).
//! - **Opaque entry parameters** (`opaque[]`, also inside a tuple): an opaque value is a host
//!   pointer that only a custom call can make or read, so no input can be given for one.
//!
//! Token entry parameters are fine: a token carries no data, so a run binds it without an input
//! (the host form of a token is the empty tuple literal), on every backend.

use crate::module::{InstId, Module};
use crate::opcode::Opcode;
use crate::shape_inference::OwnedShape;
use crate::verify::{Entity, VerifyError, VerifyErrors};

/// Checks that `m` (already verified) is one a backend can run: no unbounded dynamic
/// dimension in any live instruction's shape, no opaque value in an entry parameter. Returns
/// every violation, one per instruction, with source locations where the module was parsed.
pub fn check_runnable(m: &Module) -> Result<(), VerifyErrors> {
    let mut errors = Vec::new();
    let entry = m.entry();
    let mut err = |i: InstId, message: String| {
        errors.push(VerifyError {
            entity: Entity::Instruction(i),
            loc: m.src_loc(i),
            message: format!("%{}: {message}", m.name(i)),
        });
    };
    let mut unbounded: Vec<Option<bool>> = vec![None; m.num_shapes()];
    for i in m.live_ids() {
        let sid = m.shape_id(i);
        let Some(slot) = unbounded.get_mut(sid.index()) else {
            continue;
        };
        let has = *slot
            .get_or_insert_with(|| OwnedShape::from_id(m, sid).is_some_and(|s| has_unbounded(&s)));
        if has {
            let shape = crate::shape_inference::shape_to_string(m, sid);
            err(
                i,
                format!(
                    "{shape} has an unbounded dynamic dimension ('?'); no backend runs unbounded \
                     dynamic shapes (bounded ones, '<=N', run at their bound)"
                ),
            );
        }
        if m.opcode(i) == Opcode::Parameter && m.parent(i) == entry {
            if let Some(s) = OwnedShape::from_id(m, sid) {
                if has_opaque(&s) {
                    err(
                        i,
                        format!(
                            "entry parameter of type {s} holds an opaque value, which no input \
                             can give"
                        ),
                    );
                }
            }
        }
    }
    if errors.is_empty() {
        return Ok(());
    }
    errors.sort_by_key(|e| e.loc.map(|l| (l.line, l.col)));
    Err(VerifyErrors { errors })
}

fn has_unbounded(s: &OwnedShape) -> bool {
    match s {
        OwnedShape::Array(a) => a.is_unbounded_dynamic(),
        OwnedShape::Tuple(es) => es.iter().any(has_unbounded),
        OwnedShape::Token | OwnedShape::Opaque => false,
    }
}

fn has_opaque(s: &OwnedShape) -> bool {
    match s {
        OwnedShape::Opaque => true,
        OwnedShape::Tuple(es) => es.iter().any(has_opaque),
        _ => false,
    }
}
