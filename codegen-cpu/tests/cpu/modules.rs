//! A program with hundreds of distinct kernels, which the backend splits into several LLVM
//! modules compiled on rayon threads: its results match the evaluator, its artifact holds one
//! object per module and is byte for byte the same when compiled on one thread and on eight,
//! the artifact loads into the same results, and its ahead-of-time object (the modules linked
//! into one) exports only the entry point.

use axle_analysis::eval::evaluate;
use axle_codegen_cpu::{compile_aot, compile_with_artifact, load_artifact, CpuOptions};
use axle_ir::{compare_arrays, parse_module, ElementType, Literal, Module, Tolerance};
use axle_testkit::{leaves, real_array};

/// A chain of `n` slices, each one element shorter than the last and passed through a
/// different elementwise op, so every kernel has its own shape and none shares code.
fn distinct_kernels(n: usize) -> Module {
    let len = n + 8;
    let mut body = format!("  x = f32[{len}] parameter(0)\n");
    let mut prev = "x".to_string();
    for i in 0..n {
        let w = len - i - 1;
        let op = ["sine", "negate", "exponential", "tanh", "abs"][i % 5];
        body.push_str(&format!(
            "  s{i} = f32[{w}] slice({prev}), slice={{[0:{w}]}}\n  v{i} = f32[{w}] {op}(s{i})\n"
        ));
        prev = format!("v{i}");
    }
    let text = format!(
        "HloModule distinct\n\nENTRY main {{\n{body}  ROOT r = f32[{}] copy({prev})\n}}\n",
        len - n
    );
    parse_module(&text).unwrap_or_else(|e| panic!("{e}"))
}

fn input(n: usize) -> Vec<Literal> {
    vec![real_array(ElementType::F32, &[(n + 8) as i64], |i| {
        (i as f64 * 0.37).sin()
    })]
}

#[test]
fn split_modules_match_the_evaluator_at_any_thread_count() {
    let m = distinct_kernels(300);
    let args = input(300);
    let want = leaves(&evaluate(&m, &args).expect("evaluates"));
    let opts = CpuOptions {
        libm_math: true,
        ..Default::default()
    };
    let on = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("a pool")
            .install(|| compile_with_artifact(&m, &opts).expect("compiles"))
    };
    let (exe1, art1) = on(1);
    let (exe8, art8) = on(8);
    assert!(
        art1.objects().len() >= 3,
        "{} objects: the kernels were not split",
        art1.objects().len()
    );
    assert!(
        art1.to_bytes() == art8.to_bytes(),
        "the object code depends on the thread count"
    );
    let loaded = load_artifact(
        &axle_codegen_cpu::Artifact::from_bytes(&art1.to_bytes()).expect("decodes"),
        &opts,
    )
    .expect("loads");
    let tol = Tolerance::Close {
        rtol: 1e-5,
        atol: 1e-6,
    };
    for exe in [&exe1, &exe8, &loaded] {
        let got = exe.run_literals(&args).expect("runs");
        assert_eq!(got.len(), want.len());
        for (w, g) in want.iter().zip(&got) {
            compare_arrays(w, g, tol).expect("matches the evaluator");
        }
    }
    let aot = compile_aot(&m, &opts, "split").expect("compiles ahead of time");
    let exported = exported_symbols(&aot.object);
    assert_eq!(exported, vec!["split_run".to_string()], "{exported:?}");
}

/// The defined global symbols of an ELF object, listed by binutils' `nm` (which the C
/// toolchain the AOT tests use brings).
fn exported_symbols(object: &[u8]) -> Vec<String> {
    let dir = std::env::temp_dir().join(format!("axle-modules-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let path = dir.join("split.o");
    std::fs::write(&path, object).expect("writes the object");
    let out = std::process::Command::new("nm")
        .args(["--defined-only", "--extern-only", "--format=just-symbols"])
        .arg(&path)
        .output();
    let _ = std::fs::remove_dir_all(&dir);
    let out = out.expect("nm runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}
