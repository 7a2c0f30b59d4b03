//! Parameters donated through `input_output_alias`: the buffer assignment may leave an output
//! in the donated parameter's memory and update it there. A run on read-only inputs copies the
//! donated ones first and never writes its inputs; a run handed the donated bytes in the
//! output's own buffer (`execute_donated`) updates them in place with no copy. Both give the
//! same results as the same module without the alias; the alias survives an artifact's round
//! trip (the compilation cache).

use axle_codegen_cpu::{compile, compile_with_artifact, load_artifact, Artifact, CpuOptions};
use axle_ir::parse_module;

/// A `dynamic-update-slice` of `p` (1024 floats) by `u` (16), and `u` negated; with `alias`,
/// output 0 is donated parameter 0.
fn module(alias: bool) -> String {
    let header = if alias {
        ", input_output_alias={ {0}: (0, {}, may-alias) }"
    } else {
        ""
    };
    format!(
        "HloModule donate{header}
ENTRY e {{
  p = f32[1024] parameter(0)
  u = f32[16] parameter(1)
  i = s32[] constant(100)
  d = f32[1024] dynamic-update-slice(p, u, i)
  n = f32[16] negate(u)
  ROOT t = (f32[1024], f32[16]) tuple(d, n)
}}
"
    )
}

fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn floats(b: &[u8]) -> Vec<f32> {
    b.chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn inputs() -> (Vec<f32>, Vec<f32>) {
    let p: Vec<f32> = (0..1024).map(|k| k as f32 * 0.5).collect();
    let u: Vec<f32> = (0..16).map(|k| -(k as f32) - 1.0).collect();
    (p, u)
}

fn expected() -> (Vec<f32>, Vec<f32>) {
    let (mut p, u) = inputs();
    p[100..116].copy_from_slice(&u);
    (p, u.iter().map(|x| -x).collect())
}

fn opts() -> CpuOptions {
    CpuOptions {
        threads: 1,
        ..Default::default()
    }
}

#[test]
fn a_donated_output_lives_in_its_parameter() {
    let exe = compile(&parse_module(&module(true)).unwrap(), &opts()).unwrap();
    assert_eq!(exe.donated_outputs(), &[(0, 0)]);
    let plain = compile(&parse_module(&module(false)).unwrap(), &opts()).unwrap();
    assert!(plain.donated_outputs().is_empty());
}

#[test]
fn a_run_on_read_only_inputs_copies_the_donated_one() {
    let (p, u) = inputs();
    let (pb, ub) = (bytes(&p), bytes(&u));
    for alias in [false, true] {
        let exe = compile(&parse_module(&module(alias)).unwrap(), &opts()).unwrap();
        let mut outs = vec![vec![0u8; 4096], vec![0u8; 64]];
        exe.execute(&[&pb[..], &ub[..]], &mut outs).unwrap();
        assert_eq!(pb, bytes(&p), "the input was written (alias {alias})");
        let (d, n) = expected();
        assert_eq!(floats(&outs[0]), d, "alias {alias}");
        assert_eq!(floats(&outs[1]), n, "alias {alias}");
    }
}

#[test]
fn a_donated_input_in_its_output_is_updated_in_place() {
    let (p, u) = inputs();
    let ub = bytes(&u);
    let exe = compile(&parse_module(&module(true)).unwrap(), &opts()).unwrap();
    // The caller's donated array, handed over as output 0's buffer.
    let mut outs = vec![bytes(&p), vec![0u8; 64]];
    let before = outs[0].as_ptr();
    exe.execute_donated(&[None, Some(&ub[..])], &mut outs)
        .unwrap();
    assert_eq!(outs[0].as_ptr(), before);
    let (d, n) = expected();
    assert_eq!(floats(&outs[0]), d);
    assert_eq!(floats(&outs[1]), n);
}

#[test]
fn an_input_left_out_must_be_donated_to_an_output() {
    let (p, u) = inputs();
    let (pb, ub) = (bytes(&p), bytes(&u));
    let plain = compile(&parse_module(&module(false)).unwrap(), &opts()).unwrap();
    let mut outs = vec![vec![0u8; 4096], vec![0u8; 64]];
    let e = plain
        .execute_donated(&[None, Some(&ub[..])], &mut outs)
        .unwrap_err();
    assert!(e.to_string().contains("input 0"), "{e}");
    let donated = compile(&parse_module(&module(true)).unwrap(), &opts()).unwrap();
    let e = donated
        .execute_donated(&[Some(&pb[..]), None], &mut outs)
        .unwrap_err();
    assert!(e.to_string().contains("input 1"), "{e}");
}

#[test]
fn the_alias_survives_an_artifact_round_trip() {
    let m = parse_module(&module(true)).unwrap();
    let (_, artifact) = compile_with_artifact(&m, &opts()).unwrap();
    let back = Artifact::from_bytes(&artifact.to_bytes()).unwrap();
    let exe = load_artifact(&back, &opts()).unwrap();
    assert_eq!(exe.donated_outputs(), &[(0, 0)]);
    let (p, u) = inputs();
    let mut outs = vec![bytes(&p), vec![0u8; 64]];
    let ub = bytes(&u);
    exe.execute_donated(&[None, Some(&ub[..])], &mut outs)
        .unwrap();
    assert_eq!(floats(&outs[0]), expected().0);
}
