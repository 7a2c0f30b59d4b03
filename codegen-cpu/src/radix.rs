//! Radix sort for `sort` instructions whose comparator is a strict order on one key operand,
//! and for `topk` (the first `k` of each row in the descending or ascending total order).
//!
//! Recognized comparators: the root is `compare(X, Y)` with direction `LT` (ascending) or `GT`
//! (descending), where `X` depends only on the parameter of key operand `i` (`2i`), `Y` is the
//! same expression of parameter `2i + 1`, and the compare is a strict weak order on `X`'s
//! type: `TOTALORDER` for floats (JAX's comparators canonicalize NaN and -0 in `X` first, as
//! `sort_1M` and the corpus sorts do), any integer compare. Other operands are carried along.
//!
//! Each row becomes records of `(key, payload)` in one integer of twice the key width (32-bit
//! keys for 32-bit and narrower `X`, 64-bit otherwise): `key` maps `X`'s value to an unsigned
//! integer in the comparator's order (the float total-order key the compare itself uses with
//! its sign bit flipped, signed integers with the sign bit flipped, complemented for `GT`),
//! computed by emitting `X` itself, so the key sees exactly what the inlined comparator sees
//! (flushed subnormals included). The payload is the element itself when the sort has one
//! 32-bit-or-narrower operand, else its position, and the results are gathered by position at
//! the end. One pass counts the histograms of every 8-bit digit; then a least-significant-digit
//! pass per digit scatters the records between two planes, skipping digits all keys share.
//!
//! In the JIT on the host the digit passes are the runtime's ([`crate::runtime::radix`],
//! compiled once with the compiler; histograms included), so a sort kernel is only its record
//! and result loops; ahead-of-time objects and other targets get the same passes generated.
//!
//! LSD radix sort is stable, and the key order equals the comparator's order, so the output is
//! the one the stable merge sort gives with the comparator, bit for bit (tested with both
//! kinds of passes).

use axle_ir::{
    AttrKey, AttrValue, CompId, ComparisonDirection, ComparisonType, ElementType, InstId, Module,
    Opcode,
};
use inkwell::values::{IntValue, PointerValue};
use inkwell::IntPredicate;

use crate::cg::{bv, numel};
use crate::elemental::{Ext, Gen};
use crate::error::R;

/// Rows shorter than this use the merge sort (the histograms would cost more than they save).
pub(crate) const RADIX_MIN_LEN: i64 = 256;

/// Digits are 8 bits wide.
const DIGIT: u32 = 8;
const BUCKETS: i64 = 1 << DIGIT;

/// What the key is computed from.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum KeyExpr {
    /// The comparator's key expression `x` of its parameter `2 * key_op`.
    Comparator { comp: CompId, x: InstId },
    /// The key operand's value itself (`topk`'s total order).
    Value,
}

/// A sort (or `topk`) the radix sort handles.
#[derive(Clone, Debug)]
pub(crate) struct RadixPlan {
    /// How the key is computed.
    pub key: KeyExpr,
    /// The key operand.
    pub key_op: usize,
    /// The type of `x`.
    pub x_ty: ElementType,
    /// Descending (`GT`).
    pub descending: bool,
    /// Bits of the key (32 or 64).
    pub key_bits: u32,
    /// Whether the payload is the value itself (one operand of at most 32 bits).
    pub payload_is_value: bool,
}

impl RadixPlan {
    /// Bytes of a record.
    pub fn record_bytes(&self) -> i64 {
        2 * self.key_bits as i64 / 8
    }

    /// Scratch bytes per row of `len` elements: two record planes and the histograms.
    pub fn row_bytes(&self, len: i64) -> i64 {
        2 * len * self.record_bytes() + self.passes() as i64 * BUCKETS * 4
    }

    fn passes(&self) -> u32 {
        self.key_bits / DIGIT
    }
}

/// The radix plan of `sort` instruction `id`, if its comparator is one the radix sort handles.
pub(crate) fn plan(m: &Module, id: InstId) -> Option<RadixPlan> {
    if m.opcode(id) != Opcode::Sort {
        return None;
    }
    let comp = m.comp_attr(id, &AttrKey::ToApply)?;
    let ops = m.operands(id);
    let params = m.params(comp);
    if params.len() != 2 * ops.len() || params.iter().any(|p| p.is_none()) {
        return None;
    }
    let root = m.root(comp);
    if m.opcode(root) != Opcode::Compare {
        return None;
    }
    let descending = match m.attr(root, &AttrKey::Direction) {
        Some(AttrValue::Direction(ComparisonDirection::Lt)) => false,
        Some(AttrValue::Direction(ComparisonDirection::Gt)) => true,
        _ => return None,
    };
    let (x, y) = (m.operands(root)[0], m.operands(root)[1]);
    let x_ty = m.array_shape(x)?.ty;
    let cty = m.comparison_type(root, x_ty);
    let ok_type = match cty {
        ComparisonType::TotalOrder => matches!(x_ty, ElementType::F32 | ElementType::F64),
        ComparisonType::Signed => x_ty.is_signed_int(),
        ComparisonType::Unsigned => x_ty.is_int() && !x_ty.is_signed_int(),
        _ => false,
    };
    if !ok_type || x_ty.bits() > 64 {
        return None;
    }
    // Which parameter X reads: exactly one, an even one, and Y the same with the next.
    let key_op = (0..ops.len()).find(|&i| same_expr(m, x, y, params[2 * i], params[2 * i + 1]))?;
    let key_bits = if x_ty.bits() <= 32 { 32 } else { 64 };
    let t0 = m.array_shape(ops[0])?.ty;
    Some(RadixPlan {
        key: KeyExpr::Comparator { comp, x },
        key_op,
        x_ty,
        descending,
        key_bits,
        payload_is_value: ops.len() == 1 && t0.bits() <= 32 && !t0.is_complex(),
    })
}

/// The radix plan of a `topk` instruction (values in the total order, largest first when
/// `largest`), if its element type has a key.
pub(crate) fn plan_topk(m: &Module, id: InstId) -> Option<RadixPlan> {
    if m.opcode(id) != Opcode::TopK {
        return None;
    }
    let ty = m.array_shape(m.operands(id)[0])?.ty;
    if !(ty.is_float() || ty.is_int()) || ty.bits() > 64 {
        return None;
    }
    Some(RadixPlan {
        key: KeyExpr::Value,
        key_op: 0,
        x_ty: ty,
        descending: m.bool_attr(id, &AttrKey::Largest).unwrap_or(true),
        key_bits: if ty.bits() <= 32 { 32 } else { 64 },
        payload_is_value: false,
    })
}

/// Whether `x` reads only parameter `px`, `y` only `py`, and both are the same expression.
fn same_expr(m: &Module, x: InstId, y: InstId, px: InstId, py: InstId) -> bool {
    fn go(m: &Module, x: InstId, y: InstId, px: InstId, py: InstId, depth: usize) -> bool {
        if depth > 64 {
            return false;
        }
        let op = m.opcode(x);
        if op == Opcode::Parameter || m.opcode(y) == Opcode::Parameter {
            return x == px && y == py;
        }
        if op != m.opcode(y) || m.shape(x) != m.shape(y) || m.attrs(x) != m.attrs(y) {
            return false;
        }
        if !matches!(
            op,
            Opcode::Constant
                | Opcode::Compare
                | Opcode::Select
                | Opcode::Convert
                | Opcode::BitcastConvert
        ) && !op.is_elementwise_unary()
            && !op.is_elementwise_binary()
        {
            return false;
        }
        if op == Opcode::Constant {
            return x == y || (m.literal(x).is_some() && m.literal(x) == m.literal(y));
        }
        let (xo, yo) = (m.operands(x), m.operands(y));
        xo.len() == yo.len()
            && xo
                .iter()
                .zip(yo)
                .all(|(&a, &b)| go(m, a, b, px, py, depth + 1))
    }
    x != y && go(m, x, y, px, py, 0)
}

/// Scratch bytes of a radix-sorted `sort` with rows of `len` elements, `rows` of them.
pub(crate) fn scratch_bytes(p: &RadixPlan, rows: i64, len: i64) -> i64 {
    if len < RADIX_MIN_LEN {
        0
    } else {
        rows * p.row_bytes(len)
    }
}

/// Where operand values and results live, as the sort kernel binds them.
pub(crate) struct Rows<'s, 'ctx> {
    /// The sort's dimensions and sorted dimension.
    pub dims: &'s [i64],
    pub d: usize,
    /// The sort's operands and their element types.
    pub ops: &'s [InstId],
    pub tys: &'s [ElementType],
    /// One output buffer per operand; for `topk`, the values and the `s32` indices.
    pub outs: &'s [PointerValue<'ctx>],
    /// For `topk`: `k` (the results are the first `k` of each sorted row).
    pub topk: Option<i64>,
    /// Whether the digit passes are the runtime's ([`crate::runtime::radix`]; only in the
    /// JIT on the host) rather than generated.
    pub library: bool,
}

/// Emits the radix sort of rows `start..end` (each with its scratch at `scratch + row *
/// row_bytes`); returns the kernel's (items, grain).
pub(crate) fn emit<'a, 'ctx>(
    g: &mut Gen<'a, 'ctx>,
    p: &RadixPlan,
    rows_of: &Rows<'_, 'ctx>,
    scratch: PointerValue<'ctx>,
    start: IntValue<'ctx>,
    end: IntValue<'ctx>,
) -> R<(i64, i64)> {
    let cg = g.cg;
    let m = g.m;
    let (dims, d) = (rows_of.dims, rows_of.d);
    let len = dims[d];
    let row_dims = crate::cg::dims_without(dims, d);
    let rows = numel(&row_dims);
    if rows == 0 || len == 0 {
        return Ok((0, 1));
    }
    let kb = p.key_bits;
    let kt = cg.int_ty(kb);
    let rt = cg.int_ty(2 * kb);
    let i32t = cg.i32();
    let b = &cg.b;
    let rank = dims.len();
    let row_bytes = p.row_bytes(len);
    let passes = p.passes();
    let library = rows_of.library;
    cg.for_range(start, end, |row| {
        g.push_scope();
        let rm = g.index_linear(&row_dims, row)?.multi;
        let at = |g: &mut Gen<'a, 'ctx>, pos: IntValue<'ctx>| {
            let mut multi = Vec::with_capacity(rank);
            let mut r = 0;
            for k in 0..rank {
                if k == d {
                    multi.push(pos);
                } else {
                    multi.push(rm[r]);
                    r += 1;
                }
            }
            g.index_multi(dims, multi)
        };
        let base = cg.gep(
            cg.i8().into(),
            scratch,
            b.build_int_nsw_mul(row, cg.c64(row_bytes), "rb")?,
        )?;
        let plane_a = base;
        let plane_b = cg.byte_gep(base, len * p.record_bytes())?;
        let hist = cg.byte_gep(base, 2 * len * p.record_bytes())?;
        // Clear the histograms (the runtime's passes count their own).
        if !library {
            cg.for_range(cg.c64(0), cg.c64(passes as i64 * BUCKETS), |i| {
                b.build_store(cg.gep(i32t.into(), hist, i)?, i32t.const_zero())?;
                Ok(())
            })?;
        }
        let digit = |key: IntValue<'ctx>, pass: u32| -> R<IntValue<'ctx>> {
            let s =
                b.build_right_shift(key, kt.const_int((pass * DIGIT) as u64, false), false, "d")?;
            let s = b.build_and(s, kt.const_int((BUCKETS - 1) as u64, false), "d")?;
            Ok(b.build_int_z_extend_or_bit_cast(s, cg.i64(), "d")?)
        };
        // Records and histograms.
        cg.for_range(cg.c64(0), cg.c64(len), |i| {
            g.push_scope();
            let idx = at(g, i)?;
            let kv = g.gen1(rows_of.ops[p.key_op], &idx)?;
            let key = order_key(g, p, kv)?;
            let payload = if p.payload_is_value {
                let v = g.gen1(rows_of.ops[0], &idx)?;
                let bits = cg.to_mem(rows_of.tys[0], v)?;
                let w = bits.get_type();
                let iw = cg.int_ty(rows_of.tys[0].byte_size() as u32 * 8);
                let bits = if w.is_int_type() {
                    bits.into_int_value()
                } else {
                    b.build_bit_cast(bits, iw, "bits")?.into_int_value()
                };
                b.build_int_z_extend_or_bit_cast(bits, kt, "pl")?
            } else {
                b.build_int_truncate_or_bit_cast(i, kt, "pl")?
            };
            g.pop_scope();
            let hi = b.build_int_z_extend(key, rt, "hi")?;
            let hi = b.build_left_shift(hi, rt.const_int(kb as u64, false), "hi")?;
            let rec = b.build_or(hi, b.build_int_z_extend(payload, rt, "lo")?, "rec")?;
            b.build_store(cg.gep(rt.into(), plane_a, i)?, rec)?;
            if library {
                return Ok(());
            }
            for pass in 0..passes {
                let dg = digit(key, pass)?;
                let slot = b.build_int_nsw_add(dg, cg.c64(pass as i64 * BUCKETS), "h")?;
                let hp = cg.gep(i32t.into(), hist, slot)?;
                let c = b.build_load(i32t, hp, "c")?.into_int_value();
                b.build_store(hp, b.build_int_add(c, i32t.const_int(1, false), "c1")?)?;
            }
            Ok(())
        })?;
        // One scatter pass per digit that the keys do not all share: the runtime's, or
        // generated here.
        let src = if library {
            call_runtime(cg, plane_a, plane_b, len, kb)?
        } else {
            generated_passes(cg, hist, plane_a, plane_b, len, kb)?
        };
        // Results: the payload itself, or the operands gathered by position (for `topk`, the
        // first `k` values and their positions).
        let out_dims: Vec<i64> = match rows_of.topk {
            Some(k) => dims
                .iter()
                .enumerate()
                .map(|(j, &x)| if j == d { k } else { x })
                .collect(),
            None => dims.to_vec(),
        };
        cg.for_range(cg.c64(0), cg.c64(out_dims[d]), |i| {
            g.push_scope();
            let r = b
                .build_load(rt, cg.gep(rt.into(), src, i)?, "r")?
                .into_int_value();
            let payload = b.build_int_truncate(r, kt, "pl")?;
            let dst_idx = at(g, i)?;
            if rows_of.topk.is_some() {
                let out_idx = g.index_multi(&out_dims, dst_idx.multi.clone())?;
                let pos = b.build_int_z_extend_or_bit_cast(payload, cg.i64(), "pos")?;
                let src_idx = at(g, pos)?;
                let v = g.gen1(rows_of.ops[0], &src_idx)?;
                cg.store(rows_of.tys[0], rows_of.outs[0], out_idx.linear, v)?;
                let p32 = b.build_int_truncate_or_bit_cast(payload, cg.i32(), "p32")?;
                cg.store(ElementType::S32, rows_of.outs[1], out_idx.linear, bv(p32))?;
            } else if p.payload_is_value {
                let ty = rows_of.tys[0];
                let iw = cg.int_ty(ty.byte_size() as u32 * 8);
                let bits = b.build_int_truncate_or_bit_cast(payload, iw, "bits")?;
                let mty = cg.mem_ty(ty)?;
                let v = if mty.is_int_type() {
                    bv(bits)
                } else {
                    b.build_bit_cast(bits, mty, "v")?
                };
                let v = cg.load_form(ty, v)?;
                cg.store(ty, rows_of.outs[0], dst_idx.linear, v)?;
            } else {
                let pos = b.build_int_z_extend_or_bit_cast(payload, cg.i64(), "pos")?;
                let src_idx = at(g, pos)?;
                for (k, &o) in rows_of.ops.iter().enumerate() {
                    let v = g.gen1(o, &src_idx)?;
                    cg.store(rows_of.tys[k], rows_of.outs[k], dst_idx.linear, v)?;
                }
            }
            g.pop_scope();
            Ok(())
        })?;
        g.pop_scope();
        Ok(())
    })?;
    let _ = m;
    Ok((
        rows,
        (crate::parallel_cost::GRAIN_ELEMS / len.max(1)).max(1),
    ))
}

/// Emits the digit passes of one row's `len` records of `key_bits`-bit keys in `a` (with `b`
/// as the second plane and the histograms `hist` counted): per digit that the keys do not all
/// share, the buckets' first positions, then a stable scatter; returns the plane the records
/// end in.
fn generated_passes<'ctx>(
    cg: &crate::cg::Cg<'ctx>,
    hist: PointerValue<'ctx>,
    a: PointerValue<'ctx>,
    b_plane: PointerValue<'ctx>,
    len: i64,
    key_bits: u32,
) -> R<PointerValue<'ctx>> {
    let b = &cg.b;
    let kt = cg.int_ty(key_bits);
    let rt = cg.int_ty(2 * key_bits);
    let i32t = cg.i32();
    let digit = |key: IntValue<'ctx>, pass: u32| -> R<IntValue<'ctx>> {
        let s = b.build_right_shift(key, kt.const_int((pass * DIGIT) as u64, false), false, "d")?;
        let s = b.build_and(s, kt.const_int((BUCKETS - 1) as u64, false), "d")?;
        Ok(b.build_int_z_extend_or_bit_cast(s, cg.i64(), "d")?)
    };
    let key_of = |rec: IntValue<'ctx>| -> R<IntValue<'ctx>> {
        let k = b.build_right_shift(rec, rt.const_int(key_bits as u64, false), false, "k")?;
        Ok(b.build_int_truncate(k, kt, "k")?)
    };
    let mut src = a;
    let mut dst = b_plane;
    for pass in 0..key_bits / DIGIT {
        let r0 = b.build_load(rt, src, "r0")?.into_int_value();
        let d0 = digit(key_of(r0)?, pass)?;
        let h0 = cg.gep(
            i32t.into(),
            hist,
            b.build_int_nsw_add(d0, cg.c64(pass as i64 * BUCKETS), "h")?,
        )?;
        let c0 = b.build_load(i32t, h0, "c0")?.into_int_value();
        let trivial = b.build_int_compare(
            IntPredicate::EQ,
            c0,
            i32t.const_int(len as u64, false),
            "same",
        )?;
        let hrow = cg.gep(i32t.into(), hist, cg.c64(pass as i64 * BUCKETS))?;
        let moved = cg.if_else_with(
            &mut (),
            trivial,
            |_| Ok(vec![bv(src), bv(dst)]),
            |_| {
                // Exclusive prefix sums: each bucket's first position.
                cg.for_range_acc(
                    cg.c64(0),
                    cg.c64(BUCKETS),
                    &[bv(i32t.const_zero())],
                    |j, acc| {
                        let q = cg.gep(i32t.into(), hrow, j)?;
                        let c = b.build_load(i32t, q, "c")?.into_int_value();
                        let sum = acc[0].into_int_value();
                        b.build_store(q, sum)?;
                        Ok(vec![bv(b.build_int_add(sum, c, "s")?)])
                    },
                )?;
                cg.for_range(cg.c64(0), cg.c64(len), |i| {
                    let r = b
                        .build_load(rt, cg.gep(rt.into(), src, i)?, "r")?
                        .into_int_value();
                    let dg = digit(key_of(r)?, pass)?;
                    let q = cg.gep(i32t.into(), hrow, dg)?;
                    let o = b.build_load(i32t, q, "o")?.into_int_value();
                    b.build_store(q, b.build_int_add(o, i32t.const_int(1, false), "o1")?)?;
                    let o = b.build_int_z_extend(o, cg.i64(), "o")?;
                    b.build_store(cg.gep(rt.into(), dst, o)?, r)?;
                    Ok(())
                })?;
                Ok(vec![bv(dst), bv(src)])
            },
        )?;
        src = moved[0].into_pointer_value();
        dst = moved[1].into_pointer_value();
    }
    Ok(src)
}

/// Emits the call of [`crate::runtime::radix::axle_rt_radix_sort`] on one row's `len` records
/// of `key_bits`-bit keys in `a`, with `b` as the second plane; returns the plane it left
/// them in.
fn call_runtime<'ctx>(
    cg: &crate::cg::Cg<'ctx>,
    a: PointerValue<'ctx>,
    b: PointerValue<'ctx>,
    len: i64,
    key_bits: u32,
) -> R<PointerValue<'ctx>> {
    let (p, i) = (cg.ptr(), cg.i64());
    let fty = p.fn_type(&[p.into(), p.into(), i.into(), i.into()], false);
    let f = crate::host::runtime_function(cg, "axle_rt_radix_sort", fty);
    let args = [
        a.into(),
        b.into(),
        cg.c64(len).into(),
        cg.c64(key_bits as i64).into(),
    ];
    let out = cg.b.build_call(f, &args, "sorted")?;
    Ok(out
        .try_as_basic_value()
        .basic()
        .ok_or("axle_rt_radix_sort returns nothing")?
        .into_pointer_value())
}

/// The unsigned key of key operand value `v`: the comparator's `X` of it, mapped to an
/// integer whose unsigned order is the comparator's order.
fn order_key<'ctx>(
    g: &mut Gen<'_, 'ctx>,
    p: &RadixPlan,
    v: crate::cg::Val<'ctx>,
) -> R<IntValue<'ctx>> {
    let cg = g.cg;
    let m = g.m;
    let b = &cg.b;
    // X of the value, emitted as the comparator would.
    let x = match &p.key {
        KeyExpr::Comparator { comp, x } => {
            let mut child = Gen::new(cg, m);
            child.bind(m.params(*comp)[2 * p.key_op], Ext::Vals(vec![v]));
            let idx = child.scalar_index();
            child.gen1(*x, &idx)?
        }
        KeyExpr::Value => v,
    };
    let kt = cg.int_ty(p.key_bits);
    let sign_flip = |k: IntValue<'ctx>, bits: u32| -> R<IntValue<'ctx>> {
        let t = cg.int_ty(bits);
        Ok(b.build_xor(k, t.const_int(1u64 << (bits - 1), false), "flip")?)
    };
    let key = if p.x_ty.is_float() {
        // Floats narrower than f32 are in f32 registers; widening keeps their order.
        let f = x.into_float_value();
        let k = crate::ops::total_order_key(cg, f)?;
        let bits = if f.get_type() == cg.f64() { 64 } else { 32 };
        sign_flip(k, bits)?
    } else if p.x_ty.is_signed_int() {
        sign_flip(x.into_int_value(), p.x_ty.bits())?
    } else {
        x.into_int_value()
    };
    let key = b.build_int_z_extend_or_bit_cast(key, kt, "key")?;
    Ok(if p.descending {
        b.build_not(key, "desc")?
    } else {
        key
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const JAX_SORT: &str = r#"HloModule s
cmp {
  a = f32[] parameter(0)
  ne.a = pred[] compare(a, a), direction=NE
  nan = f32[] constant(nan)
  zero = f32[] constant(0)
  eq.a = pred[] compare(a, zero), direction=EQ
  z.a = f32[] select(eq.a, zero, a)
  x = f32[] select(ne.a, nan, z.a)
  b = f32[] parameter(1)
  ne.b = pred[] compare(b, b), direction=NE
  eq.b = pred[] compare(b, zero), direction=EQ
  z.b = f32[] select(eq.b, zero, b)
  y = f32[] select(ne.b, nan, z.b)
  ROOT lt = pred[] compare(x, y), direction=LT, type=TOTALORDER
}
ENTRY main {
  k = f32[1000] parameter(0)
  ROOT s = f32[1000] sort(k), dimensions={0}, is_stable=true, to_apply=cmp
}
"#;

    fn sort_of(text: &str) -> (axle_ir::Module, InstId) {
        let m = axle_ir::parse_module(text).expect("parses");
        let root = m.root(m.entry());
        (m, root)
    }

    #[test]
    fn recognizes_jax_float_comparators() {
        let (m, s) = sort_of(JAX_SORT);
        let p = plan(&m, s).expect("a radix plan");
        assert_eq!((p.key_op, p.key_bits, p.descending), (0, 32, false));
        assert!(matches!(p.key, KeyExpr::Comparator { .. }));
        assert!(p.payload_is_value);
    }

    #[test]
    fn refuses_non_strict_and_asymmetric_comparators() {
        for (from, to) in [
            (
                "direction=LT, type=TOTALORDER",
                "direction=LE, type=TOTALORDER",
            ),
            ("direction=LT, type=TOTALORDER", "direction=LT"),
            ("compare(x, y)", "compare(x, b)"),
            (
                "y = f32[] select(ne.b, nan, z.b)",
                "y = f32[] select(ne.b, zero, z.b)",
            ),
        ] {
            let (m, s) = sort_of(&JAX_SORT.replace(from, to));
            assert!(plan(&m, s).is_none(), "{to}");
        }
    }
}
