//! Device buffer lifetimes on the nvptx backend's executor, run by the host simulator against
//! the reference evaluator: every module here runs from its static assignment (one temporary
//! block, `arena`), so a long chain of kernels, and a chain of diamonds, keep a few buffers
//! live instead of all of them (the peak counted by [`DeviceMemory::peak`]); values sharing
//! buffers (a tuple and its elements read through `get-tuple-element`, an `opt-barrier`, a
//! `while` state leaf made before the loop and passed through, a `call` returning its parameter
//! or a copy of it) give the evaluator's results, and a run leaves only its result. The static
//! assignment of the same modules under the backend's rules (`buffer_rules`) passes the
//! independent checker (`axle_schedule::check`). (The per-value fallback's lifetimes are
//! covered in `arena.rs`, by a module nested too deep for the assignment.)

use axle_codegen_nvptx::buffer_rules::buffer_assignment;
use axle_codegen_nvptx::device::DeviceMemory;
use axle_codegen_nvptx::sim::SimDevice;
use axle_ir::types::ElementType;
use axle_ir::{compare_arrays, Literal, Module, Tolerance};
use axle_testkit::{leaves, real_array};

mod common;
use common::module;
use common::sim_run::run_on;

/// The elements of the arrays these tests compute on.
const LEN: usize = 256;

fn f32s(f: impl Fn(usize) -> f64) -> Literal {
    real_array(ElementType::F32, &[LEN as i64], f)
}

/// Runs `m` on `args` on the simulator, checks every result leaf against the evaluator and
/// that the run left only its result's buffers; gives the peak of live buffers and bytes
/// during the run, the arguments' included.
fn peak(m: &Module, args: &[Literal]) -> (usize, usize) {
    let mem = DeviceMemory::new(SimDevice::default());
    let ran = run_on(&mem, m, args).unwrap_or_else(|e| panic!("{e}"));
    let want = leaves(&axle_analysis::eval::evaluate(m, args).unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(ran.leaves.len(), want.len());
    assert_eq!(ran.left, want.len(), "live buffers after the run");
    let tol = Tolerance::Close {
        rtol: 1e-5,
        atol: 1e-6,
    };
    for (k, (g, w)) in ran.leaves.iter().zip(&want).enumerate() {
        compare_arrays(w, g, tol).unwrap_or_else(|e| panic!("out{k}: {e}"));
    }
    let p = mem.peak();
    (p.buffers, p.bytes)
}

/// A chain of `n` unfused elementwise kernels on `f32[LEN]`, each reading the one before.
fn chain(n: usize) -> Module {
    let mut text = format!("HloModule chain\nENTRY e {{\n  v0 = f32[{LEN}] parameter(0)\n");
    for k in 1..=n {
        let op = ["negate", "abs", "floor"][k % 3];
        let root = if k == n { "ROOT " } else { "" };
        text += &format!("  {root}v{k} = f32[{LEN}] {op}(v{})\n", k - 1);
    }
    module(&(text + "}\n"))
}

#[test]
fn a_chain_of_kernels_keeps_two_buffers_live() {
    let n = 24;
    let (buffers, bytes) = peak(&chain(n), &[f32s(|i| i as f64 * 0.01 - 1.0)]);
    // A straight-line module runs from its static assignment (`arena`): the argument, the
    // temporary block and the output, not the 1 + 24 a run that frees at its end holds; the
    // block is empty, as every element-wise step works in place in the output's memory.
    assert_eq!(buffers, 3, "live buffers at the peak");
    assert_eq!(bytes, 2 * LEN * 4, "live bytes at the peak");
}

#[test]
fn a_chain_of_diamonds_keeps_a_few_buffers_live() {
    let n = 10;
    let mut text = format!("HloModule diamonds\nENTRY e {{\n  d0 = f32[{LEN}] parameter(0)\n");
    for k in 1..=n {
        let p = k - 1;
        let root = if k == n { "ROOT " } else { "" };
        text += &format!(
            "  a{k} = f32[{LEN}] floor(d{p})\n  b{k} = f32[{LEN}] negate(a{k})\n  \
             c{k} = f32[{LEN}] abs(a{k})\n  {root}d{k} = f32[{LEN}] add(b{k}, c{k})\n"
        );
    }
    let m = module(&(text + "}\n"));
    let (buffers, _) = peak(&m, &[f32s(|i| i as f64 * 0.02 - 2.0)]);
    // At most the argument, one diamond's top, two sides and bottom: 4 * 10 made in all.
    assert!(buffers <= 5, "{buffers} buffers live at the peak");
}

/// `a` dies as a value once `b` ran, but the tuple and its `get-tuple-element`, and the
/// barrier, still hold its buffer; the call `d` returns its parameter, so the call's value
/// holds the caller's buffer too.
fn shared_module() -> Module {
    module(&format!(
        r#"
HloModule shared
ident {{
  p = f32[{LEN}] parameter(0)
  ROOT q = f32[{LEN}] copy(p)
}}
pass {{
  ROOT p = f32[{LEN}] parameter(0)
}}
ENTRY e {{
  x = f32[{LEN}] parameter(0)
  a = f32[{LEN}] floor(x)
  b = f32[{LEN}] negate(a)
  t = (f32[{LEN}], f32[{LEN}]) tuple(a, b)
  o = (f32[{LEN}], f32[{LEN}]) opt-barrier(t)
  c = f32[{LEN}] abs(b)
  d = f32[{LEN}] call(c), to_apply=pass
  e = f32[{LEN}] call(d), to_apply=ident
  g0 = f32[{LEN}] get-tuple-element(o), index=0
  g1 = f32[{LEN}] get-tuple-element(o), index=1
  s = f32[{LEN}] add(g0, d)
  u = f32[{LEN}] multiply(s, e)
  ROOT r = f32[{LEN}] add(u, g1)
}}
"#
    ))
}

#[test]
fn shared_buffers_live_until_their_last_holder_is_read() {
    peak(&shared_module(), &[f32s(|i| i as f64 * 0.03 - 3.0)]);
}

/// The state's `h` is made by a kernel before the loop, passed through every trip, and read
/// after the loop; the tuple holding it dies at the loop.
fn passthrough_module() -> Module {
    module(&format!(
        r#"
HloModule passthrough
cond {{
  s = (s32[], f32[{LEN}], f32[{LEN}]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}}
body {{
  s = (s32[], f32[{LEN}], f32[{LEN}]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  h = f32[{LEN}] get-tuple-element(s), index=1
  a = f32[{LEN}] get-tuple-element(s), index=2
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  a1 = f32[{LEN}] add(a, h)
  ROOT t = (s32[], f32[{LEN}], f32[{LEN}]) tuple(i1, h, a1)
}}
ENTRY e {{
  x = f32[{LEN}] parameter(0)
  h = f32[{LEN}] floor(x)
  zero = s32[] constant(0)
  init = (s32[], f32[{LEN}], f32[{LEN}]) tuple(zero, h, x)
  w = (s32[], f32[{LEN}], f32[{LEN}]) while(init), condition=cond, body=body
  wh = f32[{LEN}] get-tuple-element(w), index=1
  wa = f32[{LEN}] get-tuple-element(w), index=2
  ROOT r = f32[{LEN}] subtract(wa, wh)
}}
"#
    ))
}

#[test]
fn a_loop_state_leaf_made_before_the_loop_lives_through_it() {
    peak(&passthrough_module(), &[f32s(|i| i as f64 * 0.01)]);
}

/// The static assignment of `m` under the nvptx backend's rules, checked by the independent
/// checker; its temporary bytes.
fn assigned_temp_bytes(m: &Module) -> u64 {
    let (m, a, rules) = buffer_assignment(m).unwrap_or_else(|e| panic!("{e}"));
    axle_schedule::check::check(&m, &a, &rules).unwrap_or_else(|e| panic!("checker: {e}"));
    a.temp_bytes
}

#[test]
fn static_assignments_are_checked_and_update_element_wise_kernels_in_place() {
    // The chain's element-wise kernels write over their operand: after the first (the
    // argument is read-only), every step can reuse one buffer, the output's.
    assert!(assigned_temp_bytes(&chain(24)) <= (LEN * 4) as u64);
    for m in [
        shared_module(),
        passthrough_module(),
        module(&format!(
            "HloModule sorted\nlt {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  \
             ROOT c = pred[] compare(a, b), direction=LT\n}}\nENTRY e {{\n  \
             x = f32[{LEN}] parameter(0)\n  n = f32[{LEN}] negate(x)\n  \
             ROOT s = f32[{LEN}] sort(n), dimensions={{0}}, to_apply=lt\n}}\n"
        )),
    ] {
        assigned_temp_bytes(&m);
    }
}
