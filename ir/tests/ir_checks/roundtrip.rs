//! Every HLO file in the shared corpus and baseline (gzipped 100k/300k graphs included) parses and
//! verifies clean, and printing is a fixed point: print(parse(print(parse(text)))) ==
//! print(parse(text)), with the instruction count unchanged.

mod common;

use axle_ir::{parse_module, print_module, verify};

#[test]
fn corpus_and_baseline_round_trip() {
    let files = common::all_hlo_files();
    assert!(
        files.len() >= 100,
        "expected the shared corpus, found {} files",
        files.len()
    );
    let mut failures = Vec::new();
    for f in &files {
        let text = common::read_text(f);
        let m = match parse_module(&text) {
            Ok(m) => m,
            Err(e) => {
                failures.push(e.render(&f.display().to_string()));
                continue;
            }
        };
        if let Err(errs) = verify(&m) {
            failures.push(format!("{}: does not verify:\n{errs}", f.display()));
            continue;
        }
        let printed = print_module(&m);
        let m2 = match parse_module(&printed) {
            Ok(m) => m,
            Err(e) => {
                failures.push(format!(
                    "reparse of printed {}:\n{}",
                    f.display(),
                    e.render("printed")
                ));
                continue;
            }
        };
        let printed2 = print_module(&m2);
        if printed != printed2 {
            let line = printed
                .lines()
                .zip(printed2.lines())
                .position(|(a, b)| a != b);
            failures.push(format!(
                "{}: print is not a fixed point (first differing line {line:?})",
                f.display()
            ));
        }
        if m.num_live_insts() != m2.num_live_insts() {
            failures.push(format!(
                "{}: {} instructions, {} after the round trip",
                f.display(),
                m.num_live_insts(),
                m2.num_live_insts()
            ));
        }
        let n_text = text
            .lines()
            .filter(|l| {
                l.contains(" = ")
                    && l.trim_start()
                        .starts_with(|c: char| c == '%' || c.is_alphanumeric())
                    && !l.trim_start().starts_with("HloModule")
            })
            .count();
        if n_text != m.num_live_insts() {
            failures.push(format!(
                "{}: {} instruction lines but {} instructions parsed",
                f.display(),
                n_text,
                m.num_live_insts()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} files failed:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}
