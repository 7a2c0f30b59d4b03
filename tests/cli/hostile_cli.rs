//! Hostile input through the `axle` command line, by class (issue 15): each case asserts the
//! exact error (or the correct result) and the exit status, on both the `interpreter` and the
//! `cpu` backend wherever a backend runs. Failures exit with status 1 (status 2 for arguments
//! the command line parser refuses), print nothing on standard output and leave no file behind.
//! Nothing here allocates what the hostile sizes ask for: memory ceilings are small and long
//! texts moderate.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

mod common;
use common::{fails_with, stderr, stdout, write};

const BACKENDS: [&str; 2] = ["interpreter", "cpu"];

fn axle_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_axle"));
    c.args(args).env_remove("AXLE_MEMORY_LIMIT");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("runs axle")
}

fn axle(args: &[&str]) -> Output {
    axle_env(args, &[])
}

fn npy(dir: &Path, name: &str, lit: &axle::ir::ArrayLiteral) -> String {
    let p = dir.join(name);
    axle::ir::write_npy(&p, lit).unwrap();
    p.display().to_string()
}

/// Asserts a failure with `code`, nothing on stdout, and exactly `expected` on stderr.
fn fails_exactly(o: &Output, code: i32, expected: &str) {
    assert_eq!(o.status.code(), Some(code), "stderr: {}", stderr(o));
    assert!(o.stdout.is_empty(), "stdout not empty: {}", stdout(o));
    assert_eq!(stderr(o), expected);
}

/// Asserts success and returns stdout.
fn succeeds(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(o));
    stdout(o)
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    v.sort();
    v
}

/// `f32[4]` in, negated out.
const NEGATE4: &str =
    "HloModule m\nENTRY e {\n  a = f32[4] parameter(0)\n  ROOT n = f32[4] negate(a)\n}\n";

const UNBOUNDED: &str =
    "('?'); no backend runs unbounded dynamic shapes (bounded ones, '<=N', run at their bound)";

// ---- 1. Unbounded dynamic dimensions ----

#[test]
fn c1_unbounded_dot_is_refused_on_every_backend() {
    let d = tmp();
    let f = write(
        d.path(),
        "dot.hlo",
        "HloModule m\nENTRY e {\n  a = f32[?,4] parameter(0)\n  b = f32[4,3] parameter(1)\n  ROOT d = f32[?,3] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
    );
    for b in BACKENDS {
        let o = axle(&["run", &f, "--backend", b]);
        fails_exactly(
            &o,
            1,
            &format!(
                "{f}:3:3: error: %a: f32[?,4] has an unbounded dynamic dimension {UNBOUNDED}\n  a = f32[?,4] parameter(0)\n  ^\n\
                 {f}:5:8: error: %d: f32[?,3] has an unbounded dynamic dimension {UNBOUNDED}\n  ROOT d = f32[?,3] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n       ^\n"
            ),
        );
    }
}

#[test]
fn c1_unbounded_contracting_dimension_is_refused() {
    let d = tmp();
    let f = write(
        d.path(),
        "dot.hlo",
        "HloModule m\nENTRY e {\n  a = f32[2,?] parameter(0)\n  b = f32[?,3] parameter(1)\n  ROOT d = f32[2,3] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
    );
    for b in BACKENDS {
        let o = axle(&["run", &f, "--backend", b]);
        fails_with(
            &o,
            1,
            &[
                &format!("{f}:3:3: error: %a: f32[2,?] has an unbounded dynamic dimension"),
                &format!("{f}:4:3: error: %b: f32[?,3] has an unbounded dynamic dimension"),
            ],
        );
    }
}

#[test]
fn c1_unbounded_reduce_iota_broadcast_transpose_reshape_are_refused() {
    let d = tmp();
    let cases = [
        ("reduce", "add { x = f32[] parameter(0)  y = f32[] parameter(1)  ROOT s = f32[] add(x, y) }\nENTRY e {\n  a = f32[4,?] parameter(0)\n  z = f32[] constant(0)\n  ROOT r = f32[4] reduce(a, z), dimensions={1}, to_apply=add\n}\n", "%a: f32[4,?]"),
        ("iota", "ENTRY e {\n  ROOT i = f32[4,?] iota(), iota_dimension=0\n}\n", "%i: f32[4,?]"),
        ("broadcast", "ENTRY e {\n  a = f32[] parameter(0)\n  ROOT b = f32[?,4] broadcast(a), dimensions={}\n}\n", "%b: f32[?,4]"),
        ("transpose", "ENTRY e {\n  a = f32[?,4] parameter(0)\n  ROOT t = f32[4,?] transpose(a), dimensions={1,0}\n}\n", "%t: f32[4,?]"),
        ("reshape", "ENTRY e {\n  a = f32[?] parameter(0)\n  ROOT r = f32[?] reshape(a)\n}\n", "%r: f32[?]"),
    ];
    for (name, body, what) in cases {
        let f = write(
            d.path(),
            &format!("{name}.hlo"),
            &format!("HloModule m\n{body}"),
        );
        for b in BACKENDS {
            let o = axle(&["run", &f, "--backend", b]);
            fails_with(
                &o,
                1,
                &[&format!(
                    "{what} has an unbounded dynamic dimension {UNBOUNDED}"
                )],
            );
            assert!(!stdout(&o).contains("-1"));
        }
    }
}

#[test]
fn c1_unbounded_inside_a_tuple_parameter_is_refused() {
    let d = tmp();
    let f = write(
        d.path(),
        "t.hlo",
        "HloModule m\nENTRY e {\n  p = (f32[2], s32[?]) parameter(0)\n  ROOT g = f32[2] get-tuple-element(p), index=0\n}\n",
    );
    for b in BACKENDS {
        let o = axle(&["run", &f, "--backend", b]);
        fails_exactly(
            &o,
            1,
            &format!("{f}:3:3: error: %p: (f32[2], s32[?]) has an unbounded dynamic dimension {UNBOUNDED}\n  p = (f32[2], s32[?]) parameter(0)\n  ^\n"),
        );
    }
}

#[test]
fn c1_unbounded_shapes_still_parse_and_print_as_in_xla() {
    let d = tmp();
    let f = write(
        d.path(),
        "p.hlo",
        "HloModule m\nENTRY e {\n  a = f32[?,4] parameter(0)\n  ROOT n = f32[?,4] negate(a)\n}\n",
    );
    let out = succeeds(&axle(&["parse", &f]));
    assert!(out.contains("f32[?,4]"), "{out}");
    // Compiling without running is refused too: no backend could run the result.
    let o = axle(&["compile", &f]);
    fails_with(&o, 1, &["%a: f32[?,4] has an unbounded dynamic dimension"]);
}

#[test]
fn c1_bounded_dynamic_dimensions_run_at_their_bound() {
    let d = tmp();
    let f = write(
        d.path(),
        "b.hlo",
        "HloModule m\nENTRY e {\n  a = f32[<=4] parameter(0)\n  n = f32[<=4] negate(a)\n  s = s32[] get-dimension-size(n), dimensions={0}\n  ROOT t = (f32[<=4], s32[]) tuple(n, s)\n}\n",
    );
    let x = npy(
        d.path(),
        "x.npy",
        &axle::ir::ArrayLiteral::from_slice(&[4], &[1.0f32, -2.0, 3.5, 0.0]),
    );
    for b in BACKENDS {
        let out = succeeds(&axle(&["run", &f, "--backend", b, "--input", &x]));
        assert!(
            out.starts_with("out0: f32[4] = [-1, 2, -3.5, -0]\nout1: s32[] = [4]\n"),
            "{b}: {out}"
        );
    }
    // An input of another size does not bind to the bound.
    let y = npy(
        d.path(),
        "y.npy",
        &axle::ir::ArrayLiteral::from_slice(&[3], &[1.0f32, 2.0, 3.0]),
    );
    for b in BACKENDS {
        let o = axle(&["run", &f, "--backend", b, "--input", &y]);
        fails_with(
            &o,
            1,
            &[&format!(
                "parameter 0 ('a'): {y} has shape [3] but the parameter needs f32[4]"
            )],
        );
    }
}

// ---- 2. Verifier gaps ----

/// A module whose reducer is f32 while the reduced values or init are of type `ty`.
fn reduce_module(input: &str, init: &str) -> String {
    format!(
        "HloModule m\nadd {{\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}}\nENTRY e {{\n  a = {input}[4] parameter(0)\n  z = {init}[] constant(0)\n  ROOT r = f32[] reduce(a, z), dimensions={{0}}, to_apply=add\n}}\n"
    )
}

#[test]
fn c2_reduce_float_type_mismatches_are_verifier_errors() {
    let d = tmp();
    let cases = [
        (
            "f32",
            "bf16",
            "operands mix floating-point types f32 and bf16",
        ),
        (
            "f32",
            "f8e4m3fn",
            "operands mix floating-point types f32 and f8e4m3fn",
        ),
        (
            "f64",
            "f64",
            "to_apply computation %add: accumulator 0 is f32[] but the init value is f64[]",
        ),
        (
            "bf16",
            "bf16",
            "to_apply computation %add: accumulator 0 is f32[] but the init value is bf16[]",
        ),
        (
            "f16",
            "f32",
            "operands mix floating-point types f16 and f32",
        ),
    ];
    for (k, (input, init, msg)) in cases.iter().enumerate() {
        let f = write(d.path(), &format!("r{k}.hlo"), &reduce_module(input, init));
        for b in BACKENDS {
            let o = axle(&["run", &f, "--backend", b]);
            fails_with(&o, 1, &[&format!("{f}:10:8: error: %r: reduce: {msg}")]);
        }
    }
}

#[test]
fn c2_scatter_reduce_window_select_and_scatter_sort_map_type_mismatches() {
    let d = tmp();
    let add = |t: &str| {
        format!("add_{t} {{\n  x = {t}[] parameter(0)\n  y = {t}[] parameter(1)\n  ROOT s = {t}[] add(x, y)\n}}\n")
    };
    let cases = [
        (
            "scatter",
            format!("{}ENTRY e {{\n  a = f32[4] parameter(0)\n  i = s32[1,1] parameter(1)\n  u = f8e5m2[1] parameter(2)\n  ROOT s = f32[4] scatter(a, i, u), update_window_dims={{}}, inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=add_f32\n}}\n", add("f32")),
            "operands mix floating-point types f32 and f8e5m2",
        ),
        (
            "reduce-window",
            format!("{}ENTRY e {{\n  a = f32[4] parameter(0)\n  z = bf16[] constant(0)\n  ROOT r = f32[2] reduce-window(a, z), window={{size=2 stride=2}}, to_apply=add_f32\n}}\n", add("f32")),
            "to_apply computation %add_f32: accumulator 0 is f32[] but the init value is bf16[]",
        ),
        (
            "select-and-scatter",
            format!("{}ge {{\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT c = pred[] compare(x, y), direction=GE\n}}\nENTRY e {{\n  a = f32[4] parameter(0)\n  s = bf16[2] parameter(1)\n  z = f32[] constant(0)\n  ROOT r = f32[4] select-and-scatter(a, s, z), window={{size=2 stride=2}}, select=ge, scatter=add_f32\n}}\n", add("f32")),
            "operands mix floating-point types f32 and bf16",
        ),
        (
            "sort",
            "lt {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT c = pred[] compare(x, y), direction=LT\n}\nENTRY e {\n  a = bf16[4] parameter(0)\n  ROOT s = bf16[4] sort(a), dimensions={0}, to_apply=lt\n}\n".to_string(),
            "comparator %lt: parameter 0 has shape f32[] but operand 0 has elements bf16[]",
        ),
        (
            "map",
            format!("{}ENTRY e {{\n  a = f32[4] parameter(0)\n  b = f64[4] parameter(1)\n  ROOT m = f32[4] map(a, b), dimensions={{0}}, to_apply=add_f32\n}}\n", add("f32")),
            "operands mix floating-point types f32 and f64",
        ),
    ];
    for (name, text, msg) in cases {
        let f = write(
            d.path(),
            &format!("{name}.hlo"),
            &format!("HloModule m\n{text}"),
        );
        for b in BACKENDS {
            let o = axle(&["run", &f, "--backend", b]);
            fails_with(&o, 1, &[&format!("{name}: {msg}")]);
        }
    }
}

#[test]
fn c2_elementwise_mixed_precision_is_refused_as_in_xla() {
    let d = tmp();
    for (op, extra) in [("add", ""), ("compare", ", direction=LT"), ("maximum", "")] {
        let out_ty = if op == "compare" { "pred" } else { "f32" };
        let f = write(
            d.path(),
            &format!("{op}.hlo"),
            &format!("HloModule m\nENTRY e {{\n  a = f32[4] parameter(0)\n  b = bf16[4] parameter(1)\n  ROOT r = {out_ty}[4] {op}(a, b){extra}\n}}\n"),
        );
        for b in BACKENDS {
            let o = axle(&["run", &f, "--backend", b]);
            fails_with(
                &o,
                1,
                &[&format!("{f}:5:8: error: %r: {op}: operands mix floating-point types f32 and bf16; mixed precision is not allowed (convert first)")],
            );
        }
    }
}

/// A module whose root is a tuple nested `depth` levels deep.
fn nested_tuple(depth: usize) -> String {
    let mut lines = vec!["  a = f32[2] parameter(0)".to_string()];
    let mut shape = "f32[2]".to_string();
    let mut prev = "a".to_string();
    for k in 0..depth {
        shape = format!("({shape})");
        let root = if k + 1 == depth { "ROOT " } else { "" };
        lines.push(format!("  {root}t{k} = {shape} tuple({prev})"));
        prev = format!("t{k}");
    }
    format!("HloModule m\nENTRY e {{\n{}\n}}\n", lines.join("\n"))
}

#[test]
fn c2_tuples_nest_up_to_256_levels_and_deeper_is_a_clear_error() {
    let d = tmp();
    let deep = write(d.path(), "deep.hlo", &nested_tuple(257));
    let o = axle(&["parse", &deep]);
    fails_with(
        &o,
        1,
        &[
            &format!("{deep}:260:"),
            "error: tuple shapes nested more than 256 levels deep are not supported",
        ],
    );
    assert!(!stderr(&o).contains("shape id"));
    let ok = write(d.path(), "ok.hlo", &nested_tuple(256));
    for b in BACKENDS {
        let out = succeeds(&axle(&["run", &ok, "--backend", b, "--seed", "3"]));
        assert!(out.starts_with("out0: f32[2] = ["), "{out}");
    }
}

#[test]
fn c2_token_parameters_bind_without_input_on_every_backend() {
    let d = tmp();
    let f = write(
        d.path(),
        "tok.hlo",
        "HloModule m\nENTRY e {\n  t = token[] parameter(0)\n  a = f32[2] parameter(1)\n  u = token[] after-all(t)\n  n = f32[2] negate(a)\n  ROOT r = (f32[2], token[]) tuple(n, u)\n}\n",
    );
    let x = npy(
        d.path(),
        "x.npy",
        &axle::ir::ArrayLiteral::from_slice(&[2], &[1.0f32, -4.0]),
    );
    for b in BACKENDS {
        // One input file: the token takes none.
        let out = succeeds(&axle(&["run", &f, "--backend", b, "--input", &x]));
        assert!(out.starts_with("out0: f32[2] = [-1, 4]\n"), "{b}: {out}");
        let o = axle(&["run", &f, "--backend", b, "--input", &x, "--input", &x]);
        fails_exactly(
            &o,
            1,
            &format!("{f}: error: the entry computation takes 1 input array but 2 were given\n"),
        );
    }
}

#[test]
fn c2_opaque_parameters_are_refused_on_every_backend() {
    let d = tmp();
    let f = write(
        d.path(),
        "o.hlo",
        "HloModule m\nENTRY e {\n  t = (f32[2], opaque[]) parameter(0)\n  ROOT g = f32[2] get-tuple-element(t), index=0\n}\n",
    );
    for b in BACKENDS {
        let o = axle(&["run", &f, "--backend", b]);
        fails_exactly(
            &o,
            1,
            &format!("{f}:3:3: error: %t: entry parameter of type (f32[2], opaque[]) holds an opaque value, which no input can give\n  t = (f32[2], opaque[]) parameter(0)\n  ^\n"),
        );
    }
}

// ---- 3. Shape arithmetic overflow ----

#[test]
fn c3_overflowing_shapes_are_parse_errors_with_the_position() {
    let d = tmp();
    let cases = [
        (
            "f32[4294967296,4294967296,4]",
            "has more than 9223372036854775807 elements",
        ),
        (
            "f32[9223372036854775807,4]",
            "has more than 9223372036854775807 elements",
        ),
        (
            "f32[9223372036854775807]",
            "takes more than 9223372036854775807 bytes",
        ),
        (
            "c128[1152921504606846976]",
            "takes more than 9223372036854775807 bytes",
        ),
        (
            "f32[0,4611686018427387904,4611686018427387904]",
            "has more than 9223372036854775807 elements",
        ),
        (
            "f32[<=9223372036854775807,2]",
            "has more than 9223372036854775807 elements",
        ),
    ];
    for (k, (shape, why)) in cases.iter().enumerate() {
        let f = write(
            d.path(),
            &format!("s{k}.hlo"),
            &format!("HloModule m\nENTRY e {{\n  ROOT a = {shape} parameter(0)\n}}\n"),
        );
        for b in BACKENDS {
            let o = axle(&["run", &f, "--backend", b]);
            fails_exactly(
                &o,
                1,
                &format!("{f}:3:12: error: shape {shape} {why}\n  ROOT a = {shape} parameter(0)\n           ^\n"),
            );
        }
    }
}

#[test]
fn c3_overflow_inside_tuples_signatures_and_layouts_is_caught() {
    let d = tmp();
    let cases = [
        "HloModule m\nENTRY e {\n  ROOT a = (f32[2], (s8[4611686018427387904,4])) parameter(0)\n}\n",
        "HloModule m\nc (x: f32[4294967296,4294967296]) -> f32[] {\n  x = f32[4294967296,4294967296] parameter(0)\n  ROOT z = f32[] constant(0)\n}\nENTRY e {\n  ROOT z = f32[] constant(0)\n}\n",
        "HloModule m, entry_computation_layout={(f32[4294967296,4294967296,4]{2,1,0})->f32[]}\nENTRY e {\n  ROOT z = f32[] constant(0)\n}\n",
    ];
    for (k, text) in cases.iter().enumerate() {
        let f = write(d.path(), &format!("t{k}.hlo"), text);
        let o = axle(&["parse", &f]);
        fails_with(
            &o,
            1,
            &[
                "error: shape ",
                "has more than 9223372036854775807 elements",
            ],
        );
    }
}

#[test]
fn c3_the_largest_valid_shapes_fail_at_allocation_not_with_wrong_results() {
    let d = tmp();
    // i64::MAX bytes is a valid size; no machine has it.
    let f = write(
        d.path(),
        "big.hlo",
        "HloModule m\nENTRY e {\n  a = s8[9223372036854775807] parameter(0)\n  ROOT n = s8[9223372036854775807] negate(a)\n}\n",
    );
    for b in BACKENDS {
        let o = axle_env(&["run", &f, "--backend", b], &[("AXLE_MEMORY_LIMIT", "1G")]);
        fails_exactly(
            &o,
            1,
            &format!("{f}: error: parameter 0 ('a') needs 9223372036854775807 bytes (8.0 EiB) but only 1073741824 bytes (1.0 GiB) are available under the memory limit AXLE_MEMORY_LIMIT\n"),
        );
    }
}

// ---- 4. Allocation ----

#[test]
fn c4_inputs_too_large_for_the_ceiling_fail_before_allocating() {
    let d = tmp();
    let f = write(
        d.path(),
        "p.hlo",
        "HloModule m\nENTRY e {\n  a = f32[100000,100000,10] parameter(0)\n  ROOT n = f32[100000,100000,10] negate(a)\n}\n",
    );
    for b in BACKENDS {
        let o = axle(&["run", &f, "--backend", b, "--memory-limit", "64M"]);
        fails_exactly(
            &o,
            1,
            &format!("{f}: error: parameter 0 ('a') needs 400000000000 bytes (372.5 GiB) but only 67108864 bytes (64.0 MiB) are available under the memory limit\n"),
        );
    }
    // Without a limit, the memory the system has available is the ceiling.
    for b in BACKENDS {
        let o = axle(&["run", &f, "--backend", b]);
        fails_with(
            &o,
            1,
            &[
                "parameter 0 ('a') needs 400000000000 bytes",
                "the memory the system has available",
            ],
        );
    }
}

#[test]
fn c4_results_and_temporaries_too_large_fail_before_allocating() {
    let d = tmp();
    // The broadcast is the result; then it is a temporary feeding a reduction.
    let result = write(
        d.path(),
        "r.hlo",
        "HloModule m\nENTRY e {\n  a = f32[] parameter(0)\n  ROOT b = f32[100000,100000] broadcast(a), dimensions={}\n}\n",
    );
    let temp = write(
        d.path(),
        "t.hlo",
        "HloModule m\nadd {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\nENTRY e {\n  a = f32[] parameter(0)\n  b = f32[100000,100000] broadcast(a), dimensions={}\n  z = f32[] constant(0)\n  ROOT r = f32[] reduce(b, z), dimensions={0,1}, to_apply=add\n}\n",
    );
    let lim = [("AXLE_MEMORY_LIMIT", "256M")];
    let o = axle_env(&["run", &result, "--backend", "interpreter"], &lim);
    fails_exactly(&o, 1, &format!("{result}: error: interpreter: evaluating %b (broadcast) in e: %b (broadcast) needs 40000000000 bytes (37.3 GiB) but only 268435452 bytes (256.0 MiB) are available under the memory limit AXLE_MEMORY_LIMIT\n"));
    let o = axle_env(&["run", &result, "--backend", "cpu"], &lim);
    fails_exactly(&o, 1, &format!("{result}: error: cpu: compiling cpu executable: a run (40000000000 output bytes and a temporary block of 0 bytes) needs 40000000000 bytes (37.3 GiB) but only 268435456 bytes (256.0 MiB) are available under the memory limit AXLE_MEMORY_LIMIT\n"));
    let o = axle_env(&["run", &temp, "--backend", "interpreter"], &lim);
    fails_with(&o, 1, &["%b (broadcast) needs 40000000000 bytes"]);
    // Unfused (`--passes none`), the broadcast is a temporary the cpu run cannot hold.
    let o = axle_env(
        &["run", &temp, "--backend", "cpu", "--passes", "none"],
        &lim,
    );
    fails_with(
        &o,
        1,
        &[
            "a temporary block of 40000000000 bytes",
            "needs 40000000004 bytes",
        ],
    );
}

#[test]
fn c4_the_default_fused_pipeline_needs_no_temporary_for_a_fused_broadcast() {
    // The cpu pipeline fuses the broadcast into the reduction: the 1.6 GB temporary of the
    // unfused program is never allocated and the run fits a 256 MiB ceiling, with the exact
    // integer sum; the interpreter (no pipeline) and unfused cpu still refuse it up front.
    let d = tmp();
    let f = write(
        d.path(),
        "t.hlo",
        "HloModule m\nadd {\n  x = s32[] parameter(0)\n  y = s32[] parameter(1)\n  ROOT s = s32[] add(x, y)\n}\nENTRY e {\n  a = s32[] parameter(0)\n  b = s32[20000,20000] broadcast(a), dimensions={}\n  z = s32[] constant(0)\n  ROOT r = s32[] reduce(b, z), dimensions={0,1}, to_apply=add\n}\n",
    );
    let one = npy(
        d.path(),
        "one.npy",
        &axle::ir::ArrayLiteral::from_slice(&[], &[1i32]),
    );
    let lim = [("AXLE_MEMORY_LIMIT", "256M")];
    let o = axle_env(&["run", &f, "--backend", "cpu", "--input", &one], &lim);
    let out = succeeds(&o);
    assert!(out.starts_with("out0: s32[] = [400000000]\n"), "{out}");
    let o = axle_env(
        &[
            "run",
            &f,
            "--backend",
            "cpu",
            "--passes",
            "none",
            "--input",
            &one,
        ],
        &lim,
    );
    fails_with(&o, 1, &["a temporary block of 1600000000 bytes"]);
    let o = axle_env(
        &["run", &f, "--backend", "interpreter", "--input", &one],
        &lim,
    );
    fails_with(&o, 1, &["%b (broadcast) needs 1600000000 bytes"]);
}

#[test]
fn c4_huge_parameter_numbers_are_reported_without_allocating() {
    let d = tmp();
    let f = write(
        d.path(),
        "p.hlo",
        "HloModule m\nENTRY e {\n  ROOT a = f32[4] parameter(2147483647)\n}\n",
    );
    for b in BACKENDS {
        // A 64 MiB address-space-independent ceiling: the parameter table must not need 8 GB.
        let o = axle(&["run", &f, "--backend", b, "--memory-limit", "64M"]);
        fails_exactly(
            &o,
            1,
            &format!("{f}:3:8: error: %a: parameter number 2147483647 is out of range\n  ROOT a = f32[4] parameter(2147483647)\n       ^\n"),
        );
    }
}

#[test]
fn c4_dev_zero_is_refused_at_once_as_input_and_as_text() {
    let d = tmp();
    let f = write(d.path(), "n.hlo", NEGATE4);
    for b in BACKENDS {
        let o = axle(&["run", &f, "--backend", b, "--input", "/dev/zero"]);
        fails_exactly(
            &o,
            1,
            &format!("{f}: error: parameter 0 ('a'): /dev/zero: not a .npy file: it does not start with the magic string \\x93NUMPY\n"),
        );
    }
    let o = axle(&["parse", "/dev/zero"]);
    fails_with(
        &o,
        1,
        &["/dev/zero:1:1: error: expected 'HloModule' or a computation, found '\u{0}'"],
    );
    // A .npy header whose shape needs more data than the file has is refused before reading it.
    let mut lie =
        axle::ir::npy::encode_npy(&axle::ir::ArrayLiteral::from_slice(&[4], &[0f32; 4])).unwrap();
    let at = lie.windows(4).position(|w| w == b"(4,)").unwrap();
    lie[at + 1] = b'9';
    let p = d.path().join("lie.npy");
    std::fs::write(&p, &lie).unwrap();
    for b in BACKENDS {
        let o = axle(&["run", &f, "--backend", b, "--input", p.to_str().unwrap()]);
        fails_with(&o, 1, &["data is truncated: shape [9] of dtype '<f4' needs 36 bytes of data but the file has only 16"]);
    }
}

#[test]
fn c4_text_without_a_module_line_parses_and_other_text_fails_at_its_start() {
    let d = tmp();
    // A bare computation, as XLA's parser takes it, with a shape to infer.
    let f = write(
        d.path(),
        "bare.hlo",
        "ENTRY e {\n  a = f32[2] parameter(0)\n  ROOT n = negate(a)\n}\n",
    );
    let out = succeeds(&axle(&["parse", &f]));
    assert!(out.starts_with("HloModule module_e\n"), "{out}");
    assert!(out.contains("ROOT n = f32[2] negate(a)"), "{out}");
    // Text that is not HLO fails with the parser's error for its first line (a megabyte of
    // `yes` is refused from its first bytes), binary data too.
    let y = write(d.path(), "yes.txt", &"y\n".repeat(1 << 19));
    fails_exactly(
        &axle(&["parse", &y]),
        1,
        &format!("{y}:1:1: error: expected 'HloModule' or a computation, found 'y'\ny\n^\n"),
    );
    let png = d.path().join("x.png");
    std::fs::write(&png, b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR").unwrap();
    fails_with(
        &axle(&["parse", png.to_str().unwrap()]),
        1,
        &["error: file is not UTF-8 text (byte 0)"],
    );
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

#[test]
fn c4_gzip_text_is_bounded_and_read_across_members() {
    let d = tmp();
    let text =
        "HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  ROOT n = f32[2] negate(a)\n}\n";
    // Two members, split inside a line: read whole, as `cat a.gz b.gz` makes it.
    let mut two = gzip(&text.as_bytes()[..30]);
    two.extend(gzip(&text.as_bytes()[30..]));
    let p = d.path().join("two.hlo.gz");
    std::fs::write(&p, &two).unwrap();
    let out = succeeds(&axle(&["parse", p.to_str().unwrap()]));
    assert!(
        out.contains("ROOT n = f32[2]{0} negate(a)") || out.contains("negate(a)"),
        "{out}"
    );
    for b in BACKENDS {
        let out = succeeds(&axle(&[
            "run",
            p.to_str().unwrap(),
            "--backend",
            b,
            "--seed",
            "1",
        ]));
        assert!(out.starts_with("out0: f32[2] = ["), "{out}");
    }
    // A small file inflating past the bound (a fifth of the ceiling) stops with an error.
    let mut bomb = text.as_bytes().to_vec();
    bomb.extend(std::iter::repeat_n(b' ', 3 << 20));
    let p = d.path().join("bomb.hlo.gz");
    std::fs::write(&p, gzip(&bomb)).unwrap();
    assert!(std::fs::metadata(&p).unwrap().len() < 16 << 10);
    let o = axle(&["parse", p.to_str().unwrap(), "--memory-limit", "8M"]);
    fails_exactly(
        &o,
        1,
        &format!("{}: error: the HLO text (decompressed) is larger than 1677721 bytes (1.6 MiB), the most that can be parsed under the memory limit of 8388608 bytes: parsing takes up to 5 bytes of memory per byte of text\n", p.display()),
    );
    // A plain file over the bound is refused before it is read.
    let big = d.path().join("big.hlo");
    std::fs::write(&big, &bomb).unwrap();
    let o = axle(&["stats", big.to_str().unwrap(), "--memory-limit", "8M"]);
    fails_with(&o, 1, &["error: the HLO text is larger than 1677721 bytes"]);
}

#[test]
fn c4_memory_limit_makes_runs_fail_cleanly_or_succeed() {
    let d = tmp();
    let f = write(
        d.path(),
        "m.hlo",
        "HloModule m\nENTRY e {\n  a = f32[1024,1024] parameter(0)\n  ROOT n = f32[1024,1024] negate(a)\n}\n",
    );
    for b in BACKENDS {
        // 4 MiB of input: fits in 16 MiB, not in 1 MiB.
        succeeds(&axle(&["run", &f, "--backend", b, "--memory-limit", "16M"]));
        let o = axle(&["run", &f, "--backend", b, "--memory-limit", "1M"]);
        fails_exactly(
            &o,
            1,
            &format!("{f}: error: parameter 0 ('a') needs 4194304 bytes (4.0 MiB) but only 1048576 bytes (1.0 MiB) are available under the memory limit\n"),
        );
        let o = axle_env(
            &["run", &f, "--backend", b],
            &[("AXLE_MEMORY_LIMIT", "lots")],
        );
        fails_exactly(
            &o,
            1,
            "error: AXLE_MEMORY_LIMIT: invalid memory size 'lots' (expected bytes or a number with K, M, G or T)\n",
        );
    }
    let o = axle(&["run", &f, "--memory-limit", "-3"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

// ---- 5. Quadratic time or memory (correctness at moderate sizes; speed is in the benches) ----

#[test]
fn c5_columns_on_a_long_line_are_exact() {
    let d = tmp();
    // 20,000 instructions on one line, then an error at its very end.
    let mut line = String::from("p0 = f32[4] parameter(0)");
    for i in 1..20_000 {
        let prev = if i == 1 {
            "p0".to_string()
        } else {
            format!("a{}", i - 1)
        };
        line.push_str(&format!(" a{i} = f32[4] add({prev}, p0)"));
    }
    // "ENTRY e { " (10 characters), the line, " ROOT r = f32[4] " (17), then the opcode.
    let col = 10 + line.chars().count() + 17 + 1;
    line.push_str(" ROOT r = f32[4] frobnicate(a19999)");
    let f = write(
        d.path(),
        "long.hlo",
        &format!("HloModule m\nENTRY e {{ {line}\n}}\n"),
    );
    let o = axle(&["parse", &f]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1));
    let first = e.lines().next().unwrap();
    assert_eq!(
        first,
        format!("{f}:2:{col}: error: unknown opcode 'frobnicate'")
    );
    // Characters, not bytes: the three two-byte characters before the error count one each
    // (59, where bytes would give 62).
    let f2 = write(
        d.path(),
        "utf8.hlo",
        "HloModule m\nENTRY e { p = f32[] parameter(0) /* ééé */ ROOT r = f32[] frob(p) }\n",
    );
    let o = axle(&["parse", &f2]);
    fails_with(
        &o,
        1,
        &[&format!("{f2}:2:59: error: unknown opcode 'frob'")],
    );
}

#[test]
fn c5_long_lines_and_many_computations_parse_and_run() {
    let d = tmp();
    let mut line = String::from("p0 = f32[2] parameter(0)");
    for i in 1..5_000 {
        let prev = if i == 1 {
            "p0".to_string()
        } else {
            format!("a{}", i - 1)
        };
        let root = if i == 4_999 { "ROOT " } else { "" };
        line.push_str(&format!(" {root}a{i} = f32[2] add({prev}, p0)"));
    }
    let f = write(
        d.path(),
        "line.hlo",
        &format!("HloModule m\nENTRY e {{ {line} }}\n"),
    );
    let x = npy(
        d.path(),
        "x.npy",
        &axle::ir::ArrayLiteral::from_slice(&[2], &[1.0f32, -0.5]),
    );
    for b in BACKENDS {
        let out = succeeds(&axle(&["run", &f, "--backend", b, "--input", &x]));
        assert!(out.starts_with("out0: f32[2] = [5000, -2500]\n"), "{out}");
    }
    // 3,000 computations all defining `x` and `y`: renamed uniquely, in order.
    let mut text = String::from("HloModule m\n");
    for i in 0..3_000 {
        text.push_str(&format!(
            "c{i} {{\n  x = f32[] parameter(0)\n  ROOT y = f32[] negate(x)\n}}\n"
        ));
    }
    text.push_str("ENTRY e {\n  p = f32[] parameter(0)\n");
    for i in 0..3_000 {
        let prev = if i == 0 {
            "p".to_string()
        } else {
            format!("k{}", i - 1)
        };
        let root = if i == 2_999 { "ROOT " } else { "" };
        text.push_str(&format!(
            "  {root}k{i} = f32[] call({prev}), to_apply=c{i}\n"
        ));
    }
    text.push_str("}\n");
    let f = write(d.path(), "comps.hlo", &text);
    let out = succeeds(&axle(&["parse", &f]));
    assert!(out.contains("  x.2999 = f32[] parameter(0)\n"), "renaming");
    assert!(
        out.contains("  ROOT y.2999 = f32[] negate(x.2999)\n"),
        "renaming"
    );
    assert!(!out.contains("x.3000"));
    let s = npy(
        d.path(),
        "s.npy",
        &axle::ir::ArrayLiteral::from_slice(&[], &[2.0f32]),
    );
    for b in BACKENDS {
        let out = succeeds(&axle(&["run", &f, "--backend", b, "--input", &s]));
        assert!(out.starts_with("out0: f32[] = [2]\n"), "{out}");
    }
}

#[test]
fn c5_deep_operand_chains_compile_without_overflowing_the_stack() {
    // A fusion written in the text whose root is 3,000 operands deep: code generation follows
    // the chain (once overflowing the stack at about 600 levels), and so does the default
    // pipeline's fusion of a long unfused chain (the one-line test above).
    let d = tmp();
    let mut text = String::from("HloModule m\nfc {\n  p0 = f32[2] parameter(0)\n");
    for i in 1..3_000 {
        let prev = if i == 1 {
            "p0".to_string()
        } else {
            format!("a{}", i - 1)
        };
        let root = if i == 2_999 { "ROOT " } else { "" };
        text.push_str(&format!("  {root}a{i} = f32[2] add({prev}, p0)\n"));
    }
    text.push_str(
        "}\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT f = f32[2] fusion(p), kind=kLoop, calls=fc\n}\n",
    );
    let f = write(d.path(), "deep.hlo", &text);
    let x = npy(
        d.path(),
        "x.npy",
        &axle::ir::ArrayLiteral::from_slice(&[2], &[1.0f32, -0.5]),
    );
    for extra in [&[][..], &["--passes", "none"][..]] {
        for b in BACKENDS {
            let mut args = vec!["run", &f, "--backend", b, "--input", &x];
            args.extend_from_slice(extra);
            let out = succeeds(&axle(&args));
            assert!(out.starts_with("out0: f32[2] = [3000, -1500]\n"), "{out}");
        }
    }
}

#[test]
fn c5_long_pipelines_and_explorations_stream() {
    let d = tmp();
    let f = write(d.path(), "m.hlo", "HloModule m\nENTRY e {\n  a = f32[4] parameter(0)\n  n = f32[4] negate(a)\n  ROOT r = f32[4] negate(n)\n}\n");
    // A pipeline of 3,000 passes, with its statistics file.
    let passes = vec!["dce"; 3_000].join(",");
    let stats = d.path().join("stats.jsonl");
    let out = succeeds(&axle(&[
        "opt",
        &f,
        "--passes",
        &passes,
        "--stats",
        stats.to_str().unwrap(),
        "--verify",
        "end",
    ]));
    assert!(out.contains("negate"));
    assert_eq!(
        std::fs::read_to_string(&stats).unwrap().lines().count(),
        3_000
    );
    // An exploration of 2^64-1 orders prints rows as it goes: reading three and closing the
    // pipe ends it (SIGPIPE), with no memory growth before the first row.
    let mut child = Command::new(env!("CARGO_BIN_EXE_axle"))
        .args([
            "explore",
            &f,
            "--passes-from",
            "dce,cse",
            "--orders",
            "18446744073709551615",
            "--inputs",
            "0",
            "--jsonl",
            d.path().join("rows.jsonl").to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    while seen.lines().count() < 4 {
        let n = std::io::Read::read(&mut out, &mut buf).unwrap();
        assert!(n > 0, "explore ended early: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    drop(out);
    let status = child.wait().unwrap();
    assert!(!status.success());
    assert!(seen.starts_with("order"), "{seen}");
    // Ended by the signal: neither the rows file nor its temporary file is left.
    let left: Vec<String> = files_in(d.path())
        .into_iter()
        .filter(|n| n.starts_with(".axle-") || n == "rows.jsonl")
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // The same for an interruption (Ctrl-C) while rows are being written.
    let mut child = Command::new(env!("CARGO_BIN_EXE_axle"))
        .args([
            "explore",
            &f,
            "--passes-from",
            "dce,cse",
            "--orders",
            "18446744073709551615",
            "--inputs",
            "0",
            "--jsonl",
            d.path().join("rows.jsonl").to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let n = std::io::Read::read(&mut out, &mut buf).unwrap();
    assert!(n > 0);
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = child.wait().unwrap();
    assert!(!status.success());
    let left: Vec<String> = files_in(d.path())
        .into_iter()
        .filter(|n| n.starts_with(".axle-") || n == "rows.jsonl")
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // A long order: 5,000 passes per order.
    let o = axle(&[
        "explore",
        &f,
        "--passes-from",
        "dce",
        "--orders",
        "1",
        "--length",
        "5000",
        "--jsonl",
        d.path().join("long.jsonl").to_str().unwrap(),
    ]);
    let out = succeeds(&o);
    assert_eq!(out.lines().count(), 4, "{out}");
}

// ---- 6. I/O ----

#[test]
fn c6_a_full_stdout_is_an_error_for_every_command() {
    let d = tmp();
    let f = write(d.path(), "m.hlo", NEGATE4);
    let x = npy(
        d.path(),
        "x.npy",
        &axle::ir::ArrayLiteral::from_slice(&[4], &[1.0f32, 2.0, 3.0, 4.0]),
    );
    let rows = d.path().join("rows.jsonl");
    let out_dir = d.path().join("outs");
    let commands: Vec<Vec<&str>> = vec![
        vec!["parse", &f],
        vec!["stats", &f],
        vec!["run", &f, "--backend", "interpreter"],
        vec![
            "run",
            &f,
            "--backend",
            "cpu",
            "--out-dir",
            out_dir.to_str().unwrap(),
        ],
        vec!["bench", &f, "--repeat", "1", "--warmup", "0"],
        vec!["compare", &x, &x],
        vec!["passes"],
        vec!["opt", &f, "--passes", "dce"],
        vec!["compile", &f, "--emit", "llvm"],
        vec![
            "explore",
            &f,
            "--passes-from",
            "dce",
            "--orders",
            "1",
            "--jsonl",
            rows.to_str().unwrap(),
        ],
    ];
    for args in commands {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_axle"))
            .args(&args)
            .stdout(full)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert_eq!(
            stderr(&o),
            "error: writing to standard output: No space left on device (os error 28)\n",
            "{args:?}"
        );
    }
}

#[test]
fn c6_an_output_directory_never_mixes_two_runs() {
    let d = tmp();
    let three = write(d.path(), "three.hlo", "HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  b = f32[2] negate(a)\n  c = f32[2] abs(a)\n  ROOT t = (f32[2], f32[2], f32[2]) tuple(a, b, c)\n}\n");
    let one = write(
        d.path(),
        "one.hlo",
        "HloModule m\nENTRY e {\n  a = f32[3] parameter(0)\n  ROOT n = f32[3] negate(a)\n}\n",
    );
    let out = d.path().join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    for b in BACKENDS {
        succeeds(&axle(&[
            "run",
            &three,
            "--backend",
            b,
            "--out-dir",
            out.to_str().unwrap(),
        ]));
        assert_eq!(
            files_in(&out),
            ["notes.txt", "out0.npy", "out1.npy", "out2.npy"]
        );
        succeeds(&axle(&[
            "run",
            &one,
            "--backend",
            b,
            "--out-dir",
            out.to_str().unwrap(),
        ]));
        assert_eq!(files_in(&out), ["notes.txt", "out0.npy"]);
        let o0 = axle::ir::read_npy(out.join("out0.npy")).unwrap();
        assert_eq!(o0.shape.dims.to_vec(), vec![3]);
    }
}

#[test]
fn c6_aot_leaves_nothing_half_written() {
    let d = tmp();
    let f = write(d.path(), "m.hlo", NEGATE4);
    let obj = d.path().join("ok.o");
    // The header cannot be written: neither file is left.
    let o = axle(&[
        "compile",
        &f,
        "--aot",
        "-o",
        obj.to_str().unwrap(),
        "--header",
        "/nonexistent-dir/x.h",
    ]);
    fails_with(&o, 1, &["/nonexistent-dir/x.h: error: cannot write: "]);
    assert!(!obj.exists());
    // The header named as the object: refused before compiling.
    let o = axle(&[
        "compile",
        &f,
        "--aot",
        "-o",
        obj.to_str().unwrap(),
        "--header",
        obj.to_str().unwrap(),
    ]);
    fails_exactly(
        &o,
        1,
        &format!(
            "error: -o and --header name the same file {}; give them different paths\n",
            obj.display()
        ),
    );
    assert!(!obj.exists());
    // The same file through another spelling of the path.
    let other = d.path().join(".").join("ok.o");
    let o = axle(&[
        "compile",
        &f,
        "--aot",
        "-o",
        obj.to_str().unwrap(),
        "--header",
        other.to_str().unwrap(),
    ]);
    fails_with(&o, 1, &["name the same file"]);
    // An object file named like the default header (`ok.h` from `ok.h`): refused.
    let h = d.path().join("ok.h");
    let o = axle(&["compile", &f, "--aot", "-o", h.to_str().unwrap()]);
    fails_with(&o, 1, &["would overwrite the object file"]);
    // A good run writes both, and nothing else.
    succeeds(&axle(&[
        "compile",
        &f,
        "--aot",
        "-o",
        obj.to_str().unwrap(),
    ]));
    assert_eq!(files_in(d.path()), ["m.hlo", "ok.h", "ok.o"]);
}

#[test]
fn c6_failed_writes_leave_no_partial_files() {
    let d = tmp();
    let f = write(d.path(), "m.hlo", NEGATE4);
    let o = axle(&["opt", &f, "--passes", "dce", "-o", "/nonexistent-dir/o.hlo"]);
    fails_with(&o, 1, &["/nonexistent-dir/o.hlo: error: cannot write: "]);
    let o = axle(&[
        "compile",
        &f,
        "--emit",
        "llvm",
        "-o",
        "/nonexistent-dir/o.ll",
    ]);
    fails_with(&o, 1, &["/nonexistent-dir/o.ll: error: cannot write: "]);
    let o = axle(&[
        "explore",
        &f,
        "--passes-from",
        "dce",
        "--jsonl",
        "/nonexistent-dir/r.jsonl",
    ]);
    fails_with(&o, 1, &["/nonexistent-dir/r.jsonl: error: cannot write: "]);
    for b in BACKENDS {
        let o = axle(&["run", &f, "--backend", b, "--out-dir", f.as_str()]);
        fails_with(&o, 1, &["cannot create directory"]);
    }
    assert_eq!(files_in(d.path()), ["m.hlo"]);
}

#[test]
fn c6_outputs_never_overwrite_each_other_or_the_input() {
    let d = tmp();
    let f = write(d.path(), "m.hlo", NEGATE4);
    let stats = d.path().join("s.jsonl");
    let o = axle(&[
        "opt",
        &f,
        "--passes",
        "dce",
        "-o",
        stats.to_str().unwrap(),
        "--stats",
        stats.to_str().unwrap(),
    ]);
    fails_exactly(
        &o,
        1,
        &format!(
            "error: -o and --stats name the same file {}; give them different paths\n",
            stats.display()
        ),
    );
    let o = axle(&["opt", &f, "--passes", "dce", "--stats", &f]);
    fails_exactly(
        &o,
        1,
        &format!("error: --stats {f} is the input file; give another path\n"),
    );
    let o = axle(&["explore", &f, "--passes-from", "dce", "--jsonl", &f]);
    fails_exactly(
        &o,
        1,
        &format!("error: --jsonl {f} is the input file; give another path\n"),
    );
    let o = axle(&["compile", &f, "--emit", "llvm", "-o", &f]);
    fails_exactly(
        &o,
        1,
        &format!("error: -o {f} is the input file; give another path\n"),
    );
    assert_eq!(std::fs::read_to_string(&f).unwrap(), NEGATE4);
    // Optimizing a module in place is a module output: allowed, and written whole.
    succeeds(&axle(&["opt", &f, "--passes", "dce", "-o", &f]));
    assert!(axle::ir::parse_module(&std::fs::read_to_string(&f).unwrap()).is_ok());
    assert_eq!(files_in(d.path()), ["m.hlo"]);
}

// ---- 7. Arguments ----

#[test]
fn c7_tolerances_must_be_finite_and_non_negative() {
    let d = tmp();
    let x = npy(
        d.path(),
        "x.npy",
        &axle::ir::ArrayLiteral::from_slice(&[2], &[1.0f32, 2.0]),
    );
    for (flag, v) in [
        ("--rtol", "-1"),
        ("--rtol", "NaN"),
        ("--atol", "inf"),
        ("--atol", "-0.5"),
        ("--rtol", "x"),
    ] {
        let o = axle(&["compare", &x, &x, flag, v]);
        assert_eq!(o.status.code(), Some(2), "{flag} {v}");
        assert!(o.stdout.is_empty());
        assert!(
            stderr(&o).contains(
                &format!("invalid value '{v}' for '{flag} <RTOL>'")
                    .replace("<RTOL>", if flag == "--rtol" { "<RTOL>" } else { "<ATOL>" })
            ),
            "{}",
            stderr(&o)
        );
    }
    assert_eq!(
        succeeds(&axle(&["compare", &x, &x, "--rtol", "0", "--atol", "1e-6"])),
        "match: 2 elements\n"
    );
}

#[test]
fn c7_compile_options_that_would_be_ignored_are_refused() {
    let d = tmp();
    let f = write(d.path(), "m.hlo", NEGATE4);
    let o = axle(&[
        "compile",
        &f,
        "--target-triple",
        "aarch64-unknown-linux-gnu",
    ]);
    fails_exactly(
        &o,
        1,
        "error: --target-triple needs --aot or --emit (the JIT compiles for the host only)\n",
    );
    let o = axle(&["compile", &f, "-o", "x.o"]);
    fails_exactly(
        &o,
        1,
        "error: -o names the object of --aot or the text of --emit; give one of them\n",
    );
    for extra in [["--header", "x.h"], ["--name", "model"]] {
        let o = axle(&["compile", &f, extra[0], extra[1]]);
        assert_eq!(o.status.code(), Some(2), "{extra:?}");
        assert!(stderr(&o).contains("--aot"), "{}", stderr(&o));
    }
    let o = axle(&["compile", &f, "--backend", "interpreter", "--emit", "asm"]);
    fails_exactly(
        &o,
        1,
        "error: --aot, --emit and --target-triple need --backend cpu (got 'interpreter')\n",
    );
}

#[test]
fn c7_run_bench_and_explore_refuse_meaningless_arguments() {
    let d = tmp();
    let f = write(d.path(), "m.hlo", NEGATE4);
    let x = npy(
        d.path(),
        "x.npy",
        &axle::ir::ArrayLiteral::from_slice(&[4], &[1.0f32, 2.0, 3.0, 4.0]),
    );
    let o = axle(&["run", &f, "--input", &x, "--seed", "3"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("the argument '--input <INPUTS>' cannot be used with '--seed <SEED>'"),
        "{}",
        stderr(&o)
    );
    for b in BACKENDS {
        let o = axle(&["run", &f, "--backend", b, "--repeat", "0"]);
        fails_exactly(&o, 1, "error: --repeat must be at least 1\n");
    }
    let o = axle(&[
        "bench",
        &f,
        "--backend",
        "interpreter",
        "--profile",
        "--repeat",
        "1",
    ]);
    fails_exactly(
        &o,
        1,
        &format!(
            "{f}: error: --profile times the kernels of the cpu backend, not of 'interpreter'\n"
        ),
    );
    let o = axle(&["explore", &f, "--passes-from", "dce", "--length", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("invalid value '0' for '--length <LENGTH>'"),
        "{}",
        stderr(&o)
    );
    let o = axle(&["run", &f, "--backend", "tpu"]);
    fails_with(
        &o,
        1,
        &["tpu: no such backend (available: interpreter, cpu, nvptx, nvptx-sim)"],
    );
}

// ---- 8. Inputs are checked the same way on every backend ----

#[test]
fn c8_inputs_of_the_wrong_type_or_dimensions_are_refused_on_every_backend() {
    let d = tmp();
    let f = write(d.path(), "m.hlo", NEGATE4);
    let ints = npy(
        d.path(),
        "i.npy",
        &axle::ir::ArrayLiteral::from_slice(&[4], &[1i32, 2, 3, 4]),
    );
    let square = npy(
        d.path(),
        "sq.npy",
        &axle::ir::ArrayLiteral::from_slice(&[2, 2], &[1f32, 2.0, 3.0, 4.0]),
    );
    let short = npy(
        d.path(),
        "sh.npy",
        &axle::ir::ArrayLiteral::from_slice(&[3], &[1f32, 2.0, 3.0]),
    );
    for b in BACKENDS {
        let o = axle(&["run", &f, "--backend", b, "--input", &ints]);
        fails_exactly(&o, 1, &format!("{f}: error: parameter 0 ('a'): {ints}: expected element type f32 ('<f4') but the file holds s32 ('<i4')\n"));
        let o = axle(&["run", &f, "--backend", b, "--input", &square]);
        fails_exactly(&o, 1, &format!("{f}: error: parameter 0 ('a'): {square} has shape [2, 2] but the parameter needs f32[4]\n"));
        let o = axle(&["run", &f, "--backend", b, "--input", &short]);
        fails_exactly(&o, 1, &format!("{f}: error: parameter 0 ('a'): {short} has shape [3] but the parameter needs f32[4]\n"));
        let o = axle(&["run", &f, "--backend", b]);
        succeeds(&o);
        let o = axle(&[
            "run",
            &f,
            "--backend",
            b,
            "--input",
            &short,
            "--input",
            &short,
        ]);
        fails_exactly(
            &o,
            1,
            &format!("{f}: error: the entry computation takes 1 input array but 2 were given\n"),
        );
    }
}

#[test]
fn c8_pred_dot_runs_as_in_xla_on_every_backend_and_pipeline() {
    // Found by the hostile fuzz: a zero-sized pred dot ran where the simplifier removed it and
    // was refused elsewhere. XLA runs pred dots (true where some product is true); these
    // expected values are XLA CPU's for the same inputs.
    let d = tmp();
    let f = write(
        d.path(),
        "pdot.hlo",
        "HloModule m\nENTRY e {\n  a = pred[2,3] parameter(0)\n  b = pred[3,2] parameter(1)\n  ROOT d = pred[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
    );
    let a = npy(
        d.path(),
        "a.npy",
        &axle::ir::ArrayLiteral::from_slice(&[2, 3], &[true, false, true, false, false, false]),
    );
    let b = npy(
        d.path(),
        "b.npy",
        &axle::ir::ArrayLiteral::from_slice(&[3, 2], &[true, false, false, true, true, true]),
    );
    for passes in ["cpu", "none"] {
        for be in BACKENDS {
            let out = succeeds(&axle(&[
                "run",
                &f,
                "--backend",
                be,
                "--passes",
                passes,
                "--input",
                &a,
                "--input",
                &b,
            ]));
            assert!(
                out.starts_with("out0: pred[2,2] = [true, true, false, false]\n"),
                "{be} {passes}: {out}"
            );
        }
    }
}

/// An empty array with 10^12 rows before its zero dimension (`f32[1000000000000,0] iota()`,
/// from XLA's tests) runs through the default pipeline and writes its empty result: the
/// pipeline does not turn it into a constant whose text would hold 10^12 rows (it ran out of
/// memory printing them, for the compilation cache's key), on both backends.
#[test]
fn empty_arrays_with_many_rows_run() {
    let d = tmp();
    let f = write(
        d.path(),
        "m.hlo",
        "HloModule m\nENTRY e {\n  ROOT i = f32[1000000000000,0] iota(), iota_dimension=0\n}\n",
    );
    for backend in ["cpu", "interpreter"] {
        let out = d.path().join(backend);
        let o = axle(&[
            "run",
            &f,
            "--backend",
            backend,
            "--out-dir",
            &out.display().to_string(),
        ]);
        succeeds(&o);
        assert_eq!(files_in(&out), vec!["out0.npy".to_string()]);
    }
    let o = axle(&["opt", &f, "--pipeline", "cpu"]);
    let text = succeeds(&o);
    assert!(
        text.contains("f32[1000000000000,0]") && text.len() < 4096,
        "{text}"
    );
}
