//! [`Options`]: what a client may set of Axle's compile options, and where it sets them. In
//! increasing precedence: the environment (`AXLE_PIPELINE`, `AXLE_CPU_THREADS`, `AXLE_OPT_LEVEL`,
//! `AXLE_CACHE_DIR`), the client's create options (`jax._src.xla_bridge.register_plugin(...,
//! options=)`), and one compilation's `env_option_overrides` (`jax.jit(f,
//! compiler_options={...})`).
//!
//! Invariant: a name this plugin does not know is an error naming it and listing the known ones,
//! never silently ignored; so is a value of the wrong type.

use std::time::Duration;

use axle::{CacheMode, CompileOptions, OptLevel};
use pjrt_sys::protos::xla::{option_override_proto, CompileOptionsProto};
use prost::Message;

use crate::error::{PluginError, PluginResult};
use crate::named::Value;

/// The option names and what each takes.
pub const KNOWN: &[(&str, &str)] = &[
    (
        "axle_pipeline",
        "a pass pipeline: a standard pipeline's name or pipeline text",
    ),
    ("axle_threads", "threads per run (0: every core)"),
    ("axle_opt_level", "the code generator's level, 0 to 3"),
    (
        "axle_cache_dir",
        "a compilation cache directory (empty: none)",
    ),
    (
        "axle_timeout",
        "seconds a collective waits for its group on several devices (default 60)",
    ),
];

/// How long a collective waits for the rest of its group by default, as `axle run --devices`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Axle's options for the compilations of one client.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Options {
    /// The pass pipeline (None: the backend's default).
    pub pipeline: Option<String>,
    /// Threads per run (None: the backend's default).
    pub threads: Option<usize>,
    /// The code generator's optimization level.
    pub opt_level: OptLevel,
    /// The compilation cache.
    pub cache: CacheMode,
    /// How long a collective waits for its group (None: [`DEFAULT_TIMEOUT`]).
    pub timeout: Option<Duration>,
}

/// What a compilation's `CompileOptionsProto` asks of the devices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Build {
    /// `num_replicas` (at least 1).
    pub replicas: i64,
    /// `num_partitions` (at least 1).
    pub partitions: i64,
    /// The device id of each logical device `replica * partitions + partition`, when the
    /// options carry a device assignment.
    pub assignment: Option<Vec<i64>>,
}

fn level(n: i64, name: &str) -> PluginResult<OptLevel> {
    Ok(match n {
        0 => OptLevel::O0,
        1 => OptLevel::O1,
        2 => OptLevel::O2,
        3 => OptLevel::O3,
        _ => {
            return Err(PluginError::invalid(format!(
                "axle: option {name}={n}: the level is 0, 1, 2 or 3"
            )))
        }
    })
}

fn known_list() -> String {
    KNOWN
        .iter()
        .map(|(n, what)| format!("{n} ({what})"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Options {
    /// The defaults with the environment's settings applied.
    pub fn from_env() -> PluginResult<Options> {
        let mut o = Options {
            cache: CacheMode::from_env(),
            ..Options::default()
        };
        if let Ok(p) = std::env::var("AXLE_PIPELINE") {
            if !p.is_empty() {
                o.pipeline = Some(p);
            }
        }
        if let Ok(l) = std::env::var("AXLE_OPT_LEVEL") {
            if !l.is_empty() {
                let n = l.parse::<i64>().map_err(|_| {
                    PluginError::invalid(format!("axle: AXLE_OPT_LEVEL={l} is not 0 to 3"))
                })?;
                o.opt_level = level(n, "AXLE_OPT_LEVEL")?;
            }
        }
        Ok(o)
    }

    /// Sets option `name` to `value`.
    pub fn set(&mut self, name: &str, value: &Value) -> PluginResult<()> {
        let wrong = |want: &str| {
            PluginError::invalid(format!("axle: option {name} takes {want}, got {value:?}"))
        };
        match name {
            "axle_pipeline" => match value {
                Value::Str(s) if s.is_empty() || s == "default" => self.pipeline = None,
                Value::Str(s) => self.pipeline = Some(s.clone()),
                _ => return Err(wrong("a string")),
            },
            "axle_threads" => match value {
                Value::Int(0) => self.threads = None,
                Value::Int(n) if *n > 0 => self.threads = Some(*n as usize),
                _ => return Err(wrong("a non-negative integer")),
            },
            "axle_opt_level" => match value {
                Value::Int(n) => self.opt_level = level(*n, name)?,
                _ => return Err(wrong("an integer")),
            },
            "axle_cache_dir" => match value {
                Value::Str(s) if s.is_empty() => self.cache = CacheMode::Off,
                Value::Str(s) => self.cache = CacheMode::Dir(s.into()),
                _ => return Err(wrong("a string")),
            },
            "axle_timeout" => {
                let secs = match value {
                    Value::Int(n) => *n as f64,
                    Value::Float(f) => f64::from(*f),
                    _ => return Err(wrong("a number of seconds")),
                };
                if !(secs.is_finite() && secs > 0.0 && secs <= 86400.0) {
                    return Err(wrong("a number of seconds in (0, 86400]"));
                }
                self.timeout = Some(Duration::from_secs_f64(secs));
            }
            _ => {
                return Err(PluginError::invalid(format!(
                    "axle: unknown option {name:?}; axle knows {}",
                    known_list()
                )))
            }
        }
        Ok(())
    }

    /// These options with a serialized `CompileOptionsProto`'s `env_option_overrides` applied
    /// (sorted by name, so the outcome does not depend on map order), and what it asks of the
    /// devices.
    pub fn with_compile_options(&self, bytes: &[u8]) -> PluginResult<(Options, Build)> {
        let proto = CompileOptionsProto::decode(bytes).map_err(|e| {
            PluginError::invalid(format!("axle: compile options do not decode: {e}"))
        })?;
        let mut o = self.clone();
        let mut overrides: Vec<_> = proto.env_option_overrides.iter().collect();
        overrides.sort_by(|a, b| a.0.cmp(b.0));
        for (name, v) in overrides {
            let value = match &v.value {
                Some(option_override_proto::Value::StringField(s)) => Value::Str(s.clone()),
                Some(option_override_proto::Value::BoolField(b)) => Value::Bool(*b),
                Some(option_override_proto::Value::IntField(i)) => Value::Int(*i),
                Some(option_override_proto::Value::DoubleField(d)) => Value::Float(*d as f32),
                None => {
                    return Err(PluginError::invalid(format!(
                        "axle: compiler option {name} has no value"
                    )))
                }
            };
            o.set(name, &value)?;
        }
        let build = proto.executable_build_options.as_ref();
        let (replicas, partitions) =
            build.map_or((1, 1), |b| (b.num_replicas.max(1), b.num_partitions.max(1)));
        let assignment = match build.and_then(|b| b.device_assignment.as_ref()) {
            None => None,
            Some(a) => {
                let bad = |why: String| {
                    PluginError::invalid(format!(
                        "axle: the compile options' device assignment: {why}"
                    ))
                };
                let (r, c) = (i64::from(a.replica_count), i64::from(a.computation_count));
                if (r, c) != (replicas, partitions) || a.computation_devices.len() as i64 != c {
                    return Err(bad(format!(
                        "{r} replicas x {c} computations ({} listed) for {replicas} replicas x \
                         {partitions} partitions",
                        a.computation_devices.len()
                    )));
                }
                let mut ids = Vec::with_capacity((r * c) as usize);
                for rep in 0..r as usize {
                    for (p, comp) in a.computation_devices.iter().enumerate() {
                        let id = comp.replica_device_ids.get(rep).ok_or_else(|| {
                            bad(format!("computation {p} has no device for replica {rep}"))
                        })?;
                        ids.push(*id);
                    }
                }
                Some(ids)
            }
        };
        Ok((
            o,
            Build {
                replicas,
                partitions,
                assignment,
            },
        ))
    }

    /// Axle's compile options for the `cpu` device: the pipeline asked for, or else the
    /// backend's default (`cpu`); `none` runs none.
    pub fn compile_options(&self) -> PluginResult<CompileOptions> {
        let platform = axle::backends::registry()
            .get("cpu")
            .map_err(|e| PluginError::internal(e.to_string()))?;
        Ok(CompileOptions {
            pipeline: axle::backend::pipeline_for(&*platform, self.pipeline.as_deref()),
            threads: self.threads,
            opt_level: self.opt_level,
            cache: self.cache.clone(),
            ..CompileOptions::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pjrt_sys::protos::xla::OptionOverrideProto;

    #[test]
    fn compiler_options_reach_axle_and_unknown_ones_are_errors() {
        let mut proto = CompileOptionsProto::default();
        proto.env_option_overrides.insert(
            "axle_pipeline".into(),
            OptionOverrideProto {
                value: Some(option_override_proto::Value::StringField("simplify".into())),
            },
        );
        proto.env_option_overrides.insert(
            "axle_threads".into(),
            OptionOverrideProto {
                value: Some(option_override_proto::Value::IntField(1)),
            },
        );
        let (o, b) = Options::default()
            .with_compile_options(&proto.encode_to_vec())
            .unwrap();
        assert_eq!(o.pipeline.as_deref(), Some("simplify"));
        assert_eq!(o.threads, Some(1));
        assert_eq!((b.replicas, b.partitions, b.assignment), (1, 1, None));

        proto.env_option_overrides.insert(
            "xla_cpu_fast_math".into(),
            OptionOverrideProto {
                value: Some(option_override_proto::Value::BoolField(true)),
            },
        );
        let e = Options::default()
            .with_compile_options(&proto.encode_to_vec())
            .unwrap_err();
        assert!(e.message.contains("xla_cpu_fast_math") && e.message.contains("axle_pipeline"));
        let e = Options::default()
            .set("axle_threads", &Value::Str("x".into()))
            .unwrap_err();
        assert!(e.message.contains("axle_threads"), "{e:?}");
    }

    #[test]
    fn the_device_assignment_is_read_in_logical_order() {
        use pjrt_sys::protos::xla::{
            device_assignment_proto::ComputationDevice, DeviceAssignmentProto,
            ExecutableBuildOptionsProto,
        };
        let mut proto = CompileOptionsProto {
            executable_build_options: Some(ExecutableBuildOptionsProto {
                num_replicas: 2,
                num_partitions: 2,
                device_assignment: Some(DeviceAssignmentProto {
                    replica_count: 2,
                    computation_count: 2,
                    computation_devices: vec![
                        ComputationDevice {
                            replica_device_ids: vec![3, 1],
                        },
                        ComputationDevice {
                            replica_device_ids: vec![2, 0],
                        },
                    ],
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let (_, b) = Options::default()
            .with_compile_options(&proto.encode_to_vec())
            .unwrap();
        // Logical device r * 2 + p: (r0,p0)=3, (r0,p1)=2, (r1,p0)=1, (r1,p1)=0.
        assert_eq!(b.assignment, Some(vec![3, 2, 1, 0]));
        if let Some(bo) = proto.executable_build_options.as_mut() {
            bo.num_partitions = 4;
        }
        let e = Options::default()
            .with_compile_options(&proto.encode_to_vec())
            .unwrap_err();
        assert!(e.message.contains("device assignment"), "{e:?}");
        let e = Options::default()
            .set("axle_timeout", &Value::Int(0))
            .unwrap_err();
        assert!(e.message.contains("axle_timeout"), "{e:?}");
    }
}
