//! Generated hostile HLO text for property tests: whole modules whose shapes are drawn from
//! sizes that break careless arithmetic.
//!
//! A [`HostileModule`] is the text of a module of one to three parameters and a few
//! instructions (elementwise ops, broadcasts, reshapes, reductions with their reducer
//! computations, iotas, constants, transposes, concatenations, dots, slices, maps and nested
//! tuples), whose dimension sizes come from a pool mixing small sizes with zero, huge sizes
//! (`2^31`, `2^40`), sizes whose products overflow `i64` (`2^62`, `i64::MAX`), bounded dynamic
//! (`<=4`) and unbounded dynamic (`?`) dimensions, and whose element types sometimes disagree
//! with their reducers. Most declared shapes are the ones shape inference would give, so a good
//! share of the modules verify and reach the backends; the rest exercise the parser's and the
//! verifier's errors. Sizes a module could actually run with are at most a few hundred
//! elements, and every huge size is far over any test's memory ceiling, so running what verifies
//! is cheap and what cannot fit must fail cleanly.
//!
//! The property every consumer checks is the same: parsing, verifying, evaluating and compiling
//! the text never panics or aborts; each step either succeeds or returns an error.

use quickcheck::{Arbitrary, Gen};

/// Fragments of HLO text that mutation fuzzers splice into a module: the brackets, separators,
/// keywords and literals whose misplacement reaches the parser's error paths (the mutated-text
/// property in `ir/tests/ir_checks/fuzz_text.rs` and the `parse` campaign of `axle-fuzz` share
/// them).
pub const MUTATION_TOKENS: &[&str] = &[
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    ",",
    "=",
    "ROOT ",
    "ENTRY ",
    "%",
    "->",
    ":",
    "\"",
    "/*",
    "*/",
    "f32[",
    "<=",
    "{...}",
    "-",
    "nan",
    "0x",
    "\n",
    "parameter(",
    "tuple(",
    "{1,0}",
    "x",
    "0",
    "99999999999999999999",
    "s4[",
    "c64[",
    "(",
    "T(",
    "dimensions={",
    "index=",
    "slice={[",
];

/// The text of a generated hostile module.
#[derive(Clone, Debug)]
pub struct HostileModule {
    /// The HLO text.
    pub text: String,
}

/// Dimension sizes, as HLO text, with how often each is drawn (small sizes most often).
const DIMS: &[(&str, u32)] = &[
    ("0", 3),
    ("1", 4),
    ("2", 6),
    ("3", 6),
    ("5", 3),
    ("<=4", 2),
    ("?", 2),
    ("2147483648", 1),
    ("1099511627776", 1),
    ("4611686018427387904", 1),
    ("9223372036854775807", 1),
];

/// Element types, as HLO text.
const TYPES: &[&str] = &[
    "f32", "f32", "f32", "s32", "bf16", "f64", "f16", "u8", "pred",
];

/// A value defined so far: its name, element type and dimensions (as text).
#[derive(Clone)]
struct Value {
    name: String,
    ty: &'static str,
    dims: Vec<&'static str>,
}

impl Value {
    fn shape(&self) -> String {
        shape_text(self.ty, &self.dims)
    }
}

fn shape_text(ty: &str, dims: &[&str]) -> String {
    format!("{ty}[{}]", dims.join(","))
}

fn element_type(g: &mut Gen) -> &'static str {
    TYPES[below(g, TYPES.len())]
}

fn pick<'a, T>(g: &mut Gen, xs: &'a [T]) -> &'a T {
    &xs[usize::arbitrary(g) % xs.len()]
}

fn below(g: &mut Gen, n: usize) -> usize {
    usize::arbitrary(g) % n.max(1)
}

fn dim(g: &mut Gen) -> &'static str {
    let total: u32 = DIMS.iter().map(|d| d.1).sum();
    let mut k = u32::arbitrary(g) % total;
    for &(d, w) in DIMS {
        if k < w {
            return d;
        }
        k -= w;
    }
    "1"
}

/// Dimensions of a rank in `lo..hi`.
fn dims_between(g: &mut Gen, lo: usize, hi: usize) -> Vec<&'static str> {
    let rank = lo + below(g, hi - lo);
    (0..rank).map(|_| dim(g)).collect()
}

/// The number of elements of small static dimensions, `None` when any is not a small literal.
fn small_count(dims: &[&str]) -> Option<usize> {
    dims.iter().try_fold(1usize, |acc, d| {
        let n: usize = d.parse().ok().filter(|&n| n <= 16)?;
        Some(acc * n)
    })
}

/// The reducer (or map body) computation of element type `ty`: `add`, or `or` for `pred`.
fn reducer(ty: &str) -> (String, String) {
    let name = format!("red_{ty}");
    let op = if ty == "pred" { "or" } else { "add" };
    let text = format!(
        "{name} {{\n  x = {ty}[] parameter(0)\n  y = {ty}[] parameter(1)\n  ROOT r = {ty}[] {op}(x, y)\n}}\n\n"
    );
    (name, text)
}

/// A literal of type `ty` for small static dimensions `dims`.
fn literal(ty: &str, dims: &[&str], g: &mut Gen) -> String {
    let elem = |g: &mut Gen| -> String {
        match ty {
            "pred" => (if bool::arbitrary(g) { "true" } else { "false" }).to_string(),
            "s32" | "u8" => (u8::arbitrary(g) % 7).to_string(),
            _ => pick(g, &["0", "1.5", "-2", "inf", "nan", "-0", "3e38"]).to_string(),
        }
    };
    fn nest(dims: &[usize], g: &mut Gen, elem: &dyn Fn(&mut Gen) -> String) -> String {
        match dims.split_first() {
            None => elem(g),
            Some((&n, rest)) => {
                let parts: Vec<String> = (0..n).map(|_| nest(rest, g, elem)).collect();
                format!("{{{}}}", parts.join(", "))
            }
        }
    }
    let sizes: Vec<usize> = dims.iter().map(|d| d.parse().unwrap_or(0)).collect();
    nest(&sizes, g, &elem)
}

/// The name of the reducer of type `ty`, adding it to `comps` the first time.
fn add_comp(comps: &mut Vec<(String, String)>, ty: &str) -> String {
    let (n, t) = reducer(ty);
    if !comps.iter().any(|c| c.0 == n) {
        comps.push((n.clone(), t));
    }
    n
}

impl Arbitrary for HostileModule {
    fn arbitrary(g: &mut Gen) -> Self {
        let mut comps: Vec<(String, String)> = Vec::new();
        let mut lines: Vec<String> = Vec::new();
        let mut vals: Vec<Value> = Vec::new();
        let mut fresh = 0usize;
        let mut name = |p: &str| {
            fresh += 1;
            format!("{p}{fresh}")
        };
        // Now and then the declared shape is a random one instead of the right one.
        let wrong = |g: &mut Gen| below(g, 8) == 0;
        for k in 0..1 + below(g, 3) {
            let v = Value {
                name: format!("p{k}"),
                ty: element_type(g),
                dims: dims_between(g, 0, 4),
            };
            lines.push(format!("  {} = {} parameter({k})", v.name, v.shape()));
            vals.push(v);
        }
        for _ in 0..1 + below(g, 6) {
            let a = pick(g, &vals).clone();
            let b = pick(g, &vals).clone();
            let op = below(g, 12);
            let out = match op {
                0 => {
                    let o = if a.ty == "pred" || a.ty == "u8" {
                        "not"
                    } else {
                        *pick(g, &["negate", "abs", "exponential"])
                    };
                    let n = name("u");
                    let mut v = Value {
                        name: n,
                        ..a.clone()
                    };
                    if wrong(g) {
                        v.dims = dims_between(g, 0, 4);
                    }
                    lines.push(format!("  {} = {} {o}({})", v.name, v.shape(), a.name));
                    v
                }
                1 => {
                    let o = if a.ty == "pred" {
                        "and"
                    } else {
                        *pick(g, &["add", "multiply", "maximum"])
                    };
                    let rhs = if bool::arbitrary(g) { &a } else { &b };
                    let v = Value {
                        name: name("b"),
                        ..a.clone()
                    };
                    lines.push(format!(
                        "  {} = {} {o}({}, {})",
                        v.name,
                        v.shape(),
                        a.name,
                        rhs.name
                    ));
                    v
                }
                2 => {
                    let mut d = dims_between(g, 0, 3);
                    let lead = d.len();
                    d.extend(a.dims.iter().copied());
                    let mapping: Vec<String> = (lead..d.len()).map(|i| i.to_string()).collect();
                    let v = Value {
                        name: name("bc"),
                        ty: a.ty,
                        dims: d,
                    };
                    lines.push(format!(
                        "  {} = {} broadcast({}), dimensions={{{}}}",
                        v.name,
                        v.shape(),
                        a.name,
                        mapping.join(",")
                    ));
                    v
                }
                3 => {
                    let v = Value {
                        name: name("rs"),
                        ty: a.ty,
                        dims: dims_between(g, 0, 4),
                    };
                    lines.push(format!("  {} = {} reshape({})", v.name, v.shape(), a.name));
                    v
                }
                4 => {
                    // A reduction over every dimension; the reducer's type is now and then not
                    // the operand's (a verifier error), and the init value's too.
                    let rty = if wrong(g) { element_type(g) } else { a.ty };
                    let ity = if wrong(g) { element_type(g) } else { a.ty };
                    let comp = add_comp(&mut comps, rty);
                    let init = name("z");
                    let zero = if ity == "pred" { "false" } else { "0" };
                    lines.push(format!("  {init} = {ity}[] constant({zero})"));
                    let all: Vec<String> = (0..a.dims.len()).map(|i| i.to_string()).collect();
                    let v = Value {
                        name: name("red"),
                        ty: rty,
                        dims: Vec::new(),
                    };
                    lines.push(format!(
                        "  {} = {} reduce({}, {init}), dimensions={{{}}}, to_apply={comp}",
                        v.name,
                        v.shape(),
                        a.name,
                        all.join(",")
                    ));
                    v
                }
                5 => {
                    let d = dims_between(g, 1, 4);
                    let ty = *pick(g, &["f32", "s32", "u8"]);
                    let v = Value {
                        name: name("io"),
                        ty,
                        dims: d,
                    };
                    lines.push(format!(
                        "  {} = {} iota(), iota_dimension=0",
                        v.name,
                        v.shape()
                    ));
                    v
                }
                6 => {
                    let ty = element_type(g);
                    let d = dims_between(g, 0, 3);
                    let lit = match small_count(&d) {
                        Some(_) if !wrong(g) => literal(ty, &d, g),
                        Some(_) => "{1, 2}".to_string(),
                        None => "{...}".to_string(),
                    };
                    let lit = if d.is_empty() && lit.starts_with('{') {
                        literal(ty, &[], g)
                    } else {
                        lit
                    };
                    let v = Value {
                        name: name("c"),
                        ty,
                        dims: d,
                    };
                    lines.push(format!("  {} = {} constant({lit})", v.name, v.shape()));
                    v
                }
                7 => {
                    let perm: Vec<String> =
                        (0..a.dims.len()).rev().map(|i| i.to_string()).collect();
                    let d: Vec<&str> = a.dims.iter().rev().copied().collect();
                    let v = Value {
                        name: name("t"),
                        ty: a.ty,
                        dims: d,
                    };
                    lines.push(format!(
                        "  {} = {} transpose({}), dimensions={{{}}}",
                        v.name,
                        v.shape(),
                        a.name,
                        perm.join(",")
                    ));
                    v
                }
                8 if !a.dims.is_empty() => {
                    // Concatenating a value with itself doubles dimension 0 (when it is small).
                    let mut d = a.dims.clone();
                    d[0] = match d[0].parse::<u64>() {
                        Ok(n) if n <= 16 => {
                            ["0", "2", "4", "6", "8", "10", "12", "14", "16"][(n as usize).min(8)]
                        }
                        _ => d[0],
                    };
                    let v = Value {
                        name: name("cat"),
                        ty: a.ty,
                        dims: d,
                    };
                    lines.push(format!(
                        "  {} = {} concatenate({}, {}), dimensions={{0}}",
                        v.name,
                        v.shape(),
                        a.name,
                        a.name
                    ));
                    v
                }
                9 if a.dims.len() == 2 => {
                    let n = dim(g);
                    let one = name("s");
                    let unit = if a.ty == "pred" { "true" } else { "1" };
                    lines.push(format!("  {one} = {}[] constant({unit})", a.ty));
                    let w = Value {
                        name: name("w"),
                        ty: a.ty,
                        dims: vec![a.dims[1], n],
                    };
                    lines.push(format!(
                        "  {} = {} broadcast({one}), dimensions={{}}",
                        w.name,
                        w.shape()
                    ));
                    let v = Value {
                        name: name("dot"),
                        ty: a.ty,
                        dims: vec![a.dims[0], n],
                    };
                    lines.push(format!(
                        "  {} = {} dot({}, {}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}",
                        v.name,
                        v.shape(),
                        a.name,
                        w.name
                    ));
                    vals.push(w);
                    v
                }
                10 => {
                    // Nested tuples: usually a few levels, now and then past the 256-level limit.
                    let depth = if below(g, 10) == 0 {
                        255 + below(g, 4)
                    } else {
                        1 + below(g, 3)
                    };
                    let mut inner = a.name.clone();
                    let mut shape = a.shape();
                    for _ in 0..depth {
                        shape = format!("({shape})");
                        let n = name("tup");
                        lines.push(format!("  {n} = {shape} tuple({inner})"));
                        inner = n;
                    }
                    // Unwrap the outermost level again so later steps get an array.
                    let v = Value {
                        name: name("g"),
                        ..a.clone()
                    };
                    if depth == 1 {
                        lines.push(format!(
                            "  {} = {} get-tuple-element({inner}), index=0",
                            v.name,
                            v.shape()
                        ));
                        v
                    } else {
                        a.clone()
                    }
                }
                _ => {
                    let comp = add_comp(&mut comps, a.ty);
                    let v = Value {
                        name: name("map"),
                        ..a.clone()
                    };
                    lines.push(format!(
                        "  {} = {} map({}, {}), dimensions={{{}}}, to_apply={comp}",
                        v.name,
                        v.shape(),
                        a.name,
                        b.name,
                        (0..a.dims.len())
                            .map(|i| i.to_string())
                            .collect::<Vec<_>>()
                            .join(",")
                    ));
                    v
                }
            };
            vals.push(out);
        }
        let last = vals.last().cloned().expect("a value");
        if bool::arbitrary(g) && vals.len() > 1 {
            let other = &vals[vals.len() - 2];
            lines.push(format!(
                "  ROOT root = ({}, {}) tuple({}, {})",
                last.shape(),
                other.shape(),
                last.name,
                other.name
            ));
        } else {
            lines.push(format!(
                "  ROOT root = {} copy({})",
                last.shape(),
                last.name
            ));
        }
        let mut text = String::from("HloModule hostile\n\n");
        for (_, c) in &comps {
            text.push_str(c);
        }
        text.push_str("ENTRY main {\n");
        text.push_str(&lines.join("\n"));
        text.push_str("\n}\n");
        HostileModule { text }
    }
}
