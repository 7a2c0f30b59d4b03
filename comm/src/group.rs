//! [`rank_in_group`]: the check every transport makes of a collective's group.
//!
//! Invariant: a group that passes names each device at most once, only devices of the run,
//! and the calling device among them.

use crate::{CommError, DeviceId};

/// Checks `group` for device `me` of a run of `n` devices (ids below `n`, none twice, `me`
/// among them) and returns `me`'s index in it. `world` names the run's devices in the message
/// for an id out of range, with `{n}` standing for their number: "the run's {n} devices".
pub fn rank_in_group(
    me: DeviceId,
    n: u32,
    group: &[DeviceId],
    world: &str,
) -> Result<usize, CommError> {
    let invalid = |msg: String| CommError::Invalid { device: me, msg };
    let mut seen = vec![false; n as usize];
    for &d in group {
        match seen.get_mut(d as usize) {
            None => {
                return Err(invalid(format!(
                    "device {d} of group {group:?} is outside {}",
                    world.replace("{n}", &n.to_string())
                )))
            }
            Some(s) if *s => {
                return Err(invalid(format!("device {d} is twice in group {group:?}")))
            }
            Some(s) => *s = true,
        }
    }
    group
        .iter()
        .position(|&d| d == me)
        .ok_or_else(|| invalid(format!("group {group:?} does not contain this device")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_checked() {
        assert_eq!(rank_in_group(2, 4, &[3, 2], "the run's {n} devices"), Ok(1));
        let msg = |r: Result<usize, CommError>| r.unwrap_err().to_string();
        assert_eq!(
            msg(rank_in_group(0, 2, &[0, 5], "the job's {n} ranks")),
            "device 0: device 5 of group [0, 5] is outside the job's 2 ranks"
        );
        assert_eq!(
            msg(rank_in_group(0, 2, &[0, 0], "the run's {n} devices")),
            "device 0: device 0 is twice in group [0, 0]"
        );
        assert_eq!(
            msg(rank_in_group(1, 2, &[0], "the run's {n} devices")),
            "device 1: group [0] does not contain this device"
        );
    }
}
