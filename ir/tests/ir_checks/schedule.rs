//! The schedule side table: parsed from and printed as `is_scheduled=true`, checked by the
//! verifier, made stale by changes, repaired by the pass manager, renumbered by compaction.

use axle_ir::{
    parse_module, print_module, verify, InstId, Module, NewInst, Opcode, PassManager,
    PassManagerOptions, PassRegistry, Schedule,
};

const SCHEDULED: &str = "\
HloModule m, is_scheduled=true

ENTRY main {
  x = f32[4]{0} parameter(0)
  b = f32[4]{0} negate(x)
  a = f32[4]{0} exponential(x)
  ROOT t = (f32[4]{0}, f32[4]{0}) tuple(a, b)
}
";

fn id(m: &Module, name: &str) -> InstId {
    m.live_ids()
        .into_iter()
        .find(|&i| m.name(i) == name)
        .unwrap_or_else(|| panic!("no instruction {name}"))
}

fn names(m: &Module, seq: &[InstId]) -> Vec<String> {
    seq.iter().map(|&i| m.name(i).to_string()).collect()
}

#[test]
fn text_order_is_the_schedule_and_prints_back() {
    let m = parse_module(SCHEDULED).unwrap();
    let s = m.schedule().expect("is_scheduled=true gives a schedule");
    assert_eq!(
        names(&m, s.sequence(m.entry()).unwrap()),
        ["x", "b", "a", "t"]
    );
    assert!(m.header_attrs.iter().all(|(k, _)| k != "is_scheduled"));
    assert_eq!(print_module(&m), SCHEDULED);
    verify(&m).unwrap();
}

#[test]
fn a_set_schedule_orders_the_printed_text() {
    let mut m = parse_module(&SCHEDULED.replace(", is_scheduled=true", "")).unwrap();
    assert!(m.schedule().is_none());
    assert!(!print_module(&m).contains("is_scheduled"));
    let seq = ["x", "a", "b", "t"].map(|n| id(&m, n)).to_vec();
    let mut s = Schedule::new();
    s.set_sequence(m.entry(), seq);
    m.set_schedule(s);
    verify(&m).unwrap();
    let text = print_module(&m);
    assert!(
        text.starts_with("HloModule m, is_scheduled=true\n"),
        "{text}"
    );
    let a = text.find("a = ").unwrap();
    let b = text.find("b = ").unwrap();
    assert!(a < b, "{text}");
    // Parsing the printed text gives the same schedule back.
    let m2 = parse_module(&text).unwrap();
    assert_eq!(print_module(&m2), text);
}

#[test]
fn scheduled_text_with_a_use_before_its_definition_is_an_error() {
    let text = "HloModule m, is_scheduled=true\n\nENTRY main {\n  x = f32[4]{0} parameter(0)\n  ROOT a = f32[4]{0} negate(b)\n  b = f32[4]{0} exponential(x)\n}\n";
    let e = parse_module(text).unwrap_err();
    assert_eq!((e.line, e.col), (5, 8), "{e}");
    assert!(e.msg.contains("comes before %b"), "{e}");
    // The same text without the header is fine: unscheduled text may refer forward.
    parse_module(&text.replace(", is_scheduled=true", "")).unwrap();
    let e =
        parse_module(&SCHEDULED.replace("is_scheduled=true", "is_scheduled=maybe")).unwrap_err();
    assert!(e.msg.contains("true or false"), "{e}");
}

#[test]
fn the_verifier_checks_the_schedule() {
    let mut m = parse_module(SCHEDULED).unwrap();
    let (x, a, b, t) = (id(&m, "x"), id(&m, "a"), id(&m, "b"), id(&m, "t"));
    let mut s = Schedule::new();
    s.set_sequence(m.entry(), vec![x, t, a]);
    m.set_schedule(s);
    let errs = verify(&m).unwrap_err().to_string();
    assert!(errs.contains("runs %t before %a"), "{errs}");
    assert!(errs.contains("does not list %b"), "{errs}");
    let mut s = Schedule::new();
    s.set_sequence(m.entry(), vec![x, b, b, a, t]);
    m.set_schedule(s);
    let errs = verify(&m).unwrap_err().to_string();
    assert!(errs.contains("lists %b twice"), "{errs}");
}

#[test]
fn a_change_makes_it_stale_and_an_update_repairs_it() {
    let mut m = parse_module(SCHEDULED).unwrap();
    let (x, a, t) = (id(&m, "x"), id(&m, "a"), id(&m, "t"));
    let mut rw = m.rewriter();
    let shape = rw.module().shape_id(a);
    let layout = rw.module().layout_id(a);
    let n = rw.add(
        rw.module().entry(),
        NewInst {
            opcode: Opcode::Sin,
            shape,
            layout,
            operands: vec![x],
            attrs: vec![],
            name: Some("s".into()),
        },
    );
    rw.replace_all_uses(a, n);
    rw.finish();
    assert!(m.schedule().is_none(), "a change makes the schedule stale");
    assert!(m.has_stale_schedule());
    assert!(m.update_schedule());
    let seq = m.schedule().unwrap().sequence(m.entry()).unwrap().to_vec();
    // `a` left; the new `s` runs right before its first user, `t`.
    assert_eq!(names(&m, &seq), ["x", "b", "s", "t"]);
    verify(&m).unwrap();
    // Compaction renumbers it and keeps it current.
    let remap = m.compact();
    let s = m.schedule().expect("compaction keeps the schedule current");
    let seq2: Vec<String> = names(&m, s.sequence(m.entry()).unwrap());
    assert_eq!(seq2, ["x", "b", "s", "t"]);
    assert!(remap.insts[t.index()].index() < m.inst_capacity());
    verify(&m).unwrap();
}

#[test]
fn the_pass_manager_repairs_the_schedule_after_a_changing_pass() {
    let text = SCHEDULED.replace(
        "  a = f32[4]{0} exponential(x)\n",
        "  a = f32[4]{0} exponential(x)\n  dead = f32[4]{0} sine(x)\n",
    );
    let mut m = parse_module(&text).unwrap();
    let mut reg = PassRegistry::new();
    axle_ir::passes::register(&mut reg);
    let mut pm = PassManager::new(&reg, "dce", PassManagerOptions::default()).unwrap();
    pm.run(&mut m).unwrap();
    assert_eq!(
        pm.stats()[0].counters,
        vec![
            ("removed_insts".to_string(), 1),
            ("schedule-updated".to_string(), 1)
        ]
    );
    assert_eq!(print_module(&m), SCHEDULED);
}
