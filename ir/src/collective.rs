//! Collectives' device groups and how devices map onto them, as XLA defines them.
//!
//! - [`ReplicaGroups`]: `replica_groups=` in every form XLA prints: explicit lists
//!   (`{{0,1},{2,3}}`), the empty list `{}` (one group of every device), and the iota form
//!   `[G,S]<=[d0,d1,...]` with an optional transpose `T(p0,p1,...)` (`G` groups of `S` devices:
//!   the iota `0..d0*d1*...` reshaped to `[d0,d1,...]`, transposed by the permutation, reshaped
//!   to `[G,S]`; row `g` is group `g`).
//! - [`SourceTargetPair`]: one `{source,target}` of `source_target_pairs=`.
//! - [`GroupMode`]: what the ids in a group name (replica ids, partition ids, or flattened
//!   device ids), chosen from `channel_id` and `use_global_device_ids` as XLA's
//!   `GetCollectiveOpGroupMode` does.
//! - [`DeviceMesh`]: `replica_count` x `num_partitions` devices, device `d` being replica
//!   `d / num_partitions` and partition `d % num_partitions` (XLA's default device assignment);
//!   [`DeviceMesh::participants`] is XLA's `GetParticipatingDevices`: the devices a collective
//!   on device `d` meets, in group order (the order results are gathered and reduced in).
//!
//! Invariants: a validated [`ReplicaGroups`] expands to groups of non-negative ids with no id
//! in two groups; every function here reports a bad group or id as an `Err` naming it, never a
//! panic.

use std::fmt;

/// The iota form of replica groups, `[num_groups,group_size]<=[reshape_dims]T(transpose)`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IotaGroups {
    /// The number of groups.
    pub num_groups: i64,
    /// Devices per group.
    pub group_size: i64,
    /// The shape the iota is reshaped to before the transpose.
    pub reshape_dims: Box<[i64]>,
    /// The transpose permutation, as written (`None`: no `T(...)`).
    pub transpose: Option<Box<[i64]>>,
}

/// The most devices [`IotaGroups::expand`] lists (a run has far fewer; the bound keeps a
/// hostile iota form from allocating without limit).
pub const MAX_LISTED_DEVICES: i64 = 1 << 20;

/// `replica_groups=`: explicit lists (empty: all devices form one group) or the iota form.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ReplicaGroups {
    /// `{{0,1},{2,3}}`; `{}` is the empty list.
    List(Box<[Box<[i64]>]>),
    /// `[2,4]<=[4,2]T(1,0)`.
    Iota(IotaGroups),
}

/// One `{source,target}` entry of `source_target_pairs`.
pub type SourceTargetPair = [i64; 2];

fn join(v: &[i64]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

impl fmt::Display for IotaGroups {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{},{}]<=[{}]",
            self.num_groups,
            self.group_size,
            join(&self.reshape_dims)
        )?;
        if let Some(t) = &self.transpose {
            write!(f, "T({})", join(t))?;
        }
        Ok(())
    }
}

impl fmt::Display for ReplicaGroups {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplicaGroups::Iota(i) => write!(f, "{i}"),
            ReplicaGroups::List(gs) => {
                f.write_str("{")?;
                for (k, g) in gs.iter().enumerate() {
                    if k > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{{{}}}", join(g))?;
                }
                f.write_str("}")
            }
        }
    }
}

/// Writes `source_target_pairs` as XLA prints them: `{{0,1},{1,2}}`.
pub fn format_pairs(pairs: &[SourceTargetPair]) -> String {
    let items: Vec<String> = pairs.iter().map(|[s, t]| format!("{{{s},{t}}}")).collect();
    format!("{{{}}}", items.join(","))
}

/// Why replica groups, a collective's group mode or the devices of a run are refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CollectiveError {
    /// An iota form's group count or size is below 1.
    #[error("replica groups {groups}: the group count and size must be positive")]
    GroupSize {
        /// The groups, as printed.
        groups: String,
    },
    /// An iota form without reshape dimensions, or with one below 1.
    #[error("replica groups {groups}: the reshape dimensions must be positive")]
    ReshapeDims {
        /// The groups, as printed.
        groups: String,
    },
    /// An iota form of more than 2^31 devices.
    #[error("replica groups {groups}: more than 2^31 devices")]
    TooManyDevices {
        /// The groups, as printed.
        groups: String,
    },
    /// An iota form whose groups do not hold the devices of its reshape dimensions.
    #[error(
        "replica groups {groups}: {num_groups} groups of {group_size} devices do not hold the {} \
         devices of the reshape dimensions",
        .devices.map_or("(overflowing)".to_string(), |t| t.to_string())
    )]
    DeviceCount {
        /// The groups, as printed.
        groups: String,
        /// The group count.
        num_groups: i64,
        /// The group size.
        group_size: i64,
        /// The devices of the reshape dimensions (`None`: overflowing).
        devices: Option<i64>,
    },
    /// An iota form's transpose that does not permute its reshape dimensions.
    #[error("replica groups {groups}: the transpose must permute the {rank} reshape dimensions")]
    Transpose {
        /// The groups, as printed.
        groups: String,
        /// The number of reshape dimensions.
        rank: usize,
    },
    /// An iota form of more devices than are listed ([`MAX_LISTED_DEVICES`]).
    #[error(
        "replica groups {groups}: more than {} devices to list",
        MAX_LISTED_DEVICES
    )]
    TooManyToList {
        /// The groups, as printed.
        groups: String,
    },
    /// A group without devices.
    #[error("replica groups {groups}: a group is empty")]
    EmptyGroup {
        /// The groups, as printed.
        groups: String,
    },
    /// A negative id.
    #[error("replica groups {groups}: id {id} is negative")]
    NegativeId {
        /// The groups, as printed.
        groups: String,
        /// The id.
        id: i64,
    },
    /// An id in two groups.
    #[error("replica groups {groups}: id {id} is in two groups")]
    RepeatedId {
        /// The groups, as printed.
        groups: String,
        /// The id.
        id: i64,
    },
    /// `use_global_device_ids=true` without a `channel_id`.
    #[error("use_global_device_ids=true needs a channel_id")]
    GlobalIdsWithoutChannel,
    /// A run on no device.
    #[error("a run needs at least one device")]
    NoDevices,
    /// A module whose header names another number of devices than the run has.
    #[error(
        "the module is for {} devices (replica_count={replicas}, num_partitions={partitions}), not {devices}",
        u64::from(*.replicas) * u64::from(*.partitions)
    )]
    MeshSize {
        /// The header's `replica_count`.
        replicas: u32,
        /// The header's `num_partitions`.
        partitions: u32,
        /// The run's devices.
        devices: u32,
    },
    /// An id in groups or pairs beyond the run's replicas, partitions or devices.
    #[error("{what} {id} is out of range: the run has {bound}")]
    IdOutOfRange {
        /// What the id names (`replica id`, `partition id`, `device id`).
        what: &'static str,
        /// The id.
        id: i64,
        /// How many there are.
        bound: u32,
    },
    /// A device whose id is in none of the groups.
    #[error("{what} {id} (device {device}) is in no replica group")]
    NoGroup {
        /// What the id names.
        what: &'static str,
        /// The device's id of that kind.
        id: u32,
        /// The device.
        device: u32,
    },
    /// Two source-target pairs with one target.
    #[error("{what} {id} is the target of two source-target pairs")]
    TwoSources {
        /// What the id names.
        what: &'static str,
        /// The target.
        id: u32,
    },
}

impl From<CollectiveError> for String {
    fn from(e: CollectiveError) -> String {
        e.to_string()
    }
}

impl IotaGroups {
    /// Checks the form: positive sizes, `num_groups * group_size` equal to the product of the
    /// reshape dimensions, and a transpose that permutes them.
    pub fn validate(&self) -> Result<(), CollectiveError> {
        let groups = || self.to_string();
        if self.num_groups < 1 || self.group_size < 1 {
            return Err(CollectiveError::GroupSize { groups: groups() });
        }
        if self.reshape_dims.is_empty() || self.reshape_dims.iter().any(|&d| d < 1) {
            return Err(CollectiveError::ReshapeDims { groups: groups() });
        }
        let total = self
            .reshape_dims
            .iter()
            .try_fold(1i64, |a, &d| a.checked_mul(d));
        if total.is_none_or(|t| t > 1 << 31) {
            return Err(CollectiveError::TooManyDevices { groups: groups() });
        }
        if total != self.num_groups.checked_mul(self.group_size) {
            return Err(CollectiveError::DeviceCount {
                groups: groups(),
                num_groups: self.num_groups,
                group_size: self.group_size,
                devices: total,
            });
        }
        if let Some(t) = &self.transpose {
            let mut seen = vec![false; self.reshape_dims.len()];
            let ok = t.len() == self.reshape_dims.len()
                && t.iter().all(|&p| {
                    usize::try_from(p)
                        .ok()
                        .and_then(|p| seen.get_mut(p))
                        .is_some_and(|s| !std::mem::replace(s, true))
                });
            if !ok {
                return Err(CollectiveError::Transpose {
                    groups: groups(),
                    rank: self.reshape_dims.len(),
                });
            }
        }
        Ok(())
    }

    /// The groups this form stands for (after [`IotaGroups::validate`]); at most
    /// [`MAX_LISTED_DEVICES`] devices are listed.
    pub fn expand(&self) -> Result<Vec<Vec<i64>>, CollectiveError> {
        self.validate()?;
        if self.num_groups * self.group_size > MAX_LISTED_DEVICES {
            return Err(CollectiveError::TooManyToList {
                groups: self.to_string(),
            });
        }
        let dims = &self.reshape_dims;
        let rank = dims.len();
        let perm: Vec<usize> = match &self.transpose {
            Some(t) => t.iter().map(|&p| p as usize).collect(),
            None => (0..rank).collect(),
        };
        let total = (self.num_groups * self.group_size) as usize;
        // Strides of the iota in its reshaped (row-major) form.
        let mut strides = vec![1i64; rank];
        for d in (0..rank.saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * dims[d + 1];
        }
        // The transposed array has dimensions dims[perm[k]]; walk it in row-major order.
        let tdims: Vec<i64> = perm.iter().map(|&p| dims[p]).collect();
        let mut idx = vec![0i64; rank];
        let mut flat = Vec::with_capacity(total);
        for _ in 0..total {
            flat.push((0..rank).map(|k| idx[k] * strides[perm[k]]).sum::<i64>());
            for k in (0..rank).rev() {
                idx[k] += 1;
                if idx[k] < tdims[k] {
                    break;
                }
                idx[k] = 0;
            }
        }
        Ok(flat
            .chunks(self.group_size as usize)
            .map(|c| c.to_vec())
            .collect())
    }
}

impl ReplicaGroups {
    /// The groups as lists of ids (empty: one group of every device), checked: ids are
    /// non-negative, groups are non-empty and no id is in two groups.
    pub fn expand(&self) -> Result<Vec<Vec<i64>>, CollectiveError> {
        let groups = match self {
            ReplicaGroups::List(gs) => gs.iter().map(|g| g.to_vec()).collect(),
            ReplicaGroups::Iota(i) => i.expand()?,
        };
        let mut seen = std::collections::BTreeSet::new();
        for g in &groups {
            if g.is_empty() {
                return Err(CollectiveError::EmptyGroup {
                    groups: self.to_string(),
                });
            }
            for &id in g {
                if id < 0 {
                    return Err(CollectiveError::NegativeId {
                        groups: self.to_string(),
                        id,
                    });
                }
                if !seen.insert(id) {
                    return Err(CollectiveError::RepeatedId {
                        groups: self.to_string(),
                        id,
                    });
                }
            }
        }
        Ok(groups)
    }

    /// Checks the groups without listing an iota form's devices: the iota form's sizes and
    /// transpose, or for lists what [`ReplicaGroups::expand`] checks.
    pub fn validate(&self) -> Result<(), CollectiveError> {
        match self {
            ReplicaGroups::Iota(i) => i.validate(),
            ReplicaGroups::List(_) => self.expand().map(|_| ()),
        }
    }

    /// Whether this is the empty list `{}` (every device in one group).
    pub fn is_empty_list(&self) -> bool {
        matches!(self, ReplicaGroups::List(g) if g.is_empty())
    }

    /// The size of every group when all groups have one size and the form says so without a
    /// device count (`None` for `{}` and for lists of mixed sizes).
    pub fn uniform_group_size(&self) -> Option<i64> {
        match self {
            ReplicaGroups::Iota(i) => Some(i.group_size),
            ReplicaGroups::List(gs) => {
                let n = gs.first()?.len();
                gs.iter().all(|g| g.len() == n).then_some(n as i64)
            }
        }
    }
}

/// What the ids in a collective's groups name (XLA's `CollectiveOpGroupMode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupMode {
    /// Replica ids; each device meets the devices of its partition (no `channel_id`).
    CrossReplica,
    /// Partition ids; each device meets the devices of its replica (`channel_id`, and an op
    /// without `use_global_device_ids`: all-to-all, collective-permute, collective-broadcast).
    CrossPartition,
    /// Replica ids; each device meets every partition of the replicas in its group
    /// (`channel_id` and `use_global_device_ids=false`).
    CrossReplicaAndPartition,
    /// Flattened device ids `replica * num_partitions + partition` (`channel_id` and
    /// `use_global_device_ids=true`).
    FlattenedId,
}

impl GroupMode {
    /// The mode of a collective with or without a `channel_id`, and with `use_global_device_ids`
    /// given (`Some`) for the ops that have the flag (all-reduce, all-gather, reduce-scatter)
    /// or `None` for the others.
    pub fn of(
        has_channel_id: bool,
        use_global_device_ids: Option<bool>,
    ) -> Result<Self, CollectiveError> {
        match (has_channel_id, use_global_device_ids) {
            (false, Some(true)) => Err(CollectiveError::GlobalIdsWithoutChannel),
            (false, _) => Ok(GroupMode::CrossReplica),
            (true, None) => Ok(GroupMode::CrossPartition),
            (true, Some(false)) => Ok(GroupMode::CrossReplicaAndPartition),
            (true, Some(true)) => Ok(GroupMode::FlattenedId),
        }
    }
}

/// The devices of a run: `replicas` x `partitions`, device `d` being replica
/// `d / partitions` and partition `d % partitions`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DeviceMesh {
    /// `replica_count`.
    pub replicas: u32,
    /// `num_partitions`.
    pub partitions: u32,
}

impl DeviceMesh {
    /// The mesh of a run of `module` on `devices` devices: the header's `replica_count` x
    /// `num_partitions` when they name more than one device (then they must multiply to
    /// `devices`); otherwise `devices` partitions when any instruction has a `channel_id` (as
    /// JAX's `shard_map` modules do), else `devices` replicas (cross-replica collectives, as
    /// written without channels).
    pub fn for_module(module: &crate::Module, devices: u32) -> Result<DeviceMesh, CollectiveError> {
        if devices == 0 {
            return Err(CollectiveError::NoDevices);
        }
        let (r, p) = (module.replica_count(), module.num_partitions());
        if u64::from(r) * u64::from(p) > 1 {
            if u64::from(r) * u64::from(p) != u64::from(devices) {
                return Err(CollectiveError::MeshSize {
                    replicas: r,
                    partitions: p,
                    devices,
                });
            }
            return Ok(DeviceMesh {
                replicas: r,
                partitions: p,
            });
        }
        let channels = module
            .live_ids()
            .into_iter()
            .any(|i| module.attr(i, &crate::AttrKey::ChannelId).is_some());
        Ok(if channels {
            DeviceMesh {
                replicas: 1,
                partitions: devices,
            }
        } else {
            DeviceMesh {
                replicas: devices,
                partitions: 1,
            }
        })
    }

    /// The number of devices.
    pub fn devices(&self) -> u32 {
        self.replicas.saturating_mul(self.partitions)
    }

    /// The replica id of `device`.
    pub fn replica_of(&self, device: u32) -> u32 {
        device / self.partitions
    }

    /// The partition id of `device`.
    pub fn partition_of(&self, device: u32) -> u32 {
        device % self.partitions
    }

    /// The device of replica `r`, partition `p`.
    pub fn device(&self, r: u32, p: u32) -> u32 {
        r * self.partitions + p
    }

    fn id(&self, x: i64, bound: u32, what: &'static str) -> Result<u32, CollectiveError> {
        u32::try_from(x)
            .ok()
            .filter(|&v| v < bound)
            .ok_or(CollectiveError::IdOutOfRange { what, id: x, bound })
    }

    /// The devices a collective on `device` meets, in group order, for groups `groups` (as
    /// [`ReplicaGroups::expand`] gives them; empty: one group of all) in `mode`.
    pub fn participants(
        &self,
        device: u32,
        groups: &[Vec<i64>],
        mode: GroupMode,
    ) -> Result<Vec<u32>, CollectiveError> {
        let (r, p) = (self.replica_of(device), self.partition_of(device));
        let all = |n: u32| vec![(0..n as i64).collect::<Vec<i64>>()];
        let (space, mine, what) = match mode {
            GroupMode::CrossReplica | GroupMode::CrossReplicaAndPartition => {
                (self.replicas, r, "replica id")
            }
            GroupMode::CrossPartition => (self.partitions, p, "partition id"),
            GroupMode::FlattenedId => (self.devices(), device, "device id"),
        };
        let owned;
        let groups = if groups.is_empty() {
            owned = all(space);
            &owned[..]
        } else {
            groups
        };
        let mut found = None;
        for g in groups {
            let ids: Vec<u32> = g
                .iter()
                .map(|&x| self.id(x, space, what))
                .collect::<Result<_, _>>()?;
            if ids.contains(&mine) {
                found = Some(ids);
                break;
            }
        }
        let Some(ids) = found else {
            return Err(CollectiveError::NoGroup {
                what,
                id: mine,
                device,
            });
        };
        Ok(match mode {
            GroupMode::CrossReplica => ids.iter().map(|&x| self.device(x, p)).collect(),
            GroupMode::CrossPartition => ids.iter().map(|&x| self.device(r, x)).collect(),
            GroupMode::CrossReplicaAndPartition => ids
                .iter()
                .flat_map(|&x| (0..self.partitions).map(move |q| (x, q)))
                .map(|(x, q)| self.device(x, q))
                .collect(),
            GroupMode::FlattenedId => ids,
        })
    }

    /// For `collective-permute` on `device`: the devices it sends to and the device it receives
    /// from (if any), with pairs naming replica ids (`CrossReplica`) or partition ids
    /// (`CrossPartition`). Two pairs with one target are an error.
    pub fn permute_peers(
        &self,
        device: u32,
        pairs: &[SourceTargetPair],
        mode: GroupMode,
    ) -> Result<(Vec<u32>, Option<u32>), CollectiveError> {
        let (r, p) = (self.replica_of(device), self.partition_of(device));
        let (space, mine, what) = match mode {
            GroupMode::CrossPartition => (self.partitions, p, "partition id"),
            GroupMode::FlattenedId => (self.devices(), device, "device id"),
            _ => (self.replicas, r, "replica id"),
        };
        let to_device = |x: u32| match mode {
            GroupMode::CrossPartition => self.device(r, x),
            GroupMode::FlattenedId => x,
            _ => self.device(x, p),
        };
        let mut sends = Vec::new();
        let mut recv = None;
        let mut targets = std::collections::BTreeSet::new();
        for &[s, t] in pairs {
            let (s, t) = (self.id(s, space, what)?, self.id(t, space, what)?);
            if !targets.insert(t) {
                return Err(CollectiveError::TwoSources { what, id: t });
            }
            if s == mine {
                sends.push(to_device(t));
            }
            if t == mine {
                recv = Some(to_device(s));
            }
        }
        Ok((sends, recv))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iota(g: i64, s: i64, dims: &[i64], t: Option<&[i64]>) -> ReplicaGroups {
        ReplicaGroups::Iota(IotaGroups {
            num_groups: g,
            group_size: s,
            reshape_dims: dims.into(),
            transpose: t.map(Into::into),
        })
    }

    #[test]
    fn iota_forms_expand_as_xla_documents() {
        // [2,4]<=[8]: {{0,1,2,3},{4,5,6,7}}.
        assert_eq!(
            iota(2, 4, &[8], None).expand().unwrap(),
            vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]
        );
        // [4,2]<=[2,4]T(1,0): the iota [[0,1,2,3],[4,5,6,7]] transposed: {{0,4},{1,5},...}.
        assert_eq!(
            iota(4, 2, &[2, 4], Some(&[1, 0])).expand().unwrap(),
            vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]
        );
        // [2,4]<=[2,2,2]T(2,1,0): element (i,j,k) of the transpose is 4k+2j+i.
        assert_eq!(
            iota(2, 4, &[2, 2, 2], Some(&[2, 1, 0])).expand().unwrap(),
            vec![vec![0, 4, 2, 6], vec![1, 5, 3, 7]]
        );
        assert_eq!(
            iota(4, 2, &[2, 4], Some(&[1, 0])).to_string(),
            "[4,2]<=[2,4]T(1,0)"
        );
    }

    #[test]
    fn bad_groups_are_errors() {
        assert!(matches!(
            iota(3, 2, &[8], None).expand(),
            Err(CollectiveError::DeviceCount {
                devices: Some(8),
                ..
            })
        ));
        assert!(matches!(
            iota(4, 2, &[2, 4], Some(&[0, 0])).expand(),
            Err(CollectiveError::Transpose { rank: 2, .. })
        ));
        assert!(matches!(
            iota(0, 2, &[0], None).expand(),
            Err(CollectiveError::GroupSize { .. })
        ));
        // Hostile sizes are errors, not allocations.
        let huge = iota(1, 1 << 40, &[1 << 40], None);
        assert!(huge
            .validate()
            .unwrap_err()
            .to_string()
            .contains("more than 2^31 devices"));
        let big = iota(1, 1 << 30, &[1 << 30], None);
        assert!(big.validate().is_ok());
        assert!(big
            .expand()
            .unwrap_err()
            .to_string()
            .contains("devices to list"));
        let dup = ReplicaGroups::List(vec![vec![0, 1].into(), vec![1].into()].into());
        let e = dup.expand().unwrap_err();
        assert!(matches!(e, CollectiveError::RepeatedId { id: 1, .. }));
        assert!(e.to_string().contains("two groups"));
        let neg = ReplicaGroups::List(vec![vec![-1].into()].into());
        assert!(matches!(
            neg.expand(),
            Err(CollectiveError::NegativeId { id: -1, .. })
        ));
    }

    #[test]
    fn participants_follow_the_group_mode() {
        let mesh = DeviceMesh {
            replicas: 2,
            partitions: 2,
        };
        let g = vec![vec![0, 1]];
        // Device 3 is replica 1, partition 1.
        assert_eq!(
            mesh.participants(3, &g, GroupMode::CrossReplica).unwrap(),
            vec![1, 3]
        );
        assert_eq!(
            mesh.participants(3, &g, GroupMode::CrossPartition).unwrap(),
            vec![2, 3]
        );
        assert_eq!(
            mesh.participants(3, &g, GroupMode::CrossReplicaAndPartition)
                .unwrap(),
            vec![0, 1, 2, 3]
        );
        assert_eq!(
            mesh.participants(3, &[vec![3, 0], vec![1, 2]], GroupMode::FlattenedId)
                .unwrap(),
            vec![3, 0]
        );
        assert_eq!(
            mesh.participants(1, &[], GroupMode::FlattenedId).unwrap(),
            vec![0, 1, 2, 3]
        );
        assert!(mesh
            .participants(0, &[vec![1]], GroupMode::FlattenedId)
            .is_err());
        assert!(mesh
            .participants(0, &[vec![0, 9]], GroupMode::FlattenedId)
            .is_err());
        assert_eq!(
            GroupMode::of(true, Some(true)).unwrap(),
            GroupMode::FlattenedId
        );
        assert!(GroupMode::of(false, Some(true)).is_err());
    }

    #[test]
    fn the_mesh_of_a_module() {
        let m = |text: &str| crate::parse_module(text).unwrap();
        let body = "ENTRY e {\n  x = f32[2] parameter(0)\n  ROOT r = f32[2] collective-permute(x), CH source_target_pairs={{0,1}}\n}\n";
        let with = m(&format!(
            "HloModule a\n{}",
            body.replace("CH", "channel_id=1,")
        ));
        let without = m(&format!("HloModule a\n{}", body.replace("CH", "")));
        let header = m(&format!(
            "HloModule a, replica_count=2, num_partitions=3\n{}",
            body.replace("CH", "")
        ));
        let mesh = |r, p| DeviceMesh {
            replicas: r,
            partitions: p,
        };
        assert_eq!(DeviceMesh::for_module(&with, 4).unwrap(), mesh(1, 4));
        assert_eq!(DeviceMesh::for_module(&without, 4).unwrap(), mesh(4, 1));
        assert_eq!(DeviceMesh::for_module(&header, 6).unwrap(), mesh(2, 3));
        let e = DeviceMesh::for_module(&header, 4).unwrap_err();
        assert_eq!(
            e,
            CollectiveError::MeshSize {
                replicas: 2,
                partitions: 3,
                devices: 4
            }
        );
        assert_eq!(
            e.to_string(),
            "the module is for 6 devices (replica_count=2, num_partitions=3), not 4"
        );
        assert_eq!(
            DeviceMesh::for_module(&with, 0),
            Err(CollectiveError::NoDevices)
        );
    }

    #[test]
    fn permute_peers_and_duplicate_targets() {
        let mesh = DeviceMesh {
            replicas: 1,
            partitions: 4,
        };
        let ring = [[0, 1], [1, 2], [2, 3], [3, 0]];
        assert_eq!(
            mesh.permute_peers(2, &ring, GroupMode::CrossPartition)
                .unwrap(),
            (vec![3], Some(1))
        );
        assert_eq!(
            mesh.permute_peers(0, &[[1, 2]], GroupMode::CrossPartition)
                .unwrap(),
            (vec![], None)
        );
        assert!(mesh
            .permute_peers(0, &[[0, 1], [2, 1]], GroupMode::CrossPartition)
            .is_err());
    }
}
