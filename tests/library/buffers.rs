//! Buffer assignment checked by the independent checker (`axle_schedule::check`, the program run
//! on shadow memory): on generated modules after random pipelines drawn from every registered
//! pass, on generated loop programs (loop state updated in place, passed through, swapped,
//! branches and calls inside the body), and on every corpus case (`.hlo` as it is and after the
//! `simplify` pipeline, XLA's `.opt.hlo` rescheduled and with XLA's own schedule). The same
//! module and pipeline give the same assignment at 1 and 8 threads. The cpu backend's own
//! assignment (its rules, its expansions, the schedule it keeps or makes) is checked the same
//! way on the generated modules and on every corpus case after the `cpu` pipeline and as XLA
//! optimized it. The nvptx backend's static assignment (its rules, `GpuRules`) is checked on
//! every corpus case the backend plans kernels for, after the `gpu` pipeline. On XLA's
//! optimized modules
//! (the same fusion decisions on both sides, under XLA's rules and the cpu backend's) and after
//! Axle's own `cpu` pipeline, the temporary block is no larger than XLA's
//! (`get_compiled_memory_stats().temp_size_in_bytes`, recorded in
//! `$AXLE_SHARED/baseline/xla_memory.json`).
//! Two small modules keep the cpu pipeline's temporary block within a bound computed from the
//! live set at their peak: batch slices sharing a mask (one slice's scores live at a time) and
//! a clipped Adam step (no array of the gradient's shape written as a temporary).

use std::fmt::Write;

use axle::ir::gen::Recipe;
use axle::ir::{parse_module, print_module, Module, PassManagerOptions, VerifyMode};
use axle::schedule::check::check;
use axle::schedule::{assign, render, schedule_module, Heuristic, HloRules};
use axle_codegen_cpu::CpuOptions;
use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult};

fn in_pool<T: Send>(threads: usize, f: impl FnOnce() -> T + Send) -> T {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("a thread pool")
        .install(f)
}

/// Schedules (best heuristic) and assigns `m`, checks the assignment, and returns its JSON
/// report (which the 1- and 8-thread runs must agree on) and temporary bytes.
fn assign_checked(mut m: Module) -> Result<(String, u64), String> {
    schedule_module(&mut m, Heuristic::Best).map_err(|e| e.to_string())?;
    axle::ir::verify(&m).map_err(|e| format!("the scheduled module does not verify: {e}"))?;
    let a = assign(&m, &HloRules).map_err(|e| e.to_string())?;
    check(&m, &a, &HloRules).map_err(|e| format!("checker: {e}"))?;
    Ok((render::json(&m, &a, None).to_string(), a.temp_bytes))
}

/// The assignment the cpu backend compiles `m` with, checked under its rules; its JSON report
/// and temporary bytes.
fn cpu_assignment_checked(m: &Module) -> Result<(String, u64), String> {
    let (m, a, rules) = axle_codegen_cpu::buffer_assignment(m, &CpuOptions::default())
        .map_err(|e| format!("cpu: {e}"))?;
    check(&m, &a, &rules).map_err(|e| format!("checker (cpu rules): {e}"))?;
    Ok((render::json(&m, &a, None).to_string(), a.temp_bytes))
}

/// [`cpu_assignment_checked`] at 1 and 8 threads, which must agree; the temporary bytes.
fn cpu_assignment_checked_at_1_and_8(m: &Module) -> Result<u64, String> {
    let one = in_pool(1, || cpu_assignment_checked(m))?;
    let eight = in_pool(8, || cpu_assignment_checked(m))?;
    if one != eight {
        return Err("the cpu assignment differs at 8 threads".into());
    }
    Ok(one.1)
}

fn optimized(m: &Module, pipeline: &str) -> Result<Module, String> {
    let mut out = m.clone();
    let opts = PassManagerOptions {
        verify: VerifyMode::Each,
        ..Default::default()
    };
    axle::passes::optimize(&mut out, pipeline, opts).map_err(|e| e.to_string())?;
    Ok(out)
}

fn generated_modules_assign_safely(r: Recipe, picks: Vec<u8>) -> TestResult {
    let pipeline = axle::passes::pipeline_from_picks(&picks, 8);
    let m = match optimized(&r.build(), &pipeline) {
        Ok(m) => m,
        Err(e) => return TestResult::error(format!("{pipeline}: {e}")),
    };
    let one = in_pool(1, || assign_checked(m.clone()));
    let eight = in_pool(8, || assign_checked(m.clone()));
    match (one, eight) {
        (Ok(a), Ok(b)) if a == b => match cpu_assignment_checked_at_1_and_8(&m) {
            Ok(_) => TestResult::passed(),
            Err(e) => TestResult::error(format!("{pipeline}: {e}\n{}", print_module(&m))),
        },
        (Ok(_), Ok(_)) => TestResult::error(format!("{pipeline}: differs at 8 threads")),
        (Err(e), _) | (_, Err(e)) => {
            TestResult::error(format!("{pipeline}: {e}\n{}", print_module(&m)))
        }
    }
}

#[test]
fn generated_modules_after_random_pipelines_assign_safely() {
    QuickCheck::new()
        .tests(150)
        .quickcheck(generated_modules_assign_safely as fn(Recipe, Vec<u8>) -> TestResult);
}

/// A loop program: state `(s32[] counter, f32[8] x W, f32[4,8] carry)`; the body computes new
/// vectors from the old ones with a few ops, may pass some through, swap two, update a row of
/// the carry in place, branch on the counter and call a helper.
#[derive(Clone, Debug)]
struct LoopRecipe {
    width: u8,
    ops: Vec<(u8, u8, u8)>,
    keep: u8,
    swap: bool,
    dus: bool,
    branch: bool,
    call: bool,
    fresh_init: bool,
    after: u8,
}

impl Arbitrary for LoopRecipe {
    fn arbitrary(g: &mut Gen) -> Self {
        let n = usize::arbitrary(g) % 6;
        LoopRecipe {
            width: 1 + u8::arbitrary(g) % 3,
            ops: (0..n)
                .map(|_| (u8::arbitrary(g), u8::arbitrary(g), u8::arbitrary(g)))
                .collect(),
            keep: u8::arbitrary(g),
            swap: bool::arbitrary(g),
            dus: bool::arbitrary(g),
            branch: bool::arbitrary(g),
            call: bool::arbitrary(g),
            fresh_init: bool::arbitrary(g),
            after: u8::arbitrary(g) % 3,
        }
    }

    fn shrink(&self) -> Box<dyn Iterator<Item = Self>> {
        let this = self.clone();
        Box::new(self.ops.shrink().map(move |ops| LoopRecipe {
            ops,
            ..this.clone()
        }))
    }
}

impl LoopRecipe {
    fn hlo(&self) -> String {
        let w = self.width as usize;
        let vec = "f32[8]{0}";
        let carry = "f32[4,8]{1,0}";
        let mut state = String::from("(s32[]");
        for _ in 0..w {
            let _ = write!(state, ", {vec}");
        }
        let _ = write!(state, ", {carry})");
        let mut t = String::from("HloModule loop\n\n");
        let _ = write!(
            t,
            "helper {{\n  a = {vec} parameter(0)\n  ROOT n = {vec} negate(a)\n}}\n\n\
             yes {{\n  a = {vec} parameter(0)\n  ROOT e = {vec} exponential(a)\n}}\n\n\
             no {{\n  a = {vec} parameter(0)\n  ROOT e = {vec} sine(a)\n}}\n\n"
        );
        let _ = write!(
            t,
            "cond {{\n  s = {state} parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n  n = s32[] constant(3)\n  ROOT lt = pred[] compare(i, n), direction=LT\n}}\n\n"
        );
        let _ = write!(
            t,
            "body {{\n  s = {state} parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n"
        );
        let mut vals: Vec<String> = Vec::new();
        for k in 0..w {
            let _ = writeln!(t, "  v{k} = {vec} get-tuple-element(s), index={}", k + 1);
            vals.push(format!("v{k}"));
        }
        let _ = writeln!(t, "  acc = {carry} get-tuple-element(s), index={}", w + 1);
        for (n, &(kind, a, b)) in self.ops.iter().enumerate() {
            let x = vals[a as usize % vals.len()].clone();
            let y = vals[b as usize % vals.len()].clone();
            let name = format!("o{n}");
            let line = match kind % 6 {
                0 => format!("{vec} exponential({x})"),
                1 => format!("{vec} add({x}, {y})"),
                2 => format!("{vec} multiply({x}, {y})"),
                3 => format!("{vec} negate({x})"),
                4 if self.call => format!("{vec} call({x}), to_apply=helper"),
                _ => format!("{vec} subtract({x}, {y})"),
            };
            let _ = writeln!(t, "  {name} = {line}");
            vals.push(name);
        }
        if self.branch {
            let x = vals.last().cloned().unwrap_or_default();
            let _ = writeln!(
                t,
                "  two = s32[] constant(2)\n  p = pred[] compare(i, two), direction=LT\n  br = {vec} conditional(p, {x}, {x}), true_computation=yes, false_computation=no"
            );
            vals.push("br".into());
        }
        // The new vectors: the last values computed, some leaves passed through, maybe swapped.
        let mut next: Vec<String> = (0..w)
            .map(|k| {
                if self.keep >> k & 1 == 1 {
                    format!("v{k}")
                } else {
                    vals[vals.len() - 1 - k % vals.len()].clone()
                }
            })
            .collect();
        if self.swap && w >= 2 {
            next.swap(0, 1);
        }
        let new_acc = if self.dus {
            let _ = writeln!(
                t,
                "  row = f32[1,8]{{1,0}} reshape({})\n  zero = s32[] constant(0)\n  nacc = {carry} dynamic-update-slice(acc, row, i, zero)",
                next[0]
            );
            "nacc"
        } else {
            "acc"
        };
        let _ = writeln!(
            t,
            "  one = s32[] constant(1)\n  j = s32[] add(i, one)\n  ROOT t = {state} tuple(j, {}, {new_acc})\n}}\n",
            next.join(", ")
        );
        let _ = write!(
            t,
            "ENTRY main {{\n  x = {vec} parameter(0)\n  c = {carry} parameter(1)\n  zero = s32[] constant(0)\n"
        );
        let mut init = Vec::new();
        for k in 0..w {
            if self.fresh_init {
                let _ = writeln!(t, "  x{k} = {vec} exponential(x)");
                init.push(format!("x{k}"));
            } else {
                init.push("x".into());
            }
        }
        let c0 = if self.fresh_init {
            let _ = writeln!(t, "  c0 = {carry} negate(c)");
            "c0"
        } else {
            "c"
        };
        let _ = writeln!(
            t,
            "  init = {state} tuple(zero, {}, {c0})\n  loop = {state} while(init), condition=cond, body=body",
            init.join(", ")
        );
        let _ = writeln!(t, "  r1 = {vec} get-tuple-element(loop), index=1");
        let root = match self.after {
            0 => format!("  ROOT out = {state} copy(loop)"),
            1 => format!(
                "  r2 = {carry} get-tuple-element(loop), index={}\n  y = {vec} add(r1, x)\n  ROOT out = ({vec}, {carry}, {vec}) tuple(y, r2, r1)",
                w + 1
            ),
            _ => format!("  ROOT out = {vec} multiply(r1, {})", init[0]),
        };
        let _ = writeln!(t, "{root}\n}}");
        t
    }
}

fn loops_assign_safely(r: LoopRecipe) -> TestResult {
    let text = r.hlo();
    let m = match parse_module(&text) {
        Ok(m) => m,
        Err(e) => return TestResult::error(format!("{}\n{text}", e.render("generated"))),
    };
    if let Err(e) = axle::ir::verify(&m) {
        return TestResult::error(format!("{e}\n{text}"));
    }
    match assign_checked(m.clone()).and_then(|_| cpu_assignment_checked(&m)) {
        Ok(_) => TestResult::passed(),
        Err(e) => TestResult::error(format!("{e}\n{text}")),
    }
}

#[test]
fn generated_loops_assign_safely() {
    QuickCheck::new()
        .tests(200)
        .quickcheck(loops_assign_safely as fn(LoopRecipe) -> TestResult);
}

/// Every corpus case's `.hlo` and `.opt.hlo`, loaded: `(case name, file name, module)`; files
/// that do not load are pushed to `failures`.
fn corpus_files(failures: &mut Vec<String>) -> Vec<(String, String, Module)> {
    let dir = axle_testkit::shared_dir().join("corpus");
    let cases = axle_testkit::manifest_cases(&dir);
    assert!(
        cases.len() >= 30,
        "expected the corpus, found {}",
        cases.len()
    );
    let mut out = Vec::new();
    for case in &cases {
        let name = case["name"].as_str().expect("a case name");
        for file in [format!("{name}.hlo"), format!("{name}.opt.hlo")] {
            match axle_testkit::load(&dir, &file) {
                Ok(m) => out.push((name.to_string(), file, m)),
                Err(e) => failures.push(format!("{file}: {e}")),
            }
        }
    }
    out
}

/// Causal attention over 4 heads of 1024 positions: `batch-split` runs it one head at a time
/// (4 MiB of scores per head), and the 1 MiB mask is shared by every head's softmax.
const ATTENTION_SLICES: &str = r#"HloModule attention_slices

max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  q = f32[4,1024,64]{2,1,0} parameter(0)
  k = f32[4,1024,64]{2,1,0} parameter(1)
  v = f32[4,1024,64]{2,1,0} parameter(2)
  s = f32[4,1024,1024]{2,1,0} dot(q, k), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={2}
  i0 = s32[1024,1024]{1,0} iota(), iota_dimension=0
  i1 = s32[1024,1024]{1,0} iota(), iota_dimension=1
  mask = pred[1024,1024]{1,0} compare(i0, i1), direction=GE
  mb = pred[4,1024,1024]{2,1,0} broadcast(mask), dimensions={1,2}
  low = f32[] constant(-3.4028235e38)
  lowb = f32[4,1024,1024]{2,1,0} broadcast(low), dimensions={}
  sm = f32[4,1024,1024]{2,1,0} select(mb, s, lowb)
  ninf = f32[] constant(-inf)
  mx = f32[4,1024]{1,0} reduce(sm, ninf), dimensions={2}, to_apply=max
  mxb = f32[4,1024,1024]{2,1,0} broadcast(mx), dimensions={0,1}
  d = f32[4,1024,1024]{2,1,0} subtract(sm, mxb)
  e = f32[4,1024,1024]{2,1,0} exponential(d)
  zero = f32[] constant(0)
  sum = f32[4,1024]{1,0} reduce(e, zero), dimensions={2}, to_apply=add
  sumb = f32[4,1024,1024]{2,1,0} broadcast(sum), dimensions={0,1}
  p = f32[4,1024,1024]{2,1,0} divide(e, sumb)
  ROOT o = f32[4,1024,64]{2,1,0} dot(p, v), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}
}
"#;

/// A clipped Adam step: the gradient scaled by its global norm is read by both moments'
/// updates (and, through them, the parameter's).
const CLIPPED_ADAM: &str = r#"HloModule clipped_adam

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  p = f32[512,512]{1,0} parameter(0)
  g = f32[512,512]{1,0} parameter(1)
  m = f32[512,512]{1,0} parameter(2)
  v = f32[512,512]{1,0} parameter(3)
  g2 = f32[512,512]{1,0} multiply(g, g)
  zero = f32[] constant(0)
  ss = f32[] reduce(g2, zero), dimensions={0,1}, to_apply=add
  norm = f32[] sqrt(ss)
  one = f32[] constant(1)
  big = f32[] maximum(norm, one)
  scale = f32[] divide(one, big)
  sb = f32[512,512]{1,0} broadcast(scale), dimensions={}
  gs = f32[512,512]{1,0} multiply(g, sb)
  b1 = f32[512,512]{1,0} broadcast(f32[] constant(0.9)), dimensions={}
  c1 = f32[512,512]{1,0} broadcast(f32[] constant(0.1)), dimensions={}
  mn = f32[512,512]{1,0} add(f32[512,512]{1,0} multiply(m, b1), f32[512,512]{1,0} multiply(gs, c1))
  b2 = f32[512,512]{1,0} broadcast(f32[] constant(0.999)), dimensions={}
  c2 = f32[512,512]{1,0} broadcast(f32[] constant(0.001)), dimensions={}
  gs2 = f32[512,512]{1,0} multiply(gs, gs)
  vn = f32[512,512]{1,0} add(f32[512,512]{1,0} multiply(v, b2), f32[512,512]{1,0} multiply(gs2, c2))
  eps = f32[512,512]{1,0} broadcast(f32[] constant(1e-8)), dimensions={}
  den = f32[512,512]{1,0} add(f32[512,512]{1,0} sqrt(vn), eps)
  lr = f32[512,512]{1,0} broadcast(f32[] constant(0.001)), dimensions={}
  step = f32[512,512]{1,0} multiply(f32[512,512]{1,0} divide(mn, den), lr)
  pn = f32[512,512]{1,0} subtract(p, step)
  ROOT t = (f32[512,512]{1,0}, f32[512,512]{1,0}, f32[512,512]{1,0}) tuple(pn, mn, vn)
}
"#;

/// The cpu backend's temporary bytes for `text` after the `cpu` pipeline (assignment checked,
/// the same at 1 and 8 threads).
fn cpu_temp_bytes(text: &str) -> u64 {
    let m = parse_module(text).expect("the module parses");
    let cpu = axle::passes::standard_pipeline("cpu").expect("the cpu pipeline");
    let m = optimized(&m, cpu).expect("the cpu pipeline runs");
    cpu_assignment_checked_at_1_and_8(&m).expect("a checked assignment")
}

#[test]
fn batch_slices_sharing_a_mask_keep_one_slice_live() {
    // At the peak the live set is the mask and the scores of the head in flight (the softmax
    // writes over its scores): 1 MiB + 4 MiB. Allow a second head's scores; merging the four
    // heads' softmaxes into one kernel (they share the mask) holds every head's scores and
    // softmax at once, 33 MiB.
    let mib = 1u64 << 20;
    let temp = cpu_temp_bytes(ATTENTION_SLICES);
    assert!(temp <= mib + 2 * 4 * mib, "{temp} temporary bytes");
}

#[test]
fn a_producer_of_merged_siblings_writes_no_temporary() {
    // The live set holds no array of the gradient's shape: the scaled gradient is computed in
    // the fusion that updates the moments, so at most the clipping scale (one scalar, one
    // 64-byte aligned slot) is a temporary; written out, the scaled gradient is 1 MiB.
    let temp = cpu_temp_bytes(CLIPPED_ADAM);
    assert!(temp <= 64, "{temp} temporary bytes");
}

#[test]
fn every_corpus_case_assigns_safely_and_opt_modules_need_no_more_than_xla() {
    let dir = axle_testkit::shared_dir();
    let xla: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("baseline/xla_memory.json")).expect("xla_memory.json"),
    )
    .expect("xla_memory.json parses");
    let mut failures = Vec::new();
    let mut compared = 0;
    for (name, file, m) in corpus_files(&mut failures) {
        let mut runs = vec![("as is", m.clone())];
        if file.ends_with(".opt.hlo") {
            // XLA's own schedule, as printed (is_scheduled=true).
            match assign(&m, &HloRules) {
                Ok(a) => {
                    if let Err(e) = check(&m, &a, &HloRules) {
                        failures.push(format!("{file} with XLA's schedule: checker: {e}"));
                    }
                }
                Err(e) => failures.push(format!("{file} with XLA's schedule: {e}")),
            }
        } else {
            let simplify = axle::passes::standard_pipeline("simplify").expect("simplify");
            match optimized(&m, simplify) {
                Ok(s) => runs.push(("simplify", s)),
                Err(e) => failures.push(format!("{file}: simplify: {e}")),
            }
        }
        for (how, m) in runs {
            match assign_checked(m) {
                Ok((_, temp)) => {
                    let xla_temp = xla[format!("{name}.hlo")]["temp"].as_u64();
                    if let (true, Some(x)) = (file.ends_with(".opt.hlo"), xla_temp) {
                        compared += 1;
                        if temp > x {
                            failures.push(format!("{file}: {temp} temporary bytes, XLA needs {x}"));
                        }
                    }
                }
                Err(e) => failures.push(format!("{file} ({how}): {e}")),
            }
        }
    }
    assert!(compared >= 30, "only {compared} cases compared with XLA");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_corpus_case_cpu_assignment_is_safe_the_same_at_1_and_8_threads_and_no_larger_than_xla() {
    let cpu = axle::passes::standard_pipeline("cpu").expect("the cpu pipeline");
    let dir = axle_testkit::shared_dir();
    let xla: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("baseline/xla_memory.json")).expect("xla_memory.json"),
    )
    .expect("xla_memory.json parses");
    let mut failures = Vec::new();
    let mut compared = 0;
    for (name, file, m) in corpus_files(&mut failures) {
        // Axle's default pipeline for the `.hlo`; XLA's module and schedule as given.
        let m = if file.ends_with(".opt.hlo") {
            m
        } else {
            match optimized(&m, cpu) {
                Ok(m) => m,
                Err(e) => {
                    failures.push(format!("{file}: cpu pipeline: {e}"));
                    continue;
                }
            }
        };
        match cpu_assignment_checked_at_1_and_8(&m) {
            // Axle's own pipeline and the cpu rules on XLA's module both need no more
            // temporary bytes than XLA.
            Ok(temp) => {
                if let Some(x) = xla[format!("{name}.hlo")]["temp"].as_u64() {
                    compared += 1;
                    if temp > x {
                        failures.push(format!(
                            "{file} (cpu): {temp} temporary bytes, XLA needs {x}"
                        ));
                    }
                }
            }
            Err(e) => failures.push(format!("{file}: {e}")),
        }
    }
    assert!(compared >= 60, "only {compared} cases compared with XLA");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_corpus_case_gpu_assignment_is_safe() {
    let gpu = axle::passes::standard_pipeline("gpu").expect("the gpu pipeline");
    let mut failures = Vec::new();
    let mut checked = 0;
    for (_, file, m) in corpus_files(&mut failures) {
        let m = match optimized(&m, gpu) {
            Ok(m) => m,
            Err(e) => {
                failures.push(format!("{file}: gpu pipeline: {e}"));
                continue;
            }
        };
        match axle_codegen_nvptx::buffer_rules::buffer_assignment(&m) {
            Ok((m, a, rules)) => match check(&m, &a, &rules) {
                Ok(_) => checked += 1,
                Err(e) => failures.push(format!("{file}: checker (gpu rules): {e}")),
            },
            Err(e) => failures.push(format!("{file}: gpu: {e}")),
        }
    }
    assert!(checked >= 78, "only {checked} gpu assignments checked");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
