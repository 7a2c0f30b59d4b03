//! The `axle` command-line tool.

fn main() {
    println!("axle");
}
