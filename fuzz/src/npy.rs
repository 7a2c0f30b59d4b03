//! The `npy` target: bytes as a `.npy` file through the reader and the writer.
//!
//! Property: reading never panics; an array that reads writes back to bytes that read back to
//! the same array, and writing those again gives the same bytes.

use axle_ir::npy::{decode_npy, encode_npy};

/// Checks the property on `data`.
pub fn check(data: &[u8]) -> Result<(), String> {
    let Ok(lit) = decode_npy(data) else {
        return Ok(());
    };
    let bytes = encode_npy(&lit).map_err(|e| format!("an array that reads does not write: {e}"))?;
    let back = decode_npy(&bytes).map_err(|e| format!("written bytes do not read back: {e}"))?;
    if back != lit {
        return Err(format!(
            "the array changed through a write and a read: {:?} vs {:?}",
            lit.shape, back.shape
        ));
    }
    let again = encode_npy(&back).map_err(|e| format!("second write failed: {e}"))?;
    if again != bytes {
        return Err("writing is not deterministic".into());
    }
    Ok(())
}
