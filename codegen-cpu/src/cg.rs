//! The LLVM side of code generation: one [`Cg`] per compiled module holds the inkwell context's
//! module and builder, and offers the small vocabulary every emitter is written in: element
//! loads and stores in each element type's storage form, counted loops with loop-carried values,
//! branches that merge values, intrinsics and libm calls.
//!
//! Registers hold `pred` as `i1`, integers as `iN` (`i2` and `i4` for the sub-byte types),
//! `f32`, `f16`, `bf16` and the 8- and 4-bit floats as `float` (a narrow float in a register is
//! always a value its own type can represent, rounded after every operation) and `f64` as
//! `double`. In memory, as in literals, `pred` is one byte (0 or 1), `f16`/`bf16` are their
//! 16-bit patterns and every sub-byte type takes one byte holding its bits zero-extended (the
//! 8- and 4-bit float conversions are in [`crate::minifloat`]). Complex values are `{F, F}`
//! structs in registers and interleaved `(re, im)` pairs in memory (see [`crate::complex`]).

use std::cell::RefCell;
use std::collections::HashMap;

use axle_ir::ElementType;
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::basic_block::BasicBlock;
use inkwell::builder::{Builder, BuilderError};
use inkwell::context::Context;
use inkwell::intrinsics::Intrinsic;
use inkwell::module::{Linkage, Module};
use inkwell::types::{BasicType, BasicTypeEnum, FunctionType};
use inkwell::values::{
    BasicMetadataValueEnum, BasicValue, BasicValueEnum, FloatValue, FunctionValue, IntValue,
    PointerValue,
};
use inkwell::{AddressSpace, FloatPredicate, IntPredicate};

use crate::error::{Fail, R};

/// A value in a register.
pub(crate) type Val<'ctx> = BasicValueEnum<'ctx>;

impl From<BuilderError> for Fail {
    fn from(e: BuilderError) -> Self {
        Fail::Msg(format!("LLVM builder error: {e}"))
    }
}

/// The code generation state of one LLVM module.
pub(crate) struct Cg<'ctx> {
    pub ctx: &'ctx Context,
    pub module: Module<'ctx>,
    pub b: Builder<'ctx>,
    /// `target-cpu` put on every function.
    pub cpu: String,
    /// `target-features` put on every function.
    pub features: String,
    /// Whether `f32` `exp`, `log` and `tanh` call libm instead of the inline approximations.
    pub libm_math: bool,
    /// Whether kernels run with subnormals flushed (x86's FTZ and DAZ modes): functions say so
    /// to LLVM, and ops whose results are not produced by float arithmetic flush explicitly.
    pub ftz: bool,
    /// The target and thread count the GEMM's blocking is chosen for (the same the lowering
    /// used).
    pub gemm: crate::gemm::GemmTarget,
    libm: RefCell<HashMap<String, FunctionValue<'ctx>>>,
}

impl<'ctx> Cg<'ctx> {
    pub fn new(ctx: &'ctx Context, name: &str, cpu: &str, features: &str) -> Self {
        Cg {
            ctx,
            module: ctx.create_module(name),
            b: ctx.create_builder(),
            cpu: cpu.to_string(),
            features: features.to_string(),
            libm_math: false,
            ftz: false,
            gemm: crate::gemm::GemmTarget::default(),
            libm: RefCell::new(HashMap::new()),
        }
    }

    // ---- types and constants ----

    pub fn i1(&self) -> inkwell::types::IntType<'ctx> {
        self.ctx.bool_type()
    }
    pub fn i8(&self) -> inkwell::types::IntType<'ctx> {
        self.ctx.i8_type()
    }
    pub fn i32(&self) -> inkwell::types::IntType<'ctx> {
        self.ctx.i32_type()
    }
    pub fn i64(&self) -> inkwell::types::IntType<'ctx> {
        self.ctx.i64_type()
    }
    pub fn f32(&self) -> inkwell::types::FloatType<'ctx> {
        self.ctx.f32_type()
    }
    pub fn f64(&self) -> inkwell::types::FloatType<'ctx> {
        self.ctx.f64_type()
    }
    pub fn ptr(&self) -> inkwell::types::PointerType<'ctx> {
        self.ctx.ptr_type(AddressSpace::default())
    }
    /// An `i64` constant.
    pub fn c64(&self, v: i64) -> IntValue<'ctx> {
        self.i64().const_int(v as u64, true)
    }
    /// An `i32` constant.
    pub fn c32(&self, v: i64) -> IntValue<'ctx> {
        self.i32().const_int(v as u64, true)
    }

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
            C64 | C128 => crate::complex::struct_ty(self, t).into(),
            t if crate::minifloat::is_minifloat(t) => self.f32().into(),
            _ => return Err(unsupported_type(t)),
        })
    }

    /// The in-memory type of element type `t`.
    pub fn mem_ty(&self, t: ElementType) -> R<BasicTypeEnum<'ctx>> {
        use ElementType::*;
        Ok(match t {
            Pred => self.i8().into(),
            F16 | BF16 => self.ctx.i16_type().into(),
            S2 | U2 | S4 | U4 => self.i8().into(),
            t if crate::minifloat::is_minifloat(t) => self.i8().into(),
            _ => self.reg_ty(t)?,
        })
    }

    /// The integer type of `bits` bits.
    pub fn int_ty(&self, bits: u32) -> inkwell::types::IntType<'ctx> {
        match bits {
            1 => self.ctx.bool_type(),
            8 => self.ctx.i8_type(),
            16 => self.ctx.i16_type(),
            32 => self.ctx.i32_type(),
            64 => self.ctx.i64_type(),
            128 => self.ctx.i128_type(),
            // Any other width LLVM has (the sub-byte types' `i2` and `i4`).
            _ => std::num::NonZeroU32::new(bits)
                .and_then(|n| self.ctx.custom_width_int_type(n).ok())
                .unwrap_or_else(|| self.ctx.i64_type()),
        }
    }

    /// A constant of element type `t` from an `f64` (floats) or an `i128` (integers, pred).
    pub fn const_f(&self, t: ElementType, v: f64) -> R<Val<'ctx>> {
        if t.is_complex() {
            return Ok(crate::complex::constant(self, t, v, 0.0));
        }
        Ok(match self.reg_ty(t)? {
            BasicTypeEnum::FloatType(ft) => {
                let v = match t {
                    ElementType::F16 => half::f16::from_f64(v).to_f64(),
                    ElementType::BF16 => half::bf16::from_f64(v).to_f64(),
                    ElementType::F32 => v as f32 as f64,
                    t if crate::minifloat::is_minifloat(t) => {
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

    // ---- functions and blocks ----

    /// Adds a function with the host CPU's attributes.
    pub fn add_fn(
        &self,
        name: &str,
        ty: FunctionType<'ctx>,
        linkage: Option<Linkage>,
    ) -> FunctionValue<'ctx> {
        let f = self.module.add_function(name, ty, linkage);
        let attr = |k: &str, v: &str| self.ctx.create_string_attribute(k, v);
        if !self.cpu.is_empty() {
            f.add_attribute(AttributeLoc::Function, attr("target-cpu", &self.cpu));
        }
        if !self.features.is_empty() {
            f.add_attribute(
                AttributeLoc::Function,
                attr("target-features", &self.features),
            );
        }
        f.add_attribute(AttributeLoc::Function, self.enum_attr("nounwind"));
        if self.ftz {
            // Tell LLVM's folds that subnormal inputs and outputs read as zero (same sign).
            f.add_attribute(
                AttributeLoc::Function,
                attr("denormal-fp-math", "preserve-sign,preserve-sign"),
            );
        }
        // 512-bit vectors: znver4/5 otherwise prefer 256-bit ones.
        f.add_attribute(AttributeLoc::Function, attr("prefer-vector-width", "512"));
        f.add_attribute(
            AttributeLoc::Function,
            attr("min-legal-vector-width", "512"),
        );
        f
    }

    /// An enum attribute by name.
    pub fn enum_attr(&self, name: &str) -> Attribute {
        let kind = Attribute::get_named_enum_kind_id(name);
        self.ctx.create_enum_attribute(kind, 0)
    }

    /// The function the builder is in.
    pub fn cur_fn(&self) -> R<FunctionValue<'ctx>> {
        self.b
            .get_insert_block()
            .and_then(|bb| bb.get_parent())
            .ok_or_else(|| "builder is not positioned in a function".into())
    }

    /// The block the builder is in.
    pub fn cur_block(&self) -> R<BasicBlock<'ctx>> {
        self.b
            .get_insert_block()
            .ok_or_else(|| "builder is not positioned".into())
    }

    /// A new block at the end of the current function.
    pub fn block(&self, name: &str) -> R<BasicBlock<'ctx>> {
        Ok(self.ctx.append_basic_block(self.cur_fn()?, name))
    }

    // ---- control flow ----

    /// `for i in start..end { body(i) }` as a rotated loop (guard, body, latch).
    pub fn for_range(
        &self,
        start: IntValue<'ctx>,
        end: IntValue<'ctx>,
        body: impl FnOnce(IntValue<'ctx>) -> R<()>,
    ) -> R<()> {
        self.for_range_acc(start, end, &[], |i, _| {
            body(i)?;
            Ok(Vec::new())
        })
        .map(|_| ())
    }

    /// `for i in start..end` with loop-carried values: `body(i, accs)` returns the next values;
    /// the result is the values after the last iteration (`init` if the loop runs zero times).
    pub fn for_range_acc(
        &self,
        start: IntValue<'ctx>,
        end: IntValue<'ctx>,
        init: &[Val<'ctx>],
        body: impl FnOnce(IntValue<'ctx>, &[Val<'ctx>]) -> R<Vec<Val<'ctx>>>,
    ) -> R<Vec<Val<'ctx>>> {
        let pre = self.cur_block()?;
        let header = self.block("loop")?;
        let exit = self.block("loop.exit")?;
        let go = self
            .b
            .build_int_compare(IntPredicate::SLT, start, end, "loop.guard")?;
        self.b.build_conditional_branch(go, header, exit)?;
        self.b.position_at_end(header);
        let iphi = self.b.build_phi(self.i64(), "i")?;
        iphi.add_incoming(&[(&start, pre)]);
        let mut phis = Vec::with_capacity(init.len());
        for v in init {
            let p = self.b.build_phi(v.get_type(), "acc")?;
            p.add_incoming(&[(v as &dyn BasicValue, pre)]);
            phis.push(p);
        }
        let i = iphi.as_basic_value().into_int_value();
        let accs: Vec<Val<'ctx>> = phis.iter().map(|p| p.as_basic_value()).collect();
        let next = body(i, &accs)?;
        if next.len() != init.len() {
            return Err("loop body returned the wrong number of values".into());
        }
        let latch = self.cur_block()?;
        let inext = self.b.build_int_nsw_add(i, self.c64(1), "i.next")?;
        iphi.add_incoming(&[(&inext, latch)]);
        for (p, v) in phis.iter().zip(&next) {
            p.add_incoming(&[(v as &dyn BasicValue, latch)]);
        }
        let more = self
            .b
            .build_int_compare(IntPredicate::SLT, inext, end, "loop.more")?;
        self.b.build_conditional_branch(more, header, exit)?;
        self.b.position_at_end(exit);
        let mut out = Vec::with_capacity(init.len());
        for (k, v) in init.iter().enumerate() {
            let p = self.b.build_phi(v.get_type(), "acc.out")?;
            p.add_incoming(&[(v as &dyn BasicValue, pre), (&next[k], latch)]);
            out.push(p.as_basic_value());
        }
        Ok(out)
    }

    /// `while cond(state) { state = body(state) }` with the condition evaluated first.
    pub fn while_loop(
        &self,
        init: &[Val<'ctx>],
        cond: impl FnOnce(&[Val<'ctx>]) -> R<IntValue<'ctx>>,
        body: impl FnOnce(&[Val<'ctx>]) -> R<Vec<Val<'ctx>>>,
    ) -> R<Vec<Val<'ctx>>> {
        let pre = self.cur_block()?;
        let header = self.block("while.cond")?;
        let bodyb = self.block("while.body")?;
        let exit = self.block("while.exit")?;
        self.b.build_unconditional_branch(header)?;
        self.b.position_at_end(header);
        let mut phis = Vec::new();
        for v in init {
            let p = self.b.build_phi(v.get_type(), "w")?;
            p.add_incoming(&[(v as &dyn BasicValue, pre)]);
            phis.push(p);
        }
        let state: Vec<Val<'ctx>> = phis.iter().map(|p| p.as_basic_value()).collect();
        let c = cond(&state)?;
        self.b.build_conditional_branch(c, bodyb, exit)?;
        self.b.position_at_end(bodyb);
        let next = body(&state)?;
        let latch = self.cur_block()?;
        for (p, v) in phis.iter().zip(&next) {
            p.add_incoming(&[(v as &dyn BasicValue, latch)]);
        }
        self.b.build_unconditional_branch(header)?;
        self.b.position_at_end(exit);
        Ok(state)
    }

    /// `if cond { then() }`.
    pub fn if_then(&self, cond: IntValue<'ctx>, then: impl FnOnce() -> R<()>) -> R<()> {
        let tb = self.block("then")?;
        let done = self.block("endif")?;
        self.b.build_conditional_branch(cond, tb, done)?;
        self.b.position_at_end(tb);
        then()?;
        self.b.build_unconditional_branch(done)?;
        self.b.position_at_end(done);
        Ok(())
    }

    /// `if cond { then(s) } else { els(s) }`, both arms taking the same mutable state in turn,
    /// merging the values both return.
    pub fn if_else_with<S>(
        &self,
        s: &mut S,
        cond: IntValue<'ctx>,
        then: impl FnOnce(&mut S) -> R<Vec<Val<'ctx>>>,
        els: impl FnOnce(&mut S) -> R<Vec<Val<'ctx>>>,
    ) -> R<Vec<Val<'ctx>>> {
        let tb = self.block("then")?;
        let eb = self.block("else")?;
        let done = self.block("endif")?;
        self.b.build_conditional_branch(cond, tb, eb)?;
        self.b.position_at_end(tb);
        let tv = then(s)?;
        let tend = self.cur_block()?;
        self.b.build_unconditional_branch(done)?;
        self.b.position_at_end(eb);
        let ev = els(s)?;
        let eend = self.cur_block()?;
        self.b.build_unconditional_branch(done)?;
        self.b.position_at_end(done);
        if tv.len() != ev.len() {
            return Err("branches return different numbers of values".into());
        }
        let mut out = Vec::with_capacity(tv.len());
        for (a, b) in tv.iter().zip(&ev) {
            let p = self.b.build_phi(a.get_type(), "merge")?;
            p.add_incoming(&[(a as &dyn BasicValue, tend), (b as &dyn BasicValue, eend)]);
            out.push(p.as_basic_value());
        }
        Ok(out)
    }

    // ---- memory ----

    /// `&ptr[offset]` for elements of type `ty`.
    pub fn gep(
        &self,
        ty: BasicTypeEnum<'ctx>,
        ptr: PointerValue<'ctx>,
        offset: IntValue<'ctx>,
    ) -> R<PointerValue<'ctx>> {
        // SAFETY: every offset emitted is within the buffer of the value being indexed.
        Ok(unsafe { self.b.build_in_bounds_gep(ty, ptr, &[offset], "p")? })
    }

    /// `&ptr[bytes]`.
    pub fn byte_gep(&self, ptr: PointerValue<'ctx>, bytes: i64) -> R<PointerValue<'ctx>> {
        if bytes == 0 {
            return Ok(ptr);
        }
        self.gep(self.i8().into(), ptr, self.c64(bytes))
    }

    /// Loads element `offset` of an array of `t` at `ptr` into a register.
    pub fn load(
        &self,
        t: ElementType,
        ptr: PointerValue<'ctx>,
        offset: IntValue<'ctx>,
    ) -> R<Val<'ctx>> {
        if t.is_complex() {
            return crate::complex::load(self, t, ptr, offset);
        }
        let mty = self.mem_ty(t)?;
        let p = self.gep(mty, ptr, offset)?;
        let v = self.b.build_load(mty, p, "ld")?;
        if let Some(i) = v.as_instruction_value() {
            let _ = i.set_alignment(t.byte_size() as u32);
        }
        self.load_form(t, v)
    }

    /// Stores a register value as element `offset` of an array of `t` at `ptr`.
    pub fn store(
        &self,
        t: ElementType,
        ptr: PointerValue<'ctx>,
        offset: IntValue<'ctx>,
        v: Val<'ctx>,
    ) -> R<()> {
        if t.is_complex() {
            return crate::complex::store(self, t, ptr, offset, v);
        }
        let mty = self.mem_ty(t)?;
        let p = self.gep(mty, ptr, offset)?;
        let m = self.to_mem(t, v)?;
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
            t if crate::minifloat::is_minifloat(t) => {
                crate::minifloat::to_f32(self, t, v.into_int_value())?.into()
            }
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
            t if crate::minifloat::is_minifloat(t) => {
                crate::minifloat::from_f32(self, t, v.into_float_value())?.into()
            }
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
            t if matches!(t, ElementType::F16 | ElementType::BF16)
                || crate::minifloat::is_minifloat(t) =>
            {
                let m = self.to_mem(t, v)?;
                self.load_form(t, m)
            }
            _ => Ok(v),
        }
    }

    /// `memcpy(dst, src, bytes)`.
    pub fn memcpy(&self, dst: PointerValue<'ctx>, src: PointerValue<'ctx>, bytes: u64) -> R<()> {
        if bytes == 0 {
            return Ok(());
        }
        self.b
            .build_memcpy(dst, 1, src, 1, self.c64(bytes as i64))
            .map_err(|e| Fail::Msg(format!("memcpy: {e}")))?;
        Ok(())
    }

    // ---- calls ----

    /// The declaration of intrinsic `name` overloaded on `tys`.
    pub fn intrinsic(&self, name: &str, tys: &[BasicTypeEnum<'ctx>]) -> R<FunctionValue<'ctx>> {
        let i = Intrinsic::find(name).ok_or_else(|| format!("no LLVM intrinsic {name}"))?;
        i.get_declaration(&self.module, tys)
            .ok_or_else(|| format!("cannot declare {name}").into())
    }

    /// Calls `f` and returns its result (if any).
    pub fn call(&self, f: FunctionValue<'ctx>, args: &[Val<'ctx>]) -> R<Option<Val<'ctx>>> {
        let args: Vec<BasicMetadataValueEnum<'ctx>> = args.iter().map(|&a| a.into()).collect();
        let c = self.b.build_call(f, &args, "call")?;
        Ok(c.try_as_basic_value().basic())
    }

    /// Calls intrinsic `name` overloaded on the type of the first argument.
    pub fn call_intrinsic(&self, name: &str, args: &[Val<'ctx>]) -> R<Val<'ctx>> {
        let f = self.intrinsic(name, &[args[0].get_type()])?;
        self.call(f, args)?
            .ok_or_else(|| format!("{name} returned nothing").into())
    }

    /// Calls a C math library function (`expf`, `tanh`, ...) of one or two float arguments.
    pub fn call_libm(&self, name: &str, args: &[Val<'ctx>]) -> R<Val<'ctx>> {
        let f = {
            let mut cache = self.libm.borrow_mut();
            *cache.entry(name.to_string()).or_insert_with(|| {
                let t = args[0].get_type();
                let params: Vec<_> = args.iter().map(|a| a.get_type().into()).collect();
                let f = self.module.add_function(
                    name,
                    t.fn_type(&params, false),
                    Some(Linkage::External),
                );
                f.add_attribute(AttributeLoc::Function, self.enum_attr("nounwind"));
                f
            })
        };
        self.call(f, args)?
            .ok_or_else(|| format!("{name} returned nothing").into())
    }
}

/// The error for an element type the backend does not handle.
pub(crate) fn unsupported_type(t: ElementType) -> Fail {
    Fail::Msg(format!(
        "element type {} is not supported by the cpu backend",
        t.name()
    ))
}

/// Whether the cpu backend handles element type `t`.
pub(crate) fn supported_type(t: ElementType) -> bool {
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
    ) || crate::minifloat::is_minifloat(t)
}

/// Row-major strides (in elements) of `dims`.
pub(crate) fn strides(dims: &[i64]) -> Vec<i64> {
    let mut s = vec![1i64; dims.len()];
    for k in (0..dims.len().saturating_sub(1)).rev() {
        s[k] = s[k + 1] * dims[k + 1].max(1);
    }
    s
}

/// The number of elements of `dims`.
/// `dims` without dimension `d` (the rows of an operation along `d`).
pub(crate) fn dims_without(dims: &[i64], d: usize) -> Vec<i64> {
    dims.iter()
        .enumerate()
        .filter(|&(k, _)| k != d)
        .map(|(_, &x)| x)
        .collect()
}

pub(crate) fn numel(dims: &[i64]) -> i64 {
    dims.iter().product::<i64>().max(0)
}

/// `as_basic_value_enum` for anything basic.
pub(crate) fn bv<'ctx>(v: impl BasicValue<'ctx>) -> Val<'ctx> {
    v.as_basic_value_enum()
}

/// The type of basic values, for phis.
#[allow(dead_code)]
pub(crate) fn ty_of<'ctx>(v: Val<'ctx>) -> BasicTypeEnum<'ctx> {
    v.get_type().as_basic_type_enum()
}
