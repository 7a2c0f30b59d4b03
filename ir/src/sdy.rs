//! Shardy's text in JAX's HLO: the meshes of the module's `xla.sdy.meshes` frontend attribute
//! and the per-value shardings of `xla.sdy.in_shardings` / `xla.sdy.out_shardings` on the
//! `xla.sdy.GlobalToLocalShape` / `LocalToGlobalShape` custom calls around a `shard_map` body,
//! and what they mean: which block of a global array each device holds ([`Mesh::block`], read
//! off an instruction by [`shardings_of`]) and where its rows lie in the array ([`block_rows`]),
//! for the evaluator and the cpu runtime alike.
//!
//! Grammar read (escaped quotes `\"` read as quotes):
//! - mesh: `NAME = #sdy.mesh<["x"=2, "y"=4]>` (an optional `, device_ids=[...]` is refused
//!   unless it is the iota), several separated by commas;
//! - sharding per value: `#sdy.sharding_per_value<[<@NAME, [{"x"}, {}, {"x", "y"}]>, ...]>`,
//!   one dimension list per value; a trailing `replicated={...}` is accepted (replication is
//!   the default); open dimensions (`?`) and sub-axes (`"x":(1)2`) are refused.
//!
//! Invariant: a [`Sharding`] names only axes of its [`Mesh`], each at most once; device `d` of
//! the mesh has coordinates `d` in mixed radix over the axes, the first axis major.

/// A device mesh: named axes and their sizes, the first axis major.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mesh {
    /// The mesh's name (`mesh` in `@mesh`).
    pub name: String,
    /// `(axis, size)`, in order.
    pub axes: Vec<(String, i64)>,
}

/// One value's sharding: for each dimension, the mesh axes it is split over, major first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sharding {
    /// The mesh it refers to.
    pub mesh: String,
    /// Per dimension, the axes splitting it.
    pub dims: Vec<Vec<String>>,
}

/// A tiny cursor over Shardy's text.
struct Cur<'a> {
    s: &'a str,
    i: usize,
}

impl<'a> Cur<'a> {
    fn ws(&mut self) {
        while self.s[self.i..].starts_with([' ', '\n', '\t']) {
            self.i += 1;
        }
    }

    fn eat(&mut self, t: &str) -> bool {
        self.ws();
        if self.s[self.i..].starts_with(t) {
            self.i += t.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, t: &str) -> Result<(), SdyError> {
        if self.eat(t) {
            Ok(())
        } else {
            Err(SdyError::Expected {
                expected: t.to_string(),
                at: self.s[self.i..].chars().take(24).collect(),
            })
        }
    }

    fn quoted(&mut self) -> Result<&'a str, SdyError> {
        self.expect("\"")?;
        let rest = &self.s[self.i..];
        let end = rest.find('"').ok_or(SdyError::UnterminatedAxisName)?;
        self.i += end + 1;
        Ok(&rest[..end])
    }

    fn word(&mut self) -> &'a str {
        self.ws();
        let rest = &self.s[self.i..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-'))
            .unwrap_or(rest.len());
        self.i += end;
        &rest[..end]
    }

    fn int(&mut self) -> Result<i64, SdyError> {
        let w = self.word();
        w.parse().map_err(|_| SdyError::NotAnInteger(w.to_string()))
    }
}

/// Why a Shardy mesh or sharding is unreadable or unsupported, or a block cannot be cut.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SdyError {
    /// The text lacks a token where one is required.
    #[error("expected '{expected}' at '{at}'")]
    Expected {
        /// The token required.
        expected: String,
        /// The text there (its first 24 characters).
        at: String,
    },
    /// An axis name's closing quote is missing.
    #[error("unterminated axis name")]
    UnterminatedAxisName,
    /// A word where an integer is required.
    #[error("expected an integer, found '{0}'")]
    NotAnInteger(String),
    /// A mesh axis of size below 1.
    #[error("mesh axis \"{axis}\" has size {size}")]
    AxisSize {
        /// The axis.
        axis: String,
        /// Its size.
        size: i64,
    },
    /// A mesh of more than 2^31 devices.
    #[error("mesh {0} has more than 2^31 devices")]
    TooManyDevices(String),
    /// A mesh whose `device_ids` are not `0..total` in order.
    #[error("mesh {mesh}: device_ids other than 0..{total} are not supported")]
    DeviceIds {
        /// The mesh.
        mesh: String,
        /// Its device count.
        total: i64,
    },
    /// An open sharding dimension (`?`).
    #[error("open sharding dimensions ('?') are not supported")]
    OpenDimension,
    /// A sub-axis (`"x":(1)2`).
    #[error("sub-axes are not supported")]
    SubAxis,
    /// A `replicated={` without its closing brace.
    #[error("unterminated replicated={{...}}")]
    UnterminatedReplicated,
    /// A sharding names an axis its mesh lacks.
    #[error("mesh {mesh} has no axis \"{axis}\"")]
    NoAxis {
        /// The mesh.
        mesh: String,
        /// The axis.
        axis: String,
    },
    /// A sharding's rank is not the array's.
    #[error("a sharding of {sharding} dimensions for an array of {array}")]
    Rank {
        /// The sharding's dimensions.
        sharding: usize,
        /// The array's.
        array: usize,
    },
    /// A sharding uses an axis for two dimensions.
    #[error("axis \"{0}\" shards two dimensions")]
    AxisTwice(String),
    /// A dimension does not divide into its shards.
    #[error("dimension of size {size} does not split into {shards} shards")]
    Uneven {
        /// The dimension's size.
        size: i64,
        /// The shards.
        shards: i64,
    },
    /// The instruction has no frontend attributes.
    #[error("no frontend_attributes with the shardings")]
    NoFrontendAttributes,
    /// The frontend attribute asked for is missing.
    #[error("no {0} attribute")]
    NoAttribute(String),
    /// The module's header has no `xla.sdy.meshes`.
    #[error("the module has no xla.sdy.meshes attribute")]
    NoMeshes,
    /// A sharding names a mesh the module lacks.
    #[error("no mesh named {0}")]
    NoMesh(String),
}

impl From<SdyError> for String {
    fn from(e: SdyError) -> String {
        e.to_string()
    }
}

fn unescape(s: &str) -> String {
    s.replace("\\\"", "\"")
}

/// The meshes of an `xla.sdy.meshes` value: `{mesh = #sdy.mesh<["x"=2]>, ...}` (braces
/// optional).
pub fn parse_meshes(text: &str) -> Result<Vec<Mesh>, SdyError> {
    let t = unescape(text);
    let t = t.trim();
    let t = t
        .strip_prefix('{')
        .and_then(|r| r.strip_suffix('}'))
        .unwrap_or(t);
    let mut c = Cur { s: t, i: 0 };
    let mut out = Vec::new();
    loop {
        c.ws();
        if c.i >= t.len() {
            break;
        }
        let name = c.word().to_string();
        c.expect("=")?;
        c.expect("#sdy.mesh<")?;
        c.expect("[")?;
        let mut axes = Vec::new();
        if !c.eat("]") {
            loop {
                let a = c.quoted()?.to_string();
                c.expect("=")?;
                let n = c.int()?;
                if n < 1 {
                    return Err(SdyError::AxisSize { axis: a, size: n });
                }
                axes.push((a, n));
                if c.eat("]") {
                    break;
                }
                c.expect(",")?;
            }
        }
        let total = axes
            .iter()
            .try_fold(1i64, |t, a| t.checked_mul(a.1).filter(|&t| t <= 1 << 31))
            .ok_or_else(|| SdyError::TooManyDevices(name.clone()))?;
        if c.eat(",") {
            c.expect("device_ids=[")?;
            let mut k = 0;
            loop {
                if c.int()? != k {
                    return Err(SdyError::DeviceIds { mesh: name, total });
                }
                k += 1;
                if c.eat("]") {
                    break;
                }
                c.expect(",")?;
            }
        }
        c.expect(">")?;
        out.push(Mesh { name, axes });
        if !c.eat(",") {
            break;
        }
    }
    Ok(out)
}

/// The shardings of a `#sdy.sharding_per_value<[...]>` value, one per value.
pub fn parse_shardings(text: &str) -> Result<Vec<Sharding>, SdyError> {
    let t = unescape(text);
    let t = t.trim().trim_matches('"');
    let mut c = Cur { s: t, i: 0 };
    c.expect("#sdy.sharding_per_value<")?;
    c.expect("[")?;
    let mut out = Vec::new();
    if c.eat("]") {
        c.expect(">")?;
        return Ok(out);
    }
    loop {
        c.expect("<@")?;
        let mesh = c.word().to_string();
        c.expect(",")?;
        c.expect("[")?;
        let mut dims = Vec::new();
        if !c.eat("]") {
            loop {
                c.expect("{")?;
                let mut axes = Vec::new();
                if !c.eat("}") {
                    loop {
                        if c.eat("?") {
                            return Err(SdyError::OpenDimension);
                        }
                        axes.push(c.quoted()?.to_string());
                        if c.eat(":") {
                            return Err(SdyError::SubAxis);
                        }
                        if c.eat("}") {
                            break;
                        }
                        c.expect(",")?;
                    }
                }
                dims.push(axes);
                if c.eat("]") {
                    break;
                }
                c.expect(",")?;
            }
        }
        if c.eat(",") {
            // `replicated={...}`: replication is what unnamed axes mean anyway.
            c.expect("replicated={")?;
            let end = c.s[c.i..]
                .find('}')
                .ok_or(SdyError::UnterminatedReplicated)?;
            c.i += end + 1;
        }
        c.expect(">")?;
        out.push(Sharding { mesh, dims });
        if c.eat("]") {
            break;
        }
        c.expect(",")?;
    }
    c.expect(">")?;
    Ok(out)
}

impl Mesh {
    /// The number of devices.
    pub fn devices(&self) -> i64 {
        self.axes.iter().map(|a| a.1).product()
    }

    fn axis(&self, name: &str) -> Result<(usize, i64), SdyError> {
        self.axes
            .iter()
            .position(|a| a.0 == name)
            .map(|k| (k, self.axes[k].1))
            .ok_or_else(|| SdyError::NoAxis {
                mesh: self.name.clone(),
                axis: name.to_string(),
            })
    }

    /// Device `d`'s coordinate along each axis.
    pub fn coords(&self, d: i64) -> Vec<i64> {
        let mut c = vec![0; self.axes.len()];
        let mut r = d;
        for k in (0..self.axes.len()).rev() {
            c[k] = r % self.axes[k].1;
            r /= self.axes[k].1;
        }
        c
    }

    /// The block of a global array of dimensions `global` that device `d` holds under `s`:
    /// per dimension `(start, size)`. Errors when a dimension does not divide evenly or `s`
    /// names an axis twice or one the mesh lacks.
    pub fn block(&self, s: &Sharding, global: &[i64], d: i64) -> Result<Vec<(i64, i64)>, SdyError> {
        if s.dims.len() != global.len() {
            return Err(SdyError::Rank {
                sharding: s.dims.len(),
                array: global.len(),
            });
        }
        let coords = self.coords(d);
        let mut used = vec![false; self.axes.len()];
        let mut out = Vec::with_capacity(global.len());
        for (axes, &g) in s.dims.iter().zip(global) {
            let (mut index, mut count) = (0i64, 1i64);
            for a in axes {
                let (k, size) = self.axis(a)?;
                if std::mem::replace(&mut used[k], true) {
                    return Err(SdyError::AxisTwice(a.clone()));
                }
                index = index * size + coords[k];
                count *= size;
            }
            if g % count != 0 {
                return Err(SdyError::Uneven {
                    size: g,
                    shards: count,
                });
            }
            out.push((index * (g / count), g / count));
        }
        Ok(out)
    }
}

/// The shardings of the frontend attribute `key` (`xla.sdy.in_shardings` or
/// `xla.sdy.out_shardings`) of instruction `id`, each with the mesh of the module's
/// `xla.sdy.meshes` it names. Errors when an attribute is missing or unreadable or a sharding
/// names a mesh the module lacks.
pub fn shardings_of(
    m: &crate::Module,
    id: crate::InstId,
    key: &str,
) -> Result<Vec<(Mesh, Sharding)>, SdyError> {
    let fa = match m.attr(id, &crate::AttrKey::FrontendAttributes) {
        Some(crate::AttrValue::Raw(t)) => t,
        _ => return Err(SdyError::NoFrontendAttributes),
    };
    let text = frontend_value(fa, key).ok_or_else(|| SdyError::NoAttribute(key.to_string()))?;
    let header = m
        .header_attrs
        .iter()
        .find(|(k, _)| k == "frontend_attributes")
        .and_then(|(_, v)| frontend_value(v, "xla.sdy.meshes"))
        .ok_or(SdyError::NoMeshes)?;
    let meshes = parse_meshes(&header)?;
    parse_shardings(&text)?
        .into_iter()
        .map(|s| {
            let mesh = meshes
                .iter()
                .find(|m| m.name == s.mesh)
                .cloned()
                .ok_or_else(|| SdyError::NoMesh(s.mesh.clone()))?;
            Ok((mesh, s))
        })
        .collect()
}

/// Calls `f(global offset, local offset, bytes)` for each row (last dimension) of the block
/// of dimensions `ldims` at `start` in a row-major array of dimensions `gdims`, elements of
/// `w` bytes; offsets are in bytes. The block must lie inside the array; an empty block has
/// no rows.
pub fn block_rows(
    gdims: &[i64],
    ldims: &[i64],
    start: &[i64],
    w: usize,
    mut f: impl FnMut(usize, usize, usize),
) {
    let rank = gdims.len();
    if rank == 0 {
        f(0, 0, w);
        return;
    }
    if ldims.iter().any(|&d| d <= 0) {
        return;
    }
    let row = ldims[rank - 1] as usize * w;
    let rows: i64 = ldims[..rank - 1].iter().product();
    let mut idx = vec![0i64; rank - 1];
    for r in 0..rows as usize {
        let mut off = 0i64;
        for k in 0..rank {
            let i = if k < rank - 1 { idx[k] } else { 0 };
            off = off * gdims[k] + start[k] + i;
        }
        f(off as usize * w, r * row, row);
        for k in (0..rank - 1).rev() {
            idx[k] += 1;
            if idx[k] < ldims[k] {
                break;
            }
            idx[k] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meshes_and_shardings_parse() {
        let m = parse_meshes(r#"{mesh = #sdy.mesh<["x"=2, "y"=4]>}"#).unwrap();
        assert_eq!(m[0].axes, vec![("x".into(), 2), ("y".into(), 4)]);
        let s = parse_shardings(
            r##""#sdy.sharding_per_value<[<@mesh, [{\"x\"}, {\"y\"}]>, <@mesh, [{\"x\", \"y\"}, {}]>, <@mesh, []>]>""##,
        )
        .unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(
            s[1].dims,
            vec![vec!["x".to_string(), "y".to_string()], vec![]]
        );
        assert!(s[2].dims.is_empty());
        assert_eq!(
            parse_shardings("#sdy.sharding_per_value<[<@mesh, [{?}]>]>"),
            Err(SdyError::OpenDimension)
        );
        assert!(matches!(
            parse_meshes(r#"mesh = #sdy.mesh<["x"=2], device_ids=[1,0]>"#),
            Err(SdyError::DeviceIds { total: 2, .. })
        ));
        let e = parse_meshes(r#"m = #sdy.mesh<["x"=4294967296, "y"=4294967296]>"#).unwrap_err();
        assert_eq!(e, SdyError::TooManyDevices("m".into()));
        assert_eq!(e.to_string(), "mesh m has more than 2^31 devices");
    }

    #[test]
    fn blocks_follow_the_mesh_coordinates() {
        let m = parse_meshes(r#"mesh = #sdy.mesh<["x"=2, "y"=4]>"#)
            .unwrap()
            .remove(0);
        let s = |dims: Vec<Vec<&str>>| Sharding {
            mesh: "mesh".into(),
            dims: dims
                .into_iter()
                .map(|d| d.into_iter().map(String::from).collect())
                .collect(),
        };
        // Device 6 is x=1, y=2.
        assert_eq!(
            m.block(&s(vec![vec!["x"], vec!["y"]]), &[4, 8], 6).unwrap(),
            vec![(2, 2), (4, 2)]
        );
        assert_eq!(
            m.block(&s(vec![vec!["x", "y"], vec![]]), &[16, 3], 6)
                .unwrap(),
            vec![(12, 2), (0, 3)]
        );
        assert_eq!(
            m.block(&s(vec![vec!["y", "x"]]), &[16], 6).unwrap(),
            vec![(10, 2)]
        );
        assert_eq!(
            m.block(&s(vec![vec!["x"], vec!["x"]]), &[4, 4], 0),
            Err(SdyError::AxisTwice("x".into()))
        );
        assert!(matches!(
            m.block(&s(vec![vec!["z"]]), &[4], 0),
            Err(SdyError::NoAxis { .. })
        ));
        let e = m.block(&s(vec![vec!["y"]]), &[6], 0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "dimension of size 6 does not split into 4 shards"
        );
    }

    #[test]
    fn block_rows_walk_the_block_in_row_major_order() {
        // The 2x2 block at (1, 1) of a 3x4 array of 2-byte elements.
        let mut rows = Vec::new();
        block_rows(&[3, 4], &[2, 2], &[1, 1], 2, |g, l, n| rows.push((g, l, n)));
        assert_eq!(rows, vec![(10, 0, 4), (18, 4, 4)]);
        let mut scalar = Vec::new();
        block_rows(&[], &[], &[], 4, |g, l, n| scalar.push((g, l, n)));
        assert_eq!(scalar, vec![(0, 0, 4)]);
        let mut empty = 0;
        block_rows(&[3, 4], &[0, 2], &[0, 0], 2, |_, _, _| empty += 1);
        assert_eq!(empty, 0);
    }
}

/// The value of `key` in a `frontend_attributes={k=v,...}` text: a quoted string (unescaped)
/// or a braced group, as written.
pub fn frontend_value(text: &str, key: &str) -> Option<String> {
    let pat = format!("{key}=");
    let mut from = 0;
    let at = loop {
        let k = from + text[from..].find(&pat)?;
        // A key starts after `{` or `,` (not inside another key's value).
        if k == 0 || text[..k].ends_with(['{', ',', ' ']) {
            break k + pat.len();
        }
        from = k + 1;
    };
    let rest = &text[at..];
    if let Some(r) = rest.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = r.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => out.push(chars.next()?),
                '"' => return Some(out),
                c => out.push(c),
            }
        }
        return None;
    }
    if rest.starts_with('{') {
        let mut depth = 0;
        for (i, c) in rest.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(rest[..=i].to_string());
                    }
                }
                _ => {}
            }
        }
        return None;
    }
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    Some(rest[..end].to_string())
}

#[cfg(test)]
mod frontend_tests {
    use super::frontend_value;

    #[test]
    fn values_are_found_and_unescaped() {
        let t = r##"{xla.sdy.in_shardings="#sdy.sharding_per_value<[<@mesh, [{\"x\"}]>]>",xla.sdy.manual_axes="#sdy<manual_axes{\"x\"}>"}"##;
        assert_eq!(
            frontend_value(t, "xla.sdy.in_shardings").unwrap(),
            r##"#sdy.sharding_per_value<[<@mesh, [{"x"}]>]>"##
        );
        let h = r#"{xla.sdy.meshes={mesh = #sdy.mesh<["x"=2]>}}"#;
        assert_eq!(
            frontend_value(h, "xla.sdy.meshes").unwrap(),
            r#"{mesh = #sdy.mesh<["x"=2]>}"#
        );
        assert_eq!(frontend_value(h, "meshes"), None);
    }
}
