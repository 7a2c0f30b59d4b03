//! The reader against the real producer: `tests/data/NAME.pb` are `HloModuleProto`s serialized
//! by XLA itself (jaxlib 0.10.2, `tests/data/gen_fixtures.py`) from corpus texts and from
//! `tests/data/literals.hlo`, `tests/data/mulhi.hlo`, `tests/data/psum_scan.hlo` and
//! `tests/data/dot_algorithms.hlo`. Each must read into the module the text
//! parser builds from the same text:
//! - structurally: XLA keeps names but orders instructions (and computations) its own way, so
//!   the printed modules are compared computation by computation as sets of instruction lines,
//!   with the same header (`entry_computation_layout`; the other header attributes are module
//!   configuration, which an `HloModuleProto` does not carry);
//! - by value: the reference evaluator runs both on the corpus case's inputs (none for
//!   `literals`), and every output must be bitwise equal.
//!
//! One more trial proves the comparison can fail: the `literals` fixture against a text with
//! one constant changed.

use std::path::{Path, PathBuf};

use axle_analysis::eval::evaluate;
use axle_hlo_proto::read_module;
use axle_ir::{parse_module, print_module, Literal, Module};
use libtest_mimic::{Arguments, Failed, Trial};

/// (fixture, corpus file or `None` for `tests/data/NAME.hlo`, corpus case for inputs).
const FIXTURES: &[(&str, Option<&str>, Option<&str>)] = &[
    (
        "conv_nhwc_stride",
        Some("conv_nhwc_stride.hlo"),
        Some("conv_nhwc_stride"),
    ),
    (
        "conv_nchw_depthwise_dilated",
        Some("conv_nchw_depthwise_dilated.hlo"),
        Some("conv_nchw_depthwise_dilated"),
    ),
    (
        "dot_general_batch",
        Some("dot_general_batch.hlo"),
        Some("dot_general_batch"),
    ),
    (
        "gather_embedding",
        Some("gather_embedding.hlo"),
        Some("gather_embedding"),
    ),
    (
        "scatter_add_set",
        Some("scatter_add_set.hlo"),
        Some("scatter_add_set"),
    ),
    (
        "while_collatz",
        Some("while_collatz.hlo"),
        Some("while_collatz"),
    ),
    ("cond_switch", Some("cond_switch.hlo"), Some("cond_switch")),
    (
        "argmax_multi_reduce",
        Some("argmax_multi_reduce.hlo"),
        Some("argmax_multi_reduce"),
    ),
    (
        "sort_multi_operand",
        Some("sort_multi_operand.hlo"),
        Some("sort_multi_operand"),
    ),
    ("bf16_mlp", Some("bf16_mlp.hlo"), Some("bf16_mlp")),
    (
        "maxpool_grad",
        Some("maxpool_grad.hlo"),
        Some("maxpool_grad"),
    ),
    (
        "topk_logsumexp_opt",
        Some("topk_logsumexp.opt.hlo"),
        Some("topk_logsumexp"),
    ),
    ("literals", None, None),
    ("mulhi", None, None),
    ("psum_scan", None, None),
    ("dot_algorithms", None, None),
];

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

/// The printed module as comparable structure: the header's `entry_computation_layout`, and
/// per computation (by name, ENTRY marked) its sorted instruction lines.
fn structure(m: &Module) -> Vec<String> {
    let text = print_module(m);
    let mut out = Vec::new();
    let mut lines = text.lines();
    let header = lines.next().unwrap_or_default();
    let layout = header
        .split(", ")
        .find(|a| a.starts_with("entry_computation_layout="))
        .unwrap_or("");
    out.push(format!("header: {layout}"));
    let mut block: Vec<String> = Vec::new();
    let mut comps: Vec<String> = Vec::new();
    for l in lines {
        if l.is_empty() {
            continue;
        }
        if l == "}" {
            block[1..].sort();
            comps.push(block.join("\n"));
            block.clear();
        } else {
            block.push(l.to_string());
        }
    }
    comps.sort();
    out.extend(comps);
    out
}

fn check(name: &str, text: &str, case: Option<&str>) -> Result<(), Failed> {
    let bytes = std::fs::read(data_dir().join(format!("{name}.pb")))?;
    let from_proto = read_module(&bytes)?;
    let from_text = parse_module(text).map_err(|e| e.render(name))?;
    let (a, b) = (structure(&from_text), structure(&from_proto));
    if a != b {
        let diff = a
            .iter()
            .zip(&b)
            .find(|(x, y)| x != y)
            .map(|(x, y)| format!("text:\n{x}\nproto:\n{y}"))
            .unwrap_or_else(|| format!("{} and {} computations", a.len(), b.len()));
        return Err(format!("structure differs:\n{diff}").into());
    }
    let args: Vec<Literal> = match case {
        Some(case) => {
            let dir = axle_testkit::shared_dir().join("corpus");
            let cases = axle_testkit::manifest_cases(&dir);
            let c = cases
                .iter()
                .find(|c| c["name"] == case)
                .ok_or_else(|| format!("no corpus case {case}"))?;
            axle_testkit::inputs(&dir, c)?
        }
        None => Vec::new(),
    };
    // The evaluator runs no collectives (a module with one is compared by structure alone).
    if text.contains("all-reduce(") {
        return Ok(());
    }
    let want = evaluate(&from_text, &args).map_err(|e| format!("text: {e}"))?;
    let got = evaluate(&from_proto, &args).map_err(|e| format!("proto: {e}"))?;
    if axle_testkit::leaves(&want) != axle_testkit::leaves(&got) {
        return Err("the evaluator's results differ".into());
    }
    Ok(())
}

fn main() {
    let args = Arguments::from_args();
    let corpus = axle_testkit::shared_dir().join("corpus");
    let mut trials = Vec::new();
    for &(name, file, case) in FIXTURES {
        let path = match file {
            Some(f) => corpus.join(f),
            None => data_dir().join(format!("{name}.hlo")),
        };
        trials.push(Trial::test(name, move || {
            let text =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            check(name, &text, case)
        }));
    }
    trials.push(Trial::test("changed_text_is_noticed", || {
        let text = std::fs::read_to_string(data_dir().join("literals.hlo"))?;
        let changed = text.replace("constant({1, -2, 3, 7, -8})", "constant({1, -2, 3, 7, -7})");
        assert_ne!(changed, text, "the fixture text changed");
        match check("literals", &changed, None) {
            Err(_) => Ok(()),
            Ok(()) => Err("a changed constant compares equal".into()),
        }
    }));
    libtest_mimic::run(&args, trials).exit();
}
