//! quickcheck: no mutation of real HLO text makes the parser, or the verifier and the printer on
//! what it accepts, panic. Mutations: byte flips, truncations, deleted, duplicated and swapped lines, and splices
//! of random tokens, over every corpus file.
//!
//! And whole generated modules with hostile shapes ([`axle_ir::hostile`]: zero, huge,
//! overflowing, bounded and unbounded dynamic dimensions, deep tuples, mismatched reducer types)
//! through the parser, the verifier, the runnable check and the printer: no panic, no abort, and
//! what verifies prints to text that parses and verifies again. (The evaluator and the `cpu`
//! backend get the same modules in the root crate's `tests/hostile_fuzz.rs`.)

mod common;

use axle_ir::hostile::MUTATION_TOKENS as TOKENS;
use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult};

#[derive(Clone, Debug)]
enum Mutation {
    FlipByte(usize, u8),
    Truncate(usize),
    DeleteLine(usize),
    DuplicateLine(usize),
    SwapLines(usize, usize),
    InsertToken(usize, u8),
}

impl Arbitrary for Mutation {
    fn arbitrary(g: &mut Gen) -> Self {
        let a = usize::arbitrary(g);
        let b = usize::arbitrary(g);
        match u8::arbitrary(g) % 6 {
            0 => Mutation::FlipByte(a, u8::arbitrary(g)),
            1 => Mutation::Truncate(a),
            2 => Mutation::DeleteLine(a),
            3 => Mutation::DuplicateLine(a),
            4 => Mutation::SwapLines(a, b),
            _ => Mutation::InsertToken(a, u8::arbitrary(g)),
        }
    }
}

fn apply(text: &str, muts: &[Mutation]) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for m in muts {
        if bytes.is_empty() {
            break;
        }
        let n = bytes.len();
        match m {
            Mutation::FlipByte(i, v) => bytes[i % n] = *v,
            Mutation::Truncate(i) => bytes.truncate(i % n),
            Mutation::InsertToken(i, t) => {
                let tok = TOKENS[*t as usize % TOKENS.len()].as_bytes();
                let at = i % n;
                bytes.splice(at..at, tok.iter().copied());
            }
            Mutation::DeleteLine(i) | Mutation::DuplicateLine(i) | Mutation::SwapLines(i, _) => {
                let s = String::from_utf8_lossy(&bytes).to_string();
                let mut lines: Vec<&str> = s.split('\n').collect();
                let k = i % lines.len();
                match m {
                    Mutation::DeleteLine(_) => {
                        lines.remove(k);
                    }
                    Mutation::DuplicateLine(_) => lines.insert(k, lines[k]),
                    Mutation::SwapLines(_, j) => {
                        let j = j % lines.len();
                        lines.swap(k, j);
                    }
                    _ => unreachable!(),
                }
                bytes = lines.join("\n").into_bytes();
            }
        }
    }
    // The parser takes &str: invalid UTF-8 is rejected before it, by the caller.
    String::from_utf8_lossy(&bytes).to_string()
}

fn corpus_texts() -> &'static [String] {
    static FILES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    FILES.get_or_init(|| {
        common::all_hlo_files()
            .into_iter()
            .filter(|p| {
                let n = p.to_string_lossy();
                n.contains("/corpus/")
                    && std::fs::metadata(p)
                        .map(|m| m.len() < 40_000)
                        .unwrap_or(false)
            })
            .map(|p| common::read_text(&p))
            .collect()
    })
}

fn prop(file: usize, muts: Vec<Mutation>) -> TestResult {
    let files = corpus_texts();
    let text = apply(&files[file % files.len()], &muts);
    // Any result is fine; a panic fails the property.
    if let Ok(m) = axle_ir::parse_module(&text) {
        let printed = axle_ir::print_module(&m);
        // What parses must print to text that parses again.
        if let Err(e) = axle_ir::parse_module(&printed) {
            return TestResult::error(format!("printed text does not parse: {e}\n{printed}"));
        }
    }
    TestResult::passed()
}

#[test]
fn mutated_corpus_text_never_panics() {
    assert!(corpus_texts().len() > 50);
    QuickCheck::new()
        .tests(3000)
        .quickcheck(prop as fn(usize, Vec<Mutation>) -> TestResult);
}

fn hostile_prop(h: axle_ir::hostile::HostileModule) -> TestResult {
    let Ok(m) = axle_ir::parse_module(&h.text) else {
        return TestResult::passed();
    };
    if axle_ir::verify::verify(&m).is_err() {
        return TestResult::passed();
    }
    let _ = axle_ir::check_runnable(&m);
    let printed = axle_ir::print_module(&m);
    match axle_ir::parse_module(&printed) {
        Ok(again) => match axle_ir::verify::verify(&again) {
            Ok(()) => TestResult::passed(),
            Err(e) => TestResult::error(format!("printed text does not verify: {e}\n{printed}")),
        },
        Err(e) => TestResult::error(format!("printed text does not parse: {e}\n{printed}")),
    }
}

#[test]
fn hostile_generated_modules_never_panic() {
    // The generator must reach the verifier's success path, not only its errors.
    let mut g = quickcheck::Gen::new(20);
    let verified = (0..200)
        .filter(|_| {
            let h = <axle_ir::hostile::HostileModule as Arbitrary>::arbitrary(&mut g);
            axle_ir::parse_module(&h.text).is_ok_and(|m| axle_ir::verify::verify(&m).is_ok())
        })
        .count();
    assert!(
        verified >= 20,
        "only {verified} of 200 generated modules verify"
    );
    QuickCheck::new()
        .tests(1500)
        .quickcheck(hostile_prop as fn(axle_ir::hostile::HostileModule) -> TestResult);
}
