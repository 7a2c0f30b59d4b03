//! Host control flow on the nvptx backend (`while`, `conditional`, `call`), run by the host
//! simulator from the static buffer assignment (`axle_codegen_nvptx::arena`: the loop and
//! branch copies as device copies, the condition and selector read back from their slices)
//! against the reference evaluator: loops of 0, 1 and many trips, nested loops, tuple states
//! whose leaves are passed through unchanged or repeated, conditionals by `pred` and by `s32`
//! index (an index out of range takes the last branch), branches that return their parameter
//! unchanged, a conditional inside a loop, and `call`s. Every run makes exactly one temporary
//! allocation, of the assignment's bytes, and one buffer per result leaf, so device memory
//! does not grow with the trip count (the peak of live buffers and bytes is the same for 10 and
//! 1000 trips) and a run leaves only its result. Also: kernel names are unique across
//! computations and the PTX holding every computation's kernels is accepted by ptxas, and an
//! unsupported instruction inside a loop body is an error naming it.

use axle_codegen_nvptx::{plan_kernels, NvptxError};
use axle_ir::types::ElementType;
use axle_ir::{Literal, Module};
use axle_testkit::real_array;

mod common;
use common::logging::logging_memory;
use common::sim_run::{checked_run, run_on, Logged};
use common::{module, ptx_checked};

/// Runs `m` on `args` on the simulator, checks the result against the evaluator, that the run
/// left only its result and that it ran from the static assignment with one temporary
/// allocation; gives what it saw.
fn check(m: &Module, args: &[Literal]) -> Logged {
    let logged = checked_run(m, args);
    logged.assert_one_temporary_allocation();
    logged
}

fn s32(v: i64) -> Literal {
    real_array(ElementType::S32, &[], |_| v as f64)
}

fn pred(v: bool) -> Literal {
    real_array(ElementType::Pred, &[], |_| if v { 1.0 } else { 0.0 })
}

fn f32s(n: i64, f: impl Fn(usize) -> f64) -> Literal {
    real_array(ElementType::F32, &[n], f)
}

/// The condition `cond` and body `body` of a counted loop over state `(i, n, a)` with
/// `a: f32[len]`: it runs while `i < n`, each trip `a = a * 0.5 + i` and `i = i + 1`.
fn counted_loop(cond: &str, body: &str, len: usize) -> String {
    r#"
COND {
  s = STATE parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] get-tuple-element(s), index=1
  ROOT lt = pred[] compare(i, n), direction=LT
}
BODY {
  s = STATE parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] get-tuple-element(s), index=1
  a = f32[LEN] get-tuple-element(s), index=2
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  h = f32[] constant(0.5)
  hb = f32[LEN] broadcast(h), dimensions={}
  fi = f32[] convert(i)
  ib = f32[LEN] broadcast(fi), dimensions={}
  a1 = f32[LEN] multiply(a, hb)
  a2 = f32[LEN] add(a1, ib)
  ROOT t = STATE tuple(i1, n, a2)
}
"#
    .replace("COND", cond)
    .replace("BODY", body)
    .replace("STATE", "(s32[], s32[], f32[LEN])")
    .replace("LEN", &len.to_string())
}

/// A counted loop ([`counted_loop`]) from `(0, n, x)`; the root is the whole final state, so
/// `n` (an argument passed through every trip unchanged) is a result leaf too.
fn counted() -> Module {
    let text = r#"
HloModule counted
LOOP
ENTRY e {
  n = s32[] parameter(0)
  x = f32[5] parameter(1)
  zero = s32[] constant(0)
  init = (s32[], s32[], f32[5]) tuple(zero, n, x)
  ROOT w = (s32[], s32[], f32[5]) while(init), condition=cond, body=body
}
"#;
    module(&text.replace("LOOP", &counted_loop("cond", "body", 5)))
}

#[test]
fn while_runs_zero_one_and_many_trips() {
    let m = counted();
    let x = f32s(5, |i| i as f64 - 1.5);
    for trips in [0, 1, 2, 37] {
        let ran = check(&m, &[s32(trips), x.clone()]);
        let i = i32::from_le_bytes(ran.ran.leaves[0].data[..4].try_into().unwrap());
        assert_eq!(i as i64, trips, "trip count");
    }
    // A negative bound runs no trip as well.
    check(&m, &[s32(-3), x]);
}

#[test]
fn memory_does_not_grow_with_the_trip_count() {
    let m = counted();
    let x = f32s(5, |i| i as f64);
    let ten = check(&m, &[s32(10), x.clone()]);
    let thousand = check(&m, &[s32(1000), x]);
    assert_eq!(
        ten.peak, thousand.peak,
        "the peak of live buffers or bytes grew with the trip count"
    );
    assert_eq!(
        thousand.ran.left, 3,
        "a run leaves only its result's buffers"
    );
}

#[test]
fn kernels_of_every_computation_are_planned_with_unique_names_and_assemble() {
    let m = counted();
    let ks = plan_kernels(&m).unwrap_or_else(|e| panic!("{e}"));
    let comps: Vec<&str> = ks.iter().map(|k| m.comp_name(m.parent(k.inst))).collect();
    assert!(
        comps.contains(&"cond") && comps.contains(&"body"),
        "{comps:?}"
    );
    let mut names: Vec<&str> = ks.iter().map(|k| k.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), ks.len(), "kernel names repeat: {names:?}");
    for ptx in ptx_checked(&m, "counted") {
        for k in &ks {
            assert!(
                ptx.contains(&format!(".entry {}(", k.name)),
                "{} missing",
                k.name
            );
        }
    }
}

#[test]
fn nested_loops() {
    let m = module(
        &r#"
HloModule nested
LOOP
ocond {
  s = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  three = s32[] constant(3)
  ROOT lt = pred[] compare(i, three), direction=LT
}
obody {
  s = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  a = f32[3] get-tuple-element(s), index=1
  zero = s32[] constant(0)
  two = s32[] constant(2)
  k = s32[] add(i, two)
  init = (s32[], s32[], f32[3]) tuple(zero, k, a)
  w = (s32[], s32[], f32[3]) while(init), condition=icond, body=ibody
  a1 = f32[3] get-tuple-element(w), index=2
  h = f32[] constant(0.25)
  hb = f32[3] broadcast(h), dimensions={}
  a2 = f32[3] multiply(a1, hb)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = (s32[], f32[3]) tuple(i1, a2)
}
ENTRY e {
  x = f32[3] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[3]) tuple(zero, x)
  w = (s32[], f32[3]) while(init), condition=ocond, body=obody
  ROOT a = f32[3] get-tuple-element(w), index=1
}
"#
        .replace("LOOP", &counted_loop("icond", "ibody", 3)),
    );
    check(&m, &[f32s(3, |i| i as f64 * 0.5 + 1.0)]);
}

#[test]
fn tuple_state_with_repeated_and_passed_through_leaves() {
    // The state nests a tuple; each trip its two inner leaves become one buffer twice, and the
    // last leaf (an argument) passes through unchanged.
    let m = module(
        r#"
HloModule aliased
cond {
  s = (s32[], (f32[4], f32[4]), f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  four = s32[] constant(4)
  ROOT lt = pred[] compare(i, four), direction=LT
}
body {
  s = (s32[], (f32[4], f32[4]), f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  p = (f32[4], f32[4]) get-tuple-element(s), index=1
  a = f32[4] get-tuple-element(p), index=0
  b = f32[4] get-tuple-element(p), index=1
  c = f32[4] get-tuple-element(s), index=2
  ab = f32[4] add(a, b)
  abc = f32[4] subtract(ab, c)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  q = (f32[4], f32[4]) tuple(abc, abc)
  ROOT t = (s32[], (f32[4], f32[4]), f32[4]) tuple(i1, q, c)
}
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  z = f32[4] parameter(2)
  zero = s32[] constant(0)
  p = (f32[4], f32[4]) tuple(x, y)
  init = (s32[], (f32[4], f32[4]), f32[4]) tuple(zero, p, z)
  ROOT w = (s32[], (f32[4], f32[4]), f32[4]) while(init), condition=cond, body=body
}
"#,
    );
    let ran = check(
        &m,
        &[
            f32s(4, |i| i as f64),
            f32s(4, |i| 1.0 - i as f64),
            f32s(4, |i| 0.5 * i as f64),
        ],
    );
    // The repeated leaves are distinct buffers the caller owns once each.
    assert_eq!(ran.ran.left, 4);
}

/// A conditional by `s32` index over three branches: the first returns its parameter
/// unchanged, the second negates it, the third (also taken for an index out of range) adds 10.
const BY_INDEX: &str = r#"
HloModule by_index
b0 {
  ROOT p = f32[6] parameter(0)
}
b1 {
  p = f32[6] parameter(0)
  ROOT n = f32[6] negate(p)
}
b2 {
  p = f32[6] parameter(0)
  t = f32[] constant(10)
  tb = f32[6] broadcast(t), dimensions={}
  ROOT a = f32[6] add(p, tb)
}
ENTRY e {
  k = s32[] parameter(0)
  x = f32[6] parameter(1)
  y = f32[6] parameter(2)
  ROOT c = f32[6] conditional(k, x, y, x), branch_computations={b0, b1, b2}
}
"#;

#[test]
fn conditional_by_index_takes_the_last_branch_out_of_range() {
    let m = module(BY_INDEX);
    let x = f32s(6, |i| i as f64 + 0.5);
    let y = f32s(6, |i| 2.0 - i as f64);
    let mut taken = Vec::new();
    for k in [0, 1, 2, 3, -1, i32::MAX as i64, i32::MIN as i64] {
        let ran = check(&m, &[s32(k), x.clone(), y.clone()]);
        taken.push(f32::from_le_bytes(
            ran.ran.leaves[0].data[..4].try_into().unwrap(),
        ));
    }
    // x[0] = 0.5 unchanged, -y[0] = -2, x[0] + 10, then the last branch for every index out
    // of range.
    assert_eq!(taken, [0.5, -2.0, 10.5, 10.5, 10.5, 10.5, 10.5]);
}

#[test]
fn conditional_by_pred_and_inside_a_loop() {
    // The true branch returns its parameter (a tuple) unchanged; the false one computes.
    let m = module(
        r#"
HloModule by_pred
t {
  ROOT p = (f32[4], s32[]) parameter(0)
}
f {
  p = (f32[4], s32[]) parameter(0)
  a = f32[4] get-tuple-element(p), index=0
  k = s32[] get-tuple-element(p), index=1
  n = f32[4] negate(a)
  one = s32[] constant(1)
  k1 = s32[] add(k, one)
  ROOT r = (f32[4], s32[]) tuple(n, k1)
}
cond {
  s = (s32[], f32[4], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  five = s32[] constant(5)
  ROOT lt = pred[] compare(i, five), direction=LT
}
body {
  s = (s32[], f32[4], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  a = f32[4] get-tuple-element(s), index=1
  k = s32[] get-tuple-element(s), index=2
  two = s32[] constant(2)
  r = s32[] remainder(i, two)
  zero = s32[] constant(0)
  even = pred[] compare(r, zero), direction=EQ
  arg = (f32[4], s32[]) tuple(a, k)
  c = (f32[4], s32[]) conditional(even, arg, arg), true_computation=t, false_computation=f
  a1 = f32[4] get-tuple-element(c), index=0
  k1 = s32[] get-tuple-element(c), index=1
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT s1 = (s32[], f32[4], s32[]) tuple(i1, a1, k1)
}
ENTRY e {
  p = pred[] parameter(0)
  x = f32[4] parameter(1)
  k = s32[] parameter(2)
  arg = (f32[4], s32[]) tuple(x, k)
  c = (f32[4], s32[]) conditional(p, arg, arg), true_computation=t, false_computation=f
  zero = s32[] constant(0)
  a = f32[4] get-tuple-element(c), index=0
  init = (s32[], f32[4], s32[]) tuple(zero, a, k)
  w = (s32[], f32[4], s32[]) while(init), condition=cond, body=body
  ROOT r = ((f32[4], s32[]), (s32[], f32[4], s32[])) tuple(c, w)
}
"#,
    );
    for p in [true, false] {
        check(&m, &[pred(p), f32s(4, |i| i as f64 - 1.0), s32(7)]);
    }
}

#[test]
fn call_runs_its_computation() {
    let m = module(
        r#"
HloModule called
g {
  a = f32[5] parameter(0)
  b = f32[5] parameter(1)
  m = f32[5] multiply(a, b)
  ROOT t = (f32[5], f32[5]) tuple(m, a)
}
ENTRY e {
  x = f32[5] parameter(0)
  y = f32[5] parameter(1)
  c = (f32[5], f32[5]) call(x, y), to_apply=g
  d = f32[5] get-tuple-element(c), index=0
  ROOT r = (f32[5], f32[5], f32[5]) tuple(d, d, x)
}
"#,
    );
    check(&m, &[f32s(5, |i| i as f64), f32s(5, |i| 3.0 - i as f64)]);
}

#[test]
fn an_unsupported_instruction_in_a_loop_body_is_an_error_naming_it() {
    let m = module(
        r#"
HloModule refused
cond {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  two = s32[] constant(2)
  ROOT lt = pred[] compare(i, two), direction=LT
}
body {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  a = f32[4] get-tuple-element(s), index=1
  odd = f32[4] custom-call(a), custom_call_target="axle_no_such_target"
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = (s32[], f32[4]) tuple(i1, odd)
}
ENTRY e {
  x = f32[4] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[4]) tuple(zero, x)
  ROOT w = (s32[], f32[4]) while(init), condition=cond, body=body
}
"#,
    );
    let e = plan_kernels(&m).expect_err("a custom call is refused");
    assert!(e.to_string().contains("odd"), "{e}");
    let e = run_on(&logging_memory(), &m, &[f32s(4, |i| i as f64)])
        .err()
        .expect("a custom call is refused");
    assert!(matches!(e, NvptxError::Codegen(_)), "{e:?}");
    let e = e.to_string();
    assert!(e.contains("odd") && e.contains("custom-call"), "{e}");
}
