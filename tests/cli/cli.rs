//! The `axle` command line: canonical output on success; on bad input a clear error on stderr
//! (`FILE:LINE:COL: error: ...` with the source line and a caret where there is a position), a
//! non-zero exit, nothing on stdout, and no partial output files.

use std::path::PathBuf;
use std::process::{Command, Output};

mod common;
use common::{fails_with, stderr, stdout, write};

#[path = "cli_devices/devices.rs"]
mod devices;
#[path = "cli_devices/mpi.rs"]
mod mpi;

fn axle(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_axle"))
        .args(args)
        .output()
        .expect("runs axle")
}

fn shared() -> PathBuf {
    if let Ok(p) = std::env::var("AXLE_SHARED") {
        return PathBuf::from(p);
    }
    let beside = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared");
    if beside.exists() {
        beside
    } else {
        PathBuf::from("/work/shared")
    }
}

fn corpus(name: &str) -> String {
    shared().join("corpus").join(name).display().to_string()
}

/// Asserts a failure: exit 1, nothing on stdout, stderr containing every fragment.
fn assert_fails(o: &Output, fragments: &[&str]) {
    fails_with(o, 1, fragments);
}

#[test]
fn parse_prints_canonical_text_that_reparses_identically() {
    let o = axle(&["parse", &corpus("lstm_scan.opt.hlo")]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(o.stderr.is_empty());
    let tmp = tempfile::tempdir().unwrap();
    let f = write(tmp.path(), "c.hlo", &stdout(&o));
    let o2 = axle(&["parse", &f]);
    assert!(o2.status.success());
    assert_eq!(stdout(&o), stdout(&o2));
}

#[test]
fn parse_error_has_file_line_column_and_caret() {
    let tmp = tempfile::tempdir().unwrap();
    let f = write(tmp.path(), "bad.hlo", "HloModule m\n\nENTRY e {\n  p = f32[4]{0} parameter(0)\n  ROOT r = f32[4]{0} nonsense(p)\n}\n");
    let o = axle(&["parse", &f]);
    assert_fails(&o, &[&format!("{f}:5:22: error: unknown opcode 'nonsense'\n  ROOT r = f32[4]{{0}} nonsense(p)\n                     ^\n")]);
}

#[test]
fn verifier_error_has_file_line_column() {
    let tmp = tempfile::tempdir().unwrap();
    let f = write(tmp.path(), "bad.hlo", "HloModule m\n\nENTRY e {\n  p = f32[4]{0} parameter(0)\n  q = f32[8]{0} parameter(1)\n  ROOT r = f32[4]{0} add(p, q)\n}\n");
    let o = axle(&["parse", &f]);
    assert_fails(
        &o,
        &[&format!(
            "{f}:6:8: error: %r: add: operand 1 has shape f32[8] but operand 0 has f32[4]\n  ROOT r = f32[4]{{0}} add(p, q)\n       ^\n"
        )],
    );
}

#[test]
fn missing_file_is_a_clear_error() {
    let o = axle(&["parse", "/nonexistent/x.hlo"]);
    assert_fails(&o, &["/nonexistent/x.hlo: error: cannot read file"]);
    let o = axle(&["run", "/nonexistent/x.hlo"]);
    assert_fails(&o, &["/nonexistent/x.hlo: error: cannot read file"]);
}

#[test]
fn binary_file_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("bin.hlo");
    std::fs::write(&p, [0xff, 0xfe, 0x00, 0x41]).unwrap();
    let o = axle(&["parse", &p.display().to_string()]);
    assert_fails(&o, &["error: file is not UTF-8 text"]);
}

#[test]
fn stats_reports_counts_and_times() {
    let o = axle(&["stats", &corpus("mlp_forward.hlo")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = stdout(&o);
    for f in [
        "instructions per opcode:",
        "instructions per computation:",
        "parse:",
        "verify:",
        "(ENTRY)",
        "dot",
    ] {
        assert!(s.contains(f), "{f} missing in\n{s}");
    }
}

fn mlp_inputs() -> Vec<String> {
    (0..7)
        .flat_map(|i| {
            [
                "--input".to_string(),
                corpus(&format!("mlp_forward.in{i}.npy")),
            ]
        })
        .collect()
}

#[test]
fn run_writes_outputs_that_match_xla() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let mut args = vec!["run".to_string(), corpus("mlp_forward.hlo")];
    args.extend(mlp_inputs());
    args.extend(["--out-dir".into(), out.display().to_string()]);
    let o = axle(&args.iter().map(|s| s.as_str()).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("out0: f32[8,10]"));
    let got = out.join("out0.npy").display().to_string();
    let o = axle(&[
        "compare",
        &corpus("mlp_forward.out0.npy"),
        &got,
        "--rtol",
        "1e-5",
        "--atol",
        "1e-5",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Only the output file is left in the directory: no temporary files.
    let names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into())
        .collect();
    assert_eq!(names, vec!["out0.npy".to_string()]);
}

#[test]
fn run_with_a_pipeline_matches_xla_on_both_backends() {
    for backend in ["cpu", "interpreter"] {
        for passes in [
            "simplify",
            "cpu",
            "none",
            "fixpoint(max=3)[algsimp,cse,dce]",
        ] {
            let tmp = tempfile::tempdir().unwrap();
            let out = tmp.path().join("out");
            let mut args = vec!["run".to_string(), corpus("mlp_forward.hlo")];
            args.extend(mlp_inputs());
            args.extend([
                "--backend".into(),
                backend.into(),
                "--passes".into(),
                passes.into(),
            ]);
            args.extend(["--out-dir".into(), out.display().to_string()]);
            let o = axle(&args.iter().map(|s| s.as_str()).collect::<Vec<_>>());
            assert!(o.status.success(), "{backend} {passes}: {}", stderr(&o));
            let got = out.join("out0.npy").display().to_string();
            let expected = corpus("mlp_forward.out0.npy");
            let o = axle(&[
                "compare", &expected, &got, "--rtol", "1e-5", "--atol", "1e-5",
            ]);
            assert!(o.status.success(), "{backend} {passes}: {}", stderr(&o));
        }
    }
}

/// `compile` on cpu runs the `cpu` pipeline unless `--passes none` says otherwise: fused, the
/// transformer block needs fewer temporary bytes than the module as given. (Not the small MLP:
/// its peak is one GEMM's packed panels plus its input and output, fused or not, now that
/// output fusions run the GEMM too.)
#[test]
fn cpu_runs_the_fusion_pipeline_by_default() {
    let file = corpus("transformer_block_prenorm.hlo");
    let temp = |extra: &[&str]| -> u64 {
        let mut args = vec!["compile", &file];
        args.extend_from_slice(extra);
        let o = axle(&args);
        assert!(o.status.success(), "{extra:?}: {}", stderr(&o));
        let text = String::from_utf8_lossy(&o.stdout).to_string();
        let t = text
            .split(", ")
            .find_map(|p| p.strip_suffix(" temporary bytes\n"))
            .unwrap_or_else(|| panic!("no temporary bytes in {text}"));
        t.parse().unwrap()
    };
    let fused = temp(&[]);
    assert_eq!(fused, temp(&["--passes", "cpu"]));
    let as_given = temp(&["--passes", "none"]);
    assert!(fused < as_given, "fused {fused} vs as given {as_given}");
    let o = axle(&["compile", &file, "--emit", "llvm"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn run_with_a_bad_pipeline_is_a_clear_error_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let file = corpus("mlp_forward.hlo");
    let out_s = out.display().to_string();
    let o = axle(&[
        "run",
        &file,
        "--passes",
        "algsimp,bogus",
        "--out-dir",
        &out_s,
    ]);
    assert_fails(&o, &["unknown pass 'bogus'", "algsimp,bogus", "^"]);
    assert!(!out.exists() || std::fs::read_dir(&out).unwrap().next().is_none());
    let o = axle(&[
        "bench",
        &file,
        "--passes",
        "fixpoint(max=0)[dce]",
        "--repeat",
        "1",
    ]);
    assert_fails(&o, &["fixpoint"]);
}

#[test]
fn run_without_inputs_is_deterministic() {
    let a = axle(&["run", &corpus("mlp_forward.hlo"), "--seed", "3"]);
    let b = axle(&["run", &corpus("mlp_forward.hlo"), "--seed", "3"]);
    let c = axle(&["run", &corpus("mlp_forward.hlo"), "--seed", "4"]);
    let first = |o: &Output| stdout(o).lines().next().unwrap_or("").to_string();
    assert!(a.status.success());
    assert_eq!(first(&a), first(&b));
    assert_ne!(first(&a), first(&c));
}

#[test]
fn run_wrong_input_count_names_the_count() {
    let o = axle(&[
        "run",
        &corpus("mlp_forward.hlo"),
        "--input",
        &corpus("mlp_forward.in0.npy"),
    ]);
    assert_fails(
        &o,
        &["the entry computation takes 7 input arrays but 1 was given"],
    );
}

#[test]
fn run_wrong_shape_names_the_parameter() {
    let mut args = vec!["run".to_string(), corpus("mlp_forward.hlo")];
    let mut ins = mlp_inputs();
    ins.swap(1, 3); // in0 <-> in1
    args.extend(ins);
    let o = axle(&args.iter().map(|s| s.as_str()).collect::<Vec<_>>());
    assert_fails(
        &o,
        &[
            "parameter 0 ('x.1')",
            "has shape [32, 64] but the parameter needs f32[8, 32]",
        ],
    );
}

#[test]
fn run_wrong_dtype_names_the_parameter() {
    // int_arith_s32 takes s32 inputs; feed it f32 files of another case.
    let o = axle(&[
        "run",
        &corpus("int_arith_s32.hlo"),
        "--input",
        &corpus("ew_binary_f32.in0.npy"),
        "--input",
        &corpus("ew_binary_f32.in1.npy"),
        "--input",
        &corpus("ew_binary_f32.in2.npy"),
    ]);
    assert_fails(&o, &["parameter 0", "s32", "f32"]);
}

#[test]
fn run_corrupt_npy_is_a_clear_error_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("bad.npy");
    std::fs::write(&bad, b"\x93NUMPY\x01\x00garbage").unwrap();
    let out = tmp.path().join("out");
    let mut args = vec![
        "run".to_string(),
        corpus("mlp_forward.hlo"),
        "--input".into(),
        bad.display().to_string(),
    ];
    args.extend(mlp_inputs().into_iter().skip(2));
    args.extend(["--out-dir".into(), out.display().to_string()]);
    let o = axle(&args.iter().map(|s| s.as_str()).collect::<Vec<_>>());
    assert_fails(&o, &["parameter 0 ('x.1')", "bad.npy"]);
    assert!(!out.exists() || std::fs::read_dir(&out).unwrap().next().is_none());
}

#[test]
fn run_unsupported_op_names_the_instruction_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let f = write(tmp.path(), "cc.hlo", "HloModule m\n\nENTRY e {\n  p = f32[4]{0} parameter(0)\n  ROOT r = f32[4]{0} custom-call(p), custom_call_target=\"my_mystery_kernel\"\n}\n");
    let out = tmp.path().join("out");
    let o = axle(&["run", &f, "--out-dir", &out.display().to_string()]);
    assert_fails(&o, &["custom-call", "my_mystery_kernel"]);
    assert!(!out.exists() || std::fs::read_dir(&out).unwrap().next().is_none());
}

#[test]
fn run_unknown_backend_lists_the_available_ones() {
    let o = axle(&["run", &corpus("mlp_forward.hlo"), "--backend", "tpu9000"]);
    assert_fails(&o, &["tpu9000: no such backend (available: interpreter"]);
}

#[test]
fn compare_reports_mismatches() {
    let o = axle(&[
        "compare",
        &corpus("mlp_forward.in0.npy"),
        &corpus("mlp_forward.in0.npy"),
    ]);
    assert!(o.status.success());
    let o = axle(&[
        "compare",
        &corpus("ew_binary_f32.in0.npy"),
        &corpus("ew_binary_f32.in1.npy"),
    ]);
    assert_fails(&o, &["mismatch"]);
}

#[test]
fn run_defaults_to_the_cpu_backend_and_matches_the_interpreter() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("cpu"), tmp.path().join("interp"));
    let mut args = vec!["run".to_string(), corpus("mlp_forward.hlo")];
    args.extend(mlp_inputs());
    let mut cpu = args.clone();
    cpu.extend(["--out-dir".into(), a.display().to_string()]);
    let o = axle(&cpu.iter().map(|s| s.as_str()).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("backend cpu"));
    let mut it = args;
    it.extend([
        "--backend".into(),
        "interpreter".into(),
        "--out-dir".into(),
        b.display().to_string(),
    ]);
    let o = axle(&it.iter().map(|s| s.as_str()).collect::<Vec<_>>());
    assert!(o.status.success());
    let o = axle(&[
        "compare",
        &b.join("out0.npy").display().to_string(),
        &a.join("out0.npy").display().to_string(),
        "--rtol",
        "1e-5",
        "--atol",
        "1e-6",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn compile_emits_llvm_ir_and_assembly() {
    let o = axle(&["compile", &corpus("ew_binary_f32.hlo"), "--emit", "llvm"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ir = String::from_utf8_lossy(&o.stdout);
    assert!(ir.contains("define void @axle_entry("), "{ir}");
    assert!(ir.contains(" x float>"), "no vector code");
    let o = axle(&["compile", &corpus("ew_binary_f32.hlo"), "--emit", "asm"]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("axle_entry:"));
}

#[test]
fn compile_timings_list_every_phase() {
    let o = axle(&[
        "compile",
        &corpus("ew_binary_f32.hlo"),
        "--no-cache",
        "--timings",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    for phase in [
        "read, parse and check the file",
        "verify",
        "pass fusion",
        "schedule and buffer assignment",
        "lowering",
        "LLVM emission",
        "LLVM optimization",
        "LLVM code generation and linking",
    ] {
        assert!(out.contains(phase), "no {phase}: {out}");
    }
    let total = out.lines().last().unwrap_or_default();
    assert!(
        total.starts_with("total") && total.ends_with("100.0%"),
        "{out}"
    );
}

#[test]
fn a_compile_with_another_pipeline_loads_its_kernels_from_the_kernel_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let compile = |passes: Option<&str>| {
        let file = corpus("mlp_forward.hlo");
        let mut args = vec!["compile", &file, "--timings"];
        if let Some(p) = passes {
            args.extend(["--passes", p]);
        }
        let o = Command::new(env!("CARGO_BIN_EXE_axle"))
            .args(&args)
            .env("AXLE_CACHE_DIR", tmp.path())
            .output()
            .expect("runs axle");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let first = compile(None);
    assert!(!first.contains("kernel cache"), "{first}");
    // The default pipeline and a trailing `cse`: the same kernels, another module cache key.
    let cpu = axle::passes::standard_pipeline("cpu").expect("the cpu pipeline");
    let second = compile(Some(&format!("{cpu},cse")));
    assert!(
        second.contains("LLVM optimization"),
        "not from the module cache: {second}"
    );
    let line = second
        .lines()
        .find(|l| l.contains("kernel modules from the kernel cache"))
        .unwrap_or_else(|| panic!("no kernel cache line: {second}"));
    let words: Vec<&str> = line.trim_start_matches('(').split_whitespace().collect();
    assert_eq!(
        words[0], words[2],
        "every kernel module from the cache: {line}"
    );
}

#[test]
fn compile_aot_writes_an_object_and_a_header() {
    let tmp = tempfile::tempdir().unwrap();
    let obj = tmp.path().join("model.o");
    let h = tmp.path().join("model.h");
    let o = axle(&[
        "compile",
        &corpus("mlp_forward.hlo"),
        "--aot",
        "-o",
        &obj.display().to_string(),
        "--header",
        &h.display().to_string(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let header = std::fs::read_to_string(&h).unwrap();
    assert!(
        header.contains("void model_run(void *const *inputs"),
        "{header}"
    );
    assert!(header.contains("#define MODEL_TEMP_BYTES"));
    assert!(header.contains("#define MODEL_INPUT0_BYTES 1024 /* f32[8,32] as float */"));
    let bytes = std::fs::read(&obj).unwrap();
    assert_eq!(&bytes[..4], b"\x7fELF");
    // --aot needs an object path; --emit needs the cpu backend.
    let o = axle(&["compile", &corpus("mlp_forward.hlo"), "--aot"]);
    assert_fails(&o, &["--aot needs -o"]);
    let o = axle(&[
        "compile",
        &corpus("mlp_forward.hlo"),
        "--backend",
        "interpreter",
        "--emit",
        "llvm",
    ]);
    assert_fails(&o, &["need --backend cpu"]);
}

#[test]
fn bench_states_the_output_buffer_policy() {
    let o = axle(&[
        "bench",
        &corpus("mlp_forward.hlo"),
        "--repeat",
        "3",
        "--warmup",
        "1",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(s.contains("compile:"), "{s}");
    assert!(s.contains("run (fresh outputs): median"), "{s}");
    assert!(s.contains("run (reused outputs): median"), "{s}");
    assert!(s.contains("over 3 runs"), "{s}");
    assert!(!s.contains("compile again"), "{s}");
    let o = axle(&[
        "bench",
        &corpus("mlp_forward.hlo"),
        "--repeat",
        "1",
        "--warm-compile",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(s.contains("compile again (warm): "), "{s}");
    let o = axle(&["bench", &corpus("mlp_forward.hlo"), "--repeat", "0"]);
    assert_fails(&o, &["--repeat must be at least 1"]);
}

#[test]
fn buffers_reports_schedule_block_and_buffers_with_json_and_svg() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("b.json").display().to_string();
    let svg = dir.path().join("b.svg").display().to_string();
    let o = axle(&[
        "buffers",
        &corpus("lstm_scan.opt.hlo"),
        "--json",
        &json,
        "--svg",
        &svg,
        "--check",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for f in [
        "schedule (peak",
        "*list=",
        "temp: ",
        "strategy ",
        "buffers:",
        "check: ok",
    ] {
        assert!(out.contains(f), "missing {f}:\n{out}");
    }
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(j["temp_bytes"].as_u64().is_some());
    assert!(j["buffers"].as_array().is_some_and(|b| !b.is_empty()));
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(
        s.starts_with("<svg") && s.contains("<title>b"),
        "{}",
        &s[..200.min(s.len())]
    );
    // XLA's own schedule, kept.
    let o = axle(&[
        "buffers",
        &corpus("lstm_scan.opt.hlo"),
        "--schedule",
        "keep",
    ]);
    assert!(stdout(&o).contains("the module's own"), "{}", stdout(&o));
}

#[test]
fn buffers_on_bad_input_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(dir.path(), "bad.hlo", "HloModule m\n\nENTRY main {\n  x = f32[4]{0} parameter(0)\n  ROOT y = f32[4]{0} negate(z)\n}\n");
    let json = dir.path().join("b.json");
    let o = axle(&["buffers", &bad, "--json", &json.display().to_string()]);
    assert_fails(&o, &["bad.hlo:5:"]);
    assert!(!json.exists());
}

const ELIDED: &str = "HloModule e\n\nENTRY main {\n  x = f32[2,3]{1,0} parameter(0)\n  \
                      w = f32[2,3]{1,0} constant({...})\n  ROOT y = f32[2,3]{1,0} add(x, w)\n}\n";

#[test]
fn elided_constants_are_an_error_by_default_with_their_position() {
    let tmp = tempfile::tempdir().unwrap();
    let f = write(tmp.path(), "e.hlo", ELIDED);
    for cmd in ["parse", "run", "compile", "bench", "opt"] {
        let mut args = vec![cmd, f.as_str()];
        if cmd == "opt" {
            args.extend(["--passes", "dce"]);
        }
        let o = axle(&args);
        assert_fails(
            &o,
            &[
                &format!("{f}:5:3: error: constant 'w'"),
                "--elided-constants",
            ],
        );
    }
}

#[test]
fn elided_constants_random_fills_them_deterministically_and_the_output_reparses() {
    let tmp = tempfile::tempdir().unwrap();
    let f = write(tmp.path(), "e.hlo", ELIDED);
    let fill = |seed: &str| {
        let o = axle(&["parse", &f, "--elided-constants", "random", "--seed", seed]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(o.stderr.is_empty(), "{}", stderr(&o));
        stdout(&o)
    };
    let a = fill("3");
    assert_eq!(a, fill("3"));
    assert_ne!(a, fill("4"));
    assert!(!a.contains("{...}"), "{a}");
    let filled = write(tmp.path(), "filled.hlo", &a);
    let o = axle(&["parse", &filled]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), a);
    let kept = axle(&["parse", &f, "--elided-constants", "keep"]);
    assert!(stdout(&kept).contains("constant({...})"));
}

#[test]
fn run_with_zero_constants_on_both_backends_is_quiet_when_not_a_terminal() {
    let tmp = tempfile::tempdir().unwrap();
    let f = write(tmp.path(), "e.hlo", ELIDED);
    let mut outs = Vec::new();
    for backend in ["cpu", "interpreter"] {
        let dir = tmp.path().join(backend);
        let o = axle(&[
            "run",
            &f,
            "--backend",
            backend,
            "--elided-constants",
            "zeros",
            "--out-dir",
            &dir.display().to_string(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(
            o.stderr.is_empty(),
            "no progress bar off a terminal: {}",
            stderr(&o)
        );
        outs.push(dir.join("out0.npy").display().to_string());
    }
    let o = axle(&["compare", &outs[0], &outs[1]]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = axle(&["compile", &f, "--elided-constants", "random", "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = axle(&["parse", &f, "--elided-constants", "sometimes"]);
    assert_eq!(o.status.code(), Some(2), "clap rejects an unknown mode");
    assert!(
        stderr(&o).contains("error, keep, zeros, random"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn compile_for_nvptx_puts_f16_dots_on_tensor_cores_unless_told_not_to() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("dot.hlo");
    std::fs::write(
        &f,
        "HloModule d\nENTRY main {\n  a = f16[64,32] parameter(0)\n  b = f16[32,48] parameter(1)\n  \
         ROOT d = f16[64,48] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
    )
    .unwrap();
    let file = f.to_str().unwrap();
    let compile = |tc: &str| {
        axle(&[
            "compile",
            file,
            "--backend",
            "nvptx",
            "--emit",
            "ptx",
            "--tensor-cores",
            tc,
        ])
    };
    let ptx = |tc: &str| {
        let o = compile(tc);
        assert!(o.status.success(), "{}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let mma = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32";
    assert!(ptx("auto").contains(mma));
    assert!(ptx("always").contains(mma));
    assert!(!ptx("off").contains("mma.sync"));
    let o = compile("sometimes");
    // A setting clap does not know: its usage error (exit status 2).
    fails_with(&o, 2, &["sometimes", "auto", "off", "always"]);
}

#[test]
fn float_atomics_are_opt_in_for_compiles_and_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("scatter.hlo");
    std::fs::write(
        &f,
        "HloModule s\nadd {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  \
         ROOT r = f32[] add(x, y)\n}\nENTRY main {\n  x = f32[7,5] parameter(0)\n  \
         u = f32[6,5] parameter(1)\n  i = s32[6,1] constant({{1},{3},{1},{6},{0},{1}})\n  \
         ROOT s = f32[7,5] scatter(x, i, u), update_window_dims={1}, inserted_window_dims={0}, \
         scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add\n}\n",
    )
    .unwrap();
    let file = f.to_str().unwrap();
    let ptx = |extra: &[&str]| {
        let mut args = vec!["compile", file, "--backend", "nvptx", "--emit", "ptx"];
        args.extend_from_slice(extra);
        let o = axle(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let atomic = |p: &str| p.contains("atom.global.add.f32") || p.contains("red.global.add.f32");
    assert!(atomic(&ptx(&["--float-atomics"])));
    assert!(!atomic(&ptx(&[])));
    let run = |value: &str| {
        Command::new(env!("CARGO_BIN_EXE_axle"))
            .args(["run", file, "--backend", "nvptx-sim"])
            .env("AXLE_NVPTX_FLOAT_ATOMICS", value)
            .output()
            .expect("runs axle")
    };
    let o = run("1");
    assert!(o.status.success(), "{}", stderr(&o));
    // A value other than 0 or 1 is an error naming the variable, not a silent default.
    fails_with(&run("yes"), 1, &["AXLE_NVPTX_FLOAT_ATOMICS=yes"]);
}

#[test]
fn compile_for_nvptx_prints_ptx_or_llvm_ir_for_the_gpu_arch() {
    let file = corpus("int_arith_s32.hlo");
    let o = axle(&["compile", &file, "--backend", "nvptx", "--emit", "ptx"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let ptx = String::from_utf8_lossy(&o.stdout);
    assert!(
        ptx.contains(".target sm_80") && ptx.contains(".entry"),
        "{ptx}"
    );
    let o = axle(&[
        "compile",
        &file,
        "--backend",
        "nvptx",
        "--emit",
        "ptx",
        "--gpu-arch",
        "sm_90",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains(".target sm_90"));
    let o = axle(&["compile", &file, "--backend", "nvptx", "--emit", "llvm"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("nvptx64-nvidia-cuda"));
    // An unknown architecture, an op the backend does not compile yet, PTX from the cpu
    // backend, and compiling for execution (no GPU runtime yet) are clear errors.
    let o = axle(&[
        "compile",
        &file,
        "--backend",
        "nvptx",
        "--emit",
        "ptx",
        "--gpu-arch",
        "sm_75",
    ]);
    assert_fails(&o, &["unknown GPU architecture 'sm_75'"]);
    let tmp = tempfile::tempdir().unwrap();
    let foo = tmp.path().join("foo.hlo");
    std::fs::write(
        &foo,
        "HloModule f\nENTRY main {\n  x = f32[8] parameter(0)\n  \
         ROOT f = f32[8] custom-call(x), custom_call_target=\"Foo\"\n}\n",
    )
    .unwrap();
    let o = axle(&[
        "compile",
        foo.to_str().unwrap(),
        "--backend",
        "nvptx",
        "--emit",
        "ptx",
    ]);
    assert_fails(&o, &["nvptx backend does not support custom-call \"Foo\""]);
    let o = axle(&["compile", &file, "--emit", "ptx"]);
    assert_fails(&o, &["--emit ptx needs --backend nvptx"]);
    // Compiling for execution needs a GPU: without the CUDA driver it is a clear error.
    if !axle_codegen_nvptx::cuda::driver_present() {
        let o = axle(&["compile", &file, "--backend", "nvptx"]);
        assert_fails(&o, &["no CUDA driver", "--backend nvptx-sim"]);
    }
}

#[test]
fn run_on_nvptx_sim_matches_xla_and_nvptx_without_a_gpu_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let mut args = vec!["run".to_string(), corpus("mlp_forward.hlo")];
    args.extend(mlp_inputs());
    args.extend(["--backend".into(), "nvptx-sim".into()]);
    args.extend(["--out-dir".into(), out.display().to_string()]);
    let o = axle(&args.iter().map(|s| s.as_str()).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("out0: f32[8,10]"), "{}", stdout(&o));
    let got = out.join("out0.npy").display().to_string();
    let o = axle(&[
        "compare",
        &corpus("mlp_forward.out0.npy"),
        &got,
        "--rtol",
        "1e-5",
        "--atol",
        "1e-5",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Generated inputs from a seed: the same output twice.
    let seeded = |seed: &str| {
        let o = axle(&[
            "run",
            &corpus("softmax_logsoftmax.hlo"),
            "--backend",
            "nvptx-sim",
            "--seed",
            seed,
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
            .lines()
            .filter(|l| l.starts_with("out"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(seeded("7"), seeded("7"));
    // An op the backend does not compile is refused naming it (a custom call with its target).
    let cc = tmp.path().join("cc.hlo");
    std::fs::write(
        &cc,
        "HloModule c\nENTRY e {\n  a = f32[4] parameter(0)\n  \
         ROOT r = f32[4] custom-call(a), custom_call_target=\"Frobnicate\"\n}\n",
    )
    .unwrap();
    let o = axle(&["run", &cc.display().to_string(), "--backend", "nvptx-sim"]);
    assert_fails(
        &o,
        &["nvptx backend does not support custom-call \"Frobnicate\""],
    );
    if !axle_codegen_nvptx::cuda::driver_present() {
        let o = axle(&["run", &corpus("mlp_forward.hlo"), "--backend", "nvptx"]);
        assert_fails(&o, &["no CUDA driver"]);
    }
}

/// A fixture `HloModuleProto` serialized by XLA (`hlo-proto/tests/data`).
fn proto_fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("hlo-proto/tests/data/{name}.pb"))
}

#[test]
fn run_reads_a_serialized_hlo_module_proto_by_name_and_by_content() {
    let tmp = tempfile::tempdir().unwrap();
    let pb = proto_fixture("while_collatz");
    // The same bytes under a name that says nothing: chosen by content.
    let unnamed = tmp.path().join("module.bin");
    std::fs::copy(&pb, &unnamed).unwrap();
    for (k, file) in [pb, unnamed].iter().enumerate() {
        let out = tmp.path().join(format!("out{k}"));
        let o = axle(&[
            "run",
            &file.display().to_string(),
            "--input",
            &corpus("while_collatz.in0.npy"),
            "--out-dir",
            &out.display().to_string(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        for j in 0..3 {
            let o = axle(&[
                "compare",
                &corpus(&format!("while_collatz.out{j}.npy")),
                &out.join(format!("out{j}.npy")).display().to_string(),
            ]);
            assert!(o.status.success(), "output {j}: {}", stderr(&o));
        }
    }
    // `parse` prints the module the proto holds.
    let o = axle(&[
        "parse",
        &proto_fixture("while_collatz").display().to_string(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains(" while("), "{}", stdout(&o));
}

#[test]
fn a_truncated_proto_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(proto_fixture("while_collatz")).unwrap();
    let f = tmp.path().join("cut.pb");
    std::fs::write(&f, &bytes[..bytes.len() / 2]).unwrap();
    let o = axle(&["run", &f.display().to_string()]);
    assert_fails(
        &o,
        &[&format!("{}: error: ", f.display()), "HloModuleProto"],
    );
}
