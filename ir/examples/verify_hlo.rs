//! Parses and verifies HLO files, printing each error under its source line (a debugging aid).
//! Usage: `verify_hlo FILE...`; exits with status 1 if any file fails.
fn main() {
    let mut failed = false;
    for path in std::env::args().skip(1) {
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("{path}: {e}");
                failed = true;
                continue;
            }
        };
        let start = std::time::Instant::now();
        let m = match axle_ir::parse_module(&text) {
            Ok(m) => m,
            Err(e) => {
                eprint!("{}", e.render(&path));
                failed = true;
                continue;
            }
        };
        let parsed = start.elapsed();
        match axle_ir::verify(&m) {
            Ok(()) => eprintln!(
                "{path}: ok ({} instructions; parse {parsed:?}, verify {:?})",
                m.num_live_insts(),
                start.elapsed() - parsed
            ),
            Err(errs) => {
                failed = true;
                eprintln!("{path}: {} errors", errs.len());
                print!("{}", errs.annotate_source(&text));
            }
        }
    }
    std::process::exit(i32::from(failed));
}
