//! The equivalence checker catches the rewrites the simplifier must never make.

use axle_analysis::{adversarial_inputs, same_results, Equivalence};
use axle_ir::{parse_module, Literal, Tolerance};

const ADD_ZERO: &str = "HloModule m
ENTRY main {
  x = f32[64]{0} parameter(0)
  z = f32[] constant(0)
  zb = f32[64]{0} broadcast(z), dimensions={}
  ROOT r = f32[64]{0} add(x, zb)
}
";

const IDENTITY: &str = "HloModule m
ENTRY main {
  ROOT x = f32[64]{0} parameter(0)
}
";

const MUL_ZERO: &str = "HloModule m
ENTRY main {
  x = f32[64]{0} parameter(0)
  z = f32[] constant(0)
  zb = f32[64]{0} broadcast(z), dimensions={}
  ROOT r = f32[64]{0} multiply(x, zb)
}
";

const ZEROS: &str = "HloModule m
ENTRY main {
  x = f32[64]{0} parameter(0)
  z = f32[] constant(0)
  ROOT zb = f32[64]{0} broadcast(z), dimensions={}
}
";

#[test]
fn x_plus_zero_is_not_x() {
    let a = parse_module(ADD_ZERO).unwrap();
    let b = parse_module(IDENTITY).unwrap();
    let e = same_results(&a, &b, 1, 4, Tolerance::Exact).unwrap_err();
    assert!(e.contains("results differ"), "{e}");
    // With a tolerance, -0.0 and 0.0 are close: only the exact comparison sees the difference.
    assert_eq!(
        same_results(
            &a,
            &b,
            1,
            4,
            Tolerance::Close {
                rtol: 1e-6,
                atol: 0.0
            }
        ),
        Ok(Equivalence::Same(4))
    );
}

#[test]
fn x_times_zero_is_not_zero() {
    let a = parse_module(MUL_ZERO).unwrap();
    let b = parse_module(ZEROS).unwrap();
    // inf * 0 and NaN * 0 are NaN: even a tolerance does not hide it.
    let e = same_results(
        &a,
        &b,
        1,
        4,
        Tolerance::Close {
            rtol: 1e-3,
            atol: 1e-3,
        },
    )
    .unwrap_err();
    assert!(e.contains("results differ"), "{e}");
}

#[test]
fn a_module_equals_itself() {
    let a = parse_module(MUL_ZERO).unwrap();
    assert_eq!(
        same_results(&a, &a, 3, 5, Tolerance::Exact),
        Ok(Equivalence::Same(5))
    );
}

#[test]
fn inputs_are_deterministic_and_include_special_values() {
    let a = parse_module(IDENTITY).unwrap();
    let i1 = adversarial_inputs(&a, 9);
    assert_eq!(i1, adversarial_inputs(&a, 9));
    assert_ne!(i1, adversarial_inputs(&a, 10));
    let Literal::Array(x) = &i1[0] else {
        panic!("an array input")
    };
    let v = x.to_f64_vec();
    assert_eq!(v.len(), 64);
    let specials = v
        .iter()
        .filter(|f| f.is_nan() || f.is_infinite() || (**f == 0.0 && f.is_sign_negative()))
        .count();
    assert!(specials > 0, "{v:?}");
}
