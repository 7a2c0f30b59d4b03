//! [`Options`]: what a client may set of Axle's compile options, and where it sets them. In
//! increasing precedence: the environment (`AXLE_PIPELINE`, `AXLE_CPU_THREADS`, `AXLE_OPT_LEVEL`,
//! `AXLE_CACHE_DIR`), the client's create options (`jax._src.xla_bridge.register_plugin(...,
//! options=)`), and one compilation's `env_option_overrides` (`jax.jit(f,
//! compiler_options={...})`).
//!
//! Invariant: a name this plugin does not know is an error naming it and listing the known ones,
//! never silently ignored; so is a value of the wrong type.

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
];

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
    /// (sorted by name, so the outcome does not depend on map order), and the number of replicas
    /// and partitions it asks for.
    pub fn with_compile_options(&self, bytes: &[u8]) -> PluginResult<(Options, i64, i64)> {
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
        let (replicas, partitions) = proto
            .executable_build_options
            .as_ref()
            .map_or((1, 1), |b| (b.num_replicas.max(1), b.num_partitions.max(1)));
        Ok((o, replicas, partitions))
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
        let (o, r, p) = Options::default()
            .with_compile_options(&proto.encode_to_vec())
            .unwrap();
        assert_eq!(o.pipeline.as_deref(), Some("simplify"));
        assert_eq!(o.threads, Some(1));
        assert_eq!((r, p), (1, 1));

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
}
