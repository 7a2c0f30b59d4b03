//! `mulhi` on the nvptx backend: the shared LLVM lowering (a widening multiply) on every integer
//! type, run by the host simulator against the reference evaluator on every pair of each type's
//! extremes and random pairs, unfused and fused; and the PTX of the 32- and 64-bit types, whose
//! 64- and 128-bit products the NVPTX target selects as `mul.hi`.

use axle_codegen_nvptx::{emit_text, Emit, GpuArch, NvptxOptions};
use axle_ir::literal::element_to_i128;
use axle_ir::{ElementType, Literal, Module};
use axle_testkit::{int_array, int_pairs, int_range, leaves};

mod common;
use common::{module, run_sim};

fn int_types() -> Vec<ElementType> {
    let tys: Vec<ElementType> = ElementType::ALL
        .iter()
        .copied()
        .filter(|t| t.is_int())
        .collect();
    assert_eq!(tys.len(), 12, "s2..s64 and u2..u64: {tys:?}");
    tys
}

/// `mulhi(a, b)` and `mulhi(b, a)` of `ty[n]`, and the two added to a mulhi by the type's
/// minimum in a loop fusion.
fn mulhi_module(ty: ElementType, n: usize) -> Module {
    let t = ty.name();
    let lo = int_range(ty).0;
    module(&format!(
        r#"HloModule m

fused {{
  p0 = {t}[{n}] parameter(0)
  p1 = {t}[{n}] parameter(1)
  c = {t}[] constant({lo})
  cb = {t}[{n}] broadcast(c), dimensions={{}}
  k = {t}[{n}] mulhi(p0, cb)
  h = {t}[{n}] mulhi(p1, p0)
  ROOT s = {t}[{n}] add(h, k)
}}

ENTRY main {{
  a = {t}[{n}] parameter(0)
  b = {t}[{n}] parameter(1)
  x = {t}[{n}] mulhi(a, b)
  f = {t}[{n}] fusion(a, b), kind=kLoop, calls=fused
  ROOT r = ({t}[{n}], {t}[{n}]) tuple(x, f)
}}
"#
    ))
}

#[test]
fn simulated_mulhi_matches_the_evaluator_on_every_integer_type() {
    for ty in int_types() {
        let (a, b) = int_pairs(ty, 300);
        let m = mulhi_module(ty, a.len());
        let args: Vec<Literal> = vec![int_array(ty, &a), int_array(ty, &b)];
        let want = leaves(&axle_analysis::eval::evaluate(&m, &args).expect("evaluates"));
        let got = run_sim(&m, &args).unwrap_or_else(|e| panic!("{ty}: {e}"));
        assert_eq!(want.len(), got.len());
        for (k, (w, g)) in want.iter().zip(&got).enumerate() {
            let bad: Vec<String> = (0..w.len())
                .filter(|&i| w.element_bytes(i) != g.element_bytes(i))
                .take(5)
                .map(|i| {
                    format!(
                        "mulhi({}, {}): sim {}, evaluator {}",
                        a[i],
                        b[i],
                        element_to_i128(ty, g.element_bytes(i)),
                        element_to_i128(ty, w.element_bytes(i))
                    )
                })
                .collect();
            assert!(bad.is_empty(), "{ty} out{k}: {}", bad.join("; "));
        }
    }
}

#[test]
fn ptx_of_wide_mulhi_uses_mul_hi() {
    for (ty, want) in [
        (ElementType::S64, "mul.hi.s64"),
        (ElementType::U64, "mul.hi.u64"),
        (ElementType::S32, "mul.hi.s32"),
        (ElementType::U32, "mul.hi.u32"),
    ] {
        let m = mulhi_module(ty, 1000);
        for arch in GpuArch::ALL {
            let opts = NvptxOptions {
                gpu_arch: arch,
                ..Default::default()
            };
            let ptx = emit_text(&m, &opts, Emit::Ptx).unwrap_or_else(|e| panic!("{ty}: {e}"));
            assert!(ptx.contains(want), "{ty} on {arch:?}: no {want} in\n{ptx}");
        }
    }
}
