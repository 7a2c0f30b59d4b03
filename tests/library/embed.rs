//! A framework author's client, outside the facade's modules and using only its public API:
//! build a 2-layer MLP with the builder, compile it once on `cpu`, run it 1000 times on borrowed
//! slices into reused outputs, run it from two threads at once, and check that every wrong
//! argument is an error value. Also the compilation cache as a client sees it.

use std::sync::Arc;

use axle::backends::registry;
use axle::cache::CacheOutcome;
use axle::ir::builder::ModuleBuilder;
use axle::ir::{ElementType, Module, Shape};
use axle::{Array, ArrayRef, CacheMode, CompileOptions, Compiled, Error};

const B: usize = 8;
const I: usize = 32;
const H: usize = 64;
const O: usize = 10;

/// `softmax(relu(x @ w1 + b1) @ w2 + b2)`, with numpy-style bias broadcasting.
fn mlp() -> Result<Module, Error> {
    let f32 = ElementType::F32;
    let mut b = ModuleBuilder::new("mlp");
    let mut c = b.computation("main");
    let x = c.parameter(0, Shape::array(f32, &[B as i64, I as i64]), "x")?;
    let w1 = c.parameter(1, Shape::array(f32, &[I as i64, H as i64]), "w1")?;
    let b1 = c.parameter(2, Shape::array(f32, &[H as i64]), "b1")?;
    let w2 = c.parameter(3, Shape::array(f32, &[H as i64, O as i64]), "w2")?;
    let b2 = c.parameter(4, Shape::array(f32, &[O as i64]), "b2")?;
    let h = c.matmul(x, w1)?;
    let h = c.add_broadcast(h, b1)?;
    let h = c.relu(h)?;
    let y = c.matmul(h, w2)?;
    let y = c.add_broadcast(y, b2)?;
    let y = c.softmax(y, -1)?;
    let main = c.finish(y)?;
    b.entry(main);
    Ok(b.build()?)
}

fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let k = (i as u32)
                .wrapping_mul(2654435761)
                .wrapping_add(seed.wrapping_mul(40503));
            ((k >> 8) % 2001) as f32 / 1000.0 - 1.0
        })
        .collect()
}

struct Inputs {
    x: Vec<f32>,
    w1: Vec<f32>,
    b1: Vec<f32>,
    w2: Vec<f32>,
    b2: Vec<f32>,
}

impl Inputs {
    fn new(seed: u32) -> Inputs {
        Inputs {
            x: values(B * I, seed),
            w1: values(I * H, seed + 1),
            b1: values(H, seed + 2),
            w2: values(H * O, seed + 3),
            b2: values(O, seed + 4),
        }
    }

    fn args(&self) -> Vec<ArrayRef<'_>> {
        vec![
            ArrayRef::new(&self.x, &[B as i64, I as i64]).unwrap(),
            ArrayRef::new(&self.w1, &[I as i64, H as i64]).unwrap(),
            ArrayRef::vector(&self.b1),
            ArrayRef::new(&self.w2, &[H as i64, O as i64]).unwrap(),
            ArrayRef::vector(&self.b2),
        ]
    }

    /// The MLP in plain Rust (f64 accumulation).
    fn expected(&self) -> Vec<f32> {
        let mut out = vec![0f32; B * O];
        for r in 0..B {
            let h: Vec<f64> = (0..H)
                .map(|j| {
                    let s: f64 = (0..I)
                        .map(|k| self.x[r * I + k] as f64 * self.w1[k * H + j] as f64)
                        .sum();
                    (s + self.b1[j] as f64).max(0.0)
                })
                .collect();
            let y: Vec<f64> = (0..O)
                .map(|j| {
                    (0..H)
                        .map(|k| h[k] * self.w2[k * O + j] as f64)
                        .sum::<f64>()
                        + self.b2[j] as f64
                })
                .collect();
            let m = y.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = y.iter().map(|v| (v - m).exp()).collect();
            let s: f64 = e.iter().sum();
            for j in 0..O {
                out[r * O + j] = (e[j] / s) as f32;
            }
        }
        out
    }
}

fn assert_close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        // The corpus's f32 tolerance for programs with transcendentals.
        assert!(
            (g - w).abs() <= 1e-5 + 1e-4 * w.abs(),
            "element {i}: {g} vs {w}"
        );
    }
}

#[test]
fn build_compile_and_run_1000_times_without_copies() -> Result<(), Error> {
    let exe = axle::compile("cpu", mlp()?, &CompileOptions::default().threads(1))?;
    assert_eq!(exe.backend(), "cpu");
    assert_eq!(exe.param_shapes().len(), 5);
    assert_eq!(exe.output_shapes()[0].dims.as_ref(), &[B as i64, O as i64]);
    let inputs = Inputs::new(7);
    let want = inputs.expected();
    let args = inputs.args();
    let mut outs = exe.alloc_outputs()?;
    let out_ptr = outs[0].bytes().as_ptr();
    for _ in 0..1000 {
        exe.run(&args, &mut outs)?;
    }
    // The results were written in place, into the caller's array.
    assert_eq!(outs[0].bytes().as_ptr(), out_ptr);
    assert_close(outs[0].as_slice::<f32>()?, &want);
    // The interpreter agrees, through the same API.
    let interp = axle::compile("interpreter", mlp()?, &CompileOptions::default())?;
    let r = interp.call(&args)?;
    assert_close(r[0].as_slice::<f32>()?, &want);
    Ok(())
}

#[test]
fn concurrent_calls_from_two_threads_agree() -> Result<(), Error> {
    let exe = Arc::new(axle::compile("cpu", mlp()?, &CompileOptions::default())?);
    let serial: Vec<Vec<f32>> = (0..2)
        .map(|t| {
            let inputs = Inputs::new(100 + t);
            exe.call(&inputs.args()).unwrap()[0]
                .to_vec::<f32>()
                .unwrap()
        })
        .collect();
    let handles: Vec<_> = (0..2u32)
        .map(|t| {
            let exe = Arc::clone(&exe);
            std::thread::spawn(move || -> Result<Vec<f32>, Error> {
                let inputs = Inputs::new(100 + t);
                let args = inputs.args();
                let mut outs = exe.alloc_outputs()?;
                for _ in 0..200 {
                    exe.run(&args, &mut outs)?;
                }
                Ok(outs[0].to_vec::<f32>()?)
            })
        })
        .collect();
    for (t, h) in handles.into_iter().enumerate() {
        let got = h.join().expect("the thread finished")?;
        assert_eq!(got, serial[t], "thread {t}");
    }
    Ok(())
}

#[test]
fn concurrent_callers_of_a_split_kernel_agree() -> Result<(), Error> {
    // A 256^3 product is worth splitting across the pool; two callers at once find it busy in
    // turn and run on their own threads, with the same results.
    let n = 256i64;
    let mut b = ModuleBuilder::new("matmul");
    let mut c = b.computation("main");
    let x = c.parameter(0, Shape::array(ElementType::F32, &[n, n]), "x")?;
    let y = c.parameter(1, Shape::array(ElementType::F32, &[n, n]), "y")?;
    let p = c.matmul(x, y)?;
    let main = c.finish(p)?;
    b.entry(main);
    let exe = Arc::new(axle::compile(
        "cpu",
        b.build()?,
        &CompileOptions::default().threads(2),
    )?);
    let xs = values((n * n) as usize, 5);
    let ys = values((n * n) as usize, 6);
    let want = {
        let args = [ArrayRef::new(&xs, &[n, n])?, ArrayRef::new(&ys, &[n, n])?];
        exe.call(&args)?[0].to_vec::<f32>()?
    };
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let (exe, xs, ys) = (Arc::clone(&exe), xs.clone(), ys.clone());
            std::thread::spawn(move || -> Result<Vec<Vec<f32>>, Error> {
                let args = [ArrayRef::new(&xs, &[n, n])?, ArrayRef::new(&ys, &[n, n])?];
                (0..20)
                    .map(|_| Ok(exe.call(&args)?[0].to_vec::<f32>()?))
                    .collect()
            })
        })
        .collect();
    for h in handles {
        for got in h.join().expect("the thread finished")? {
            assert_eq!(got, want);
        }
    }
    Ok(())
}

/// The message of the error a run gives, which must be an `Error::Backend` of `cpu`.
fn run_error(exe: &Compiled, args: &[ArrayRef<'_>], outs: &mut [Array]) -> String {
    match exe.run(args, outs) {
        Err(Error::Backend(e)) => {
            assert_eq!(e.backend, "cpu");
            e.message
        }
        other => panic!("expected a backend error, got {other:?}"),
    }
}

#[test]
fn every_wrong_argument_is_an_error_value() -> Result<(), Error> {
    let exe = axle::compile("cpu", mlp()?, &CompileOptions::default())?;
    let inputs = Inputs::new(1);
    let good = inputs.args();
    let mut outs = exe.alloc_outputs()?;

    // Too few and too many arguments.
    assert_eq!(
        run_error(&exe, &good[..4], &mut outs),
        "5 argument arrays expected, 4 given"
    );
    let mut more = good.clone();
    more.push(ArrayRef::vector(&inputs.b2));
    assert_eq!(
        run_error(&exe, &more, &mut outs),
        "5 argument arrays expected, 6 given"
    );
    // An s32 array of the right byte count for an f32 parameter.
    let ints = vec![0i32; H];
    let mut wrong = good.clone();
    wrong[2] = ArrayRef::vector(&ints);
    assert_eq!(
        run_error(&exe, &wrong, &mut outs),
        "argument 2: f32[64] expected, s32[64] given"
    );
    // The right elements in the wrong dimensions.
    let mut wrong = good.clone();
    wrong[2] = ArrayRef::new(&inputs.b1, &[8, 8])?;
    assert_eq!(
        run_error(&exe, &wrong, &mut outs),
        "argument 2: f32[64] expected, f32[8,8] given"
    );
    // Arguments in the wrong order.
    let mut wrong = good.clone();
    wrong.swap(0, 1);
    assert_eq!(
        run_error(&exe, &wrong, &mut outs),
        "argument 0: f32[8,32] expected, f32[32,64] given"
    );
    // Outputs of the wrong number or shape.
    assert_eq!(
        run_error(&exe, &good, &mut []),
        "1 output array expected, 0 given"
    );
    let mut bad_out = vec![Array::zeros(ElementType::F64, &[B as i64, O as i64])?];
    assert_eq!(
        run_error(&exe, &good, &mut bad_out),
        "output 0: f32[8,10] expected, f64[8,10] given"
    );
    // A view whose length disagrees with its dimensions cannot even be made.
    assert!(matches!(
        ArrayRef::new(&inputs.b1, &[65]),
        Err(axle::ArrayError::Shape(_))
    ));
    assert!(ArrayRef::new(&inputs.b1, &[-64]).is_err());
    // Typed reads check the element type.
    exe.run(&good, &mut outs)?;
    assert_eq!(
        outs[0].as_slice::<f64>(),
        Err(axle::ArrayError::Type {
            wanted: ElementType::F64,
            actual: ElementType::F32
        })
    );
    // A failed run left the outputs usable: the next good run succeeds.
    exe.run(&good, &mut outs)?;
    assert_close(outs[0].as_slice::<f32>()?, &inputs.expected());
    Ok(())
}

#[test]
fn typed_options_go_through_the_registry() -> Result<(), Error> {
    let platform = registry().get("cpu")?;
    for (threads, level) in [(1, axle::OptLevel::O0), (2, axle::OptLevel::O3)] {
        let opts = CompileOptions::default().threads(threads).opt_level(level);
        let exe = platform.compiler().compile(mlp()?, &opts)?;
        let cpu = exe
            .as_any()
            .and_then(|a| a.downcast_ref::<axle::cpu::CpuExecutable>())
            .expect("a cpu executable");
        assert_eq!(cpu.jitted().threads(), threads);
        let c = Compiled::new(platform.clone(), exe);
        let inputs = Inputs::new(3);
        assert_close(
            c.call(&inputs.args())?[0].as_slice::<f32>()?,
            &inputs.expected(),
        );
    }
    Ok(())
}

#[test]
fn the_cache_skips_code_generation_and_survives_corruption() -> Result<(), Error> {
    let dir = tempfile::tempdir().unwrap();
    let opts = CompileOptions::default().cache(CacheMode::Dir(dir.path().to_path_buf()));
    let inputs = Inputs::new(11);
    let want = inputs.expected();
    let first = axle::compile("cpu", mlp()?, &opts)?;
    assert_eq!(first.stats().cache, CacheOutcome::Miss { stored: true });
    let second = axle::compile("cpu", mlp()?, &opts)?;
    assert_eq!(second.stats().cache, CacheOutcome::Hit);
    assert_close(second.call(&inputs.args())?[0].as_slice::<f32>()?, &want);
    // Other options are other entries.
    let o0 = axle::compile("cpu", mlp()?, &opts.clone().opt_level(axle::OptLevel::O1))?;
    assert_eq!(o0.stats().cache, CacheOutcome::Miss { stored: true });
    // The thread count shapes the GEMM's code: another entry too.
    let t3 = axle::compile("cpu", mlp()?, &opts.clone().threads(3))?;
    assert_eq!(t3.stats().cache, CacheOutcome::Miss { stored: true });
    // One module entry per compilation; the kernel cache keeps the kernel modules beside them.
    assert_eq!(walk(&dir.path().join("cpu")).len(), 3);
    assert!(!walk(&dir.path().join("cpu-kernels")).is_empty());
    // Corrupt every entry, kernel modules too: the next compilation recompiles and rewrites.
    let entries: Vec<_> = walk(dir.path());
    for e in &entries {
        let mut b = std::fs::read(e).unwrap();
        let n = b.len();
        b[n / 2] ^= 0x55;
        std::fs::write(e, b).unwrap();
    }
    let third = axle::compile("cpu", mlp()?, &opts)?;
    assert_eq!(third.stats().cache, CacheOutcome::Miss { stored: true });
    assert_close(third.call(&inputs.args())?[0].as_slice::<f32>()?, &want);
    let fourth = axle::compile("cpu", mlp()?, &opts)?;
    assert_eq!(fourth.stats().cache, CacheOutcome::Hit);
    // A pipeline is part of the key, and a hit gives back the module it produced.
    let piped = opts.clone().pipeline("simplify");
    let a = axle::compile("cpu", mlp()?, &piped)?;
    let b = axle::compile("cpu", mlp()?, &piped)?;
    assert_eq!(a.stats().cache, CacheOutcome::Miss { stored: true });
    assert_eq!(b.stats().cache, CacheOutcome::Hit);
    assert_eq!(
        axle::ir::print_module(a.executable().module()),
        axle::ir::print_module(b.executable().module())
    );
    assert_close(b.call(&inputs.args())?[0].as_slice::<f32>()?, &want);
    Ok(())
}

fn walk(d: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(d).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn compile_text_reports_where_the_text_is_wrong() {
    let e = axle::compile_text(
        "cpu",
        "HloModule m\nENTRY e {\n  x = f32[2] bogus()\n}\n",
        &CompileOptions::default(),
    )
    .err()
    .expect("an error");
    let msg = e.to_string();
    assert!(msg.starts_with("<hlo>:3:"), "{msg}");
}

/// A module with collectives compiled for one device runs on the interpreter as a one-device
/// mesh run (every group is the device itself), as XLA runs one replica: an all-reduce gives
/// its operand and replica-id gives 0, through the host path and the buffer path alike.
#[test]
fn interpreter_runs_collectives_on_one_device() -> Result<(), Error> {
    let text = "HloModule m\n\nadd {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  \
                ROOT s = f32[] add(x, y)\n}\n\nENTRY e {\n  p = f32[3] parameter(0)\n  \
                r = f32[3] all-reduce(p), to_apply=add\n  id = u32[] replica-id()\n  \
                ROOT t = (f32[3], u32[]) tuple(r, id)\n}\n";
    let exe = axle::compile_text("interpreter", text, &CompileOptions::default())?;
    let x = [1.5f32, -2.0, 4.0];
    let out = exe.call(&[ArrayRef::vector(&x)])?;
    assert_eq!(out[0].to_vec::<f32>()?, x);
    assert_eq!(out[1].to_vec::<u32>()?, [0]);
    let platform = registry().get("interpreter")?;
    let lit = axle::ir::Literal::Array(ArrayRef::vector(&x).to_literal());
    let got =
        axle::run::run_literals(&*platform, exe.executable(), &[lit]).map_err(Error::Backend)?;
    assert_eq!(got[0], out[0].to_literal());
    Ok(())
}

/// The cpu backend runs one device: an all-reduce or all-gather among the one device (no
/// groups, `{}`, `{{0}}`) is its operand, as on the interpreter, and so are the collectives the
/// simplification leaves (a permute from the device to itself, a broadcast, the async forms),
/// which the runtime runs on a world of one device; one written for two devices is still
/// refused by name.
#[test]
fn cpu_runs_collectives_of_the_one_device() -> Result<(), Error> {
    let head = "HloModule m\n\nadd {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  \
                ROOT s = f32[] add(x, y)\n}\n\nENTRY e {\n  p = f32[3] parameter(0)\n";
    let text = format!(
        "{head}  a = f32[3] all-reduce(p), to_apply=add\n  \
         b = f32[3] all-reduce(a), replica_groups={{{{0}}}}, to_apply=add\n  \
         ROOT g = f32[3] all-gather(b), replica_groups={{}}, dimensions={{0}}\n}}\n"
    );
    let x = [1.5f32, -2.0, 4.0];
    for backend in ["cpu", "interpreter"] {
        let exe = axle::compile_text(backend, &text, &CompileOptions::default())?;
        let out = exe.call(&[ArrayRef::vector(&x)])?;
        assert_eq!(out[0].to_vec::<f32>()?, x, "{backend}");
    }
    let rest = format!(
        "{head}  c = f32[3] collective-permute(p), channel_id=1, source_target_pairs={{{{0,0}}}}\n  \
         d = f32[3] collective-broadcast(c), replica_groups={{{{0}}}}\n  \
         s = (f32[3], f32[3]) collective-permute-start(d), channel_id=2, source_target_pairs={{{{0,0}}}}\n  \
         e = f32[3] collective-permute-done(s)\n  \
         ROOT t = f32[3] add(e, p)\n}}\n"
    );
    let twice: Vec<f32> = x.iter().map(|v| v + v).collect();
    for backend in ["cpu", "interpreter"] {
        let exe = axle::compile_text(backend, &rest, &CompileOptions::default())?;
        let out = exe.call(&[ArrayRef::vector(&x)])?;
        assert_eq!(out[0].to_vec::<f32>()?, twice, "{backend}");
    }
    let two = format!(
        "{head}  ROOT a = f32[3] all-reduce(p), replica_groups={{{{0,1}}}}, to_apply=add\n}}\n"
    );
    // A program for two devices compiles (it runs with `--devices 2`); one device alone
    // cannot run it.
    let exe = axle::compile_text("cpu", &two, &CompileOptions::default())?;
    let Err(e) = exe.call(&[ArrayRef::vector(&x)]) else {
        panic!("an all-reduce of two devices ran on one");
    };
    assert!(e.to_string().contains("needs a multi-device run"), "{e}");
    Ok(())
}
