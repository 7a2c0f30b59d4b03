//! The register and memory forms of every element type, and the loads, stores, constants and
//! roundings that move values between them.
//!
//! Registers hold `pred` as `i1`, integers as `iN` (`i2` and `i4` for the sub-byte types),
//! `f32`, `f16`, `bf16` and the 8- and 4-bit floats as `float` (a narrow float in a register is
//! always a value its own type can represent, rounded after every operation) and `f64` as
//! `double`. In memory, as in literals, `pred` is one byte (0 or 1), `f16`/`bf16` are their
//! 16-bit patterns and every sub-byte type takes one byte holding its bits zero-extended (the
//! 8- and 4-bit float conversions are in [`crate::minifloat`]). Complex values are `{F, F}`
//! structs in registers (real part first, `F` = `float` for `c64` and `double` for `c128`) and
//! interleaved `(re, im)` pairs in memory, loaded and stored as two scalar component accesses.
//!
//! Invariant: a register value of a narrow float type is always representable in that type;
//! every function here that produces one rounds it ([`Cg::round`]).

use axle_ir::ElementType;
use inkwell::types::{BasicTypeEnum, FloatType, StructType};
use inkwell::values::{BasicValue, FloatValue, IntValue, PointerValue};
use inkwell::{FloatPredicate, IntPredicate};

use crate::cg::{bv, Cg, Val};
use crate::error::{Fail, R};
use crate::minifloat::{self, is_minifloat};

impl<'ctx> Cg<'ctx> {
    /// The register type of element type `t`.
    pub fn reg_ty(&self, t: ElementType) -> R<BasicTypeEnum<'ctx>> {
        use ElementType::*;
        Ok(match t {
            Pred => self.i1().into(),
            S8 | U8 => self.ctx.i8_type().into(),
            S16 | U16 => self.ctx.i16_type().into(),
            S32 | U32 => self.ctx.i32_type().into(),
            S64 | U64 => self.ctx.i64_type().into(),
            S2 | U2 | S4 | U4 => self.int_ty(t.bits()).into(),
            F16 | BF16 | F32 => self.f32().into(),
            F64 => self.f64().into(),
            C64 | C128 => complex_struct_ty(self, t).into(),
            t if is_minifloat(t) => self.f32().into(),
            _ => return Err(unsupported_type(self.target.name(), t)),
        })
    }

    /// The in-memory type of element type `t`.
    pub fn mem_ty(&self, t: ElementType) -> R<BasicTypeEnum<'ctx>> {
        use ElementType::*;
        Ok(match t {
            Pred => self.i8().into(),
            F16 | BF16 => self.ctx.i16_type().into(),
            S2 | U2 | S4 | U4 => self.i8().into(),
            t if is_minifloat(t) => self.i8().into(),
            _ => self.reg_ty(t)?,
        })
    }

    /// A constant of element type `t` from an `f64` (floats) or an `i128` (integers, pred).
    pub fn const_f(&self, t: ElementType, v: f64) -> R<Val<'ctx>> {
        if t.is_complex() {
            return Ok(complex_constant(self, t, v, 0.0));
        }
        Ok(match self.reg_ty(t)? {
            BasicTypeEnum::FloatType(ft) => {
                let v = match t {
                    ElementType::F16 => half::f16::from_f64(v).to_f64(),
                    ElementType::BF16 => half::bf16::from_f64(v).to_f64(),
                    ElementType::F32 => v as f32 as f64,
                    t if is_minifloat(t) => {
                        use axle_ir::literal::{f64_to_minifloat, minifloat_to_f64};
                        minifloat_to_f64(t, f64_to_minifloat(t, v))
                    }
                    _ => v,
                };
                ft.const_float(v).into()
            }
            BasicTypeEnum::IntType(it) => it.const_int(v as i64 as u64, true).into(),
            _ => return Err("unexpected register type".into()),
        })
    }

    /// An integer or pred constant.
    pub fn const_i(&self, t: ElementType, v: i128) -> R<Val<'ctx>> {
        Ok(match self.reg_ty(t)? {
            // Sub-byte types: the value's low bits.
            BasicTypeEnum::IntType(it) if it.get_bit_width() < 8 => {
                let mask = (1u64 << it.get_bit_width()) - 1;
                it.const_int(v as u64 & mask, false).into()
            }
            BasicTypeEnum::IntType(it) => it.const_int(v as u64, true).into(),
            BasicTypeEnum::FloatType(_) => self.const_f(t, v as f64)?,
            _ => return Err("unexpected register type".into()),
        })
    }

    /// Loads element `offset` of an array of `t` at `ptr` into a register.
    pub fn load(
        &self,
        t: ElementType,
        ptr: PointerValue<'ctx>,
        offset: IntValue<'ctx>,
    ) -> R<Val<'ctx>> {
        let v = self.load_mem(t, ptr, offset)?;
        self.load_form(t, v)
    }

    /// Loads element `offset` of an array of `t` at `ptr` in memory form, bit for bit (a
    /// complex value as its parts, whose register form is their memory form); what a kernel
    /// that only moves values (a sort) carries.
    pub fn load_mem(
        &self,
        t: ElementType,
        ptr: PointerValue<'ctx>,
        offset: IntValue<'ctx>,
    ) -> R<Val<'ctx>> {
        if t.is_complex() {
            return load_complex(self, t, ptr, offset);
        }
        let mty = self.mem_ty(t)?;
        let p = self.gep(mty, ptr, offset)?;
        let v = self.b.build_load(mty, p, "ld")?;
        if let Some(i) = v.as_instruction_value() {
            let _ = i.set_alignment(t.byte_size() as u32);
        }
        Ok(v)
    }

    /// Stores a register value as element `offset` of an array of `t` at `ptr`.
    pub fn store(
        &self,
        t: ElementType,
        ptr: PointerValue<'ctx>,
        offset: IntValue<'ctx>,
        v: Val<'ctx>,
    ) -> R<()> {
        let m = self.to_mem(t, v)?;
        self.store_mem(t, ptr, offset, m)
    }

    /// Stores a value in memory form ([`Cg::load_mem`]) as element `offset` of an array of
    /// `t` at `ptr`.
    pub fn store_mem(
        &self,
        t: ElementType,
        ptr: PointerValue<'ctx>,
        offset: IntValue<'ctx>,
        m: Val<'ctx>,
    ) -> R<()> {
        if t.is_complex() {
            return store_complex(self, t, ptr, offset, m);
        }
        let p = self.gep(self.mem_ty(t)?, ptr, offset)?;
        let s = self.b.build_store(p, m)?;
        let _ = s.set_alignment(t.byte_size() as u32);
        Ok(())
    }

    /// A loaded memory value in register form.
    pub fn load_form(&self, t: ElementType, v: Val<'ctx>) -> R<Val<'ctx>> {
        use ElementType::*;
        Ok(match t {
            Pred => self
                .b
                .build_int_compare(
                    IntPredicate::NE,
                    v.into_int_value(),
                    self.i8().const_zero(),
                    "pred",
                )?
                .into(),
            F16 => {
                let h = self
                    .b
                    .build_bit_cast(v, self.ctx.f16_type(), "h")?
                    .into_float_value();
                self.b.build_float_ext(h, self.f32(), "h2f")?.into()
            }
            BF16 => {
                let w = self
                    .b
                    .build_int_z_extend(v.into_int_value(), self.i32(), "bf")?;
                let w = self.b.build_left_shift(w, self.c32(16), "bf")?;
                self.b.build_bit_cast(w, self.f32(), "bf2f")?
            }
            S2 | U2 | S4 | U4 => self
                .b
                .build_int_truncate(v.into_int_value(), self.reg_ty(t)?.into_int_type(), "sub")?
                .into(),
            t if is_minifloat(t) => minifloat::to_f32(self, t, v.into_int_value())?.into(),
            _ => v,
        })
    }

    /// A register value in memory form.
    pub fn to_mem(&self, t: ElementType, v: Val<'ctx>) -> R<Val<'ctx>> {
        use ElementType::*;
        Ok(match t {
            Pred => self
                .b
                .build_int_z_extend(v.into_int_value(), self.i8(), "p8")?
                .into(),
            F16 => {
                let h =
                    self.b
                        .build_float_trunc(v.into_float_value(), self.ctx.f16_type(), "f2h")?;
                self.b.build_bit_cast(h, self.ctx.i16_type(), "hb")?
            }
            BF16 => self.f32_to_bf16_bits(v.into_float_value())?.into(),
            // The literal form: the value's bits, zero-extended.
            S2 | U2 | S4 | U4 => self
                .b
                .build_int_z_extend(v.into_int_value(), self.i8(), "sub")?
                .into(),
            t if is_minifloat(t) => minifloat::from_f32(self, t, v.into_float_value())?.into(),
            _ => v,
        })
    }

    /// Rounds an `f32` to the nearest `bf16` (ties to even; NaN stays a quiet NaN) and returns
    /// its bits, as the `half` crate and XLA do.
    pub fn f32_to_bf16_bits(&self, v: FloatValue<'ctx>) -> R<IntValue<'ctx>> {
        let b = &self.b;
        let i32t = self.i32();
        let bits = b.build_bit_cast(v, i32t, "fb")?.into_int_value();
        let hi = b.build_right_shift(bits, self.c32(16), false, "hi")?;
        let lsb = b.build_and(hi, self.c32(1), "lsb")?;
        let bias = b.build_int_add(lsb, self.c32(0x7fff), "bias")?;
        let r = b.build_int_add(bits, bias, "r")?;
        let r = b.build_right_shift(r, self.c32(16), false, "r")?;
        let nan = b.build_or(hi, self.c32(0x40), "qnan")?;
        let isnan = b.build_float_compare(FloatPredicate::UNO, v, v, "isnan")?;
        let out = b.build_select(isnan, nan, r, "bf")?.into_int_value();
        Ok(b.build_int_truncate(out, self.ctx.i16_type(), "bf16")?)
    }

    /// Rounds a register value of a narrow float type to that type (a no-op for others).
    pub fn round(&self, t: ElementType, v: Val<'ctx>) -> R<Val<'ctx>> {
        match t {
            t if matches!(t, ElementType::F16 | ElementType::BF16) || is_minifloat(t) => {
                let m = self.to_mem(t, v)?;
                self.load_form(t, m)
            }
            _ => Ok(v),
        }
    }
}

/// The error for an element type the backend does not handle.
pub fn unsupported_type(backend: &str, t: ElementType) -> Fail {
    Fail::Msg(format!(
        "element type {} is not supported by the {backend} backend",
        t.name()
    ))
}

/// Whether the shared layer has register and memory forms for element type `t`.
pub fn supported_type(t: ElementType) -> bool {
    use ElementType::*;
    matches!(
        t,
        Pred | S2
            | S4
            | S8
            | S16
            | S32
            | S64
            | U2
            | U4
            | U8
            | U16
            | U32
            | U64
            | F16
            | BF16
            | F32
            | F64
            | C64
            | C128
    ) || is_minifloat(t)
}

/// A complex value split into its parts.
#[derive(Clone, Copy)]
pub struct Cx<'ctx> {
    /// The real part.
    pub re: FloatValue<'ctx>,
    /// The imaginary part.
    pub im: FloatValue<'ctx>,
}

/// The component type's register type (`float` or `double`).
pub fn part_ty<'ctx>(cg: &Cg<'ctx>, t: ElementType) -> FloatType<'ctx> {
    if t == ElementType::C128 {
        cg.f64()
    } else {
        cg.f32()
    }
}

/// The register and memory type of complex element type `t`: `{F, F}`.
pub fn complex_struct_ty<'ctx>(cg: &Cg<'ctx>, t: ElementType) -> StructType<'ctx> {
    let f = part_ty(cg, t);
    cg.ctx.struct_type(&[f.into(), f.into()], false)
}

/// A complex register value split into its parts.
pub fn split<'ctx>(cg: &Cg<'ctx>, v: Val<'ctx>) -> R<Cx<'ctx>> {
    if !v.is_struct_value() {
        return Err("expected a complex value".into());
    }
    let s = v.into_struct_value();
    let re = cg.b.build_extract_value(s, 0, "re")?.into_float_value();
    let im = cg.b.build_extract_value(s, 1, "im")?.into_float_value();
    Ok(Cx { re, im })
}

/// The complex register value of type `t` made of two parts.
pub fn join<'ctx>(cg: &Cg<'ctx>, t: ElementType, c: Cx<'ctx>) -> R<Val<'ctx>> {
    let s = complex_struct_ty(cg, t).get_poison();
    let s = cg.b.build_insert_value(s, c.re, 0, "c")?;
    let s = cg.b.build_insert_value(s, c.im, 1, "c")?;
    Ok(s.into_struct_value().as_basic_value_enum())
}

/// The constant `re + im i` of complex type `t`.
pub fn complex_constant<'ctx>(cg: &Cg<'ctx>, t: ElementType, re: f64, im: f64) -> Val<'ctx> {
    let f = part_ty(cg, t);
    let (re, im) = if t == ElementType::C64 {
        (re as f32 as f64, im as f32 as f64)
    } else {
        (re, im)
    };
    bv(
        complex_struct_ty(cg, t)
            .const_named_struct(&[bv(f.const_float(re)), bv(f.const_float(im))]),
    )
}

/// The complex value of type `t` from one element's literal bytes (real part first), exact to
/// the bit (NaN payloads included).
pub fn complex_constant_bytes<'ctx>(cg: &Cg<'ctx>, t: ElementType, bytes: &[u8]) -> R<Val<'ctx>> {
    let f = part_ty(cg, t);
    let w = t.component_type().byte_size();
    let part = |k: usize| -> R<FloatValue<'ctx>> {
        let b = bytes.get(w * k..w * k + w).ok_or("short complex literal")?;
        let mut le = [0u8; 8];
        le[..w].copy_from_slice(b);
        let c = cg
            .int_ty(8 * w as u32)
            .const_int(u64::from_le_bytes(le), false);
        Ok(cg.b.build_bit_cast(c, f, "part")?.into_float_value())
    };
    let (re, im) = (part(0)?, part(1)?);
    join(cg, t, Cx { re, im })
}

/// The component pointers of element `offset` of a complex array at `ptr`.
fn part_ptrs<'ctx>(
    cg: &Cg<'ctx>,
    t: ElementType,
    ptr: PointerValue<'ctx>,
    offset: IntValue<'ctx>,
) -> R<(PointerValue<'ctx>, PointerValue<'ctx>)> {
    let f = part_ty(cg, t);
    let k = cg.b.build_int_nsw_mul(offset, cg.c64(2), "k")?;
    let pre = cg.gep(f.into(), ptr, k)?;
    let pim = cg.gep(f.into(), pre, cg.c64(1))?;
    Ok((pre, pim))
}

/// Loads element `offset` of a complex array at `ptr`.
pub fn load_complex<'ctx>(
    cg: &Cg<'ctx>,
    t: ElementType,
    ptr: PointerValue<'ctx>,
    offset: IntValue<'ctx>,
) -> R<Val<'ctx>> {
    let f = part_ty(cg, t);
    let align = t.component_type().byte_size() as u32;
    let (pre, pim) = part_ptrs(cg, t, ptr, offset)?;
    let mut parts = [f.const_zero(); 2];
    for (k, p) in [pre, pim].into_iter().enumerate() {
        let v = cg.b.build_load(f, p, "ld")?;
        if let Some(i) = v.as_instruction_value() {
            let _ = i.set_alignment(align);
        }
        parts[k] = v.into_float_value();
    }
    join(
        cg,
        t,
        Cx {
            re: parts[0],
            im: parts[1],
        },
    )
}

/// Stores a complex value as element `offset` of an array at `ptr`.
pub fn store_complex<'ctx>(
    cg: &Cg<'ctx>,
    t: ElementType,
    ptr: PointerValue<'ctx>,
    offset: IntValue<'ctx>,
    v: Val<'ctx>,
) -> R<()> {
    let align = t.component_type().byte_size() as u32;
    let c = split(cg, v)?;
    let (pre, pim) = part_ptrs(cg, t, ptr, offset)?;
    for (p, x) in [(pre, c.re), (pim, c.im)] {
        let s = cg.b.build_store(p, x)?;
        let _ = s.set_alignment(align);
    }
    Ok(())
}
