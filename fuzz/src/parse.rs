//! The `parse` target: bytes as HLO text through the parser, the verifier and the printer.
//!
//! Property: nothing panics (errors are values); a module that parses prints to text that
//! parses again and prints identically (printing is a fixed point after one round), and a
//! module that verifies still verifies after the round trip.

use axle_ir::{parse_module, print_module, verify};

/// Checks the property on `data` (non-UTF-8 bytes are not HLO text and pass).
pub fn check(data: &[u8]) -> Result<(), String> {
    let Ok(text) = std::str::from_utf8(data) else {
        return Ok(());
    };
    let Ok(m) = parse_module(text) else {
        return Ok(());
    };
    let valid = verify(&m).is_ok();
    let printed = print_module(&m);
    let m2 = parse_module(&printed)
        .map_err(|e| format!("printed text does not parse: {}", e.render("printed")))?;
    if valid {
        verify(&m2).map_err(|e| format!("verified before the round trip, not after: {e}"))?;
    }
    let again = print_module(&m2);
    if again != printed {
        return Err(format!(
            "printing is not a fixed point:\n--- first ---\n{printed}\n--- second ---\n{again}"
        ));
    }
    Ok(())
}
