//! Benchmarks for Axle: divan benches, model and large-graph generators and the side-by-side harness.
//!
//! [`layer_stack`] writes the HLO text of the shared baseline's `layer_stack` family (an unrolled
//! residual MLP + layernorm tower, as JAX emits it) at any size, so the pass pipelines can be
//! measured from 10k to 1M instructions on one kind of graph. [`baseline_text`] and
//! [`graph_text`] read the shared baseline's graphs (gzipped or not) for the benches and
//! examples. [`tiny_mlp`] builds the small model a framework author embeds (the per-call
//! overhead benchmark).
#![deny(missing_docs)]

pub mod graphs;

use std::fmt::Write;
use std::io::Read;
use std::path::PathBuf;

/// The shared reference data: `AXLE_SHARED`, or `../shared` beside the repository.
pub fn shared_dir() -> PathBuf {
    std::env::var("AXLE_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared"))
}

/// The CPU time of `clock` (`libc::CLOCK_THREAD_CPUTIME_ID` for the calling thread,
/// `libc::CLOCK_PROCESS_CPUTIME_ID` for the whole process) in nanoseconds, exact to the
/// nanosecond where the kernel keeps it so; panics where the clock cannot be read (benches
/// and examples only).
pub fn cpu_clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime({clock}) failed");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The text of an HLO file, gunzipped when its name ends in `.gz`; panics on an unreadable
/// file (benches and examples only).
pub fn hlo_file_text(path: &std::path::Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if path.extension().is_some_and(|e| e == "gz") {
        let mut s = String::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_string(&mut s)
            .expect("gunzip");
        s
    } else {
        String::from_utf8(bytes).expect("utf-8")
    }
}

/// The text of the shared baseline's file `name`.
pub fn baseline_text(name: &str) -> String {
    hlo_file_text(&shared_dir().join("baseline").join(name))
}

/// An example's graph argument: a number of `layer_stack` layers, or an HLO file. Returns a
/// label and the text.
pub fn graph_text(arg: &str) -> (String, String) {
    match arg.parse::<usize>() {
        Ok(layers) => (format!("layer_stack({layers})"), layer_stack(layers)),
        Err(_) => (arg.to_string(), hlo_file_text(std::path::Path::new(arg))),
    }
}

/// About how many instructions [`layer_stack`] emits per layer (entry and reducers).
pub const INSTS_PER_LAYER: usize = 51;

/// HLO text of an unrolled residual MLP + layernorm stack of `layers` layers, in the form JAX
/// emits for `large_layer_stack_*.hlo` in the shared baseline: `h f32[32,256]`, weights sliced
/// from a stacked `f32[16,256,256]`, GELU (tanh form), residual add, layernorm with two
/// reductions (each with its own reducer computation), squeeze/broadcast chains around every
/// bias, mean and scale. About [`INSTS_PER_LAYER`] instructions per layer.
pub fn layer_stack(layers: usize) -> String {
    let mut out = String::with_capacity(layers * INSTS_PER_LAYER * 80);
    out.push_str(
        "HloModule layer_stack, entry_computation_layout={(f32[32,256]{1,0}, f32[16,256,256]{2,1,0}, f32[16,256]{1,0}, f32[256]{0})->f32[32,256]{1,0}}\n",
    );
    for i in 0..2 * layers {
        let _ = write!(
            out,
            "\nregion_{i} {{\n  rga.{i} = f32[] parameter(0)\n  rgb.{i} = f32[] parameter(1)\n  ROOT rgs.{i} = f32[] add(rga.{i}, rgb.{i})\n}}\n"
        );
    }
    out.push_str("\nENTRY main {\n");
    out.push_str("  x = f32[32,256]{1,0} parameter(0)\n");
    out.push_str("  W = f32[16,256,256]{2,1,0} parameter(1)\n");
    out.push_str("  b = f32[16,256]{1,0} parameter(2)\n");
    out.push_str("  g = f32[256]{0} parameter(3)\n");
    out.push_str("  zero = f32[] constant(0)\n");
    for (name, v, shape) in [
        ("c0", "0.044715", "f32[32,256]{1,0}"),
        ("c1", "0.797884583", "f32[32,256]{1,0}"),
        ("c2", "1", "f32[32,256]{1,0}"),
        ("c3", "0.5", "f32[32,256]{1,0}"),
        ("c4", "256", "f32[32,1]{1,0}"),
        ("c5", "1e-05", "f32[32,1]{1,0}"),
    ] {
        let _ = writeln!(out, "  {name}.s = f32[] constant({v})");
        let _ = writeln!(
            out,
            "  {name} = {shape} broadcast({name}.s), dimensions={{}}"
        );
    }
    let m = "f32[32,256]{1,0}";
    let c = "f32[32,1]{1,0}";
    let mut h = String::from("x");
    for i in 0..layers {
        let k = i % 16;
        let l = |s: &str| format!("{s}.{i}");
        let mut e = |line: String| {
            out.push_str("  ");
            out.push_str(&line);
            out.push('\n');
        };
        e(format!(
            "{} = f32[1,256,256]{{2,1,0}} slice(W), slice={{[{k}:{}], [0:256], [0:256]}}",
            l("sw"),
            k + 1
        ));
        e(format!(
            "{} = f32[256,256]{{1,0}} reshape({})",
            l("sq"),
            l("sw")
        ));
        e(format!(
            "{} = {m} dot({h}, {}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}",
            l("dot"),
            l("sq")
        ));
        e(format!(
            "{} = f32[1,256]{{1,0}} slice(b), slice={{[{k}:{}], [0:256]}}",
            l("sb"),
            k + 1
        ));
        e(format!(
            "{} = f32[1,256]{{1,0}} broadcast({}), dimensions={{0,1}}",
            l("b1"),
            l("sb")
        ));
        e(format!("{} = f32[256]{{0}} reshape({})", l("b2"), l("b1")));
        e(format!(
            "{} = {m} broadcast({}), dimensions={{1}}",
            l("b3"),
            l("b2")
        ));
        e(format!("{} = {m} add({}, {})", l("y"), l("dot"), l("b3")));
        e(format!(
            "{} = {m} multiply({}, {})",
            l("p1"),
            l("y"),
            l("y")
        ));
        e(format!(
            "{} = {m} multiply({}, {})",
            l("p2"),
            l("p1"),
            l("y")
        ));
        e(format!("{} = {m} multiply({}, c0)", l("g1"), l("p2")));
        e(format!("{} = {m} add({}, {})", l("g2"), l("y"), l("g1")));
        e(format!("{} = {m} multiply({}, c1)", l("g3"), l("g2")));
        e(format!("{} = {m} tanh({})", l("g4"), l("g3")));
        e(format!("{} = {m} add({}, c2)", l("g5"), l("g4")));
        e(format!("{} = {m} multiply({}, c3)", l("g6"), l("g5")));
        e(format!(
            "{} = {m} multiply({}, {})",
            l("g7"),
            l("y"),
            l("g6")
        ));
        e(format!("{} = {m} add({h}, {})", l("r"), l("g7")));
        e(format!(
            "{} = f32[32]{{0}} reduce({}, zero), dimensions={{1}}, to_apply=region_{}",
            l("s1"),
            l("r"),
            2 * i
        ));
        e(format!("{} = {c} reshape({})", l("s2"), l("s1")));
        e(format!("{} = {c} divide({}, c4)", l("mu"), l("s2")));
        e(format!(
            "{} = {c} broadcast({}), dimensions={{0,1}}",
            l("u1"),
            l("mu")
        ));
        e(format!("{} = f32[32]{{0}} reshape({})", l("u2"), l("u1")));
        e(format!(
            "{} = {m} broadcast({}), dimensions={{0}}",
            l("u3"),
            l("u2")
        ));
        e(format!(
            "{} = {m} subtract({}, {})",
            l("d1"),
            l("r"),
            l("u3")
        ));
        e(format!(
            "{} = {c} broadcast({}), dimensions={{0,1}}",
            l("v1"),
            l("mu")
        ));
        e(format!("{} = f32[32]{{0}} reshape({})", l("v2"), l("v1")));
        e(format!(
            "{} = {m} broadcast({}), dimensions={{0}}",
            l("v3"),
            l("v2")
        ));
        e(format!(
            "{} = {m} subtract({}, {})",
            l("d2"),
            l("r"),
            l("v3")
        ));
        e(format!(
            "{} = {m} multiply({}, {})",
            l("sq2"),
            l("d2"),
            l("d2")
        ));
        e(format!(
            "{} = f32[32]{{0}} reduce({}, zero), dimensions={{1}}, to_apply=region_{}",
            l("s3"),
            l("sq2"),
            2 * i + 1
        ));
        e(format!("{} = {c} reshape({})", l("s4"), l("s3")));
        e(format!("{} = {c} divide({}, c4)", l("var"), l("s4")));
        e(format!("{} = {c} add({}, c5)", l("ve"), l("var")));
        e(format!("{} = {c} rsqrt({})", l("rs"), l("ve")));
        e(format!(
            "{} = {c} broadcast({}), dimensions={{0,1}}",
            l("w1"),
            l("rs")
        ));
        e(format!("{} = f32[32]{{0}} reshape({})", l("w2"), l("w1")));
        e(format!(
            "{} = {m} broadcast({}), dimensions={{0}}",
            l("w3"),
            l("w2")
        ));
        e(format!(
            "{} = {m} multiply({}, {})",
            l("n"),
            l("d1"),
            l("w3")
        ));
        e(format!("{} = f32[1,256]{{1,0}} reshape(g)", l("gg1")));
        e(format!(
            "{} = f32[1,256]{{1,0}} broadcast({}), dimensions={{0,1}}",
            l("gg2"),
            l("gg1")
        ));
        e(format!(
            "{} = f32[256]{{0}} reshape({})",
            l("gg3"),
            l("gg2")
        ));
        e(format!(
            "{} = {m} broadcast({}), dimensions={{1}}",
            l("gg4"),
            l("gg3")
        ));
        e(format!(
            "{} = {m} multiply({}, {})",
            l("h"),
            l("n"),
            l("gg4")
        ));
        h = l("h");
    }
    let _ = writeln!(out, "  ROOT out = {m} copy({h})\n}}");
    out
}

/// A 2-layer MLP built with the builder: `softmax(relu(x @ w1 + b1) @ w2 + b2)` with `x` of
/// `[batch, input]`, hidden width `hidden`, `output` classes (all `f32`); parameters in that
/// order.
pub fn tiny_mlp(
    batch: i64,
    input: i64,
    hidden: i64,
    output: i64,
) -> Result<axle::ir::Module, axle::ir::builder::BuildError> {
    use axle::ir::{ElementType::F32, Shape};
    let mut b = axle::ir::builder::ModuleBuilder::new("tiny_mlp");
    let mut c = b.computation("main");
    let x = c.parameter(0, Shape::array(F32, &[batch, input]), "x")?;
    let w1 = c.parameter(1, Shape::array(F32, &[input, hidden]), "w1")?;
    let b1 = c.parameter(2, Shape::array(F32, &[hidden]), "b1")?;
    let w2 = c.parameter(3, Shape::array(F32, &[hidden, output]), "w2")?;
    let b2 = c.parameter(4, Shape::array(F32, &[output]), "b2")?;
    let h = c.matmul(x, w1)?;
    let h = c.add_broadcast(h, b1)?;
    let h = c.relu(h)?;
    let y = c.matmul(h, w2)?;
    let y = c.add_broadcast(y, b2)?;
    let y = c.softmax(y, -1)?;
    let main = c.finish(y)?;
    b.entry(main);
    b.build()
}

#[cfg(test)]
mod tests {
    #[test]
    fn layer_stack_parses_and_verifies_at_the_expected_size() {
        let m = axle_ir::parse_module(&super::layer_stack(10)).expect("parses");
        axle_ir::verify::verify(&m).expect("verifies");
        let n = m.num_live_insts();
        assert!((10 * super::INSTS_PER_LAYER).abs_diff(n) < 30, "{n}");
    }
}
