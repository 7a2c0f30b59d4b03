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
//! body counts as one trip. It is a ranking signal for pass-ordering experiments, not a
//! performance prediction.

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
    let own: Vec<Cost> = by_comp
        .par_iter()
        .map(|insts| {
            insts
                .iter()
                .map(|&i| inst_cost(m, i))
                .fold(Cost::default(), |a, b| a + b)
        })
        .collect();
    // Computations run as code of their own: call, while, conditional, fusion bodies.
    let mut total = vec![Cost::default(); m.comp_capacity()];
    for c in axle_ir::printer::computation_order(m) {
        let mut t = own[c.index()];
        for &i in &by_comp[c.index()] {
            if matches!(
                m.opcode(i),
                Opcode::Call | Opcode::While | Opcode::Conditional | Opcode::Fusion
            ) {
                for cc in m.called_comps(i) {
                    if !cc.is_none() && cc.index() < total.len() {
                        t = t + total[cc.index()];
                    }
                }
            }
        }
        total[c.index()] = t;
    }
    let e: CompId = m.entry();
    if e.is_none() || e.index() >= total.len() {
        return Cost::default();
    }
    total[e.index()]
}
