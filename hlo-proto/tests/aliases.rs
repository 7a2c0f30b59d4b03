//! A donating client's `input_output_alias` (the proto field, in a proto this crate did not
//! write) is read into the header attribute the text parser makes of the same alias, so the
//! buffer assignment sees the donation whichever way the module came in.

use axle_hlo_proto::{read_module, write_module};
use axle_ir::parse_module;
use pjrt_sys::protos::xla::hlo_input_output_alias_proto::AliasEntryProto;
use pjrt_sys::protos::xla::{HloInputOutputAliasProto, HloModuleProto, Kind};
use prost::Message;

const TEXT: &str =
    "HloModule m, input_output_alias={ {1}: (0, {}, may-alias), {0}: (1, {}, must-alias) }

ENTRY e {
  p = f32[4]{0} parameter(0)
  q = f32[4]{0} parameter(1)
  a = f32[4]{0} add(p, q)
  b = f32[4]{0} multiply(p, q)
  ROOT t = (f32[4]{0}, f32[4]{0}) tuple(a, b)
}
";

/// The module's `input_output_alias` header attribute, without white space.
fn alias_attr(m: &axle_ir::Module) -> Option<String> {
    m.header_attrs
        .iter()
        .find(|(k, _)| k == "input_output_alias")
        .map(|(_, v)| v.split_whitespace().collect())
}

#[test]
fn a_foreign_proto_alias_reads_as_the_text_attribute() {
    let text = parse_module(TEXT).unwrap();
    // A proto as XLA writes it: the alias in its own field, no frontend attributes of ours.
    let mut p = HloModuleProto::decode(&write_module(&text).unwrap()[..]).unwrap();
    p.frontend_attributes = None;
    let entry = |out: i64, param: i64, kind: Kind| AliasEntryProto {
        output_shape_index: vec![out],
        parameter_number: param,
        parameter_shape_index: vec![],
        kind: kind as i32,
    };
    p.input_output_alias = Some(HloInputOutputAliasProto {
        entries: vec![entry(1, 0, Kind::MayAlias), entry(0, 1, Kind::MustAlias)],
    });
    let m = read_module(&p.encode_to_vec()).unwrap();
    assert_eq!(alias_attr(&m), alias_attr(&text));
    assert!(alias_attr(&m).is_some());
}

#[test]
fn a_proto_without_aliases_has_no_alias_attribute() {
    let mut p =
        HloModuleProto::decode(&write_module(&parse_module(TEXT).unwrap()).unwrap()[..]).unwrap();
    p.frontend_attributes = None;
    p.input_output_alias = Some(HloInputOutputAliasProto { entries: vec![] });
    assert_eq!(alias_attr(&read_module(&p.encode_to_vec()).unwrap()), None);
}
