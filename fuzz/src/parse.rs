//! The `parse` target: bytes as HLO text through the parser, the verifier and the printer.
//!
//! Property: nothing panics (errors are values), and a module that parses and verifies prints
//! to text that parses, verifies and prints identically (printing is a fixed point after one
//! round). Invalid modules are only printed: their text need not read back the same (say, an
//! instruction used before its definition is printed where it was created).

use axle_ir::{parse_module, print_module, verify};

/// Checks the property on `data` (non-UTF-8 bytes are not HLO text and pass).
pub fn check(data: &[u8]) -> Result<(), String> {
    let Ok(text) = std::str::from_utf8(data) else {
        return Ok(());
    };
    let Ok(m) = parse_module(text) else {
        return Ok(());
    };
    let printed = print_module(&m);
    if verify(&m).is_err() {
        return Ok(());
    }
    round_trip(&printed)
}

/// `printed`, the text of a valid module, parses, verifies and prints identically.
pub fn round_trip(printed: &str) -> Result<(), String> {
    let m2 = parse_module(printed)
        .map_err(|e| format!("printed text does not parse: {}", e.render("printed")))?;
    verify(&m2).map_err(|e| format!("printed text does not verify: {e}"))?;
    let again = print_module(&m2);
    if again != printed {
        return Err(format!(
            "printing is not a fixed point:\n--- first ---\n{printed}\n--- second ---\n{again}"
        ));
    }
    Ok(())
}
