//! `verify`: runs the verifier as a pass; the pipeline fails if the module breaks an invariant.
//!
//! Until the full verifier (`crate::verify`) lands on this branch, [`verify_module`] checks the
//! structural invariants passes can break: an entry exists; every live computation has a live
//! root of its own; every operand and control predecessor of a live instruction is a live
//! instruction of the same computation; every called computation is live and not the entry;
//! every parameter table entry is a live parameter of its computation.
//!
//! Pre-conditions: none. Post-conditions: the module is unchanged.
//!
//! Counters: none.

use crate::module::Module;
use crate::opcode::Opcode;
use crate::pass::{Changed, Pass, PassCx, PassError};

/// The `verify` pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct VerifyPass;

impl Pass for VerifyPass {
    fn run(&mut self, m: &mut Module, _cx: &mut PassCx<'_>) -> Result<Changed, PassError> {
        verify_module(m).map_err(PassError::new)?;
        Ok(false)
    }
}

/// Checks `m`; on failure returns every violation found, one per line (at most 20).
pub fn verify_module(m: &Module) -> Result<(), String> {
    let mut errs: Vec<String> = Vec::new();
    let entry = m.entry();
    if entry.is_none() || !m.is_live_comp(entry) {
        errs.push("the module has no live entry computation".into());
    }
    for c in m.computations() {
        let r = m.root(c);
        if r.is_none() || !m.is_live(r) || m.parent(r) != c {
            errs.push(format!(
                "computation {}: the root is missing, dead or not its own",
                m.comp_name(c)
            ));
        }
        for (k, &p) in m.params(c).iter().enumerate() {
            if p.is_none()
                || !m.is_live(p)
                || m.parent(p) != c
                || m.opcode(p) != Opcode::Parameter
                || m.parameter_number(p) != Some(k as i64)
            {
                errs.push(format!(
                    "computation {}: parameter {k} is missing or dead",
                    m.comp_name(c)
                ));
            }
        }
    }
    let name = |i: crate::InstId| -> String {
        let n = m.name(i);
        if n.is_empty() {
            format!("#{} ({})", i.index(), m.opcode(i))
        } else {
            format!("%{n}")
        }
    };
    for i in m.live_ids() {
        let c = m.parent(i);
        if c.is_none() || !m.is_live_comp(c) {
            errs.push(format!("{}: belongs to no live computation", name(i)));
            continue;
        }
        for (k, &o) in m.operands(i).iter().enumerate() {
            if o.is_none() || !m.is_live(o) || m.parent(o) != c {
                errs.push(format!(
                    "{}: operand {k} is not a live instruction of {}",
                    name(i),
                    m.comp_name(c)
                ));
            }
        }
        for &o in m.control_predecessors(i) {
            if o.is_none() || !m.is_live(o) || m.parent(o) != c {
                errs.push(format!(
                    "{}: a control predecessor is not a live instruction of {}",
                    name(i),
                    m.comp_name(c)
                ));
            }
        }
        for cc in m.called_comps(i) {
            if cc.is_none() || !m.is_live_comp(cc) || cc == entry {
                errs.push(format!(
                    "{}: calls a computation that is dead or the entry",
                    name(i)
                ));
            }
        }
        if errs.len() > 20 {
            break;
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        errs.truncate(20);
        Err(errs.join("\n"))
    }
}
