//! Host control flow, as XLA's GPU backend runs it with its while and conditional thunks: which
//! branch a `conditional` takes ([`branch_taken`]), and the buffers a `while` loop owns from one
//! iteration to the next ([`LoopState`]).
//!
//! The host computations are listed by `crate::host_computations`, and kernels are planned for
//! their instructions (`crate::kernels`). Both ways of running them read a `while`'s one-byte
//! predicate ([`pred_value`]) and a `conditional`'s selector ([`branch_taken`]) back to the
//! host: from the static assignment (`crate::arena`: the state and the branch outputs are the
//! assignment's buffers, filled by its copies), and, in the per-value fallback
//! (`crate::executor`), on a buffer per value, where the body's result buffers become the next
//! state ([`LoopState`]).
//!
//! Invariants: a [`LoopState`] owns exactly the buffers of its state that earlier iterations
//! made and that are still part of the state, each once: a leaf passed through unchanged,
//! repeated, or belonging to the loop's caller (an argument or the initial state) is never
//! freed by the loop, and every buffer an iteration made that is not part of the next state is
//! freed before the next iteration runs, so device memory does not grow with the trip count.

use crate::device::{BufferKey, Device, DeviceMemory};
use crate::NvptxError;

/// The branch a `conditional` with `branches` branches takes for selector bytes `selector` of
/// type `pred` (`true` takes the first branch, `false` the second) or `s32` (an index; an index
/// out of range takes the last branch, as XLA defines it).
pub fn branch_taken(pred: bool, selector: &[u8], branches: usize) -> Result<usize, NvptxError> {
    if branches == 0 {
        return Err(NvptxError::Run("a conditional with no branches".into()));
    }
    if pred {
        return match selector {
            [b] => Ok(if *b != 0 { 0 } else { 1.min(branches - 1) }),
            _ => Err(NvptxError::Run(format!(
                "a pred selector of {} bytes",
                selector.len()
            ))),
        };
    }
    let bytes: [u8; 4] = selector
        .try_into()
        .map_err(|_| NvptxError::Run(format!("an s32 index of {} bytes", selector.len())))?;
    let i = i32::from_le_bytes(bytes);
    Ok(usize::try_from(i)
        .ok()
        .filter(|&i| i < branches)
        .unwrap_or(branches - 1))
}

/// The value of a one-byte `pred` read back from the device.
pub fn pred_value(bytes: &[u8]) -> Result<bool, NvptxError> {
    match bytes {
        [b] => Ok(*b != 0),
        _ => Err(NvptxError::Run(format!(
            "a loop condition must give one pred byte, not {}",
            bytes.len()
        ))),
    }
}

/// The state of a running `while` loop: its buffers (one per array leaf of the state) and the
/// ones among them that the loop owns (made by its iterations).
pub struct LoopState {
    state: Vec<BufferKey>,
    owned: Vec<BufferKey>,
}

impl LoopState {
    /// The state before the first iteration: the loop's operand, owned by its caller.
    pub fn new(init: Vec<BufferKey>) -> LoopState {
        LoopState {
            state: init,
            owned: Vec::new(),
        }
    }

    /// The state's buffers.
    pub fn buffers(&self) -> &[BufferKey] {
        &self.state
    }

    /// Takes the body's result `next` as the new state, `made` being the buffers of `next` the
    /// body made (each once): frees every buffer the loop owned that `next` does not hold.
    pub fn advance<D: Device>(
        &mut self,
        mem: &DeviceMemory<D>,
        next: Vec<BufferKey>,
        made: Vec<BufferKey>,
    ) -> Result<(), NvptxError> {
        let mut owned = made;
        let mut freed = Ok(());
        for k in std::mem::take(&mut self.owned) {
            if next.contains(&k) {
                owned.push(k);
            } else if let Err(e) = mem.free(k) {
                freed = Err(e);
            }
        }
        self.state = next;
        self.owned = owned;
        freed
    }

    /// The final state and the buffers of it the loop made (the caller owns them now).
    pub fn finish(self) -> (Vec<BufferKey>, Vec<BufferKey>) {
        (self.state, self.owned)
    }

    /// Frees the buffers the loop owns (when it fails).
    pub fn release<D: Device>(self, mem: &DeviceMemory<D>) {
        for k in self.owned {
            // Owned by the loop alone, and freed once here.
            let _ = mem.free(k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pred_takes_the_first_branch_when_true() {
        assert_eq!(branch_taken(true, &[1], 2), Ok(0));
        assert_eq!(branch_taken(true, &[0], 2), Ok(1));
        assert!(branch_taken(true, &[1, 0], 2).is_err());
    }

    #[test]
    fn an_index_out_of_range_takes_the_last_branch() {
        let at = |i: i32| branch_taken(false, &i.to_le_bytes(), 3);
        assert_eq!(at(0), Ok(0));
        assert_eq!(at(2), Ok(2));
        assert_eq!(at(3), Ok(2));
        assert_eq!(at(-1), Ok(2));
        assert_eq!(at(i32::MIN), Ok(2));
        assert!(branch_taken(false, &[0], 3).is_err());
        assert!(branch_taken(false, &0i32.to_le_bytes(), 0).is_err());
    }

    #[test]
    fn a_loop_condition_gives_one_byte() {
        assert_eq!(pred_value(&[1]), Ok(true));
        assert_eq!(pred_value(&[0]), Ok(false));
        assert!(pred_value(&[]).is_err());
    }
}
