//! Running from the static buffer assignment ([`axle_codegen_nvptx::arena`]) on the host
//! simulator: a straight-line module's run makes one temporary allocation, of exactly the
//! assignment's `temp_bytes`, and one buffer per output leaf (nothing else is allocated; the
//! constants are uploaded), every kernel runs at its offsets inside the temporary block (a
//! chain of element-wise kernels, a transpose, a reduction, a reshape the assignment makes a
//! view, a root leaf that is a parameter and so an output copy), the results equal the
//! reference evaluator's and a run leaves only its result. Host control flow runs from the
//! assignment too (a loop whose state swaps two leaves copies back through a staging buffer;
//! a scheduled module calling one computation from two sites is flattened first); only a module
//! the assignment refuses (computations nested deeper than its program goes) runs with a
//! buffer per value, with the reason given, the same results, and memory that does not grow
//! with the trip count.

use axle_analysis::eval::evaluate;
use axle_codegen_nvptx::device::DeviceMemory;
use axle_codegen_nvptx::executor::Executable;
use axle_codegen_nvptx::sim::SimDevice;
use axle_ir::types::ElementType;
use axle_ir::{compare_arrays, Literal, Module, Tolerance};
use axle_schedule::Role;
use axle_testkit::{leaves, real_array};

mod common;
use common::logging::logging_memory;
use common::module;
use common::sim_run::{checked_run, run_on};

fn f32s(dims: &[i64], f: impl Fn(usize) -> f64) -> Literal {
    real_array(ElementType::F32, dims, f)
}

#[test]
fn a_straight_line_run_makes_one_temporary_allocation_of_the_assignments_size() {
    let m = module(
        "HloModule chain\n\n\
         add {\n  p = f32[] parameter(0)\n  q = f32[] parameter(1)\n  ROOT s = f32[] add(p, q)\n}\n\n\
         ENTRY e {\n\
         a = f32[64,32] parameter(0)\n\
         b = f32[64,32] parameter(1)\n\
         c = f32[] constant(2)\n\
         cb = f32[64,32] broadcast(c), dimensions={}\n\
         x = f32[64,32] multiply(a, cb)\n\
         y = f32[64,32] add(x, b)\n\
         t = f32[32,64] transpose(y), dimensions={1,0}\n\
         v = f32[2048] reshape(t)\n\
         w = f32[2048] negate(v)\n\
         w2 = f32[64,32] reshape(w)\n\
         z = f32[64,32] exponential(w2)\n\
         zx = f32[64,32] add(z, x)\n\
         zero = f32[] constant(0)\n\
         s = f32[64] reduce(zx, zero), dimensions={1}, to_apply=add\n\
         ROOT o = (f32[64], f32[64,32]) tuple(s, a)\n}\n",
    );
    let args = [
        f32s(&[64, 32], |i| (i % 17) as f64 * 0.01),
        f32s(&[64, 32], |i| (i % 5) as f64 - 2.0),
    ];
    let got = checked_run(&m, &args);
    let temp = got
        .ran
        .temp_bytes
        .expect("a straight-line module runs from its assignment");
    assert!(temp > 0, "the kernels' values live in the temporary block");
    // One temporary allocation, then one buffer per output leaf, nothing else.
    let outputs = [64 * 4, 64 * 32 * 4];
    let mut want = vec![temp as usize];
    want.extend(outputs);
    assert_eq!(got.allocs, want, "allocations of the run");
    got.assert_one_temporary_allocation();
}

/// A loop over state `(i, n, a, b, c)`: while `i < n`, `a, b = b, a` (each trip swaps the two
/// arrays, so the copies back into the state form a cycle), `c = c * 0.5 + a` and `i = i + 1`.
const SWAP: &str = r#"
HloModule swap
cond {
  s = (s32[], s32[], f32[16], f32[16], f32[16]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] get-tuple-element(s), index=1
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], s32[], f32[16], f32[16], f32[16]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] get-tuple-element(s), index=1
  a = f32[16] get-tuple-element(s), index=2
  b = f32[16] get-tuple-element(s), index=3
  c = f32[16] get-tuple-element(s), index=4
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  h = f32[] constant(0.5)
  hb = f32[16] broadcast(h), dimensions={}
  ch = f32[16] multiply(c, hb)
  c1 = f32[16] add(ch, a)
  ROOT t = (s32[], s32[], f32[16], f32[16], f32[16]) tuple(i1, n, b, a, c1)
}
ENTRY e {
  n = s32[] parameter(0)
  x = f32[16] parameter(1)
  y = f32[16] parameter(2)
  z = f32[16] parameter(3)
  zero = s32[] constant(0)
  init = (s32[], s32[], f32[16], f32[16], f32[16]) tuple(zero, n, x, y, z)
  w = (s32[], s32[], f32[16], f32[16], f32[16]) while(init), condition=cond, body=body
  a = f32[16] get-tuple-element(w), index=2
  c = f32[16] get-tuple-element(w), index=4
  ROOT r = (f32[16], f32[16]) tuple(a, c)
}
"#;

fn s32(v: i64) -> Literal {
    real_array(ElementType::S32, &[], |_| v as f64)
}

/// Compiles `m` for the simulator.
fn compiled(m: &Module) -> Executable<SimDevice> {
    let mem = DeviceMemory::new(SimDevice::default());
    Executable::compile(&mem, m.clone()).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_loop_runs_from_the_assignment_with_its_copies_on_the_device() {
    let m = module(SWAP);
    let exe = compiled(&m);
    assert_eq!(exe.fallback_reason(), None);
    let a = exe.assignment().expect("a loop runs from its assignment");
    assert!(
        a.buffers().iter().any(|b| b.role == Role::Staging),
        "swapping the state goes through a staging buffer"
    );
    assert!(exe.memory_summary().contains("one temporary allocation"));
    let x = f32s(&[16], |i| i as f64);
    let y = f32s(&[16], |i| 1.0 - i as f64 * 0.5);
    let z = f32s(&[16], |i| (i % 3) as f64);
    for trips in [0, 1, 2, 7] {
        checked_run(&m, &[s32(trips), x.clone(), y.clone(), z.clone()])
            .assert_one_temporary_allocation();
    }
}

/// `g` runs from two `call`s, and `b` is both branches of a conditional; the module arrives
/// scheduled (`is_scheduled=true`), so the assignment refuses its schedule until the call
/// graph is flattened.
const SHARED: &str = r#"
HloModule shared, is_scheduled=true
g {
  p = f32[8] parameter(0)
  ROOT n = f32[8] negate(p)
}
b {
  p = f32[8] parameter(0)
  h = f32[] constant(0.5)
  hb = f32[8] broadcast(h), dimensions={}
  ROOT m = f32[8] multiply(p, hb)
}
ENTRY e {
  k = s32[] parameter(0)
  x = f32[8] parameter(1)
  c1 = f32[8] call(x), to_apply=g
  c2 = f32[8] call(c1), to_apply=g
  d = f32[8] conditional(k, c1, c2), branch_computations={b, b}
  ROOT r = (f32[8], f32[8]) tuple(d, c2)
}
"#;

#[test]
fn a_scheduled_module_calling_a_computation_twice_is_flattened_and_runs_from_the_assignment() {
    let m = module(SHARED);
    assert!(m.schedule().is_some());
    assert!(
        axle_schedule::assign(&m, &axle_schedule::HloRules).is_err(),
        "the schedule as given names computations run from two sites"
    );
    let exe = compiled(&m);
    assert_eq!(exe.fallback_reason(), None);
    assert!(
        exe.module().computations().len() > m.computations().len(),
        "the call graph was flattened"
    );
    let x = f32s(&[8], |i| i as f64 - 3.0);
    for k in [0, 1, 5] {
        checked_run(&m, &[s32(k), x.clone()]).assert_one_temporary_allocation();
    }
}

/// Computations nested `depth` calls deep (`c0` calls `c1` ... calls `cDEPTH`), the innermost a
/// counted loop (`n` trips, `a = a * 0.5 + 1`, a state leaf passed through) then a conditional
/// by `pred` (odd `n` negates).
fn nested(depth: usize) -> Module {
    let mut text = String::from(
        r#"HloModule deep
cond {
  s = (s32[], s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] get-tuple-element(s), index=1
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] get-tuple-element(s), index=1
  a = f32[8] get-tuple-element(s), index=2
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  h = f32[] constant(0.5)
  hb = f32[8] broadcast(h), dimensions={}
  a1 = f32[8] multiply(a, hb)
  o = f32[] constant(1)
  ob = f32[8] broadcast(o), dimensions={}
  a2 = f32[8] add(a1, ob)
  ROOT t = (s32[], s32[], f32[8]) tuple(i1, n, a2)
}
keep {
  ROOT p = f32[8] parameter(0)
}
flip {
  p = f32[8] parameter(0)
  ROOT q = f32[8] negate(p)
}
"#,
    );
    text += &format!(
        "c{depth} {{\n  n = s32[] parameter(0)\n  x = f32[8] parameter(1)\n  \
         zero = s32[] constant(0)\n  init = (s32[], s32[], f32[8]) tuple(zero, n, x)\n  \
         w = (s32[], s32[], f32[8]) while(init), condition=cond, body=body\n  \
         a = f32[8] get-tuple-element(w), index=2\n  two = s32[] constant(2)\n  \
         r = s32[] remainder(n, two)\n  z = s32[] constant(0)\n  \
         even = pred[] compare(r, z), direction=EQ\n  \
         ROOT c = f32[8] conditional(even, a, a), true_computation=keep, false_computation=flip\n}}\n"
    );
    for k in (0..depth).rev() {
        text += &format!(
            "c{k} {{\n  n = s32[] parameter(0)\n  x = f32[8] parameter(1)\n  \
             ROOT r = f32[8] call(n, x), to_apply=c{}\n}}\n",
            k + 1
        );
    }
    text += "ENTRY e {\n  n = s32[] parameter(0)\n  x = f32[8] parameter(1)\n  \
             ROOT r = f32[8] call(n, x), to_apply=c0\n}\n";
    module(&text)
}

#[test]
fn computations_nested_too_deep_for_the_assignment_run_per_value_and_say_why() {
    let x = f32s(&[8], |i| i as f64);
    // A shallow nest runs from the assignment.
    let shallow = nested(4);
    assert_eq!(compiled(&shallow).fallback_reason(), None);
    checked_run(&shallow, &[s32(3), x.clone()]).assert_one_temporary_allocation();
    // Deeper than the assignment's program goes: a buffer per value, the reason given.
    let deep = nested(260);
    let exe = compiled(&deep);
    let why = exe
        .fallback_reason()
        .expect("the assignment refuses the nest");
    assert!(why.contains("nest more than 256 deep"), "{why}");
    assert!(
        exe.memory_summary().contains("a device buffer per value")
            && exe.memory_summary().contains(why),
        "{}",
        exe.memory_summary()
    );
    // Per value, the results are the shallow nest's (the evaluator refuses the deep one too)
    // and memory does not grow with the trip count.
    let run = |trips: i64| {
        let args = [s32(trips), x.clone()];
        let mem = logging_memory();
        let ran = run_on(&mem, &deep, &args).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ran.fallback.as_deref(), Some(why));
        assert_eq!(ran.left, 1, "the run left only its result");
        let want = leaves(&evaluate(&shallow, &args).unwrap_or_else(|e| panic!("{e}")));
        let tol = Tolerance::Close {
            rtol: 1e-5,
            atol: 1e-6,
        };
        compare_arrays(&want[0], &ran.leaves[0], tol).unwrap_or_else(|e| panic!("{e}"));
        (mem.device().take_allocs(), mem.peak())
    };
    let (allocs, ten) = run(10);
    let (_, thousand) = run(1001);
    assert!(allocs.len() > 2, "a buffer per value: {allocs:?}");
    assert_eq!(ten, thousand, "the peak grew with the trip count");
}
