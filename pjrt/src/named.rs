//! PJRT's `PJRT_NamedValue` lists in both directions, and the client's pointer-and-length
//! arguments ([`bytes_arg`], [`str_arg`]): [`NamedValues`] owns a list the plugin hands
//! out (its strings and integer lists live as long as it does); [`read`] copies a list the
//! client hands in into [`Value`]s.

use std::ffi::c_char;

use pjrt_sys::*;

use crate::error::{PluginError, PluginResult};

/// One option's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `kString`.
    Str(String),
    /// `kInt64`.
    Int(i64),
    /// `kInt64List`.
    Ints(Vec<i64>),
    /// `kFloat`.
    Float(f32),
    /// `kBool`.
    Bool(bool),
}

/// A list of named values the plugin owns and hands out by pointer.
#[derive(Default)]
pub struct NamedValues {
    _names: Vec<Box<str>>,
    _values: Vec<Value>,
    raw: Vec<PJRT_NamedValue>,
}

// SAFETY: the raw pointers in `raw` point into `names` and `values`, which the struct owns and
// never mutates after `new`.
unsafe impl Send for NamedValues {}
// SAFETY: as above; shared access only reads.
unsafe impl Sync for NamedValues {}

impl NamedValues {
    /// The list of `pairs`, in order.
    pub fn new(pairs: Vec<(&str, Value)>) -> NamedValues {
        let mut names = Vec::new();
        let mut values = Vec::new();
        for (n, v) in pairs {
            names.push(Box::<str>::from(n));
            values.push(v);
        }
        let raw = names
            .iter()
            .zip(&values)
            .map(|(n, v)| {
                let (type_, value, value_size) = match v {
                    Value::Str(s) => (
                        PJRT_NamedValue_Type_PJRT_NamedValue_kString,
                        PJRT_NamedValue__bindgen_ty_1 {
                            string_value: s.as_ptr() as *const c_char,
                        },
                        s.len(),
                    ),
                    Value::Int(i) => (
                        PJRT_NamedValue_Type_PJRT_NamedValue_kInt64,
                        PJRT_NamedValue__bindgen_ty_1 { int64_value: *i },
                        1,
                    ),
                    Value::Ints(l) => (
                        PJRT_NamedValue_Type_PJRT_NamedValue_kInt64List,
                        PJRT_NamedValue__bindgen_ty_1 {
                            int64_array_value: l.as_ptr(),
                        },
                        l.len(),
                    ),
                    Value::Float(f) => (
                        PJRT_NamedValue_Type_PJRT_NamedValue_kFloat,
                        PJRT_NamedValue__bindgen_ty_1 { float_value: *f },
                        1,
                    ),
                    Value::Bool(b) => (
                        PJRT_NamedValue_Type_PJRT_NamedValue_kBool,
                        PJRT_NamedValue__bindgen_ty_1 { bool_value: *b },
                        1,
                    ),
                };
                PJRT_NamedValue {
                    struct_size: std::mem::size_of::<PJRT_NamedValue>(),
                    extension_start: std::ptr::null_mut(),
                    name: n.as_ptr() as *const c_char,
                    name_size: n.len(),
                    type_,
                    __bindgen_anon_1: value,
                    value_size,
                }
            })
            .collect();
        NamedValues {
            _names: names,
            _values: values,
            raw,
        }
    }

    /// The list's first element (valid while `self` lives) and its length.
    pub fn as_raw(&self) -> (*const PJRT_NamedValue, usize) {
        (self.raw.as_ptr(), self.raw.len())
    }
}

/// Borrows bytes the client passed as pointer and length.
///
/// # Safety
/// `p` points to `len` readable bytes, or `len` is 0.
pub unsafe fn bytes_arg<'a>(p: *const c_char, len: usize, what: &str) -> PluginResult<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(PluginError::invalid(format!("axle: null {what}")));
    }
    Ok(std::slice::from_raw_parts(p as *const u8, len))
}

/// Reads a text the client passed as pointer and length.
///
/// # Safety
/// `p` points to `len` readable bytes, or `len` is 0.
pub unsafe fn str_arg<'a>(p: *const c_char, len: usize, what: &str) -> PluginResult<&'a str> {
    std::str::from_utf8(bytes_arg(p, len, what)?)
        .map_err(|_| PluginError::invalid(format!("axle: {what} is not UTF-8")))
}

/// Copies the client's list of `n` named values at `p`.
///
/// # Safety
/// `p` points to `n` valid `PJRT_NamedValue`s, or `n` is 0.
pub unsafe fn read(p: *const PJRT_NamedValue, n: usize) -> PluginResult<Vec<(String, Value)>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if p.is_null() {
        return Err(PluginError::invalid("axle: null option list"));
    }
    let mut out = Vec::with_capacity(n);
    for v in std::slice::from_raw_parts(p, n) {
        let name = str_arg(v.name, v.name_size, "option name")?.to_string();
        let value = match v.type_ {
            PJRT_NamedValue_Type_PJRT_NamedValue_kString => Value::Str(
                str_arg(
                    v.__bindgen_anon_1.string_value,
                    v.value_size,
                    "option value",
                )?
                .to_string(),
            ),
            PJRT_NamedValue_Type_PJRT_NamedValue_kInt64 => {
                Value::Int(v.__bindgen_anon_1.int64_value)
            }
            PJRT_NamedValue_Type_PJRT_NamedValue_kInt64List => {
                let l = v.__bindgen_anon_1.int64_array_value;
                if v.value_size > 0 && l.is_null() {
                    return Err(PluginError::invalid(format!(
                        "axle: option {name}: null list"
                    )));
                }
                Value::Ints(if v.value_size == 0 {
                    Vec::new()
                } else {
                    std::slice::from_raw_parts(l, v.value_size).to_vec()
                })
            }
            PJRT_NamedValue_Type_PJRT_NamedValue_kFloat => {
                Value::Float(v.__bindgen_anon_1.float_value)
            }
            PJRT_NamedValue_Type_PJRT_NamedValue_kBool => {
                Value::Bool(v.__bindgen_anon_1.bool_value)
            }
            t => {
                return Err(PluginError::invalid(format!(
                    "axle: option {name} has unknown value type {t}"
                )))
            }
        };
        out.push((name, value));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_reads_back_as_written() {
        let pairs = vec![
            ("s", Value::Str("text".into())),
            ("i", Value::Int(-3)),
            ("l", Value::Ints(vec![1, 17, 0])),
            ("f", Value::Float(0.5)),
            ("b", Value::Bool(true)),
        ];
        let nv = NamedValues::new(pairs.clone());
        let (p, n) = nv.as_raw();
        // SAFETY: `nv` lives.
        let back = unsafe { read(p, n) }.unwrap();
        let want: Vec<(String, Value)> =
            pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        assert_eq!(back, want);
    }
}
