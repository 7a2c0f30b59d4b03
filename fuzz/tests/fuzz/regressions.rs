//! Every minimized fuzz finding in `fuzz/regressions/` replays clean: each `.hlo` file starts
//! with a `// campaign: --target T [--passes P] [--input-seed S]` line, the arguments of the
//! campaign's `--replay` that reproduced the bug, and is checked by that target.

use std::path::Path;

use axle_fuzz::{Outcome, Target};

/// The replay arguments of a regression file's `// campaign:` line.
fn replay_args(text: &str) -> Option<(Target, String, u64)> {
    let line = text.lines().next()?.strip_prefix("// campaign:")?;
    let mut target = None;
    let mut passes = "dce".to_string();
    let mut seed = 0;
    let mut rest = line.trim();
    while let Some((flag, tail)) = rest.split_once(' ') {
        let tail = tail.trim_start();
        let (value, next) = if let Some(q) = tail.strip_prefix('\'') {
            let end = q.find('\'')?;
            (&q[..end], &q[end + 1..])
        } else {
            tail.split_once(' ').unwrap_or((tail, ""))
        };
        match flag {
            "--target" => {
                target = Some(match value {
                    "pipeline" => Target::Pipeline,
                    "cpu" => Target::Cpu,
                    "nvptx-sim" => Target::NvptxSim,
                    _ => return None,
                })
            }
            "--passes" => passes = value.to_string(),
            "--input-seed" => seed = value.parse().ok()?,
            _ => return None,
        }
        rest = next.trim();
    }
    Some((target?, passes, seed))
}

#[test]
fn regressions_replay_clean() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("fuzz/regressions exists")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "hlo"))
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "no regression files in {}",
        dir.display()
    );
    let mut failures = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("readable");
        let Some((target, passes, seed)) = replay_args(&text) else {
            failures.push(format!(
                "{}: no valid `// campaign:` first line",
                f.display()
            ));
            continue;
        };
        let m = match axle::ir::parse_module(&text) {
            Ok(m) => m,
            Err(e) => {
                failures.push(e.render(&f.display().to_string()));
                continue;
            }
        };
        let outcome = match target {
            Target::Pipeline => {
                axle_fuzz::pipeline::check_module(&m, &passes, seed, axle::passes::registry())
                    .into()
            }
            Target::NvptxSim => axle_fuzz::nvptx_sim::check_module(&m, seed),
            _ => axle_fuzz::cpu::check_module(&m, seed),
        };
        if let Outcome::Fail(e) = outcome {
            failures.push(format!("{}: {e}", f.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
