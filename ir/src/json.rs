//! JSON string literals for the JSON the project writes by hand (pass statistics, exploration
//! rows, traces): [`write_string`] escapes exactly what RFC 8259 requires (`"`, `\`, and the
//! control characters, with the short forms for newline, carriage return and tab), so any
//! UTF-8 text round-trips through a JSON parser.

use std::fmt::Write;

/// Appends `s` to `out` as a JSON string literal, quotes included.
pub fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
