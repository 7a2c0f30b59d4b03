//! Hostile input through the library, by class (issue 15): what a framework embedding Axle
//! calls (parsing, the verifier, the backend interface on `interpreter` and `cpu`, the
//! evaluator and the CPU code generator directly, `run`, `bench`, `explore`, the pass manager,
//! `.npy` reading) gets an error value with an exact message, never a panic, an abort or a
//! silent wrong answer.
//!
//! The memory tests set the process-wide ceiling; every test of this binary that depends on it
//! sets the same value ([`CEILING`]), so tests running in parallel agree.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axle::backend::{
    BackendError, CompileOptions, Compiler, DeviceBuffer, Executable, ExecutableStats, Platform,
    TransferManager, ValueShape,
};
use axle::backends::registry;
use axle::ir::memory::{self, MemoryBudget};
use axle::ir::{
    parse_module, ArrayLiteral, ArrayShape, AttrKey, AttrValue, ElementType, Literal, Module,
    NewInst, Opcode, Shape,
};

const BACKENDS: [&str; 2] = ["interpreter", "cpu"];

/// The ceiling the memory tests run under.
const CEILING: u64 = 1 << 30;

fn parse(text: &str) -> Module {
    parse_module(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn compile(backend: &str, m: Module) -> Result<Box<dyn Executable>, BackendError> {
    registry()
        .get(backend)
        .unwrap()
        .compiler()
        .compile(m, &CompileOptions::default())
}

/// Compiles with the backend's default pipeline (what `axle run` uses: fusion on `cpu`).
fn compile_default(backend: &str, m: Module) -> Result<Box<dyn Executable>, BackendError> {
    let platform = registry().get(backend).unwrap();
    let opts = CompileOptions {
        pipeline: axle::backend::pipeline_for(&*platform, None),
        ..Default::default()
    };
    platform.compiler().compile(m, &opts)
}

/// A way of compiling a module on a backend.
type CompileFn = fn(&str, Module) -> Result<Box<dyn Executable>, BackendError>;

/// Both ways of compiling: as given, and through the backend's default pipeline.
const COMPILES: [CompileFn; 2] = [compile, compile_default];

fn to_device(backend: &str, l: &Literal) -> DeviceBuffer {
    registry()
        .get(backend)
        .unwrap()
        .transfer_manager()
        .to_device(l, 0)
        .unwrap()
}

fn from_device(backend: &str, b: &DeviceBuffer) -> Literal {
    registry()
        .get(backend)
        .unwrap()
        .transfer_manager()
        .from_device(b)
        .unwrap()
}

/// Pushes `parameter(n)` of `shape` named `name` into computation `c`.
fn push_param(
    m: &mut Module,
    c: axle::ir::CompId,
    shape: axle::ir::ShapeId,
    n: i64,
    name: &str,
) -> axle::ir::InstId {
    let layout = m.no_layout();
    m.push_inst(
        c,
        NewInst {
            opcode: Opcode::Parameter,
            shape,
            layout,
            operands: vec![],
            attrs: vec![(AttrKey::ParameterNumber, AttrValue::Int(n))],
            name: Some(name.into()),
        },
    )
}

fn arr<T: axle::ir::NativeElement>(dims: &[i64], v: &[T]) -> Literal {
    Literal::Array(ArrayLiteral::from_slice(dims, v))
}

const NEGATE4: &str =
    "HloModule m\nENTRY e {\n  a = f32[4] parameter(0)\n  ROOT n = f32[4] negate(a)\n}\n";

// ---- 1. Unbounded dynamic dimensions ----

#[test]
fn l1_every_backend_refuses_unbounded_dimensions_at_compile() {
    let text =
        "HloModule m\nENTRY e {\n  a = f32[?,4] parameter(0)\n  ROOT n = f32[?,4] negate(a)\n}\n";
    for b in BACKENDS {
        let e = compile(b, parse(text)).err().expect("refused");
        assert_eq!(e.backend, b);
        assert_eq!(
            e.message,
            "3:3: error: %a: f32[?,4] has an unbounded dynamic dimension ('?'); no backend runs \
             unbounded dynamic shapes (bounded ones, '<=N', run at their bound)\n\
             4:8: error: %n: f32[?,4] has an unbounded dynamic dimension ('?'); no backend runs \
             unbounded dynamic shapes (bounded ones, '<=N', run at their bound)"
        );
    }
    // The same from the shared check itself.
    let errs = axle::ir::check_runnable(&parse(text)).unwrap_err();
    assert_eq!(errs.len(), 2);
}

#[test]
fn l1_the_evaluator_and_the_code_generator_refuse_them_directly() {
    let text = "HloModule m\nENTRY e {\n  ROOT i = s32[3,?] iota(), iota_dimension=0\n}\n";
    let m = parse(text);
    axle::verify_module(&m).expect("verifies, as in XLA");
    let e = axle::analysis::eval::evaluate(&m, &[]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "evaluating %i (iota) in e: the result shape s32[3,?] has no fixed size (an unbounded \
         dynamic dimension, which no backend runs)"
    );
    let e = axle_codegen_cpu::compile(&m, &Default::default()).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("compiling m: 3:8: error: %i: s32[3,?] has an unbounded"),
        "{e}"
    );
    let e = axle_codegen_cpu::compile_aot(&m, &Default::default(), "m").unwrap_err();
    assert!(
        e.to_string().contains("has an unbounded dynamic dimension"),
        "{e}"
    );
}

#[test]
fn l1_shape_sizes_of_unbounded_shapes_are_none_not_negative() {
    let mut a = ArrayShape::new(ElementType::F32, &[-1, 4]);
    a.dynamic = vec![true, false].into();
    assert!(a.validate().is_ok());
    assert!(a.is_unbounded_dynamic());
    assert_eq!(a.byte_size(), None);
    // -1 without the dynamic flag, or another negative size, is not a shape.
    let b = ArrayShape::new(ElementType::F32, &[-1, 4]);
    assert_eq!(
        b.validate().unwrap_err().to_string(),
        "dimension 0 has a negative size -1"
    );
    let mut c = ArrayShape::new(ElementType::F32, &[-2]);
    c.dynamic = vec![true].into();
    assert_eq!(
        c.validate().unwrap_err().to_string(),
        "dimension 0 has a negative size -2"
    );
}

#[test]
fn l1_bounded_dimensions_run_at_their_bound_on_every_backend() {
    let text = "HloModule m\nENTRY e {\n  a = f32[<=3] parameter(0)\n  ROOT s = s32[] get-dimension-size(a), dimensions={0}\n}\n";
    for b in BACKENDS {
        let exe = compile(b, parse(text)).unwrap();
        let x = to_device(b, &arr(&[3], &[1f32, 2.0, 3.0]));
        let out = exe.run(&[&x]).unwrap();
        let l = from_device(b, &out);
        assert_eq!(l, arr(&[], &[3i32]), "{b}");
    }
}

#[test]
fn l1_sizes_set_at_run_time_come_back_padded_from_an_executable_and_cut_from_run_module() {
    // The size is a constant here, so run_module's generated input decides the expectation.
    let text = "HloModule m\nENTRY e {\n  x = f32[2,6] parameter(0)\n  n = s32[] constant(4)\n  \
                d = f32[2,<=6] set-dimension-size(x, n), dimensions={1}\n  \
                g = s32[] get-dimension-size(d), dimensions={1}\n  \
                ROOT t = (f32[2,<=6], s32[]) tuple(d, g)\n}\n";
    let x: Vec<f32> = (1..=12).map(|v| v as f32).collect();
    let mut padded = x.clone();
    for row in padded.chunks_mut(6) {
        row[4..].fill(0.0);
    }
    let want = Literal::Tuple(vec![arr(&[2, 6], &padded), arr(&[], &[4i32])]);
    for b in BACKENDS {
        for compile in COMPILES {
            let exe = compile(b, parse(text)).unwrap();
            let xb = to_device(b, &arr(&[2, 6], &x));
            let out = exe.run(&[&xb]).unwrap();
            assert_eq!(from_device(b, &out), want, "{b}");
        }
    }
    for b in BACKENDS.iter().chain(&["nvptx-sim"]) {
        let opts = axle::run::RunOptions {
            backend: b.to_string(),
            ..Default::default()
        };
        let r = axle::run::run_module(parse(text), &opts).unwrap();
        let Literal::Array(input) = &r.inputs[0] else {
            panic!("an array input")
        };
        let got = &r.outputs;
        assert_eq!(got.len(), 2, "{b}");
        assert_eq!(&*got[0].shape.dims, &[2, 4], "{b}");
        for i in 0..2 {
            for j in 0..4 {
                assert_eq!(got[0].get_f64(i * 4 + j), input.get_f64(i * 6 + j), "{b}");
            }
        }
        assert_eq!(got[1].get_i128(0), 4, "{b}");
    }
}

#[test]
fn l1_unbounded_module_in_run_module_fails_before_making_inputs() {
    let text =
        "HloModule m\nENTRY e {\n  a = f32[?] parameter(0)\n  ROOT n = f32[?] negate(a)\n}\n";
    for b in BACKENDS {
        let opts = axle::run::RunOptions {
            backend: b.into(),
            ..Default::default()
        };
        let e = axle::run::run_module(parse(text), &opts).unwrap_err();
        assert!(matches!(e, axle::run::RunError::Backend(_)), "{e:?}");
        let e = e.to_string();
        assert!(
            e.starts_with(&format!("{b}: 3:3: error: %a: f32[?] has an unbounded")),
            "{e}"
        );
    }
}

// ---- 2. Verifier gaps ----

#[test]
fn l2_reducers_and_updates_must_match_element_types_exactly() {
    let add = "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n";
    let cases = [
        (
            format!("HloModule m\n{add}ENTRY e {{\n  a = f64[4] parameter(0)\n  z = f64[] constant(0)\n  ROOT r = f32[] reduce(a, z), dimensions={{0}}, to_apply=add\n}}\n"),
            "10:8: error: %r: reduce: to_apply computation %add: accumulator 0 is f32[] but the init value is f64[]",
        ),
        (
            format!("HloModule m\n{add}ENTRY e {{\n  a = bf16[4] parameter(0)\n  z = f32[] constant(0)\n  ROOT r = f32[] reduce(a, z), dimensions={{0}}, to_apply=add\n}}\n"),
            "10:8: error: %r: reduce: operands mix floating-point types bf16 and f32; mixed precision is not allowed (convert first)",
        ),
        (
            format!("HloModule m\n{add}ENTRY e {{\n  a = f32[4] parameter(0)\n  z = f32[] constant(0)\n  ROOT r = f32[2] reduce-window(a, z), window={{size=2 stride=2}}, to_apply=add\n}}\n"),
            "",
        ),
        (
            format!("HloModule m\n{add}ENTRY e {{\n  a = f32[4] parameter(0)\n  i = s32[1,1] parameter(1)\n  u = f64[1] parameter(2)\n  ROOT sc = f32[4] scatter(a, i, u), update_window_dims={{}}, inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=add\n}}\n"),
            "11:8: error: %sc: scatter: operands mix floating-point types f32 and f64; mixed precision is not allowed (convert first)",
        ),
        (
            "HloModule m\nadd {\n  x = s32[] parameter(0)\n  y = s32[] parameter(1)\n  ROOT s = s32[] add(x, y)\n}\nENTRY e {\n  a = s32[4] parameter(0)\n  i = s32[1,1] parameter(1)\n  u = s8[1] parameter(2)\n  ROOT sc = s32[4] scatter(a, i, u), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add\n}\n".to_string(),
            "11:8: error: %sc: scatter: updates s8[1] (operand 2) must have the element type of input s32[4]",
        ),
        (
            format!("HloModule m\n{add}ge {{\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT c = pred[] compare(x, y), direction=GE\n}}\nENTRY e {{\n  a = f32[4] parameter(0)\n  s = f32[2] parameter(1)\n  z = f32[] constant(0)\n  ROOT r = f32[4] select-and-scatter(a, s, z), window={{size=2 stride=2}}, select=ge, scatter=add\n}}\n"),
            "",
        ),
    ];
    for (text, want) in cases {
        let got = axle::verify_module(&parse(&text)).map_err(|e| e.to_string());
        if want.is_empty() {
            got.unwrap_or_else(|e| panic!("{e}\n{text}"));
        } else {
            assert_eq!(got.unwrap_err(), want, "{text}");
        }
    }
}

#[test]
fn l2_the_evaluator_never_meets_mixed_types_through_a_backend() {
    // What used to reach the evaluator (and panic) or cpu (invalid LLVM IR) is refused first.
    let text = "HloModule m\nadd {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\nENTRY e {\n  a = f32[4] parameter(0)\n  z = f8e4m3fn[] constant(0)\n  ROOT r = f32[] reduce(a, z), dimensions={0}, to_apply=add\n}\n";
    for b in BACKENDS {
        let e = compile(b, parse(text)).err().expect("refused");
        assert_eq!(
            e.message,
            "10:8: error: %r: reduce: operands mix floating-point types f32 and f8e4m3fn; mixed \
             precision is not allowed (convert first)"
        );
    }
}

/// A module whose root has a shape nested `depth` tuples deep, built through the module API.
fn deep_tuple_module(depth: usize) -> Module {
    let mut m = Module::new("deep");
    let c = m.add_computation("e");
    let mut shape = m.intern_shape(Shape::array(ElementType::F32, &[2]));
    let l = m.no_layout();
    let mut prev = push_param(&mut m, c, shape, 0, "a");
    for k in 0..depth {
        shape = m.intern_shape(Shape::Tuple(vec![shape].into()));
        prev = m.push_inst(
            c,
            NewInst {
                opcode: Opcode::Tuple,
                shape,
                layout: l,
                operands: vec![prev],
                attrs: vec![],
                name: Some(format!("t{k}")),
            },
        );
    }
    m.set_root(c, prev);
    m.set_entry(c);
    m
}

#[test]
fn l2_tuple_nesting_past_256_is_reported_as_such() {
    axle::verify_module(&deep_tuple_module(256)).unwrap();
    let e = axle::verify_module(&deep_tuple_module(257)).unwrap_err();
    assert_eq!(e.errors.len(), 1);
    assert_eq!(
        e.to_string(),
        "error: %t256: has a tuple shape nested more than 256 levels deep"
    );
}

#[test]
fn l2_token_parameters_take_the_empty_tuple_on_every_backend() {
    let text = "HloModule m\nENTRY e {\n  t = token[] parameter(0)\n  a = f32[2] parameter(1)\n  u = token[] after-all(t, t)\n  n = f32[2] negate(a)\n  ROOT r = (f32[2], token[]) tuple(n, u)\n}\n";
    for b in BACKENDS {
        let exe = compile(b, parse(text)).unwrap();
        let tok = to_device(b, &Literal::Tuple(vec![]));
        let x = to_device(b, &arr(&[2], &[1f32, -3.0]));
        let out = exe.run(&[&tok, &x]).unwrap();
        let l = from_device(b, &out);
        assert_eq!(
            l,
            Literal::Tuple(vec![arr(&[2], &[-1f32, 3.0]), Literal::Tuple(vec![])]),
            "{b}"
        );
        // An array where the token goes is refused.
        let e = exe.run(&[&x, &x]).unwrap_err();
        assert_eq!(
            e.message,
            "argument 0 is f32[2] but parameter 0 ('t') is token[]"
        );
    }
}

// ---- 3. Shape arithmetic overflow ----

#[test]
fn l3_sizes_are_checked_in_every_order() {
    use ElementType::*;
    let shape = |ty, d: &[i64]| ArrayShape::new(ty, d);
    assert_eq!(shape(F32, &[2, 3]).byte_size(), Some(24));
    assert_eq!(shape(S8, &[i64::MAX]).byte_size(), Some(i64::MAX as u64));
    assert_eq!(shape(F32, &[i64::MAX]).byte_size(), None);
    assert_eq!(shape(F32, &[1 << 32, 1 << 32, 4]).byte_size(), None);
    // A zero dimension makes the size zero but does not hide an overflow of the others.
    assert_eq!(shape(F32, &[0, 1 << 40]).byte_size(), Some(0));
    for dims in [[1i64 << 62, 1 << 62, 0], [0, 1 << 62, 1 << 62]] {
        let s = shape(F32, &dims);
        assert_eq!(s.byte_size(), None);
        assert_eq!(
            s.validate().unwrap_err().to_string(),
            "has more than 9223372036854775807 elements"
        );
    }
    assert_eq!(
        shape(C128, &[1 << 60]).validate().unwrap_err().to_string(),
        "takes more than 9223372036854775807 bytes"
    );
}

#[test]
fn l3_modules_built_with_overflowing_shapes_do_not_verify() {
    let mut m = parse(NEGATE4);
    let huge = m.intern_shape(Shape::array(ElementType::F32, &[1 << 32, 1 << 32, 4]));
    let a = m.params(m.entry())[0];
    m.set_shape(a, huge, m.no_layout());
    let e = axle::verify_module(&m).unwrap_err().to_string();
    assert!(
        e.starts_with(
            "3:3: error: %a: has an invalid shape: shape f32[4294967296,4294967296,4] has more \
             than 9223372036854775807 elements"
        ),
        "{e}"
    );
    // And parsing refuses them outright, at the shape.
    let e = parse_module(
        "HloModule m\nENTRY e {\n  ROOT a = s16[4611686018427387904] parameter(0)\n}\n",
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "3:12: error: shape s16[4611686018427387904] takes more than 9223372036854775807 bytes"
    );
}

#[test]
fn l3_shape_inference_refuses_invalid_operand_shapes() {
    use axle::ir::shape_inference::infer_shape_from;
    let bad = axle::ir::OwnedShape::array(ElementType::F32, &[i64::MAX, 2]);
    let e = infer_shape_from(Opcode::Negate, &[bad], &[], None, &|_| unreachable!()).unwrap_err();
    assert_eq!(
        e.message(),
        "negate: operand 0 has an invalid shape: shape f32[9223372036854775807,2] has more than \
         9223372036854775807 elements"
    );
}

// ---- 4. Allocation ----

#[test]
fn l4_huge_parameter_numbers_allocate_nothing() {
    let mut m = Module::new("m");
    let c = m.add_computation("e");
    let s = m.intern_shape(Shape::array(ElementType::F32, &[4]));
    for n in [i64::MAX, 2147483647, 5] {
        push_param(&mut m, c, s, n, &format!("p{n}"));
    }
    // No parameter number is below the three instructions the module has: none is entered.
    assert!(m.params(c).is_empty());
    m.set_root(c, axle::ir::InstId::new(0));
    m.set_entry(c);
    let e = axle::verify_module(&m).unwrap_err().to_string();
    assert!(
        e.contains("%p9223372036854775807: parameter number 9223372036854775807 is out of range"),
        "{e}"
    );
    // Parameters pushed before their lower-numbered siblings are entered once they can be.
    let mut m = Module::new("m");
    let c = m.add_computation("e");
    for (k, n) in [1i64, 0].into_iter().enumerate() {
        push_param(&mut m, c, s, n, &format!("q{k}"));
    }
    assert_eq!(m.params(c).len(), 2);
    assert_eq!(m.name(m.params(c)[0]), "q1");
    assert_eq!(m.name(m.params(c)[1]), "q0");
}

#[test]
fn l4_results_over_the_ceiling_fail_before_allocating_on_every_backend() {
    memory::set_limit(Some(CEILING));
    let text = "HloModule m\nENTRY e {\n  a = f32[] parameter(0)\n  ROOT b = f32[65536,65536] broadcast(a), dimensions={}\n}\n";
    let x = arr(&[], &[1f32]);
    let e = axle::analysis::eval::evaluate(&parse(text), std::slice::from_ref(&x)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "evaluating %b (broadcast) in e: %b (broadcast) needs 17179869184 bytes (16.0 GiB) but \
         only 1073741820 bytes (1024.0 MiB) are available under the memory limit"
    );
    let exe = axle_codegen_cpu::compile(&parse(text), &Default::default()).unwrap();
    let e = exe.run_literals(std::slice::from_ref(&x)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "compiling cpu executable: a run (17179869184 output bytes and a temporary block of 0 \
         bytes) needs 17179869184 bytes (16.0 GiB) but only 1073741824 bytes (1.0 GiB) are \
         available under the memory limit"
    );
    for (b, compile) in BACKENDS.iter().flat_map(|b| COMPILES.map(|c| (*b, c))) {
        let exe = compile(b, parse(text)).unwrap();
        let e = exe.run(&[&to_device(b, &x)]).unwrap_err();
        assert!(
            e.message.contains("needs 17179869184 bytes (16.0 GiB)"),
            "{b}: {e}"
        );
    }
}

#[test]
fn l4_generated_and_read_inputs_are_checked_before_allocating() {
    memory::set_limit(Some(CEILING));
    let m = parse("HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  b = f64[65536,65536] parameter(1)\n  ROOT t = (f32[2], f64[65536,65536]) tuple(a, b)\n}\n");
    let e = axle::run::generate_inputs(&m, 0).unwrap_err();
    assert!(matches!(e, axle::run::RunError::Memory(_)), "{e:?}");
    assert_eq!(
        e.to_string(),
        "parameter 1 ('b') needs 34359738368 bytes (32.0 GiB) but only 1073741816 bytes \
         (1024.0 MiB) are available under the memory limit"
    );
    // A .npy file whose data does not fit the budget left is refused before it is read.
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("x.npy");
    axle::ir::write_npy(&p, &ArrayLiteral::from_slice(&[256], &[0f32; 256])).unwrap();
    let mut small = MemoryBudget::with_limit(1000, memory::LimitSource::Set);
    let e = axle::ir::read_npy_within(&p, Some(ElementType::F32), &mut small).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: the data of {} needs 1024 bytes (1.0 KiB) but only 1000 bytes (1000 B) are \
             available under the memory limit",
            p.display(),
            p.display()
        )
    );
    // Fallible allocation: a refused size is an error, not an abort.
    let e = memory::try_zeroed(u64::MAX, || "a test buffer".into()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "a test buffer needs 18446744073709551615 bytes (16.0 EiB), which the system refused to \
         allocate"
    );
}

#[test]
fn l4_sizes_parse_with_units() {
    assert_eq!(memory::parse_size("1000"), Ok(1000));
    assert_eq!(memory::parse_size("8G"), Ok(8 << 30));
    assert_eq!(memory::parse_size("512MiB"), Ok(512 << 20));
    assert_eq!(memory::parse_size(" 3k "), Ok(3 << 10));
    assert!(memory::parse_size("-1").is_err());
    assert!(memory::parse_size("1X").is_err());
    let e = memory::parse_size("99999999999T").unwrap_err();
    assert_eq!(e, memory::MemoryLimitError::TooLarge("99999999999T".into()));
    assert_eq!(e.to_string(), "memory size '99999999999T' is too large");
}

// ---- 5. Quadratic time or memory ----

#[test]
fn l5_stats_rows_share_one_pipeline_text() {
    let mut m = parse(NEGATE4);
    let pipeline = vec!["dce"; 2_000].join(",");
    let opts = axle::ir::PassManagerOptions {
        verify: axle::ir::VerifyMode::End,
        ..Default::default()
    };
    let rows = axle::passes::optimize(&mut m, &pipeline, opts).unwrap();
    assert_eq!(rows.len(), 2_000);
    assert!(rows
        .iter()
        .all(|r| Arc::ptr_eq(&r.pipeline, &rows[0].pipeline)));
    assert_eq!(rows[0].pipeline.len(), pipeline.len());
}

#[test]
fn l5_explore_draws_orders_lazily() {
    let m = parse(NEGATE4);
    let opts = axle::explore::ExploreOptions {
        passes: vec!["dce".into(), "cse".into()],
        orders: usize::MAX,
        seed: 1,
        length: Some(3),
        input_sets: 0,
        measure: None,
    };
    // Nothing is drawn ahead: the first rows arrive at once, and the sink can stop it.
    let mut seen = 0;
    let e = axle::explore::explore_each(&m, &opts, |_| {
        seen += 1;
        if seen == 3 {
            Err("enough".into())
        } else {
            Ok(())
        }
    })
    .unwrap_err();
    assert_eq!((e.as_str(), seen), ("enough", 3));
    let first: Vec<String> = axle::explore::pipelines(&opts).take(3).collect();
    assert_eq!(first[0], "");
    assert_eq!(first[1].split(',').count(), 3);
}

#[test]
fn l5_long_lines_parse_with_exact_locations() {
    let mut s = String::from("HloModule m\nENTRY e { p0 = f32[4] parameter(0)");
    for i in 1..10_000 {
        let prev = if i == 1 {
            "p0".into()
        } else {
            format!("a{}", i - 1)
        };
        s.push_str(&format!(" a{i} = f32[4] add({prev}, p0)"));
    }
    s.push_str(" ROOT r = f32[4] negate(a9999) }\n");
    let m = parse(&s);
    let r = m.root(m.entry());
    let loc = m.src_loc(r).unwrap();
    // An instruction's location is its name's (after `ROOT `).
    let col = s.lines().nth(1).unwrap().find("ROOT r =").unwrap() + 5 + 1;
    assert_eq!((loc.line, loc.col as usize), (2, col));
}

// ---- 6. I/O ----

#[test]
fn l6_write_outputs_replaces_the_earlier_run_as_a_set() {
    let d = tempfile::tempdir().unwrap();
    let lit = |v: f32| ArrayLiteral::from_slice(&[1], &[v]);
    axle::run::write_outputs(d.path(), &[lit(1.0), lit(2.0), lit(3.0)]).unwrap();
    let written = axle::run::write_outputs(d.path(), &[lit(9.0)]).unwrap();
    assert_eq!(written, vec![d.path().join("out0.npy")]);
    let names: Vec<String> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["out0.npy"]);
    // A move that fails puts the earlier run back: out1.npy is a directory here.
    std::fs::create_dir(d.path().join("out1.npy")).unwrap();
    std::fs::write(d.path().join("out1.npy").join("keep"), "x").unwrap();
    let e = axle::run::write_outputs(d.path(), &[lit(5.0), lit(6.0)]).unwrap_err();
    assert!(matches!(e, axle::run::RunError::Output(_)), "{e:?}");
    assert!(
        e.to_string().contains("cannot move output into place"),
        "{e}"
    );
    let back = axle::ir::read_npy(d.path().join("out0.npy")).unwrap();
    assert_eq!(back.to_vec::<f32>().unwrap(), vec![9.0]);
    let mut names: Vec<String> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["out0.npy", "out1.npy"]);
}

// ---- 7. Arguments ----

#[test]
fn l7_library_entry_points_refuse_meaningless_options() {
    let m = parse(NEGATE4);
    let bench = |f: &dyn Fn(&mut axle::bench::BenchOptions)| {
        let mut o = axle::bench::BenchOptions {
            backend: "interpreter".into(),
            ..Default::default()
        };
        f(&mut o);
        axle::bench::bench_module(m.clone(), &o).unwrap_err()
    };
    assert_eq!(bench(&|o| o.repeat = 0), "--repeat must be at least 1");
    assert_eq!(
        bench(&|o| o.policies.clear()),
        "no output-buffer policy to time"
    );
    assert_eq!(
        bench(&|o| o.profile = true),
        "--profile times the kernels of the cpu backend, not of 'interpreter'"
    );
    let opts = axle::explore::ExploreOptions {
        passes: vec!["dce".into()],
        orders: 1,
        seed: 0,
        length: Some(0),
        input_sets: 0,
        measure: None,
    };
    assert_eq!(
        axle::explore::explore(&m, &opts).unwrap_err(),
        "--length must be at least 1"
    );
    let x = ArrayLiteral::from_slice(&[2], &[1f32, 2.0]);
    for tol in [
        axle::ir::Tolerance::Close {
            rtol: -1.0,
            atol: 0.0,
        },
        axle::ir::Tolerance::Close {
            rtol: f64::NAN,
            atol: 0.0,
        },
        axle::ir::Tolerance::Close {
            rtol: 0.0,
            atol: f64::INFINITY,
        },
    ] {
        let e = axle::ir::compare_arrays(&x, &x, tol).unwrap_err();
        assert!(e.to_string().starts_with("invalid tolerance ("), "{e}");
    }
}

// ---- 8. Inputs are checked the same way on every backend ----

#[test]
fn l8_arguments_that_only_match_in_bytes_are_refused_alike() {
    let cases: [(Literal, &str); 4] = [
        (
            arr(&[4], &[1i32, 2, 3, 4]),
            "argument 0 is s32[4] but parameter 0 ('a') is f32[4]",
        ),
        (
            arr(&[2, 2], &[1f32, 2.0, 3.0, 4.0]),
            "argument 0 is f32[2,2] but parameter 0 ('a') is f32[4]",
        ),
        (
            arr(&[4], &[1u32, 2, 3, 4]),
            "argument 0 is u32[4] but parameter 0 ('a') is f32[4]",
        ),
        (
            Literal::Tuple(vec![arr(&[4], &[1f32, 2.0, 3.0, 4.0])]),
            "argument 0 is (f32[4]) but parameter 0 ('a') is f32[4]",
        ),
    ];
    // Passes keep the entry parameters, so the check is the same whatever the pipeline.
    for (b, compile) in BACKENDS.iter().flat_map(|b| COMPILES.map(|c| (*b, c))) {
        let exe = compile(b, parse(NEGATE4)).unwrap();
        for (lit, want) in &cases {
            let buf = to_device(b, lit);
            let e = exe.run(&[&buf]).unwrap_err();
            assert_eq!(e, BackendError::new(b, *want), "{b}");
            let mut out = exe.run(&[&to_device(b, &arr(&[4], &[0f32; 4]))]).unwrap();
            let e = exe.run_into(&[&buf], &mut out).unwrap_err();
            assert_eq!(e, BackendError::new(b, *want), "{b}");
        }
        let good = to_device(b, &arr(&[4], &[1f32, 2.0, 3.0, 4.0]));
        let e = exe.run(&[&good, &good]).unwrap_err();
        assert_eq!(
            e.message,
            "the entry computation takes 1 argument but 2 were given"
        );
        let e = exe.run(&[]).unwrap_err();
        assert_eq!(
            e.message,
            "the entry computation takes 1 argument but 0 were given"
        );
    }
    // A buffer of the other backend is refused by the check too.
    let exe = compile("cpu", parse(NEGATE4)).unwrap();
    let foreign = to_device("interpreter", &arr(&[4], &[1f32, 2.0, 3.0, 4.0]));
    assert_eq!(
        exe.run(&[&foreign]).unwrap_err().message,
        "argument 0 is a buffer of backend 'interpreter', not of 'cpu'"
    );
}

#[test]
fn l8_the_default_pipeline_keeps_the_entry_parameters_checked() {
    // An unused parameter and parameters read only inside a fused kernel: the fused program
    // still takes (and checks) every parameter as written.
    let text = "HloModule m\nENTRY e {\n  a = f32[4] parameter(0)\n  u = s32[2,2] parameter(1)\n  b = f32[4] parameter(2)\n  s = f32[4] add(a, b)\n  ROOT n = f32[4] negate(s)\n}\n";
    let a = arr(&[4], &[1f32, 2.0, 3.0, 4.0]);
    let u = arr(&[2, 2], &[0i32; 4]);
    for b in BACKENDS {
        let exe = compile_default(b, parse(text)).unwrap();
        let (da, du) = (to_device(b, &a), to_device(b, &u));
        let out = exe.run(&[&da, &du, &da]).unwrap();
        assert_eq!(
            from_device(b, &out),
            arr(&[4], &[-2f32, -4.0, -6.0, -8.0]),
            "{b}"
        );
        let e = exe.run(&[&da, &da, &da]).unwrap_err();
        assert_eq!(
            e.message, "argument 1 is f32[4] but parameter 1 ('u') is s32[2,2]",
            "{b}"
        );
        let e = exe.run(&[&da, &du]).unwrap_err();
        assert_eq!(
            e.message, "the entry computation takes 3 arguments but 2 were given",
            "{b}"
        );
    }
}

#[test]
fn l8_host_runs_check_types_even_when_called_directly() {
    // `Executable::host` is public: its run checks element types and dimensions itself, so
    // bytes of the right count never run as another type, through `Compiled` or not.
    let wrong = [1i32, 2, 3, 4];
    let square = [1f32, 2.0, 3.0, 4.0];
    let cases = [
        (
            axle::ArrayRef::vector(&wrong),
            "argument 0: f32[4] expected, s32[4] given",
        ),
        (
            axle::ArrayRef::new(&square, &[2, 2]).unwrap(),
            "argument 0: f32[4] expected, f32[2,2] given",
        ),
    ];
    for (b, compile) in BACKENDS.iter().flat_map(|b| COMPILES.map(|c| (*b, c))) {
        let exe = compile(b, parse(NEGATE4)).unwrap();
        let host = exe.host().expect("a host backend");
        for (arg, want) in &cases {
            let mut out = [0u8; 16];
            let e = host
                .execute(std::slice::from_ref(arg), &mut [&mut out[..]])
                .unwrap_err();
            assert_eq!(e, BackendError::new(b, *want), "{b}");
            assert_eq!(out, [0u8; 16], "{b}: nothing ran");
        }
        let c = axle::compile_text(b, NEGATE4, &CompileOptions::default()).unwrap();
        for (arg, want) in &cases {
            let e = c.call(std::slice::from_ref(arg)).unwrap_err();
            assert!(e.to_string().contains(want), "{b}: {e}");
        }
    }
}

/// A backend from outside the crate: it gets the interface's argument check without doing
/// anything, and its `execute` never sees unchecked arguments.
struct Outside {
    compiler: OutsideCompiler,
    transfer: OutsideTransfer,
}
struct OutsideCompiler(Arc<AtomicBool>);
struct OutsideTransfer;
struct OutsideExe {
    module: Module,
    executed: Arc<AtomicBool>,
}

impl Platform for Outside {
    fn name(&self) -> &str {
        "outside"
    }
    fn devices(&self) -> Vec<axle::backend::DeviceInfo> {
        Vec::new()
    }
    fn compiler(&self) -> &dyn Compiler {
        &self.compiler
    }
    fn transfer_manager(&self) -> &dyn TransferManager {
        &self.transfer
    }
}

impl Compiler for OutsideCompiler {
    fn compile(&self, m: Module, _: &CompileOptions) -> Result<Box<dyn Executable>, BackendError> {
        Ok(Box::new(OutsideExe {
            module: m,
            executed: self.0.clone(),
        }))
    }
}

impl Executable for OutsideExe {
    fn backend(&self) -> &str {
        "outside"
    }
    fn execute(&self, args: &[&DeviceBuffer]) -> Result<DeviceBuffer, BackendError> {
        self.executed.store(true, Ordering::SeqCst);
        let l = args[0].payload.downcast_ref::<Literal>().unwrap().clone();
        Ok(DeviceBuffer {
            platform: "outside".into(),
            device: 0,
            shape: ValueShape::of_literal(&l),
            payload: Box::new(l),
        })
    }
    fn module(&self) -> &Module {
        &self.module
    }
    fn compiled_text(&self) -> String {
        String::new()
    }
    fn stats(&self) -> ExecutableStats {
        ExecutableStats::default()
    }
}

impl TransferManager for OutsideTransfer {
    fn to_device(&self, lit: &Literal, device: usize) -> Result<DeviceBuffer, BackendError> {
        Ok(DeviceBuffer {
            platform: "outside".into(),
            device,
            shape: ValueShape::of_literal(lit),
            payload: Box::new(lit.clone()),
        })
    }
    fn from_device(&self, buf: &DeviceBuffer) -> Result<Literal, BackendError> {
        Ok(buf.payload.downcast_ref::<Literal>().unwrap().clone())
    }
}

#[test]
fn l8_a_third_party_backend_gets_the_same_check() {
    let executed = Arc::new(AtomicBool::new(false));
    let p = Outside {
        compiler: OutsideCompiler(executed.clone()),
        transfer: OutsideTransfer,
    };
    let exe = p
        .compiler()
        .compile(parse(NEGATE4), &CompileOptions::default())
        .unwrap();
    let bad = p
        .transfer_manager()
        .to_device(&arr(&[4], &[1i32, 2, 3, 4]), 0)
        .unwrap();
    let e = exe.run(&[&bad]).unwrap_err();
    assert_eq!(
        e,
        BackendError::new(
            "outside",
            "argument 0 is s32[4] but parameter 0 ('a') is f32[4]"
        )
    );
    assert!(!executed.load(Ordering::SeqCst));
    let good = p
        .transfer_manager()
        .to_device(&arr(&[4], &[1f32, 2.0, 3.0, 4.0]), 0)
        .unwrap();
    exe.run(&[&good]).unwrap();
    assert!(executed.load(Ordering::SeqCst));
}

/// Buffers whose sizes each fit in i64 but whose sum live at once does not: the scheduler's
/// memory model, the kernel classes and the output reservation sum them saturating, so
/// compiling refuses or accepts the module cleanly and running it is a clear allocation error
/// (an add overflowed in `MemoryModel::simulate` and `modules::class`; found by
/// tests/hostile_fuzz.rs, seed 17593330565247703864).
#[test]
fn live_bytes_past_u64_are_no_overflow() {
    // 2^60 f32 elements: 2^62 bytes each, four of them live at once.
    let n = 1u64 << 60;
    let text = format!(
        "HloModule big
ENTRY main {{
  p = f32[{n}] parameter(0)
  a = f32[{n}] negate(p)
  b = f32[{n}] exponential(p)
  c = f32[{n}] add(a, b)
  d = f32[{n}] multiply(a, b)
  ROOT t = (f32[{n}], f32[{n}], f32[{n}], f32[{n}]) tuple(c, d, a, b)
}}
"
    );
    for compile in COMPILES {
        // Compiling either succeeds (the buffers are only allocated when it runs) or is an
        // error value; an overflow panics in these test builds.
        if let Err(e) = compile("cpu", parse(&text)) {
            let msg = e.to_string();
            assert!(msg.contains("cpu"), "{msg}");
        }
    }
}
