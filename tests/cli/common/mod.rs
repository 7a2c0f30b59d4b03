//! Helpers shared by the command-line tests: the output of an `axle` run as text, test files,
//! and the shape of a failure (its exit status, nothing on standard output, the error's words).

use std::path::Path;
use std::process::Output;

/// Standard error, as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// Standard output, as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

/// Writes `text` to `dir/name` and returns the path as text.
pub fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

/// Asserts a failure with `code`, nothing on stdout, and every fragment on stderr.
pub fn fails_with(o: &Output, code: i32, fragments: &[&str]) {
    assert_eq!(o.status.code(), Some(code), "stderr: {}", stderr(o));
    assert!(o.stdout.is_empty(), "stdout not empty: {}", stdout(o));
    let e = stderr(o);
    for f in fragments {
        assert!(e.contains(f), "stderr lacks {f:?}:\n{e}");
    }
}
