//! HLO text that XLA's parser (`hlo_parser.cc`) accepts beyond what its printer writes, read the
//! way XLA reads it: no `HloModule` line, instructions without a result shape, operands written
//! as nested instructions, older header and trailer syntax, `broadcast` of a scalar without
//! `dimensions=`, a scalar literal for an array constant, computations inline in attributes,
//! signatures whose parameter lists XLA ignores, and `select` with a scalar predicate.
//!
//! Every accepted text must print canonically and read back to the same printout; where XLA's
//! reading is known (names, inferred shapes, literal values: taken from XLA's parser through
//! jaxlib 0.10.2, `hlo_module_from_text(...).to_string()`), the module must print as the
//! equivalent explicit text does. Each rejected text fails at an exact line and column.

use axle_ir::parser::{infers_shape, starts_like_module};
use axle_ir::{parse_module, print_module, verify, Module, Opcode, OwnedShape};

/// Parses `text`, checks that its printout reads back to the same printout, and returns it.
fn accept(text: &str) -> Module {
    let m = parse_module(text).unwrap_or_else(|e| panic!("{}\n{text}", e.render("test.hlo")));
    let printed = print_module(&m);
    let again = parse_module(&printed)
        .unwrap_or_else(|e| panic!("the printout does not parse:\n{}", e.render("printed")));
    assert_eq!(
        print_module(&again),
        printed,
        "the printout does not read back to the same module"
    );
    m
}

/// [`accept`], and the module verifies.
fn accept_verified(text: &str) -> Module {
    let m = accept(text);
    if let Err(e) = verify(&m) {
        panic!("does not verify:\n{e}\n{}", print_module(&m));
    }
    m
}

/// `text` reads as the module `explicit` spells out (instructions in the same order).
fn same_as(text: &str, explicit: &str) -> Module {
    let m = accept_verified(text);
    let want = parse_module(explicit).unwrap_or_else(|e| panic!("{}", e.render("explicit")));
    assert_eq!(print_module(&m), print_module(&want));
    m
}

/// `text` fails to parse at `line:col` with exactly `msg`.
fn reject(text: &str, line: u32, col: u32, msg: &str) {
    match parse_module(text) {
        Ok(m) => panic!(
            "expected a parse error, but the text parsed:\n{}",
            print_module(&m)
        ),
        Err(e) => assert_eq!(
            (e.line, e.col, e.msg.as_str()),
            (line, col, msg),
            "\n{}",
            e.render("test.hlo")
        ),
    }
}

/// The instruction of `m` named `name`.
fn inst(m: &Module, name: &str) -> axle_ir::InstId {
    m.live_ids()
        .into_iter()
        .find(|&i| m.name(i) == name)
        .unwrap_or_else(|| panic!("no instruction {name} in\n{}", print_module(m)))
}

/// The shape of instruction `name` as text (`f32[4]`, `(s32[], f32[4])`).
fn shape_of(m: &Module, name: &str) -> String {
    OwnedShape::from_id(m, m.shape_id(inst(m, name)))
        .map(|s| s.to_string())
        .unwrap_or_default()
}

// ---- 1. Instructions without a result shape ----

#[test]
fn a_missing_result_shape_is_inferred_from_the_operands() {
    same_as(
        "HloModule m\nENTRY e {\n  x = f32[4] parameter(0)\n  ROOT y = add(x, x)\n}\n",
        "HloModule m\nENTRY e {\n  x = f32[4] parameter(0)\n  ROOT y = f32[4] add(x, x)\n}\n",
    );
}

/// Shapes of many opcodes, nested instructions among them, inferred as XLA's parser infers them
/// (its printout of this text, names included: `s` of the entry becomes `s.2` after the `s` of
/// `cond` and `body`).
#[test]
fn shapes_of_many_opcodes_are_inferred_as_xla_infers_them() {
    let text = "HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = add(a, b)
}
cond {
  s = (s32[], f32[4]) parameter(0)
  i = get-tuple-element(s), index=0
  k = s32[] constant(3)
  ROOT lt = compare(i, k), direction=LT
}
body {
  s = (s32[], f32[4]) parameter(0)
  i = get-tuple-element(s), index=0
  v = get-tuple-element(s), index=1
  one = s32[] constant(1)
  ROOT next = tuple(add(i, one), exponential(v))
}
ENTRY e {
  x = f32[4,3] parameter(0)
  w = f32[3,5] parameter(1)
  z = f32[] constant(0)
  r = reduce(x, z), dimensions={1}, to_apply=add
  d = dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = tuple(r, d)
  g = get-tuple-element(t), index=1
  tr = transpose(g), dimensions={1,0}
  cmp = compare(r, r), direction=LT
  s = select(cmp, r, r)
  cl = call(z, z), to_apply=add
  cc = concatenate(r, r), dimensions={0}
  pd = pad(cc, z), padding=1_2
  rv = reverse(x), dimensions={0}
  mp = map(r, r), dimensions={0}, to_apply=add
  rw = reduce-window(x, z), window={size=2x1}, to_apply=add
  i0 = s32[] constant(0)
  wl = while(tuple(i0, r)), condition=cond, body=body
  cl2 = clamp(z, r, z)
  ds = get-dimension-size(x), dimensions={1}
  ROOT out = tuple(s, cl, pd, tr, rv, mp, rw, wl, cl2, ds)
}
";
    let m = accept_verified(text);
    let xla = [
        ("c", "f32[]"),
        ("i", "s32[]"),
        ("lt", "pred[]"),
        ("i.1", "s32[]"),
        ("v", "f32[4]"),
        ("add.anon", "s32[]"),
        ("exponential.anon", "f32[4]"),
        ("next", "(s32[], f32[4])"),
        ("r", "f32[4]"),
        ("d", "f32[4,5]"),
        ("t", "(f32[4], f32[4,5])"),
        ("g", "f32[4,5]"),
        ("tr", "f32[5,4]"),
        ("cmp", "pred[4]"),
        ("s.2", "f32[4]"),
        ("cl", "f32[]"),
        ("cc", "f32[8]"),
        ("pd", "f32[11]"),
        ("rv", "f32[4,3]"),
        ("mp", "f32[4]"),
        ("rw", "f32[3,3]"),
        ("tuple.anon", "(s32[], f32[4])"),
        ("wl", "(s32[], f32[4])"),
        ("cl2", "f32[4]"),
        ("ds", "s32[]"),
        (
            "out",
            "(f32[4], f32[], f32[11], f32[5,4], f32[4,3], f32[4], f32[3,3], (s32[], f32[4]), \
             f32[4], s32[])",
        ),
    ];
    for (name, shape) in xla {
        assert_eq!(shape_of(&m, name), shape, "{name}");
    }
}

/// Operands may be defined later in their computation and called computations later in the
/// module, so shapes are inferred once the module is read, each after what it depends on.
#[test]
fn shapes_are_inferred_after_forward_references_and_called_roots() {
    same_as(
        "HloModule m
ENTRY e {
  x = f32[2,3] parameter(0)
  ROOT r = tuple(c, n)
  c = call(n), to_apply=neg
  n = negate(x)
}
neg {
  p = f32[2,3] parameter(0)
  ROOT q = negate(p)
}
",
        "HloModule m
ENTRY e {
  x = f32[2,3] parameter(0)
  ROOT r = (f32[2,3], f32[2,3]) tuple(c, n)
  c = f32[2,3] call(n), to_apply=neg
  n = f32[2,3] negate(x)
}
neg {
  p = f32[2,3] parameter(0)
  ROOT q = f32[2,3] negate(p)
}
",
    );
}

#[test]
fn a_signature_is_checked_against_an_inferred_root() {
    same_as(
        "HloModule m\nENTRY e (x: f32[4]) -> f32[4] {\n  x = f32[4] parameter(0)\n  ROOT y = negate(x)\n}\n",
        "HloModule m\nENTRY e {\n  x = f32[4] parameter(0)\n  ROOT y = f32[4] negate(x)\n}\n",
    );
    reject(
        "HloModule m\nENTRY e (x: f32[4]) -> s32[4] {\n  x = f32[4] parameter(0)\n  ROOT y = negate(x)\n}\n",
        2,
        24,
        "signature's result shape differs from the root of 'e'",
    );
}

#[test]
fn opcodes_xla_cannot_infer_need_their_shape() {
    for (op, args) in [
        ("reshape", "x"),
        ("convert", "x"),
        ("slice", "x), slice={[0:2]"),
        ("iota", ""),
        ("constant", "1"),
        ("parameter", "1"),
        ("custom-call", "x), custom_call_target=\"f\""),
    ] {
        let text = format!(
            "HloModule m\nENTRY e {{\n  x = f32[4] parameter(0)\n  ROOT y = {op}({args})\n}}\n"
        );
        reject(
            &text,
            4,
            12,
            &format!("the shape of {op} cannot be inferred: write it before the opcode"),
        );
    }
    assert!(infers_shape(Opcode::Add) && infers_shape(Opcode::While));
    assert!(!infers_shape(Opcode::Reshape) && !infers_shape(Opcode::AllReduce));
}

#[test]
fn an_inference_failure_names_the_instruction_and_why() {
    reject(
        "HloModule m\nENTRY e {\n  x = f32[4] parameter(0)\n  z = s32[4] parameter(1)\n  ROOT y = add(x, z)\n}\n",
        5,
        12,
        "cannot infer the shape of 'y': add: operand 1 has shape s32[4] but operand 0 has f32[4]",
    );
    // A missing attribute is an inference failure too, at the opcode of the nested instruction.
    reject(
        "HloModule m\nENTRY e {\n  t = (f32[], s32[]) parameter(0)\n  ROOT y = negate(get-tuple-element(t))\n}\n",
        4,
        19,
        "cannot infer the shape of 'get-tuple-element.anon': get-tuple-element: missing \
         attribute `index`",
    );
}

#[test]
fn shapes_that_depend_on_themselves_are_an_error() {
    reject(
        "HloModule m\nENTRY e {\n  x = f32[] parameter(0)\n  a = add(x, b)\n  ROOT b = negate(a)\n}\n",
        4,
        7,
        "cannot infer the shape of 'a': it depends on itself",
    );
    // Through a computation that calls itself.
    reject(
        "HloModule m\nc {\n  p = f32[] parameter(0)\n  ROOT r = call(p), to_apply=c\n}\nENTRY e {\n  x = f32[] parameter(0)\n  ROOT y = f32[] call(x), to_apply=c\n}\n",
        4,
        12,
        "cannot infer the shape of 'r': it depends on itself",
    );
}

// ---- 2. No `HloModule` line ----

#[test]
fn a_bare_entry_computation_is_a_module_named_after_it() {
    let m = same_as(
        "ENTRY e {\n  x = f32[4] parameter(0)\n  ROOT y = f32[4] add(x, x)\n}\n",
        "HloModule module_e\nENTRY e {\n  x = f32[4] parameter(0)\n  ROOT y = f32[4] add(x, x)\n}\n",
    );
    assert_eq!(m.name, "module_e");
}

#[test]
fn a_list_of_computations_is_a_module() {
    let callee_last = "// a comment first\n/* and another */\nENTRY %main (x: f32[4]) -> f32[] {\n  %x = f32[4] parameter(0)\n  %z = f32[] constant(0)\n  ROOT %r = f32[] reduce(%x, %z), dimensions={0}, to_apply=%sum\n}\n\n%sum (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n  ROOT %c = f32[] add(%a, %b)\n}\n";
    let m = accept_verified(callee_last);
    assert_eq!(
        (m.name.as_str(), m.comp_name(m.entry())),
        ("module_main", "main")
    );
    // Without ENTRY, the last computation is the entry, as in XLA.
    let unmarked = "sum {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}\nmain {\n  x = f32[4] parameter(0)\n  z = f32[] constant(0)\n  ROOT r = f32[] reduce(x, z), dimensions={0}, to_apply=sum\n}\n";
    let m = accept_verified(unmarked);
    assert_eq!(
        (m.name.as_str(), m.comp_name(m.entry())),
        ("module_main", "main")
    );
    // The last computation of the text, not one written inline inside it.
    let inline_last = "main {\n  x = f32[4] parameter(0)\n  z = f32[] constant(0)\n  ROOT r = f32[] reduce(x, z), dimensions={0}, to_apply={\n    a = f32[] parameter(0)\n    b = f32[] parameter(1)\n    ROOT c = f32[] add(a, b)\n  }\n}\n";
    let m = accept_verified(inline_last);
    assert_eq!(m.comp_name(m.entry()), "main");
}

#[test]
fn text_that_does_not_start_like_a_module_is_refused_at_its_start() {
    for (text, found) in [
        ("\u{0}\u{1}binary", "'\u{0}'"),
        ("\u{89}PNG\r\n", "'\u{89}'"),
        ("hello world\n", "'hello'"),
        ("{\"a\": 1}\n", "'{'"),
        ("x = f32[] parameter(0)\n", "'x'"),
        ("  \n// only a comment\n", "end of file"),
    ] {
        let e = parse_module(text).unwrap_err();
        let line = if text.starts_with(' ') { 3 } else { 1 };
        assert_eq!(
            (e.line, e.col, e.msg.as_str()),
            (
                line,
                1,
                format!("expected 'HloModule' or a computation, found {found}").as_str()
            ),
            "{text:?}"
        );
    }
}

#[test]
fn starts_like_module_decides_from_the_first_bytes() {
    for yes in [
        &b"HloModule m"[..],
        b"ENTRY e {",
        b"ENTRY\n",
        b"  // c\n/* x */ %add (a: f32[]) -> f32[] {",
        b"add {",
        b"HloModuleX {",
        b"a\n\n(",
    ] {
        assert_eq!(
            starts_like_module(yes),
            Some(true),
            "{:?}",
            String::from_utf8_lossy(yes)
        );
    }
    for no in [
        &b"\0"[..],
        b"hello world",
        b"x = f32[] parameter(0)",
        b"{\"a\": 1}",
        b"\x89PNG",
        b"y\ny\n",
        b"/x",
    ] {
        assert_eq!(
            starts_like_module(no),
            Some(false),
            "{:?}",
            String::from_utf8_lossy(no)
        );
    }
    // Too short to tell: a longer text could still be a module, or not.
    for open in [
        &b""[..],
        b"  \n",
        b"Hlo",
        b"HloModule",
        b"ENTRY",
        b"add",
        b"add  ",
        b"/",
        b"/* unclosed",
        b"// no newline",
    ] {
        assert_eq!(
            starts_like_module(open),
            None,
            "{:?}",
            String::from_utf8_lossy(open)
        );
    }
    // The parser refuses exactly the texts that do not start like a module.
    for text in [
        "HloModule m\nENTRY e {\n  ROOT x = f32[] parameter(0)\n}\n",
        "e {\n  ROOT x = f32[] parameter(0)\n}\n",
        "e (x: f32[]) -> f32[] {\n  ROOT x = f32[] parameter(0)\n}\n",
        "hello world\n",
        "ENTRY",
        "",
    ] {
        let refused = parse_module(text)
            .err()
            .is_some_and(|e| e.msg.starts_with("expected 'HloModule' or a computation"));
        assert_eq!(
            refused,
            starts_like_module(text.as_bytes()) != Some(true),
            "{text:?}"
        );
    }
}

// ---- 3. Nested instructions as operands ----

#[test]
fn operands_may_be_nested_instructions_named_opcode_anon() {
    same_as(
        "HloModule m\nENTRY e {\n  ROOT y = s32[] add(s32[] parameter(0), s32[] constant(1))\n}\n",
        "HloModule m\nENTRY e {\n  parameter.anon = s32[] parameter(0)\n  constant.anon = s32[] constant(1)\n  ROOT y = s32[] add(parameter.anon, constant.anon)\n}\n",
    );
    // Nested to any depth, with or without shapes, innermost first.
    same_as(
        "HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT y = add(p, f32[4] multiply(p, negate(p)))\n}\n",
        "HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  negate.anon = f32[4] negate(p)\n  multiply.anon = f32[4] multiply(p, negate.anon)\n  ROOT y = f32[4] add(p, multiply.anon)\n}\n",
    );
}

#[test]
fn operands_may_carry_their_shape() {
    same_as(
        "HloModule m\nENTRY e {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT z = f32[] add(f32[] x, f32[] y)\n}\n",
        "HloModule m\nENTRY e {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT z = f32[] add(x, y)\n}\n",
    );
    // With layouts and tuple shapes, as XLA's dumps write them.
    same_as(
        "HloModule m\nENTRY e {\n  x = f32[2,3]{1,0} parameter(0)\n  t = (f32[2,3]{1,0}) tuple(f32[2,3]{0,1} x)\n  ROOT z = f32[2,3]{1,0} get-tuple-element((f32[2,3]{1,0}) t), index=0\n}\n",
        "HloModule m\nENTRY e {\n  x = f32[2,3]{1,0} parameter(0)\n  t = (f32[2,3]{1,0}) tuple(x)\n  ROOT z = f32[2,3]{1,0} get-tuple-element(t), index=0\n}\n",
    );
}

#[test]
fn generated_names_skip_names_already_taken() {
    same_as(
        "HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  negate.anon = f32[4] negate(p)\n  ROOT y = add(negate.anon, negate(p))\n}\n",
        "HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  negate.anon = f32[4] negate(p)\n  negate.anon.1 = f32[4] negate(p)\n  ROOT y = f32[4] add(negate.anon, negate.anon.1)\n}\n",
    );
    // A later instruction of the same computation may not take a generated name (as in XLA).
    reject(
        "HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  y = f32[4] add(p, negate(p))\n  ROOT negate.anon = f32[4] negate(y)\n}\n",
        5,
        8,
        "duplicate instruction name 'negate.anon' (first defined at line 4)",
    );
}

#[test]
fn nested_instructions_take_no_attributes() {
    reject(
        "HloModule m\nENTRY e {\n  q = f32[] parameter(0)\n  ROOT y = f32[4] add(broadcast(q), dimensions={})\n}\n",
        4,
        47,
        "expected ',' between operands, found '='",
    );
}

#[test]
fn nested_instructions_keep_a_scheduled_module_in_order() {
    let m = accept_verified(
        "HloModule m, is_scheduled=true\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT y = f32[4] add(p, f32[4] negate(p))\n}\n",
    );
    let seq = m.schedule().unwrap().sequence(m.entry()).unwrap().to_vec();
    let names: Vec<&str> = seq.iter().map(|&i| m.name(i)).collect();
    assert_eq!(names, ["p", "negate.anon", "y"]);
}

#[test]
fn deeply_nested_instructions_do_not_overflow_the_stack() {
    let depth = 20_000;
    let text = format!(
        "HloModule m\nENTRY e {{\n  p = f32[4] parameter(0)\n  ROOT y = {}p{}\n}}\n",
        "negate(".repeat(depth),
        ")".repeat(depth)
    );
    let m = parse_module(&text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(m.num_live_insts(), depth + 1);
    assert_eq!(shape_of(&m, "y"), "f32[4]");
    assert_eq!(
        shape_of(&m, &format!("negate.anon.{}", depth - 2)),
        "f32[4]"
    );
}

// ---- 4. Older header and trailer syntax ----

#[test]
fn a_colon_after_the_module_name_is_accepted() {
    let plain = "HloModule m\nENTRY e {\n  ROOT x = f32[] parameter(0)\n}\n";
    same_as(
        "HloModule m:\nENTRY e {\n  ROOT x = f32[] parameter(0)\n}\n",
        plain,
    );
    let m = accept_verified(
        "HloModule m:, is_scheduled=true\nENTRY e {\n  ROOT x = f32[] parameter(0)\n}\n",
    );
    assert!(m.schedule().is_some());
    // Only right after the name, as in XLA.
    reject(
        "HloModule m :\nENTRY e {\n  ROOT x = f32[] parameter(0)\n}\n",
        1,
        13,
        "expected a computation name, found ':'",
    );
}

#[test]
fn a_computations_execution_thread_is_read_and_dropped() {
    let plain = "HloModule m\nENTRY e {\n  ROOT x = f32[] parameter(0)\n}\n";
    for thread in ["main", "host"] {
        same_as(
            &format!(
                "HloModule m\nENTRY e {{\n  ROOT x = f32[] parameter(0)\n}}, execution_thread=\"{thread}\"\n"
            ),
            plain,
        );
    }
    reject(
        "HloModule m\nENTRY e {\n  ROOT x = f32[] parameter(0)\n}, color=\"red\"\n",
        4,
        4,
        "unknown computation attribute 'color' (only execution_thread)",
    );
}

#[test]
fn module_attributes_xla_accepts_are_kept() {
    let text = "HloModule m, input_output_alias={ {0}: (0, {}, may-alias) }, buffer_donor={ (1, {}) }, alias_passthrough_params=true, replica_count=1, num_partitions=1, frontend_attributes={a=\"b c\"}, allow_spmd_sharding_propagation_to_parameters={true,false}, allow_spmd_sharding_propagation_to_output={true}, entry_computation_layout={(f32[], f32[])->f32[]}\nENTRY e {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT z = f32[] add(x, y)\n}\n";
    let m = accept_verified(text);
    let keys: Vec<&str> = m.header_attrs.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "input_output_alias",
            "buffer_donor",
            "alias_passthrough_params",
            "replica_count",
            "num_partitions",
            "frontend_attributes",
            "allow_spmd_sharding_propagation_to_parameters",
            "allow_spmd_sharding_propagation_to_output",
        ]
    );
    assert!(m.entry_layout.is_some());
}

// ---- 5. `broadcast` of a scalar without `dimensions=` ----

#[test]
fn broadcasting_a_scalar_needs_no_dimensions() {
    let explicit = "HloModule m\nENTRY e {\n  x = f32[] parameter(0)\n  ROOT z = f32[4] broadcast(x), dimensions={}\n}\n";
    same_as(
        "HloModule m\nENTRY e {\n  x = f32[] parameter(0)\n  ROOT z = f32[4] broadcast(x)\n}\n",
        explicit,
    );
    // The operand may come later, or have an inferred shape.
    same_as(
        "HloModule m\nENTRY e {\n  ROOT z = f32[4] broadcast(x)\n  x = f32[] parameter(0)\n}\n",
        "HloModule m\nENTRY e {\n  ROOT z = f32[4] broadcast(x), dimensions={}\n  x = f32[] parameter(0)\n}\n",
    );
    same_as(
        "HloModule m\nENTRY e {\n  x = f32[] parameter(0)\n  ROOT z = f32[2,2] broadcast(negate(x))\n}\n",
        "HloModule m\nENTRY e {\n  x = f32[] parameter(0)\n  negate.anon = f32[] negate(x)\n  ROOT z = f32[2,2] broadcast(negate.anon), dimensions={}\n}\n",
    );
    reject(
        "HloModule m\nENTRY e {\n  x = f32[4] parameter(0)\n  ROOT z = f32[3,4] broadcast(x)\n}\n",
        4,
        21,
        "broadcast 'z' needs dimensions=: it broadcasts 'x', which is not a scalar",
    );
}

/// Without a result shape, XLA reads a broadcast's `dimensions` as sizes to put before the
/// operand's dimensions (so only a scalar or empty `dimensions` makes a broadcast its verifier
/// accepts); the same here, and the verifier refuses the rest as XLA's does.
#[test]
fn a_shapeless_broadcast_reads_dimensions_as_xla_does() {
    same_as(
        "HloModule m\nENTRY e {\n  x = f32[] parameter(0)\n  ROOT z = broadcast(x)\n}\n",
        "HloModule m\nENTRY e {\n  x = f32[] parameter(0)\n  ROOT z = f32[] broadcast(x), dimensions={}\n}\n",
    );
    let m = accept(
        "HloModule m\nENTRY e {\n  r = f32[4] parameter(0)\n  ROOT b = broadcast(r), dimensions={0}\n}\n",
    );
    assert_eq!(shape_of(&m, "b"), "f32[0,4]");
    assert!(verify(&m).is_err());
}

// ---- 6. A scalar literal for an array constant ----

/// XLA's literal reader stores a lone scalar at the first element of a zero-filled literal
/// (its printout of `f32[5] constant(5)` is `constant({5, 0, 0, 0, 0})`), for every type.
#[test]
fn a_scalar_literal_fills_the_first_element_of_an_array_constant() {
    for (shape, scalar, explicit) in [
        ("f32[5]", "5", "{5, 0, 0, 0, 0}"),
        ("s32[2,3]", "7", "{ {7, 0, 0}, {0, 0, 0} }"),
        ("pred[3]", "true", "{true, false, false}"),
        ("bf16[3]", "1.5", "{1.5, 0, 0}"),
        ("u4[3]", "9", "{9, 0, 0}"),
        ("(f32[2], s32[])", "(3, 4)", "({3, 0}, 4)"),
    ] {
        same_as(
            &format!("HloModule m\nENTRY e {{\n  ROOT c = {shape} constant({scalar})\n}}\n"),
            &format!("HloModule m\nENTRY e {{\n  ROOT c = {shape} constant({explicit})\n}}\n"),
        );
    }
}

#[test]
fn a_scalar_literal_that_cannot_fill_its_constant_is_an_error() {
    let line = |shape: &str, lit: &str| {
        format!("HloModule m\nENTRY e {{\n  ROOT c = {shape} constant({lit})\n}}\n")
    };
    reject(
        &line("f32[0]", "5"),
        3,
        28,
        "a single value cannot be the literal of f32[0]: the shape has no elements",
    );
    reject(
        &line("s8[3]", "300"),
        3,
        27,
        "value 300 is out of range for s8",
    );
    // XLA refuses a complex scalar here too.
    reject(
        &line("c64[2]", "(1, 2)"),
        3,
        28,
        "expected '{' to open an array literal, found '('",
    );
    // Data the text does not bound is reserved under the memory ceiling before it is made.
    let e = parse_module(&line("s8[4000000000000000000]", "1")).unwrap_err();
    assert_eq!((e.line, e.col), (3, 45), "{e}");
    assert!(
        e.msg
            .starts_with("the constant at line 3 needs 4000000000000000000 bytes"),
        "{e}"
    );
}

// ---- 7. Computations inline in attributes ----

#[test]
fn an_inline_computation_is_named_underscore() {
    same_as(
        "HloModule m\nENTRY e {\n  x = f32[4] parameter(0)\n  z = f32[] constant(0)\n  ROOT y = f32[] reduce(x, z), dimensions={0}, to_apply={\n    a = f32[] parameter(0)\n    b = f32[] parameter(1)\n    ROOT c = f32[] add(a, b)\n  }\n}\n",
        "HloModule m\n_ {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}\nENTRY e {\n  x = f32[4] parameter(0)\n  z = f32[] constant(0)\n  ROOT y = f32[] reduce(x, z), dimensions={0}, to_apply=_\n}\n",
    );
}

#[test]
fn inline_computations_get_names_no_named_computation_has() {
    // `_` is taken by a computation defined after them: the inline ones are `_.1` and `_.2`.
    let m = accept_verified(
        "HloModule m
ENTRY e {
  x = s32[] parameter(0)
  ROOT w = s32[] while(x), condition={
    a = s32[] parameter(0)
    k = s32[] constant(10)
    ROOT c = pred[] compare(a, k), direction=LT
  }, body={
    a = s32[] parameter(0)
    ROOT c = s32[] call(a), to_apply=_
  }
}
_ {
  a = s32[] parameter(0)
  k = s32[] constant(1)
  ROOT c = s32[] add(a, k)
}
",
    );
    let w = inst(&m, "w");
    let called: Vec<&str> = m.called_comps(w).iter().map(|&c| m.comp_name(c)).collect();
    // Attributes in canonical order: condition, then body.
    assert_eq!(called, ["_.1", "_.2"]);
}

#[test]
fn inline_computations_may_appear_in_computation_lists() {
    same_as(
        "HloModule m
neg {
  a = f32[] parameter(0)
  ROOT c = f32[] negate(a)
}
ENTRY e {
  p = s32[] parameter(0)
  x = f32[] parameter(1)
  ROOT y = f32[] conditional(p, x, x, x), branch_computations={{
    a = f32[] parameter(0)
    ROOT c = f32[] exponential(a)
  }, neg, {
    a = f32[] parameter(0)
    ROOT c = f32[] sqrt(a)
  }}
}
",
        "HloModule m
neg {
  a = f32[] parameter(0)
  ROOT c = f32[] negate(a)
}
_ {
  a.1 = f32[] parameter(0)
  ROOT c.1 = f32[] exponential(a.1)
}
_.1 {
  a.2 = f32[] parameter(0)
  ROOT c.2 = f32[] sqrt(a.2)
}
ENTRY e {
  p = s32[] parameter(0)
  x = f32[] parameter(1)
  ROOT y = f32[] conditional(p, x, x, x), branch_computations={_, neg, _.1}
}
",
    );
}

/// An inline computation's names are its own: the enclosing computation's names resolve to the
/// enclosing instructions after it, and the inline instructions cannot use them.
#[test]
fn inline_computations_are_scoped() {
    same_as(
        "HloModule m
ENTRY e {
  a = f32[4] parameter(0)
  z = f32[] constant(0)
  r = f32[] reduce(a, z), dimensions={0}, to_apply={
    a = f32[] parameter(0)
    z = f32[] parameter(1)
    ROOT s = f32[] add(a, z)
  }
  ROOT t = (f32[4], f32[]) tuple(a, r)
}
",
        "HloModule m
_ {
  a.1 = f32[] parameter(0)
  z.1 = f32[] parameter(1)
  ROOT s = f32[] add(a.1, z.1)
}
ENTRY e {
  a = f32[4] parameter(0)
  z = f32[] constant(0)
  r = f32[] reduce(a, z), dimensions={0}, to_apply=_
  ROOT t = (f32[4], f32[]) tuple(a, r)
}
",
    );
    reject(
        "HloModule m\nENTRY e {\n  x = f32[4] parameter(0)\n  z = f32[] constant(0)\n  ROOT y = f32[] reduce(x, z), dimensions={0}, to_apply={\n    a = f32[] parameter(0)\n    b = f32[] parameter(1)\n    ROOT c = f32[] add(a, x)\n  }\n}\n",
        8,
        27,
        "operand 'x' is defined in another computation, not in the computation inline at line 5",
    );
    reject(
        "HloModule m\nENTRY e {\n  x = f32[4] parameter(0)\n  z = f32[] constant(0)\n  ROOT y = f32[] reduce(x, z), dimensions={0}, to_apply={\n    a = f32[] parameter(0)\n",
        7,
        1,
        "unexpected end of file: the computation inline at line 5 is not closed with '}'",
    );
}

#[test]
fn inline_computations_nest() {
    let depth = 2000;
    let mut text =
        String::from("HloModule m\nENTRY e {\n  p = f32[] parameter(0)\n  ROOT r = f32[] ");
    for _ in 0..depth {
        text.push_str("call(p), to_apply={\n p = f32[] parameter(0)\n ROOT r = f32[] ");
    }
    text.push_str("negate(p)\n");
    for _ in 0..depth {
        text.push_str("}\n");
    }
    text.push_str("}\n");
    let m = accept_verified(&text);
    assert_eq!(m.computations().len(), depth + 1);
    // Named in the order they were read: the outermost is `_`.
    let r = m.root(m.entry());
    assert_eq!(m.comp_name(m.called_comps(r)[0]), "_");
}

// ---- 8. Signature parameter lists ----

/// XLA reads a signature's parameter list and ignores it (its printout of this text has the
/// one parameter the body has); only the result is checked against the root.
#[test]
fn a_signature_may_list_parameters_the_body_does_not_have() {
    let explicit =
        "HloModule m\nENTRY e {\n  a = f32[] parameter(0)\n  ROOT c = f32[] negate(a)\n}\n";
    let m = same_as(
        "HloModule m\nENTRY e (a: f32[], b: f32[]) -> f32[] {\n  a = f32[] parameter(0)\n  ROOT c = f32[] negate(a)\n}\n",
        explicit,
    );
    assert_eq!(m.params(m.entry()).len(), 1);
    same_as(
        "HloModule m\nENTRY e (a: s32[2]) -> f32[] {\n  a = f32[] parameter(0)\n  ROOT c = f32[] negate(a)\n}\n",
        explicit,
    );
}

// ---- A negative u64 literal ----

/// XLA reads an integer literal as an i64 and casts it to the element type's unsigned
/// counterpart before the range check, so `u64[] constant(-1)` is 2^64 - 1 (XLA CPU's answer
/// through jaxlib 0.10.2: 18446744073709551615); a narrower unsigned type refuses it.
#[test]
fn a_negative_u64_literal_wraps_as_xla_reads_it() {
    same_as(
        "HloModule m\nENTRY e {\n  ROOT c = u64[2] constant({-1, -9223372036854775808})\n}\n",
        "HloModule m\nENTRY e {\n  ROOT c = u64[2] constant({18446744073709551615, 9223372036854775808})\n}\n",
    );
    reject(
        "HloModule m\nENTRY e {\n  ROOT c = u8[] constant(-1)\n}\n",
        3,
        26,
        "value -1 is out of range for u8",
    );
}

/// A `select` with a scalar predicate and array operands (XLA's shape inference accepts it:
/// the predicate picks a whole operand) reads with the predicate broadcast to the operands'
/// dimensions by a generated `broadcast`, also in a scheduled module (the broadcast runs just
/// before the select); a scalar select is left as written.
#[test]
fn a_scalar_select_predicate_is_broadcast() {
    for header in ["HloModule m", "HloModule m, is_scheduled=true"] {
        let text = format!(
            "{header}\n\nENTRY e {{\n  p = pred[] parameter(0)\n  a = f32[2,3] parameter(1)\n  \
             b = f32[2,3] parameter(2)\n  ROOT s = f32[2,3] select(p, a, b)\n}}\n"
        );
        let m = accept_verified(&text);
        let printed = print_module(&m);
        assert!(
            printed.contains("broadcast.anon = pred[2,3] broadcast(p), dimensions={}"),
            "{printed}"
        );
        assert!(
            printed.contains("select(broadcast.anon, a, b)"),
            "{printed}"
        );
    }
    let scalar =
        "HloModule m\n\nENTRY e {\n  p = pred[] parameter(0)\n  a = f32[] parameter(1)\n  \
                  ROOT s = f32[] select(p, a, a)\n}\n";
    let printed = print_module(&accept_verified(scalar));
    assert!(!printed.contains("broadcast"), "{printed}");
}
