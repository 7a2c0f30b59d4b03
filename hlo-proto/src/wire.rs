//! The protobuf wire format at the level of single fields, for what the generated types cannot
//! do: read and write the literal fields the vendored `xla_data.proto` predates (`f8e4m3s`,
//! `f8e3m4s`, `f4e2m1fns`, `f8e8m0fnus`), which prost would skip, and write map fields in key
//! order (prost's maps are `HashMap`s, whose order changes from run to run), so the same module
//! always gives the same bytes.
//!
//! [`Fields`] walks one message's fields without interpreting them; it stops with an error at
//! the first malformed field and never reads past its buffer.

use crate::error::ProtoError;
use prost::encoding::{encode_key, encode_varint, WireType};

/// One field's value, undecoded.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Value<'a> {
    /// A length-delimited payload (bytes, a string, a message or a packed list).
    Bytes(&'a [u8]),
    /// A varint.
    Varint(u64),
    /// A fixed-width scalar (its value is not needed here).
    Scalar,
}

/// The fields of one message, in wire order: `(field number, value)`.
pub(crate) struct Fields<'a> {
    buf: &'a [u8],
    failed: bool,
}

/// Walks the fields of the message in `buf`.
pub(crate) fn fields(buf: &[u8]) -> Fields<'_> {
    Fields { buf, failed: false }
}

fn varint(buf: &mut &[u8]) -> Result<u64, ProtoError> {
    let mut v: u64 = 0;
    for i in 0..10 {
        let Some((&b, rest)) = buf.split_first() else {
            return Err(ProtoError::Decode("truncated varint".into()));
        };
        *buf = rest;
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(ProtoError::Decode("varint longer than 10 bytes".into()))
}

fn take<'a>(buf: &mut &'a [u8], n: u64) -> Result<&'a [u8], ProtoError> {
    let n = usize::try_from(n)
        .ok()
        .filter(|&n| n <= buf.len())
        .ok_or_else(|| ProtoError::Decode("field runs past the end of its message".into()))?;
    let (head, rest) = buf.split_at(n);
    *buf = rest;
    Ok(head)
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Value<'a>), ProtoError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buf.is_empty() || self.failed {
            return None;
        }
        let r = (|| {
            let key = varint(&mut self.buf)?;
            let tag = u32::try_from(key >> 3)
                .ok()
                .filter(|&t| t > 0)
                .ok_or_else(|| ProtoError::Decode(format!("invalid field key {key}")))?;
            let v = match key & 7 {
                0 => Value::Varint(varint(&mut self.buf)?),
                1 => {
                    take(&mut self.buf, 8)?;
                    Value::Scalar
                }
                2 => {
                    let n = varint(&mut self.buf)?;
                    Value::Bytes(take(&mut self.buf, n)?)
                }
                5 => {
                    take(&mut self.buf, 4)?;
                    Value::Scalar
                }
                w => return Err(ProtoError::Decode(format!("unsupported wire type {w}"))),
            };
            Ok((tag, v))
        })();
        self.failed = r.is_err();
        Some(r)
    }
}

/// The payloads of every length-delimited occurrence of field `tag` in `buf`, in order.
pub(crate) fn repeated_bytes(buf: &[u8], tag: u32) -> Result<Vec<&[u8]>, ProtoError> {
    let mut out = Vec::new();
    for f in fields(buf) {
        if let (t, Value::Bytes(b)) = f? {
            if t == tag {
                out.push(b);
            }
        }
    }
    Ok(out)
}

/// The payload of length-delimited field `tag` (its last occurrence, as a parser keeps the last
/// value of a scalar field; `None` when absent).
pub(crate) fn last_bytes(buf: &[u8], tag: u32) -> Result<Option<&[u8]>, ProtoError> {
    Ok(repeated_bytes(buf, tag)?.pop())
}

/// Appends length-delimited field `tag` holding `payload`.
pub(crate) fn put_bytes(out: &mut Vec<u8>, tag: u32, payload: &[u8]) {
    encode_key(tag, WireType::LengthDelimited, out);
    encode_varint(payload.len() as u64, out);
    out.extend_from_slice(payload);
}

/// Appends the entries of a `map<string, string>` field `tag`, in the order given.
pub(crate) fn put_string_map<'s>(
    out: &mut Vec<u8>,
    tag: u32,
    entries: impl IntoIterator<Item = (&'s str, &'s str)>,
) {
    for (k, v) in entries {
        let mut e = Vec::with_capacity(k.len() + v.len() + 4);
        put_bytes(&mut e, 1, k.as_bytes());
        put_bytes(&mut e, 2, v.as_bytes());
        put_bytes(out, tag, &e);
    }
}

/// Appends a `map<int64, message>` entry of field `tag`: `key` and the encoded `value`.
pub(crate) fn put_i64_message_entry(out: &mut Vec<u8>, tag: u32, key: i64, value: &[u8]) {
    let mut e = Vec::with_capacity(value.len() + 12);
    encode_key(1, WireType::Varint, &mut e);
    encode_varint(key as u64, &mut e);
    put_bytes(&mut e, 2, value);
    put_bytes(out, tag, &e);
}
