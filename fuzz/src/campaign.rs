//! Seeded campaigns: case `k` of seed `S` is drawn from `(S, k)` alone, so a campaign is
//! deterministic, independent of the number of jobs, and any case can be rerun from the seed.
//!
//! [`run`] checks cases `from..from + cases` in parallel, then minimizes each failure (the
//! generator's shrinking for `pipeline` and `cpu`, deleting lines and byte ranges for `parse`
//! and `npy`) and writes it to the output directory as a file the target reads (`.hlo`, `.npy`)
//! plus a `.repro` file holding the one-line command that replays it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use axle::ir::hostile::MUTATION_TOKENS as TOKENS;
use axle::ir::literal::f64_to_element;
use axle::ir::npy::encode_npy;
use axle::ir::{gen::Program, print_module, ArrayLiteral, ArrayShape, ElementType};
use axle_analysis::equivalence::SplitMix;

use crate::case::Case;
use crate::target::{catching, Outcome, Target};

/// Bytes drawn for one generated case (enough for a program of two dozen ops).
const CASE_BYTES: usize = 256;

/// The most candidate inputs a minimization tries.
const SHRINK_BUDGET: usize = 600;

/// What a campaign runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// The target.
    pub target: Target,
    /// How many cases.
    pub cases: u64,
    /// The campaign's seed.
    pub seed: u64,
    /// The first case's index (to rerun one case: `from = k, cases = 1`).
    pub from: u64,
    /// Worker threads.
    pub jobs: usize,
    /// Where failures are written (none: only printed).
    pub out: Option<PathBuf>,
}

/// One failing case, minimized.
#[derive(Clone, Debug)]
pub struct Finding {
    /// The case's index.
    pub index: u64,
    /// The failure message of the minimized input.
    pub message: String,
    /// The minimized input as the file the target reads (HLO text or `.npy` bytes).
    pub file: Vec<u8>,
    /// The file's extension.
    pub ext: &'static str,
    /// Extra replay arguments (`--passes ... --input-seed ...`).
    pub replay_args: String,
}

/// The outcome of a campaign.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Cases run.
    pub cases: u64,
    /// Cases the backend does not support (not failures).
    pub unsupported: u64,
    /// The failures, by case index.
    pub findings: Vec<Finding>,
}

/// Splits `(seed, k)` into a generator for case `k`.
fn rng(seed: u64, k: u64) -> SplitMix {
    let mut r = SplitMix::new(seed);
    SplitMix::new(r.next_u64() ^ k.wrapping_mul(0xd134_2543_de82_ef95))
}

fn bytes(r: &mut SplitMix, n: usize) -> Vec<u8> {
    (0..n).map(|_| r.next_u64() as u8).collect()
}

/// HLO texts the `parse` campaign mutates: the shared corpus (`$AXLE_SHARED/corpus`, or
/// `../shared/corpus`), when there is one.
pub fn corpus_texts() -> Vec<String> {
    let dir = std::env::var_os("AXLE_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared"))
        .join("corpus");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "hlo"));
    files.sort();
    files
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .collect()
}

/// Applies one to four random edits (byte flips, cuts, duplicated or deleted ranges, inserted
/// tokens) to `data`.
fn mutate(mut data: Vec<u8>, r: &mut SplitMix) -> Vec<u8> {
    for _ in 0..1 + r.below(4) {
        let n = data.len() as u64;
        if n == 0 {
            data.extend_from_slice(TOKENS[r.below(TOKENS.len() as u64) as usize].as_bytes());
            continue;
        }
        let at = r.below(n) as usize;
        let len = (1 + r.below(n.min(64))) as usize;
        let end = (at + len).min(data.len());
        match r.below(5) {
            0 => data[at] = r.next_u64() as u8,
            1 => data.truncate(at),
            2 => {
                data.drain(at..end);
            }
            3 => {
                let piece = data[at..end].to_vec();
                let to = r.below(n) as usize;
                data.splice(to..to, piece);
            }
            _ => {
                let t = TOKENS[r.below(TOKENS.len() as u64) as usize].as_bytes();
                data.splice(at..at, t.iter().copied());
            }
        }
    }
    data
}

/// The input of case `k` for the byte targets.
fn raw_input(target: Target, corpus: &[String], seed: u64, k: u64) -> Vec<u8> {
    let mut r = rng(seed, k);
    let base = match target {
        Target::Parse if !corpus.is_empty() && r.below(3) > 0 => corpus
            [r.below(corpus.len() as u64) as usize]
            .clone()
            .into_bytes(),
        Target::Parse => {
            print_module(&Program::from_bytes(&bytes(&mut r, CASE_BYTES)).build()).into_bytes()
        }
        _ => {
            let ty = ElementType::ALL[r.below(ElementType::ALL.len() as u64) as usize];
            let dims: Vec<i64> = (0..r.below(4)).map(|_| r.below(4) as i64).collect();
            let shape = ArrayShape::new(ty, &dims);
            let n: i64 = dims.iter().product();
            let data = (0..n)
                .flat_map(|i| f64_to_element(ty, i as f64 - 2.0))
                .collect();
            encode_npy(&ArrayLiteral { shape, data }).unwrap_or_default()
        }
    };
    mutate(base, &mut r)
}

/// The case `k` of `seed` for the generated-module targets.
pub fn generated_case(seed: u64, k: u64) -> Case {
    Case::from_bytes(&bytes(&mut rng(seed, k), CASE_BYTES))
}

/// Runs a campaign; see the module docs. `progress` is called every 1000 cases with the number
/// of cases done and of failures among them (before minimizing), so a campaign stopped early
/// still says how far it got and what it found.
pub fn run(opts: &Options, progress: &(dyn Fn(u64, u64) + Sync)) -> Report {
    let corpus = if opts.target == Target::Parse {
        corpus_texts()
    } else {
        Vec::new()
    };
    let unsupported = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let failed = AtomicUsize::new(0);
    let target = opts.target;
    let failing: Vec<u64> = par_map(opts.jobs, opts.cases as usize, |i| {
        let k = opts.from + i as u64;
        let outcome = catching(|| {
            if target.is_generated() {
                target.run_case(&generated_case(opts.seed, k))
            } else {
                target.run_bytes(&raw_input(target, &corpus, opts.seed, k))
            }
        });
        if outcome.is_fail() {
            failed.fetch_add(1, Ordering::Relaxed);
        }
        let d = done.fetch_add(1, Ordering::Relaxed) as u64 + 1;
        if d.is_multiple_of(1000) {
            progress(d, failed.load(Ordering::Relaxed) as u64);
        }
        if matches!(outcome, Outcome::Unsupported(_)) {
            unsupported.fetch_add(1, Ordering::Relaxed);
        }
        outcome.is_fail().then_some(k)
    })
    .into_iter()
    .flatten()
    .collect();
    let findings = par_map(opts.jobs, failing.len(), |i| {
        let k = failing[i];
        if target.is_generated() {
            minimize_case(target, generated_case(opts.seed, k), k)
        } else {
            minimize_bytes(target, raw_input(target, &corpus, opts.seed, k), k)
        }
    });
    Report {
        cases: opts.cases,
        unsupported: unsupported.into_inner() as u64,
        findings,
    }
}

/// `f(0..n)` on `jobs` rayon workers, in index order. Each worker runs one loop that claims
/// indices from a counter, so no worker ever has a queued job to steal: a check that itself
/// waits on another rayon pool (the pipeline target's thread-count check) cannot start a
/// second case on top of the first one's stack, as a `par_iter` worker would.
fn par_map<T: Send>(jobs: usize, n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs.max(1))
        .build()
        .expect("a thread pool");
    let next = AtomicUsize::new(0);
    let results = Mutex::new(Vec::with_capacity(n));
    pool.scope(|s| {
        for _ in 0..jobs.max(1) {
            s.spawn(|_| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let r = f(i);
                results.lock().expect("no worker panics").push((i, r));
            });
        }
    });
    let mut results = results.into_inner().expect("no worker panics");
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

fn failure(o: Outcome) -> Option<String> {
    match o {
        Outcome::Fail(m) => Some(m),
        _ => None,
    }
}

/// Greedy shrinking: take the first smaller case that still fails, until none does.
fn minimize_case(target: Target, mut case: Case, index: u64) -> Finding {
    let mut message = failure(catching(|| target.run_case(&case))).unwrap_or_default();
    let mut budget = SHRINK_BUDGET;
    'outer: while budget > 0 {
        for c in case.shrink() {
            if budget == 0 {
                break 'outer;
            }
            budget -= 1;
            if let Some(m) = failure(catching(|| target.run_case(&c))) {
                case = c;
                message = m;
                continue 'outer;
            }
        }
        break;
    }
    let replay_args = match target.pass_registry() {
        Some(registry) => format!(
            "--passes '{}' --input-seed {}",
            case.pipeline(&crate::pipeline::pass_names(registry)),
            case.seed
        ),
        None => format!("--input-seed {}", case.seed),
    };
    Finding {
        index,
        message,
        file: print_module(&case.program.build()).into_bytes(),
        ext: "hlo",
        replay_args,
    }
}

/// Deletes lines, then ever smaller byte ranges, while the input still fails.
fn minimize_bytes(target: Target, mut data: Vec<u8>, index: u64) -> Finding {
    let mut message = failure(catching(|| target.run_bytes(&data))).unwrap_or_default();
    let mut budget = SHRINK_BUDGET * 4;
    let mut chunk = data.len().max(1);
    while chunk >= 1 && budget > 0 {
        let mut at = 0;
        while at < data.len() && budget > 0 {
            budget -= 1;
            let end = (at + chunk).min(data.len());
            let mut cand = data[..at].to_vec();
            cand.extend_from_slice(&data[end..]);
            match failure(catching(|| target.run_bytes(&cand))) {
                Some(m) => {
                    data = cand;
                    message = m;
                }
                None => at += chunk,
            }
        }
        chunk /= 2;
    }
    Finding {
        index,
        message,
        file: data,
        ext: if target == Target::Npy { "npy" } else { "hlo" },
        replay_args: String::new(),
    }
}

/// The file name of a finding in the output directory (without extension).
pub fn finding_stem(target: Target, seed: u64, index: u64) -> String {
    format!("{}-{seed}-{index}", target.name())
}

/// The one-line command that replays a written finding.
pub fn repro_command(target: Target, file: &Path, f: &Finding) -> String {
    let mut cmd = format!(
        "cargo run --release -p axle-fuzz --bin campaign -- --target {} --replay {}",
        target.name(),
        file.display()
    );
    if !f.replay_args.is_empty() {
        cmd.push(' ');
        cmd.push_str(&f.replay_args);
    }
    cmd
}
