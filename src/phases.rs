//! The phases of a compilation and their times, as `axle compile --timings` and `axle bench`
//! print them.
//!
//! Invariants: phases are listed in the order they ran; a pass run several times (in a
//! fixed-point group or a pipeline naming it twice) is one phase with its runs' times summed;
//! shares in the table are of the sum of the phases listed, so they add up to 100%.

use std::time::Duration;

/// One phase of a compilation and the time it took.
#[derive(Clone, Debug, PartialEq)]
pub struct Phase {
    /// What ran: `verify`, `pass NAME` (a pass run several times is one phase, `xN`), or a
    /// backend phase.
    pub name: String,
    /// Its wall time (phases that run interleaved on several threads get their share of the
    /// wall time they ran in).
    pub time: Duration,
}

/// The phases of a pass pipeline's run: one per pass name in order of first run, its runs'
/// times summed (fixed-point groups' summary rows, which repeat their passes' time, are left
/// out).
pub fn pass_phases(rows: &[axle_ir::StatsRow]) -> Vec<Phase> {
    let mut out: Vec<(String, Duration, usize)> = Vec::new();
    let mut at: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for r in rows.iter().filter(|r| r.pass != "fixpoint") {
        let i = *at.entry(r.pass.as_str()).or_insert_with(|| {
            out.push((r.pass.clone(), Duration::ZERO, 0));
            out.len() - 1
        });
        out[i].1 += Duration::from_nanos(r.wall_ns);
        out[i].2 += 1;
    }
    out.into_iter()
        .map(|(pass, time, n)| Phase {
            name: if n > 1 {
                format!("pass {pass} x{n}")
            } else {
                format!("pass {pass}")
            },
            time,
        })
        .collect()
}

/// The phases as a table: one line per phase with its time in milliseconds and its share of
/// their sum, then the sum.
pub fn phase_table(phases: &[Phase]) -> String {
    let total: Duration = phases.iter().map(|p| p.time).sum();
    let width = phases
        .iter()
        .map(|p| p.name.len())
        .max()
        .unwrap_or(0)
        .max(5);
    let mut out = format!("{:<width$} {:>11} {:>7}\n", "phase", "ms", "share");
    for p in phases {
        let share = if total.is_zero() {
            0.0
        } else {
            100.0 * p.time.as_secs_f64() / total.as_secs_f64()
        };
        out.push_str(&format!(
            "{:<width$} {:>11.3} {:>6.1}%\n",
            p.name,
            p.time.as_secs_f64() * 1e3,
            share
        ));
    }
    out.push_str(&format!(
        "{:<width$} {:>11.3} {:>6.1}%\n",
        "total",
        total.as_secs_f64() * 1e3,
        100.0
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(pass: &str, ns: u64) -> axle_ir::StatsRow {
        axle_ir::StatsRow {
            pipeline: "test".into(),
            pass: pass.into(),
            run: 0,
            iteration: 0,
            wall_ns: ns,
            insts_before: 0,
            insts_after: 0,
            changed: false,
            counters: Vec::new(),
            hit_max: None,
        }
    }

    #[test]
    fn passes_run_twice_are_one_phase_and_group_summaries_are_left_out() {
        let rows = [
            row("cse", 10),
            row("dce", 5),
            row("cse", 7),
            row("fixpoint", 22),
        ];
        let p = pass_phases(&rows);
        let got: Vec<(&str, u64)> = p
            .iter()
            .map(|p| (p.name.as_str(), p.time.as_nanos() as u64))
            .collect();
        assert_eq!(got, vec![("pass cse x2", 17), ("pass dce", 5)]);
    }

    #[test]
    fn the_table_lists_every_phase_and_shares_add_up() {
        let phases = [
            Phase {
                name: "verify".into(),
                time: Duration::from_millis(1),
            },
            Phase {
                name: "lowering".into(),
                time: Duration::from_millis(3),
            },
        ];
        let t = phase_table(&phases);
        assert!(t.contains("verify") && t.contains(" 25.0%"), "{t}");
        assert!(t.contains("lowering") && t.contains(" 75.0%"), "{t}");
        assert!(t.lines().last().unwrap().starts_with("total"), "{t}");
    }
}
