//! Prints a file in canonical form (a debugging aid).
fn main() {
    let path = std::env::args().nth(1).expect("usage: print_hlo FILE");
    let text = std::fs::read_to_string(&path).expect("read");
    match axle_ir::parse_module(&text) {
        Ok(m) => print!("{}", axle_ir::print_module(&m)),
        Err(e) => eprint!("{}", e.render(&path)),
    }
}
