//! The verifier catches every mutated shape in the corpus. (That every corpus and baseline file
//! verifies clean is checked by `tests/roundtrip.rs`, which parses each file once.)

use crate::common;
use axle_ir::{parse_module, verify};

#[test]
fn mutated_corpus_shapes_are_caught() {
    use axle_ir::{ElementType, Opcode, Shape};
    let files: Vec<_> = common::all_hlo_files()
        .into_iter()
        .filter(|f| {
            let n = f.to_string_lossy();
            n.contains("/corpus/") && n.ends_with(".hlo")
        })
        .collect();
    let mut escaped = Vec::new();
    let mut n = 0;
    for f in &files {
        let m0 = parse_module(&common::read_text(f)).expect("the corpus parses");
        // Computations whose signature some caller other than a custom-call checks.
        let mut checked = vec![false; m0.comp_capacity()];
        for i in m0.live_ids() {
            if m0.opcode(i) != Opcode::CustomCall {
                for c in m0.called_comps(i) {
                    checked[c.index()] = true;
                }
            }
        }
        checked[m0.entry().index()] = true;
        for i in m0.live_ids() {
            let Some(a) = m0.array_shape(i) else {
                continue;
            };
            let mut b = a.clone();
            if b.rank() > 0 {
                let mut d = b.dims.to_vec();
                d[0] += 1;
                b.dims = d.into();
            } else {
                b.ty = if b.ty == ElementType::F64 {
                    ElementType::F32
                } else {
                    ElementType::F64
                };
            }
            let mut m = m0.clone();
            let s = m.intern_shape(Shape::Array(b));
            let l = m.layout_id(i);
            m.set_shape(i, s, l);
            n += 1;
            let exempt = m.opcode(i) == Opcode::Parameter && !checked[m.parent(i).index()];
            if verify(&m).is_ok() && !exempt {
                escaped.push(format!("{}: %{} ({})", f.display(), m.name(i), m.opcode(i)));
            }
        }
    }
    assert!(n > 1000, "only {n} mutations");
    assert!(escaped.is_empty(), "not caught:\n{}", escaped.join("\n"));
}
