//! The `cpu` backend on several devices of one process: every case of `testkit/collectives`
//! (JAX 0.10.2 at 2, 4 and 8 devices) compiled once with the `cpu` pipeline and run on as many
//! device threads, from XLA's optimized per-device module (`NAME.opt.hlo`, each device on its
//! shards) and from JAX's `shard_map` module (`NAME.hlo`, every device on the global inputs),
//! against XLA's outputs within the manifest's tolerances; compiled for 1 and for 3 kernel
//! threads, which must give the same bits. A module of the `cpu` test binary.

use std::path::PathBuf;
use std::time::Duration;

use axle::backend::CompileOptions;
use axle::backends::registry;
use axle::ir::collective::DeviceMesh;
use axle::ir::{compare_arrays, parse_module, read_npy_as, ArrayLiteral, Shape, Tolerance};
use serde_json::Value;

const TIMEOUT: Duration = Duration::from_secs(60);

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testkit/collectives")
}

fn tolerance(v: &Value) -> Result<Tolerance, String> {
    match v {
        Value::String(s) if s == "exact" => Ok(Tolerance::Exact),
        Value::Object(o) => Ok(Tolerance::Close {
            rtol: o["rtol"].as_f64().ok_or("bad rtol")?,
            atol: o["atol"].as_f64().ok_or("bad atol")?,
        }),
        _ => Err(format!("bad tolerance {v}")),
    }
}

/// Every device's output leaves for case `name` on `n` devices, from `NAME.opt.hlo` (`opt`) or
/// `NAME.hlo`, compiled for `threads` kernel threads.
fn run(name: &str, n: u32, opt: bool, threads: usize) -> Result<Vec<Vec<ArrayLiteral>>, String> {
    let d = dir();
    let file = if opt {
        format!("{name}.opt.hlo")
    } else {
        format!("{name}.hlo")
    };
    let text = std::fs::read_to_string(d.join(&file)).map_err(|e| format!("{file}: {e}"))?;
    let m = parse_module(&text).map_err(|e| e.render(&file))?;
    let mesh = DeviceMesh::for_module(&m, n)?;
    let params: Vec<_> = m
        .params(m.entry())
        .iter()
        .map(|&p| match m.shape(p) {
            Shape::Array(a) => Ok(a.ty),
            _ => Err(format!("{file}: a parameter is not an array")),
        })
        .collect::<Result<_, _>>()?;
    let mut inputs = Vec::new();
    for dev in 0..n {
        let mut a = Vec::new();
        for (k, &ty) in params.iter().enumerate() {
            let f = if opt {
                d.join(format!("{name}.d{dev}.in{k}.npy"))
            } else {
                d.join(format!("{name}.in{k}.npy"))
            };
            a.push(read_npy_as(&f, ty).map_err(|e| format!("{f:?}: {e}"))?);
        }
        inputs.push(a);
    }
    let platform = registry().get("cpu").map_err(|e| e.to_string())?;
    let exe = platform
        .compiler()
        .compile(
            m,
            &CompileOptions {
                pipeline: Some("cpu".into()),
                threads: Some(threads),
                ..Default::default()
            },
        )
        .map_err(|e| format!("{file}: {e}"))?;
    let j = exe
        .as_any()
        .and_then(|a| a.downcast_ref::<axle::cpu::CpuExecutable>())
        .ok_or("not a cpu executable")?
        .jitted();
    let refs: Vec<Vec<&[u8]>> = inputs
        .iter()
        .map(|a| a.iter().map(|l| &l.data[..]).collect())
        .collect();
    let r = axle_codegen_cpu::execute_devices(j, mesh, &refs, 1, TIMEOUT)
        .map_err(|e| format!("{file}: {}", e.message))?;
    Ok(r.outputs
        .iter()
        .map(|o| {
            o.iter()
                .zip(j.output_shapes())
                .map(|(b, s)| ArrayLiteral {
                    shape: s.clone(),
                    data: b.bytes().to_vec(),
                })
                .collect()
        })
        .collect())
}

fn check_case(case: &Value, opt: bool) -> Result<(), String> {
    let name = case["name"].as_str().ok_or("no name")?;
    let n = case["devices"].as_u64().ok_or("no devices")? as u32;
    let got = run(name, n, opt, 1)?;
    let tols: Vec<&Value> = match &case["tolerance"] {
        Value::Array(v) => v.iter().collect(),
        t => vec![t; case["outputs"].as_u64().unwrap_or(0) as usize],
    };
    for (d, outs) in got.iter().enumerate() {
        if outs.len() != tols.len() {
            return Err(format!(
                "device {d}: {} outputs, expected {}",
                outs.len(),
                tols.len()
            ));
        }
        for (k, o) in outs.iter().enumerate() {
            let f = if opt {
                dir().join(format!("{name}.d{d}.out{k}.npy"))
            } else {
                dir().join(format!("{name}.out{k}.npy"))
            };
            let want = read_npy_as(&f, o.ty()).map_err(|e| format!("{f:?}: {e}"))?;
            compare_arrays(&want, o, tolerance(tols[k])?)
                .map_err(|e| format!("device {d} out{k}: {e}"))?;
        }
    }
    if run(name, n, opt, 3)? != got {
        return Err("3 kernel threads gave other bits than 1".into());
    }
    Ok(())
}

fn all_cases(opt: bool) {
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(dir().join("manifest.json")).unwrap())
            .unwrap();
    let cases = manifest.as_array().unwrap();
    assert!(cases.len() >= 12, "the corpus has {} cases", cases.len());
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|c| {
            check_case(c, opt)
                .err()
                .map(|e| format!("{}: {e}", c["name"].as_str().unwrap_or("?")))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn xla_per_device_modules_on_cpu_devices() {
    all_cases(true);
}

#[test]
fn jax_shard_map_modules_on_cpu_devices() {
    all_cases(false);
}

/// The `bf16` psum of JAX's `shard_map` module runs in `f32` under the `cpu` pipeline
/// (`collective-upcast`), as XLA's optimized module does (`region_2.0_promoted`): every device's
/// result has XLA's bits, where an all-reduce rounding after each member (HLO's per-op
/// semantics, the manifest's 2e-2 tolerance) is one `bf16` unit off on some elements.
#[test]
fn bf16_psum_is_summed_in_f32_as_xla_does() {
    let got = run("psum_s32_bf16_4", 4, false, 1).unwrap();
    for (d, outs) in got.iter().enumerate() {
        let f = dir().join("psum_s32_bf16_4.out2.npy");
        let want = read_npy_as(&f, outs[2].ty()).unwrap();
        assert_eq!(
            want.data, outs[2].data,
            "device {d}: the bf16 psum differs from XLA's"
        );
    }
}

/// A collective without a device, and a reducer the runtime does not run, are clear errors.
#[test]
fn collectives_need_devices_and_one_op_reducers() {
    let add = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n";
    let text = format!(
        "HloModule m, num_partitions=2\n\n{add}\nENTRY e {{\n  x = f32[4] parameter(0)\n  ROOT r = f32[4] all-reduce(x), channel_id=1, replica_groups={{{{0,1}}}}, use_global_device_ids=true, to_apply=add\n}}\n"
    );
    let m = parse_module(&text).unwrap();
    let exe = axle_codegen_cpu::compile(&m, &Default::default()).unwrap();
    let x = [0u8; 16];
    let mut outs = exe.alloc_outputs();
    let e = exe.execute(&[&x], &mut outs).unwrap_err().to_string();
    assert!(e.contains("needs a multi-device run"), "{e}");
    let odd = "odd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  s = f32[] add(a, b)\n  ROOT t = f32[] multiply(s, b)\n}\n";
    let text = text
        .replace(add, odd)
        .replace("to_apply=add", "to_apply=odd");
    let m = parse_module(&text).unwrap();
    let Err(e) = axle_codegen_cpu::compile(&m, &Default::default()) else {
        panic!("compiled");
    };
    let e = e.to_string();
    assert!(e.contains("reducer odd is not one"), "{e}");
}

/// `text` on `mesh` with `args(d)` per device, on the cpu backend (compiled as given) and on
/// the evaluator: every device's result leaves, which must agree bit for bit.
fn cpu_and_evaluator(
    text: &str,
    mesh: DeviceMesh,
    args: impl Fn(u32) -> Vec<axle::ir::Literal>,
) -> Vec<Vec<ArrayLiteral>> {
    let m = parse_module(text).unwrap();
    axle::ir::verify(&m).unwrap();
    let args: Vec<Vec<axle::ir::Literal>> = (0..mesh.devices()).map(args).collect();
    let want: Vec<Vec<ArrayLiteral>> =
        axle::analysis::evaluate_devices(&m, m.entry(), mesh, &args, &Default::default(), TIMEOUT)
            .unwrap()
            .into_iter()
            .map(|l| l.into_leaves())
            .collect();
    let exe = axle_codegen_cpu::compile(&m, &Default::default()).unwrap();
    let leaves: Vec<Vec<ArrayLiteral>> = args
        .into_iter()
        .map(|a| a.into_iter().flat_map(|l| l.into_leaves()).collect())
        .collect();
    let refs: Vec<Vec<&[u8]>> = leaves
        .iter()
        .map(|a| a.iter().map(|l| &l.data[..]).collect())
        .collect();
    let r = axle_codegen_cpu::execute_devices(&exe, mesh, &refs, 2, TIMEOUT).unwrap();
    for (d, outs) in r.outputs.iter().enumerate() {
        let got: Vec<&[u8]> = outs.iter().map(|b| b.bytes()).collect();
        let w: Vec<&[u8]> = want[d].iter().map(|l| &l.data[..]).collect();
        assert_eq!(
            got, w,
            "device {d}: the cpu backend and the evaluator differ"
        );
    }
    want
}

fn f32_arg(v: &[f32]) -> axle::ir::Literal {
    axle::ir::Literal::Array(ArrayLiteral {
        shape: axle::ir::ArrayShape::new(axle::ir::ElementType::F32, &[v.len() as i64]),
        data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    })
}

const ADD: &str =
    "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n";

/// What JAX does not emit on CPU: cross-replica groups with replica and partition ids, the
/// `-start`/`-done` pairs, collective-broadcast, all-to-all and iota groups with a transpose,
/// on the cpu backend as on the evaluator; `async-start` is refused by name.
#[test]
fn hand_written_collectives_match_the_evaluator() {
    let text = format!(
        "HloModule m, replica_count=2, num_partitions=2\n\n{ADD}\nENTRY e {{\n  x = f32[2] parameter(0)\n  r = f32[2] all-reduce(x), replica_groups={{}}, to_apply=add\n  rid = u32[] replica-id()\n  pid = u32[] partition-id()\n  ROOT t = (f32[2], u32[], u32[]) tuple(r, rid, pid)\n}}\n"
    );
    let mesh = DeviceMesh {
        replicas: 2,
        partitions: 2,
    };
    let got = cpu_and_evaluator(&text, mesh, |d| vec![f32_arg(&[d as f32, 10.0 * d as f32])]);
    // Device 3 is replica 1, partition 1: it sums with device 1.
    assert_eq!(got[3][1].data, 1u32.to_le_bytes());
    assert_eq!(got[3][2].data, 1u32.to_le_bytes());
    let four = DeviceMesh {
        replicas: 1,
        partitions: 4,
    };
    let asy = format!(
        "HloModule m, num_partitions=4\n\n{ADD}\nENTRY e {{\n  x = f32[2] parameter(0)\n  rs0 = f32[2] all-reduce-start(x), channel_id=1, replica_groups={{{{0,1}},{{2,3}}}}, use_global_device_ids=true, to_apply=add\n  r = f32[2] all-reduce-done(rs0)\n  gs = (f32[2], f32[8]) all-gather-start(x), channel_id=2, replica_groups=[2,2]<=[2,2]T(1,0), dimensions={{0}}, use_global_device_ids=true\n  g = f32[8] all-gather-done(gs)\n  ps = (f32[2], f32[2], u32[], u32[]) collective-permute-start(x), channel_id=3, source_target_pairs={{{{0,3}},{{3,0}}}}\n  p = f32[2] collective-permute-done(ps)\n  rs = f32[1] reduce-scatter(x), channel_id=4, replica_groups={{{{1,0}},{{3,2}}}}, use_global_device_ids=true, dimensions={{0}}, to_apply=add\n  b = f32[2] collective-broadcast(x), channel_id=5, replica_groups={{{{2,0}},{{1,3}}}}\n  a2a = f32[2] all-to-all(x), channel_id=6, replica_groups={{{{0,1}},{{2,3}}}}, dimensions={{0}}\n  ROOT t = (f32[2], f32[8], f32[2], f32[1], f32[2], f32[2]) tuple(r, g, p, rs, b, a2a)\n}}\n"
    )
    .replace("f32[8] all-gather-done", "f32[4] all-gather-done")
    .replace("(f32[2], f32[8]) all-gather-start", "(f32[2], f32[4]) all-gather-start")
    .replace("(f32[2], f32[8], f32[2]", "(f32[2], f32[4], f32[2]");
    let got = cpu_and_evaluator(&asy, four, |d| {
        vec![f32_arg(&[1.0 + d as f32, 100.0 * (1.0 + d as f32)])]
    });
    // Device 0: all-reduce over {0,1}, broadcast from device 2 in {2,0}.
    assert_eq!(got[0][0].data, f32_arg(&[3.0, 300.0]).into_leaves()[0].data);
    assert_eq!(got[0][4].data, f32_arg(&[3.0, 300.0]).into_leaves()[0].data);
    let wrapped = format!(
        "HloModule m, num_partitions=2\n\n{ADD}\nbody {{\n  y = f32[2] parameter(0)\n  ROOT z = f32[2] all-reduce(y), channel_id=1, replica_groups={{{{0,1}}}}, use_global_device_ids=true, to_apply=add\n}}\n\nENTRY e {{\n  x = f32[2] parameter(0)\n  as = ((f32[2]), f32[2], s32[]) async-start(x), calls=body\n  ROOT d = f32[2] async-done(as)\n}}\n"
    );
    let m = parse_module(&wrapped).unwrap();
    let Err(e) = axle_codegen_cpu::compile(&m, &Default::default()) else {
        panic!("compiled");
    };
    let e = e.to_string();
    assert!(e.contains("async-start"), "{e}");
}
