//! Verifier filetests: `tests/filetests/verify/*.hlo`, each error expected as a trailing
//! `// ERROR: <text>` comment on the line it is reported at (errors without a source location,
//! about the module as a whole, on the `HloModule` line). Every reported error must be expected
//! and every expected error reported.

use axle_ir::{parse_module, verify};
use std::path::PathBuf;

#[test]
fn verify_filetests() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/filetests/verify");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the filetests directory")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "hlo"))
        .collect();
    files.sort();
    assert!(files.len() >= 3, "found {} filetests", files.len());
    let mut failures = Vec::new();
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(f).expect("readable");
        let header = text
            .lines()
            .position(|l| l.starts_with("HloModule"))
            .map_or(1, |i| i as u32 + 1);
        let mut expected: Vec<(u32, String)> = text
            .lines()
            .enumerate()
            .filter_map(|(i, l)| {
                let at = l.find("// ERROR: ")?;
                Some((
                    i as u32 + 1,
                    l[at + "// ERROR: ".len()..].trim().to_string(),
                ))
            })
            .collect();
        let m = match parse_module(&text) {
            Ok(m) => m,
            Err(e) => {
                failures.push(e.render(&name));
                continue;
            }
        };
        let errors = match verify(&m) {
            Ok(()) => Vec::new(),
            Err(e) => e.errors,
        };
        for e in &errors {
            let line = e.loc.map_or(header, |l| l.line);
            match expected
                .iter()
                .position(|(l, msg)| *l == line && e.message.contains(msg.as_str()))
            {
                Some(k) => {
                    expected.remove(k);
                }
                None => failures.push(format!("{name}:{line}: unexpected: {e}")),
            }
        }
        for (line, msg) in expected {
            failures.push(format!("{name}:{line}: expected error not reported: {msg}"));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
