//! The nvptx backend's collectives (staged through the host) on the simulator, against the
//! interpreter's bits: every collective kind (all-reduce with one-op and other reducers and its
//! tuple form, all-gather, reduce-scatter, all-to-all in array and tuple forms,
//! collective-permute with and without a sender for every device, collective-broadcast,
//! replica-id and partition-id, the `-start`/`-done` pairs, `async-start` around a collective,
//! a collective inside a `while`, explicit and iota replica groups) on 2 and 4 devices, each
//! device on its own inputs, through `run_on_devices` (what `axle run --devices N` runs); a
//! module for one device with collectives run without devices; the refused forms' errors; and
//! every case of `testkit/collectives` (JAX at 2, 4 and 8 devices, both forms) against XLA.
//! Kernels compute before and after each collective, so operands are read back from device
//! buffers and results written into them; they are correctly rounded ops (add, multiply,
//! negate), whose bits the kernels and the interpreter share, so any difference is the
//! collectives'. A module of the `library` test binary.

use std::path::PathBuf;
use std::time::Duration;

use axle::devices::run_on_devices;
use axle::ir::{parse_module, write_npy, ArrayLiteral, ElementType, Module};
use axle::run::RunOptions;

const TIMEOUT: Duration = Duration::from_secs(60);

const ADD: &str =
    "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n";
const MAX_S32: &str = "maxs {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n  ROOT m = s32[] maximum(a, b)\n}\n";
/// A reducer of two ops (not one the cpu backend runs): `(a + b) * b`, folded in group order.
const ODD: &str = "odd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  s = f32[] add(a, b)\n  ROOT t = f32[] multiply(s, b)\n}\n";

/// `{{0,1,...,n-1}}`.
fn all_group(n: u32) -> String {
    let ids: Vec<String> = (0..n).map(|d| d.to_string()).collect();
    format!("{{{{{}}}}}", ids.join(","))
}

/// The ring `{{0,1},{1,2},...,{n-1,0}}`.
fn ring(n: u32) -> String {
    let pairs: Vec<String> = (0..n).map(|d| format!("{{{d},{}}}", (d + 1) % n)).collect();
    format!("{{{}}}", pairs.join(","))
}

/// Every case on `n` devices: (name, module text).
fn cases(n: u32) -> Vec<(String, String)> {
    let g = all_group(n);
    let r = ring(n);
    let m2 = 2 * n;
    let mut v = vec![
        (
            "all_reduce".to_string(),
            format!(
                "HloModule ar, replica_count={n}\n\n{ADD}\n{MAX_S32}\nENTRY e {{\n  x = f32[8] parameter(0)\n  i = s32[5] parameter(1)\n  y = f32[8] multiply(x, x)\n  r = f32[8] all-reduce(y), replica_groups={{}}, to_apply=add\n  z = f32[8] add(r, x)\n  m = s32[5] all-reduce(i), replica_groups={g}, to_apply=maxs\n  ROOT t = (f32[8], s32[5]) tuple(z, m)\n}}\n"
            ),
        ),
        (
            "all_reduce_tuple_any_reducer".to_string(),
            format!(
                "HloModule art, replica_count={n}\n\n{ODD}\nENTRY e {{\n  x = f32[8] parameter(0)\n  w = f32[3] parameter(1)\n  y = f32[8] negate(x)\n  r = (f32[8], f32[3]) all-reduce(y, w), replica_groups={{}}, to_apply=odd\n  a = f32[8] get-tuple-element(r), index=0\n  b = f32[3] get-tuple-element(r), index=1\n  c = f32[8] add(a, x)\n  ROOT t = (f32[8], f32[3]) tuple(c, b)\n}}\n"
            ),
        ),
        (
            "all_gather".to_string(),
            format!(
                "HloModule ag, replica_count={n}\n\nENTRY e {{\n  x = f32[2,3] parameter(0)\n  y = f32[2,3] multiply(x, x)\n  g = f32[{m2},3] all-gather(y), replica_groups={{}}, dimensions={{0}}\n  xt = f32[3,2] transpose(x), dimensions={{1,0}}\n  h = f32[3,{m2}] all-gather(xt), replica_groups={g}, dimensions={{1}}\n  ROOT t = (f32[{m2},3], f32[3,{m2}]) tuple(g, h)\n}}\n"
            ),
        ),
        (
            "reduce_scatter".to_string(),
            format!(
                "HloModule rs, replica_count={n}\n\n{ADD}\nENTRY e {{\n  x = f32[{m2},3] parameter(0)\n  y = f32[{m2},3] add(x, x)\n  s = f32[2,3] reduce-scatter(y), replica_groups={{}}, dimensions={{0}}, to_apply=add\n  ROOT z = f32[2,3] multiply(s, s)\n}}\n"
            ),
        ),
        (
            "all_to_all".to_string(),
            format!(
                "HloModule a2a, replica_count={n}\n\nENTRY e {{\n  x = s32[{m2},3] parameter(0)\n  one = s32[] constant(1)\n  ones = s32[{m2},3] broadcast(one), dimensions={{}}\n  y = s32[{m2},3] add(x, ones)\n  ROOT a = s32[{m2},3] all-to-all(y), replica_groups={{}}, dimensions={{0}}\n}}\n"
            ),
        ),
        (
            "collective_permute".to_string(),
            format!(
                "HloModule cp, replica_count={n}\n\nENTRY e {{\n  x = f32[4] parameter(0)\n  y = f32[4] multiply(x, x)\n  ring = f32[4] collective-permute(y), source_target_pairs={r}\n  one = f32[4] collective-permute(x), source_target_pairs={{{{0,1}}}}\n  ROOT t = (f32[4], f32[4]) tuple(ring, one)\n}}\n"
            ),
        ),
        (
            "collective_broadcast".to_string(),
            format!(
                "HloModule cb, replica_count={n}\n\nENTRY e {{\n  x = f32[5] parameter(0)\n  y = f32[5] negate(x)\n  ROOT b = f32[5] collective-broadcast(y), replica_groups={g}\n}}\n"
            ),
        ),
        (
            "replica_and_partition_ids".to_string(),
            format!(
                "HloModule ids, replica_count=2, num_partitions={}\n\nENTRY e {{\n  x = u32[3] parameter(0)\n  r = u32[] replica-id()\n  p = u32[] partition-id()\n  rb = u32[3] broadcast(r), dimensions={{}}\n  pb = u32[3] broadcast(p), dimensions={{}}\n  s = u32[3] add(rb, x)\n  ROOT t = (u32[3], u32[3], u32[], u32[]) tuple(s, pb, r, p)\n}}\n",
                n / 2
            ),
        ),
        (
            "start_done_pairs".to_string(),
            format!(
                "HloModule sd, replica_count={n}\n\n{ADD}\nENTRY e {{\n  x = f32[2] parameter(0)\n  y = f32[2] add(x, x)\n  ars = f32[2] all-reduce-start(y), replica_groups={{}}, to_apply=add\n  ard = f32[2] all-reduce-done(ars)\n  ags = (f32[2], f32[{m2}]) all-gather-start(y), replica_groups={{}}, dimensions={{0}}\n  agd = f32[{m2}] all-gather-done(ags)\n  cps = (f32[2], f32[2], u32[], u32[]) collective-permute-start(y), source_target_pairs={r}\n  cpd = f32[2] collective-permute-done(cps)\n  ROOT t = (f32[2], f32[{m2}], f32[2]) tuple(ard, agd, cpd)\n}}\n"
            ),
        ),
        (
            "async_start_around_reduce_scatter".to_string(),
            format!(
                "HloModule as, replica_count={n}\n\n{ADD}\nrs_body {{\n  y = f32[{m2}] parameter(0)\n  ROOT z = f32[2] reduce-scatter(y), replica_groups={{}}, dimensions={{0}}, to_apply=add\n}}\n\nENTRY e {{\n  x = f32[{m2}] parameter(0)\n  y = f32[{m2}] multiply(x, x)\n  as = ((f32[{m2}]), f32[2], s32[]) async-start(y), calls=rs_body\n  au = ((f32[{m2}]), f32[2], s32[]) async-update(as)\n  ROOT d = f32[2] async-done(au)\n}}\n"
            ),
        ),
        (
            "all_reduce_in_a_loop".to_string(),
            format!(
                "HloModule loop, replica_count={n}\n\n{ADD}\ncond {{\n  s = (s32[], f32[4]) parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n  k = s32[] constant(3)\n  ROOT lt = pred[] compare(i, k), direction=LT\n}}\n\nbody {{\n  s = (s32[], f32[4]) parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n  x = f32[4] get-tuple-element(s), index=1\n  one = s32[] constant(1)\n  j = s32[] add(i, one)\n  r = f32[4] all-reduce(x), replica_groups={{}}, to_apply=add\n  h = f32[] constant(0.3)\n  hb = f32[4] broadcast(h), dimensions={{}}\n  y = f32[4] multiply(r, hb)\n  ROOT t = (s32[], f32[4]) tuple(j, y)\n}}\n\nENTRY e {{\n  x = f32[4] parameter(0)\n  zero = s32[] constant(0)\n  s = (s32[], f32[4]) tuple(zero, x)\n  w = (s32[], f32[4]) while(s), condition=cond, body=body\n  ROOT o = f32[4] get-tuple-element(w), index=1\n}}\n"
            ),
        ),
    ];
    // The tuple form of all-to-all: operand k goes to member k.
    let slices: Vec<String> = (0..n)
        .map(|k| {
            format!(
                "  s{k} = f32[2] slice(y), slice={{[{}:{}]}}\n",
                2 * k,
                2 * k + 2
            )
        })
        .collect();
    let names: Vec<String> = (0..n).map(|k| format!("s{k}")).collect();
    let shapes = vec!["f32[2]"; n as usize].join(", ");
    v.push((
        "all_to_all_tuple".to_string(),
        format!(
            "HloModule a2at, replica_count={n}\n\nENTRY e {{\n  x = f32[{m2}] parameter(0)\n  y = f32[{m2}] abs(x)\n{}  ROOT a = ({shapes}) all-to-all({}), replica_groups={{}}\n}}\n",
            slices.concat(),
            names.join(", ")
        ),
    ));
    // Groups other than all devices: explicit, and iota with a transpose.
    let (explicit, iota) = if n == 4 {
        ("{{0,1},{2,3}}", "[2,2]<=[2,2]T(1,0)")
    } else {
        ("{{0},{1}}", "[1,2]<=[2]")
    };
    let half = if n == 4 { 2 } else { 1 };
    v.push((
        "replica_groups".to_string(),
        format!(
            "HloModule groups, replica_count={n}\n\n{ADD}\nENTRY e {{\n  x = f32[4] parameter(0)\n  a = f32[4] all-reduce(x), replica_groups={explicit}, to_apply=add\n  g = f32[{}] all-gather(x), replica_groups={iota}, dimensions={{0}}\n  ROOT t = (f32[4], f32[{}]) tuple(a, g)\n}}\n",
            4 * (n / half),
            4 * (n / half)
        ),
    ));
    v
}

/// Deterministic inputs for device `d`: every leaf of every entry parameter of `m`, with
/// values that differ per device and round differently when summed in another order.
fn inputs_for(m: &Module, d: u32) -> Vec<ArrayLiteral> {
    let mut out = Vec::new();
    for &p in m.params(m.entry()) {
        let a = m.array_shape(p).expect("array parameters").clone();
        let n = a.num_elements() as usize;
        let data: Vec<u8> = match a.ty {
            ElementType::F32 => (0..n)
                .flat_map(|i| {
                    let v = ((i * 7 + d as usize * 13) % 17) as f32 / 3.0 + 0.1 * (d + 1) as f32;
                    v.to_le_bytes()
                })
                .collect(),
            ElementType::S32 => (0..n)
                .flat_map(|i| (((i * 5 + d as usize * 3) % 11) as i32 - 5).to_le_bytes())
                .collect(),
            ElementType::U32 => (0..n)
                .flat_map(|i| ((i as u32) * 10 + d).to_le_bytes())
                .collect(),
            t => panic!("no inputs of {t:?}"),
        };
        out.push(ArrayLiteral { shape: a, data });
    }
    out
}

/// Every device's output leaves of `text` on `n` devices of `backend`, each device on its
/// own inputs.
fn run_on(text: &str, n: u32, backend: &str) -> Result<Vec<Vec<ArrayLiteral>>, String> {
    let m = parse_module(text).map_err(|e| e.render("case"))?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut files: Vec<PathBuf> = Vec::new();
    for d in 0..n {
        for (k, l) in inputs_for(&m, d).iter().enumerate() {
            let f = dir.path().join(format!("d{d}.in{k}.npy"));
            write_npy(&f, l).map_err(|e| e.to_string())?;
            files.push(f);
        }
    }
    let opts = RunOptions {
        backend: backend.into(),
        inputs: files,
        ..Default::default()
    };
    Ok(run_on_devices(m, &opts, n, TIMEOUT)?.outputs)
}

#[test]
fn every_collective_on_nvptx_sim_gives_the_interpreters_bits() {
    let mut failures = Vec::new();
    for n in [2, 4] {
        for (name, text) in cases(n) {
            let want = match run_on(&text, n, "interpreter") {
                Ok(w) => w,
                Err(e) => {
                    failures.push(format!("{name} on {n}: the interpreter failed: {e}"));
                    continue;
                }
            };
            match run_on(&text, n, "nvptx-sim") {
                Ok(got) if got == want => {}
                Ok(got) => failures.push(format!(
                    "{name} on {n} devices: nvptx-sim gave {got:?}, the interpreter {want:?}"
                )),
                Err(e) => failures.push(format!("{name} on {n} devices: {e}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Devices get results of their own (their ids), so agreeing with the interpreter on every
/// device is more than agreeing on one value.
#[test]
fn devices_get_their_own_results() {
    let text = &cases(2)
        .into_iter()
        .find(|(n, _)| n == "replica_and_partition_ids")
        .expect("the ids case")
        .1;
    let got = run_on(text, 2, "nvptx-sim").unwrap();
    assert_ne!(got[0], got[1]);
    // Device 1 is replica 1: its replica id is 1.
    assert_eq!(got[1][2].data, 1u32.to_le_bytes());
}

/// A module written for one device runs its collectives without devices, on a world of that
/// one device, as the interpreter runs it: a permute to itself, a broadcast, the async pairs.
#[test]
fn a_module_for_one_device_runs_its_collectives_without_devices() {
    let text = format!(
        "HloModule one\n\n{ADD}\nENTRY e {{\n  x = f32[3] parameter(0)\n  y = f32[3] multiply(x, x)\n  c = f32[3] collective-permute(y), channel_id=1, source_target_pairs={{{{0,0}}}}\n  d = f32[3] collective-broadcast(c), replica_groups={{{{0}}}}\n  s = (f32[3], f32[3]) collective-permute-start(d), channel_id=2, source_target_pairs={{{{0,0}}}}\n  e = f32[3] collective-permute-done(s)\n  r = f32[3] all-reduce(e), replica_groups={{{{0}}}}, to_apply=add\n  id = u32[] replica-id()\n  ROOT t = (f32[3], u32[]) tuple(r, id)\n}}\n"
    );
    let m = parse_module(&text).unwrap();
    let args: Vec<axle::ir::Literal> = inputs_for(&m, 0)
        .into_iter()
        .map(axle::ir::Literal::Array)
        .collect();
    let run = |backend: &str| {
        let platform = axle::backends::registry().get(backend).unwrap();
        let exe = platform
            .compiler()
            .compile(
                m.clone(),
                &axle::backend::CompileOptions {
                    pipeline: axle::backend::pipeline_for(&*platform, None),
                    ..Default::default()
                },
            )
            .unwrap();
        axle::run::run_literals(&*platform, &*exe, &args).unwrap()
    };
    assert_eq!(run("nvptx-sim"), run("interpreter"));
}

/// The forms the backend does not run are refused when the module is compiled, naming them;
/// a module for several devices run without them fails at its first collective, saying so.
#[test]
fn refused_forms_are_errors_naming_them() {
    let compile = |text: &str| {
        let m = parse_module(text).unwrap();
        let platform = axle::backends::registry().get("nvptx-sim").unwrap();
        platform
            .compiler()
            .compile(m, &Default::default())
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    // An async-start around something other than a collective.
    let text = format!(
        "HloModule a, replica_count=2\n\n{ADD}\nbody {{\n  y = f32[4] parameter(0)\n  ROOT z = f32[4] negate(y)\n}}\n\nENTRY e {{\n  x = f32[4] parameter(0)\n  as = ((f32[4]), f32[4], s32[]) async-start(x), calls=body\n  ROOT d = f32[4] async-done(as)\n}}\n"
    );
    let e = compile(&text).unwrap_err();
    assert!(
        e.contains("runs async-start around collectives only") && e.contains("%z (negate)"),
        "{e}"
    );
    // A module for 2 devices run on one.
    let text = format!(
        "HloModule b, replica_count=2\n\n{ADD}\nENTRY e {{\n  x = f32[4] parameter(0)\n  ROOT r = f32[4] all-reduce(x), replica_groups={{}}, to_apply=add\n}}\n"
    );
    let m = parse_module(&text).unwrap();
    let opts = RunOptions {
        backend: "nvptx-sim".into(),
        ..Default::default()
    };
    let e = axle::run::run_module(m, &opts).map(|_| ()).unwrap_err();
    assert!(
        e.to_string()
            .contains("all-reduce needs a multi-device run"),
        "{e}"
    );
    // The backend's own error is reachable as the source, through the run's and the backend
    // interface's errors.
    let source = std::error::Error::source(&e)
        .and_then(|s| s.downcast_ref::<axle_codegen_nvptx::NvptxError>());
    assert!(
        matches!(source, Some(axle_codegen_nvptx::NvptxError::Run(_))),
        "{e:?}"
    );
}

fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testkit/collectives")
}

fn tolerance(v: &serde_json::Value) -> Result<axle::ir::Tolerance, String> {
    match v {
        serde_json::Value::String(s) if s == "exact" => Ok(axle::ir::Tolerance::Exact),
        serde_json::Value::Object(o) => Ok(axle::ir::Tolerance::Close {
            rtol: o["rtol"].as_f64().ok_or("bad rtol")?,
            atol: o["atol"].as_f64().ok_or("bad atol")?,
        }),
        _ => Err(format!("bad tolerance {v}")),
    }
}

/// Corpus case `case` (JAX 0.10.2 at 2, 4 or 8 devices) on `nvptx-sim`: XLA's per-device
/// module on each device's shards (`opt`), or JAX's `shard_map` module on the global inputs,
/// against XLA's outputs within the manifest's tolerances.
fn corpus_case(case: &serde_json::Value, opt: bool) -> Result<(), String> {
    let name = case["name"].as_str().ok_or("no name")?;
    let n = case["devices"].as_u64().ok_or("no devices")? as u32;
    let c = corpus();
    let file = if opt {
        format!("{name}.opt.hlo")
    } else {
        format!("{name}.hlo")
    };
    let text = std::fs::read_to_string(c.join(&file)).map_err(|e| format!("{file}: {e}"))?;
    let m = parse_module(&text).map_err(|e| e.render(&file))?;
    let params = m.params(m.entry()).len();
    let inputs: Vec<PathBuf> = if opt {
        (0..n)
            .flat_map(|d| (0..params).map(move |k| format!("{name}.d{d}.in{k}.npy")))
            .map(|f| c.join(f))
            .collect()
    } else {
        (0..params)
            .map(|k| c.join(format!("{name}.in{k}.npy")))
            .collect()
    };
    let opts = RunOptions {
        backend: "nvptx-sim".into(),
        inputs,
        ..Default::default()
    };
    let got = run_on_devices(m, &opts, n, TIMEOUT)?.outputs;
    let outs = case["outputs"].as_u64().ok_or("no outputs")? as usize;
    for (d, dev) in got.iter().enumerate() {
        if dev.len() != outs {
            return Err(format!(
                "device {d}: {} outputs, XLA gives {outs}",
                dev.len()
            ));
        }
        for (k, o) in dev.iter().enumerate() {
            let f = if opt {
                c.join(format!("{name}.d{d}.out{k}.npy"))
            } else {
                c.join(format!("{name}.out{k}.npy"))
            };
            let want = axle::ir::read_npy_as(&f, o.ty()).map_err(|e| format!("{f:?}: {e}"))?;
            let tol = match &case["tolerance"] {
                serde_json::Value::Array(v) => &v[k],
                t => t,
            };
            axle::ir::compare_arrays(&want, o, tolerance(tol)?)
                .map_err(|e| format!("device {d} out{k}: {e}"))?;
        }
    }
    Ok(())
}

/// Every case of `testkit/collectives` from both forms on `nvptx-sim`, on its 2, 4 or 8
/// devices, against XLA's outputs.
#[test]
fn the_collectives_corpus_runs_on_nvptx_sim_devices() {
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(corpus().join("manifest.json")).unwrap())
            .unwrap();
    let cases = manifest.as_array().unwrap();
    assert!(cases.len() >= 12, "the corpus has {} cases", cases.len());
    let mut failures = Vec::new();
    for case in cases {
        for opt in [true, false] {
            if let Err(e) = corpus_case(case, opt) {
                failures.push(format!("{} (opt: {opt}): {e}", case["name"]));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
