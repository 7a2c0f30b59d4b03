//! Hostile bytes: truncated and random bytes, dangling ids, cycles, missing shapes, unknown
//! opcodes, literals of the wrong size. Each must be a `ProtoError` of the expected kind whose
//! message names what is wrong, never a panic.

use axle_hlo_proto::{read_module, write_module, ProtoError};
use axle_ir::parse_module;
use pjrt_sys::protos::xla::{HloModuleProto, LiteralProto};
use prost::Message;

const TEXT: &str = "HloModule m, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY e {
  p = f32[4]{0} parameter(0)
  c = f32[4]{0} constant({1, 2, 3, 4})
  x = f32[4]{0} add(p, c)
  z = f32[] constant(0)
  r = f32[] reduce(x, z), dimensions={0}, to_apply=add
  ROOT y = f32[4]{0} broadcast(r), dimensions={}
}
";

fn good() -> Vec<u8> {
    write_module(&parse_module(TEXT).unwrap()).unwrap()
}

fn proto() -> HloModuleProto {
    HloModuleProto::decode(&good()[..]).unwrap()
}

/// The entry computation's instruction named `name`.
fn inst<'p>(
    p: &'p mut HloModuleProto,
    name: &str,
) -> &'p mut pjrt_sys::protos::xla::HloInstructionProto {
    p.computations
        .iter_mut()
        .flat_map(|c| c.instructions.iter_mut())
        .find(|i| i.name == name)
        .unwrap()
}

fn read_err(p: &HloModuleProto) -> ProtoError {
    match read_module(&p.encode_to_vec()) {
        Err(e) => e,
        Ok(_) => panic!("the hostile proto was read"),
    }
}

fn assert_invalid(e: ProtoError, needles: &[&str]) {
    let msg = e.to_string();
    assert!(matches!(e, ProtoError::Invalid(_)), "{msg}");
    for n in needles {
        assert!(msg.contains(n), "'{msg}' does not mention '{n}'");
    }
}

#[test]
fn the_good_module_reads() {
    read_module(&good()).unwrap();
}

#[test]
fn every_truncation_is_an_error() {
    let bytes = good();
    for n in 0..bytes.len() {
        // A cut at a field boundary can leave a valid but different message, which must then
        // fail for a structural reason (no entry, no root, ...); none may panic or pass.
        assert!(
            read_module(&bytes[..n]).is_err(),
            "{n} of {} bytes read",
            bytes.len()
        );
    }
}

#[test]
fn random_bytes_are_an_error() {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for len in [1usize, 7, 64, 1000, 20000] {
        for _ in 0..20 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect();
            assert!(read_module(&bytes).is_err());
        }
    }
}

#[test]
fn flipped_bytes_never_panic() {
    let bytes = good();
    for k in 0..bytes.len() {
        for bit in [0x01u8, 0x80] {
            let mut b = bytes.clone();
            b[k] ^= bit;
            let _ = read_module(&b);
        }
    }
}

#[test]
fn an_operand_id_that_does_not_exist() {
    let mut p = proto();
    inst(&mut p, "x").operand_ids[1] = 999;
    assert_invalid(read_err(&p), &["'x'", "'add'", "operand id 999"]);
}

#[test]
fn an_operand_in_another_computation() {
    let mut p = proto();
    let a = inst(&mut p, "a").id;
    inst(&mut p, "x").operand_ids[0] = a;
    assert_invalid(read_err(&p), &["'x'", &format!("operand id {a}")]);
}

#[test]
fn a_computation_cycle() {
    // `add` calls itself through a `call` of itself.
    let mut p = proto();
    let add_id = p.computations.iter().find(|c| c.name == "add").unwrap().id;
    let s = inst(&mut p, "s");
    s.opcode = "call".into();
    s.called_computation_ids = vec![add_id];
    let e = read_err(&p);
    assert!(matches!(e, ProtoError::Verify(_)), "{e}");
    assert!(e.to_string().contains("calls itself"), "{e}");
}

#[test]
fn an_instruction_cycle() {
    let mut p = proto();
    let y = inst(&mut p, "y").id;
    inst(&mut p, "x").operand_ids[0] = y;
    let e = read_err(&p);
    assert!(matches!(e, ProtoError::Verify(_)), "{e}");
}

#[test]
fn a_called_computation_that_does_not_exist() {
    let mut p = proto();
    inst(&mut p, "r").called_computation_ids = vec![4242];
    assert_invalid(read_err(&p), &["'r'", "4242"]);
}

#[test]
fn an_unknown_opcode() {
    let mut p = proto();
    inst(&mut p, "x").opcode = "frobnicate".into();
    assert_invalid(read_err(&p), &["'x'", "unknown opcode 'frobnicate'"]);
}

#[test]
fn a_missing_shape() {
    let mut p = proto();
    inst(&mut p, "x").shape = None;
    assert_invalid(read_err(&p), &["'x'", "no shape"]);
}

#[test]
fn an_unknown_element_type() {
    let mut p = proto();
    inst(&mut p, "x").shape.as_mut().unwrap().element_type = 77;
    assert_invalid(read_err(&p), &["'x'", "element type 77"]);
}

#[test]
fn a_huge_shape() {
    let mut p = proto();
    inst(&mut p, "x").shape.as_mut().unwrap().dimensions = vec![i64::MAX, i64::MAX];
    assert_invalid(read_err(&p), &["'x'"]);
}

#[test]
fn a_literal_of_the_wrong_size() {
    let mut p = proto();
    inst(&mut p, "c").literal.as_mut().unwrap().f32s = vec![1.0, 2.0];
    assert_invalid(read_err(&p), &["'c'", "constant", "2 elements"]);
}

#[test]
fn a_literal_claiming_a_huge_shape() {
    let mut p = proto();
    let lit = inst(&mut p, "c").literal.as_mut().unwrap();
    lit.shape.as_mut().unwrap().dimensions = vec![1 << 40];
    assert_invalid(read_err(&p), &["'c'"]);
}

#[test]
fn deeply_nested_tuple_literals() {
    let mut lit = LiteralProto::default();
    for _ in 0..300 {
        lit = LiteralProto {
            shape: Some(pjrt_sys::protos::xla::ShapeProto {
                element_type: 13,
                tuple_shapes: vec![lit.shape.clone().unwrap_or_default()],
                ..Default::default()
            }),
            tuple_literals: vec![lit],
            ..Default::default()
        };
    }
    let mut p = proto();
    inst(&mut p, "c").literal = Some(lit);
    // prost's own recursion limit or the reader's tuple depth: an error either way.
    assert!(read_module(&p.encode_to_vec()).is_err());
}

#[test]
fn a_missing_root_and_entry() {
    let mut p = proto();
    p.computations[0].root_id = 12345;
    assert_invalid(read_err(&p), &["root id 12345"]);
    let mut p = proto();
    p.entry_computation_id = 777;
    p.entry_computation_name.clear();
    assert_invalid(read_err(&p), &["entry computation"]);
}

#[test]
fn duplicate_ids() {
    let mut p = proto();
    let c = inst(&mut p, "c").id;
    inst(&mut p, "x").id = c;
    assert_invalid(read_err(&p), &["same id"]);
}

#[test]
fn a_name_that_is_not_hlo() {
    let mut p = proto();
    inst(&mut p, "x").name = "x y".into();
    assert_invalid(read_err(&p), &["'x y'", "not an HLO name"]);
}
