//! The attributes the IR keeps as verbatim text (`metadata`, `backend_config`,
//! `frontend_attributes`, `sharding`, `operand_precision`, `channel_id`, ...) between their
//! text and their `HloInstructionProto` fields, in XLA's printed forms.
//!
//! Invariant: each `parse_*` accepts only text its `render_*` gives back byte for byte (the
//! writer checks `render(parse(text)) == text` and otherwise carries the text unchanged, see
//! [`crate::attrs`]), and each `render_*` returns `None` exactly where XLA's printer leaves the
//! attribute out (an empty or default value).

use std::collections::HashMap;

use pjrt_sys::protos::xla::{op_sharding, OpMetadata, OpSharding};

/// XLA's `CEscape`: printable ASCII as is, except `"`, `'` and `\`, which are escaped, as are
/// `\n`, `\r` and `\t`; every other byte as a three-digit octal escape.
pub fn c_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    for &b in s.as_bytes() {
        match b {
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            b'"' => out.push_str("\\\""),
            b'\'' => out.push_str("\\'"),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\{b:03o}")),
        }
    }
    out
}

/// Reads a quoted string at the start of `s` (escapes as [`c_escape`] writes them): the
/// unescaped string and the rest of `s`.
fn quoted(s: &str) -> Option<(String, &str)> {
    let b = s.as_bytes();
    if b.first() != Some(&b'"') {
        return None;
    }
    let mut out = Vec::new();
    let mut i = 1;
    while i < b.len() {
        match b[i] {
            b'"' => return Some((String::from_utf8(out).ok()?, &s[i + 1..])),
            b'\\' => {
                let c = *b.get(i + 1)?;
                i += 2;
                match c {
                    b'n' => out.push(b'\n'),
                    b'r' => out.push(b'\r'),
                    b't' => out.push(b'\t'),
                    b'"' | b'\'' | b'\\' => out.push(c),
                    b'0'..=b'7' => {
                        let oct = s.get(i - 1..i + 2)?;
                        out.push(u8::from_str_radix(oct, 8).ok()?);
                        i += 2;
                    }
                    _ => return None,
                }
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    None
}

/// `{key=value key=value}` items (space separated, values quoted strings or bare tokens).
fn items(s: &str) -> Option<Vec<(&str, String)>> {
    let mut rest = s.strip_prefix('{')?.strip_suffix('}')?;
    let mut out = Vec::new();
    while !rest.is_empty() {
        let eq = rest.find('=')?;
        let key = &rest[..eq];
        rest = &rest[eq + 1..];
        let value = if rest.starts_with('"') {
            let (v, r) = quoted(rest)?;
            rest = r;
            v
        } else {
            let end = rest.find(' ').unwrap_or(rest.len());
            let v = rest[..end].to_string();
            rest = &rest[end..];
            v
        };
        out.push((key, value));
        rest = rest.strip_prefix(' ').unwrap_or(rest);
    }
    Some(out)
}

/// `metadata={...}` as an `OpMetadata`.
pub fn parse_metadata(s: &str) -> Option<OpMetadata> {
    let mut md = OpMetadata::default();
    for (k, v) in items(s)? {
        match k {
            "op_type" => md.op_type = v,
            "op_name" => md.op_name = v,
            "source_file" => md.source_file = v,
            "source_line" => md.source_line = v.parse().ok()?,
            "deduplicated_name" => md.deduplicated_name = v,
            "preserve_layout" if v == "true" => md.preserve_layout = true,
            "stack_frame_id" => md.stack_frame_id = v.parse().ok()?,
            "scheduling_name" => md.scheduling_name = v,
            _ => return None,
        }
    }
    Some(md)
}

/// The text of `metadata={...}` (XLA's `OpMetadataToString`), `None` when empty.
pub fn render_metadata(md: &OpMetadata) -> Option<String> {
    let mut parts = Vec::new();
    let mut s = |k: &str, v: &str| {
        if !v.is_empty() {
            parts.push(format!("{k}=\"{}\"", c_escape(v)));
        }
    };
    s("op_type", &md.op_type);
    s("op_name", &md.op_name);
    s("source_file", &md.source_file);
    if md.source_line != 0 {
        parts.push(format!("source_line={}", md.source_line));
    }
    if !md.deduplicated_name.is_empty() {
        parts.push(format!(
            "deduplicated_name=\"{}\"",
            c_escape(&md.deduplicated_name)
        ));
    }
    if md.preserve_layout {
        parts.push("preserve_layout=true".into());
    }
    if md.stack_frame_id != 0 {
        parts.push(format!("stack_frame_id={}", md.stack_frame_id));
    }
    if !md.scheduling_name.is_empty() {
        parts.push(format!(
            "scheduling_name=\"{}\"",
            c_escape(&md.scheduling_name)
        ));
    }
    (!parts.is_empty()).then(|| format!("{{{}}}", parts.join(" ")))
}

/// `backend_config=...` (a JSON object as is, or a quoted string) as its bytes.
pub fn parse_backend_config(s: &str) -> Option<Vec<u8>> {
    if s.starts_with('{') {
        return Some(s.as_bytes().to_vec());
    }
    match quoted(s)? {
        (v, "") => Some(v.into_bytes()),
        _ => None,
    }
}

/// The text of `backend_config=...`: a JSON object as is, anything else quoted; `None` when
/// empty (or not UTF-8, which HLO text cannot hold).
pub fn render_backend_config(b: &[u8]) -> Option<String> {
    let s = std::str::from_utf8(b).ok()?;
    if s.is_empty() {
        None
    } else if s.starts_with('{') && s.ends_with('}') {
        Some(s.to_string())
    } else {
        Some(format!("\"{}\"", c_escape(s)))
    }
}

/// `frontend_attributes={k="v",...}` as a map.
pub fn parse_frontend_attributes(s: &str) -> Option<HashMap<String, String>> {
    let mut rest = s.strip_prefix('{')?.strip_suffix('}')?;
    let mut out = HashMap::new();
    while !rest.is_empty() {
        let eq = rest.find('=')?;
        let key = rest[..eq].to_string();
        rest = &rest[eq + 1..];
        let value;
        if let Some(r) = rest.strip_prefix('"') {
            // A C-escaped string (XLA's `CEscape`): \\, \", \', \n, \t, \r.
            let mut v = String::new();
            let mut chars = r.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '"' => {
                        end = Some(i);
                        break;
                    }
                    '\\' => v.push(match chars.next()?.1 {
                        'n' => '\n',
                        't' => '\t',
                        'r' => '\r',
                        c @ ('\\' | '"' | '\'') => c,
                        _ => return None,
                    }),
                    c => v.push(c),
                }
            }
            value = v;
            rest = &r[end? + 1..];
        } else if rest.starts_with('{') {
            let end = balanced(rest)?;
            value = rest[..end].to_string();
            rest = &rest[end..];
        } else {
            return None;
        }
        if out.insert(key, value).is_some() {
            return None;
        }
        if !rest.is_empty() {
            rest = rest.strip_prefix(',')?;
        }
    }
    Some(out)
}

/// The length of the balanced `{...}` at the start of `s` (strings respected).
fn balanced(s: &str) -> Option<usize> {
    let mut depth = 0i32;
    let mut in_str = false;
    let mut esc = false;
    for (i, c) in s.char_indices() {
        if in_str {
            match c {
                _ if esc => esc = false,
                '\\' => esc = true,
                '"' => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// The text of `frontend_attributes={...}` (XLA's `FrontendAttributesToString`: sorted by
/// key, JSON objects bare, other values quoted), `None` when empty.
pub fn render_frontend_attributes<'a>(
    entries: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Option<String> {
    let mut v: Vec<(&String, &String)> = entries.into_iter().collect();
    if v.is_empty() {
        return None;
    }
    v.sort();
    let parts: Vec<String> = v
        .into_iter()
        .map(|(k, v)| {
            if v.starts_with('{') && balanced(v) == Some(v.len()) {
                format!("{k}={v}")
            } else {
                format!("{k}=\"{}\"", c_escape(v))
            }
        })
        .collect();
    Some(format!("{{{}}}", parts.join(",")))
}

/// `operand_precision={default,high}` as `PrecisionConfig.Precision` numbers.
pub fn parse_precision(s: &str) -> Option<Vec<i32>> {
    let inner = s.strip_prefix('{')?.strip_suffix('}')?;
    inner
        .split(',')
        .map(|p| {
            Some(match p {
                "default" => 0,
                "high" => 1,
                "highest" => 2,
                "packed_nibble" => 3,
                _ => return None,
            })
        })
        .collect()
}

/// The text of `operand_precision={...}`, `None` when every operand has the default.
pub fn render_precision(p: &[i32]) -> Option<String> {
    if p.iter().all(|&x| x == 0) {
        return None;
    }
    let names: Option<Vec<&str>> = p
        .iter()
        .map(|&x| match x {
            0 => Some("default"),
            1 => Some("high"),
            2 => Some("highest"),
            3 => Some("packed_nibble"),
            _ => None,
        })
        .collect();
    Some(format!("{{{}}}", names?.join(",")))
}

fn join(v: &[i64]) -> String {
    v.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
}

fn ints(s: &str) -> Option<Vec<i64>> {
    if s.is_empty() {
        return Some(Vec::new());
    }
    s.split(',').map(|x| x.parse().ok()).collect()
}

/// `sharding={...}` as an `OpSharding`: `replicated`, `manual`, `unknown`, `maximal
/// device=N`, tiled `devices=[dims]ids` or `devices=[dims]<=[reshape]T(perm)` with an optional
/// `last_tile_dim_replicate`, and tuples of these.
pub fn parse_sharding(s: &str) -> Option<OpSharding> {
    let inner = s.strip_prefix('{')?.strip_suffix('}')?;
    if inner.starts_with('{') || inner.is_empty() {
        // A tuple: `{{a}, {b}}`.
        let mut rest = inner;
        let mut elems = Vec::new();
        while !rest.is_empty() {
            let end = balanced(rest)?;
            elems.push(parse_sharding(&rest[..end])?);
            rest = &rest[end..];
            if !rest.is_empty() {
                rest = rest.strip_prefix(", ")?;
            }
        }
        return Some(OpSharding {
            r#type: op_sharding::Type::Tuple as i32,
            tuple_shardings: elems,
            ..Default::default()
        });
    }
    let mut sh = OpSharding::default();
    match inner {
        "replicated" => sh.r#type = op_sharding::Type::Replicated as i32,
        "manual" => sh.r#type = op_sharding::Type::Manual as i32,
        "unknown" => sh.r#type = op_sharding::Type::Unknown as i32,
        _ => {
            if let Some(d) = inner.strip_prefix("maximal device=") {
                sh.r#type = op_sharding::Type::Maximal as i32;
                sh.tile_assignment_devices = vec![d.parse().ok()?];
                sh.tile_assignment_dimensions = vec![1];
                return Some(sh);
            }
            let rest = inner.strip_prefix("devices=[")?;
            let close = rest.find(']')?;
            sh.r#type = op_sharding::Type::Other as i32;
            sh.tile_assignment_dimensions = ints(&rest[..close])?;
            let mut rest = &rest[close + 1..];
            if let Some(r) = rest.strip_suffix(" last_tile_dim_replicate") {
                sh.replicate_on_last_tile_dim = true;
                rest = r;
            }
            if let Some(r) = rest.strip_prefix("<=[") {
                let close = r.find(']')?;
                sh.iota_reshape_dims = ints(&r[..close])?;
                let r = &r[close + 1..];
                if let Some(t) = r.strip_prefix("T(") {
                    sh.iota_transpose_perm = ints(t.strip_suffix(')')?)?
                        .into_iter()
                        .map(|x| i32::try_from(x).ok())
                        .collect::<Option<_>>()?;
                } else if !r.is_empty() {
                    return None;
                }
            } else {
                sh.tile_assignment_devices = ints(rest)?;
            }
        }
    }
    Some(sh)
}

/// The text of `sharding={...}` (XLA's `HloSharding::ToString` for the forms
/// [`parse_sharding`] reads), `None` for a form it does not know.
pub fn render_sharding(sh: &OpSharding) -> Option<String> {
    use op_sharding::Type;
    if !sh.metadata.is_empty() || !sh.last_tile_dims.is_empty() || sh.is_shard_group {
        return None;
    }
    Some(match Type::try_from(sh.r#type).ok()? {
        Type::Replicated => "{replicated}".into(),
        Type::Manual => "{manual}".into(),
        Type::Unknown => "{unknown}".into(),
        Type::Maximal => match sh.tile_assignment_devices[..] {
            [d] => format!("{{maximal device={d}}}"),
            _ => return None,
        },
        Type::Tuple => {
            let elems: Option<Vec<String>> =
                sh.tuple_shardings.iter().map(render_sharding).collect();
            format!("{{{}}}", elems?.join(", "))
        }
        Type::Other => {
            let mut s = format!("{{devices=[{}]", join(&sh.tile_assignment_dimensions));
            if !sh.iota_reshape_dims.is_empty() {
                s.push_str(&format!("<=[{}]", join(&sh.iota_reshape_dims)));
                if !sh.iota_transpose_perm.is_empty() {
                    let perm: Vec<i64> = sh.iota_transpose_perm.iter().map(|&x| x as i64).collect();
                    s.push_str(&format!("T({})", join(&perm)));
                }
            } else {
                s.push_str(&join(&sh.tile_assignment_devices));
            }
            if sh.replicate_on_last_tile_dim {
                s.push_str(" last_tile_dim_replicate");
            }
            s.push('}');
            s
        }
    })
}
