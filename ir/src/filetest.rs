//! Filetests: HLO text in, a pipeline, HLO text out (DESIGN §6).
//!
//! A filetest is an `.hlo` file with directives in `//` comments:
//!
//! ```text
//! // RUN: fixpoint(max=4)[algsimp,dce]
//! // CHECK: ROOT [[R:[a-z.0-9]+]] = f32[4]{0} parameter(0)
//! // CHECK-NOT: multiply
//! HloModule m
//! ENTRY main { ... }
//! // EXPECT:
//! // HloModule m
//! // ...
//! ```
//!
//! - `// RUN: PIPELINE` (once): the pipeline to run.
//! - `// CHECK: PAT`: a line at or after the previous match matches `PAT`;
//!   `// CHECK-NEXT: PAT`: the line right after the previous match does; `// CHECK-NOT: PAT`: no
//!   line between the previous and the next positive match (or the end) does. In a pattern,
//!   `{{re}}` is a regular expression, `[[X:re]]` captures what `re` matched as `X`, `[[X]]`
//!   matches what was captured, and everything else is literal.
//! - `// EXPECT:` at the end, followed by the exact expected output, each line prefixed by `// `.
//!   With `BLESS=1` in the environment a mismatching (or missing) block is rewritten instead of
//!   failing.
//!
//! Every filetest also checks that the input and the output round-trip through the printer and
//! the parser, that the pipeline gives byte-identical output at 1 and 8 rayon threads, and runs
//! the pass manager with the verifier after every pass and the changed-flag check on.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::module::Module;
use crate::parser::parse_module;
use crate::pass::PassRegistry;
use crate::pass_manager::{PassManager, PassManagerOptions, VerifyMode};
use crate::printer::print_module;

/// One kind of check line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckKind {
    /// `CHECK:`
    Check,
    /// `CHECK-NEXT:`
    Next,
    /// `CHECK-NOT:`
    Not,
}

/// A parsed filetest.
#[derive(Clone, Debug)]
pub struct FileTest {
    /// The pipeline of the `RUN:` line.
    pub run: String,
    /// Check lines with their 1-based line numbers.
    pub checks: Vec<(CheckKind, String, usize)>,
    /// The expected output, if the file has an `EXPECT:` block.
    pub expect: Option<String>,
    /// The file text before the `EXPECT:` block (the input module with its directives).
    pub input: String,
}

const EXPECT_MARK: &str = "// EXPECT:";

/// Why a filetest fails: its directives are malformed, the pipeline fails, the output does
/// not round-trip or differs between thread counts, a check fails, or the output is not the
/// `EXPECT:` block.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FileTestError {
    /// A line of the `EXPECT:` block without `//`.
    #[error("a line of the EXPECT block does not start with //: {0}")]
    ExpectLine(String),
    /// A second `RUN:` line.
    #[error("line {line}: a second RUN line")]
    SecondRun {
        /// Its line.
        line: usize,
    },
    /// A `CHECK` directive of no known kind.
    #[error("line {line}: unknown check directive: {text}")]
    UnknownDirective {
        /// Its line.
        line: usize,
        /// The line's text.
        text: String,
    },
    /// No `RUN:` line.
    #[error("no `// RUN: PIPELINE` line")]
    NoRun,
    /// A `{{` without `}}` in a check pattern.
    #[error("unclosed {{{{ in a check pattern")]
    UnclosedBraces,
    /// A `[[` without `]]` in a check pattern.
    #[error("unclosed [[ in a check pattern")]
    UnclosedBrackets,
    /// A check variable used before a check captures it.
    #[error("check variable [[{0}]] used before it is captured")]
    UncapturedVariable(String),
    /// A check pattern that is no regular expression.
    #[error("bad check pattern '{pattern}': {error}")]
    BadPattern {
        /// The pattern.
        pattern: String,
        /// The regular expression's error.
        error: String,
    },
    /// A `CHECK-NOT` pattern that matches.
    #[error("line {line}: CHECK-NOT: {pattern}\n  matched output line {output_line}: {text}")]
    Forbidden {
        /// The directive's line.
        line: usize,
        /// Its pattern.
        pattern: String,
        /// The output line it matches.
        output_line: usize,
        /// That line's text.
        text: String,
    },
    /// A `CHECK` or `CHECK-NEXT` pattern that matches nothing where it must.
    #[error("line {line}: {directive}: {pattern}\n  no match after output line {after}")]
    NoMatch {
        /// The directive's line.
        line: usize,
        /// `CHECK` or `CHECK-NEXT`.
        directive: &'static str,
        /// Its pattern.
        pattern: String,
        /// The output line the search started after.
        after: usize,
    },
    /// The pipeline does not parse, or a pass fails.
    #[error("{0}")]
    Pipeline(String),
    /// A printed module that does not parse back.
    #[error("{what} does not parse back:\n{error}\n{text}")]
    NoParseBack {
        /// Which module (`the input`, `the output`).
        what: String,
        /// The parse error, rendered.
        error: String,
        /// The printed module.
        text: String,
    },
    /// A module whose print, parse and print again differs.
    #[error("{what}: print(parse(print(m))) != print(m):\n{first}\n---\n{second}")]
    RoundTrip {
        /// Which module.
        what: String,
        /// The first print.
        first: String,
        /// The second.
        second: String,
    },
    /// The file cannot be read or written.
    #[error("{}: {error}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        error: String,
    },
    /// The input module does not parse (rendered against the file).
    #[error("{0}")]
    Input(String),
    /// The output differs between 1 and 8 threads.
    #[error("output differs between 1 and 8 threads:\n{one}\n--- 8 threads ---\n{eight}")]
    Threads {
        /// The output at 1 thread.
        one: String,
        /// At 8.
        eight: String,
    },
    /// The output does not parse.
    #[error("the output does not parse: {0}")]
    OutputParse(String),
    /// The crate's extra check fails.
    #[error("{0}")]
    Extra(String),
    /// A check fails against the output.
    #[error("{error}\n--- output ---\n{output}")]
    Checks {
        /// The failing check.
        error: Box<FileTestError>,
        /// The output.
        output: String,
    },
    /// No `EXPECT:` block (and `BLESS` is not set).
    #[error("no `// EXPECT:` block (run with BLESS=1 to write it)\n--- output ---\n{output}")]
    NoExpect {
        /// The output.
        output: String,
    },
    /// The output differs from the `EXPECT:` block (and `BLESS` is not set).
    #[error("output differs from the EXPECT block (BLESS=1 rewrites it)\n{0}")]
    ExpectDiffers(String),
}

impl From<FileTestError> for String {
    fn from(e: FileTestError) -> String {
        e.to_string()
    }
}

/// Parses the directives of a filetest.
pub fn parse_filetest(text: &str) -> Result<FileTest, FileTestError> {
    let (input, expect) = match text.find(&format!("\n{EXPECT_MARK}")) {
        Some(p) => {
            let rest = &text[p + 1 + EXPECT_MARK.len()..];
            let mut out = String::new();
            for l in rest.lines().skip(1) {
                let body = l
                    .strip_prefix("// ")
                    .or_else(|| l.strip_prefix("//"))
                    .ok_or_else(|| FileTestError::ExpectLine(l.to_string()))?;
                out.push_str(body);
                out.push('\n');
            }
            (text[..p + 1].to_string(), Some(out))
        }
        None => (text.to_string(), None),
    };
    let mut run = None;
    let mut checks = Vec::new();
    for (n, l) in input.lines().enumerate() {
        let Some(c) = l.trim_start().strip_prefix("//") else {
            continue;
        };
        let c = c.trim_start();
        if let Some(r) = c.strip_prefix("RUN:") {
            if run.is_some() {
                return Err(FileTestError::SecondRun { line: n + 1 });
            }
            run = Some(r.trim().to_string());
        } else if let Some(r) = c.strip_prefix("CHECK-NEXT:") {
            checks.push((CheckKind::Next, r.trim().to_string(), n + 1));
        } else if let Some(r) = c.strip_prefix("CHECK-NOT:") {
            checks.push((CheckKind::Not, r.trim().to_string(), n + 1));
        } else if let Some(r) = c.strip_prefix("CHECK:") {
            checks.push((CheckKind::Check, r.trim().to_string(), n + 1));
        } else if c.starts_with("CHECK") {
            return Err(FileTestError::UnknownDirective {
                line: n + 1,
                text: l.to_string(),
            });
        }
    }
    let run = run.ok_or(FileTestError::NoRun)?;
    Ok(FileTest {
        run,
        checks,
        expect,
        input,
    })
}

/// Builds the regular expression of a check pattern, substituting captured variables.
fn pattern_regex(
    pat: &str,
    vars: &[(String, String)],
) -> Result<(regex_lite::Regex, Vec<String>), FileTestError> {
    let mut re = String::new();
    let mut captures = Vec::new();
    let mut rest = pat;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("{{") {
            let end = r.find("}}").ok_or(FileTestError::UnclosedBraces)?;
            re.push('(');
            re.push_str(&r[..end]);
            re.push(')');
            rest = &r[end + 2..];
        } else if let Some(r) = rest.strip_prefix("[[") {
            let end = r.find("]]").ok_or(FileTestError::UnclosedBrackets)?;
            let inner = &r[..end];
            if let Some((name, sub)) = inner.split_once(':') {
                re.push_str(&format!("(?P<{name}>{sub})"));
                captures.push(name.to_string());
            } else {
                let v = vars
                    .iter()
                    .rev()
                    .find(|(k, _)| k == inner)
                    .ok_or_else(|| FileTestError::UncapturedVariable(inner.to_string()))?;
                re.push_str(&regex_lite::escape(&v.1));
            }
            rest = &r[end + 2..];
        } else {
            let next = rest
                .find("{{")
                .into_iter()
                .chain(rest.find("[["))
                .min()
                .unwrap_or(rest.len());
            re.push_str(&regex_lite::escape(&rest[..next]));
            rest = &rest[next..];
        }
    }
    let r = regex_lite::Regex::new(&re).map_err(|e| FileTestError::BadPattern {
        pattern: pat.to_string(),
        error: e.to_string(),
    })?;
    Ok((r, captures))
}

/// Runs the checks against `output`; the error says which check failed and where.
pub fn run_checks(
    checks: &[(CheckKind, String, usize)],
    output: &str,
) -> Result<(), FileTestError> {
    let lines: Vec<&str> = output.lines().collect();
    let mut vars: Vec<(String, String)> = Vec::new();
    let mut pos = 0usize; // the next line a CHECK may match
    let mut last: Option<usize> = None;
    let mut pending_not: Vec<(String, usize)> = Vec::new();
    let check_nots = |nots: &mut Vec<(String, usize)>,
                      from: usize,
                      to: usize,
                      vars: &[(String, String)]|
     -> Result<(), FileTestError> {
        for (pat, ln) in nots.drain(..) {
            let (re, _) = pattern_regex(&pat, vars)?;
            if let Some(k) = (from..to).find(|&k| re.is_match(lines[k])) {
                return Err(FileTestError::Forbidden {
                    line: ln,
                    pattern: pat,
                    output_line: k + 1,
                    text: lines[k].to_string(),
                });
            }
        }
        Ok(())
    };
    for (kind, pat, ln) in checks {
        match kind {
            CheckKind::Not => pending_not.push((pat.clone(), *ln)),
            CheckKind::Check | CheckKind::Next => {
                let (re, caps) = pattern_regex(pat, &vars)?;
                let found = if *kind == CheckKind::Next {
                    let k = last.map_or(0, |l| l + 1);
                    (k < lines.len() && re.is_match(lines[k])).then_some(k)
                } else {
                    (pos..lines.len()).find(|&k| re.is_match(lines[k]))
                };
                let Some(k) = found else {
                    let what = if *kind == CheckKind::Next {
                        "CHECK-NEXT"
                    } else {
                        "CHECK"
                    };
                    return Err(FileTestError::NoMatch {
                        line: *ln,
                        directive: what,
                        pattern: pat.clone(),
                        after: pos,
                    });
                };
                check_nots(&mut pending_not, pos, k, &vars)?;
                if let Some(c) = re.captures(lines[k]) {
                    for name in caps {
                        if let Some(v) = c.name(&name) {
                            vars.push((name.clone(), v.as_str().to_string()));
                        }
                    }
                }
                last = Some(k);
                pos = k + 1;
            }
        }
    }
    check_nots(&mut pending_not, pos, lines.len(), &vars)?;
    Ok(())
}

fn pool(threads: usize) -> &'static rayon::ThreadPool {
    static POOLS: OnceLock<[rayon::ThreadPool; 2]> = OnceLock::new();
    let pools = POOLS.get_or_init(|| {
        [1, 8].map(|n| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build()
                .expect("a rayon thread pool")
        })
    });
    if threads == 1 {
        &pools[0]
    } else {
        &pools[1]
    }
}

/// Runs `pipeline` on a copy of `m` with the verifier after every pass and the changed-flag
/// check on, inside a rayon pool of `threads` threads (1 or 8); returns the printed output.
pub fn run_pipeline_text(
    registry: &PassRegistry,
    pipeline: &str,
    m: &Module,
    threads: usize,
) -> Result<String, FileTestError> {
    let opts = PassManagerOptions {
        verify: VerifyMode::Each,
        check_changed: true,
        ..Default::default()
    };
    let mut pm = PassManager::new(registry, pipeline, opts)
        .map_err(|e| FileTestError::Pipeline(e.render()))?;
    let mut m = m.clone();
    pool(threads).install(|| {
        pm.run(&mut m)
            .map_err(|e| FileTestError::Pipeline(e.to_string()))
    })?;
    Ok(print_module(&m))
}

/// Checks that printing `m`, parsing and printing again gives the same text.
pub fn check_round_trip(m: &Module, what: &str) -> Result<String, FileTestError> {
    let text = print_module(m);
    let m2 = parse_module(&text).map_err(|e| FileTestError::NoParseBack {
        what: what.to_string(),
        error: e.render(what),
        text: text.clone(),
    })?;
    let text2 = print_module(&m2);
    if text != text2 {
        return Err(FileTestError::RoundTrip {
            what: what.to_string(),
            first: text,
            second: text2,
        });
    }
    Ok(text)
}

/// Extra checks a crate adds to its filetests (the fusion crate compares evaluator results of
/// input and output): called with the input and output modules.
pub type ExtraCheck = fn(&Module, &Module) -> Result<(), String>;

/// Runs one filetest file; with `BLESS=1` rewrites its `EXPECT:` block instead of failing on a
/// mismatch there.
pub fn run_filetest(
    path: &Path,
    registry: &PassRegistry,
    extra: Option<ExtraCheck>,
) -> Result<(), FileTestError> {
    let io = |e: std::io::Error| FileTestError::Io {
        path: path.to_path_buf(),
        error: e.to_string(),
    };
    let text = std::fs::read_to_string(path).map_err(io)?;
    let ft = parse_filetest(&text)?;
    let m = parse_module(&ft.input)
        .map_err(|e| FileTestError::Input(e.render(&path.display().to_string())))?;
    check_round_trip(&m, "the input")?;
    let out1 = run_pipeline_text(registry, &ft.run, &m, 1)?;
    let out8 = run_pipeline_text(registry, &ft.run, &m, 8)?;
    if out1 != out8 {
        return Err(FileTestError::Threads {
            one: out1,
            eight: out8,
        });
    }
    let out_m = parse_module(&out1).map_err(|e| FileTestError::OutputParse(e.to_string()))?;
    check_round_trip(&out_m, "the output")?;
    if let Some(f) = extra {
        f(&m, &out_m).map_err(FileTestError::Extra)?;
    }
    run_checks(&ft.checks, &out1).map_err(|e| FileTestError::Checks {
        error: Box::new(e),
        output: out1.clone(),
    })?;
    if ft.expect.as_deref() != Some(out1.as_str()) {
        if std::env::var("BLESS").is_ok_and(|v| v == "1") {
            let mut new = ft.input.clone();
            if !new.ends_with('\n') {
                new.push('\n');
            }
            new.push_str(EXPECT_MARK);
            new.push('\n');
            for l in out1.lines() {
                if l.is_empty() {
                    new.push_str("//\n");
                } else {
                    new.push_str("// ");
                    new.push_str(l);
                    new.push('\n');
                }
            }
            std::fs::write(path, new).map_err(io)?;
        } else {
            return Err(match &ft.expect {
                None => FileTestError::NoExpect { output: out1 },
                Some(e) => FileTestError::ExpectDiffers(first_difference(e, &out1)),
            });
        }
    }
    Ok(())
}

fn first_difference(expected: &str, actual: &str) -> String {
    let e: Vec<&str> = expected.lines().collect();
    let a: Vec<&str> = actual.lines().collect();
    let k = (0..e.len().max(a.len()))
        .find(|&k| e.get(k) != a.get(k))
        .unwrap_or(0);
    format!(
        "first difference at output line {}:\n  expected: {}\n  actual:   {}\n--- output ---\n{actual}",
        k + 1,
        e.get(k).unwrap_or(&"<end>"),
        a.get(k).unwrap_or(&"<end>")
    )
}

/// Every `.hlo` file under `dir` with a `// RUN:` line, recursively, sorted (the verifier's
/// `// ERROR:` filetests, which have no pipeline, have their own harness).
pub fn collect_filetests(dir: &Path) -> Vec<PathBuf> {
    fn go(d: &Path, out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(d) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                go(&p, out);
            } else if p.extension().is_some_and(|x| x == "hlo")
                && std::fs::read_to_string(&p)
                    .is_ok_and(|t| t.lines().any(|l| l.trim_start().starts_with("// RUN:")))
            {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    go(dir, &mut out);
    out.sort();
    out
}

/// The test name of a filetest: its path under `root` without the extension (`dce/unused`).
pub fn test_name(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.with_extension("").to_string_lossy().replace('\\', "/")
}
