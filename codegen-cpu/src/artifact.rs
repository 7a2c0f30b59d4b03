//! A compiled module as bytes: the relocatable object files with the facts the runtime needs to
//! run it (parameter and result leaves, temporary bytes, kernel names), so it can be stored (the
//! facade's compilation cache) and loaded into another process without LLVM's optimizer or code
//! generator ([`crate::load_artifact`]).
//!
//! Format (little-endian): the magic `AXLEOBJ5`, then `u32` counts and lengths followed by
//! their items: parameter shapes, result shapes (each an element type name and `i64`
//! dimensions), `u64` temporary bytes, `u64` bytes of the block a run allocates (the
//! temporary block and the scratch arena), `u64` kernel count, kernel names and details (two
//! strings per kernel), the parameter leaves the code writes (a count, then `u32`s), the
//! outputs left in a parameter's memory (a count, then `u32` output and parameter leaf pairs),
//! and the object files (a count, then each with its length; the entry point's last).
//! Decoding checks every length against the bytes left, so a truncated or altered artifact is
//! an error value, never a panic or an out-of-range read.

use axle_ir::{ArrayShape, ElementType};

const MAGIC: &[u8; 8] = b"AXLEOBJ5";

/// A compiled module: object code and runtime facts.
#[derive(Clone, Debug, PartialEq)]
pub struct Artifact {
    /// The relocatable object files, one per LLVM module; together they define the entry
    /// point `axle_entry` (in the last).
    pub(crate) objects: Vec<Vec<u8>>,
    pub(crate) params: Vec<ArrayShape>,
    pub(crate) outputs: Vec<ArrayShape>,
    pub(crate) temp_bytes: u64,
    pub(crate) block_bytes: u64,
    pub(crate) kernels: usize,
    pub(crate) kernel_names: Vec<String>,
    /// Per kernel number, what it computes (for profiles and traces).
    pub(crate) kernel_details: Vec<String>,
    /// The parameter leaves the code writes (donated ones).
    pub(crate) writable_params: Vec<u32>,
    /// `(output leaf, parameter leaf)`: outputs the code leaves in a parameter's memory.
    pub(crate) donated_outputs: Vec<(u32, u32)>,
}

impl Artifact {
    /// The object files, the entry point's last.
    pub fn objects(&self) -> &[Vec<u8>] {
        &self.objects
    }

    /// The runtime facts without the object code.
    pub(crate) fn clone_facts(&self) -> Artifact {
        Artifact {
            objects: Vec::new(),
            params: self.params.clone(),
            outputs: self.outputs.clone(),
            temp_bytes: self.temp_bytes,
            block_bytes: self.block_bytes,
            kernels: self.kernels,
            kernel_names: self.kernel_names.clone(),
            kernel_details: self.kernel_details.clone(),
            writable_params: self.writable_params.clone(),
            donated_outputs: self.donated_outputs.clone(),
        }
    }

    /// The artifact as bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let code: usize = self.objects.iter().map(|o| o.len() + 4).sum();
        let mut out = Vec::with_capacity(code + 256);
        out.extend_from_slice(MAGIC);
        for shapes in [&self.params, &self.outputs] {
            put_u32(&mut out, shapes.len());
            for s in shapes {
                put_str(&mut out, s.ty.name());
                put_u32(&mut out, s.dims.len());
                for &d in s.dims.iter() {
                    out.extend_from_slice(&d.to_le_bytes());
                }
            }
        }
        out.extend_from_slice(&self.temp_bytes.to_le_bytes());
        out.extend_from_slice(&self.block_bytes.to_le_bytes());
        out.extend_from_slice(&(self.kernels as u64).to_le_bytes());
        put_u32(&mut out, self.kernel_names.len());
        for (k, n) in self.kernel_names.iter().enumerate() {
            put_str(&mut out, n);
            put_str(&mut out, self.kernel_details.get(k).map_or("", |d| d));
        }
        put_u32(&mut out, self.writable_params.len());
        for &k in &self.writable_params {
            put_u32(&mut out, k as usize);
        }
        put_u32(&mut out, self.donated_outputs.len());
        for &(j, k) in &self.donated_outputs {
            put_u32(&mut out, j as usize);
            put_u32(&mut out, k as usize);
        }
        put_u32(&mut out, self.objects.len());
        for o in &self.objects {
            put_u32(&mut out, o.len());
            out.extend_from_slice(o);
        }
        out
    }

    /// Decodes [`Artifact::to_bytes`]; any inconsistency is an error.
    pub fn from_bytes(bytes: &[u8]) -> Result<Artifact, String> {
        let mut r = Reader { b: bytes };
        if r.take(MAGIC.len())? != MAGIC {
            return Err("not an Axle object artifact (bad magic)".into());
        }
        let mut shapes = || -> Result<Vec<ArrayShape>, String> {
            let n = r.u32()?;
            let mut v = Vec::with_capacity(n.min(1 << 16));
            for _ in 0..n {
                let name = r.str()?;
                let ty = ElementType::from_name(&name)
                    .ok_or_else(|| format!("unknown element type '{name}'"))?;
                let rank = r.u32()?;
                let mut dims = Vec::with_capacity(rank.min(64));
                for _ in 0..rank {
                    let d = r.i64()?;
                    if d < 0 {
                        return Err(format!("negative dimension {d}"));
                    }
                    dims.push(d);
                }
                v.push(ArrayShape::new(ty, &dims));
            }
            Ok(v)
        };
        let params = shapes()?;
        let outputs = shapes()?;
        let temp_bytes = r.i64()? as u64;
        let block_bytes = r.i64()? as u64;
        if block_bytes < temp_bytes {
            return Err(format!(
                "a block of {block_bytes} bytes cannot hold {temp_bytes} temporary bytes"
            ));
        }
        let kernels = r.i64()? as usize;
        let n = r.u32()?;
        let mut kernel_names = Vec::with_capacity(n.min(1 << 16));
        let mut kernel_details = Vec::with_capacity(n.min(1 << 16));
        for _ in 0..n {
            kernel_names.push(r.str()?);
            kernel_details.push(r.str()?);
        }
        let n = r.u32()?;
        let mut writable_params = Vec::with_capacity(n.min(1 << 16));
        for _ in 0..n {
            let k = r.u32()?;
            if k >= params.len() {
                return Err(format!("writable parameter {k} of {}", params.len()));
            }
            writable_params.push(k as u32);
        }
        let n = r.u32()?;
        let mut donated_outputs = Vec::with_capacity(n.min(1 << 16));
        for _ in 0..n {
            let (j, k) = (r.u32()?, r.u32()?);
            if j >= outputs.len() || !writable_params.contains(&(k as u32)) {
                return Err(format!(
                    "output {j} left in parameter {k}, which is not a writable parameter"
                ));
            }
            donated_outputs.push((j as u32, k as u32));
        }
        let n = r.u32()?;
        let mut objects = Vec::with_capacity(n.min(1 << 16));
        for _ in 0..n {
            let len = r.u32()?;
            objects.push(r.take(len)?.to_vec());
        }
        if !r.b.is_empty() {
            return Err(format!("{} trailing bytes", r.b.len()));
        }
        Ok(Artifact {
            objects,
            params,
            outputs,
            temp_bytes,
            block_bytes,
            kernels,
            kernel_names,
            kernel_details,
            writable_params,
            donated_outputs,
        })
    }
}

fn put_u32(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&(n as u32).to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u32(out, s.len());
    out.extend_from_slice(s.as_bytes());
}

struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.b.len() {
            return Err(format!(
                "truncated: {n} bytes wanted, {} left",
                self.b.len()
            ));
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }

    fn u32(&mut self) -> Result<usize, String> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }

    fn i64(&mut self) -> Result<i64, String> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_le_bytes(a))
    }

    fn str(&mut self) -> Result<String, String> {
        let n = self.u32()?;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|e| e.to_string())
    }
}
