//! Instruction names are scoped by computation in HLO text (XLA's parser accepts the same name
//! in two computations, and hand-written HLO such as XLA's own tests reuses `p0`, `x`, ...):
//! operands resolve within their computation, and later duplicates are renamed `name.N` so the
//! module's names stay unique and printing re-parses to the same module.

use axle_ir::{parse_module, print_module, verify, Opcode};

const SHARED: &str = r#"HloModule m

add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT r = f32[] add(x, y)
}

mul {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  r.1 = f32[] multiply(x, y)
  ROOT r = f32[] add(r.1, x), control-predecessors={r.1}
}

ENTRY main {
  x = f32[4] parameter(0)
  z = f32[] constant(0)
  s = f32[] reduce(x, z), dimensions={0}, to_apply=add
  ROOT r = f32[] reduce(x, z), dimensions={0}, to_apply=mul
}
"#;

#[test]
fn names_shared_across_computations_resolve_locally_and_are_renamed() {
    let m = parse_module(SHARED).unwrap_or_else(|e| panic!("{e}"));
    verify(&m).unwrap_or_else(|e| panic!("{e}"));
    // Each computation's operands are its own instructions.
    for c in m.computations() {
        for id in m.comp_insts(c) {
            for &o in m.operands(id) {
                assert_eq!(
                    m.parent(o),
                    c,
                    "operand of %{} outside its computation",
                    m.name(id)
                );
            }
        }
    }
    // The entry's root reduces with `mul` over the entry's own `x` (a parameter of f32[4]).
    let root = m.root(m.entry());
    assert_eq!(m.opcode(root), Opcode::Reduce);
    let x = m.operands(root)[0];
    assert_eq!(m.opcode(x), Opcode::Parameter);
    assert_eq!(m.parent(x), m.entry());
    // Every name is unique, the first definitions keep theirs, and `r.1` (taken in `mul`) is
    // not reused for a renamed `r`.
    let names: Vec<String> = (0..m.inst_capacity())
        .map(|i| m.name(axle_ir::InstId::new(i)).to_string())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), names.len(), "{names:?}");
    assert_eq!(&names[..3], ["x", "y", "r"]);
    assert!(names.contains(&"r.1".to_string()) && names.contains(&"r.2".to_string()));
    // Printing gives a module that parses to the same text.
    let text = print_module(&m);
    let again = parse_module(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(print_module(&again), text);
}

#[test]
fn a_duplicate_within_one_computation_is_still_an_error() {
    let text = "HloModule m\n\nENTRY main {\n  x = f32[] parameter(0)\n  x = f32[] parameter(1)\n  ROOT r = f32[] add(x, x)\n}\n";
    let e = parse_module(text).unwrap_err();
    assert_eq!((e.line, e.col), (5, 3));
    assert!(
        e.msg.contains("duplicate instruction name 'x'"),
        "{}",
        e.msg
    );
}

#[test]
fn a_control_predecessor_in_another_computation_is_an_error() {
    let text = "HloModule m\n\nc {\n  a = f32[] parameter(0)\n  ROOT b = f32[] negate(a)\n}\n\nENTRY main {\n  p = f32[] parameter(0)\n  ROOT q = f32[] negate(p), control-predecessors={a}\n}\n";
    let e = parse_module(text).unwrap_err();
    assert!(e.msg.contains("'a'"), "{}", e.msg);
}
