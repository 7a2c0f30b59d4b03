//! Graphviz DOT text of a [`GraphView`].
//!
//! Nodes are `nK` (K its index in the view) with a `label` of the name and the view's lines
//! and a `tooltip` of the name; clusters are `subgraph cluster_K`, nested as the view nests
//! them, filled and outlined in their fusion kind's colour ([`kind_colors`]); parameters are
//! yellow, constants grey, expensive ops bold, roots double-bordered and neighbourhood
//! boundaries dashed. A legend of the fusion colours is the graph's label. The text depends
//! only on the view, so the same module gives byte-identical output.

use std::fmt::Write as _;

use axle_ir::FusionKind;

use super::{ClusterKind, GraphView, NodeKind, ViewForm};

/// The fill and outline colours of a fusion kind's cluster.
pub fn kind_colors(k: FusionKind) -> (&'static str, &'static str) {
    match k {
        FusionKind::Loop => ("#dbeafe", "#2563eb"),
        FusionKind::Input => ("#dcfce7", "#16a34a"),
        FusionKind::Output => ("#ffedd5", "#ea580c"),
        FusionKind::Custom => ("#f3e8ff", "#9333ea"),
    }
}

/// Every fusion kind, in legend order.
const KINDS: [FusionKind; 4] = [
    FusionKind::Loop,
    FusionKind::Input,
    FusionKind::Output,
    FusionKind::Custom,
];

/// `s` as a DOT quoted string (quotes and backslashes escaped; newlines become `\n`).
fn quoted(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// `s` escaped for a DOT HTML-like label.
fn html_escaped(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The graph's title line.
fn title(view: &GraphView) -> String {
    match &view.form {
        ViewForm::Full => format!("module {}", view.title),
        ViewForm::Around {
            name,
            depth,
            truncated,
        } => format!(
            "module {}: around {name}, depth {depth}{}",
            view.title,
            if *truncated {
                " (cut at the node limit)"
            } else {
                ""
            }
        ),
        ViewForm::Summary { full_nodes } => format!(
            "module {}: per-computation summary ({full_nodes} instructions to draw; use --around NAME)",
            view.title
        ),
    }
}

/// The DOT text of `view`.
pub fn to_dot(view: &GraphView) -> String {
    let mut o = String::with_capacity(256 + view.nodes.len() * 96 + view.edges.len() * 16);
    let _ = writeln!(o, "digraph {} {{", quoted(&view.title));
    let mut legend = String::new();
    for k in KINDS {
        let (fill, line) = kind_colors(k);
        let _ = write!(
            legend,
            "<td bgcolor=\"{fill}\" color=\"{line}\" border=\"1\">{}</td>",
            k.name()
        );
    }
    let _ = writeln!(
        o,
        "  graph [fontname=\"Helvetica\", fontsize=11, labelloc=t, labeljust=l, \
         nodesep=0.25, ranksep=0.35, label=<<table border=\"0\" cellspacing=\"4\"><tr>\
         <td>{}</td>{legend}</tr></table>>];",
        html_escaped(&title(view))
    );
    o.push_str(
        "  node [shape=box, style=\"rounded,filled\", fillcolor=white, fontname=\"Helvetica\", \
         fontsize=10, margin=\"0.08,0.03\", height=0.3];\n",
    );
    o.push_str("  edge [color=\"#555555\", arrowsize=0.6];\n");
    // Children of every cluster, and the nodes directly in each cluster, in index order.
    let mut child_clusters: Vec<Vec<usize>> = vec![Vec::new(); view.clusters.len()];
    let mut top_clusters = Vec::new();
    for (k, c) in view.clusters.iter().enumerate() {
        match c.parent {
            Some(p) => child_clusters[p].push(k),
            None => top_clusters.push(k),
        }
    }
    let mut cluster_nodes: Vec<Vec<usize>> = vec![Vec::new(); view.clusters.len()];
    let mut top_nodes = Vec::new();
    for (k, n) in view.nodes.iter().enumerate() {
        match n.cluster {
            Some(c) => cluster_nodes[c].push(k),
            None => top_nodes.push(k),
        }
    }
    for &k in &top_nodes {
        write_node(&mut o, view, k, 1);
    }
    // Clusters, depth first, with an explicit stack (fusions may nest deeply).
    enum Step {
        Open(usize, usize),
        Close(usize),
    }
    let mut stack: Vec<Step> = top_clusters
        .iter()
        .rev()
        .map(|&k| Step::Open(k, 1))
        .collect();
    while let Some(step) = stack.pop() {
        match step {
            Step::Open(k, depth) => {
                let pad = "  ".repeat(depth);
                let c = &view.clusters[k];
                let _ = writeln!(o, "{pad}subgraph cluster_{k} {{");
                let _ = writeln!(o, "{pad}  label={};", quoted(&c.label));
                match c.kind {
                    ClusterKind::Fusion(kind) => {
                        let (fill, line) = kind_colors(kind);
                        let _ = writeln!(
                            o,
                            "{pad}  style=\"filled,rounded\"; fillcolor=\"{fill}\"; \
                             color=\"{line}\"; penwidth=1.5; fontsize=10;"
                        );
                    }
                    ClusterKind::Computation => {
                        let _ = writeln!(
                            o,
                            "{pad}  style=\"dashed,rounded\"; color=\"#888888\"; fontsize=12;"
                        );
                    }
                }
                for &n in &cluster_nodes[k] {
                    write_node(&mut o, view, n, depth + 1);
                }
                stack.push(Step::Close(depth));
                for &ch in child_clusters[k].iter().rev() {
                    stack.push(Step::Open(ch, depth + 1));
                }
            }
            Step::Close(depth) => {
                let _ = writeln!(o, "{}}}", "  ".repeat(depth));
            }
        }
    }
    for e in &view.edges {
        match &e.label {
            Some(l) => {
                let _ = writeln!(o, "  n{} -> n{} [label={}];", e.from, e.to, quoted(l));
            }
            None => {
                let _ = writeln!(o, "  n{} -> n{};", e.from, e.to);
            }
        }
    }
    o.push_str("}\n");
    o
}

fn write_node(o: &mut String, view: &GraphView, k: usize, depth: usize) {
    let n = &view.nodes[k];
    let mut label = n.name.clone();
    for l in &n.lines {
        label.push('\n');
        label.push_str(l);
    }
    let mut style = vec!["rounded", "filled"];
    let mut extra = String::new();
    match n.kind {
        NodeKind::Parameter => extra.push_str(", fillcolor=\"#fef9c3\""),
        NodeKind::Constant => extra.push_str(", fillcolor=\"#e5e7eb\""),
        NodeKind::Heavy => {
            style.push("bold");
            extra.push_str(", fillcolor=\"#fee2e2\"");
        }
        NodeKind::Computation => extra.push_str(", fontsize=11"),
        NodeKind::Op => {}
    }
    if n.root {
        extra.push_str(", peripheries=2");
    }
    if n.boundary {
        style.push("dashed");
    }
    let _ = writeln!(
        o,
        "{}n{k} [label={}, tooltip={}, style=\"{}\"{extra}];",
        "  ".repeat(depth),
        quoted(&label),
        quoted(&n.name),
        style.join(",")
    );
}
