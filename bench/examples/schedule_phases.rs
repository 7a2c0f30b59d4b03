//! Times scheduling and buffer assignment phase by phase on generated `layer_stack` graphs (and
//! any HLO files given): `cargo run --release -p axle-bench --example schedule_phases --
//! [LAYERS...] [FILE...]`. One line per phase: flatten + schedule per heuristic, then program,
//! liveness, aliases and the whole assignment.

use std::time::Instant;

/// CPU time of the whole process (all threads), in milliseconds: the machine is shared, so
/// wall time alone overstates.
fn cpu_ms() -> f64 {
    axle_bench::cpu_clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID) as f64 / 1e6
}

struct Timer(Instant, f64);

impl Timer {
    fn start() -> Timer {
        Timer(Instant::now(), cpu_ms())
    }
    fn show(&self, what: &str) {
        println!(
            "  {what:<18} {:>9.1} ms wall {:>9.1} ms cpu",
            self.0.elapsed().as_secs_f64() * 1e3,
            cpu_ms() - self.1
        );
    }
}

use axle::ir::{parse_module, Module};
use axle::schedule::alias::Aliases;
use axle::schedule::heap_simulator::{peak, simulate, Block};
use axle::schedule::liveness::Liveness;
use axle::schedule::program::Program;
use axle::schedule::{assign, compute_schedule, schedule_module, Heuristic, HloRules, Memory};

fn load(arg: &str) -> (String, Module) {
    let (name, text) = axle_bench::graph_text(arg);
    (name, parse_module(&text).expect("parses"))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args = if args.is_empty() {
        vec!["200".into(), "2000".into(), "20000".into()]
    } else {
        args
    };
    for a in &args {
        let (name, m) = load(a);
        let n = m.num_live_insts();
        println!("{name}: {n} instructions");
        let t = Timer::start();
        let g = axle::schedule::dep_graph::DepGraph::new(&m);
        t.show("dep graph");
        let t = Timer::start();
        let _mm = axle::schedule::memory_model::MemoryModel::new(&m, &g);
        t.show("memory model");
        let t = Timer::start();
        let _cg = axle::schedule::call_graph::CallGraph::new(&m);
        t.show("call graph");
        for h in [
            Heuristic::List,
            Heuristic::Dfs,
            Heuristic::PostOrder,
            Heuristic::Best,
        ] {
            let t = Timer::start();
            let _ = compute_schedule(&m, h);
            t.show(&format!("schedule {}", h.name()));
        }
        let mut s = m.clone();
        let t = Timer::start();
        schedule_module(&mut s, Heuristic::Best).expect("schedules");
        t.show("schedule_module");
        let t = Timer::start();
        let p = Program::new(&s, &HloRules).expect("program");
        t.show("program");
        let t = Timer::start();
        let l = Liveness::new(&s, &p);
        t.show("liveness");
        let t = Timer::start();
        let _ = Aliases::new(&s, &p, &l, &HloRules);
        t.show("aliases");
        let t = Timer::start();
        let asg = assign(&s, &HloRules).expect("assigns");
        t.show("assign (all)");
        println!(
            "  temp {} bytes, strategy {}",
            asg.temp_bytes,
            asg.strategy.name()
        );
        let blocks: Vec<Block> = asg
            .buffers()
            .iter()
            .filter(|b| matches!(b.memory, Memory::Temp { .. }) && b.size > 0)
            .map(|b| Block {
                size: b.size,
                start: b.span.0,
                end: b.span.1,
            })
            .collect();
        let t = Timer::start();
        let h = simulate(&blocks, 64, peak(&blocks));
        t.show("heap (best fit by size; the others unless it reached the peak)");
        println!("  {} blocks: {:?}", blocks.len(), h.tried);
    }
}
