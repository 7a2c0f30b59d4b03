//! Buffer assignment on small modules whose best assignment is known: in-place updates, loop
//! state sharing (and the copies where it cannot), branch outputs, outputs, donated parameters,
//! scratch; errors as values; and the independent checker catching a broken placement.

use axle_ir::{parse_module, InstId, Module};
use axle_schedule::check::check;
use axle_schedule::{
    assign, schedule_module, BufferAssignment, BufferRules, FusionRun, Heuristic, HloRules, Memory,
    Role, Scratch,
};

fn prepared(text: &str) -> Module {
    let mut m = parse_module(text).unwrap_or_else(|e| panic!("{e}"));
    axle_ir::verify(&m).unwrap();
    schedule_module(&mut m, Heuristic::Best).unwrap();
    m
}

fn assigned(text: &str, rules: &dyn BufferRules) -> (Module, BufferAssignment) {
    let m = prepared(text);
    let a = assign(&m, rules).unwrap();
    check(&m, &a, rules).unwrap_or_else(|e| panic!("checker: {e}"));
    (m, a)
}

fn id(m: &Module, name: &str) -> InstId {
    m.live_ids()
        .into_iter()
        .find(|&i| m.name(i) == name)
        .unwrap_or_else(|| panic!("no %{name}"))
}

/// A scan: the loop writes one row of its carry per iteration with dynamic-update-slice; the
/// row counter and the weight it reads are loop state too.
const SCAN: &str = "\
HloModule scan

cond {
  s = (s32[], f32[16,64]{1,0}, f32[64]{0}) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(16)
  ROOT lt = pred[] compare(i, n), direction=LT
}

body {
  s = (s32[], f32[16,64]{1,0}, f32[64]{0}) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  acc = f32[16,64]{1,0} get-tuple-element(s), index=1
  w = f32[64]{0} get-tuple-element(s), index=2
  e = f32[64]{0} exponential(w)
  row = f32[1,64]{1,0} reshape(e)
  zero = s32[] constant(0)
  upd = f32[16,64]{1,0} dynamic-update-slice(acc, row, i, zero)
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT t = (s32[], f32[16,64]{1,0}, f32[64]{0}) tuple(j, upd, w)
}

ENTRY main {
  w = f32[64]{0} parameter(0)
  z = f32[] constant(0)
  acc = f32[16,64]{1,0} broadcast(z), dimensions={}
  zero = s32[] constant(0)
  init = (s32[], f32[16,64]{1,0}, f32[64]{0}) tuple(zero, acc, w)
  loop = (s32[], f32[16,64]{1,0}, f32[64]{0}) while(init), condition=cond, body=body
  ROOT out = f32[16,64]{1,0} get-tuple-element(loop), index=1
}
";

#[test]
fn a_scan_updates_its_carry_in_place_in_the_output() {
    let (m, a) = assigned(SCAN, &HloRules);
    let upd = id(&m, "upd");
    let lp = id(&m, "loop");
    assert!(
        a.in_place(&m, upd, 0, 0),
        "the update writes over the carry"
    );
    let carry = a.leaf_buffers(lp)[1];
    assert_eq!(a.leaf_buffers(upd), vec![carry]);
    assert_eq!(
        a.leaf_buffers(id(&m, "acc"))[0],
        carry,
        "the initial carry is the loop state"
    );
    assert!(matches!(
        a.buffer(carry).memory,
        Memory::Output { leaf: 0, offset: 0 }
    ));
    // The only copy: the counter's initial constant into the loop state.
    assert_eq!(a.loop_init(lp).len(), 1);
    assert!(a.loop_back(lp).is_empty());
    // The weight is passed through unchanged: it stays in the parameter's memory.
    assert!(matches!(
        a.buffer(a.leaf_buffers(lp)[2]).memory,
        Memory::Param(0)
    ));
    // Only the counter, the exponential and the predicate are temporaries.
    assert!(a.temp_bytes <= 3 * 64 + 256, "{}", a.temp_bytes);
}

#[test]
fn swapped_loop_state_goes_through_a_staging_copy() {
    let text = "\
HloModule swap

cond {
  s = (s32[], f32[8]{0}, f32[8]{0}) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}

body {
  s = (s32[], f32[8]{0}, f32[8]{0}) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  a = f32[8]{0} get-tuple-element(s), index=1
  b = f32[8]{0} get-tuple-element(s), index=2
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT t = (s32[], f32[8]{0}, f32[8]{0}) tuple(j, b, a)
}

ENTRY main {
  x = f32[8]{0} parameter(0)
  y = f32[8]{0} parameter(1)
  ex = f32[8]{0} exponential(x)
  ey = f32[8]{0} exponential(y)
  zero = s32[] constant(0)
  init = (s32[], f32[8]{0}, f32[8]{0}) tuple(zero, ex, ey)
  ROOT loop = (s32[], f32[8]{0}, f32[8]{0}) while(init), condition=cond, body=body
}
";
    let (m, a) = assigned(text, &HloRules);
    let back = a.loop_back(id(&m, "loop"));
    let staged = back
        .iter()
        .filter(|mv| a.buffer(mv.dst).role == Role::Staging)
        .count();
    assert_eq!(
        staged, 1,
        "a two-element cycle needs one staging copy: {back:?}"
    );
    assert_eq!(back.len(), 3, "{back:?}");
}

#[test]
fn branches_write_straight_into_the_conditional_output() {
    let text = "\
HloModule cond

yes {
  a = f32[64]{0} parameter(0)
  ROOT e = f32[64]{0} exponential(a)
}

no {
  a = f32[64]{0} parameter(0)
  n = f32[64]{0} negate(a)
  ROOT e = f32[64]{0} exponential(n)
}

ENTRY main {
  x = f32[64]{0} parameter(0)
  p = pred[] parameter(1)
  c = f32[64]{0} conditional(p, x, x), true_computation=yes, false_computation=no
  ROOT r = f32[64]{0} sine(c)
}
";
    let (m, a) = assigned(text, &HloRules);
    let c = id(&m, "c");
    assert!(a.branch_out(c, 0).is_empty() && a.branch_out(c, 1).is_empty());
    // Everything can live in the output: sine updates in place.
    assert_eq!(a.temp_bytes, 0);
    assert_eq!(a.merged[3], 2);
}

#[test]
fn an_elementwise_chain_needs_no_temporaries() {
    let text = "\
HloModule chain

ENTRY main {
  x = f32[1024]{0} parameter(0)
  y = f32[1024]{0} parameter(1)
  a = f32[1024]{0} multiply(x, y)
  b = f32[1024]{0} exponential(a)
  c = f32[1024]{0} add(b, x)
  ROOT d = f32[1024]{0} tanh(c)
}
";
    let (_, a) = assigned(text, &HloRules);
    assert_eq!(a.temp_bytes, 0);
    assert_eq!(a.merged[0], 3);
}

#[test]
fn parameters_and_repeated_leaves_are_copied_into_the_outputs() {
    let text = "\
HloModule outs

ENTRY main {
  x = f32[16]{0} parameter(0)
  e = f32[16]{0} exponential(x)
  ROOT t = (f32[16]{0}, f32[16]{0}, f32[16]{0}) tuple(x, e, e)
}
";
    let (_, a) = assigned(text, &HloRules);
    assert_eq!(a.output_moves().len(), 2, "x and the second e are copied");
    assert!(matches!(
        a.buffer(a.output(1)).memory,
        Memory::Output { leaf: 1, offset: 0 }
    ));
    assert_eq!(a.temp_bytes, 0);
}

#[test]
fn donated_parameters_hold_their_outputs_and_take_in_place_updates() {
    let text = "\
HloModule donate, input_output_alias={ {}: (0, {}, may-alias) }

ENTRY main {
  x = f32[8,8]{1,0} parameter(0)
  r = f32[1,8]{1,0} parameter(1)
  i = s32[] parameter(2)
  zero = s32[] constant(0)
  ROOT u = f32[8,8]{1,0} dynamic-update-slice(x, r, i, zero)
}
";
    let (m, a) = assigned(text, &HloRules);
    assert!(a.in_place(&m, id(&m, "u"), 0, 0));
    assert_eq!(a.donated_outputs, vec![(0, 0)]);
    assert!(a.output_moves().is_empty());
    // A runtime with read-only parameters gets a copy into a fresh output instead.
    struct ReadOnly;
    impl BufferRules for ReadOnly {
        fn writes_donated_params(&self) -> bool {
            false
        }
    }
    let (m, a) = assigned(text, &ReadOnly);
    assert!(!a.in_place(&m, id(&m, "u"), 0, 0));
    assert!(a.donated_outputs.is_empty());
}

/// A module of sorts by `lt` of `x = f32[1024]` with the entry body `body`.
fn sorts(body: &str) -> String {
    format!(
        "HloModule sorts

lt {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=LT
}}

ENTRY main {{
  x = f32[1024]{{0}} parameter(0)
{body}}}
"
    )
}

#[test]
fn scratch_is_a_temporary_live_at_its_kernel_only() {
    struct Scratchy;
    impl BufferRules for Scratchy {
        fn scratch(&self, m: &Module, i: InstId) -> Vec<Scratch> {
            if m.opcode(i) == axle_ir::Opcode::Sort {
                vec![Scratch::temp(4096), Scratch::temp(100)]
            } else {
                Vec::new()
            }
        }
    }
    let text = &sorts(
        "  s = f32[1024]{0} sort(x), dimensions={0}, to_apply=lt
  ROOT n = f32[1024]{0} negate(s)
",
    );
    let (m, a) = assigned(text, &Scratchy);
    let bs = a.scratch(id(&m, "s"));
    assert_eq!(bs.len(), 2, "two scratch buffers");
    for b in bs {
        assert_eq!(a.buffer(b).role, Role::Scratch);
        assert_eq!(a.buffer(b).span.0, a.buffer(b).span.1);
    }
    // Without scratch rules nothing is temporary: the sort writes the output, negate updates
    // it in place.
    let (_, a) = assigned(text, &HloRules);
    assert_eq!(a.temp_bytes, 0);
}

#[test]
fn the_checker_catches_live_buffers_that_overlap() {
    let text = "\
HloModule two

add {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT s = f32[] add(p, q)
}

ENTRY main {
  x = f32[256]{0} parameter(0)
  a = f32[256]{0} exponential(x)
  b = f32[256]{0} sine(x)
  d = f32[256]{0} multiply(a, b)
  zero = f32[] constant(0)
  ROOT r = f32[] reduce(d, zero), dimensions={0}, to_apply=add
}
";
    let (m, mut a) = assigned(text, &HloRules);
    let (ba, bb) = (
        a.leaf_buffers(id(&m, "a"))[0],
        a.leaf_buffers(id(&m, "b"))[0],
    );
    assert!(matches!(a.buffer(ba).memory, Memory::Temp { .. }));
    assert!(matches!(a.buffer(bb).memory, Memory::Temp { .. }));
    assert_ne!(a.buffer(ba).memory, a.buffer(bb).memory);
    // a and b are live together at d: forcing them onto one offset must be caught.
    a.set_temp_offset(ba, 0);
    a.set_temp_offset(bb, 0);
    let e = check(&m, &a, &HloRules).unwrap_err();
    assert!(e.contains("overwrote"), "{e}");
}

#[test]
fn unscheduled_unflattened_and_recursive_modules_are_errors() {
    let text = "\
HloModule twice

f {
  a = f32[4]{0} parameter(0)
  ROOT n = f32[4]{0} negate(a)
}

ENTRY main {
  x = f32[4]{0} parameter(0)
  c1 = f32[4]{0} call(x), to_apply=f
  ROOT c2 = f32[4]{0} call(c1), to_apply=f
}
";
    let m = parse_module(text).unwrap();
    let e = assign(&m, &HloRules).unwrap_err();
    assert!(e.message.contains("no current schedule"), "{e}");
    let mut m2 = m.clone();
    m2.set_schedule(axle_schedule::compute_schedule(&m, Heuristic::Best).0);
    let e = assign(&m2, &HloRules).unwrap_err();
    assert!(e.message.contains("flatten"), "{e}");
    let (m3, a) = assigned(text, &HloRules);
    assert_eq!(
        m3.computations().len(),
        3,
        "memory-schedule flattened the calls"
    );
    assert_eq!(a.temp_bytes, 0);
    // A computation that calls itself: the verifier rejects it, and so does the call graph.
    let rec = "HloModule r\n\nf {\n  a = f32[4]{0} parameter(0)\n  ROOT c = f32[4]{0} call(a), to_apply=f\n}\n\nENTRY main {\n  x = f32[4]{0} parameter(0)\n  ROOT c = f32[4]{0} call(x), to_apply=f\n}\n";
    let m = parse_module(rec).unwrap();
    let e = axle_schedule::call_graph::CallGraph::new(&m).unwrap_err();
    assert!(e.message.contains("recursive"), "{e}");
}

#[test]
fn fusions_run_as_steps_get_buffers_for_their_steps() {
    // A backend that runs this fusion in two steps: the row sums, then the division (which
    // recomputes the exponential inline).
    struct TwoSteps;
    impl BufferRules for TwoSteps {
        fn fusion_run(&self, m: &Module, f: InstId) -> FusionRun {
            let c = m.comp_attr(f, &axle_ir::AttrKey::Calls).unwrap();
            let named = |n: &str| {
                m.comp_insts(c)
                    .into_iter()
                    .find(|&i| m.name(i) == n)
                    .unwrap()
            };
            FusionRun::Steps(vec![named("sum"), named("div")])
        }
    }
    let text = "\
HloModule steps

add {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT s = f32[] add(p, q)
}

fused {
  x = f32[8,16]{1,0} parameter(0)
  e = f32[8,16]{1,0} exponential(x)
  zero = f32[] constant(0)
  sum = f32[8]{0} reduce(e, zero), dimensions={1}, to_apply=add
  b = f32[8,16]{1,0} broadcast(sum), dimensions={0}
  ROOT div = f32[8,16]{1,0} divide(e, b)
}

ENTRY main {
  x = f32[8,16]{1,0} parameter(0)
  f = f32[8,16]{1,0} fusion(x), kind=kLoop, calls=fused
  ROOT n = f32[8,16]{1,0} negate(f)
}
";
    let (m, a) = assigned(text, &TwoSteps);
    let f = id(&m, "f");
    let sum = m
        .live_ids()
        .into_iter()
        .find(|&i| m.name(i) == "sum")
        .unwrap();
    let div = m
        .live_ids()
        .into_iter()
        .find(|&i| m.name(i) == "div")
        .unwrap();
    assert_eq!(a.program().step_reads(div).unwrap().len(), 2, "x and sum");
    assert_eq!(a.leaf_buffers(f), a.leaf_buffers(div));
    let sb = a.leaf_buffers(sum)[0];
    assert_eq!(a.buffer(sb).size, 32);
    // The fusion's result is the output (negate updates it in place); the sums are the only
    // temporary, read by the step that writes the output, so they cannot live in it.
    assert!(matches!(a.buffer(sb).memory, Memory::Temp { .. }));
    assert_eq!(a.temp_bytes, 32);
}

#[test]
fn a_constant_run_as_a_fusion_step_stays_in_constant_memory() {
    // A backend that runs every instruction of the fusion as a step, as it runs a call: the
    // constant is a step too, and the checker must see it read-only, not written by a kernel.
    struct EveryInstruction;
    impl BufferRules for EveryInstruction {
        fn fusion_run(&self, m: &Module, f: InstId) -> FusionRun {
            let c = m.comp_attr(f, &axle_ir::AttrKey::Calls).unwrap();
            let seq = m.schedule().unwrap().sequence(c).unwrap();
            FusionRun::Steps(
                seq.iter()
                    .copied()
                    .filter(|&i| m.opcode(i) != axle_ir::Opcode::Parameter)
                    .collect(),
            )
        }
    }
    let text = "\
HloModule steps_with_a_constant

add {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT s = f32[] add(p, q)
}

fused {
  x = f32[4,8]{1,0} parameter(0)
  zero = f32[] constant(0)
  sum = f32[4]{0} reduce(x, zero), dimensions={1}, to_apply=add
  ROOT d = f32[4]{0} divide(sum, sum)
}

ENTRY main {
  x = f32[4,8]{1,0} parameter(0)
  ROOT f = f32[4]{0} fusion(x), kind=kInput, calls=fused
}
";
    let (m, a) = assigned(text, &EveryInstruction);
    let zero = id(&m, "zero");
    let zb = a.leaf_buffers(zero)[0];
    assert!(
        matches!(a.buffer(zb).memory, Memory::Constant { .. }),
        "{:?}",
        a.buffer(zb).memory
    );
}

#[test]
fn arena_scratch_is_no_temporary_and_every_kernel_starts_at_zero() {
    // Two sorts, each with library scratch in the arena (8000 bytes, then 100) and the second
    // with a temporary scratch buffer besides.
    struct Arena;
    impl BufferRules for Arena {
        fn scratch(&self, m: &Module, i: InstId) -> Vec<Scratch> {
            match (m.opcode(i), m.name(i)) {
                (axle_ir::Opcode::Sort, "s") => vec![Scratch::arena(8000), Scratch::arena(100)],
                (axle_ir::Opcode::Sort, _) => vec![Scratch::arena(64), Scratch::temp(4096)],
                _ => Vec::new(),
            }
        }
    }
    let text = &sorts(
        "  s = f32[1024]{0} sort(x), dimensions={0}, to_apply=lt
  t = f32[1024]{0} sort(s), dimensions={0}, to_apply=lt
  ROOT n = f32[1024]{0} negate(t)
",
    );
    let (m, a) = assigned(text, &Arena);
    let offsets = |name: &str| -> Vec<Option<u64>> {
        a.scratch(id(&m, name))
            .into_iter()
            .map(|b| match a.buffer(b).memory {
                Memory::Arena { offset } => Some(offset),
                _ => None,
            })
            .collect()
    };
    // The first kernel's two arena buffers one after the other (8000 rounded up to 64),
    // the second kernel's from 0 again; its temporary scratch is in the temporary block.
    assert_eq!(offsets("s"), vec![Some(0), Some(8000u64.div_ceil(64) * 64)]);
    assert_eq!(offsets("t"), vec![Some(0), None]);
    // The arena is a heap of its own: its size is the highest end of a buffer in it.
    assert_eq!(a.arena_bytes, 8000u64.div_ceil(64) * 64 + 100);
    // In the block: the first sort's result and, beside it while the second sort runs, that
    // sort's temporary scratch (the second sort writes the output, negate updates it in place).
    assert_eq!(a.temp_bytes, 4096 + 4096);
}
