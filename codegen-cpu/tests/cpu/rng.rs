//! `rng-bit-generator` on the CPU backend against the reference evaluator (itself checked bit
//! for bit against XLA) on shapes larger than the XLA reference cases: odd sizes, every element
//! width, 2- and 3-word states with counters about to wrap, at thread counts 1, 2, 3 and 8 (the
//! kernel's blocks are split across threads, and the bits must not depend on the split).

use axle_analysis::evaluate;
use axle_codegen_cpu::{compile, CpuOptions};
use axle_ir::{parse_module, ArrayLiteral, Literal};

fn module(algo: &str, state_len: usize, out: &str) -> axle_ir::Module {
    let text = format!(
        "HloModule m\nENTRY main {{\n  s = u64[{state_len}] parameter(0)\n  \
         ROOT r = (u64[{state_len}], {out}) rng-bit-generator(s), algorithm={algo}\n}}\n"
    );
    parse_module(&text).unwrap_or_else(|e| panic!("{out}: {e:?}"))
}

fn states() -> Vec<Vec<u64>> {
    vec![
        vec![0x0123_4567_89AB_CDEF, 42],
        vec![7, u64::MAX - 3],
        vec![0xDEAD_BEEF_0BAD_F00D, u64::MAX - 1000, 5],
        vec![1, 2, u64::MAX, 9],
    ]
}

const SHAPES: &[&str] = &[
    "f32[1000,37]",
    "u64[3,5,7]",
    "u32[301,303]",
    "u8[9,1,41]",
    "u16[2,2049]",
    "s32[8193]",
    "s64[999]",
    "f64[17,3]",
    "u32[]",
    "u32[4,0]",
    "f16[33]",
    "bf16[6,7]",
];

#[test]
fn matches_the_evaluator_at_every_thread_count() {
    let mut checked = 0;
    for algo in ["rng_three_fry", "rng_philox", "rng_default"] {
        for state in states() {
            for shape in SHAPES {
                let m = module(algo, state.len(), shape);
                let arg = Literal::Array(ArrayLiteral::from_slice(&[state.len() as i64], &state));
                let want = evaluate(&m, std::slice::from_ref(&arg)).expect("evaluates");
                let want = match want {
                    Literal::Tuple(es) => es,
                    l => panic!("expected a tuple, got {l:?}"),
                };
                // One compile per case, the thread count rotating through 1, 2, 3 and 8, so
                // each shape runs at every count across the algorithms and states (a compile
                // per count and case was 576 compiles, most of this crate's test time).
                let threads = [1, 2, 3, 8][(checked + checked / SHAPES.len()) % 4];
                let opts = CpuOptions {
                    threads,
                    ..Default::default()
                };
                let exe = compile(&m, &opts).expect("compiles");
                let got = exe.run_literals(std::slice::from_ref(&arg)).expect("runs");
                assert_eq!(got.len(), 2);
                for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                    let w = w.as_array().expect("array result");
                    assert_eq!(g.shape, w.shape, "{algo} {shape} output {k}");
                    assert!(
                        g.data == w.data,
                        "{algo} {shape} state {state:?} output {k} differs at {threads} threads"
                    );
                }
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 3 * 4 * SHAPES.len());
}

#[test]
fn unsupported_element_type_is_an_error() {
    let m = module("rng_philox", 2, "pred[4]");
    let Err(err) = compile(&m, &CpuOptions::default()) else {
        panic!("pred bits are refused");
    };
    let text = err.to_string();
    assert!(text.contains("rng-bit-generator"), "{text}");
    assert!(text.contains("pred"), "{text}");
}
