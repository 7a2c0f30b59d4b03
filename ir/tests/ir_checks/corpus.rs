//! Every `.hlo`, `.opt.hlo` and `.debug.hlo` of the shared corpus and every `.hlo` of the
//! baseline parses and verifies clean.

use crate::common;
use axle_ir::{parse_module, verify};

#[test]
fn corpus_and_baseline_verify_clean() {
    let files: Vec<_> = common::all_hlo_files()
        .into_iter()
        .filter(|f| f.extension().is_some_and(|e| e == "hlo"))
        .collect();
    assert!(
        files.len() >= 100,
        "expected the shared corpus, found {} files",
        files.len()
    );
    let mut failures = Vec::new();
    for f in &files {
        let text = common::read_text(f);
        let m = match parse_module(&text) {
            Ok(m) => m,
            Err(e) => {
                failures.push(e.render(&f.display().to_string()));
                continue;
            }
        };
        if let Err(errs) = verify(&m) {
            let shown: Vec<String> = errs
                .errors
                .iter()
                .take(10)
                .map(|e| format!("{}:{e}", f.display()))
                .collect();
            failures.push(format!("{} errors:\n{}", errs.len(), shown.join("\n")));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} files fail:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

/// Changing any instruction's declared array shape in a corpus module (one more row in the first
/// dimension, or a wider type for scalars) makes the module fail verification. The only changes
/// that go unnoticed are to parameters of computations nothing but a `custom-call` calls, whose
/// signature XLA leaves to the custom call's target.
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
