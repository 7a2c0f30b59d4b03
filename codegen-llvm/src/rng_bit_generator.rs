//! `rng-bit-generator` as a kernel over work items, bit-exact with XLA's expansion of it
//! (`RngBitGeneratorExpander` over the ThreeFry-2x32 and Philox-4x32 block functions), shared
//! by the cpu backend (item ranges per host thread) and the nvptx backend (one item per GPU
//! thread).
//!
//! The random bits are a pure function of the key, the counter and the position of an element,
//! so the kernel's work items are the block calls: each item computes one block of 32-bit words
//! from its counter and stores the elements those words make. Results never depend on how the
//! items are split across threads. The new state is written by the item range that starts at
//! 0 (the kernel always has at least one item, so the state is written even for an empty
//! output).
//!
//! Layout (the evaluator's `analysis/src/eval/rng.rs`, checked against XLA):
//! - the state is `u64[k]`, `k >= 2`; `state[0]` is the key, split into two 32-bit words;
//! - ThreeFry (`rng_three_fry`): `state[1]` is a 64-bit counter. A 64-bit element `i` is the
//!   block at `counter + i`, low word first. Narrower elements split the shape along its first
//!   even dimension (else its largest) into halves: the block at `counter + j`, `j` the linear
//!   index in the half shape, gives the elements at coordinates `2c` and `2c + 1` along the
//!   split dimension. The counter advances by the number of blocks.
//! - Philox (`rng_philox`, and `rng_default` as on XLA's CPU backend): a 128-bit counter
//!   `(state[1], state[2])`, or `(state[1], state[0])` for a 2-element state (of which only
//!   `state[1]` is written back). Block `i` at `counter + i` gives four words: four elements of
//!   up to 32 bits, or two 64-bit elements (words 0,1 and 2,3, low word first).
//!
//! Elements narrower than 32 bits take the low bits of their word; every element's bits are
//! stored as they are, whatever its type (floats included).

use axle_ir::{AttrKey, AttrValue, InstId, Module};
use inkwell::values::{IntValue, PointerValue};
use inkwell::IntPredicate;

use crate::cg::{bv, numel, strides, Cg};
use crate::elemental::{arr_of, Gen};
use crate::error::R;

/// The generator an `rng-bit-generator` uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Algo {
    ThreeFry,
    Philox,
}

fn algorithm(m: &Module, id: InstId) -> R<Algo> {
    match m.attr(id, &AttrKey::Algorithm) {
        None => Ok(Algo::Philox),
        Some(AttrValue::Ident(s)) | Some(AttrValue::Str(s)) | Some(AttrValue::Raw(s)) => {
            match s.as_ref() {
                "rng_three_fry" => Ok(Algo::ThreeFry),
                "rng_philox" | "rng_default" => Ok(Algo::Philox),
                a => Err(format!("unsupported rng algorithm {a}").into()),
            }
        }
        _ => Err("bad algorithm attribute".into()),
    }
}

/// Emits the body of an `rng-bit-generator` kernel over items `[start, end)` (`start >= 0`;
/// items past the last do nothing); `outs` are the new-state and bits buffers. Returns the
/// number of items (at least 1).
pub fn emit_rng<'ctx>(
    g: &mut Gen<'_, 'ctx>,
    m: &Module,
    root: InstId,
    outs: &[PointerValue<'ctx>],
    start: IntValue<'ctx>,
    end: IntValue<'ctx>,
) -> R<i64> {
    let cg = g.cg;
    let algo = algorithm(m, root)?;
    let state_op = *m
        .operands(root)
        .first()
        .ok_or("rng-bit-generator needs a state operand")?;
    let st_shape = arr_of(m, state_op)?.clone();
    if st_shape.ty != axle_ir::ElementType::U64 || st_shape.rank() != 1 || st_shape.dims[0] < 2 {
        return Err("rng-bit-generator needs a u64 state of at least 2 elements".into());
    }
    let [st_out, bits_out] = outs else {
        return Err("rng-bit-generator returns a (state, bits) tuple".into());
    };
    let data = data_shape(m, root)?;
    let ty = data.ty;
    let bits = ty.bits();
    if !(ty.is_int() || ty.is_float()) || !matches!(bits, 8 | 16 | 32 | 64) {
        return Err(format!("rng-bit-generator does not produce {}", ty.name()).into());
    }
    let dims = data.dims.to_vec();
    let n = numel(&dims);
    let k = st_shape.dims[0];

    // The state words, read once per kernel call (they are loop invariant).
    let mut st = Vec::with_capacity(k as usize);
    for j in 0..k {
        let idx = g.index_linear(&[k], cg.c64(j))?;
        st.push(g.gen1(state_op, &idx)?.into_int_value());
    }
    let b = &cg.b;
    let i32t = cg.i32();
    let key_lo = b.build_int_truncate(st[0], i32t, "key.lo")?;
    let key_hi = b.build_int_truncate(
        b.build_right_shift(st[0], cg.c64(32), false, "k")?,
        i32t,
        "key.hi",
    )?;
    let key = [key_lo, key_hi];
    let e = Emit {
        cg,
        out: *bits_out,
        bits,
    };

    let blocks = block_count(algo, &dims, bits);
    // Blocks past the last one do nothing; the kernel has an item even for an empty output so
    // the new state is still written.
    let last = cg.c64(blocks);
    let before =
        cg.b.build_int_compare(IntPredicate::SLT, end, last, "before")?;
    let bend =
        cg.b.build_select(before, end, last, "bend")?
            .into_int_value();
    match algo {
        Algo::ThreeFry => {
            let counter = st[1];
            cg.for_range(start, bend, |i| {
                let c = b.build_int_add(counter, i, "ctr")?;
                let w = threefry2x32(cg, split(cg, c)?, key)?;
                e.threefry_store(&dims, i, w)
            })?;
        }
        Algo::Philox => {
            let (lo, hi) = if k >= 3 {
                (st[1], st[2])
            } else {
                (st[1], st[0])
            };
            cg.for_range(start, bend, |i| {
                let (l, h) = add128(cg, lo, hi, i)?;
                let [a0, a1] = split(cg, l)?;
                let [b0, b1] = split(cg, h)?;
                let w = philox4x32(cg, [a0, a1, b0, b1], key)?;
                e.philox_store(n, i, w)
            })?;
        }
    }

    // The new state, written once.
    let first = b.build_int_compare(IntPredicate::EQ, start, cg.c64(0), "first")?;
    cg.if_then(first, || {
        let mut new = st.clone();
        match algo {
            Algo::ThreeFry => new[1] = b.build_int_add(st[1], cg.c64(blocks), "ctr.next")?,
            Algo::Philox => {
                let (lo, hi) = if k >= 3 {
                    (st[1], st[2])
                } else {
                    (st[1], st[0])
                };
                let (l, h) = add128(cg, lo, hi, cg.c64(blocks))?;
                new[1] = l;
                if k >= 3 {
                    new[2] = h;
                }
            }
        }
        for (j, v) in new.iter().enumerate() {
            cg.store(axle_ir::ElementType::U64, *st_out, cg.c64(j as i64), bv(*v))?;
        }
        Ok(())
    })?;
    Ok(blocks.max(1))
}

/// The block calls of generator `algo` for an output of `dims` of `bits`-bit elements.
fn block_count(algo: Algo, dims: &[i64], bits: u32) -> i64 {
    match algo {
        Algo::ThreeFry => threefry_blocks(dims, bits),
        Algo::Philox => {
            let n = numel(dims);
            let draws = if bits == 64 { 2 * n } else { n };
            (draws as u64).div_ceil(4) as i64
        }
    }
}

/// The shape of the bits `rng-bit-generator` `id` returns (its tuple's second element).
fn data_shape(m: &Module, id: InstId) -> R<axle_ir::ArrayShape> {
    match m.shape(id) {
        axle_ir::Shape::Tuple(ids) if ids.len() == 2 => Ok(m
            .shape_of(ids[1])
            .as_array()
            .cloned()
            .ok_or("rng-bit-generator returns a (state, bits) tuple")?),
        _ => Err("rng-bit-generator returns a (state, bits) tuple".into()),
    }
}

/// The work items of `rng-bit-generator` `id`'s kernel (what [`emit_rng`] returns): one per
/// block call, at least one.
pub fn rng_items(m: &Module, id: InstId) -> R<i64> {
    let algo = algorithm(m, id)?;
    let data = data_shape(m, id)?;
    Ok(block_count(algo, &data.dims, data.ty.bits()).max(1))
}

/// The number of ThreeFry blocks for `dims` of `bits`-bit elements.
fn threefry_blocks(dims: &[i64], bits: u32) -> i64 {
    if bits == 64 {
        return numel(dims);
    }
    if dims.is_empty() {
        return 1;
    }
    let s = split_dim(dims);
    let mut half = dims.to_vec();
    half[s] = (dims[s] + 1) / 2;
    numel(&half)
}

/// The dimension XLA splits a shape along for 32-bit ThreeFry draws: the first even one, else
/// the first largest.
fn split_dim(dims: &[i64]) -> usize {
    if let Some(d) = dims.iter().position(|d| d % 2 == 0) {
        return d;
    }
    let mut best = 0;
    for (i, &d) in dims.iter().enumerate() {
        if d > dims[best] {
            best = i;
        }
    }
    best
}

/// Where a block's words go.
struct Emit<'a, 'ctx> {
    cg: &'a Cg<'ctx>,
    out: PointerValue<'ctx>,
    bits: u32,
}

impl<'ctx> Emit<'_, 'ctx> {
    /// Stores 32-bit word `w` as element `at`, keeping its low bits.
    fn store_word(&self, at: IntValue<'ctx>, w: IntValue<'ctx>) -> R<()> {
        let cg = self.cg;
        let t = cg.int_ty(self.bits);
        let v = if self.bits < 32 {
            cg.b.build_int_truncate(w, t, "narrow")?
        } else {
            w
        };
        self.store_raw(at, v)
    }

    /// Stores words `lo`, `hi` as the 64-bit element `at`.
    fn store_pair(&self, at: IntValue<'ctx>, lo: IntValue<'ctx>, hi: IntValue<'ctx>) -> R<()> {
        let cg = self.cg;
        let b = &cg.b;
        let lo = b.build_int_z_extend(lo, cg.i64(), "lo")?;
        let hi = b.build_int_z_extend(hi, cg.i64(), "hi")?;
        let hi = b.build_left_shift(hi, cg.c64(32), "hi")?;
        self.store_raw(at, b.build_or(lo, hi, "w64")?)
    }

    fn store_raw(&self, at: IntValue<'ctx>, v: IntValue<'ctx>) -> R<()> {
        let cg = self.cg;
        let p = cg.gep(v.get_type().into(), self.out, at)?;
        let s = cg.b.build_store(p, v)?;
        let _ = s.set_alignment(self.bits / 8);
        Ok(())
    }

    /// The elements of ThreeFry block `i` (see the module header).
    fn threefry_store(&self, dims: &[i64], i: IntValue<'ctx>, w: [IntValue<'ctx>; 2]) -> R<()> {
        let cg = self.cg;
        let b = &cg.b;
        if self.bits == 64 {
            return self.store_pair(i, w[0], w[1]);
        }
        if dims.is_empty() {
            return self.store_word(cg.c64(0), w[0]);
        }
        let s = split_dim(dims);
        let mut half = dims.to_vec();
        half[s] = (dims[s] + 1) / 2;
        let hst = strides(&half);
        let ost = strides(dims);
        // The output offset of the even element: the half index's coordinates, doubled along
        // the split dimension.
        let mut at = cg.c64(0);
        let mut cs = cg.c64(0);
        for d in 0..dims.len() {
            if half[d] == 1 {
                continue;
            }
            let q = if hst[d] == 1 {
                i
            } else {
                b.build_int_unsigned_div(i, cg.c64(hst[d]), "q")?
            };
            let c = if d == 0 {
                q
            } else {
                b.build_int_unsigned_rem(q, cg.c64(half[d]), "c")?
            };
            let scale = if d == s { 2 * ost[d] } else { ost[d] };
            if d == s {
                cs = c;
            }
            at = b.build_int_nsw_add(at, b.build_int_nsw_mul(c, cg.c64(scale), "t")?, "at")?;
        }
        self.store_word(at, w[0])?;
        let odd_at = b.build_int_nsw_add(at, cg.c64(ost[s]), "odd")?;
        if dims[s] % 2 == 0 {
            self.store_word(odd_at, w[1])
        } else {
            // The odd coordinate `2c + 1` exists only below the last (even) one.
            let inside =
                b.build_int_compare(IntPredicate::SLT, cs, cg.c64(half[s] - 1), "inside")?;
            cg.if_then(inside, || self.store_word(odd_at, w[1]))
        }
    }

    /// The elements of Philox block `i` of an output of `n` elements.
    fn philox_store(&self, n: i64, i: IntValue<'ctx>, w: [IntValue<'ctx>; 4]) -> R<()> {
        let cg = self.cg;
        let b = &cg.b;
        let per = if self.bits == 64 { 2 } else { 4 };
        let base = b.build_int_nsw_mul(i, cg.c64(per), "base")?;
        for j in 0..per {
            let at = b.build_int_nsw_add(base, cg.c64(j), "at")?;
            let store = || {
                if self.bits == 64 {
                    self.store_pair(at, w[2 * j as usize], w[2 * j as usize + 1])
                } else {
                    self.store_word(at, w[j as usize])
                }
            };
            if j == 0 || n % per == 0 {
                store()?;
            } else {
                let inside = b.build_int_compare(IntPredicate::SLT, at, cg.c64(n), "inside")?;
                cg.if_then(inside, store)?;
            }
        }
        Ok(())
    }
}

/// The low and high 32-bit words of a 64-bit value.
fn split<'ctx>(cg: &Cg<'ctx>, v: IntValue<'ctx>) -> R<[IntValue<'ctx>; 2]> {
    let b = &cg.b;
    let lo = b.build_int_truncate(v, cg.i32(), "lo")?;
    let hi = b.build_right_shift(v, cg.c64(32), false, "hi")?;
    Ok([lo, b.build_int_truncate(hi, cg.i32(), "hi")?])
}

/// `(lo, hi) + i` as a 128-bit counter (`i` non-negative, below 2^63).
fn add128<'ctx>(
    cg: &Cg<'ctx>,
    lo: IntValue<'ctx>,
    hi: IntValue<'ctx>,
    i: IntValue<'ctx>,
) -> R<(IntValue<'ctx>, IntValue<'ctx>)> {
    let b = &cg.b;
    let l = b.build_int_add(lo, i, "ctr.lo")?;
    let carry = b.build_int_compare(IntPredicate::ULT, l, lo, "carry")?;
    let carry = b.build_int_z_extend(carry, cg.i64(), "carry")?;
    Ok((l, b.build_int_add(hi, carry, "ctr.hi")?))
}

fn rotl<'ctx>(cg: &Cg<'ctx>, x: IntValue<'ctx>, r: u32) -> R<IntValue<'ctx>> {
    let r = cg.c32(r as i64);
    Ok(cg
        .call_intrinsic("llvm.fshl", &[bv(x), bv(x), bv(r)])?
        .into_int_value())
}

/// The ThreeFry-2x32 block function (20 rounds, Random123's rotation constants).
fn threefry2x32<'ctx>(
    cg: &Cg<'ctx>,
    x: [IntValue<'ctx>; 2],
    key: [IntValue<'ctx>; 2],
) -> R<[IntValue<'ctx>; 2]> {
    const ROT: [u32; 8] = [13, 15, 26, 6, 17, 29, 16, 24];
    let b = &cg.b;
    let parity = b.build_xor(
        b.build_xor(key[0], key[1], "ks")?,
        cg.c32(0x1BD1_1BDA),
        "ks2",
    )?;
    let ks = [key[0], key[1], parity];
    let mut x0 = b.build_int_add(x[0], ks[0], "x0")?;
    let mut x1 = b.build_int_add(x[1], ks[1], "x1")?;
    for group in 0..5usize {
        let rots = &ROT[(group % 2) * 4..(group % 2) * 4 + 4];
        for &r in rots {
            x0 = b.build_int_add(x0, x1, "x0")?;
            x1 = rotl(cg, x1, r)?;
            x1 = b.build_xor(x1, x0, "x1")?;
        }
        let inject = group + 1;
        x0 = b.build_int_add(x0, ks[inject % 3], "x0")?;
        x1 = b.build_int_add(x1, ks[(inject + 1) % 3], "x1")?;
        x1 = b.build_int_add(x1, cg.c32(inject as i64), "x1")?;
    }
    Ok([x0, x1])
}

/// The Philox-4x32 block function (10 rounds).
fn philox4x32<'ctx>(
    cg: &Cg<'ctx>,
    mut x: [IntValue<'ctx>; 4],
    key: [IntValue<'ctx>; 2],
) -> R<[IntValue<'ctx>; 4]> {
    let b = &cg.b;
    let i64t = cg.i64();
    let i32t = cg.i32();
    let mul_hi_lo = |a: IntValue<'ctx>, m: u32| -> R<[IntValue<'ctx>; 2]> {
        let w = b.build_int_z_extend(a, i64t, "w")?;
        let p = b.build_int_nuw_mul(w, cg.c64(m as i64), "p")?;
        let hi = b.build_right_shift(p, cg.c64(32), false, "ph")?;
        Ok([
            b.build_int_truncate(hi, i32t, "hi")?,
            b.build_int_truncate(p, i32t, "lo")?,
        ])
    };
    let mut k = key;
    for _ in 0..10 {
        let [h0, l0] = mul_hi_lo(x[0], 0xD251_1F53)?;
        let [h1, l1] = mul_hi_lo(x[2], 0xCD9E_8D57)?;
        x = [
            b.build_xor(b.build_xor(h1, x[1], "y")?, k[0], "y0")?,
            l1,
            b.build_xor(b.build_xor(h0, x[3], "y")?, k[1], "y2")?,
            l0,
        ];
        k = [
            b.build_int_add(k[0], cg.c32(0x9E37_79B9u32 as i64), "k0")?,
            b.build_int_add(k[1], cg.c32(0xBB67_AE85u32 as i64), "k1")?,
        ];
    }
    Ok(x)
}
