//! `mulhi` on the CPU backend against the reference evaluator (itself checked against XLA CPU in
//! `analysis/tests/mulhi.rs`), bit for bit, on every integer type: all pairs of each type's
//! extremes (every pair of values for the 2- and 4-bit types) and a thousand random pairs, so
//! the vectorized loop body and its tail both run; unfused and inside a loop fusion with a
//! broadcast constant operand (the division-by-constant pattern), on 1 and 8 threads.

use axle_analysis::eval::evaluate;
use axle_codegen_cpu::{compile, CpuOptions};
use axle_ir::literal::{element_to_i128, i128_to_element};
use axle_ir::{parse_module, ArrayLiteral, ArrayShape, ElementType, Literal};
use axle_testkit::{int_array as array, int_pairs, int_range as range};

/// The operand pairs for `ty`: its extremes, then a thousand random pairs.
fn operands(ty: ElementType) -> (Vec<i128>, Vec<i128>) {
    int_pairs(ty, 1000)
}

/// Runs `text` on `args` on the CPU backend on 1 and 8 threads and in the evaluator; every
/// result must be the same bits.
fn check(text: &str, args: &[Literal]) {
    let m = parse_module(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    let want = axle_testkit::leaves(&evaluate(&m, args).expect("the evaluator runs it"));
    for threads in [1, 8] {
        let opts = CpuOptions {
            threads,
            ..Default::default()
        };
        let got = compile(&m, &opts)
            .unwrap_or_else(|e| panic!("compiles: {e}\n{text}"))
            .run_literals(args)
            .unwrap_or_else(|e| panic!("runs: {e}"));
        assert_eq!(want.len(), got.len());
        for (k, (w, g)) in want.iter().zip(&got).enumerate() {
            if w == g {
                continue;
            }
            let ty = w.ty();
            let bad: Vec<String> = (0..w.len())
                .filter(|&i| w.element_bytes(i) != g.element_bytes(i))
                .take(5)
                .map(|i| {
                    format!(
                        "[{i}]: cpu {}, evaluator {}",
                        element_to_i128(ty, g.element_bytes(i)),
                        element_to_i128(ty, w.element_bytes(i))
                    )
                })
                .collect();
            panic!(
                "{ty} out{k} on {threads} threads: {}\n{text}",
                bad.join("; ")
            );
        }
    }
}

fn int_types() -> Vec<ElementType> {
    let tys: Vec<ElementType> = ElementType::ALL
        .iter()
        .copied()
        .filter(|t| t.is_int())
        .collect();
    assert_eq!(tys.len(), 12, "s2..s64 and u2..u64: {tys:?}");
    tys
}

#[test]
fn unfused_mulhi_matches_the_evaluator_on_every_integer_type() {
    for ty in int_types() {
        let (a, b) = operands(ty);
        let (t, n) = (ty.name(), a.len());
        let text = format!(
            "HloModule m\n\nENTRY main {{\n  a = {t}[{n}] parameter(0)\n  b = {t}[{n}] parameter(1)\n  \
             x = {t}[{n}] mulhi(a, b)\n  y = {t}[{n}] mulhi(b, a)\n  \
             ROOT r = ({t}[{n}], {t}[{n}]) tuple(x, y)\n}}\n"
        );
        check(&text, &[array(ty, &a), array(ty, &b)]);
        // A scalar.
        let text = format!(
            "HloModule m\n\nENTRY main {{\n  a = {t}[] parameter(0)\n  b = {t}[] parameter(1)\n  \
             ROOT r = {t}[] mulhi(a, b)\n}}\n"
        );
        let (lo, hi) = range(ty);
        for (x, y) in [(lo, lo), (lo, hi), (hi, hi), (-1, lo)] {
            let scalar = |v: i128| {
                Literal::Array(ArrayLiteral {
                    shape: ArrayShape::new(ty, &[]),
                    data: i128_to_element(ty, v),
                })
            };
            check(&text, &[scalar(x), scalar(y)]);
        }
    }
}

#[test]
fn fused_mulhi_by_a_broadcast_constant_matches_the_evaluator() {
    for ty in int_types() {
        let (a, b) = operands(ty);
        let (t, n) = (ty.name(), a.len());
        let (lo, hi) = range(ty);
        // The constants: the type's extremes and a magic number of the division by 3.
        let magic = (lo + 2 * (hi - lo) / 3).max(lo);
        let text = format!(
            r#"HloModule m

fused {{
  p0 = {t}[{n}] parameter(0)
  p1 = {t}[{n}] parameter(1)
  c = {t}[] constant({magic})
  cb = {t}[{n}] broadcast(c), dimensions={{}}
  k = {t}[{n}] mulhi(p0, cb)
  lo = {t}[] constant({lo})
  lb = {t}[{n}] broadcast(lo), dimensions={{}}
  l = {t}[{n}] mulhi(lb, p1)
  h = {t}[{n}] mulhi(p0, p1)
  s = {t}[{n}] add(h, k)
  ROOT r = {t}[{n}] subtract(s, l)
}}

ENTRY main {{
  a = {t}[{n}] parameter(0)
  b = {t}[{n}] parameter(1)
  ROOT f = {t}[{n}] fusion(a, b), kind=kLoop, calls=fused
}}
"#
        );
        check(&text, &[array(ty, &a), array(ty, &b)]);
    }
}
