//! What running a module needs beyond [`crate::verify()`]: the checks every backend makes
//! before compiling or evaluating (the backend interface's `prepare_module`, the evaluator and
//! the CPU code generator call [`check_runnable`]), so every backend refuses the same modules
//! with the same message.
//!
//! A verified module may still be one no backend can run:
//! - **Unbounded dynamic dimensions** (`f32[?,4]`). XLA parses and verifies them (they come
//!   from StableHLO export) but its backends only run bounded shapes; so do ours. Every live
//!   instruction of every computation is checked. Bounded dynamic dimensions (`f32[<=8]`) are stored
//!   at their bound, on every backend: where no size is set, values hold the bound's elements
//!   and `get-dimension-size` reads the bound; sizes set at run time (`set-dimension-size`,
//!   `dynamic-reshape`) are tracked beside the padded values by the `dynamic-padder` pass
//!   (in `fusion`), which every backend runs first.
//! - **Opaque entry parameters** (`opaque[]`, also inside a tuple): an opaque value is a host
//!   pointer that only a custom call can make or read, so no input can be given for one.
//!
//! - **Loops that never end**: a `while` the entry's result depends on (through operands and
//!   called computations) whose condition's root is `constant(true)`. Every backend would run
//!   it forever. XLA removes such a loop only where nothing reads its result (its simplifier
//!   drops an unused side-effect-free `while`, or the tuple elements a loop passes through
//!   unchanged and nothing reads); a loop nothing reads is not run here either (the evaluator
//!   runs what the root depends on, the compiled backends' pipelines remove dead code), so
//!   only the loops whose result is read are refused, naming the `while`.
//!
//! Token entry parameters are fine: a token carries no data, so a run binds it without an input
//! (the host form of a token is the empty tuple literal), on every backend.

use crate::attrs::AttrKey;
use crate::entity::EntitySet;
use crate::literal::Literal;
use crate::module::{CompId, InstId, Module};
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
    for w in endless_loops(m) {
        err(
            w,
            "the while loop's condition is constant(true), so it never ends (XLA removes such \
             a loop only where nothing reads its result)"
                .to_string(),
        );
    }
    if errors.is_empty() {
        return Ok(());
    }
    errors.sort_by_key(|e| e.loc.map(|l| (l.line, l.col)));
    Err(VerifyErrors { errors })
}

/// The `while` instructions the entry's root depends on, through operands and the computations
/// the instructions it depends on call, whose condition's root is a `constant(true)`.
fn endless_loops(m: &Module) -> Vec<InstId> {
    let mut out = Vec::new();
    let entry = m.entry();
    if entry.is_none() {
        return out;
    }
    let mut seen: EntitySet<CompId> = EntitySet::with_capacity(m.comp_capacity());
    let mut stack = vec![entry];
    seen.insert(entry);
    while let Some(c) = stack.pop() {
        let root = m.root(c);
        if root.is_none() {
            continue;
        }
        // A cycle is the verifier's to report.
        let Ok(order) = crate::traversal::operand_post_order(m, root) else {
            continue;
        };
        for i in order {
            if m.opcode(i) == Opcode::While
                && m.comp_attr(i, &AttrKey::Condition)
                    .is_some_and(|cond| is_constant_true(m, m.root(cond)))
            {
                out.push(i);
            }
            for cc in m.called_comps_iter(i) {
                if seen.insert(cc) {
                    stack.push(cc);
                }
            }
        }
    }
    out
}

/// Whether `i` is a `pred[]` constant holding true.
fn is_constant_true(m: &Module, i: InstId) -> bool {
    !i.is_none()
        && m.opcode(i) == Opcode::Constant
        && matches!(m.literal(i), Some(Literal::Array(a)) if a.ty().is_pred() && a.len() == 1 && a.data[0] != 0)
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

#[cfg(test)]
mod tests {
    use super::check_runnable;
    use crate::parse_module;

    const LOOPS: &str = "HloModule m

body {
  p = (f32[2]) parameter(0)
  x = f32[2] get-tuple-element(p), index=0
  y = f32[2] add(x, x)
  ROOT t = (f32[2]) tuple(y)
}

forever {
  p = (f32[2]) parameter(0)
  ROOT c = pred[] constant(true)
}

never {
  p = (f32[2]) parameter(0)
  ROOT c = pred[] constant(false)
}

ENTRY e {
  a = f32[2] parameter(0)
  t = (f32[2]) tuple(a)
  dead = (f32[2]) while(t), condition=forever, body=body
  w = (f32[2]) while(t), condition=COND, body=body
  ROOT r = f32[2] get-tuple-element(w), index=0
}
";

    fn check(cond: &str) -> Result<(), String> {
        let m = parse_module(&LOOPS.replace("COND", cond)).map_err(|e| e.to_string())?;
        check_runnable(&m).map_err(|e| e.to_string())
    }

    /// A loop whose result is read and whose condition is `constant(true)` is refused naming
    /// it; the same loop unread (`dead`), or with a `constant(false)` condition, is not.
    #[test]
    fn endless_loop_is_refused_where_read() {
        let err = check("forever").expect_err("an endless loop ran");
        assert!(
            err.contains("%w: the while loop's condition is constant(true)"),
            "{err}"
        );
        assert!(!err.contains("%dead"), "{err}");
        check("never").expect("a loop that ends");
    }

    /// A read endless loop inside a called computation (a loop's body) is refused too.
    #[test]
    fn endless_loop_in_a_body_is_refused() {
        let outer = "outer {\n  p = (f32[2]) parameter(0)\n  \
                     ROOT w2 = (f32[2]) while(p), condition=forever, body=body\n}\n\nENTRY e {";
        let text = LOOPS.replace("COND", "never").replace("ENTRY e {", outer);
        let text = text.replace("condition=never, body=body", "condition=never, body=outer");
        let m = parse_module(&text).expect("parses");
        let err = check_runnable(&m).expect_err("ran").to_string();
        assert!(
            err.contains("%w2: the while loop's condition is constant(true)"),
            "{err}"
        );
        assert!(!err.contains("%w:"), "{err}");
    }
}
