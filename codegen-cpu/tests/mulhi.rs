//! `mulhi` on the CPU backend against the reference evaluator (itself checked against XLA CPU in
//! `analysis/tests/mulhi.rs`), bit for bit, on every integer type: all pairs of each type's
//! extremes (every pair of values for the 2- and 4-bit types) and a thousand random pairs, so
//! the vectorized loop body and its tail both run; unfused and inside a loop fusion with a
//! broadcast constant operand (the division-by-constant pattern), on 1 and 8 threads.

use axle_analysis::eval::evaluate;
use axle_codegen_cpu::{compile, CpuOptions};
use axle_ir::literal::{element_to_i128, i128_to_element};
use axle_ir::{parse_module, ArrayLiteral, ArrayShape, ElementType, Literal};

/// splitmix64: the random operands' bits.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn range(ty: ElementType) -> (i128, i128) {
    let n = ty.bits();
    if ty.is_signed_int() {
        (-(1i128 << (n - 1)), (1i128 << (n - 1)) - 1)
    } else {
        (0, (1i128 << n) - 1)
    }
}

/// The operand pairs for `ty`: every pair of its extremes (of all its values when it has at
/// most 16), then 1000 random pairs.
fn operands(ty: ElementType) -> (Vec<i128>, Vec<i128>) {
    let (lo, hi) = range(ty);
    let special: Vec<i128> = if hi - lo < 16 {
        (lo..=hi).collect()
    } else {
        let mid = lo + (hi - lo) / 2;
        vec![lo, lo + 1, -2, -1, 0, 1, 2, mid, mid + 1, hi - 1, hi]
            .into_iter()
            .filter(|v| (lo..=hi).contains(v))
            .collect()
    };
    let mut a = Vec::new();
    let mut b = Vec::new();
    for &x in &special {
        for &y in &special {
            a.push(x);
            b.push(y);
        }
    }
    for k in 0..1000u64 {
        // Wrapping the random bits into the type covers its whole range.
        a.push(mix(2 * k) as i64 as i128);
        b.push(mix(2 * k + 1) as i64 as i128);
    }
    (a, b)
}

fn array(ty: ElementType, v: &[i128]) -> Literal {
    Literal::Array(ArrayLiteral {
        shape: ArrayShape::new(ty, &[v.len() as i64]),
        data: v.iter().flat_map(|&x| i128_to_element(ty, x)).collect(),
    })
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
