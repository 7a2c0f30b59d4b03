//! The `cpu` backend's narrow element types against the reference evaluator, bit for bit: every
//! bit pattern of each 8- and 4-bit float type through converts and arithmetic, rounding of
//! `f32`, `f64`, `f16` and integer values into them (ties, overflow, NaN, infinities,
//! subnormals), the sub-byte integers `s2`/`s4`/`u2`/`u4` on all pairs of values, bit-level
//! `bitcast-convert` between sub-byte and wider types, and tuple constants.

use axle::analysis::eval::evaluate;
use axle::ir::literal::minifloat_to_f64;
use axle::ir::types::{ArrayShape, ElementType};
use axle::ir::{compare_arrays, parse_module, ArrayLiteral, Literal, Tolerance};
use axle_codegen_cpu::{compile, CpuOptions};

/// The 8- and 4-bit float types.
const MINIFLOATS: [ElementType; 9] = [
    ElementType::F8E5M2,
    ElementType::F8E4M3,
    ElementType::F8E3M4,
    ElementType::F8E4M3FN,
    ElementType::F8E4M3FNUZ,
    ElementType::F8E5M2FNUZ,
    ElementType::F8E4M3B11FNUZ,
    ElementType::F8E8M0FNU,
    ElementType::F4E2M1FN,
];

fn flatten(l: Literal, out: &mut Vec<ArrayLiteral>) {
    match l {
        Literal::Array(a) => out.push(a),
        Literal::Tuple(es) => es.into_iter().for_each(|e| flatten(e, out)),
    }
}

/// Runs `hlo` on the evaluator and on `cpu` (default options: subnormals flushed on both) and
/// requires identical results (NaN matches NaN); returns the number of output leaves.
fn same_as_evaluator(hlo: &str, args: &[Literal]) -> usize {
    let m = parse_module(hlo).unwrap_or_else(|e| panic!("{e}\n{hlo}"));
    let mut want = Vec::new();
    flatten(evaluate(&m, args).expect("evaluates"), &mut want);
    let got = compile(&m, &CpuOptions::default())
        .unwrap_or_else(|e| panic!("compiles: {e}\n{hlo}"))
        .run_literals(args)
        .expect("runs");
    assert_eq!(want.len(), got.len());
    for (k, (w, g)) in want.iter().zip(&got).enumerate() {
        if let Err(e) = compare_arrays(w, g, Tolerance::Exact) {
            panic!("output {k}: {e}\n{hlo}");
        }
    }
    want.len()
}

fn array(ty: ElementType, data: Vec<u8>) -> Literal {
    let n = (data.len() / ty.byte_size()) as i64;
    Literal::Array(ArrayLiteral {
        shape: ArrayShape::new(ty, &[n]),
        data,
    })
}

fn f32s(v: &[f32]) -> Literal {
    array(
        ElementType::F32,
        v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    )
}

/// Every bit pattern of each small float: decoded into every wider type, through arithmetic
/// (rounded back after every op), compares, and re-encoded bit for bit.
#[test]
fn minifloat_bit_patterns() {
    for t in MINIFLOATS {
        let (n, bits_out) = if t.bits() == 8 {
            (256, "u8[256] bitcast-convert(r)")
        } else {
            (16, "u8[8] bitcast-convert(r2)")
        };
        let ty = t.name();
        let hlo = format!(
            "HloModule m\n\nENTRY main {{\n  p = {ty}[{n}] parameter(0)\n  \
             q = {ty}[{n}] reverse(p), dimensions={{0}}\n  \
             f = f32[{n}] convert(p)\n  h = f16[{n}] convert(p)\n  bf = bf16[{n}] convert(p)\n  \
             d = f64[{n}] convert(p)\n  i = s32[{n}] convert(p)\n  u = u8[{n}] convert(p)\n  \
             b = pred[{n}] convert(p)\n  r = {ty}[{n}] convert(f)\n  \
             r2 = {ty}[{h}, 2] reshape(r)\n  bits = {bits_out}\n  \
             x = {ty}[{n}] parameter(1)\n  y = {ty}[{n}] reverse(x), dimensions={{0}}\n  \
             s = {ty}[{n}] add(x, y)\n  m = {ty}[{n}] multiply(x, y)\n  \
             dv = {ty}[{n}] divide(x, y)\n  mx = {ty}[{n}] maximum(p, q)\n  \
             ng = {ty}[{n}] negate(p)\n  sq = {ty}[{n}] sqrt(x)\n  \
             lt = pred[{n}] compare(p, q), direction=LT\n  \
             to = pred[{n}] compare(p, q), direction=LT, type=TOTALORDER\n  \
             e5 = f8e5m2[{n}] convert(p)\n  e4 = f8e4m3fn[{n}] convert(p)\n  \
             ROOT t = (f32[{n}], f16[{n}], bf16[{n}], f64[{n}], s32[{n}], u8[{n}], pred[{n}], \
             u8[{nb}], {ty}[{n}], {ty}[{n}], {ty}[{n}], {ty}[{n}], {ty}[{n}], {ty}[{n}], \
             pred[{n}], pred[{n}], f8e5m2[{n}], f8e4m3fn[{n}]) \
             tuple(f, h, bf, d, i, u, b, bits, s, m, dv, mx, ng, sq, lt, to, e5, e4)\n}}\n",
            h = n / 2,
            nb = if t.bits() == 8 { 256 } else { 8 },
        );
        let data: Vec<u8> = (0..n as u32).map(|b| b as u8).collect();
        // Both flush f32 subnormals in arithmetic, which only f8e8m0fnu reaches (2^-127 reads
        // as zero; results of 2^-127 and below flush to zero, stored as NaN), so every pattern
        // goes through arithmetic too.
        let x = data.clone();
        assert_eq!(same_as_evaluator(&hlo, &[array(t, data), array(t, x)]), 18);
    }
}

/// `f32` values that probe the rounding of every small float type: each representable value,
/// the midpoints between neighbours (ties) and the `f32` values just beside them, values past
/// the largest finite one, both zeros, infinities, NaNs and `f32` subnormals.
fn probe_values() -> Vec<f32> {
    let mut v: Vec<f32> = vec![
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        f32::MAX,
        f32::MIN_POSITIVE,
        f32::from_bits(1),
        f32::from_bits(0x0040_0000),
        f32::from_bits(0x005f_ffff),
        f32::from_bits(0x0060_0000),
        f32::from_bits(0x007f_ffff),
        1e-40,
        1.5,
        3.0,
        1e30,
    ];
    for t in MINIFLOATS {
        let n = 1u32 << t.bits();
        let mut vals: Vec<f64> = (0..n)
            .map(|b| minifloat_to_f64(t, b as u8))
            .filter(|x| x.is_finite() && *x >= 0.0)
            .collect();
        vals.sort_by(f64::total_cmp);
        vals.dedup();
        let max = *vals.last().unwrap();
        let gap = max - vals[vals.len() - 2];
        vals.extend([max + gap / 2.0, max + gap, max * 4.0]);
        let mids: Vec<f64> = vals.windows(2).map(|w| (w[0] + w[1]) / 2.0).collect();
        for x in vals.into_iter().chain(mids) {
            let f = x as f32;
            v.extend([f, f.next_up(), f.next_down()]);
        }
    }
    let neg: Vec<f32> = v.iter().map(|x| -x).collect();
    v.extend(neg);
    v
}

/// `f32`, `f64`, `f16` and integer values rounded into each small float type, compared bit for
/// bit (re-encoded into bytes).
#[test]
fn minifloat_rounding() {
    let vals = probe_values();
    let n = vals.len();
    let ints: Vec<i32> = (-40..40).chain([1000, -1000, 1 << 20, i32::MIN]).collect();
    let ni = ints.len();
    let ints_lit = array(
        ElementType::S32,
        ints.iter().flat_map(|x| x.to_le_bytes()).collect(),
    );
    for t in MINIFLOATS {
        let ty = t.name();
        // The f4 type's bytes come out through a bit-level bitcast of element pairs.
        let bytes = |v: &str, len: usize| {
            if t.bits() == 8 {
                format!("u8[{len}] bitcast-convert({v})")
            } else {
                format!("u8[{}] bitcast-convert({v}2)", len / 2)
            }
        };
        let pairs = |v: &str, len: usize| {
            if t.bits() == 8 {
                String::new()
            } else {
                format!("  {v}2 = {ty}[{}, 2] reshape({v})\n", len / 2)
            }
        };
        let blen = |len: usize| if t.bits() == 8 { len } else { len / 2 };
        let hlo = format!(
            "HloModule m\n\nENTRY main {{\n  p = f32[{n}] parameter(0)\n  \
             k = s32[{ni}] parameter(1)\n  d = f64[{n}] convert(p)\n  h = f16[{n}] convert(p)\n  \
             a = {ty}[{n}] convert(p)\n  b = {ty}[{n}] convert(d)\n  c = {ty}[{n}] convert(h)\n  \
             i = {ty}[{ni}] convert(k)\n{pa}{pb}{pc}{pi}  \
             ab = {ba}\n  bb = {bb}\n  cb = {bc}\n  ib = {bi}\n  \
             ROOT t = (u8[{l}], u8[{l}], u8[{l}], u8[{li}]) tuple(ab, bb, cb, ib)\n}}\n",
            pa = pairs("a", n),
            pb = pairs("b", n),
            pc = pairs("c", n),
            pi = pairs("i", ni),
            ba = bytes("a", n),
            bb = bytes("b", n),
            bc = bytes("c", n),
            bi = bytes("i", ni),
            l = blen(n),
            li = blen(ni),
        );
        assert_eq!(same_as_evaluator(&hlo, &[f32s(&vals), ints_lit.clone()]), 4);
    }
}

/// The sub-byte integers on every pair of values: arithmetic (wrapping, division by zero,
/// `MIN / -1`), shifts, power, bit ops, compares and converts from and to wider types.
#[test]
fn sub_byte_integers() {
    for t in [
        ElementType::S2,
        ElementType::S4,
        ElementType::U2,
        ElementType::U4,
    ] {
        let ty = t.name();
        let k = 1usize << t.bits();
        let n = k * k;
        let a: Vec<u8> = (0..n).map(|i| (i / k) as u8).collect();
        let b: Vec<u8> = (0..n).map(|i| (i % k) as u8).collect();
        let bin = [
            "add",
            "subtract",
            "multiply",
            "divide",
            "remainder",
            "maximum",
            "minimum",
            "and",
            "or",
            "xor",
            "shift-left",
            "shift-right-logical",
            "shift-right-arithmetic",
            "power",
        ];
        let mut un = vec!["negate", "not", "popcnt", "count-leading-zeros"];
        if t.is_signed_int() {
            un.extend(["abs", "sign"]);
        }
        let mut body = String::new();
        let mut names = Vec::new();
        let mut shapes = Vec::new();
        for (j, op) in bin.iter().enumerate() {
            body += &format!("  b{j} = {ty}[{n}] {op}(x, y)\n");
            names.push(format!("b{j}"));
            shapes.push(format!("{ty}[{n}]"));
        }
        for (j, op) in un.iter().enumerate() {
            body += &format!("  u{j} = {ty}[{n}] {op}(x)\n");
            names.push(format!("u{j}"));
            shapes.push(format!("{ty}[{n}]"));
        }
        for (j, (dir, cty)) in [("LT", ""), ("GE", ""), ("EQ", "")].iter().enumerate() {
            body += &format!("  c{j} = pred[{n}] compare(x, y), direction={dir}{cty}\n");
            names.push(format!("c{j}"));
            shapes.push(format!("pred[{n}]"));
        }
        for (j, wide) in ["s32", "u8", "f32", "bf16", "s4", "u2", "pred"]
            .iter()
            .enumerate()
        {
            body += &format!("  w{j} = {wide}[{n}] convert(x)\n  v{j} = {ty}[{n}] convert(w{j})\n");
            names.extend([format!("w{j}"), format!("v{j}")]);
            shapes.extend([format!("{wide}[{n}]"), format!("{ty}[{n}]")]);
        }
        body += &format!(
            "  cl = {ty}[{n}] clamp(y, x, y)\n  sel = {ty}[{n}] select(c0, x, y)\n  \
             zero = {ty}[] constant(0)\n  sum = {ty}[] reduce(x, zero), dimensions={{0}}, \
             to_apply=add\n  io = {ty}[{n}] iota(), iota_dimension=0\n"
        );
        names.extend(["cl", "sel", "sum", "io"].map(String::from));
        shapes.extend([
            format!("{ty}[{n}]"),
            format!("{ty}[{n}]"),
            format!("{ty}[]"),
            format!("{ty}[{n}]"),
        ]);
        let hlo = format!(
            "HloModule m\n\nadd {{\n  l = {ty}[] parameter(0)\n  r = {ty}[] parameter(1)\n  \
             ROOT s = {ty}[] add(l, r)\n}}\n\nENTRY main {{\n  x = {ty}[{n}] parameter(0)\n  \
             y = {ty}[{n}] parameter(1)\n{body}  ROOT t = ({}) tuple({})\n}}\n",
            shapes.join(", "),
            names.join(", ")
        );
        same_as_evaluator(&hlo, &[array(t, a.clone()), array(t, b.clone())]);
    }
    // Wide values and floats (NaN, infinities, fractions) saturate or wrap into s4 and u2.
    let w: Vec<i32> = vec![-100, -9, -8, -7, -1, 0, 1, 7, 8, 9, 15, 16, 100, i32::MIN];
    let f = [
        -100.0,
        -8.5,
        -7.5,
        -0.5,
        0.5,
        3.7,
        7.5,
        100.0,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -0.0,
        1e-40,
        2.0,
    ];
    let hlo =
        "HloModule m\n\nENTRY main {\n  w = s32[14] parameter(0)\n  f = f32[14] parameter(1)\n  \
               a = s4[14] convert(w)\n  b = u2[14] convert(w)\n  c = s4[14] convert(f)\n  \
               d = u4[14] convert(f)\n  e = s2[14] convert(f)\n  \
               ROOT t = (s4[14], u2[14], s4[14], u4[14], s2[14]) tuple(a, b, c, d, e)\n}\n";
    let wl = array(
        ElementType::S32,
        w.iter().flat_map(|x| x.to_le_bytes()).collect(),
    );
    assert_eq!(same_as_evaluator(hlo, &[wl, f32s(&f)]), 5);
}

/// `bitcast-convert` between sub-byte and wider types packs elements bit by bit
/// (little-endian), both ways, and between sub-byte types of the same width.
#[test]
fn sub_byte_bitcast_convert() {
    let hlo = "HloModule m\n\nENTRY main {\n  p = u8[6] parameter(0)\n  \
               a = s4[6,2] bitcast-convert(p)\n  b = u2[6,4] bitcast-convert(p)\n  \
               c = u8[6] bitcast-convert(a)\n  d = u8[6] bitcast-convert(b)\n  \
               c2 = u8[3,2] reshape(c)\n  \
               e = u4[6,2] bitcast-convert(a)\n  f = f4e2m1fn[6,2] bitcast-convert(e)\n  \
               g = s8[6] bitcast-convert(f)\n  q = u16[3] bitcast-convert(c2)\n  \
               h = s4[3,4] bitcast-convert(q)\n  i = u16[3] bitcast-convert(h)\n  \
               j = s2[6,2,2] bitcast-convert(a)\n  k = s4[6,2] bitcast-convert(j)\n  \
               r = s2[3,8] bitcast-convert(q)\n  ROOT t = (s4[6,2], u2[6,4], u8[6], u8[6], \
               u4[6,2], f4e2m1fn[6,2], s8[6], s4[3,4], u16[3], s2[6,2,2], s4[6,2], s2[3,8]) \
               tuple(a, b, c, d, e, f, g, h, i, j, k, r)\n}\n";
    let p = array(ElementType::U8, vec![0x00, 0xff, 0x87, 0x78, 0x1e, 0xc3]);
    assert_eq!(same_as_evaluator(hlo, &[p]), 12);
}

/// Tuple constants: their leaves as buffers, through get-tuple-element, inside fused
/// computations and as the entry's result.
#[test]
fn tuple_constants() {
    let hlo = "HloModule m\n\nfused {\n  x = f32[3] parameter(0)\n  \
               c = (f32[3], (s32[], f32[3])) constant(({1, 2, 3}, (7, {-1, 0.5, 4})))\n  \
               a = f32[3] get-tuple-element(c), index=0\n  i = (s32[], f32[3]) get-tuple-element(c), index=1\n  \
               b = f32[3] get-tuple-element(i), index=1\n  s = f32[3] add(a, b)\n  \
               ROOT m = f32[3] multiply(s, x)\n}\n\nENTRY main {\n  p = f32[3] parameter(0)\n  \
               k = (f32[3], (s32[], f32[3])) constant(({1, 2, 3}, (7, {-1, 0.5, 4})))\n  \
               g = (s32[], f32[3]) get-tuple-element(k), index=1\n  n = s32[] get-tuple-element(g), index=0\n  \
               v = f32[3] get-tuple-element(g), index=1\n  w = f32[3] add(v, p)\n  \
               f = f32[3] fusion(p), kind=kLoop, calls=fused\n  \
               ROOT t = (s32[], f32[3], f32[3], (f32[3], (s32[], f32[3]))) tuple(n, w, f, k)\n}\n";
    assert_eq!(same_as_evaluator(hlo, &[f32s(&[1.0, -2.0, 0.25])]), 6);
}

/// The scalar semantics inside reducers and `map` bodies: signed zeros and NaN in
/// `maximum`/`minimum`/`clamp`, subnormals flushed, integer power and division edge cases.
#[test]
fn semantics_inside_reductions_and_maps() {
    let hlo = "HloModule m\n\nmax {\n  ma = f32[] parameter(0)\n  mb = f32[] parameter(1)\n  \
               ROOT mr = f32[] maximum(ma, mb)\n}\n\nmin {\n  na = f32[] parameter(0)\n  \
               nb = f32[] parameter(1)\n  ROOT nr = f32[] minimum(na, nb)\n}\n\nbody {\n  \
               ba = f32[] parameter(0)\n  bb = f32[] parameter(1)\n  lo = f32[] constant(-0)\n  \
               hi = f32[] constant(0)\n  bc = f32[] clamp(lo, ba, hi)\n  bs = f32[] sign(bb)\n  \
               ROOT br = f32[] add(bc, bs)\n}\n\nipow {\n  pa = s8[] parameter(0)\n  \
               pb = s8[] parameter(1)\n  pp = s8[] power(pa, pb)\n  pd = s8[] divide(pa, pb)\n  \
               ROOT pr = s8[] add(pp, pd)\n}\n\nENTRY main {\n  x = f32[4,6] parameter(0)\n  \
               y = f32[4,6] parameter(1)\n  i = s8[24] parameter(2)\n  j = s8[24] parameter(3)\n  \
               ninf = f32[] constant(-inf)\n  pinf = f32[] constant(inf)\n  \
               a = f32[4] reduce(x, ninf), dimensions={1}, to_apply=max\n  \
               b = f32[4] reduce(x, pinf), dimensions={1}, to_apply=min\n  \
               c = f32[4,6] map(x, y), dimensions={0,1}, to_apply=body\n  \
               d = s8[24] map(i, j), dimensions={0}, to_apply=ipow\n  \
               ROOT t = (f32[4], f32[4], f32[4,6], s8[24]) tuple(a, b, c, d)\n}\n";
    let sub = f32::from_bits(5);
    let x = [
        -0.0,
        0.0,
        -0.0,
        -0.0,
        -sub,
        -0.0, // max +0, min -0
        sub,
        -sub,
        1e-40,
        -1e-40,
        -0.0,
        -0.0, // all flush to zeros
        f32::NAN,
        1.0,
        -1.0,
        0.0,
        2.0,
        3.0, // NaN propagates
        -5.0,
        -0.0,
        -3.0,
        sub,
        0.0,
        -1e-39, // zeros and subnormals beside negatives
    ];
    let y = [
        sub,
        -sub,
        0.0,
        -0.0,
        1e-39,
        -1e-39,
        1.0,
        -1.0,
        f32::NAN,
        2.0,
        -2.0,
        0.5,
        1e-45,
        -1e-45,
        3.0,
        -3.0,
        0.25,
        -0.25,
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
        1e-38,
        7.0,
        -7.0,
        0.0,
    ];
    let i: Vec<u8> = [
        -128i8, -128, 127, 0, 5, -1, -1, 2, 2, 3, -2, 1, 0, 7, -7, 100, -100, 1, -1, 2, 3, 4, -3,
        16,
    ]
    .iter()
    .map(|&v| v as u8)
    .collect();
    let j: Vec<u8> = [
        -1i8, 0, 0, 0, 0, 7, 8, -1, 64, 65, 7, -128, -5, -2, 2, 63, 3, 127, -127, 6, 5, 3, -3, -16,
    ]
    .iter()
    .map(|&v| v as u8)
    .collect();
    let shaped = |v: &[f32]| {
        Literal::Array(ArrayLiteral {
            shape: ArrayShape::new(ElementType::F32, &[4, 6]),
            data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        })
    };
    assert_eq!(
        same_as_evaluator(
            hlo,
            &[
                shaped(&x),
                shaped(&y),
                array(ElementType::S8, i),
                array(ElementType::S8, j)
            ]
        ),
        4
    );
}

/// What the backend cannot compile for these types is an error naming the instruction.
#[test]
fn unsupported_narrow_type_ops_are_errors() {
    let hlo = "HloModule m\n\nENTRY main {\n  p = f8e4m3fn[4] parameter(0)\n  \
               ROOT r = f8e4m3fn[4] reduce-precision(p), exponent_bits=2, mantissa_bits=1\n}\n";
    let m = parse_module(hlo).expect("parses");
    let Err(e) = compile(&m, &CpuOptions::default()) else {
        panic!("reduce-precision of an 8-bit float compiled");
    };
    let msg = e.to_string();
    assert!(
        msg.contains("reduce-precision") && msg.contains("f8e4m3fn"),
        "{msg}"
    );
}
