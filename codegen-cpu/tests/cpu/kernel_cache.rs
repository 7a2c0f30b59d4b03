//! The kernel cache: a program that shares kernels with one compiled before loads their LLVM
//! modules from the cache (a different program: a layer inserted in front of the same stack),
//! and its results are bit for bit those of compiling it without the cache; entries do not
//! cross code generator options; entries that do not decode are misses, never wrong code.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use axle_analysis::eval::evaluate;
use axle_codegen_cpu::{compile, compile_with_kernel_cache, CpuOptions, KernelCache};
use axle_ir::{
    compare_arrays, parse_module, ArrayLiteral, ElementType, Literal, Module, Tolerance,
};
use axle_testkit::{leaves, real_array};

/// A kernel cache in memory, counting the entries it hands out.
#[derive(Default)]
struct MemCache {
    entries: Mutex<HashMap<Vec<u8>, Vec<u8>>>,
    hits: AtomicUsize,
    /// Hand out every entry cut short (a torn or foreign entry).
    torn: bool,
}

impl KernelCache for MemCache {
    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        let e = self.entries.lock().unwrap().get(key).cloned()?;
        self.hits.fetch_add(1, Ordering::Relaxed);
        Some(if self.torn {
            e[..e.len() / 2].to_vec()
        } else {
            e
        })
    }

    fn put(&self, key: &[u8], value: &[u8]) {
        self.entries
            .lock()
            .unwrap()
            .insert(key.to_vec(), value.to_vec());
    }
}

/// A stack of dense layers over a batch of 16, layer `i` from width `widths[i]` to
/// `widths[i + 1]`: a dot with its own weight parameter, a bias, `tanh` (or `relu` where
/// `relu[i]`), and a row sum of every layer's output as a leaf of the result. Each layer's
/// operations are separate kernels (a GEMM, elementwise loops, a reduction).
fn stack(widths: &[i64], relu: &[bool]) -> Module {
    let mut t = String::from(
        "HloModule stack\n\nsum {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  \
         ROOT s = f32[] add(a, b)\n}\n\nENTRY main {\n",
    );
    t.push_str(&format!("  h0 = f32[16,{}] parameter(0)\n", widths[0]));
    let mut outs = Vec::new();
    let mut shapes = Vec::new();
    for i in 0..widths.len() - 1 {
        let (a, b) = (widths[i], widths[i + 1]);
        let n = i + 1;
        t.push_str(&format!(
            "  w{n} = f32[{a},{b}] parameter({})\n  c{n} = f32[{b}] parameter({})\n  \
             d{n} = f32[16,{b}] dot(h{i}, w{n}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n  \
             cb{n} = f32[16,{b}] broadcast(c{n}), dimensions={{1}}\n  \
             a{n} = f32[16,{b}] add(d{n}, cb{n})\n",
            2 * i + 1,
            2 * i + 2
        ));
        if relu[i] {
            t.push_str(&format!(
                "  z{n} = f32[] constant(0)\n  zb{n} = f32[16,{b}] broadcast(z{n}), dimensions={{}}\n  \
                 h{n} = f32[16,{b}] maximum(a{n}, zb{n})\n"
            ));
        } else {
            t.push_str(&format!("  h{n} = f32[16,{b}] tanh(a{n})\n"));
        }
        t.push_str(&format!(
            "  r{n} = f32[16] reduce(h{n}, z), dimensions={{1}}, to_apply=sum\n"
        ));
        outs.push(format!("r{n}"));
        shapes.push("f32[16]");
    }
    t.push_str(&format!(
        "  z = f32[] constant(0)\n  ROOT out = ({}) tuple({})\n}}\n",
        shapes.join(", "),
        outs.join(", ")
    ));
    parse_module(&t).unwrap_or_else(|e| panic!("{}", e.render("stack")))
}

fn args(widths: &[i64]) -> Vec<Literal> {
    let mut v = vec![real_array(ElementType::F32, &[16, widths[0]], |i| {
        (i as f64 * 0.37).sin()
    })];
    for (i, w) in widths.windows(2).enumerate() {
        let s = 1.0 / (w[0] as f64).sqrt();
        v.push(real_array(ElementType::F32, &[w[0], w[1]], |j| {
            s * ((j * 7 + i) as f64 * 0.11).cos()
        }));
        v.push(real_array(ElementType::F32, &[w[1]], |j| {
            0.1 * (j as f64 * 0.3 + i as f64).sin()
        }));
    }
    v
}

/// Generated GEMMs: each is an LLVM module of its own, which the checks below count on (on the
/// precompiled GEMM a dot's kernel is a call, grouped with other kernels).
fn opts(threads: usize) -> CpuOptions {
    CpuOptions {
        threads,
        gemm_library: false,
        ..Default::default()
    }
}

/// Compiles `m` with `cache` and runs it; returns the outputs and the kernel modules (all,
/// and from the cache).
fn run_cached(
    m: &Module,
    a: &[Literal],
    o: &CpuOptions,
    cache: &MemCache,
) -> (Vec<ArrayLiteral>, usize, usize) {
    let (exe, _) = compile_with_kernel_cache(m, o, cache).expect("compiles");
    let out = exe.run_literals(a).expect("runs");
    let t = exe.timings();
    (out, t.kernel_modules, t.cached_modules)
}

fn run_plain(m: &Module, a: &[Literal], o: &CpuOptions) -> Vec<ArrayLiteral> {
    compile(m, o)
        .expect("compiles")
        .run_literals(a)
        .expect("runs")
}

const WIDTHS: [i64; 5] = [48, 64, 80, 96, 112];

#[test]
fn a_program_sharing_kernels_loads_them_and_computes_the_same_bits() {
    let cache = MemCache::default();
    let first = stack(&WIDTHS, &[false; 4]);
    let (_, modules, cached) = run_cached(&first, &args(&WIDTHS), &opts(2), &cache);
    assert!(modules >= 4, "one module per GEMM at least: {modules}");
    assert_eq!(cached, 0);

    // The same stack behind a new first layer (32 -> 48, relu): its kernels are new, the
    // others are the first program's.
    let widths: Vec<i64> = [32].iter().chain(&WIDTHS).copied().collect();
    let mut relu = vec![false; widths.len() - 1];
    relu[0] = true;
    let second = stack(&widths, &relu);
    let a = args(&widths);
    let (got, modules, cached) = run_cached(&second, &a, &opts(2), &cache);
    assert!(
        cached >= 4 && cached < modules,
        "the four GEMMs of the shared layers come from the cache, the new layer's kernels do \
         not: {cached} of {modules}"
    );
    let want = run_plain(&second, &a, &opts(2));
    assert_eq!(got.len(), want.len());
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "leaf {k}: cached kernels give other bits");
    }
    // And both are right.
    let reference = leaves(&evaluate(&second, &a).expect("evaluates"));
    let tol = Tolerance::Close {
        rtol: 1e-4,
        atol: 1e-5,
    };
    for (k, (g, r)) in got.iter().zip(&reference).enumerate() {
        compare_arrays(r, g, tol).unwrap_or_else(|e| panic!("leaf {k}: {e}"));
    }

    // Compiling the first program again loads every module.
    let (_, modules, cached) = run_cached(&first, &args(&WIDTHS), &opts(2), &cache);
    assert_eq!(cached, modules);
}

#[test]
fn entries_do_not_cross_options() {
    let cache = MemCache::default();
    let m = stack(&WIDTHS, &[false; 4]);
    run_cached(&m, &args(&WIDTHS), &opts(2), &cache);
    // The GEMM's work split depends on the thread count, so its code does.
    let (got, _, cached) = run_cached(&m, &args(&WIDTHS), &opts(1), &cache);
    assert_eq!(cached, 0);
    assert_eq!(got, run_plain(&m, &args(&WIDTHS), &opts(1)));
}

#[test]
fn entries_that_do_not_decode_are_misses() {
    let m = stack(&WIDTHS, &[true; 4]);
    let a = args(&WIDTHS);
    let cache = MemCache {
        torn: true,
        ..Default::default()
    };
    run_cached(&m, &a, &opts(2), &cache);
    let (got, _, cached) = run_cached(&m, &a, &opts(2), &cache);
    assert!(
        cache.hits.load(Ordering::Relaxed) > 0,
        "entries were handed out"
    );
    assert_eq!(cached, 0);
    assert_eq!(got, run_plain(&m, &a, &opts(2)));
}
