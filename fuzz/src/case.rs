//! [`Case`]: what the generated-module targets (`pipeline`, `cpu`) check, decoded from bytes.
//!
//! A case is a [`Program`] (a recipe for a valid module), the pass picks a pipeline is made of
//! and the seed of the evaluator's inputs. Any bytes decode to a case, and shrinking a case
//! (fewer ops, smaller choice bytes, fewer passes) keeps it a case, so minimized failures are
//! valid modules.

use arbitrary::Unstructured;
use axle_ir::gen::Program;
use quickcheck::Arbitrary;

/// The most passes a pipeline has.
pub const MAX_PASSES: usize = 8;

/// A generated module, a pipeline and an input seed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    /// The module's recipe.
    pub program: Program,
    /// Passes, each an index into the registry's names (taken modulo their number).
    pub picks: Vec<u8>,
    /// Whether the passes run in a `fixpoint(max=4)` group.
    pub fixpoint: bool,
    /// Seed of the evaluator's inputs.
    pub seed: u64,
}

impl Case {
    /// Decodes a case: input seed, passes, then the program from the rest.
    pub fn from_bytes(data: &[u8]) -> Case {
        let mut u = Unstructured::new(data);
        let seed = u.arbitrary::<u64>().unwrap_or(0);
        let n = u.int_in_range(0..=MAX_PASSES as u8).unwrap_or(0) as usize;
        let fixpoint = n > 0 && seed.is_multiple_of(4);
        let picks = (0..n).map(|_| u.arbitrary::<u8>().unwrap_or(0)).collect();
        Case {
            program: Program::from_bytes(u.take_rest()),
            picks,
            fixpoint,
            seed,
        }
    }

    /// The pipeline text: the picked passes of `names` in order (`dce` when none is picked).
    pub fn pipeline(&self, names: &[&str]) -> String {
        let steps: Vec<&str> = self
            .picks
            .iter()
            .take(MAX_PASSES)
            .map(|&p| names[p as usize % names.len()])
            .collect();
        match (steps.is_empty(), self.fixpoint) {
            (true, _) => "dce".to_string(),
            (false, true) => format!("fixpoint(max=4)[{}]", steps.join(",")),
            (false, false) => steps.join(","),
        }
    }

    /// Smaller cases: a smaller program, then fewer or smaller picks, then no fixpoint group.
    pub fn shrink(&self) -> impl Iterator<Item = Case> {
        let (a, b) = (self.clone(), self.clone());
        let c = self.clone();
        self.program
            .shrink()
            .map(move |program| Case {
                program,
                ..a.clone()
            })
            .chain(
                self.picks
                    .shrink()
                    .map(move |picks| Case { picks, ..b.clone() }),
            )
            .chain(self.fixpoint.then_some(Case {
                fixpoint: false,
                ..c
            }))
    }
}
