//! quickcheck properties over generated valid modules: printing round-trips, and compaction keeps
//! the printed program the same (ids are renumbered; the text names instructions, not ids).

use axle_ir::gen::Recipe;
use axle_ir::{parse_module, print_module, InstId, Module};
use quickcheck::{QuickCheck, TestResult};

fn round_trip(r: Recipe) -> TestResult {
    let m = r.build();
    let text = print_module(&m);
    let m2 = match parse_module(&text) {
        Ok(m2) => m2,
        Err(e) => return TestResult::error(format!("{}\n{text}", e.render("generated"))),
    };
    let text2 = print_module(&m2);
    if text != text2 {
        return TestResult::error(format!("not a fixed point:\n{text}\n---\n{text2}"));
    }
    TestResult::from_bool(m.num_live_insts() == m2.num_live_insts())
}

#[test]
fn generated_modules_round_trip() {
    QuickCheck::new()
        .tests(500)
        .quickcheck(round_trip as fn(Recipe) -> TestResult);
}

/// Replaces some instructions by earlier ones of the same shape (never creating a cycle), so that
/// compaction has tombstones and forwarding to deal with.
fn mutate(m: &mut Module, picks: &[u8]) {
    let entry = m.entry();
    let ids: Vec<InstId> = m.comp_insts(entry);
    let mut rw = m.rewriter();
    for &p in picks {
        let live: Vec<InstId> = ids
            .iter()
            .copied()
            .filter(|&i| rw.module().is_live(i))
            .collect();
        if live.len() < 2 {
            break;
        }
        let old = live[p as usize % live.len()];
        let md = rw.module();
        if md.root(entry) == old || md.opcode(old) == axle_ir::Opcode::Parameter {
            continue;
        }
        let earlier = live.iter().copied().rfind(|&i| {
            i < old && md.shape_id(i) == md.shape_id(old) && md.layout_id(i) == md.layout_id(old)
        });
        if let Some(new) = earlier {
            rw.replace_all_uses(old, new);
        }
    }
    rw.finish();
}

fn compaction_keeps_program(r: Recipe, picks: Vec<u8>) -> TestResult {
    let mut m = r.build();
    mutate(&mut m, &picks);
    let before = print_module(&m);
    let epoch = m.epoch();
    let remap = m.compact();
    let after = print_module(&m);
    if before != after {
        return TestResult::error(format!(
            "compaction changed the program:\n{before}\n---\n{after}"
        ));
    }
    // Ids are dense after compaction and the epoch moved on.
    let dense = m.inst_capacity() == m.num_live_insts();
    let mapped = remap.insts.iter().filter(|i| !i.is_none()).count() == m.num_live_insts();
    TestResult::from_bool(dense && mapped && m.epoch() > epoch)
}

#[test]
fn compaction_keeps_the_printed_program() {
    QuickCheck::new()
        .tests(500)
        .quickcheck(compaction_keeps_program as fn(Recipe, Vec<u8>) -> TestResult);
}
