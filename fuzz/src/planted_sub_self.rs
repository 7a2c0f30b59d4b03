//! `planted-sub-self`: a deliberately wrong pass, the bug the `pipeline-planted` campaign target
//! must find (CI's self-test of the pipeline campaign, `.ci/fuzz-smoke`).
//!
//! The pass rewrites every real float `subtract(x, x)` to a zero splat of the same shape, which
//! is wrong where `x` is an infinity or a NaN (`inf - inf` is NaN). Every other rule of a pass
//! holds (the module stays valid, `changed` is exact, the result does not depend on the thread
//! count), so the comparison of results is the only check of the `pipeline` target it fails.
//!
//! It is registered only in [`registry`], a copy of `axle::passes::registry()` that the
//! `pipeline-planted` target draws its pipelines from; the compiler's registry never has it.
//!
//! Counters: `folded`.

use std::sync::OnceLock;

use axle::fusion::rewrite::{apply_plan, splat_nodes, Num, Rewrite};
use axle::ir::{Changed, InstId, Module, Opcode, Pass, PassCx, PassError, PassInfo, PassRegistry};

/// The planted pass's name in [`registry`].
pub const NAME: &str = "planted-sub-self";

/// The `planted-sub-self` pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct PlantedSubSelf;

impl Pass for PlantedSubSelf {
    fn run(&mut self, m: &mut Module, cx: &mut PassCx<'_>) -> Result<Changed, PassError> {
        let plan: Vec<(InstId, Rewrite)> = m
            .live_ids()
            .into_iter()
            .filter(|&id| {
                let ops = m.operands(id);
                m.opcode(id) == Opcode::Subtract
                    && ops[0] == ops[1]
                    && m.array_shape(id)
                        .is_some_and(|a| a.ty.is_float() && !a.ty.is_complex())
            })
            .filter_map(|id| Some((id, Rewrite::Build(splat_nodes(m, id, Num::Float(0.0))?))))
            .collect();
        Ok(apply_plan(m, plan, cx, "folded"))
    }
}

/// Every pass of `axle::passes::registry()` and [`NAME`]: the registry of the
/// `pipeline-planted` target.
pub fn registry() -> &'static PassRegistry {
    static REGISTRY: OnceLock<PassRegistry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let mut reg = axle::passes::registry().clone();
        reg.register(PassInfo {
            name: NAME,
            doc: "WRONG on purpose (the fuzz campaign's self-test): float x - x to zero",
            options: &[],
            create: |_| Box::new(PlantedSubSelf),
        });
        reg
    })
}
