//! The nvptx backend's loop kernels on small modules: PTX for each architecture, one kernel
//! per fusion or elementwise instruction with the launch plan of its output, the 64-bit index
//! path for outputs past `i32::MAX` elements, no kernel for zero-sized outputs, and refusals
//! that name the instruction and its op.

use axle_codegen_nvptx::{
    emit_text, plan_kernels, Emit, GpuArch, KernelKind, NvptxError, NvptxOptions,
};
use axle_ir::Module;

mod common;
use common::{module, ptx_checked};

fn ptx(m: &Module, arch: GpuArch) -> String {
    emit_text(
        m,
        &NvptxOptions {
            gpu_arch: arch,
            ..Default::default()
        },
        Emit::Ptx,
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

const FUSED: &str = r#"
HloModule fused

fused_computation {
  p0 = f32[5,7] parameter(0)
  p1 = f32[5,7] parameter(1)
  m = f32[5,7] multiply(p0, p1)
  ROOT t = f32[5,7] tanh(m)
}

ENTRY e {
  a = f32[5,7] parameter(0)
  b = f32[5,7] parameter(1)
  f = f32[5,7] fusion(a, b), kind=kLoop, calls=fused_computation
  ROOT n = f32[5,7] negate(f)
}
"#;

#[test]
fn one_kernel_per_fusion_and_elementwise_instruction() {
    let m = module(FUSED);
    let ks = plan_kernels(&m).unwrap();
    assert_eq!(ks.len(), 2, "{ks:?}");
    assert_eq!((ks[0].plan.grid, ks[0].plan.block), (1, 64));
    assert_eq!(ks[0].plan.elements, 35);
    assert_eq!(ks[0].operands.len(), 2);
    assert_eq!(ks[1].operands.len(), 1);
    for (arch, p) in GpuArch::ALL.into_iter().zip(ptx_checked(&m, "fused")) {
        assert!(p.contains(&format!(".target {}", arch.name())), "{p}");
        assert_eq!(p.matches(".entry").count(), 2, "{p}");
        assert!(p.contains(&format!(".entry {}", ks[0].name)), "{p}");
        assert!(
            p.contains("ld.global.f32") && p.contains("st.global.f32"),
            "{p}"
        );
        // The 32-bit index path: one multiply-add of the block and thread registers.
        assert!(p.contains("mad.lo.s32"), "{p}");
    }
    let ir = emit_text(&m, &NvptxOptions::default(), Emit::LlvmIr).unwrap();
    assert!(
        ir.contains("nvptx64-nvidia-cuda") && ir.contains("!\"kernel\""),
        "{ir}"
    );
}

#[test]
fn outputs_past_two_to_the_31_elements_index_in_64_bits() {
    let m = module(
        "HloModule big\nENTRY e {\n  a = f32[3000000001] parameter(0)\n  ROOT n = f32[3000000001] negate(a)\n}\n",
    );
    let ks = plan_kernels(&m).unwrap();
    // Not a multiple of 4: one element per thread, so more than 2^31 threads.
    assert_eq!(ks[0].kind, KernelKind::Loop);
    assert!(ks[0].plan.wide_index, "{:?}", ks[0].plan);
    let p = ptx(&m, GpuArch::Sm80);
    // The thread index is widened before the block multiply, and compared in 64 bits.
    assert!(
        p.contains("mul.wide.u32") || p.contains("mul.lo.s64"),
        "{p}"
    );
    assert!(p.contains("3000000000"), "{p}");
    assert!(!p.contains("mad.lo.s32"), "{p}");
}

#[test]
fn zero_sized_outputs_have_no_kernel() {
    let m = module(
        "HloModule z\nENTRY e {\n  a = f32[0,4] parameter(0)\n  ROOT n = f32[0,4] negate(a)\n}\n",
    );
    assert!(plan_kernels(&m).unwrap().is_empty());
    assert!(!ptx(&m, GpuArch::Sm80).contains(".entry"));
}

#[test]
fn unsupported_ops_are_errors_naming_them() {
    let m = module(
        r#"
HloModule c
ENTRY e {
  a = f32[8] parameter(0)
  ROOT c = f32[8] custom-call(a), custom_call_target="Foo"
}
"#,
    );
    let e = emit_text(&m, &NvptxOptions::default(), Emit::Ptx).unwrap_err();
    assert_eq!(
        (e.instruction.as_str(), e.opcode.as_str()),
        ("c", "custom-call"),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("nvptx backend does not support custom-call \"Foo\""),
        "{e}"
    );
}

#[test]
fn unknown_architectures_are_refused() {
    let e = GpuArch::from_name("sm_75").unwrap_err();
    assert_eq!(e, NvptxError::UnknownArch("sm_75".into()));
    let e = e.to_string();
    assert!(e.contains("sm_75") && e.contains("sm_80"), "{e}");
    assert_eq!(GpuArch::from_name("sm_90"), Ok(GpuArch::Sm90));
}

#[test]
fn math_functions_come_from_libdevice_where_it_is_present() {
    let m = module(
        "HloModule t\nENTRY e {\n  a = f32[100] parameter(0)\n  b = f32[100] parameter(1)\n  t = f32[100] tan(a)\n  ROOT p = f32[100] power(t, b)\n}\n",
    );
    let Some(libdevice) = axle_codegen_nvptx::libdevice::find_libdevice() else {
        eprintln!(
            "math_functions_come_from_libdevice: no libdevice (set AXLE_LIBDEVICE or \
             AXLE_PTXAS, or run `make deps`): not checked (tests/math_fallback.rs checks the \
             inline forms)"
        );
        return;
    };
    for arch in GpuArch::ALL {
        let opts = NvptxOptions {
            gpu_arch: arch,
            libdevice: Some(libdevice.clone()),
            ..Default::default()
        };
        let p = emit_text(&m, &opts, Emit::Ptx).unwrap_or_else(|e| panic!("{e}"));
        // libdevice's functions are inlined into the two kernels: no calls left.
        assert_eq!(p.matches(".entry").count(), 2, "{p}");
        assert!(!p.contains("call.uni") && !p.contains("__nv_"), "{p}");
        if let Some(x) = axle_codegen_nvptx::ptxas::find_ptxas() {
            axle_codegen_nvptx::ptxas::assemble(&x, &p, arch, "libdevice")
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

#[test]
fn elementwise_kernels_over_multiples_of_4_take_128_bit_accesses() {
    let m = module(
        "HloModule v\nENTRY e {\n  a = f32[8,128] parameter(0)\n  b = f32[8,128] parameter(1)\n  \
         k = f32[] constant(2)\n  kb = f32[8,128] broadcast(k), dimensions={}\n  \
         s = f32[8,128] add(a, b)\n  ROOT m = f32[8,128] multiply(s, kb)\n}\n",
    );
    let ks = plan_kernels(&m).unwrap();
    for k in &ks {
        // Four elements per thread: 256 threads for 1024 elements.
        if k.kind == (KernelKind::VectorLoop { width: 4 }) {
            assert_eq!((k.plan.grid, k.plan.block, k.plan.elements), (1, 256, 256));
        }
    }
    assert!(
        ks.iter()
            .any(|k| k.kind == KernelKind::VectorLoop { width: 4 }),
        "{ks:?}"
    );
    for p in ptx_checked(&m, "vector_loop") {
        assert!(
            p.contains("ld.global.v4.f32") && p.contains("st.global.v4.f32"),
            "{p}"
        );
    }
    // Not a multiple of 4, or reading other elements than its own: one element per thread.
    for text in [
        "HloModule o\nENTRY e {\n  a = f32[7,5] parameter(0)\n  ROOT n = f32[7,5] negate(a)\n}\n",
        "HloModule t\nENTRY e {\n  a = f32[8] parameter(0)\n  \
         ROOT b = f32[4,8] broadcast(a), dimensions={1}\n}\n",
        "HloModule r\nENTRY e {\n  a = f32[16] parameter(0)\n  \
         ROOT r = f32[16] reverse(a), dimensions={0}\n}\n",
    ] {
        let ks = plan_kernels(&module(text)).unwrap();
        assert_eq!(ks[0].kind, KernelKind::Loop, "{text}");
    }
}
