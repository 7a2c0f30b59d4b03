//! Malformed HLO text: each case asserts the exact line, column and message of the error.
//!
//! Parser errors come from `parse_module`; the verifier cases (shape mismatches, cycles, operand
//! counts, ...) live in `verify_errors.rs` beside this file.

use axle_ir::parse_module;

/// Parses `text` and asserts it fails at `line:col` with exactly `msg`.
fn check(text: &str, line: u32, col: u32, msg: &str) {
    match parse_module(text) {
        Ok(_) => panic!("expected a parse error, but the text parsed:\n{text}"),
        Err(e) => {
            assert_eq!(
                (e.line, e.col, e.msg.as_str()),
                (line, col, msg),
                "\nrendered:\n{}",
                e.render("test.hlo")
            );
            // The rendered form carries the source line and a caret under the column.
            let r = e.render("f.hlo");
            assert!(
                r.starts_with(&format!("f.hlo:{line}:{col}: error: {msg}\n")),
                "{r}"
            );
            let caret_line = r.lines().nth(2).unwrap_or("");
            assert_eq!(caret_line.len(), col as usize, "caret misplaced:\n{r}");
        }
    }
}

const HEAD: &str = "HloModule m\n\n";

fn body(lines: &str) -> String {
    format!("{HEAD}ENTRY main {{\n{lines}\n}}\n")
}

macro_rules! cases {
    ($($name:ident: $text:expr => ($line:expr, $col:expr, $msg:expr);)*) => {
        $(#[test] fn $name() { check(&$text, $line, $col, $msg); })*
    };
}

cases! {
    replica_groups_overlap: body("  p = f32[4]{0} parameter(0)\n  ROOT r = f32[4]{0} all-gather(p), replica_groups={{0,1},{1,2}}, dimensions={0}")
        => (5, 52, "replica groups {{0,1},{1,2}}: id 1 is in two groups");
    replica_groups_iota_count: body("  p = f32[4]{0} parameter(0)\n  ROOT r = f32[4]{0} all-to-all(p), replica_groups=[3,2]<=[8], dimensions={0}")
        => (5, 52, "replica groups [3,2]<=[8]: 3 groups of 2 devices do not hold the 8 devices of the reshape dimensions");
    replica_groups_iota_transpose: body("  p = f32[4]{0} parameter(0)\n  ROOT r = f32[4]{0} all-to-all(p), replica_groups=[4,2]<=[2,4]T(1,1), dimensions={0}")
        => (5, 52, "replica groups [4,2]<=[2,4]T(1,1): the transpose must permute the 2 reshape dimensions");
    replica_groups_iota_syntax: body("  p = f32[4]{0} parameter(0)\n  ROOT r = f32[4]{0} all-to-all(p), replica_groups=[4,2]=[8], dimensions={0}")
        => (5, 57, "expected '<=' in the iota form of replica groups, found '='");
    replica_groups_iota_head: body("  p = f32[4]{0} parameter(0)\n  ROOT r = f32[4]{0} all-to-all(p), replica_groups=[8]<=[8], dimensions={0}")
        => (5, 52, "the iota form of replica groups starts with [group count,group size]");
    source_target_pairs_triple: body("  p = f32[4]{0} parameter(0)\n  ROOT r = f32[4]{0} collective-permute(p), source_target_pairs={{0,1,2}}")
        => (5, 65, "invalid value for attribute 'source_target_pairs': expected pairs of non-negative ids like {{0,1},{1,0}}");
    num_partitions_zero: "HloModule m, num_partitions=0\n\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n"
        => (1, 29, "num_partitions must be a positive 32-bit integer, found '0'");
    replica_count_word: "HloModule m, replica_count=two\n\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n"
        => (1, 28, "replica_count must be a positive 32-bit integer, found 'two'");
    empty_file: "" => (1, 1, "expected 'HloModule' or a computation, found end of file");
    not_a_module: "HloModul x\n" => (1, 1, "expected 'HloModule' or a computation, found 'HloModul'");
    missing_module_name: "HloModule \n" => (2, 1, "expected a module name, found end of file");
    no_computations: "HloModule m\n" => (2, 1, "the module has no computations");
    truncated_in_computation: format!("{HEAD}ENTRY main {{\n  p = f32[4]{{0}} parameter(0)\n")
        => (5, 1, "unexpected end of file: computation 'main' is not closed with '}'");
    truncated_mid_instruction: format!("{HEAD}ENTRY main {{\n  p = f32[4]{{0}} parame")
        => (4, 17, "unknown opcode 'parame'");
    truncated_in_shape: format!("{HEAD}ENTRY main {{\n  p = f32[4")
        => (4, 12, "expected ',' between dimension sizes, found end of file");
    unknown_opcode: body("  p = f32[4]{0} parameter(0)\n  ROOT r = f32[4]{0} frobnicate(p)")
        => (5, 22, "unknown opcode 'frobnicate'");
    unknown_element_type: body("  p = f31[4]{0} parameter(0)") => (4, 7, "unknown element type 'f31'");
    shape_missing_bracket: body("  p = f32[4 parameter(0)")
        => (4, 13, "expected ',' between dimension sizes, found 'parameter'");
    negative_dimension: body("  p = f32[-1]{0} parameter(0)") => (4, 11, "negative dimension size -1");
    shape_not_a_shape: body("  p = 42 parameter(0)") => (4, 7, "expected a shape or an opcode, found '42'");
    token_with_dims: body("  p = token[3] parameter(0)") => (4, 7, "token shapes take no dimensions");
    layout_not_permutation: body("  p = f32[2,3]{2,0} parameter(0)")
        => (4, 15, "layout {2,0} is not a permutation of 0..2");
    layout_wrong_rank: body("  p = f32[2,3]{0} parameter(0)")
        => (4, 15, "layout has 1 dimensions but the shape has rank 2");
    layout_repeated_dim: body("  p = f32[2,3]{0,0} parameter(0)")
        => (4, 15, "layout {0,0} is not a permutation of 0..2");
    layout_garbage: body("  p = f32[2,3]{1;0} parameter(0)")
        => (4, 17, "expected ',' or '}' in layout, found ';'");
    tuple_shape_unclosed: body("  p = (f32[2], s32[] parameter(0)")
        => (4, 22, "expected ',' between tuple element shapes, found 'parameter'");
    undefined_operand: body("  p = f32[4]{0} parameter(0)\n  ROOT r = f32[4]{0} add(p, q)")
        => (5, 29, "use of undefined instruction 'q'");
    duplicate_instruction_name: body("  p = f32[4]{0} parameter(0)\n  p = f32[4]{0} parameter(1)")
        => (5, 3, "duplicate instruction name 'p' (first defined at line 4)");
    duplicate_computation_name: format!("{HEAD}c {{\n  ROOT a = f32[] parameter(0)\n}}\n\nc {{\n  ROOT b = f32[] parameter(0)\n}}\n")
        => (7, 1, "duplicate computation name 'c'");
    unknown_computation: body("  p = f32[4]{0} parameter(0)\n  z = f32[] constant(0)\n  ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=nowhere")
        => (6, 57, "unknown computation 'nowhere'");
    operand_in_other_computation: format!("{HEAD}c {{\n  ROOT a = f32[] parameter(0)\n}}\n\nENTRY main {{\n  ROOT b = f32[] negate(a)\n}}\n")
        => (8, 25, "operand 'a' is defined in another computation, not in 'main'");
    bad_direction: body("  p = f32[4]{0} parameter(0)\n  ROOT r = pred[4]{0} compare(p, p), direction=XX")
        => (5, 48, "invalid value for attribute 'direction': expected one of EQ, NE, LT, LE, GT, GE");
    bad_comparison_type: body("  p = f32[4]{0} parameter(0)\n  ROOT r = pred[4]{0} compare(p, p), direction=LT, type=FUZZY")
        => (5, 57, "invalid value for attribute 'type': expected one of FLOAT, TOTALORDER, SIGNED, UNSIGNED");
    bad_int_attribute: body("  p = (f32[4]{0}) parameter(0)\n  ROOT r = f32[4]{0} get-tuple-element(p), index=abc")
        => (5, 50, "invalid value for attribute 'index': expected an integer");
    bad_bool_attribute: body("  p = f32[4]{0} parameter(0)\n  ROOT r = f32[4]{0} sort(p), dimensions={0}, is_stable=maybe")
        => (5, 57, "invalid value for attribute 'is_stable': expected true or false");
    bad_fusion_kind: body("  p = f32[4]{0} parameter(0)\n  ROOT r = f32[4]{0} fusion(p), kind=kSideways, calls=c")
        => (5, 38, "invalid value for attribute 'kind': expected one of kLoop, kInput, kOutput, kCustom");
    unknown_window_field: body("  p = f32[4]{0} parameter(0)\n  z = f32[] constant(0)\n  ROOT r = f32[4]{0} reduce-window(p, z), window={size=3 wobble=1}, to_apply=c")
        => (6, 58, "unknown window field 'wobble'");
    window_rank_mismatch: body("  p = f32[4,4]{1,0} parameter(0)\n  z = f32[] constant(0)\n  ROOT r = f32[4,4]{1,0} reduce-window(p, z), window={size=3x3 stride=1}, to_apply=c")
        => (6, 64, "window field 'stride' has 1 dimensions but the window has 2");
    bad_window_pad: body("  p = f32[4]{0} parameter(0)\n  z = f32[] constant(0)\n  ROOT r = f32[4]{0} reduce-window(p, z), window={size=3 pad=1}, to_apply=c")
        => (6, 58, "invalid window field 'pad=1'");
    bad_dim_labels: body("  a = f32[1,4,4,1]{3,2,1,0} parameter(0)\n  ROOT r = f32[1,4,4,1]{3,2,1,0} convolution(a, a), window={size=1x1}, dim_labels=b01f_01xo->b01f")
        => (5, 83, "invalid value for attribute 'dim_labels': expected dimension labels like b01f_01io->b01f");
    bad_padding: body("  a = f32[4]{0} parameter(0)\n  z = f32[] constant(0)\n  ROOT r = f32[6]{0} pad(a, z), padding=1x2")
        => (6, 41, "invalid value for attribute 'padding': expected padding like 0_0x1_2_1");
    bad_slice: body("  a = f32[4]{0} parameter(0)\n  ROOT r = f32[2]{0} slice(a), slice={[0:2}")
        => (5, 43, "expected ']' to close a slice dimension, found '}'");
    duplicate_attribute: body("  a = f32[4]{0} parameter(0)\n  ROOT r = f32[4]{0} transpose(a), dimensions={0}, dimensions={0}")
        => (5, 51, "duplicate attribute 'dimensions'");
    literal_too_few_elements: body("  ROOT c = f32[3]{0} constant({1, 2})")
        => (4, 37, "literal dimension 0 has 2 elements but the shape says 3");
    literal_bad_integer: body("  ROOT c = s32[] constant(1.5)") => (4, 27, "invalid s32 value '1.5'");
    literal_out_of_range: body("  ROOT c = s8[] constant(300)") => (4, 26, "value 300 is out of range for s8");
    literal_bad_pred: body("  ROOT c = pred[] constant(2)")
        => (4, 28, "expected a pred value (true or false), found '2'");
    literal_bad_complex: body("  ROOT c = c64[] constant((1 2))")
        => (4, 30, "expected ',' between the parts of a complex value, found '2'");
    unterminated_string: body("  ROOT c = f32[] constant(1), metadata={op_name=\"abc}")
        => (4, 49, "unterminated string");
    unbalanced_backend_config: format!("{HEAD}ENTRY main {{\n  ROOT c = f32[] constant(1), backend_config={{\"a\":[1}}\n")
        => (4, 46, "unbalanced brackets in attribute value");
    missing_equals: body("  p f32[4]{0} parameter(0)") => (4, 5, "expected '=' after the instruction name, found 'f32'");
    missing_paren_after_opcode: body("  p = f32[4]{0} parameter 0") => (4, 27, "expected '(' after the opcode, found '0'");
    missing_comma_between_operands: body("  p = f32[4]{0} parameter(0)\n  ROOT r = f32[4]{0} add(p p)")
        => (5, 28, "expected ',' between operands, found 'p'");
    second_root: body("  ROOT p = f32[4]{0} parameter(0)\n  ROOT q = f32[4]{0} negate(p)")
        => (5, 3, "computation 'main' has a second ROOT (the first is at line 4)");
    second_entry: format!("{HEAD}ENTRY a {{\n  ROOT x = f32[] parameter(0)\n}}\n\nENTRY b {{\n  ROOT y = f32[] parameter(0)\n}}\n")
        => (7, 1, "second ENTRY computation (the first is at line 3)");
    empty_computation: format!("{HEAD}ENTRY main {{\n}}\n") => (3, 7, "computation 'main' has no instructions");
    negative_parameter_number: body("  ROOT p = f32[4]{0} parameter(-1)") => (4, 32, "negative parameter number -1");
    signature_result_mismatch: format!("{HEAD}ENTRY main (a: f32[4]) -> s32[4] {{\n  ROOT a = f32[4]{{0}} parameter(0)\n}}\n")
        => (3, 27, "signature's result shape differs from the root of 'main'");
    unknown_control_predecessor: body("  p = f32[4]{0} parameter(0)\n  ROOT r = f32[4]{0} negate(p), control-predecessors={ghost}")
        => (5, 55, "unknown instruction 'ghost'");
    entry_layout_missing_arrow: "HloModule m, entry_computation_layout={(f32[4]{0}) f32[4]{0}}\n"
        => (1, 52, "expected '->', found 'f32'");
}

#[test]
fn errors_never_leave_partial_output() {
    // A parse error is a value: no module comes back at all.
    assert!(parse_module("HloModule m\nENTRY e {\n  ROOT x = f32[] bogus()\n}\n").is_err());
}

/// A backslash before a character of several bytes escapes that whole character (the parse
/// fuzzer found a panic: the escape stepped one byte into the character), and a backslash at
/// the very end is an unterminated string, not a panic.
#[test]
fn escapes_before_multibyte_characters() {
    let text = body("  ROOT p = f32[] parameter(0), metadata={op_name=\"\\Ί\\é\"}");
    let m = parse_module(&text).expect("an escaped multi-byte character parses");
    let printed = axle_ir::print_module(&m);
    assert!(printed.contains("parameter(0)"), "{printed}");
    check(
        &format!("{HEAD}ENTRY main {{\n  ROOT p = f32[] parameter(0), metadata={{op_name=\"\\"),
        4,
        50,
        "unterminated string",
    );
}
