//! [`read_module`]: a serialized `HloModuleProto` into the IR the HLO text parser builds.
//!
//! Invariants:
//! - Every opcode, attribute and shape the text parser supports is read into the same
//!   columns, attributes and interned shapes through the module's own constructors
//!   ([`Module::push_inst`], [`Module::set_constant`], ...); attributes as [`crate::attrs`]
//!   states, literals as [`crate::literal`] states.
//! - Computations are created in proto order and instructions in proto order within their
//!   computation, so a proto written by [`crate::write_module`] (callees first, instructions in
//!   printed order) prints back as the text it came from.
//! - Ids are scoped as XLA scopes them: computation ids in the module, instruction ids in their
//!   computation (operands and control predecessors must be in the same computation). An id
//!   that names nothing, a duplicate id, an unknown opcode or element type, a missing shape or
//!   a literal whose data does not fit its shape is a [`ProtoError::Invalid`] naming the
//!   computation and the instruction with its opcode; cycles and the other invariants of a
//!   module are the verifier's ([`ProtoError::Verify`]), which runs on every module read, as
//!   it does after parsing text. Nothing here panics or allocates from a size the input
//!   claims before checking it against the input's length.
//! - Instruction names are unique in the module: a name an earlier instruction has gets the
//!   smallest free `.N` suffix, as the text parser renames names two computations share.

use axle_ir::entity::PrimaryMap;
use hashbrown::{HashMap, HashSet};

use axle_ir::{
    CompId, ConstValue, DebugTable, InstId, LayoutId, Module, NewInst, Opcode, Schedule, Shape,
    ShapeId,
};
use pjrt_sys::protos::xla::{HloInstructionProto, HloModuleProto, Kind};
use prost::Message;

use crate::attrs::{self, ReadCx};
use crate::error::ProtoError;
use crate::literal::read_literal;
use crate::shape::read_shape;
use crate::wire;
use crate::{DEBUG_PREFIX, HEADER_PREFIX, NO_ENTRY_LAYOUT};

/// `HloModuleProto.computations`.
const COMPUTATIONS: u32 = 3;
/// `HloComputationProto.instructions`.
const INSTRUCTIONS: u32 = 2;
/// `HloInstructionProto.literal`.
const LITERAL: u32 = 8;
/// `HloModuleProto.stack_frame_index`.
const STACK_FRAME_INDEX: u32 = 17;

/// Reads a serialized `HloModuleProto` (what XLA writes with `--xla_dump_hlo_as_proto` and
/// what PJRT clients send as format `"hlo"`) into a verified module.
pub fn read_module(bytes: &[u8]) -> Result<Module, ProtoError> {
    let proto = HloModuleProto::decode(bytes)?;
    // The raw literal of every instruction, for the fields prost's types drop.
    let mut raw_literals: Vec<Vec<Option<&[u8]>>> = Vec::new();
    for comp in wire::repeated_bytes(bytes, COMPUTATIONS)? {
        raw_literals.push(
            wire::repeated_bytes(comp, INSTRUCTIONS)?
                .into_iter()
                .map(|i| wire::last_bytes(i, LITERAL))
                .collect::<Result<_, _>>()?,
        );
    }
    let mut m = build(&proto, &raw_literals)?;
    if m.debug_tables.is_empty() {
        if let Some(index) = wire::last_bytes(bytes, STACK_FRAME_INDEX)? {
            m.debug_tables = debug_tables(index)?;
        }
    }
    axle_ir::verify(&m).map_err(ProtoError::Verify)?;
    Ok(m)
}

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-' | b'$'))
}

fn invalid(msg: String) -> ProtoError {
    ProtoError::Invalid(msg)
}

/// `instruction 'NAME' (id N, OPCODE) of computation 'C'`, for errors.
fn describe(p: &HloInstructionProto, comp: &str) -> String {
    format!(
        "instruction '{}' (id {}, opcode '{}') of computation '{comp}'",
        p.name, p.id, p.opcode
    )
}

fn build(
    proto: &HloModuleProto,
    raw_literals: &[Vec<Option<&[u8]>>],
) -> Result<Module, ProtoError> {
    if !is_name(&proto.name) {
        return Err(invalid(format!(
            "module name '{}' is not an HLO name",
            proto.name
        )));
    }
    let mut m = Module::new(&proto.name);
    let mut comp_of: HashMap<i64, CompId> = HashMap::new();
    for cp in &proto.computations {
        if !is_name(&cp.name) {
            return Err(invalid(format!(
                "computation name '{}' is not an HLO name",
                cp.name
            )));
        }
        let c = m.add_computation(&cp.name);
        if comp_of.insert(cp.id, c).is_some() {
            return Err(invalid(format!(
                "computation '{}' has id {}, which an earlier computation has",
                cp.name, cp.id
            )));
        }
    }
    let entry = comp_of
        .get(&proto.entry_computation_id)
        .copied()
        .or_else(|| {
            proto
                .computations
                .iter()
                .position(|c| {
                    !proto.entry_computation_name.is_empty()
                        && c.name == proto.entry_computation_name
                })
                .map(CompId::new)
        })
        .ok_or_else(|| {
            invalid(format!(
                "the entry computation (id {}, name '{}') is not in the module",
                proto.entry_computation_id, proto.entry_computation_name
            ))
        })?;
    m.set_entry(entry);

    // The instructions of each computation by proto id, issued in computation order (the
    // `k`-th computation of the proto is `CompId::new(k)`).
    let mut inst_of: PrimaryMap<CompId, HashMap<i64, InstId>> =
        PrimaryMap::with_capacity(proto.computations.len());
    let mut names: HashSet<String> = HashSet::new();
    for (ci, cp) in proto.computations.iter().enumerate() {
        let c = CompId::new(ci);
        // Shapes and opcodes first: a `compare`'s or `conditional`'s attributes depend on the
        // shape of an operand that may come later in the proto.
        let mut index_of: HashMap<i64, usize> = HashMap::with_capacity(cp.instructions.len());
        let mut heads: Vec<(Opcode, ShapeId, LayoutId)> = Vec::with_capacity(cp.instructions.len());
        for (k, ip) in cp.instructions.iter().enumerate() {
            let what = || describe(ip, &cp.name);
            if index_of.insert(ip.id, k).is_some() {
                return Err(invalid(format!(
                    "{}: another instruction has the same id",
                    what()
                )));
            }
            let op = Opcode::from_name(&ip.opcode)
                .ok_or_else(|| invalid(format!("{}: unknown opcode '{}'", what(), ip.opcode)))?;
            let shape = ip
                .shape
                .as_ref()
                .ok_or_else(|| invalid(format!("{}: no shape", what())))?;
            let (s, l) =
                read_shape(&mut m, shape).map_err(|e| invalid(format!("{}: {e}", what())))?;
            heads.push((op, s, l));
        }
        let mut ids: Vec<InstId> = Vec::with_capacity(cp.instructions.len());
        for (k, ip) in cp.instructions.iter().enumerate() {
            let what = || describe(ip, &cp.name);
            let (op, s, l) = heads[k];
            let called = ip
                .called_computation_ids
                .iter()
                .map(|id| {
                    comp_of.get(id).copied().ok_or_else(|| {
                        invalid(format!(
                            "{}: calls computation id {id}, which is not in the module",
                            what()
                        ))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            let operand0 = ip
                .operand_ids
                .first()
                .and_then(|id| index_of.get(id))
                .and_then(|&j| match m.shape_of(heads[j].1) {
                    Shape::Array(a) => Some((a.ty, a.rank() == 0)),
                    _ => None,
                });
            let cx = ReadCx {
                called: &called,
                control: &[],
                operand0,
            };
            let attrs =
                attrs::from_proto(ip, op, &cx).map_err(|e| invalid(format!("{}: {e}", what())))?;
            if !ip.name.is_empty() && !is_name(&ip.name) {
                return Err(invalid(format!("{}: the name is not an HLO name", what())));
            }
            let name = unique_name(&mut names, &ip.name);
            let id = m.push_inst(
                c,
                NewInst {
                    opcode: op,
                    shape: s,
                    layout: l,
                    operands: vec![InstId::NONE; ip.operand_ids.len()],
                    attrs,
                    name: Some(name),
                },
            );
            if op == Opcode::Constant {
                let raw = raw_literals
                    .get(ci)
                    .and_then(|r| r.get(k))
                    .copied()
                    .flatten();
                let value = match raw {
                    Some(raw) => ConstValue::Literal(
                        read_literal(raw).map_err(|e| invalid(format!("{}: {e}", what())))?,
                    ),
                    None => ConstValue::Elided,
                };
                m.set_constant(id, value);
            }
            ids.push(id);
        }
        // Operands and control predecessors, now that every instruction has its id.
        let map = |ip: &HloInstructionProto, id: i64, role: &str| {
            index_of.get(&id).map(|&j| ids[j]).ok_or_else(|| {
                invalid(format!(
                    "{}: {role} id {id} is no instruction of the computation",
                    describe(ip, &cp.name)
                ))
            })
        };
        for (k, ip) in cp.instructions.iter().enumerate() {
            let ops = ip
                .operand_ids
                .iter()
                .map(|&o| map(ip, o, "operand"))
                .collect::<Result<Vec<_>, _>>()?;
            m.set_operands(ids[k], &ops);
            if !ip.control_predecessor_ids.is_empty() {
                let control = ip
                    .control_predecessor_ids
                    .iter()
                    .map(|&o| map(ip, o, "control predecessor"))
                    .collect::<Result<Vec<_>, _>>()?;
                let mut attrs = m.attrs(ids[k]).to_vec();
                attrs.push((
                    axle_ir::AttrKey::ControlPredecessors,
                    axle_ir::AttrValue::Insts(control.into()),
                ));
                m.set_attrs(ids[k], attrs);
            }
        }
        let root = index_of.get(&cp.root_id).map(|&j| ids[j]).ok_or_else(|| {
            invalid(format!(
                "computation '{}': root id {} is no instruction of it",
                cp.name, cp.root_id
            ))
        })?;
        m.set_root(c, root);
        let issued = inst_of.push(
            ids.iter()
                .zip(&cp.instructions)
                .map(|(&i, ip)| (ip.id, i))
                .collect(),
        );
        debug_assert_eq!(issued, c);
    }
    read_header(proto, &mut m)?;
    if let Some(s) = &proto.schedule {
        if !s.sequences.is_empty() {
            let mut sched = Schedule::new();
            let mut keys: Vec<&i64> = s.sequences.keys().collect();
            keys.sort();
            for cid in keys {
                let c = *comp_of.get(cid).ok_or_else(|| {
                    invalid(format!(
                        "the schedule names computation id {cid}, which is not in the module"
                    ))
                })?;
                let seq = s.sequences[cid]
                    .instruction_ids
                    .iter()
                    .map(|id| {
                        inst_of[c].get(id).copied().ok_or_else(|| {
                            invalid(format!(
                                "the schedule of computation '{}' names instruction id {id}, which is not in it",
                                m.comp_name(c)
                            ))
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                sched.set_sequence(c, seq);
            }
            // XLA schedules no fused computation; the text parser's schedule of a scheduled
            // module is every computation's text order, so these take their proto order.
            for ((c, ids), cp) in inst_of.iter().zip(&proto.computations) {
                if sched.sequence(c).is_none() {
                    let order = cp.instructions.iter().map(|ip| ids[&ip.id]).collect();
                    sched.set_sequence(c, order);
                }
            }
            m.set_schedule(sched);
        }
    }
    Ok(m)
}

/// A name for an instruction that no instruction before it has: `name` itself, else
/// `name.N` with the smallest free `N >= 1` (an empty name stays empty: the printer names it).
fn unique_name(taken: &mut HashSet<String>, name: &str) -> String {
    if name.is_empty() {
        return String::new();
    }
    if taken.insert(name.to_string()) {
        return name.to_string();
    }
    let mut k = 1u64;
    loop {
        let cand = format!("{name}.{k}");
        if taken.insert(cand.clone()) {
            return cand;
        }
        k += 1;
    }
}

/// The header: `entry_computation_layout` from the host program shape, the other header
/// attributes from the module's frontend attributes this crate writes (or, in a proto from
/// elsewhere, the module's own frontend attributes).
fn read_header(proto: &HloModuleProto, m: &mut Module) -> Result<(), ProtoError> {
    let fa = proto.frontend_attributes.as_ref().map(|f| &f.map);
    let ours = |k: &str| fa.and_then(|f| f.get(k));
    if ours(NO_ENTRY_LAYOUT).is_none() {
        if let Some(ps) = &proto.host_program_shape {
            let mut params = Vec::with_capacity(ps.parameters.len());
            for p in &ps.parameters {
                params.push(
                    read_shape(m, p)
                        .map_err(|e| invalid(format!("entry computation layout: {e}")))?,
                );
            }
            let result = ps
                .result
                .as_ref()
                .ok_or_else(|| invalid("the host program shape has no result".into()))?;
            let result = read_shape(m, result)
                .map_err(|e| invalid(format!("entry computation layout: {e}")))?;
            m.entry_layout = Some((params, result));
        }
    }
    let Some(fa) = fa else {
        foreign_aliases(proto, m);
        return Ok(());
    };
    let mut header: Vec<(usize, String, String)> = Vec::new();
    for (k, v) in fa {
        if let Some(n) = k.strip_prefix(HEADER_PREFIX) {
            let n: usize = n
                .parse()
                .map_err(|_| invalid(format!("module frontend attribute '{k}' is malformed")))?;
            let (key, value) = v
                .split_once('=')
                .ok_or_else(|| invalid(format!("module frontend attribute '{k}' is malformed")))?;
            header.push((n, key.to_string(), value.to_string()));
        }
    }
    if header.is_empty() {
        foreign_aliases(proto, m);
        let theirs = fa.iter().filter(|(k, _)| !k.starts_with("axle."));
        if let Some(t) = crate::verbatim::render_frontend_attributes(theirs) {
            m.header_attrs.push(("frontend_attributes".into(), t));
        }
    }
    header.sort();
    m.header_attrs
        .extend(header.into_iter().map(|(_, k, v)| (k, v)));
    let mut tables: Vec<(usize, &String)> = Vec::new();
    for (k, v) in fa {
        if let Some(n) = k.strip_prefix(DEBUG_PREFIX) {
            let n: usize = n
                .parse()
                .map_err(|_| invalid(format!("module frontend attribute '{k}' is malformed")))?;
            tables.push((n, v));
        }
    }
    tables.sort();
    for (_, t) in tables {
        let mut lines = t.split('\n');
        let title = lines.next().unwrap_or_default().into();
        m.debug_tables.push(DebugTable {
            title,
            lines: lines.map(Into::into).collect(),
        });
    }
    Ok(())
}

/// The proto's `input_output_alias` (what a client that donates arguments sends) as the header
/// attribute the text parser reads, `{ {out}: (param, {index}, kind), ... }`, for a proto this
/// crate did not write (ours carry every header attribute as a frontend attribute).
fn foreign_aliases(proto: &HloModuleProto, m: &mut Module) {
    let Some(alias) = &proto.input_output_alias else {
        return;
    };
    if alias.entries.is_empty() {
        return;
    }
    let index = |v: &[i64]| {
        v.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let entries: Vec<String> = alias
        .entries
        .iter()
        .map(|e| {
            // An undefined kind prints as XLA prints it, `may-alias`.
            let kind = if e.kind == Kind::MustAlias as i32 {
                "must-alias"
            } else {
                "may-alias"
            };
            format!(
                "{{{}}}: ({}, {{{}}}, {kind})",
                index(&e.output_shape_index),
                e.parameter_number,
                index(&e.parameter_shape_index)
            )
        })
        .collect();
    m.header_attrs.push((
        "input_output_alias".into(),
        format!("{{ {} }}", entries.join(", ")),
    ));
}

/// The debug tables XLA prints for a module's `StackFrameIndexProto` (read from its raw bytes:
/// the vendored proto predates `end_line` and `end_column`): `FileNames`, `FunctionNames`,
/// `FileLocations` and `StackFrames`, each when not empty, numbered from 1 as XLA prints them
/// (a frame's parent printed one above its proto value, as XLA does).
fn debug_tables(index: &[u8]) -> Result<Vec<DebugTable>, ProtoError> {
    let strings = |tag: u32| -> Result<Vec<Box<str>>, ProtoError> {
        wire::repeated_bytes(index, tag)?
            .into_iter()
            .enumerate()
            .map(|(k, b)| {
                let s = std::str::from_utf8(b)
                    .map_err(|_| invalid("a stack frame index string is not UTF-8".into()))?;
                Ok(format!("{} \"{}\"", k + 1, crate::verbatim::c_escape(s)).into())
            })
            .collect()
    };
    let records = |tag: u32, keys: &[(&str, u32, i64)]| -> Result<Vec<Box<str>>, ProtoError> {
        let mut out = Vec::new();
        for (k, b) in wire::repeated_bytes(index, tag)?.into_iter().enumerate() {
            let mut values: HashMap<u32, i64> = HashMap::new();
            for f in wire::fields(b) {
                if let (t, wire::Value::Varint(v)) = f? {
                    values.insert(t, v as i64);
                }
            }
            let items: Vec<String> = keys
                .iter()
                .map(|&(name, t, add)| {
                    format!("{name}={}", values.get(&t).copied().unwrap_or(0) + add)
                })
                .collect();
            out.push(format!("{} {{{}}}", k + 1, items.join(" ")).into());
        }
        Ok(out)
    };
    let tables = [
        ("FileNames", strings(1)?),
        ("FunctionNames", strings(2)?),
        (
            "FileLocations",
            records(
                3,
                &[
                    ("file_name_id", 1, 0),
                    ("function_name_id", 2, 0),
                    ("line", 3, 0),
                    ("end_line", 5, 0),
                    ("column", 4, 0),
                    ("end_column", 6, 0),
                ],
            )?,
        ),
        (
            "StackFrames",
            records(4, &[("file_location_id", 1, 0), ("parent_frame_id", 2, 1)])?,
        ),
    ];
    Ok(tables
        .into_iter()
        .filter(|(_, lines)| !lines.is_empty())
        .map(|(title, lines)| DebugTable {
            title: title.into(),
            lines,
        })
        .collect())
}
