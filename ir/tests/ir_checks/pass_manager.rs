//! The pipeline grammar and the pass manager: parsing and canonical printing, error messages,
//! option typing, fixpoint limits, disabled passes, dumps, stats rows, the changed-flag check,
//! verification between passes, and the analysis cache.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axle_ir::pass::run_pass;
use axle_ir::{
    parse_module, print_module, Analysis, Changed, Module, Opcode, OptKind, OptSpec, Pass, PassCx,
    PassError, PassInfo, PassManager, PassManagerOptions, PassRegistry, Pipeline, VerifyMode,
};

/// Removes one instruction per run (the last negate) and says so.
struct RemoveNegate;
impl Pass for RemoveNegate {
    fn run(&mut self, m: &mut Module, cx: &mut PassCx<'_>) -> Result<Changed, PassError> {
        let Some(n) = m
            .live_ids()
            .into_iter()
            .rev()
            .find(|&i| m.opcode(i) == Opcode::Negate)
        else {
            return Ok(false);
        };
        let x = m.operands(n)[0];
        cx.count("removed", 1);
        let mut rw = m.rewriter();
        rw.replace_all_uses(n, x);
        Ok(rw.finish())
    }
}

/// Changes the module but reports no change (a bug the pass manager must catch).
struct Liar;
impl Pass for Liar {
    fn run(&mut self, m: &mut Module, _cx: &mut PassCx<'_>) -> Result<Changed, PassError> {
        let e = m.entry();
        m.set_comp_name(e, "renamed");
        Ok(false)
    }
}

/// Always says it changed the module (so a fixpoint group never settles).
struct AlwaysChanged;
impl Pass for AlwaysChanged {
    fn run(&mut self, m: &mut Module, _cx: &mut PassCx<'_>) -> Result<Changed, PassError> {
        let e = m.entry();
        let n = format!("{}x", m.comp_name(e));
        m.set_comp_name(e, &n);
        Ok(true)
    }
}

/// Breaks the module: points the entry's root at a dead instruction.
struct Breaker;
impl Pass for Breaker {
    fn run(&mut self, m: &mut Module, _cx: &mut PassCx<'_>) -> Result<Changed, PassError> {
        let e = m.entry();
        let r = m.root(e);
        m.remove_inst(r);
        Ok(true)
    }
}

/// Fails with an error.
struct Failer;
impl Pass for Failer {
    fn run(&mut self, _m: &mut Module, _cx: &mut PassCx<'_>) -> Result<Changed, PassError> {
        Err(PassError::new("unsupported input"))
    }
}

/// Does nothing.
struct Noop;
impl Pass for Noop {
    fn run(&mut self, _m: &mut Module, _cx: &mut PassCx<'_>) -> Result<Changed, PassError> {
        Ok(false)
    }
}

/// How often `CountInsts` was computed (only `analyses_are_cached_until_the_module_changes`
/// runs a pass that computes it).
static COMPUTED: AtomicUsize = AtomicUsize::new(0);

/// An analysis that counts how often it is computed.
struct CountInsts(usize);
impl Analysis for CountInsts {
    fn compute(m: &Module) -> Self {
        COMPUTED.fetch_add(1, Ordering::SeqCst);
        CountInsts(m.num_live_insts())
    }
}

/// Queries `CountInsts` twice per run.
struct UsesAnalysis;
impl Pass for UsesAnalysis {
    fn run(&mut self, m: &mut Module, cx: &mut PassCx<'_>) -> Result<Changed, PassError> {
        let a = cx.analysis::<CountInsts>(m);
        let b = cx.analysis::<CountInsts>(m);
        assert_eq!(a.0, b.0);
        Ok(false)
    }
}

const LEVEL: &[OptSpec] = &[
    OptSpec {
        name: "level",
        kind: OptKind::Int { min: 0, max: 3 },
        default: "1",
        doc: "how hard to try",
    },
    OptSpec {
        name: "mode",
        kind: OptKind::Choice(&["fast", "slow"]),
        default: "fast",
        doc: "which mode",
    },
    OptSpec {
        name: "on",
        kind: OptKind::Bool,
        default: "true",
        doc: "whether on",
    },
];

fn registry() -> PassRegistry {
    let mut reg = PassRegistry::new();
    axle_ir::passes::register(&mut reg);
    reg.register(PassInfo {
        name: "remove-negate",
        doc: "removes the last negate",
        options: &[],
        create: |_| Box::new(RemoveNegate),
    });
    reg.register(PassInfo {
        name: "liar",
        doc: "changes the module, reports no change",
        options: &[],
        create: |_| Box::new(Liar),
    });
    reg.register(PassInfo {
        name: "always-changed",
        doc: "always reports a change",
        options: &[],
        create: |_| Box::new(AlwaysChanged),
    });
    reg.register(PassInfo {
        name: "breaker",
        doc: "breaks the module",
        options: &[],
        create: |_| Box::new(Breaker),
    });
    reg.register(PassInfo {
        name: "failer",
        doc: "fails",
        options: &[],
        create: |_| Box::new(Failer),
    });
    reg.register(PassInfo {
        name: "uses-analysis",
        doc: "queries an analysis",
        options: &[],
        create: |_| Box::new(UsesAnalysis),
    });
    reg.register(PassInfo {
        name: "tunable",
        doc: "takes options",
        options: LEVEL,
        create: |o| {
            assert!(o.int("level") <= 3);
            assert!(["fast", "slow"].contains(&o.str("mode")));
            let _ = o.bool("on");
            Box::new(Noop)
        },
    });
    reg
}

const NEGATES: &str = "HloModule m, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

ENTRY main {
  x = f32[4]{0} parameter(0)
  n1 = f32[4]{0} negate(x)
  n2 = f32[4]{0} negate(n1)
  n3 = f32[4]{0} negate(n2)
  ROOT e = f32[4]{0} exponential(n3)
}
";

fn opts() -> PassManagerOptions {
    PassManagerOptions {
        verify: VerifyMode::Each,
        check_changed: true,
        ..Default::default()
    }
}

#[test]
fn pipelines_print_canonically() {
    let reg = registry();
    for (text, canon) in [
        ("", ""),
        ("dce", "dce"),
        (" dce , cse ", "dce,cse"),
        (
            "fixpoint( max = 8 )[ remove-negate , dce ],cse",
            "fixpoint(max=8)[remove-negate,dce],cse",
        ),
        ("tunable{on=0, level=2}", "tunable{level=2,on=false}"),
        ("tunable{mode=slow}", "tunable{mode=slow}"),
        (
            "fixpoint(max=2)[fixpoint(max=3)[dce],cse]",
            "fixpoint(max=2)[fixpoint(max=3)[dce],cse]",
        ),
    ] {
        let p = Pipeline::parse_checked(text, &reg).unwrap_or_else(|e| panic!("{}", e.render()));
        assert_eq!(p.to_string(), canon, "for {text:?}");
        let again = Pipeline::parse_checked(canon, &reg).unwrap();
        assert_eq!(again.to_string(), canon);
    }
}

fn err(text: &str) -> (usize, String) {
    let e = Pipeline::parse_checked(text, &registry()).unwrap_err();
    let rendered = e.render();
    assert!(rendered.contains(&e.msg), "{rendered}");
    assert!(rendered.contains(text), "{rendered}");
    (e.col, e.msg)
}

#[test]
fn pipeline_errors_point_at_the_problem() {
    assert_eq!(
        err("dce,,cse"),
        (5, "expected a pass name, found ','".into())
    );
    assert_eq!(
        err("dce,"),
        (
            5,
            "expected a pass name after ',', found end of pipeline".into()
        )
    );
    assert_eq!(err("dce cse"), (5, "expected ',', found 'c'".into()));
    let (col, msg) = err("dce,csee");
    assert_eq!(col, 5);
    assert_eq!(msg, "unknown pass 'csee'; did you mean cse?");
    assert_eq!(
        err("fixpoint[dce]"),
        (
            9,
            "expected '(' after fixpoint (fixpoint(max=N)[...]), found '['".into()
        )
    );
    assert_eq!(
        err("fixpoint(max=0)[dce]"),
        (
            14,
            "fixpoint max must be a positive integer, found '0'".into()
        )
    );
    assert_eq!(
        err("fixpoint(limit=3)[dce]"),
        (
            10,
            "unknown fixpoint option 'limit' (fixpoint takes max=N)".into()
        )
    );
    assert_eq!(
        err("fixpoint(max=3)[]"),
        (17, "a fixpoint group needs at least one pass".into())
    );
    assert_eq!(
        err("fixpoint(max=3)[dce"),
        (20, "expected ',' or ']', found end of pipeline".into())
    );
    assert_eq!(
        err("dce{x=1}"),
        (
            1,
            "pass 'dce': unknown option 'x' (this pass takes no options)".into()
        )
    );
    assert_eq!(
        err("tunable{level=9}"),
        (
            1,
            "pass 'tunable': option 'level' must be an int in 0..=3, found 9".into()
        )
    );
    assert_eq!(
        err("tunable{level=x}"),
        (
            1,
            "pass 'tunable': option 'level' takes an integer, found 'x'".into()
        )
    );
    assert_eq!(
        err("tunable{mode=medium}"),
        (
            1,
            "pass 'tunable': option 'mode' must be one of fast|slow, found 'medium'".into()
        )
    );
    assert_eq!(
        err("tunable{on=maybe}"),
        (
            1,
            "pass 'tunable': option 'on' takes true or false, found 'maybe'".into()
        )
    );
    assert_eq!(
        err("tunable{level=1,level=2}"),
        (1, "pass 'tunable': option 'level' is given twice".into())
    );
    assert_eq!(
        err("tunable{level}"),
        (14, "expected '=' after option 'level', found '}'".into())
    );
    assert_eq!(
        err("dce(max=2)"),
        (
            4,
            "'(' after 'dce': only fixpoint takes (max=N); pass options go in {k=v}".into()
        )
    );
    let (_, msg) = err("zzzz");
    assert!(
        msg.starts_with("unknown pass 'zzzz' (`axle passes` lists them: "),
        "{msg}"
    );
}

#[test]
fn runs_passes_and_records_stats() {
    let reg = registry();
    let mut m = parse_module(NEGATES).unwrap();
    let mut pm = PassManager::new(&reg, "remove-negate,dce", opts()).unwrap();
    let report = pm.run(&mut m).unwrap();
    assert!(report.changed);
    assert_eq!(report.runs, 2);
    let rows = pm.stats();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].pass, "remove-negate");
    assert_eq!(rows[0].run, 0);
    assert_eq!(rows[0].iteration, 0);
    assert_eq!(rows[0].insts_before, 5);
    assert_eq!(rows[0].insts_after, 4);
    assert!(rows[0].changed);
    assert_eq!(rows[0].counters, vec![("removed".to_string(), 1)]);
    assert_eq!(rows[1].pass, "dce");
    assert!(!rows[1].changed);
    let json = rows[0].to_json();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["pipeline"], "remove-negate,dce");
    assert_eq!(v["pass"], "remove-negate");
    assert_eq!(v["run"], 0);
    assert_eq!(v["iteration"], 0);
    assert!(v["wall_ns"].as_u64().is_some());
    assert_eq!(v["insts_before"], 5);
    assert_eq!(v["insts_after"], 4);
    assert_eq!(v["changed"], true);
    assert_eq!(v["counters"]["removed"], 1);
    // The output is compacted (dense ids) and still verifies.
    assert_eq!(m.inst_capacity(), m.num_live_insts());
    axle_ir::pass_manager::verify_module(&m).unwrap();
}

#[test]
fn fixpoint_runs_until_nothing_changes() {
    let reg = registry();
    let mut m = parse_module(NEGATES).unwrap();
    let mut pm = PassManager::new(&reg, "fixpoint(max=10)[remove-negate,dce]", opts()).unwrap();
    let report = pm.run(&mut m).unwrap();
    assert!(report.warnings.is_empty());
    assert!(!print_module(&m).contains("negate"));
    // Three changing iterations and a fourth that changes nothing.
    let rows = pm.stats();
    let last = rows.last().unwrap();
    assert_eq!(last.pass, "fixpoint");
    assert_eq!(last.hit_max, Some(false));
    assert_eq!(last.counters, vec![("iterations".to_string(), 4)]);
    let iters: Vec<u32> = rows
        .iter()
        .filter(|r| r.pass == "remove-negate")
        .map(|r| r.iteration)
        .collect();
    assert_eq!(iters, vec![1, 2, 3, 4]);
    let v: serde_json::Value = serde_json::from_str(&last.to_json()).unwrap();
    assert_eq!(v["hit_max"], false);
}

#[test]
fn fixpoint_limit_is_a_warning_and_a_flag() {
    let reg = registry();
    let mut m = parse_module(NEGATES).unwrap();
    let mut pm = PassManager::new(&reg, "fixpoint(max=3)[always-changed]", opts()).unwrap();
    let report = pm.run(&mut m).unwrap();
    assert_eq!(report.warnings.len(), 1);
    assert!(report.warnings[0].contains("fixpoint(max=3)"));
    let last = pm.stats().last().unwrap().clone();
    assert_eq!(last.hit_max, Some(true));
    assert_eq!(last.counters, vec![("iterations".to_string(), 3)]);
}

#[test]
fn disabled_passes_are_skipped() {
    let reg = registry();
    let mut m = parse_module(NEGATES).unwrap();
    let o = PassManagerOptions {
        disabled: vec!["remove-negate".into()],
        ..opts()
    };
    let mut pm = PassManager::new(&reg, "fixpoint(max=10)[remove-negate,dce]", o).unwrap();
    let report = pm.run(&mut m).unwrap();
    assert!(!report.changed);
    assert_eq!(
        print_module(&m),
        print_module(&parse_module(NEGATES).unwrap())
    );
    assert!(pm.stats().iter().all(|r| r.pass != "remove-negate"));
}

#[test]
fn a_pass_that_misreports_no_change_is_caught() {
    let reg = registry();
    let mut m = parse_module(NEGATES).unwrap();
    let mut pm = PassManager::new(&reg, "dce,liar", opts()).unwrap();
    let e = pm.run(&mut m).unwrap_err();
    assert_eq!(e.pass, "liar");
    assert_eq!(e.run, 1);
    assert!(e.message.contains("reported no change"), "{e}");
}

#[test]
fn a_pass_that_breaks_the_module_is_named_and_its_input_dumped() {
    let reg = registry();
    let dir = tempfile::tempdir().unwrap();
    let mut m = parse_module(NEGATES).unwrap();
    let o = PassManagerOptions {
        dump_dir: Some(dir.path().to_path_buf()),
        ..opts()
    };
    let mut pm = PassManager::new(&reg, "fixpoint(max=2)[dce,breaker]", o).unwrap();
    let e = pm.run(&mut m).unwrap_err();
    assert_eq!(e.pass, "breaker");
    assert_eq!(e.iteration, 1);
    assert!(e.message.contains("does not verify"), "{e}");
    let dumped = e.dumped_input.clone().unwrap();
    assert_eq!(dumped, dir.path().join("001.breaker.input.hlo"));
    let text = std::fs::read_to_string(&dumped).unwrap();
    assert_eq!(text, print_module(&parse_module(NEGATES).unwrap()));
    assert!(e.to_string().contains("001.breaker.input.hlo"));
}

#[test]
fn pass_errors_name_the_pass() {
    let reg = registry();
    let mut m = parse_module(NEGATES).unwrap();
    let mut pm = PassManager::new(&reg, "dce,failer", opts()).unwrap();
    let e = pm.run(&mut m).unwrap_err();
    assert_eq!(e.pass, "failer");
    assert_eq!(
        e.to_string(),
        "pass 'failer' (run 1, iteration 0) failed: unsupported input"
    );
    // The row of the pass that ran before the failure is kept.
    assert_eq!(pm.stats().len(), 1);
}

#[test]
fn an_invalid_input_is_rejected_before_any_pass() {
    let reg = registry();
    let mut m = parse_module(NEGATES).unwrap();
    let r = m.root(m.entry());
    m.remove_inst(r);
    let mut pm = PassManager::new(&reg, "dce", opts()).unwrap();
    let e = pm.run(&mut m).unwrap_err();
    assert_eq!(e.pass, "verify-input");
    // With verification off the pass manager does not look.
    let o = PassManagerOptions {
        verify: VerifyMode::Off,
        check_changed: false,
        ..Default::default()
    };
    let mut pm = PassManager::new(&reg, "verify", o).unwrap();
    let e = pm.run(&mut m).unwrap_err();
    assert_eq!(e.pass, "verify");
}

#[test]
fn dumps_after_matching_passes() {
    let reg = registry();
    let dir = tempfile::tempdir().unwrap();
    let mut m = parse_module(NEGATES).unwrap();
    let o = PassManagerOptions {
        dump_dir: Some(dir.path().to_path_buf()),
        dump_after: Some(regex_lite::Regex::new("^(dce|cse)$").unwrap()),
        ..opts()
    };
    let mut pm = PassManager::new(&reg, "remove-negate,dce,cse,remove-negate,dce", o).unwrap();
    pm.run(&mut m).unwrap();
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    assert_eq!(names, vec!["001.dce.hlo", "002.cse.hlo", "004.dce.hlo"]);
    let last = std::fs::read_to_string(dir.path().join("004.dce.hlo")).unwrap();
    assert_eq!(last, print_module(&m));
    assert_eq!(last.matches("negate").count(), 1);
}

#[test]
fn analyses_are_cached_until_the_module_changes() {
    let reg = registry();
    let mut m = parse_module(NEGATES).unwrap();
    let before = COMPUTED.load(Ordering::SeqCst);
    let mut pm = PassManager::new(
        &reg,
        "uses-analysis,uses-analysis,remove-negate,uses-analysis,dce,uses-analysis",
        opts(),
    )
    .unwrap();
    pm.run(&mut m).unwrap();
    // Computed once for the first two runs and once after remove-negate changed the module;
    // dce changed nothing, so the last run hits the cache.
    assert_eq!(COMPUTED.load(Ordering::SeqCst) - before, 2);
}

#[test]
fn registry_describes_passes_and_creates_them() {
    let reg = registry();
    let d = reg.describe();
    assert!(d.contains("dce"), "{d}");
    assert!(d.contains("level=1 (int in 0..=3): how hard to try"), "{d}");
    assert!(reg.create("nope", &[]).is_err());
    let (mut p, o) = reg
        .create("tunable", &[("level".into(), "3".into())])
        .unwrap();
    assert_eq!(o.int("level"), 3);
    assert_eq!(o.str("mode"), "fast");
    assert!(o.bool("on"));
    let mut m = parse_module(NEGATES).unwrap();
    let (changed, counters) = run_pass(p.as_mut(), &mut m).unwrap();
    assert!(!changed);
    assert!(counters.is_empty());
    let names = reg.names();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    let _ = Arc::new(reg);
}

#[test]
fn registering_a_reserved_or_duplicate_name_fails() {
    let r = std::panic::catch_unwind(|| {
        let mut reg = PassRegistry::new();
        reg.register(PassInfo {
            name: "fixpoint",
            doc: "",
            options: &[],
            create: |_| Box::new(Failer),
        });
    });
    assert!(r.is_err());
    let r = std::panic::catch_unwind(|| {
        let mut reg = registry();
        axle_ir::passes::register(&mut reg);
    });
    assert!(r.is_err());
}
