//! The kernel cache: compiled kernel modules kept between compilations, so that a program
//! sharing kernels with one compiled before (the same model after an edit, another pass order
//! of it, its evaluation step after its training step) runs LLVM only on the kernels that are
//! new. The store ([`KernelCache`]) belongs to the caller (the `axle` facade keeps it beside the
//! compilation cache, on disk); this file says what an entry's key covers and what it holds.
//!
//! Invariants:
//! - A key covers everything the module's object code depends on: this build of the backend
//!   ([`crate::BACKEND_VERSION`]), the target (triple, CPU, features), every code generator
//!   option ([`crate::CpuOptions`], thread count included: the GEMM's work split depends on
//!   it), the relocation model, the module's pipeline class, and each kernel's full structural
//!   signature ([`crate::signature`]) with its function name, in module order. Kernel function
//!   names in JIT objects derive from the signature alone ([`content_symbol`]), never from the
//!   program, so a module's object is the same in every program that has its kernels.
//! - Only objects for the JIT are cached (ahead-of-time objects and printed IR are linked from
//!   bitcode and always compiled).
//! - An entry that does not decode (its kernel count or its object's checksum wrong) is a
//!   miss: the module is compiled and the entry replaced.

use sha2::{Digest, Sha256};

use crate::lower::Kernel;

/// Where compiled kernel modules are kept between compilations. Keys are key material (the
/// build, target, options and kernels' signatures; hash it to name an entry); values are the
/// modules' objects with the facts to run them. Both are opaque bytes to a store.
pub trait KernelCache: Send + Sync {
    /// The entry stored under `key`, if there is a sound one.
    fn get(&self, key: &[u8]) -> Option<Vec<u8>>;
    /// Stores `value` under `key`; a failure to store is not an error of the compilation.
    fn put(&self, key: &[u8], value: &[u8]);
}

/// The first 64 bits of the SHA-256 of a kernel's signature (shared outputs included).
pub(crate) fn sig_hash(sig: &str) -> u64 {
    let digest = Sha256::digest(sig.as_bytes());
    u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"))
}

/// The function name, in objects for the JIT, of kernel `k` whose signature's [`sig_hash`] is
/// `hash`: the hash and the kernel's kind, e.g. `k3f9a0c1d2b4e5f60.gemm`. Distinct signatures
/// whose names collide would fail to link (never silently share code); at 64 bits that takes
/// billions of distinct kernels in one program.
pub(crate) fn content_symbol(hash: u64, k: &Kernel) -> String {
    let kind = format!("{:?}", k.kind).to_lowercase();
    format!("k{hash:016x}.{kind}")
}

/// The key material of a module of kernels (see the module docs): `setting` covers the build,
/// target, options, relocation model and pipeline class; `kernels` are the module's kernels'
/// function names and signatures, in order.
pub(crate) fn group_key<'a>(
    setting: &str,
    kernels: impl Iterator<Item = (&'a str, &'a str)>,
) -> Vec<u8> {
    let mut key = Vec::new();
    let mut part = |b: &[u8]| {
        key.extend_from_slice(&(b.len() as u64).to_le_bytes());
        key.extend_from_slice(b);
    };
    part(crate::BACKEND_VERSION.as_bytes());
    part(setting.as_bytes());
    for (name, sig) in kernels {
        part(name.as_bytes());
        part(sig.as_bytes());
    }
    key
}

/// The items and grain of each kernel of a module, in module order.
pub(crate) type Facts = Vec<(i64, i64)>;

/// An entry: the items and grain of each kernel the module defines, the SHA-256 of its object
/// file, then the object file.
pub(crate) fn encode(facts: &[(i64, i64)], object: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + 16 * facts.len() + 32 + object.len());
    out.extend_from_slice(&(facts.len() as u64).to_le_bytes());
    for &(items, grain) in facts {
        out.extend_from_slice(&items.to_le_bytes());
        out.extend_from_slice(&grain.to_le_bytes());
    }
    out.extend_from_slice(&Sha256::digest(object));
    out.extend_from_slice(object);
    out
}

/// The facts and object of an entry made by [`encode`] for a module of `kernels` kernels;
/// `None` when it is not one.
pub(crate) fn decode(entry: &[u8], kernels: usize) -> Option<(Facts, Vec<u8>)> {
    let word = |at: usize| -> Option<[u8; 8]> { entry.get(at..at + 8)?.try_into().ok() };
    let n = u64::from_le_bytes(word(0)?) as usize;
    if n != kernels {
        return None;
    }
    let facts = (0..n)
        .map(|i| {
            let at = 8 + 16 * i;
            Some((
                i64::from_le_bytes(word(at)?),
                i64::from_le_bytes(word(at + 8)?),
            ))
        })
        .collect::<Option<Vec<_>>>()?;
    let digest = entry.get(8 + 16 * n..8 + 16 * n + 32)?;
    let object = entry.get(8 + 16 * n + 32..)?;
    if object.is_empty() || Sha256::digest(object).as_slice() != digest {
        return None;
    }
    Some((facts, object.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_reject_other_shapes() {
        let facts = [(12, 3), (-1, 0)];
        let e = encode(&facts, b"\x7fELF...");
        assert_eq!(
            decode(&e, 2),
            Some((facts.to_vec(), b"\x7fELF...".to_vec()))
        );
        assert_eq!(decode(&e, 1), None);
        assert_eq!(decode(&e[..20], 2), None);
        assert_eq!(decode(&e[..e.len() - 1], 2), None);
        assert_eq!(decode(&encode(&facts, b""), 2), None);
    }

    #[test]
    fn keys_separate_their_parts() {
        let a = group_key("s", [("k1", "ab"), ("k2", "c")].into_iter());
        let b = group_key("s", [("k1", "a"), ("k2", "bc")].into_iter());
        assert_ne!(a, b);
    }
}
