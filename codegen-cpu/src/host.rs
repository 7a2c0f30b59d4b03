//! Host calls: the instructions the runtime library ([`crate::runtime`]) runs instead of
//! generated loops (`fft`, `cholesky`, `triangular-solve`, JAX's `lapack_*_ffi` custom calls
//! and its `tridiagonal_solve_perturbed_ffi`), how lowering recognizes and checks them, and the
//! LLVM call a host-call thunk becomes: the buffer pointers go into the entry point's buffer
//! table and the routine's descriptor is a private constant, so the call is
//! `axle_rt_NAME(desc, bufs)`.
//!
//! Everything is checked here, at compile time (element types, shapes, attributes); the
//! runtime trusts its descriptor.

use axle_ir::{ArrayShape, AttrKey, AttrValue, ElementType, InstId, Module, Opcode, Shape};
use inkwell::module::Linkage;
use inkwell::values::PointerValue;

use crate::buf::BufId;
use crate::cg::Cg;
use crate::error::R;
use crate::runtime::{Call, Elem, FftKind, TriSolve};

/// A call into the runtime library: `call` reads `inputs` (the operands' leaves) and writes
/// `outputs` (the result's leaves).
#[derive(Clone, Debug)]
pub(crate) struct HostCall {
    pub call: Call,
    pub inputs: Vec<BufId>,
    pub outputs: Vec<BufId>,
    /// The instruction it comes from.
    pub origin: InstId,
}

impl HostCall {
    /// Every buffer of the call, operands first, as the runtime's buffer table lists them.
    pub fn buffers(&self) -> Vec<BufId> {
        self.inputs.iter().chain(&self.outputs).copied().collect()
    }
}

/// The error for a module that needs the runtime library in an ahead-of-time object.
pub(crate) fn aot_refusal(m: &Module, id: InstId) -> crate::CodegenError {
    let msg = format!(
        "{} needs the Axle runtime library, which ahead-of-time objects do not include",
        describe(m, id)
    );
    crate::error::finish(m, crate::error::at(m, id, msg.into()))
}

/// What the AOT refusal calls an instruction the runtime library runs.
pub(crate) fn describe(m: &Module, id: InstId) -> String {
    match m.opcode(id) {
        Opcode::CustomCall => format!("the custom call {}", target(m, id)),
        op => op.name().to_string(),
    }
}

fn target(m: &Module, id: InstId) -> String {
    let t = match m.attr(id, &AttrKey::CustomCallTarget) {
        Some(AttrValue::Str(s)) | Some(AttrValue::Raw(s)) | Some(AttrValue::Ident(s)) => {
            s.to_string()
        }
        _ => String::new(),
    };
    // XLA's QR custom calls are LAPACK's routines under other names.
    let ty = m.operands(id).first().and_then(|&o| match m.shape(o) {
        Shape::Array(a) => Some(a.ty),
        _ => None,
    });
    ty.and_then(|ty| axle_analysis::householder::xla_qr_target(&t, ty))
        .unwrap_or(t)
}

/// The runtime call for `id` if the runtime library runs it (an error if it should but
/// cannot), `None` for every other instruction.
pub(crate) fn plan(m: &Module, id: InstId) -> Option<R<Call>> {
    if let Some(c) = crate::collective::plan(m, id) {
        return Some(c);
    }
    match m.opcode(id) {
        Opcode::Fft => Some(fft(m, id)),
        Opcode::Cholesky => Some(cholesky(m, id)),
        Opcode::TriangularSolve => Some(triangular_solve(m, id)),
        Opcode::CustomCall => {
            let t = target(m, id);
            if t == "tridiagonal_solve_perturbed_ffi" {
                return Some(gtsv_perturbed(m, id));
            }
            let name = t.strip_prefix("lapack_")?.strip_suffix("_ffi")?;
            Some(lapack(m, id, name))
        }
        _ => None,
    }
}

fn array(s: &Shape) -> R<&ArrayShape> {
    match s {
        Shape::Array(a) => Ok(a),
        _ => Err("expected an array".into()),
    }
}

fn operand(m: &Module, id: InstId, k: usize) -> R<&ArrayShape> {
    let o = *m
        .operands(id)
        .get(k)
        .ok_or_else(|| format!("missing operand {k}"))?;
    array(m.shape(o))
}

/// The element type of a linear-algebra operand, which the library must handle.
fn elem(a: &ArrayShape) -> R<Elem> {
    Elem::of(a.ty).ok_or_else(|| {
        format!(
            "the runtime library computes in f32, f64, c64 or c128, not {}",
            a.ty.name()
        )
        .into()
    })
}

/// `(batch, rows, cols)` of a batch of matrices.
fn matrices(a: &ArrayShape) -> R<(usize, usize, usize)> {
    let r = a.rank();
    if r < 2 {
        return Err("expected a (batch of) matrices".into());
    }
    let d: Vec<usize> = a.dims.iter().map(|&x| x.max(0) as usize).collect();
    Ok((d[..r - 2].iter().product(), d[r - 2], d[r - 1]))
}

fn fft(m: &Module, id: InstId) -> R<Call> {
    let a = operand(m, id, 0)?;
    let out = array(m.shape(id))?;
    let kind = match m.attr(id, &AttrKey::FftType) {
        Some(AttrValue::Ident(s)) => {
            FftKind::from_name(s).ok_or_else(|| format!("unknown fft_type {s}"))?
        }
        _ => return Err("fft needs fft_type".into()),
    };
    let lengths = m
        .ints_attr(id, &AttrKey::FftLength)
        .ok_or("fft needs fft_length")?;
    let axes = lengths.len();
    if axes == 0 || axes > 3 || axes > a.rank() || out.rank() != a.rank() {
        return Err("fft_length must name 1 to 3 of the operand's dimensions".into());
    }
    // The transformed dimensions of the full (not half-spectrum) side.
    let full = if kind == FftKind::Irfft { out } else { a };
    let in_dims = match kind {
        FftKind::Fft | FftKind::Ifft => axle_analysis::fft::complex_in_dims(&a.dims, lengths),
        FftKind::Rfft | FftKind::Irfft => a.dims.to_vec(),
    };
    let empty = matches!(kind, FftKind::Fft | FftKind::Ifft)
        && (lengths.contains(&0) || a.dims[a.rank() - axes..].contains(&0));
    if !empty && full.dims[full.rank() - axes..] != *lengths {
        return Err("fft_length does not match the operand's dimensions".into());
    }
    let complex = match kind {
        FftKind::Fft | FftKind::Ifft | FftKind::Irfft => a.ty,
        FftKind::Rfft => out.ty,
    };
    let elem = match complex {
        ElementType::C64 => Elem::C64,
        ElementType::C128 => Elem::C128,
        t => return Err(format!("fft of {} is not supported", t.name()).into()),
    };
    Ok(Call::Fft {
        elem,
        kind,
        axes,
        in_dims,
        out_dims: out.dims.to_vec(),
    })
}

fn cholesky(m: &Module, id: InstId) -> R<Call> {
    let a = operand(m, id, 0)?;
    let (batch, n, n2) = matrices(a)?;
    if n != n2 {
        return Err("cholesky needs square matrices".into());
    }
    Ok(Call::Potrf {
        elem: elem(a)?,
        batch,
        n,
        lower: m.bool_attr(id, &AttrKey::Lower).unwrap_or(false),
        lapack: false,
    })
}

fn triangular_solve(m: &Module, id: InstId) -> R<Call> {
    let (a, b) = (operand(m, id, 0)?, operand(m, id, 1)?);
    let transpose = match m.attr(id, &AttrKey::TransposeA) {
        None => "NO_TRANSPOSE".to_string(),
        Some(AttrValue::Ident(s)) => s.to_string(),
        Some(_) => return Err("bad transpose_a".into()),
    };
    let (transpose, conjugate) = match transpose.as_str() {
        "NO_TRANSPOSE" => (false, false),
        "TRANSPOSE" => (true, false),
        "ADJOINT" => (true, true),
        t => return Err(format!("unknown transpose_a {t}").into()),
    };
    let flag = |k: AttrKey| m.bool_attr(id, &k).unwrap_or(false);
    trsm_call(
        a,
        b,
        flag(AttrKey::LeftSide),
        flag(AttrKey::Lower),
        flag(AttrKey::UnitDiagonal),
        transpose,
        conjugate,
    )
}

fn trsm_call(
    a: &ArrayShape,
    b: &ArrayShape,
    left: bool,
    lower: bool,
    unit: bool,
    transpose: bool,
    conjugate: bool,
) -> R<Call> {
    let (batch, mm, m2) = matrices(a)?;
    let (bb, rows, cols) = matrices(b)?;
    if mm != m2
        || a.ty != b.ty
        || a.rank() != b.rank()
        || a.dims[..a.rank() - 2] != b.dims[..b.rank() - 2]
        || bb != batch
        || (left && rows != mm)
        || (!left && cols != mm)
    {
        return Err("the triangular solve's operand shapes do not match".into());
    }
    Ok(Call::Trsm {
        elem: elem(a)?,
        solve: TriSolve {
            batch,
            m: mm,
            rows,
            cols,
            left,
            lower,
            unit,
            transpose,
            adjoint: conjugate,
        },
    })
}

/// A byte field of the FFI backend config (`{uplo = 76 : ui8, ...}`) as a character.
fn config_char(m: &Module, id: InstId, key: &str) -> Option<char> {
    let text = match m.attr(id, &AttrKey::BackendConfig) {
        Some(AttrValue::Raw(s)) | Some(AttrValue::Str(s)) => s.to_string(),
        _ => return None,
    };
    let pat = format!("{key} =");
    let at = text.match_indices(&pat).map(|(i, _)| i).find(|&i| {
        // The key itself, not the end of a longer one.
        let before = text.as_bytes()[..i].last().copied();
        !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
    })?;
    let rest = text[at + pat.len()..].trim_start();
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse::<u8>().ok().map(char::from)
}

/// The text of a field of the FFI backend config up to its type or the next field (`true`,
/// `1`, ...).
fn config_field(m: &Module, id: InstId, key: &str) -> Option<String> {
    let text = match m.attr(id, &AttrKey::BackendConfig) {
        Some(AttrValue::Raw(s)) | Some(AttrValue::Str(s)) => s.to_string(),
        _ => return None,
    };
    let pat = format!("{key} =");
    let at = text.match_indices(&pat).map(|(i, _)| i).find(|&i| {
        let before = text.as_bytes()[..i].last().copied();
        !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
    })?;
    let rest = text[at + pat.len()..].trim_start();
    Some(
        rest.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect(),
    )
}

/// A boolean field of the FFI backend config (`{left = true}`).
fn config_bool(m: &Module, id: InstId, key: &str) -> Option<bool> {
    match config_field(m, id, key)?.as_str() {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

/// An integer field of the FFI backend config (`{low = 1 : i32}`).
fn config_int(m: &Module, id: InstId, key: &str) -> Option<i64> {
    config_field(m, id, key)?.parse().ok()
}

/// The LAPACK routines whose real and complex forms have different names.
const REAL_ONLY: [(&str, &str); 4] = [
    ("orgqr", "ungqr"),
    ("syevd", "heevd"),
    ("ormqr", "unmqr"),
    ("sytrd", "hetrd"),
];

/// JAX's `tridiagonal_solve_perturbed_ffi`: operands `dl`, `d`, `du` (`[batch..., n]`) and `b`
/// (`[batch..., n, nrhs]`), all of one type; the result is the solution, of `b`'s shape.
fn gtsv_perturbed(m: &Module, id: InstId) -> R<Call> {
    let full = "tridiagonal_solve_perturbed_ffi";
    if m.operands(id).len() != 4 {
        return Err(format!("{full} takes dl, d, du and b").into());
    }
    let b = operand(m, id, 3)?;
    let elem = elem(b)?;
    let (batch, n, nrhs) = matrices(b)?;
    let diag = [&b.dims[..b.rank() - 2], &[n as i64]].concat();
    for k in 0..3 {
        let x = operand(m, id, k)?;
        if x.ty != b.ty || x.dims[..] != diag[..] {
            return Err(
                format!("{full}'s diagonals must be of b's type and shape [batch..., n]").into(),
            );
        }
    }
    let res = results(m, id);
    if res.len() != 1 || res[0].ty != b.ty || res[0].dims != b.dims {
        return Err(format!("{full}'s result shape does not match b").into());
    }
    Ok(Call::GtsvPerturbed {
        elem,
        batch,
        n,
        nrhs,
    })
}

/// The leaves of a result shape.
fn results(m: &Module, id: InstId) -> Vec<ArrayShape> {
    match m.shape(id) {
        Shape::Array(a) => vec![a.clone()],
        Shape::Tuple(ids) => ids
            .iter()
            .filter_map(|&i| match m.shape_of(i) {
                Shape::Array(a) => Some(a.clone()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn lapack(m: &Module, id: InstId, name: &str) -> R<Call> {
    let full = format!("lapack_{name}_ffi");
    let (prefix, routine) = name.split_at(name.len().min(1));
    let want = match prefix {
        "s" => ElementType::F32,
        "d" => ElementType::F64,
        "c" => ElementType::C64,
        "z" => ElementType::C128,
        _ => return Err(format!("unsupported custom-call target \"{full}\"").into()),
    };
    let ops = m.operands(id).len();
    // gtsv's first operand is a diagonal; its right-hand sides (the last operand) are the
    // batch of matrices.
    let a = if routine == "gtsv" {
        operand(m, id, 3)?
    } else {
        operand(m, id, 0)?
    };
    let complex = matches!(a.ty, ElementType::C64 | ElementType::C128);
    // The type of eigen- and singular values.
    let real = match a.ty {
        ElementType::C64 => ElementType::F32,
        ElementType::C128 => ElementType::F64,
        t => t,
    };
    if a.ty != want {
        return Err(format!("{full} takes {} operands, got {}", want.name(), a.ty.name()).into());
    }
    let elem = elem(a)?;
    let (batch, rows, cols) = matrices(a)?;
    let bdims = &a.dims[..a.rank() - 2];
    let with = |tail: &[i64]| [bdims, tail].concat();
    let res = results(m, id);
    let expect = |shapes: &[(ElementType, Vec<i64>)]| -> R<()> {
        let ok = res.len() == shapes.len()
            && res
                .iter()
                .zip(shapes)
                .all(|(r, (t, d))| r.ty == *t && r.dims[..] == d[..]);
        if ok {
            Ok(())
        } else {
            Err(format!("{full}'s result shape does not match its operand").into())
        }
    };
    let operands = |n: usize| -> R<()> {
        if ops == n {
            Ok(())
        } else {
            Err(format!("{full} takes {n} operands, got {ops}").into())
        }
    };
    let k = rows.min(cols) as i64;
    match routine {
        "potrf" => {
            operands(1)?;
            if rows != cols {
                return Err(format!("{full} needs square matrices").into());
            }
            let lower = match config_char(m, id, "uplo") {
                Some('L') => true,
                Some('U') => false,
                _ => return Err(format!("{full} needs uplo = L or U").into()),
            };
            expect(&[(a.ty, a.dims.to_vec()), (ElementType::S32, bdims.to_vec())])?;
            Ok(Call::Potrf {
                elem,
                batch,
                n: rows,
                lower,
                lapack: true,
            })
        }
        "getrf" => {
            operands(1)?;
            expect(&[
                (a.ty, a.dims.to_vec()),
                (ElementType::S32, with(&[k])),
                (ElementType::S32, bdims.to_vec()),
            ])?;
            Ok(Call::Getrf {
                elem,
                batch,
                m: rows,
                n: cols,
            })
        }
        "trsm" => {
            operands(2)?;
            let b = operand(m, id, 1)?;
            let flag = |key: &str, yes: char, no: char, default: bool| -> R<bool> {
                match config_char(m, id, key) {
                    None => Ok(default),
                    Some(c) if c == yes => Ok(true),
                    Some(c) if c == no => Ok(false),
                    Some(c) => Err(format!("{full}: unknown {key} {c}").into()),
                }
            };
            let left = flag("side", 'L', 'R', true)?;
            let lower = flag("uplo", 'L', 'U', true)?;
            let unit = flag("diag", 'U', 'N', false)?;
            let (transpose, conjugate) = match config_char(m, id, "trans_x") {
                None | Some('N') => (false, false),
                Some('T') => (true, false),
                Some('C') => (true, true),
                Some(c) => return Err(format!("{full}: unknown trans_x {c}").into()),
            };
            expect(&[(b.ty, b.dims.to_vec())])?;
            trsm_call(a, b, left, lower, unit, transpose, conjugate)
        }
        r if complex && REAL_ONLY.iter().any(|(real, _)| *real == r) => Err(format!(
            "{full} takes real operands (the complex routine is {})",
            REAL_ONLY
                .iter()
                .find(|(real, _)| *real == r)
                .map_or("", |(_, c)| *c)
        )
        .into()),
        r if !complex && REAL_ONLY.iter().any(|(_, c)| *c == r) => Err(format!(
            "{full} takes complex operands (the real routine is {})",
            REAL_ONLY
                .iter()
                .find(|(_, c)| *c == r)
                .map_or("", |(real, _)| *real)
        )
        .into()),
        "gtsv" => {
            operands(4)?;
            let b = operand(m, id, 3)?;
            let (bb, n, nrhs) = matrices(b)?;
            let bd = &b.dims[..b.rank() - 2];
            let diag = [bd, &[n as i64]].concat();
            for k in 0..3 {
                let x = operand(m, id, k)?;
                if x.ty != a.ty || x.dims[..] != diag[..] {
                    return Err(format!(
                        "{full}'s diagonals must be of b's type and shape [batch..., n]"
                    )
                    .into());
                }
            }
            expect(&[
                (a.ty, diag.clone()),
                (a.ty, diag.clone()),
                (a.ty, diag),
                (b.ty, b.dims.to_vec()),
                (ElementType::S32, bd.to_vec()),
            ])?;
            Ok(Call::Gtsv {
                elem,
                batch: bb,
                n,
                nrhs,
            })
        }
        "syevd" | "heevd" => {
            operands(1)?;
            if rows != cols {
                return Err(format!("{full} needs square matrices").into());
            }
            let lower = match config_char(m, id, "uplo") {
                Some('L') => true,
                Some('U') => false,
                _ => return Err(format!("{full} needs uplo = L or U").into()),
            };
            let vectors = match config_char(m, id, "mode") {
                Some('V') => true,
                Some('N') => false,
                _ => return Err(format!("{full} needs mode = V or N").into()),
            };
            expect(&[
                (a.ty, a.dims.to_vec()),
                (real, with(&[rows as i64])),
                (ElementType::S32, bdims.to_vec()),
            ])?;
            Ok(Call::Syevd {
                elem,
                batch,
                n: rows,
                lower,
                vectors,
            })
        }
        // `?gesvd` (JAX's `SvdAlgorithm.QR`) defines the same decomposition as `?gesdd`.
        "gesdd" | "gesvd" => {
            operands(1)?;
            let (vectors, full_uv) = match config_char(m, id, "mode") {
                Some('A') => (true, true),
                Some('S') => (true, false),
                Some('N') => (false, false),
                _ => return Err(format!("{full} needs mode = A, S or N").into()),
            };
            let (mm, nn) = (rows as i64, cols as i64);
            let (u, vt) = if full_uv {
                (vec![mm, mm], vec![nn, nn])
            } else {
                (vec![mm, k], vec![k, nn])
            };
            let (u_dims, vt_dims) = if vectors {
                (with(&u), with(&vt))
            } else {
                // `U` and `V^T` are not computed: any shape, filled with zeros.
                match (res.get(2), res.get(3)) {
                    (Some(u), Some(vt)) => (u.dims.to_vec(), vt.dims.to_vec()),
                    _ => {
                        return Err(
                            format!("{full}'s result shape does not match its operand").into()
                        )
                    }
                }
            };
            expect(&[
                (a.ty, a.dims.to_vec()),
                (real, with(&[k])),
                (a.ty, u_dims.clone()),
                (a.ty, vt_dims.clone()),
                (ElementType::S32, bdims.to_vec()),
            ])?;
            let count = |d: &[i64]| d.iter().map(|&x| x.max(0) as usize).product::<usize>();
            Ok(Call::Gesdd {
                elem,
                batch,
                m: rows,
                n: cols,
                vectors,
                full: full_uv,
                u_len: count(&u_dims),
                vt_len: count(&vt_dims),
            })
        }
        "geqrf" => {
            operands(1)?;
            expect(&[(a.ty, a.dims.to_vec()), (a.ty, with(&[k]))])?;
            Ok(Call::Geqrf {
                elem,
                batch,
                m: rows,
                n: cols,
            })
        }
        "geqp3" => {
            operands(2)?;
            let p = operand(m, id, 1)?;
            if p.ty != ElementType::S32 || p.dims[..] != with(&[cols as i64])[..] {
                return Err(format!("{full} takes an s32 jpvt of shape [batch..., n]").into());
            }
            expect(&[
                (a.ty, a.dims.to_vec()),
                (ElementType::S32, with(&[cols as i64])),
                (a.ty, with(&[k])),
            ])?;
            Ok(Call::Geqp3 {
                elem,
                batch,
                m: rows,
                n: cols,
            })
        }
        "orgqr" | "ungqr" => {
            operands(2)?;
            let tau = operand(m, id, 1)?;
            let kk = tau.dims.last().copied().unwrap_or(-1);
            if tau.ty != a.ty
                || tau.rank() != a.rank() - 1
                || tau.dims[..tau.rank() - 1] != *bdims
                || kk < 0
                || kk as usize > cols
                || cols > rows
            {
                return Err(format!("{full} needs m >= n >= k and tau of a's type").into());
            }
            expect(&[(a.ty, a.dims.to_vec())])?;
            Ok(Call::Orgqr {
                elem,
                batch,
                m: rows,
                n: cols,
                k: kk as usize,
            })
        }
        "ormqr" | "unmqr" => {
            operands(3)?;
            let tau = operand(m, id, 1)?;
            let c = operand(m, id, 2)?;
            let left = config_bool(m, id, "left")
                .ok_or_else(|| format!("{full} needs left = true or false"))?;
            let adjoint = config_bool(m, id, "transpose")
                .ok_or_else(|| format!("{full} needs transpose = true or false"))?;
            let (cb, crows, ccols) = matrices(c)?;
            let kk = tau.dims.last().copied().unwrap_or(-1);
            if tau.ty != a.ty
                || c.ty != a.ty
                || tau.rank() != a.rank() - 1
                || tau.dims[..tau.rank() - 1] != *bdims
                || c.rank() != a.rank()
                || c.dims[..c.rank() - 2] != *bdims
                || kk < 0
                || kk > k
                || (if left { crows } else { ccols }) != rows
            {
                return Err(format!(
                    "{full} needs k <= min(m, n) reflectors of c's type and c with m rows (left) \
                     or columns (right)"
                )
                .into());
            }
            expect(&[(c.ty, c.dims.to_vec())])?;
            Ok(Call::Ormqr {
                elem,
                batch: cb,
                m: rows,
                na: cols,
                k: kk as usize,
                rows: crows,
                cols: ccols,
                left,
                adjoint,
            })
        }
        "sytrd" | "hetrd" => {
            operands(1)?;
            if rows != cols {
                return Err(format!("{full} needs square matrices").into());
            }
            let lower = match config_char(m, id, "uplo") {
                Some('L') => true,
                Some('U') => false,
                _ => return Err(format!("{full} needs uplo = L or U").into()),
            };
            let e = (rows as i64 - 1).max(0);
            expect(&[
                (a.ty, a.dims.to_vec()),
                (real, with(&[rows as i64])),
                (real, with(&[e])),
                (a.ty, with(&[e])),
                (ElementType::S32, bdims.to_vec()),
            ])?;
            Ok(Call::Sytrd {
                elem,
                batch,
                n: rows,
                lower,
            })
        }
        "gehrd" => {
            operands(1)?;
            let (low, high) = (config_int(m, id, "low"), config_int(m, id, "high"));
            let n = rows as i64;
            let ok = match (low, high) {
                (Some(1), Some(0)) if n == 0 => true,
                (Some(lo), Some(hi)) => rows == cols && 1 <= lo && lo <= hi && hi <= n,
                _ => false,
            };
            if rows != cols || !ok {
                return Err(format!(
                    "{full} needs square matrices and integers 1 <= low <= high <= n"
                )
                .into());
            }
            expect(&[
                (a.ty, a.dims.to_vec()),
                (a.ty, with(&[(n - 1).max(0)])),
                (ElementType::S32, bdims.to_vec()),
            ])?;
            Ok(Call::Gehrd {
                elem,
                batch,
                n: rows,
                ilo: low.unwrap_or(1) as usize,
                ihi: high.unwrap_or(0) as usize,
            })
        }
        "gees" => {
            operands(1)?;
            if rows != cols {
                return Err(format!("{full} needs square matrices").into());
            }
            let vectors = match config_char(m, id, "mode") {
                Some('V') => true,
                Some('N') => false,
                _ => return Err(format!("{full} needs mode = V or N").into()),
            };
            match config_char(m, id, "sort") {
                Some('N') => {}
                Some(c) => {
                    return Err(format!(
                        "{full} with sort = {c} (eigenvalues ordered by a select function) is \
                         not supported"
                    )
                    .into())
                }
                None => return Err(format!("{full} needs sort = N").into()),
            }
            let w = with(&[rows as i64]);
            let mut shapes = vec![(a.ty, a.dims.to_vec()), (a.ty, a.dims.to_vec())];
            if complex {
                shapes.push((a.ty, w));
            } else {
                shapes.extend([(a.ty, w.clone()), (a.ty, w)]);
            }
            shapes.extend([
                (ElementType::S32, bdims.to_vec()),
                (ElementType::S32, bdims.to_vec()),
            ]);
            expect(&shapes)?;
            Ok(Call::Gees {
                elem,
                batch,
                n: rows,
                vectors,
            })
        }
        "geev" => {
            operands(1)?;
            if rows != cols {
                return Err(format!("{full} needs square matrices").into());
            }
            let mode = |key: &str| match config_char(m, id, key) {
                Some('V') => Ok(true),
                Some('N') => Ok(false),
                _ => Err(format!("{full} needs {key} = V or N")),
            };
            let (left, right) = (mode("compute_left")?, mode("compute_right")?);
            let cty = match a.ty {
                ElementType::F32 => ElementType::C64,
                ElementType::F64 => ElementType::C128,
                t => t,
            };
            let w = with(&[rows as i64]);
            let mut shapes = if complex {
                vec![(a.ty, w)]
            } else {
                vec![(a.ty, w.clone()), (a.ty, w)]
            };
            shapes.extend([
                (cty, a.dims.to_vec()),
                (cty, a.dims.to_vec()),
                (ElementType::S32, bdims.to_vec()),
            ]);
            expect(&shapes)?;
            Ok(Call::Geev {
                elem,
                batch,
                n: rows,
                left,
                right,
            })
        }
        _ => Err(format!(
            "the LAPACK call {full} is not supported by the cpu backend (potrf, getrf, trsm, \
             geqrf, geqp3, orgqr, ungqr, ormqr, unmqr, sytrd, hetrd, gehrd, gees, geev, gtsv, \
             syevd, heevd, gesdd and gesvd are)"
        )
        .into()),
    }
}

/// The runtime library's function `symbol` of type `fty`, declared in `cg`'s module (once;
/// later calls find it) as an external `nounwind` function: the runtime's entry points catch
/// every panic and never unwind into generated code.
pub(crate) fn runtime_function<'ctx>(
    cg: &Cg<'ctx>,
    symbol: &str,
    fty: inkwell::types::FunctionType<'ctx>,
) -> inkwell::values::FunctionValue<'ctx> {
    cg.module.get_function(symbol).unwrap_or_else(|| {
        let f = cg.module.add_function(symbol, fty, Some(Linkage::External));
        f.add_attribute(
            inkwell::attributes::AttributeLoc::Function,
            cg.enum_attr("nounwind"),
        );
        f
    })
}

/// Emits a call of the runtime's item routine `symbol` (`void symbol(const int64_t *desc,
/// const void *a, const void *b, void *c, int64_t start, int64_t end)`: the precompiled GEMM
/// and convolution) on work items `start..end`, its descriptor `desc` a private constant of the
/// module named `desc_name`, `a` and `b` its operands, `c` its result.
pub(crate) fn emit_item_call<'ctx>(
    cg: &Cg<'ctx>,
    symbol: &str,
    desc: &[i64],
    desc_name: &str,
    [a, b, c]: [inkwell::values::PointerValue<'ctx>; 3],
    start: inkwell::values::IntValue<'ctx>,
    end: inkwell::values::IntValue<'ctx>,
) -> R<()> {
    let desc = descriptor(cg, desc, desc_name);
    let (p, i) = (cg.ptr().into(), cg.i64().into());
    let fty = cg.ctx.void_type().fn_type(&[p, p, p, p, i, i], false);
    let f = runtime_function(cg, symbol, fty);
    let args = [
        desc.as_pointer_value().into(),
        a.into(),
        b.into(),
        c.into(),
        start.into(),
        end.into(),
    ];
    cg.b.build_call(f, &args, "")?;
    Ok(())
}

/// A runtime routine's descriptor `vals` as a private constant array of the module.
pub(crate) fn descriptor<'ctx>(
    cg: &Cg<'ctx>,
    vals: &[i64],
    name: &str,
) -> inkwell::values::GlobalValue<'ctx> {
    let vals: Vec<_> = vals.iter().map(|&v| cg.c64(v)).collect();
    let init = cg.i64().const_array(&vals);
    let g = cg.module.add_global(init.get_type(), None, name);
    g.set_initializer(&init);
    g.set_constant(true);
    g.set_linkage(Linkage::Private);
    g.set_unnamed_addr(true);
    g
}

/// Emits the call of `hc` at the builder's position: stores the buffer pointers `ptrs` into the
/// table `bufs` and calls the runtime function with the call's descriptor.
pub(crate) fn emit<'ctx>(
    cg: &Cg<'ctx>,
    hc: &HostCall,
    ptrs: &[PointerValue<'ctx>],
    bufs: PointerValue<'ctx>,
) -> R<()> {
    for (i, &p) in ptrs.iter().enumerate() {
        let slot = cg.gep(cg.ptr().into(), bufs, cg.c64(i as i64))?;
        cg.b.build_store(slot, p)?;
    }
    let g = descriptor(cg, &hc.call.encode(), "axle.rt.desc");
    let sym = hc.call.symbol();
    let fty = cg
        .ctx
        .void_type()
        .fn_type(&[cg.ptr().into(), cg.ptr().into()], false);
    let f = runtime_function(cg, sym, fty);
    cg.b.build_call(f, &[g.as_pointer_value().into(), bufs.into()], "")?;
    Ok(())
}
