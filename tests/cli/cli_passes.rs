//! `axle opt`, `axle passes` and `axle explore`: outputs, files written, and clear errors with a
//! non-zero exit and nothing on stdout.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn axle(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_axle"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("runs axle")
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

const MODULE: &str =
    "HloModule m, entry_computation_layout={(f32[4]{0}, s32[4]{0})->(f32[4]{0}, s32[4]{0})}

ENTRY main {
  x = f32[4]{0} parameter(0)
  i = s32[4]{0} parameter(1)
  one = f32[] constant(1)
  ob = f32[4]{0} broadcast(one), dimensions={}
  m = f32[4]{0} multiply(x, ob)
  e1 = f32[4]{0} exponential(m)
  e2 = f32[4]{0} exponential(m)
  s = f32[4]{0} add(e1, e2)
  z = s32[] constant(0)
  zb = s32[4]{0} broadcast(z), dimensions={}
  a = s32[4]{0} add(i, zb)
  dead = f32[4]{0} negate(x)
  ROOT t = (f32[4]{0}, s32[4]{0}) tuple(s, a)
}
";

/// The rows of a JSON-lines file.
fn json_rows(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect()
}

fn setup() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let f = dir.path().join("m.hlo");
    std::fs::write(&f, MODULE).expect("writes");
    (dir, f)
}

#[test]
fn passes_lists_every_pass_and_pipeline() {
    let (dir, _) = setup();
    let o = axle(&["passes"], dir.path());
    assert!(o.status.success(), "{}", err(&o));
    let text = out(&o);
    for p in axle::passes::registry().names() {
        assert!(text.contains(p), "{p} missing from:\n{text}");
    }
    assert!(text.contains("max_elements=65536"), "{text}");
    assert!(text.contains("simplify"), "{text}");
    assert!(text.contains(axle::passes::standard_pipeline("simplify").unwrap()));
}

#[test]
fn opt_runs_a_pipeline_and_prints_canonical_text() {
    let (dir, f) = setup();
    let o = axle(
        &[
            "opt",
            f.to_str().unwrap(),
            "--passes",
            "fixpoint(max=4)[algsimp,cse,dce]",
        ],
        dir.path(),
    );
    assert!(o.status.success(), "{}", err(&o));
    let text = out(&o);
    let m = axle::ir::parse_module(&text).expect("the output parses");
    assert_eq!(axle::ir::print_module(&m), text);
    assert!(!text.contains("multiply"), "{text}");
    assert!(!text.contains("negate"), "{text}");
    assert_eq!(text.matches("exponential").count(), 1, "{text}");
    assert!(
        text.contains("ROOT t = (f32[4]{0}, s32[4]{0}) tuple(s, i)"),
        "{text}"
    );
}

#[test]
fn opt_writes_output_stats_and_dumps() {
    let (dir, f) = setup();
    let res = dir.path().join("out.hlo");
    let stats = dir.path().join("stats.jsonl");
    let dumps = dir.path().join("dumps");
    let o = axle(
        &[
            "opt",
            f.to_str().unwrap(),
            "--pipeline",
            "simplify",
            "-o",
            res.to_str().unwrap(),
            "--stats",
            stats.to_str().unwrap(),
            "--dump-dir",
            dumps.to_str().unwrap(),
            "--dump-after",
            "^(cse|dce)$",
            "--time-passes",
        ],
        dir.path(),
    );
    assert!(o.status.success(), "{}", err(&o));
    assert!(out(&o).is_empty());
    assert!(err(&o).contains("time_ms"), "{}", err(&o));
    let text = std::fs::read_to_string(&res).unwrap();
    axle::ir::parse_module(&text).expect("the output parses");
    let rows: Vec<serde_json::Value> = std::fs::read_to_string(&stats)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert!(rows.len() > 10);
    for r in &rows {
        for key in [
            "pipeline",
            "pass",
            "run",
            "iteration",
            "wall_ns",
            "insts_before",
            "insts_after",
            "changed",
            "counters",
        ] {
            assert!(r.get(key).is_some(), "{key} missing in {r}");
        }
    }
    assert_eq!(
        rows[0]["pipeline"],
        axle::passes::standard_pipeline("simplify").unwrap()
    );
    let mut dumped: Vec<String> = std::fs::read_dir(&dumps)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    dumped.sort();
    assert!(!dumped.is_empty());
    assert!(
        dumped
            .iter()
            .all(|n| n.ends_with(".cse.hlo") || n.ends_with(".dce.hlo")),
        "{dumped:?}"
    );
    assert!(dumped[0].len() == "000.cse.hlo".len() && dumped[0].as_bytes()[3] == b'.');
}

#[test]
fn disabled_passes_do_not_run() {
    let (dir, f) = setup();
    let o = axle(
        &[
            "opt",
            f.to_str().unwrap(),
            "--passes",
            "algsimp,dce",
            "--disable-pass",
            "algsimp",
        ],
        dir.path(),
    );
    assert!(o.status.success(), "{}", err(&o));
    let text = out(&o);
    assert!(text.contains("multiply"), "{text}");
    assert!(!text.contains("negate"), "{text}");
}

#[test]
fn opt_errors_are_clear() {
    let (dir, f) = setup();
    let file = f.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &["opt", file, "--passes", "dce,,cse"],
            "pipeline:1:5: error: expected a pass name, found ','\ndce,,cse\n    ^",
        ),
        (
            &["opt", file, "--passes", "algsim"],
            "unknown pass 'algsim'; did you mean algsimp?",
        ),
        (
            &["opt", file, "--pipeline", "nope"],
            "error: unknown pipeline 'nope' (standard pipelines: simplify, cpu, gpu)",
        ),
        (
            &["opt", file],
            "error: give the passes to run with --passes PIPELINE or --pipeline NAME",
        ),
        (
            &["opt", file, "--passes", "dce", "--verify", "sometimes"],
            "error: --verify takes each, end or off, found 'sometimes'",
        ),
        (
            &["opt", file, "--passes", "dce", "--disable-pass", "nope"],
            "error: --disable-pass: unknown pass 'nope'",
        ),
        (
            &["opt", file, "--passes", "dce", "--dump-after", "dce"],
            "error: --dump-after needs --dump-dir DIR",
        ),
        (
            &["opt", file, "--passes", "constant-folding{max_elements=-1}"],
            "option 'max_elements' must be an int >= 0, found -1",
        ),
        (
            &["opt", "missing.hlo", "--passes", "dce"],
            "missing.hlo: error: cannot read file",
        ),
    ];
    for (args, want) in cases {
        let o = axle(args, dir.path());
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(out(&o).is_empty(), "{args:?} printed to stdout");
        assert!(err(&o).contains(want), "{args:?}:\n{}", err(&o));
    }
}

#[test]
fn explore_prints_a_table_and_writes_every_row() {
    let (dir, f) = setup();
    let rows = dir.path().join("rows.jsonl");
    let o = axle(
        &[
            "explore",
            f.to_str().unwrap(),
            "--passes-from",
            "algsimp,cse,dce,constant-folding{max_elements=16}",
            "--orders",
            "4",
            "--seed",
            "3",
            "--jsonl",
            rows.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert!(o.status.success(), "{}", err(&o));
    let table = out(&o);
    assert!(table.contains("compile_ms"), "{table}");
    assert!(table.contains("(none)"), "{table}");
    let lines = json_rows(&rows);
    assert_eq!(lines.len(), 5);
    assert_eq!(lines[0]["pipeline"], "");
    assert_eq!(lines[0]["insts_after"], lines[0]["insts_before"]);
    for l in &lines {
        assert_eq!(l["check"], "same", "{l}");
        assert!(l["flops"].as_f64().is_some() && l["bytes"].as_f64().is_some());
    }
    assert!(lines[1..]
        .iter()
        .any(|l| l["insts_after"].as_u64() < l["insts_before"].as_u64()));
    // The same seed draws the same orders.
    let o2 = axle(
        &[
            "explore",
            f.to_str().unwrap(),
            "--passes-from",
            "algsimp,cse,dce,constant-folding{max_elements=16}",
            "--orders",
            "4",
            "--seed",
            "3",
        ],
        dir.path(),
    );
    assert!(o2.status.success(), "{}", err(&o2));
    let default_rows = dir.path().join("m.explore.jsonl");
    let again: Vec<String> = std::fs::read_to_string(default_rows)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["pipeline"].as_str().unwrap().to_string()
        })
        .collect();
    let first: Vec<String> = lines
        .iter()
        .map(|v| v["pipeline"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(again, first);
}

#[test]
fn explore_measures_every_order_with_the_fusion_passes_taking_part() {
    let (dir, f) = setup();
    let rows = dir.path().join("rows.jsonl");
    let o = axle(
        &[
            "explore",
            f.to_str().unwrap(),
            "--passes-from",
            "algsimp,fusion{target=cpu},multi-output-fusion{target=cpu},dce",
            "--orders",
            "3",
            "--seed",
            "1",
            "--measure",
            "--backend",
            "cpu",
            "--repeat",
            "2",
            "--warmup",
            "0",
            "--jsonl",
            rows.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert!(o.status.success(), "{}", err(&o));
    assert!(out(&o).contains("run_ms"), "{}", out(&o));
    let lines = json_rows(&rows);
    assert_eq!(lines.len(), 4);
    for l in &lines {
        assert_eq!(l["check"], "same", "{l}");
        assert_eq!(l["backend"], "cpu", "{l}");
        assert_eq!(l["runs"], 2, "{l}");
        assert!(l["run_ns"].as_u64().unwrap() > 0, "{l}");
        assert!(l["run_min_ns"].as_u64() <= l["run_ns"].as_u64(), "{l}");
        assert!(l["codegen_ns"].as_u64().unwrap() > 0, "{l}");
        assert!(
            l["flops"].as_f64().is_some() && l.get("measure_error").is_none(),
            "{l}"
        );
    }
    // The fusion passes are drawn like any other, and fuse: some order has fewer entry
    // instructions than the input and a fusion pass in it.
    let fused = lines[1..].iter().any(|l| {
        l["pipeline"]
            .as_str()
            .unwrap()
            .contains("fusion{target=cpu}")
            && l["insts_after"].as_u64() != l["insts_before"].as_u64()
    });
    assert!(fused, "{lines:?}");
    // Without --measure there are no run times; --backend alone needs --measure.
    let o = axle(
        &[
            "explore",
            f.to_str().unwrap(),
            "--passes-from",
            "dce",
            "--orders",
            "1",
        ],
        dir.path(),
    );
    assert!(o.status.success(), "{}", err(&o));
    assert!(!out(&o).contains("run_ms"));
    let o = axle(
        &[
            "explore",
            f.to_str().unwrap(),
            "--passes-from",
            "dce",
            "--backend",
            "cpu",
        ],
        dir.path(),
    );
    assert!(
        !o.status.success() && err(&o).contains("--measure"),
        "{}",
        err(&o)
    );
    let o = axle(
        &[
            "explore",
            f.to_str().unwrap(),
            "--passes-from",
            "dce",
            "--measure",
            "--backend",
            "tpu",
        ],
        dir.path(),
    );
    assert!(!o.status.success() && out(&o).is_empty());
    assert!(
        err(&o).contains("--backend") && err(&o).contains("tpu"),
        "{}",
        err(&o)
    );
}

#[test]
fn explore_rejects_unknown_passes() {
    let (dir, f) = setup();
    let o = axle(
        &[
            "explore",
            f.to_str().unwrap(),
            "--passes-from",
            "algsimp,nope",
        ],
        dir.path(),
    );
    assert!(!o.status.success());
    assert!(err(&o).contains("unknown pass 'nope'"), "{}", err(&o));
}

#[test]
fn session_steps_one_pass_at_a_time() {
    let m = axle::ir::parse_module(MODULE).unwrap();
    let mut s = axle::passes::Session::new(m, axle::ir::PassManagerOptions::default());
    let start = axle::passes::observe(s.module());
    let (rows, obs) = s.step("algsimp").expect("algsimp runs");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].pass, "algsimp");
    assert!(rows[0].changed);
    let (_, obs2) = s.step("dce").expect("dce runs");
    assert!(obs2.insts < obs.insts && obs.insts <= start.insts + 2);
    assert!(obs2.cost.flops < start.cost.flops);
    assert!(s.step("nope").is_err());
    assert_eq!(s.stats().len(), 2);
}
