//! Complex element types (`c64`, `c128`): the scalar semantics of every op the reference
//! evaluator defines on them (their register and memory forms are in [`crate::forms`]).
//!
//! A complex value is an LLVM struct `{F, F}` (real part first, `F` = `float` for `c64` and
//! `double` for `c128`) in a register. In memory it is the IR literal's layout, interleaved
//! `(re, im)` component pairs; it is loaded and stored as two scalar component accesses, so
//! after LLVM folds the struct's `insertvalue`/`extractvalue` pairs away an elementwise loop is
//! plain float code over an interleaved array, which the loop vectorizer handles.
//!
//! The formulas are the evaluator's: arithmetic in the component type without fused
//! multiply-adds; division by Smith's algorithm with a zero divisor dividing each part by the
//! divisor's (zero) real part; `abs` as an overflow-free `hypot` (for `c64` in `f64`, where the
//! squares of `f32` parts can neither overflow nor underflow; for `c128` libm's `hypot`);
//! `sqrt`, `sin`, `cos`, `tanh` and `expm1` in `f64` and rounded to the component type once
//! (`expm1` and `tanh` by cancellation-free formulas, `sinh` in `sin` from `exp(b)` and
//! `exp(-b)` as XLA computes it); `log` as `(log |z|, atan2(im, re))`; `power` as
//! `exp(y log x)` with `x^0 = 1^y = 1` and `0^y = 0` for `re(y) > 0`. Branches are selects, so
//! everything stays branch-free.
//!
//! Subnormals follow XLA's CPU backend under FTZ: arithmetic (`add` to `tanh`, `multiply` with
//! each real product flushed) reads its operands' parts flushed and writes its result's parts
//! flushed, explicitly with integer instructions ([`real::flush`]); `abs` and `compare` read
//! flushed parts (`abs` flushes its result); `sign` is `select(abs(x) == 0, x, x / abs(x))`, so
//! an operand that flushes to zero comes back unchanged; `real`, `imag`, `negate` and `complex`
//! are exact; `c64`/`c128` converts flush as the `f32`/`f64` ones do. `convert` widens or narrows the parts of a complex
//! value and makes a complex value from a real one (imaginary part zero); complex to real takes
//! the real part and converts it as a real value (as XLA and the evaluator do).

use axle_ir::{ComparisonDirection, ElementType, Opcode};
use inkwell::values::{FloatValue, IntValue};
use inkwell::FloatPredicate;

use crate::cg::{bv, Cg, Val};
use crate::error::{Fail, R};
use crate::forms::{join, part_ty, split, Cx};
use crate::real::{self, not_defined};

/// Float arithmetic in one component type, and the complex operations built on it.
struct K<'a, 'ctx> {
    cg: &'a Cg<'ctx>,
    /// The complex type.
    t: ElementType,
    /// Its component type.
    ft: ElementType,
}

impl<'a, 'ctx> K<'a, 'ctx> {
    fn new(cg: &'a Cg<'ctx>, t: ElementType) -> Self {
        K {
            cg,
            t,
            ft: t.component_type(),
        }
    }
    fn k(&self, v: f64) -> FloatValue<'ctx> {
        part_ty(self.cg, self.t).const_float(v)
    }
    fn add(&self, a: FloatValue<'ctx>, c: FloatValue<'ctx>) -> R<FloatValue<'ctx>> {
        Ok(self.cg.b.build_float_add(a, c, "add")?)
    }
    fn sub(&self, a: FloatValue<'ctx>, c: FloatValue<'ctx>) -> R<FloatValue<'ctx>> {
        Ok(self.cg.b.build_float_sub(a, c, "sub")?)
    }
    fn mul(&self, a: FloatValue<'ctx>, c: FloatValue<'ctx>) -> R<FloatValue<'ctx>> {
        Ok(self.cg.b.build_float_mul(a, c, "mul")?)
    }
    fn div(&self, a: FloatValue<'ctx>, c: FloatValue<'ctx>) -> R<FloatValue<'ctx>> {
        Ok(self.cg.b.build_float_div(a, c, "div")?)
    }
    fn cmp(
        &self,
        p: FloatPredicate,
        a: FloatValue<'ctx>,
        c: FloatValue<'ctx>,
    ) -> R<IntValue<'ctx>> {
        Ok(self.cg.b.build_float_compare(p, a, c, "cmp")?)
    }
    fn sel(
        &self,
        p: IntValue<'ctx>,
        a: FloatValue<'ctx>,
        c: FloatValue<'ctx>,
    ) -> R<FloatValue<'ctx>> {
        Ok(self.cg.b.build_select(p, a, c, "sel")?.into_float_value())
    }
    fn csel(&self, p: IntValue<'ctx>, a: Cx<'ctx>, c: Cx<'ctx>) -> R<Cx<'ctx>> {
        Ok(Cx {
            re: self.sel(p, a.re, c.re)?,
            im: self.sel(p, a.im, c.im)?,
        })
    }
    fn and(&self, a: IntValue<'ctx>, c: IntValue<'ctx>) -> R<IntValue<'ctx>> {
        Ok(self.cg.b.build_and(a, c, "and")?)
    }
    fn or(&self, a: IntValue<'ctx>, c: IntValue<'ctx>) -> R<IntValue<'ctx>> {
        Ok(self.cg.b.build_or(a, c, "or")?)
    }
    fn fabs(&self, a: FloatValue<'ctx>) -> R<FloatValue<'ctx>> {
        Ok(self
            .cg
            .call_intrinsic("llvm.fabs", &[bv(a)])?
            .into_float_value())
    }
    /// A real unary op of the component type, with the backend's real semantics.
    fn real1(&self, op: Opcode, a: FloatValue<'ctx>) -> R<FloatValue<'ctx>> {
        Ok(real::unary(self.cg, op, self.ft, bv(a))?.into_float_value())
    }
    /// `f64` from a component value.
    fn wide(&self, a: FloatValue<'ctx>) -> R<FloatValue<'ctx>> {
        if self.t == ElementType::C128 {
            Ok(a)
        } else {
            Ok(self.cg.b.build_float_ext(a, self.cg.f64(), "w")?)
        }
    }
    /// A component value from an `f64` (rounded once).
    fn narrow(&self, a: FloatValue<'ctx>) -> R<FloatValue<'ctx>> {
        if self.t == ElementType::C128 {
            Ok(a)
        } else {
            Ok(self.cg.b.build_float_trunc(a, self.cg.f32(), "n")?)
        }
    }
    fn libm64(&self, name: &str, a: FloatValue<'ctx>) -> R<FloatValue<'ctx>> {
        Ok(crate::libm_fallback::call_libm(self.cg, name, &[bv(a)])?.into_float_value())
    }
    /// A component flushed to zero if subnormal (under FTZ), with integer instructions.
    fn fl(&self, a: FloatValue<'ctx>) -> R<FloatValue<'ctx>> {
        real::flush(self.cg, self.ft, a)
    }
    /// Both parts flushed ([`K::fl`]).
    fn cfl(&self, a: Cx<'ctx>) -> R<Cx<'ctx>> {
        Ok(Cx {
            re: self.fl(a.re)?,
            im: self.fl(a.im)?,
        })
    }
    /// The `f64` constant `v`.
    fn k64(&self, v: f64) -> FloatValue<'ctx> {
        self.cg.f64().const_float(v)
    }

    fn cadd(&self, a: Cx<'ctx>, c: Cx<'ctx>) -> R<Cx<'ctx>> {
        Ok(Cx {
            re: self.add(a.re, c.re)?,
            im: self.add(a.im, c.im)?,
        })
    }
    fn csub(&self, a: Cx<'ctx>, c: Cx<'ctx>) -> R<Cx<'ctx>> {
        Ok(Cx {
            re: self.sub(a.re, c.re)?,
            im: self.sub(a.im, c.im)?,
        })
    }
    /// Each real product rounded (and flushed) on its own, as XLA emits them.
    fn cmul(&self, a: Cx<'ctx>, c: Cx<'ctx>) -> R<Cx<'ctx>> {
        let p = |x: FloatValue<'ctx>, y: FloatValue<'ctx>| self.fl(self.mul(x, y)?);
        let re = self.sub(p(a.re, c.re)?, p(a.im, c.im)?)?;
        let im = self.add(p(a.re, c.im)?, p(a.im, c.re)?)?;
        Ok(Cx { re, im })
    }
    /// Smith's algorithm; a zero divisor divides both parts by its real part; a quotient whose
    /// parts are both NaN recovered as the evaluator's `smith::div` recovers it (C99 Annex G,
    /// as XLA's emitter).
    fn cdiv(&self, a: Cx<'ctx>, c: Cx<'ctx>) -> R<Cx<'ctx>> {
        use FloatPredicate::*;
        let zero = self.k(0.0);
        let re_big = self.cmp(OGE, self.fabs(c.re)?, self.fabs(c.im)?)?;
        let c_zero = self.and(self.cmp(OEQ, c.re, zero)?, self.cmp(OEQ, c.im, zero)?)?;
        // |re| >= |im|, nonzero.
        let r = self.div(c.im, c.re)?;
        let d = self.add(c.re, self.mul(c.im, r)?)?;
        let big = Cx {
            re: self.div(self.add(a.re, self.mul(a.im, r)?)?, d)?,
            im: self.div(self.sub(a.im, self.mul(a.re, r)?)?, d)?,
        };
        // Zero divisor.
        let z = Cx {
            re: self.div(a.re, c.re)?,
            im: self.div(a.im, c.re)?,
        };
        // |re| < |im| (or NaN).
        let r = self.div(c.re, c.im)?;
        let d = self.add(self.mul(c.re, r)?, c.im)?;
        let small = Cx {
            re: self.div(self.add(self.mul(a.re, r)?, a.im)?, d)?,
            im: self.div(self.sub(self.mul(a.im, r)?, a.re)?, d)?,
        };
        let big = self.csel(c_zero, z, big)?;
        let q = self.csel(re_big, big, small)?;
        // Recovery of a NaN quotient.
        let inf = self.k(f64::INFINITY);
        let one = self.k(1.0);
        let is_inf = |x: FloatValue<'ctx>| self.cmp(OEQ, self.fabs(x)?, inf);
        let finite = |x: FloatValue<'ctx>| self.cmp(ONE, self.fabs(x)?, inf);
        let unit = |x: FloatValue<'ctx>| -> R<FloatValue<'ctx>> {
            let m = self.sel(is_inf(x)?, one, zero)?;
            Ok(self
                .cg
                .call_intrinsic("llvm.copysign", &[bv(m), bv(x)])?
                .into_float_value())
        };
        let both_nan = self.and(self.cmp(UNO, q.re, q.re)?, self.cmp(UNO, q.im, q.im)?)?;
        let inf_num = self.and(
            self.or(is_inf(a.re)?, is_inf(a.im)?)?,
            self.and(finite(c.re)?, finite(c.im)?)?,
        )?;
        let (u, v) = (unit(a.re)?, unit(a.im)?);
        let inf_q = Cx {
            re: self.mul(inf, self.add(self.mul(u, c.re)?, self.mul(v, c.im)?)?)?,
            im: self.mul(inf, self.sub(self.mul(v, c.re)?, self.mul(u, c.im)?)?)?,
        };
        let inf_den = self.and(
            self.or(is_inf(c.re)?, is_inf(c.im)?)?,
            self.and(finite(a.re)?, finite(a.im)?)?,
        )?;
        let (u, v) = (unit(c.re)?, unit(c.im)?);
        let zero_q = Cx {
            re: self.mul(zero, self.add(self.mul(a.re, u)?, self.mul(a.im, v)?)?)?,
            im: self.mul(zero, self.sub(self.mul(a.im, u)?, self.mul(a.re, v)?)?)?,
        };
        let r = self.csel(inf_den, zero_q, q)?;
        let r = self.csel(inf_num, inf_q, r)?;
        self.csel(both_nan, r, q)
    }
    /// `hypot(re, im)` in `f64` (of `f64`-widened parts).
    fn hypot64(&self, x: FloatValue<'ctx>, y: FloatValue<'ctx>) -> R<FloatValue<'ctx>> {
        let cg = self.cg;
        if self.t == ElementType::C128 {
            return Ok(
                crate::libm_fallback::call_libm(cg, "hypot", &[bv(x), bv(y)])?.into_float_value(),
            );
        }
        // Squares of f32 values are exact in f64 and cannot overflow or underflow.
        let b = &cg.b;
        let s = b.build_float_add(
            b.build_float_mul(x, x, "xx")?,
            b.build_float_mul(y, y, "yy")?,
            "s",
        )?;
        let h = cg.call_intrinsic("llvm.sqrt", &[bv(s)])?.into_float_value();
        // An infinite part makes the result infinite even when the other is NaN.
        let inf = cg.f64().const_float(f64::INFINITY);
        let xi = b.build_float_compare(FloatPredicate::OEQ, self.wabs(x)?, inf, "xi")?;
        let yi = b.build_float_compare(FloatPredicate::OEQ, self.wabs(y)?, inf, "yi")?;
        let any = b.build_or(xi, yi, "inf")?;
        Ok(b.build_select(any, inf, h, "hypot")?.into_float_value())
    }
    fn wabs(&self, a: FloatValue<'ctx>) -> R<FloatValue<'ctx>> {
        Ok(self
            .cg
            .call_intrinsic("llvm.fabs", &[bv(a)])?
            .into_float_value())
    }
    /// `|z|` in the component type.
    fn cabs(&self, a: Cx<'ctx>) -> R<FloatValue<'ctx>> {
        let h = self.hypot64(self.wide(a.re)?, self.wide(a.im)?)?;
        self.narrow(h)
    }
    fn cexp(&self, a: Cx<'ctx>) -> R<Cx<'ctx>> {
        let e = self.real1(Opcode::Exp, a.re)?;
        Ok(Cx {
            re: self.mul(e, self.real1(Opcode::Cos, a.im)?)?,
            im: self.mul(e, self.real1(Opcode::Sin, a.im)?)?,
        })
    }
    fn cln(&self, a: Cx<'ctx>) -> R<Cx<'ctx>> {
        let re = self.real1(Opcode::Log, self.cabs(a)?)?;
        let im = real::binary(self.cg, Opcode::Atan2, self.ft, bv(a.im), bv(a.re))?;
        Ok(Cx {
            re,
            im: im.into_float_value(),
        })
    }
    fn csqrt(&self, a: Cx<'ctx>) -> R<Cx<'ctx>> {
        use FloatPredicate::*;
        let cg = self.cg;
        let (x, y) = (self.wide(a.re)?, self.wide(a.im)?);
        let f = cg.f64();
        let (zero, half, two) = (f.const_zero(), f.const_float(0.5), f.const_float(2.0));
        let b = &cg.b;
        let r = self.hypot64(x, y)?;
        let sqrt = |v: FloatValue<'ctx>| -> R<FloatValue<'ctx>> {
            Ok(cg.call_intrinsic("llvm.sqrt", &[bv(v)])?.into_float_value())
        };
        // re >= 0: t = sqrt((r + re) / 2), (t, im / 2t).
        let tp = sqrt(b.build_float_mul(b.build_float_add(r, x, "t")?, half, "t")?)?;
        let bp = b.build_float_div(y, b.build_float_mul(two, tp, "2t")?, "b")?;
        // re < 0: t = sqrt((r - re) / 2), (|im| / 2t, copysign(t, im)).
        let tn = sqrt(b.build_float_mul(b.build_float_sub(r, x, "t")?, half, "t")?)?;
        let an = b.build_float_div(self.wabs(y)?, b.build_float_mul(two, tn, "2t")?, "a")?;
        let bn = cg
            .call_intrinsic("llvm.copysign", &[bv(tn), bv(y)])?
            .into_float_value();
        let pos = b.build_float_compare(OGE, x, zero, "pos")?;
        let r0 = b.build_float_compare(OEQ, r, zero, "r0")?;
        let sel = |p: IntValue<'ctx>, u: FloatValue<'ctx>, v: FloatValue<'ctx>| -> R<FloatValue> {
            Ok(b.build_select(p, u, v, "sq")?.into_float_value())
        };
        let re = sel(r0, zero, sel(pos, tp, an)?)?;
        let im = sel(r0, y, sel(pos, bp, bn)?)?;
        Ok(Cx {
            re: self.narrow(re)?,
            im: self.narrow(im)?,
        })
    }
    /// `sin` (`cos == false`) or `cos` in `f64`, rounded once. `sin` takes `sinh` and `cosh`
    /// from `exp(b)` and `exp(-b)` as XLA does (so `sinh` of a tiny `b` is `0`), `cos` from
    /// libm.
    fn csincos(&self, a: Cx<'ctx>, cos: bool) -> R<Cx<'ctx>> {
        let b = &self.cg.b;
        let (x, y) = (self.wide(a.re)?, self.wide(a.im)?);
        let (sx, cx) = (self.libm64("sin", x)?, self.libm64("cos", x)?);
        let (chy, shy) = if cos {
            (self.libm64("cosh", y)?, self.libm64("sinh", y)?)
        } else {
            let ep = self.libm64("exp", y)?;
            let em = self.libm64("exp", b.build_float_neg(y, "ny")?)?;
            let half = self.k64(0.5);
            (
                self.mul(self.add(ep, em)?, half)?,
                self.mul(self.sub(ep, em)?, half)?,
            )
        };
        let (re, im) = if cos {
            let im = b.build_float_mul(sx, shy, "im")?;
            (
                b.build_float_mul(cx, chy, "re")?,
                b.build_float_neg(im, "im")?,
            )
        } else {
            (
                b.build_float_mul(sx, chy, "re")?,
                b.build_float_mul(cx, shy, "im")?,
            )
        };
        Ok(Cx {
            re: self.narrow(re)?,
            im: self.narrow(im)?,
        })
    }
    /// `(t(1 + u²) + i u(1 - t²)) / (1 + t²u²)` with `t = tanh(re)`, `u = tan(im)`, in `f64`
    /// and rounded once: accurate for tiny arguments and `±1` for large `|re|`. Where the
    /// denominator is not finite (NaN or infinite parts) it is `(e - 1) / (e + 1)` with
    /// `e = exp(2z)` instead.
    fn ctanh(&self, a: Cx<'ctx>) -> R<Cx<'ctx>> {
        use FloatPredicate::*;
        let (x, y) = (self.wide(a.re)?, self.wide(a.im)?);
        let (t, u) = (self.libm64("tanh", x)?, self.libm64("tan", y)?);
        let one = self.k64(1.0);
        let (tt, uu) = (self.mul(t, t)?, self.mul(u, u)?);
        let d = self.add(one, self.mul(self.mul(tt, u)?, u)?)?;
        let re = self.div(self.mul(t, self.add(one, uu)?)?, d)?;
        let im = self.div(self.mul(u, self.sub(one, tt)?)?, d)?;
        let precise = Cx {
            re: self.narrow(re)?,
            im: self.narrow(im)?,
        };
        let two = Cx {
            re: self.add(a.re, a.re)?,
            im: self.add(a.im, a.im)?,
        };
        let e = self.cexp(two)?;
        let one = Cx {
            re: self.k(1.0),
            im: self.k(0.0),
        };
        let q = self.cdiv(self.csub(e, one)?, self.cadd(e, one)?)?;
        let finite = self.cmp(OLT, self.fabs(d)?, self.k64(f64::INFINITY))?;
        self.csel(finite, precise, q)
    }
    /// `exp(z) - 1` without cancellation, in `f64` and rounded once:
    /// `expm1(re)cos(im) - 2sin²(im/2) + i exp(re)sin(im)`.
    fn cexpm1(&self, a: Cx<'ctx>) -> R<Cx<'ctx>> {
        let (x, y) = (self.wide(a.re)?, self.wide(a.im)?);
        let h = self.libm64("sin", self.mul(y, self.k64(0.5))?)?;
        let hh = self.mul(self.mul(self.k64(2.0), h)?, h)?;
        let re = self.sub(
            self.mul(self.libm64("expm1", x)?, self.libm64("cos", y)?)?,
            hh,
        )?;
        let im = self.mul(self.libm64("exp", x)?, self.libm64("sin", y)?)?;
        Ok(Cx {
            re: self.narrow(re)?,
            im: self.narrow(im)?,
        })
    }
    fn cpow(&self, a: Cx<'ctx>, c: Cx<'ctx>) -> R<Cx<'ctx>> {
        use FloatPredicate::*;
        let (zero, one) = (self.k(0.0), self.k(1.0));
        let a_one = self.and(self.cmp(OEQ, a.re, one)?, self.cmp(OEQ, a.im, zero)?)?;
        let c_zero = self.and(self.cmp(OEQ, c.re, zero)?, self.cmp(OEQ, c.im, zero)?)?;
        let a_zero = self.and(self.cmp(OEQ, a.re, zero)?, self.cmp(OEQ, a.im, zero)?)?;
        let to_zero = self.and(a_zero, self.cmp(OGT, c.re, zero)?)?;
        let p = self.cexp(self.cmul(c, self.cln(a)?)?)?;
        let p = self.csel(to_zero, Cx { re: zero, im: zero }, p)?;
        let trivial = self.or(a_one, c_zero)?;
        self.csel(trivial, Cx { re: one, im: zero }, p)
    }
}

/// A unary op on a complex operand of type `ty`: `abs`, `real` and `imag` give the component
/// type, the rest `ty`.
pub fn unary<'ctx>(cg: &Cg<'ctx>, op: Opcode, ty: ElementType, v: Val<'ctx>) -> R<Val<'ctx>> {
    use Opcode::*;
    let k = K::new(cg, ty);
    let z = split(cg, v)?;
    let one = Cx {
        re: k.k(1.0),
        im: k.k(0.0),
    };
    // Arithmetic reads its operand's parts flushed and writes its result's parts flushed.
    let f = k.cfl(z)?;
    let c = match op {
        Abs => return Ok(bv(k.fl(k.cabs(f)?)?)),
        Real => return Ok(bv(z.re)),
        Imag => return Ok(bv(z.im)),
        Negate => {
            return join(
                cg,
                ty,
                Cx {
                    re: cg.b.build_float_neg(z.re, "neg")?,
                    im: cg.b.build_float_neg(z.im, "neg")?,
                },
            )
        }
        Exp => k.cexp(f)?,
        Expm1 => k.cexpm1(f)?,
        Log => k.cln(f)?,
        Log1p => k.cln(k.cadd(f, one)?)?,
        Sqrt => k.csqrt(f)?,
        Rsqrt => k.cdiv(one, k.csqrt(f)?)?,
        Sin => k.csincos(f, false)?,
        Cos => k.csincos(f, true)?,
        Tanh => k.ctanh(f)?,
        // tan(z) = -i tanh(iz).
        Tan => {
            let w = k.ctanh(Cx {
                re: cg.b.build_float_neg(f.im, "neg")?,
                im: f.re,
            })?;
            Cx {
                re: w.im,
                im: cg.b.build_float_neg(w.re, "neg")?,
            }
        }
        Sign => {
            // XLA: select(abs(x) == 0, x, x / abs(x)) with `abs` flushed, so an operand that
            // flushes to zero comes back as it was.
            let a = k.fl(k.cabs(f)?)?;
            let a0 = k.cmp(FloatPredicate::OEQ, a, k.k(0.0))?;
            let q = k.cfl(Cx {
                re: k.div(f.re, a)?,
                im: k.div(f.im, a)?,
            })?;
            return join(cg, ty, k.csel(a0, z, q)?);
        }
        _ => return Err(not_defined(op, ty)),
    };
    join(cg, ty, k.cfl(c)?)
}

/// A binary op with result type `ty` (complex): arithmetic on two complex operands, or
/// `complex` of two real parts.
pub fn binary<'ctx>(
    cg: &Cg<'ctx>,
    op: Opcode,
    ty: ElementType,
    a: Val<'ctx>,
    c: Val<'ctx>,
) -> R<Val<'ctx>> {
    use Opcode::*;
    if op == Complex {
        if !a.is_float_value() || !c.is_float_value() {
            return Err("complex takes two real parts".into());
        }
        let (re, im) = (a.into_float_value(), c.into_float_value());
        if re.get_type() != part_ty(cg, ty) || im.get_type() != part_ty(cg, ty) {
            return Err(format!("complex parts do not match {}", ty.name()).into());
        }
        return join(cg, ty, Cx { re, im });
    }
    let k = K::new(cg, ty);
    let (x, y) = (k.cfl(split(cg, a)?)?, k.cfl(split(cg, c)?)?);
    let r = match op {
        Add => k.cadd(x, y)?,
        Subtract => k.csub(x, y)?,
        Multiply => k.cmul(x, y)?,
        Divide => k.cdiv(x, y)?,
        Power => k.cpow(x, y)?,
        _ => return Err(not_defined(op, ty)),
    };
    join(cg, ty, k.cfl(r)?)
}

/// `compare` of complex operands: `EQ` and `NE` compare both parts by the float rules.
pub fn compare<'ctx>(
    cg: &Cg<'ctx>,
    dir: ComparisonDirection,
    ty: ElementType,
    a: Val<'ctx>,
    c: Val<'ctx>,
) -> R<Val<'ctx>> {
    let k = K::new(cg, ty);
    // Float compares: subnormal parts read as zero.
    let (x, y) = (k.cfl(split(cg, a)?)?, k.cfl(split(cg, c)?)?);
    Ok(bv(match dir {
        ComparisonDirection::Eq => k.and(
            k.cmp(FloatPredicate::OEQ, x.re, y.re)?,
            k.cmp(FloatPredicate::OEQ, x.im, y.im)?,
        )?,
        ComparisonDirection::Ne => k.or(
            k.cmp(FloatPredicate::UNE, x.re, y.re)?,
            k.cmp(FloatPredicate::UNE, x.im, y.im)?,
        )?,
        _ => return Err(format!("compare {} is not defined for complex types", dir.name()).into()),
    }))
}

/// `convert` where `from` or `to` is complex.
pub fn convert<'ctx>(
    cg: &Cg<'ctx>,
    from: ElementType,
    to: ElementType,
    v: Val<'ctx>,
) -> R<Val<'ctx>> {
    if from == to {
        return Ok(v);
    }
    let unsupported = || -> Fail {
        format!(
            "convert from {} to {} is not supported",
            from.name(),
            to.name()
        )
        .into()
    };
    if !to.is_complex() {
        if !from.is_complex() || to.is_pred() {
            return Err(unsupported());
        }
        let re = split(cg, v)?.re;
        return real::convert(cg, from.component_type(), to, bv(re));
    }
    let ft = to.component_type();
    let c = if from.is_complex() {
        // As the real converts: widening reads the parts flushed, narrowing reads and writes
        // them flushed.
        let z = K::new(cg, from).cfl(split(cg, v)?)?;
        let f = part_ty(cg, to);
        let cast = |x: FloatValue<'ctx>| -> R<FloatValue<'ctx>> {
            Ok(if to == ElementType::C128 {
                cg.b.build_float_ext(x, f, "ext")?
            } else {
                let n = cg.b.build_float_trunc(x, f, "trunc")?;
                real::flush(cg, ElementType::F32, n)?
            })
        };
        Cx {
            re: cast(z.re)?,
            im: cast(z.im)?,
        }
    } else {
        let re = real::convert(cg, from, ft, v)?;
        if !re.is_float_value() {
            return Err(unsupported());
        }
        Cx {
            re: re.into_float_value(),
            im: part_ty(cg, to).const_zero(),
        }
    };
    join(cg, to, c)
}
