//! `axle graph`: the DOT text's structure (fusion clusters coloured by kind, labels with
//! shapes, the neighbourhood of `--around` at each depth, the per-computation summary), SVG and
//! HTML through Graphviz, and clear errors that leave no file behind.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use axle::graph::dot::{kind_colors, to_dot};
use axle::graph::{build_view, GraphOptions, ViewForm};
use axle::ir::{parse_module, FusionKind};

fn axle(args: &[&str], dir: &Path) -> Output {
    axle_env(args, dir, &[])
}

fn axle_env(args: &[&str], dir: &Path, env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_axle"));
    c.args(args).current_dir(dir);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("runs axle")
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// A loop fusion feeding a reduction (input) fusion, and a chain a -> b -> c -> d -> e outside.
const FUSED: &str =
    "HloModule fused, entry_computation_layout={(f32[4,8]{1,0})->(f32[4]{0}, f32[4,8]{1,0})}

add_f32 {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}

loop_body {
  p0 = f32[4,8]{1,0} parameter(0)
  n = f32[4,8]{1,0} negate(p0)
  ROOT ex = f32[4,8]{1,0} exponential(n)
}

reduce_body {
  q0 = f32[4,8]{1,0} parameter(0)
  m = f32[4,8]{1,0} multiply(q0, q0)
  z = f32[] constant(0)
  ROOT r = f32[4]{0} reduce(m, z), dimensions={1}, to_apply=add_f32
}

ENTRY main {
  a = f32[4,8]{1,0} parameter(0)
  b = f32[4,8]{1,0} abs(a)
  c = f32[4,8]{1,0} sqrt(b)
  d = f32[4,8]{1,0} floor(c)
  e = f32[4,8]{1,0} ceil(d)
  lf = f32[4,8]{1,0} fusion(e), kind=kLoop, calls=loop_body
  rf = f32[4]{0} fusion(lf), kind=kInput, calls=reduce_body
  ROOT t = (f32[4]{0}, f32[4,8]{1,0}) tuple(rf, lf)
}
";

/// An unfused softmax row: the `cpu` pipeline fuses it.
const SOFTMAX: &str =
    "HloModule softmax, entry_computation_layout={(f32[4,16]{1,0})->f32[4,16]{1,0}}

max_f32 {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT m = f32[] maximum(x, y)
}

add_f32 {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}

ENTRY main {
  x = f32[4,16]{1,0} parameter(0)
  ninf = f32[] constant(-inf)
  mx = f32[4]{0} reduce(x, ninf), dimensions={1}, to_apply=max_f32
  mb = f32[4,16]{1,0} broadcast(mx), dimensions={0}
  sub = f32[4,16]{1,0} subtract(x, mb)
  ex = f32[4,16]{1,0} exponential(sub)
  zero = f32[] constant(0)
  sm = f32[4]{0} reduce(ex, zero), dimensions={1}, to_apply=add_f32
  sb = f32[4,16]{1,0} broadcast(sm), dimensions={0}
  ROOT out = f32[4,16]{1,0} divide(ex, sb)
}
";

fn setup(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let f = dir.path().join("m.hlo");
    std::fs::write(&f, text).expect("writes");
    (dir, f)
}

/// The node names (first label line) of a DOT text.
fn node_names(dot: &str) -> Vec<String> {
    dot.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            if !l.starts_with('n') || !l.contains(" [label=\"") {
                return None;
            }
            let label = &l[l.find("[label=\"")? + 8..];
            Some(label[..label.find("\\n")?].to_string())
        })
        .collect()
}

fn graph_dot(dir: &Path, f: &Path, extra: &[&str]) -> String {
    let out = dir.join("g.dot");
    let mut args = vec!["graph", f.to_str().unwrap(), "-o", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let o = axle(&args, dir);
    assert!(o.status.success(), "{args:?}: {}", err(&o));
    std::fs::read_to_string(out).expect("the DOT file")
}

#[test]
fn fusions_are_clusters_coloured_by_kind_with_shapes_on_labels() {
    let (dir, f) = setup(FUSED);
    let dot = graph_dot(dir.path(), &f, &[]);
    assert!(dot.starts_with("digraph \"fused\" {"), "{dot}");
    assert_eq!(dot.matches("subgraph cluster_").count(), 2, "{dot}");
    let loop_cluster = dot
        .find("label=\"lf (kLoop) f32[4,8]\"")
        .expect("the loop cluster");
    let input_cluster = dot
        .find("label=\"rf (kInput) f32[4]\"")
        .expect("the input cluster");
    for (at, kind) in [
        (loop_cluster, FusionKind::Loop),
        (input_cluster, FusionKind::Input),
    ] {
        let (fill, line) = kind_colors(kind);
        let style = &dot[at..at + 200];
        assert!(style.contains(fill) && style.contains(line), "{style}");
    }
    // Fused instructions sit inside their cluster, with opcode and shape on the label; the
    // reducer body is not drawn but named.
    let in_loop = &dot[loop_cluster..input_cluster];
    assert!(in_loop.contains("\"n\\nnegate\\nf32[4,8]\""), "{in_loop}");
    assert!(
        dot.contains("\"r\\nreduce\\nf32[4]\\napplies add_f32\""),
        "{dot}"
    );
    let names = node_names(&dot);
    for n in [
        "a", "b", "c", "d", "e", "p0", "n", "ex", "q0", "m", "z", "r", "t",
    ] {
        assert!(names.iter().any(|x| x == n), "{n} missing from {names:?}");
    }
    assert!(
        !names.iter().any(|x| x == "lf" || x == "rf" || x == "x"),
        "{names:?}"
    );
    // `e` feeds the loop fusion's parameter; the loop fusion's root feeds the reduction
    // fusion's parameter and the tuple; the reduction's root feeds the tuple.
    let view = build_view(&parse_module(FUSED).unwrap(), &GraphOptions::default()).unwrap();
    let idx = |name: &str| view.nodes.iter().position(|n| n.name == name).unwrap();
    let has = |a: &str, b: &str| {
        view.edges
            .iter()
            .any(|e| e.from == idx(a) && e.to == idx(b))
    };
    for (a, b) in [
        ("a", "b"),
        ("d", "e"),
        ("e", "p0"),
        ("p0", "n"),
        ("n", "ex"),
        ("ex", "q0"),
        ("ex", "t"),
        ("q0", "m"),
        ("m", "r"),
        ("z", "r"),
        ("r", "t"),
    ] {
        assert!(has(a, b), "no edge {a} -> {b}");
    }
    // 4 chain edges, 2 in the loop body, 4 in the reduction body (m reads q0 twice), 4 across.
    assert_eq!(view.edges.len(), 14);
    assert_eq!(view.edges.len(), dot.matches(" -> ").count());
    assert_eq!(view.form, ViewForm::Full);
    // Deterministic text.
    assert_eq!(to_dot(&view), dot);
}

#[test]
fn around_draws_the_neighbourhood_at_each_depth() {
    let (dir, f) = setup(FUSED);
    let at = |depth: &str| {
        let mut v = node_names(&graph_dot(
            dir.path(),
            &f,
            &["--around", "c", "--depth", depth],
        ));
        v.sort();
        v
    };
    assert_eq!(at("0"), ["c"]);
    assert_eq!(at("1"), ["b", "c", "d"]);
    assert_eq!(at("2"), ["a", "b", "c", "d", "e"]);
    let d3 = graph_dot(dir.path(), &f, &["--around", "c", "--depth", "3"]);
    // Depth 3 reaches into the loop fusion: its cluster appears, holding only p0.
    assert!(
        d3.contains("lf (kLoop)") && !d3.contains("rf (kInput)"),
        "{d3}"
    );
    assert!(node_names(&d3).contains(&"p0".to_string()));
    assert!(d3.contains("around c, depth 3"), "{d3}");
    // Boundary nodes (edges leave the picture) are dashed: p0 at depth 3, not c.
    let p0 = d3.lines().find(|l| l.contains("[label=\"p0\\n")).unwrap();
    assert!(p0.contains("dashed"), "{p0}");
    let c = d3.lines().find(|l| l.contains("[label=\"c\\n")).unwrap();
    assert!(!c.contains("dashed"), "{c}");
    // Around a fusion: all of its body, plus what is next to it.
    let lf = node_names(&graph_dot(
        dir.path(),
        &f,
        &["--around", "lf", "--depth", "1"],
    ));
    for n in ["p0", "n", "ex", "e", "q0", "t"] {
        assert!(lf.iter().any(|x| x == n), "{n} missing from {lf:?}");
    }
    assert!(!lf.iter().any(|x| x == "d"), "{lf:?}");
}

#[test]
fn pipeline_fuses_before_drawing_and_large_modules_get_a_summary() {
    let (dir, f) = setup(SOFTMAX);
    let plain = graph_dot(dir.path(), &f, &[]);
    assert!(!plain.contains("subgraph cluster_"), "{plain}");
    let fused = graph_dot(dir.path(), &f, &["--passes", "cpu"]);
    assert!(fused.contains("subgraph cluster_"), "{fused}");
    assert!(
        fused.contains("(kInput)") || fused.contains("(kLoop)"),
        "{fused}"
    );
    let summary = graph_dot(dir.path(), &f, &["--max-nodes", "3"]);
    assert!(
        summary.contains("per-computation summary (10 instructions to draw"),
        "{summary}"
    );
    assert_eq!(node_names(&summary), ["main"]);
    assert!(
        summary.contains("10 instructions, 0 of them fused"),
        "{summary}"
    );
    let fused_summary = graph_dot(dir.path(), &f, &["--passes", "cpu", "--max-nodes", "3"]);
    assert!(fused_summary.contains("fusions: "), "{fused_summary}");
}

#[test]
fn svg_and_html_come_from_graphviz() {
    let (dir, f) = setup(FUSED);
    let svg = dir.path().join("g.svg");
    let o = axle(
        &["graph", f.to_str().unwrap(), "-o", svg.to_str().unwrap()],
        dir.path(),
    );
    assert!(o.status.success(), "{}", err(&o));
    let text = std::fs::read_to_string(&svg).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&svg).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            mode, 0o644,
            "the output is not private like a temporary file"
        );
    }
    assert!(text.contains("<svg") && text.contains("cluster_0") && text.contains(">negate<"));
    let html = dir.path().join("g.html");
    let o = axle(
        &[
            "graph",
            f.to_str().unwrap(),
            "-o",
            html.to_str().unwrap(),
            "--passes",
            "cpu",
        ],
        dir.path(),
    );
    assert!(o.status.success(), "{}", err(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.contains("<svg") && page.contains("id=\"graph\"") && page.contains("<script>"));
    assert!(!page.contains("<?xml") && !page.contains(" src=") && !page.contains("<link"));
}

#[test]
fn errors_are_clear_and_leave_no_file() {
    let (dir, f) = setup(FUSED);
    let d = dir.path();
    let fs = f.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str, &str)> = vec![
        (
            vec!["graph", fs, "-o", "g.png"],
            "g.png",
            "the extension '.png'",
        ),
        (
            vec!["graph", fs, "-o", "g"],
            "g",
            "a name without an extension",
        ),
        (
            vec!["graph", fs, "-o", "g.dot", "--around", "nope"],
            "g.dot",
            "no instruction named 'nope'",
        ),
        (
            vec!["graph", fs, "-o", "g.dot", "--around", "x"],
            "g.dot",
            "applied by another instruction",
        ),
        (
            vec!["graph", fs, "-o", "g.dot", "--passes", "nosuchpass"],
            "g.dot",
            "unknown pass 'nosuchpass'",
        ),
        (
            vec!["graph", fs, "-o", "g.svg", "--layout-timeout", "0"],
            "g.svg",
            "--layout-timeout must be a positive number",
        ),
        (
            vec!["graph", "missing.hlo", "-o", "g.svg"],
            "g.svg",
            "missing.hlo: error: cannot read file",
        ),
    ];
    for (args, out, want) in cases {
        let o = axle(&args, d);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(o.stdout.is_empty(), "{args:?} printed to stdout");
        assert!(err(&o).contains(want), "{args:?}:\n{}", err(&o));
        assert!(!d.join(out).exists(), "{args:?} left {out}");
    }
    // No Graphviz: a clear error, and the SVG and an existing HTML file are left alone.
    std::fs::write(d.join("old.html"), "old").unwrap();
    for out in ["g.svg", "old.html"] {
        let o = axle_env(
            &["graph", fs, "-o", out],
            d,
            &[("AXLE_DOT", "/nonexistent/dot")],
        );
        assert!(!o.status.success());
        assert!(err(&o).contains("cannot run Graphviz"), "{}", err(&o));
    }
    // A layout that takes too long is stopped: a clear error, nothing written.
    let slow = d.join("slow-dot");
    std::fs::write(&slow, "#!/bin/sh\nexec sleep 30\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&slow, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let t0 = std::time::Instant::now();
    let o = axle_env(
        &["graph", fs, "-o", "g.svg", "--layout-timeout", "0.3"],
        d,
        &[("AXLE_DOT", slow.to_str().unwrap())],
    );
    assert!(!o.status.success());
    assert!(err(&o).contains("within 0.3 s"), "{}", err(&o));
    assert!(t0.elapsed().as_secs() < 20, "the layout was not stopped");
    std::fs::remove_file(&slow).unwrap();
    assert!(!d.join("g.svg").exists());
    assert_eq!(std::fs::read_to_string(d.join("old.html")).unwrap(), "old");
    let left: Vec<_> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 2, "temporary files left behind: {left:?}");
    // A parse error points at the line.
    std::fs::write(
        d.join("bad.hlo"),
        "HloModule m\n\nENTRY main {\n  x = f32[ parameter(0)\n}\n",
    )
    .unwrap();
    let o = axle(&["graph", "bad.hlo", "-o", "g.dot"], d);
    assert!(!o.status.success());
    assert!(err(&o).contains("bad.hlo:4:"), "{}", err(&o));
    assert!(!d.join("g.dot").exists());
}
