//! [`write_module`]: the IR as a serialized `HloModuleProto`, shaped like XLA's own.
//!
//! Invariants:
//! - [`crate::read_module`] of the output prints (with the IR's HLO text printer) exactly as
//!   the input module prints: computations are written callees first in the printer's order,
//!   instructions in the printer's order under the printer's names, and every attribute is
//!   checked to read back as it is ([`crate::attrs`]); a module that would not is a
//!   [`ProtoError::Unrepresentable`] naming the instruction, never a silently different proto.
//! - The proto looks like XLA's: opcode strings as XLA spells them, shapes with the IR's
//!   layouts, literals with layouts, ids unique in the module (computations and instructions
//!   numbered from 1 in write order), `entry_computation_id`/`entry_computation_name`,
//!   `host_program_shape` and each computation's `program_shape`, a `comparison_type` on every
//!   `compare`, group counts on every `convolution`, and the schedule of a scheduled module.
//! - What XLA's proto has no field for travels in frontend attributes under `axle.`: header
//!   attributes (`axle.header.N`), debug tables (`axle.debug.N`), the absence of an entry
//!   computation layout (`axle.no_entry_layout`) and instruction attributes kept as text
//!   (`axle.attr.KEY`).
//! - The output is deterministic: map fields are written in key order.

use hashbrown::HashMap;

use axle_ir::printer::{computation_order, topo_order_with, InstNames};
use axle_ir::traversal::Marks;
use axle_ir::{CompId, ConstValue, InstId, Module, Opcode, Shape};
use pjrt_sys::protos::xla::{
    hlo_schedule_proto::InstructionSequence, HloComputationProto, HloInstructionProto,
    HloModuleProto, ProgramShapeProto,
};
use prost::Message;

use crate::attrs::{self, ReadCx};
use crate::error::ProtoError;
use crate::literal::write_literal;
use crate::shape::{write_shape, write_shape_with_layout};
use crate::wire;
use crate::{DEBUG_PREFIX, HEADER_PREFIX, NO_ENTRY_LAYOUT};

/// Writes `m` as a serialized `HloModuleProto` (what XLA reads with `HloModule::CreateFromProto`
/// and PJRT takes as format `"hlo"`).
pub fn write_module(m: &Module) -> Result<Vec<u8>, ProtoError> {
    let names = InstNames::new(m);
    let order = computation_order(m);
    let comp_id: HashMap<CompId, i64> = order
        .iter()
        .enumerate()
        .map(|(k, &c)| (c, k as i64 + 1))
        .collect();
    let comp_of: HashMap<i64, CompId> = comp_id.iter().map(|(&c, &i)| (i, c)).collect();
    // Instructions in printed order, numbered across the module.
    let by_comp = m.insts_by_comp();
    let schedule = m.schedule();
    let mut marks = Marks::with_capacity(m.inst_capacity());
    let mut seqs: Vec<(CompId, Vec<InstId>)> = Vec::with_capacity(order.len());
    let mut inst_id: HashMap<InstId, i64> = HashMap::new();
    let mut next = 1i64;
    for &c in &order {
        let insts = match schedule.and_then(|s| s.sequence(c)) {
            Some(seq) if seq.len() == by_comp[c].len() => seq,
            _ => &by_comp[c][..],
        };
        let seq = topo_order_with(m, insts, &mut marks);
        for &i in &seq {
            inst_id.insert(i, next);
            next += 1;
        }
        seqs.push((c, seq));
    }
    let inst_of: HashMap<i64, InstId> = inst_id.iter().map(|(&i, &n)| (n, i)).collect();
    let comp_num = |c: CompId| comp_id.get(&c).copied().unwrap_or(-1);
    let inst_num = |i: InstId| inst_id.get(&i).copied().unwrap_or(-1);

    let entry = m.entry();
    let unrep = |e: String| ProtoError::Unrepresentable(e);
    let mut computations: Vec<u8> = Vec::new();
    for (c, seq) in &seqs {
        let mut comp = HloComputationProto {
            name: m.comp_name(*c).to_string(),
            id: comp_num(*c),
            root_id: inst_num(m.root(*c)),
            program_shape: Some(program_shape(m, *c).map_err(unrep)?),
            ..Default::default()
        };
        comp.is_fusion_computation = false;
        let mut buf = comp.encode_to_vec();
        for &i in seq {
            let inst = write_inst(m, i, &names, &comp_num, &inst_num, &comp_of, &inst_of)?;
            wire::put_bytes(&mut buf, 2, &inst);
        }
        wire::put_bytes(&mut computations, 3, &buf);
    }

    let host = match &m.entry_layout {
        Some((params, result)) => ProgramShapeProto {
            parameters: params
                .iter()
                .map(|&(s, l)| write_shape(m, s, l))
                .collect::<Result<_, _>>()
                .map_err(unrep)?,
            result: Some(write_shape(m, result.0, result.1).map_err(unrep)?),
            // XLA's readers want one name per parameter (the entry's parameters, by number).
            parameter_names: if entry.is_none() || m.params(entry).len() != params.len() {
                Vec::new()
            } else {
                m.params(entry)
                    .iter()
                    .map(|&p| m.name(p).to_string())
                    .collect()
            },
        },
        None if !entry.is_none() => program_shape(m, entry).map_err(unrep)?,
        None => ProgramShapeProto::default(),
    };
    let module = HloModuleProto {
        name: m.name.clone(),
        entry_computation_name: if entry.is_none() {
            String::new()
        } else {
            m.comp_name(entry).to_string()
        },
        entry_computation_id: comp_num(entry),
        host_program_shape: Some(host),
        ..Default::default()
    };
    let mut out = module.encode_to_vec();
    out.extend_from_slice(&computations);
    if schedule.is_some() {
        let mut sched = Vec::new();
        let mut sorted: Vec<&(CompId, Vec<InstId>)> = seqs.iter().collect();
        sorted.sort_by_key(|(c, _)| comp_num(*c));
        for (c, seq) in sorted {
            let s = InstructionSequence {
                instruction_ids: seq.iter().map(|&i| inst_num(i)).collect(),
            };
            wire::put_i64_message_entry(&mut sched, 1, comp_num(*c), &s.encode_to_vec());
        }
        wire::put_bytes(&mut out, 7, &sched);
    }
    let mut fa: Vec<(String, String)> = Vec::new();
    for (k, (key, value)) in m.header_attrs.iter().enumerate() {
        fa.push((format!("{HEADER_PREFIX}{k}"), format!("{key}={value}")));
        if key == "frontend_attributes" {
            if let Some(map) = crate::verbatim::parse_frontend_attributes(value) {
                fa.extend(map.into_iter().filter(|(k, _)| !k.starts_with("axle.")));
            }
        }
    }
    for (k, t) in m.debug_tables.iter().enumerate() {
        let mut text = t.title.to_string();
        for l in &t.lines {
            text.push('\n');
            text.push_str(l);
        }
        fa.push((format!("{DEBUG_PREFIX}{k}"), text));
    }
    if m.entry_layout.is_none() {
        fa.push((NO_ENTRY_LAYOUT.into(), "true".into()));
    }
    put_frontend_attributes(&mut out, 19, fa);
    Ok(out)
}

/// A computation's program shape: its parameters by number and its root, with layouts.
fn program_shape(m: &Module, c: CompId) -> Result<ProgramShapeProto, String> {
    let mut ps = ProgramShapeProto::default();
    for &p in m.params(c) {
        if p.is_none() {
            continue;
        }
        ps.parameters
            .push(write_shape_with_layout(m, m.shape_id(p), m.layout_id(p))?);
        ps.parameter_names.push(m.name(p).to_string());
    }
    let root = m.root(c);
    if !root.is_none() {
        ps.result = Some(write_shape_with_layout(
            m,
            m.shape_id(root),
            m.layout_id(root),
        )?);
    }
    Ok(ps)
}

/// Appends a `FrontendAttributes` field `tag` holding `entries` in key order (nothing when
/// empty).
fn put_frontend_attributes(out: &mut Vec<u8>, tag: u32, mut entries: Vec<(String, String)>) {
    if entries.is_empty() {
        return;
    }
    entries.sort();
    let mut buf = Vec::new();
    wire::put_string_map(
        &mut buf,
        1,
        entries.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    );
    wire::put_bytes(out, tag, &buf);
}

#[allow(clippy::too_many_arguments)]
fn write_inst(
    m: &Module,
    i: InstId,
    names: &InstNames,
    comp_num: &dyn Fn(CompId) -> i64,
    inst_num: &dyn Fn(InstId) -> i64,
    comp_of: &HashMap<i64, CompId>,
    inst_of: &HashMap<i64, InstId>,
) -> Result<Vec<u8>, ProtoError> {
    let op = m.opcode(i);
    let name = names.get(m, i);
    let fail = |e: String| {
        ProtoError::Unrepresentable(format!("instruction '{name}' ({}): {e}", op.name()))
    };
    let mut p = HloInstructionProto {
        name: name.to_string(),
        opcode: op.name().to_string(),
        shape: Some(write_shape(m, m.shape_id(i), m.layout_id(i)).map_err(fail)?),
        id: inst_num(i),
        operand_ids: m.operands(i).iter().map(|&o| inst_num(o)).collect(),
        ..Default::default()
    };
    attrs::to_proto(op, m.attrs(i), &mut p, comp_num, inst_num).map_err(fail)?;
    let operand0 = m
        .operands(i)
        .first()
        .filter(|o| !o.is_none() && o.index() < m.inst_capacity())
        .and_then(|&o| match m.shape(o) {
            Shape::Array(a) => Some((a.ty, a.rank() == 0)),
            _ => None,
        });
    if op == Opcode::Compare && p.comparison_type.is_empty() {
        if let Some((ty, _)) = operand0 {
            p.comparison_type = m.comparison_type(i, ty).name().to_string();
        }
    }
    // What reads back must be what is here.
    let called: Vec<CompId> = p
        .called_computation_ids
        .iter()
        .map(|n| comp_of.get(n).copied().unwrap_or(CompId::NONE))
        .collect();
    let control: Vec<InstId> = p
        .control_predecessor_ids
        .iter()
        .map(|n| inst_of.get(n).copied().unwrap_or(InstId::NONE))
        .collect();
    let cx = ReadCx {
        called: &called,
        control: &control,
        operand0,
    };
    let back = attrs::from_proto(&p, op, &cx).map_err(fail)?;
    if back[..] != *m.attrs(i) {
        return Err(fail(format!(
            "its attributes would read back as {back:?}, not {:?}",
            m.attrs(i)
        )));
    }
    let fa = p.frontend_attributes.take();
    let mut out = p.encode_to_vec();
    if op == Opcode::Constant {
        if let Some(ConstValue::Literal(l)) = m.constant(i) {
            let lit = write_literal(m, l, m.shape_id(i), m.layout_id(i))?;
            wire::put_bytes(&mut out, 8, &lit);
        }
    }
    if let Some(fa) = fa {
        put_frontend_attributes(&mut out, 68, fa.map.into_iter().collect());
    }
    Ok(out)
}
