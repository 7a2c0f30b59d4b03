//! The cost model: floating-point operations and memory traffic of a module, per instruction
//! and in total, without running it.
//!
//! Per instruction: elementwise ops count one operation per result element (transcendental ones,
//! `exp`, `log`, `tanh`, ..., also count in `transcendentals`); `dot` counts two operations per
//! result element and contracted element; `convolution` counts two per result element and kernel
//! element, divided by the output features; `reduce` and `reduce-window` count one operation per
//! input element; data movement counts none. Bytes are what an unfused execution reads and
//! writes: every array operand and the array result, once (parameters, constants, tuples and
//! `get-tuple-element`s move nothing). Called computations are counted once per call, so a loop
//! body counts as one trip; a fusion's computation adds its arithmetic but no bytes (its values
//! never reach memory; the fusion's own operands and result are its traffic). It is a ranking
//! signal for pass-ordering experiments, not a performance prediction.
//!
//! Fusion decisions weigh a [`FusionTradeoff`]: fusing a producer into its consumers saves the
//! bytes of writing its result and reading it back once per use, and costs the arithmetic of
//! every extra evaluation of it inside the fused kernel (a producer read at several indices, or
//! through a broadcast, may be computed more than once per element). A target's numbers turn
//! the two into one comparison ([`FusionTradeoff::worth_it`]).

use axle_ir::entity::{collect_map, dense_map, SecondaryMap};
use axle_ir::{AttrKey, AttrValue, CompId, InstId, Module, Opcode, Shape};
use rayon::prelude::*;

/// Estimated work of a module or an instruction.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cost {
    /// Arithmetic operations.
    pub flops: f64,
    /// Transcendental operations (a subset of `flops`).
    pub transcendentals: f64,
    /// Bytes read and written.
    pub bytes: f64,
}

impl std::ops::Add for Cost {
    type Output = Cost;
    fn add(self, o: Cost) -> Cost {
        Cost {
            flops: self.flops + o.flops,
            transcendentals: self.transcendentals + o.transcendentals,
            bytes: self.bytes + o.bytes,
        }
    }
}

fn elements(m: &Module, i: InstId) -> f64 {
    match m.shape(i) {
        Shape::Array(a) => a.num_elements().max(0) as f64,
        _ => 0.0,
    }
}

fn bytes(m: &Module, i: InstId) -> f64 {
    match m.shape(i) {
        Shape::Array(a) => a.num_elements().max(0) as f64 * a.ty.byte_size() as f64,
        _ => 0.0,
    }
}

fn is_transcendental(op: Opcode) -> bool {
    use Opcode::*;
    matches!(
        op,
        Exp | Expm1
            | Log
            | Log1p
            | Logistic
            | Tanh
            | Sin
            | Cos
            | Tan
            | Sqrt
            | Rsqrt
            | Cbrt
            | Power
            | Atan2
            | Erf
    )
}

fn ints<'m>(m: &'m Module, i: InstId, k: &AttrKey) -> &'m [i64] {
    match m.attr(i, k) {
        Some(AttrValue::Ints(v)) => v,
        _ => &[],
    }
}

/// The cost of instruction `i` by itself (called computations excluded).
pub fn inst_cost(m: &Module, i: InstId) -> Cost {
    use Opcode::*;
    let op = m.opcode(i);
    if matches!(
        op,
        Parameter | Constant | Tuple | GetTupleElement | Bitcast | AfterAll | Call | While
    ) {
        return Cost::default();
    }
    let out = elements(m, i);
    let io_bytes = bytes(m, i) + m.operands(i).iter().map(|&o| bytes(m, o)).sum::<f64>();
    let flops = if op.is_elementwise() && !matches!(op, Copy | Convert | BitcastConvert) {
        out
    } else {
        match op {
            Dot => {
                let a = m.operands(i)[0];
                let k: f64 = match m.shape(a) {
                    Shape::Array(s) => ints(m, i, &AttrKey::LhsContractingDims)
                        .iter()
                        .map(|&d| s.dims.get(d as usize).copied().unwrap_or(1) as f64)
                        .product(),
                    _ => 1.0,
                };
                2.0 * out * k
            }
            Convolution => {
                let k = m.operands(i)[1];
                let feat = match m.attr(i, &AttrKey::DimLabels) {
                    Some(AttrValue::DimLabels(d)) => match m.shape(k) {
                        Shape::Array(s) => s
                            .dims
                            .get(d.kernel_output_feature as usize)
                            .copied()
                            .unwrap_or(1)
                            .max(1) as f64,
                        _ => 1.0,
                    },
                    _ => 1.0,
                };
                2.0 * out * elements(m, k) / feat
            }
            Reduce | ReduceWindow | Scatter | SelectAndScatter | Sort => {
                m.operands(i).first().map_or(0.0, |&x| elements(m, x))
            }
            _ => 0.0,
        }
    };
    Cost {
        flops,
        transcendentals: if is_transcendental(op) { out } else { 0.0 },
        bytes: io_bytes,
    }
}

/// The cost of one execution of the entry computation: every instruction once, called
/// computations once per calling instruction (applied computations of `reduce`, `sort`, `map`
/// and the like are part of their caller's cost and not added).
pub fn module_cost(m: &Module) -> Cost {
    let by_comp = m.insts_by_comp();
    let own: SecondaryMap<CompId, Cost> = collect_map(
        by_comp
            .values()
            .as_slice()
            .par_iter()
            .map(|insts| {
                insts
                    .iter()
                    .map(|&i| inst_cost(m, i))
                    .fold(Cost::default(), |a, b| a + b)
            })
            .collect::<Vec<Cost>>(),
    );
    // Computations run as code of their own: call, while, conditional, fusion bodies.
    let mut total: SecondaryMap<CompId, Cost> = dense_map(m.comp_capacity(), Cost::default());
    for c in axle_ir::printer::computation_order(m) {
        let mut t = own[c];
        for &i in &by_comp[c] {
            if matches!(
                m.opcode(i),
                Opcode::Call | Opcode::While | Opcode::Conditional | Opcode::Fusion
            ) {
                for cc in m.called_comps(i) {
                    if !cc.is_none() && cc.index() < m.comp_capacity() {
                        let mut inner = total[cc];
                        if m.opcode(i) == Opcode::Fusion {
                            // A fused computation's values stay in registers: its traffic is
                            // the fusion's operands and result, counted on the fusion itself.
                            inner.bytes = 0.0;
                        }
                        t = t + inner;
                    }
                }
            }
        }
        total[c] = t;
    }
    let e: CompId = m.entry();
    if e.is_none() {
        return Cost::default();
    }
    total[e]
}

/// The array bytes of `i`'s result (0 for tuples, tokens and dynamic shapes).
pub fn result_bytes(m: &Module, i: InstId) -> f64 {
    bytes(m, i)
}

/// The elements of `i`'s array result (0 for tuples and tokens).
pub fn result_elements(m: &Module, i: InstId) -> f64 {
    elements(m, i)
}

/// What fusing a producer into its consumers gains and costs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FusionTradeoff {
    /// Memory traffic no longer needed: the producer's result written once and read by each
    /// use.
    pub bytes_saved: f64,
    /// Arithmetic operations computed again because the fused kernel evaluates the producer
    /// more than once per element.
    pub flops_duplicated: f64,
    /// Transcendental operations among `flops_duplicated`.
    pub transcendentals_duplicated: f64,
}

impl FusionTradeoff {
    /// The tradeoff of fusing `producer` into consumers that read it through `uses` operand
    /// slots, where the fused kernel evaluates each element of it `evaluations` times on
    /// average (1: computed once, as the unfused program does).
    pub fn of_producer(m: &Module, producer: InstId, uses: usize, evaluations: f64) -> Self {
        let c = inst_cost(m, producer);
        let extra = (evaluations - 1.0).max(0.0);
        FusionTradeoff {
            bytes_saved: bytes(m, producer) * (1.0 + uses as f64),
            flops_duplicated: c.flops * extra,
            transcendentals_duplicated: c.transcendentals * extra,
        }
    }

    /// The duplicated work in elementwise-operation units, a transcendental costing
    /// `transcendental_cost` of them.
    pub fn duplicated_work(&self, transcendental_cost: f64) -> f64 {
        self.flops_duplicated + self.transcendentals_duplicated * (transcendental_cost - 1.0)
    }

    /// Whether the bytes saved, at `byte_cost` operations per byte, pay for the duplicated work.
    pub fn worth_it(&self, byte_cost: f64, transcendental_cost: f64) -> bool {
        self.duplicated_work(transcendental_cost) <= self.bytes_saved * byte_cost
    }
}
