//! The LLVM side of code generation: one [`Cg`] per compiled module holds the inkwell context's
//! module and builder and the [`Target`] it emits for, and offers the small vocabulary every
//! emitter is written in: counted loops with loop-carried values, branches that merge values,
//! address arithmetic, intrinsics and math library calls. The register and memory forms of
//! element types (loads, stores, constants) are in [`crate::forms`].
//!
//! Invariants: every function is added through [`Cg::add_fn`], so it carries the target's
//! attributes; buffer pointers are in the target's buffer address space ([`Cg::ptr`]); a math
//! library function the target lacks is an error naming it, never a silent external call.

use std::cell::RefCell;
use std::collections::HashMap;

use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::basic_block::BasicBlock;
use inkwell::builder::{Builder, BuilderError};
use inkwell::context::Context;
use inkwell::intrinsics::Intrinsic;
use inkwell::module::{Linkage, Module};
use inkwell::types::{BasicType, BasicTypeEnum, FunctionType};
use inkwell::values::{
    AsValueRef, BasicMetadataValueEnum, BasicValue, BasicValueEnum, FunctionValue,
    InstructionValue, IntValue, PointerValue,
};
use inkwell::IntPredicate;

use crate::error::{Fail, R};
use crate::target::Target;

/// A value in a register.
pub type Val<'ctx> = BasicValueEnum<'ctx>;

impl From<BuilderError> for Fail {
    fn from(e: BuilderError) -> Self {
        Fail::Msg(format!("LLVM builder error: {e}"))
    }
}

/// The loop property that keeps LLVM from unrolling a loop ([`Cg::for_range_hinted`]): a
/// loop whose body is large (a tile, or a level of a sum tree holding the levels below it)
/// stays one copy of its body.
pub const NO_UNROLL: &str = "llvm.loop.unroll.disable";

/// The code generation state of one LLVM module.
pub struct Cg<'ctx> {
    /// The LLVM context everything is created in.
    pub ctx: &'ctx Context,
    /// The module being emitted.
    pub module: Module<'ctx>,
    /// The builder, positioned where code is being emitted.
    pub b: Builder<'ctx>,
    /// The machine the code is for.
    pub target: Box<dyn Target>,
    /// Whether `f32` `exp`, `log`, `tanh`, `logistic` and `erf` call libm instead of the inline
    /// approximations ([`crate::math`]).
    pub libm_math: bool,
    /// Whether kernels run with subnormals flushed (x86's FTZ and DAZ modes): functions say so
    /// to LLVM, and ops whose results are not produced by float arithmetic flush explicitly.
    pub ftz: bool,
    libm: RefCell<HashMap<String, FunctionValue<'ctx>>>,
}

impl<'ctx> Cg<'ctx> {
    /// A code generator for a new module `name` in `ctx`, emitting for `target`.
    pub fn new(ctx: &'ctx Context, name: &str, target: Box<dyn Target>) -> Self {
        Cg {
            ctx,
            module: ctx.create_module(name),
            b: ctx.create_builder(),
            target,
            libm_math: false,
            ftz: false,
            libm: RefCell::new(HashMap::new()),
        }
    }

    // ---- types and constants ----

    /// LLVM's `i1` type.
    pub fn i1(&self) -> inkwell::types::IntType<'ctx> {
        self.ctx.bool_type()
    }
    /// LLVM's `i8` type.
    pub fn i8(&self) -> inkwell::types::IntType<'ctx> {
        self.ctx.i8_type()
    }
    /// LLVM's `i32` type.
    pub fn i32(&self) -> inkwell::types::IntType<'ctx> {
        self.ctx.i32_type()
    }
    /// LLVM's `i64` type.
    pub fn i64(&self) -> inkwell::types::IntType<'ctx> {
        self.ctx.i64_type()
    }
    /// LLVM's `float` type.
    pub fn f32(&self) -> inkwell::types::FloatType<'ctx> {
        self.ctx.f32_type()
    }
    /// LLVM's `double` type.
    pub fn f64(&self) -> inkwell::types::FloatType<'ctx> {
        self.ctx.f64_type()
    }
    /// The pointer type of buffers (in the target's buffer address space).
    pub fn ptr(&self) -> inkwell::types::PointerType<'ctx> {
        self.ctx.ptr_type(self.target.buffer_address_space())
    }
    /// An `i64` constant.
    pub fn c64(&self, v: i64) -> IntValue<'ctx> {
        self.i64().const_int(v as u64, true)
    }
    /// An `i32` constant.
    pub fn c32(&self, v: i64) -> IntValue<'ctx> {
        self.i32().const_int(v as u64, true)
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

    // ---- functions and blocks ----

    /// Adds a function with the target's attributes.
    pub fn add_fn(
        &self,
        name: &str,
        ty: FunctionType<'ctx>,
        linkage: Option<Linkage>,
    ) -> FunctionValue<'ctx> {
        let f = self.module.add_function(name, ty, linkage);
        let attr = |k: &str, v: &str| self.ctx.create_string_attribute(k, v);
        for (k, v) in self.target.function_attributes() {
            f.add_attribute(AttributeLoc::Function, attr(&k, &v));
        }
        f.add_attribute(AttributeLoc::Function, self.enum_attr("nounwind"));
        if self.ftz {
            // Tell LLVM's folds that subnormal inputs and outputs read as zero (same sign).
            f.add_attribute(
                AttributeLoc::Function,
                attr("denormal-fp-math", "preserve-sign,preserve-sign"),
            );
        }
        let bits = self.target.vector_bits();
        if bits > 0 {
            // The target's widest vectors: znver4/5 otherwise prefer 256-bit ones to 512.
            let bits = bits.to_string();
            f.add_attribute(AttributeLoc::Function, attr("prefer-vector-width", &bits));
            f.add_attribute(
                AttributeLoc::Function,
                attr("min-legal-vector-width", &bits),
            );
        }
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

    /// `for i in start..end { body(i) }` as [`Cg::for_range`], its latch carrying loop
    /// properties for LLVM's loop passes (`llvm.loop` metadata): each of `hints` names one that
    /// takes no value, such as `llvm.loop.unroll.disable` (a short loop whose body is large
    /// stays a loop instead of being copied once per iteration it may run).
    pub fn for_range_hinted(
        &self,
        start: IntValue<'ctx>,
        end: IntValue<'ctx>,
        hints: &[&str],
        body: impl FnOnce(IntValue<'ctx>) -> R<()>,
    ) -> R<()> {
        self.for_range_acc_hinted(start, end, &[], hints, |i, _| {
            body(i)?;
            Ok(Vec::new())
        })
        .map(|_| ())
    }

    /// [`Cg::for_range_acc`] with `llvm.loop` properties, as [`Cg::for_range_hinted`].
    pub fn for_range_acc_hinted(
        &self,
        start: IntValue<'ctx>,
        end: IntValue<'ctx>,
        init: &[Val<'ctx>],
        hints: &[&str],
        body: impl FnOnce(IntValue<'ctx>, &[Val<'ctx>]) -> R<Vec<Val<'ctx>>>,
    ) -> R<Vec<Val<'ctx>>> {
        let (vals, latch) = self.counted_loop(start, end, init, body)?;
        if !hints.is_empty() {
            self.set_loop_hints(latch, hints);
        }
        Ok(vals)
    }

    /// Attaches `llvm.loop` metadata naming `hints` to a loop's latch branch `br`. A loop ID is
    /// a node whose first operand is the node itself (LLVM ignores any other), which inkwell
    /// cannot build, hence the C API: a temporary node stands for the ID until the ID exists.
    fn set_loop_hints(&self, br: InstructionValue<'ctx>, hints: &[&str]) {
        use llvm_sys::core::{
            LLVMGetMDKindIDInContext, LLVMMDNodeInContext2, LLVMMDStringInContext2,
            LLVMMetadataAsValue, LLVMSetMetadata,
        };
        use llvm_sys::debuginfo::{LLVMMetadataReplaceAllUsesWith, LLVMTemporaryMDNode};
        const KIND: &str = "llvm.loop";
        let ctx = self.ctx.raw();
        // SAFETY: every pointer passed is a live object of `ctx` or a string with its length;
        // the temporary node is replaced (and freed) by LLVMMetadataReplaceAllUsesWith once the
        // ID that refers to it exists, as clang builds loop IDs.
        unsafe {
            let tmp = LLVMTemporaryMDNode(ctx, std::ptr::null_mut(), 0);
            let mut ops = vec![tmp];
            for h in hints {
                let mut name = [LLVMMDStringInContext2(ctx, h.as_ptr().cast(), h.len())];
                ops.push(LLVMMDNodeInContext2(ctx, name.as_mut_ptr(), 1));
            }
            let id = LLVMMDNodeInContext2(ctx, ops.as_mut_ptr(), ops.len());
            LLVMMetadataReplaceAllUsesWith(tmp, id);
            let kind = LLVMGetMDKindIDInContext(ctx, KIND.as_ptr().cast(), KIND.len() as u32);
            LLVMSetMetadata(br.as_value_ref(), kind, LLVMMetadataAsValue(ctx, id));
        }
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
        Ok(self.counted_loop(start, end, init, body)?.0)
    }

    /// [`Cg::for_range_acc`], with the loop's latch branch.
    fn counted_loop(
        &self,
        start: IntValue<'ctx>,
        end: IntValue<'ctx>,
        init: &[Val<'ctx>],
        body: impl FnOnce(IntValue<'ctx>, &[Val<'ctx>]) -> R<Vec<Val<'ctx>>>,
    ) -> R<(Vec<Val<'ctx>>, InstructionValue<'ctx>)> {
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
        let br = self.b.build_conditional_branch(more, header, exit)?;
        self.b.position_at_end(exit);
        let mut out = Vec::with_capacity(init.len());
        for (k, v) in init.iter().enumerate() {
            let p = self.b.build_phi(v.get_type(), "acc.out")?;
            p.add_incoming(&[(v as &dyn BasicValue, pre), (&next[k], latch)]);
            out.push(p.as_basic_value());
        }
        Ok((out, br))
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

    /// Calls a C math library function (`expf`, `tanh`, ...) of one or two float arguments,
    /// through the symbol the target gives it; an error naming it where the target has none
    /// (`libm_fallback::call_libm` falls back to an inline form there).
    pub fn call_libm(&self, name: &str, args: &[Val<'ctx>]) -> R<Val<'ctx>> {
        if args.iter().any(|a| a.is_vector_value()) {
            return Err(format!("{name} is called on scalars only, not on vectors").into());
        }
        let f = {
            let mut cache = self.libm.borrow_mut();
            match cache.get(name) {
                Some(f) => *f,
                None => {
                    let symbol = self.target.math_function(name).ok_or_else(|| {
                        format!(
                            "the {} backend has no math library function {name}",
                            self.target.name()
                        )
                    })?;
                    let t = args[0].get_type();
                    let params: Vec<_> = args.iter().map(|a| a.get_type().into()).collect();
                    let f = self.module.add_function(
                        &symbol,
                        t.fn_type(&params, false),
                        Some(Linkage::External),
                    );
                    f.add_attribute(AttributeLoc::Function, self.enum_attr("nounwind"));
                    cache.insert(name.to_string(), f);
                    f
                }
            }
        };
        self.call(f, args)?
            .ok_or_else(|| format!("{name} returned nothing").into())
    }

    /// The kernel's global thread index (`block * block_size + thread`) as an `i64`, on targets
    /// whose kernels run as a grid of threads: computed in 64 bits when `wide` (a grid of more
    /// than `i32::MAX` threads), else in 32 bits and widened.
    pub fn thread_index(&self, wide: bool) -> R<IntValue<'ctx>> {
        let regs = self.target.thread_registers().ok_or_else(|| {
            format!(
                "the {} backend's kernels have no thread index",
                self.target.name()
            )
        })?;
        let read = |name: &str| -> R<IntValue<'ctx>> {
            let f = self.intrinsic(name, &[])?;
            let v = self
                .call(f, &[])?
                .ok_or_else(|| format!("{name} returned nothing"))?
                .into_int_value();
            Ok(if wide {
                self.b.build_int_z_extend(v, self.i64(), "sreg")?
            } else {
                v
            })
        };
        let (tid, bid, bsz) = (
            read(regs.thread)?,
            read(regs.block)?,
            read(regs.block_size)?,
        );
        let base = self.b.build_int_nuw_mul(bid, bsz, "block.base")?;
        let t = self.b.build_int_nuw_add(base, tid, "thread")?;
        Ok(if wide {
            t
        } else {
            self.b.build_int_z_extend(t, self.i64(), "thread.i64")?
        })
    }
}

/// Row-major strides (in elements) of `dims`.
pub fn strides(dims: &[i64]) -> Vec<i64> {
    let mut s = vec![1i64; dims.len()];
    for k in (0..dims.len().saturating_sub(1)).rev() {
        s[k] = s[k + 1] * dims[k + 1].max(1);
    }
    s
}

/// `dims` without dimension `d` (the rows of an operation along `d`).
pub fn dims_without(dims: &[i64], d: usize) -> Vec<i64> {
    dims.iter()
        .enumerate()
        .filter(|&(k, _)| k != d)
        .map(|(_, &x)| x)
        .collect()
}

/// The number of elements of `dims`.
pub fn numel(dims: &[i64]) -> i64 {
    dims.iter().product::<i64>().max(0)
}

/// `as_basic_value_enum` for anything basic.
pub fn bv<'ctx>(v: impl BasicValue<'ctx>) -> Val<'ctx> {
    v.as_basic_value_enum()
}

/// The type of basic values, for phis.
#[allow(dead_code)]
pub fn ty_of<'ctx>(v: Val<'ctx>) -> BasicTypeEnum<'ctx> {
    v.get_type().as_basic_type_enum()
}
