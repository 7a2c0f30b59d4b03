//! `axle graph`: a module as a picture, with every fusion drawn as a cluster coloured by its
//! kind.
//!
//! This file owns the view model, [`GraphView`]: the nodes, clusters and edges to draw, built
//! from a module in one of three forms.
//! - **Full**: every instruction of every computation that runs as a program (the entry, and
//!   the bodies, conditions, branches and callees of `while`, `conditional` and `call`) is a
//!   node labelled with its name, opcode and shape. A `fusion` is not a node: its fused
//!   computation is drawn inside it as a cluster (nested fusions nest), the fusion's operand `k`
//!   feeds the fused `parameter(k)` and the fusion's users read the fused root. Scalar
//!   computations applied by other instructions (reducers, comparators) are not drawn; their
//!   caller's label names them.
//! - **Neighbourhood** (`--around NAME --depth K`): the full view restricted to the nodes at
//!   most `K` edges (either direction) from `NAME`, which may be an instruction or a fusion
//!   (then every node of its cluster starts the search). Nodes with edges leaving the selection
//!   are marked as the boundary. The selection stops growing at `max_nodes`, breadth first.
//! - **Summary**: when the full view would have more than `max_nodes` nodes, one node per drawn
//!   computation with its instruction count, fusions per kind and most frequent opcodes, and
//!   one edge per call between them.
//!
//! Invariants: node, cluster and edge order follow instruction and computation ids, so the same
//! module gives the same view (and the same DOT text) every time; every edge joins two nodes of
//! the view; a cluster's parent comes before it. Building is linear in the module (one sweep over
//! the parent column, one over the operands); a neighbourhood is one breadth-first search.
//!
//! The renderers live beside this file: [`dot`] writes Graphviz text, [`render`] turns it into
//! SVG through Graphviz and writes the output file, [`html`] wraps the SVG into a self-contained
//! page. Writing files ([`render`]) and the command ([`cli`]) come with the `cli` feature; the
//! library alone builds the view, the DOT text and the page.

#[cfg(feature = "cli")]
pub mod cli;
pub mod dot;
pub mod html;
#[cfg(feature = "cli")]
pub mod render;

use std::collections::VecDeque;
use std::fmt::Write as _;

use axle_ir::entity::{dense_map, SecondaryMap};
use axle_ir::printer::{write_shape, InstNames};
use axle_ir::{AttrKey, AttrValue, CompId, FusionKind, InstId, InstsByComp, Module, Opcode};

#[cfg(feature = "cli")]
pub use render::{write_graph, GraphFormat, GraphReport};

/// What to draw.
#[derive(Clone, Debug)]
pub struct GraphOptions {
    /// Draw only the neighbourhood of this instruction (or fusion).
    pub around: Option<String>,
    /// The neighbourhood's radius in edges.
    pub depth: usize,
    /// The most nodes drawn one per instruction; a larger module gets a per-computation summary
    /// and a larger neighbourhood is cut there.
    pub max_nodes: usize,
}

impl Default for GraphOptions {
    fn default() -> Self {
        GraphOptions {
            around: None,
            depth: 3,
            max_nodes: DEFAULT_MAX_NODES,
        }
    }
}

/// The default of [`GraphOptions::max_nodes`]. Graphviz lays out the baseline's 1k-instruction
/// graphs in 0.5 to 47 s on this project's machine and the 10k ones in minutes (see
/// `docs/graph.md`), so larger modules get the summary unless asked otherwise.
pub const DEFAULT_MAX_NODES: usize = 1500;

/// How a node is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// A parameter of a computation (or of a fused computation).
    Parameter,
    /// A constant or iota.
    Constant,
    /// An expensive operation: reduce, dot, convolution, sort, custom call.
    Heavy,
    /// Any other instruction.
    Op,
    /// A computation in the summary.
    Computation,
}

/// One node to draw.
#[derive(Clone, Debug)]
pub struct Node {
    /// The instruction's (or computation's) name.
    pub name: String,
    /// The label lines after the name: opcode, shape, ...
    pub lines: Vec<String>,
    /// How to draw it.
    pub kind: NodeKind,
    /// The innermost cluster holding it.
    pub cluster: Option<usize>,
    /// Whether the node has edges to nodes left out of a neighbourhood.
    pub boundary: bool,
    /// Whether it is the root of its computation.
    pub root: bool,
}

/// What a cluster stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterKind {
    /// A fused computation, by its fusion's kind.
    Fusion(FusionKind),
    /// A computation drawn beside the entry (a `while` body, a branch, a callee).
    Computation,
}

/// A cluster of nodes.
#[derive(Clone, Debug)]
pub struct Cluster {
    /// The label: the fusion's name and kind, or the computation's name.
    pub label: String,
    /// What it stands for.
    pub kind: ClusterKind,
    /// The enclosing cluster (always an earlier index).
    pub parent: Option<usize>,
}

/// An edge between two nodes (indices into [`GraphView::nodes`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edge {
    /// The producer.
    pub from: usize,
    /// The consumer.
    pub to: usize,
    /// A label, in summaries (how one computation calls another).
    pub label: Option<String>,
}

/// Which form a view has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ViewForm {
    /// Every drawn instruction.
    Full,
    /// The neighbourhood of an instruction.
    Around {
        /// Where it starts.
        name: String,
        /// Its radius.
        depth: usize,
        /// Whether `max_nodes` cut it.
        truncated: bool,
    },
    /// One node per computation, because the full view has this many nodes.
    Summary {
        /// Nodes the full view would have.
        full_nodes: usize,
    },
}

/// What to draw: nodes, clusters and edges.
#[derive(Clone, Debug)]
pub struct GraphView {
    /// The module's name.
    pub title: String,
    /// Which form this is.
    pub form: ViewForm,
    /// The nodes.
    pub nodes: Vec<Node>,
    /// The clusters.
    pub clusters: Vec<Cluster>,
    /// The edges.
    pub edges: Vec<Edge>,
}

/// Why a view could not be built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GraphError(pub String);

impl std::fmt::Display for GraphError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for GraphError {}

/// The kind of a `fusion` instruction.
fn fusion_kind(m: &Module, i: InstId) -> FusionKind {
    match m.attr(i, &AttrKey::Kind) {
        Some(AttrValue::FusionKind(k)) => *k,
        _ => FusionKind::Loop,
    }
}

/// How a computation is reached from its caller.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Drawn as a program of its own (the entry, control flow, calls).
    Program,
    /// Drawn inside its fusion.
    Fused,
    /// Applied per element by its caller (reducers, comparators): not drawn.
    Applied,
}

/// The role of each computation (`None`: not reached from the entry).
type Roles = SecondaryMap<CompId, Option<Role>>;

/// Whether `op` runs its called computations as programs of their own.
fn calls_programs(op: Opcode) -> bool {
    matches!(
        op,
        Opcode::While | Opcode::Conditional | Opcode::Call | Opcode::AsyncStart
    )
}

/// The role of every computation, from the entry down (the first caller seen decides).
fn roles(m: &Module, by_comp: &InstsByComp) -> Roles {
    let mut role: Roles = dense_map(m.comp_capacity(), None);
    if m.entry().is_none() {
        return role;
    }
    role[m.entry()] = Some(Role::Program);
    let mut stack = vec![m.entry()];
    while let Some(c) = stack.pop() {
        for &i in &by_comp[c] {
            let op = m.opcode(i);
            for callee in m.called_comps_iter(i) {
                if callee.is_none() || callee.index() >= m.comp_capacity() || role[callee].is_some()
                {
                    continue;
                }
                role[callee] = Some(if op == Opcode::Fusion {
                    Role::Fused
                } else if calls_programs(op) {
                    Role::Program
                } else {
                    Role::Applied
                });
                stack.push(callee);
            }
        }
    }
    role
}

/// The shape without its layout, cut to a readable length.
fn short_shape(m: &Module, i: InstId) -> String {
    let mut s = String::new();
    write_shape(m, &mut s, m.shape_id(i), m.no_layout());
    if s.chars().count() > 60 {
        let cut: String = s.chars().take(57).collect();
        s = format!("{cut}...");
    }
    s
}

fn node_kind(op: Opcode) -> NodeKind {
    match op {
        Opcode::Parameter => NodeKind::Parameter,
        Opcode::Constant | Opcode::Iota => NodeKind::Constant,
        Opcode::Reduce
        | Opcode::ReduceWindow
        | Opcode::Dot
        | Opcode::Convolution
        | Opcode::Sort
        | Opcode::CustomCall
        | Opcode::Scatter => NodeKind::Heavy,
        _ => NodeKind::Op,
    }
}

/// Builds the full view: every instruction of every drawn computation.
struct FullBuilder<'m> {
    m: &'m Module,
    names: &'m InstNames,
    by_comp: InstsByComp,
    /// Node index per instruction (`usize::MAX`: none, e.g. a fusion instruction).
    node_of: SecondaryMap<InstId, usize>,
    /// Cluster index per fusion instruction (`usize::MAX` for every other instruction).
    cluster_of: SecondaryMap<InstId, usize>,
    view: GraphView,
}

impl<'m> FullBuilder<'m> {
    /// Adds the nodes of computation `c` (and, recursively, its fusions) inside `cluster`.
    fn add_comp(&mut self, c: CompId, cluster: Option<usize>) {
        let m = self.m;
        let root = m.root(c);
        let insts = std::mem::take(&mut self.by_comp[c]);
        for &i in &insts {
            let op = m.opcode(i);
            if op == Opcode::Fusion {
                if let Some(body) = m.comp_attr(i, &AttrKey::Calls) {
                    let kind = fusion_kind(m, i);
                    let k = self.view.clusters.len();
                    self.cluster_of[i] = k;
                    self.view.clusters.push(Cluster {
                        label: format!(
                            "{} ({}) {}",
                            self.names.get(m, i),
                            kind.name(),
                            short_shape(m, i)
                        ),
                        kind: ClusterKind::Fusion(kind),
                        parent: cluster,
                    });
                    self.add_comp(body, Some(k));
                    continue;
                }
            }
            let mut lines = vec![match (op, m.parameter_number(i)) {
                (Opcode::Parameter, Some(k)) => format!("parameter({k})"),
                _ => op.name().to_string(),
            }];
            lines.push(short_shape(m, i));
            if !calls_programs(op) {
                if let Some(callee) = m.called_comps_iter(i).next() {
                    lines.push(format!("applies {}", m.comp_name(callee)));
                }
            }
            self.node_of[i] = self.view.nodes.len();
            self.view.nodes.push(Node {
                name: self.names.get(m, i).to_string(),
                lines,
                kind: node_kind(op),
                cluster,
                boundary: false,
                root: i == root,
            });
        }
        self.by_comp[c] = insts;
    }

    /// The node that stands for the value of `i`: the fused root for a fusion.
    fn value_node(&self, mut i: InstId) -> usize {
        while self.node_of[i] == usize::MAX && self.m.opcode(i) == Opcode::Fusion {
            match self.m.comp_attr(i, &AttrKey::Calls) {
                Some(body) => i = self.m.root(body),
                None => break,
            }
        }
        self.node_of[i]
    }

    /// Adds the operand edges of computation `c` and of its fusions.
    fn add_edges(&mut self, c: CompId) {
        let m = self.m;
        for &i in &self.by_comp[c] {
            let target: Vec<usize> = match (m.opcode(i), m.comp_attr(i, &AttrKey::Calls)) {
                (Opcode::Fusion, Some(body)) => {
                    // Operand k feeds the fused parameter k.
                    let mut params = vec![usize::MAX; m.operands(i).len()];
                    for &p in &self.by_comp[body] {
                        if let Some(k) = m.parameter_number(p) {
                            if let Some(slot) = params.get_mut(k as usize) {
                                *slot = self.node_of[p];
                            }
                        }
                    }
                    params
                }
                _ => vec![self.node_of[i]; m.operands(i).len()],
            };
            for (&o, &to) in m.operands(i).iter().zip(&target) {
                let from = self.value_node(o);
                if from != usize::MAX && to != usize::MAX {
                    self.view.edges.push(Edge {
                        from,
                        to,
                        label: None,
                    });
                }
            }
        }
    }
}

/// The nodes the full view of `m` would have (instructions of drawn and fused computations,
/// fusion instructions aside).
fn full_node_count(m: &Module, by_comp: &InstsByComp, roles: &Roles) -> usize {
    by_comp
        .iter()
        .filter(|&(c, _)| matches!(roles[c], Some(Role::Program | Role::Fused)))
        .map(|(_, insts)| {
            insts
                .iter()
                .filter(|&&i| m.opcode(i) != Opcode::Fusion)
                .count()
        })
        .sum()
}

/// The full view of `m`.
pub fn full_view(m: &Module) -> GraphView {
    let by_comp = m.insts_by_comp();
    let roles = roles(m, &by_comp);
    let names = InstNames::new(m);
    full_view_with(m, &names, by_comp, &roles).view
}

/// Builds the full view; the builder keeps the instruction-to-node and fusion-to-cluster maps.
fn full_view_with<'m>(
    m: &'m Module,
    names: &'m InstNames,
    by_comp: InstsByComp,
    roles: &Roles,
) -> FullBuilder<'m> {
    let programs: Vec<CompId> = m
        .computations()
        .into_iter()
        .filter(|&c| roles[c] == Some(Role::Program))
        .collect();
    let mut b = FullBuilder {
        m,
        names,
        by_comp,
        node_of: dense_map(m.inst_capacity(), usize::MAX),
        cluster_of: dense_map(m.inst_capacity(), usize::MAX),
        view: GraphView {
            title: m.name.clone(),
            form: ViewForm::Full,
            nodes: Vec::new(),
            clusters: Vec::new(),
            edges: Vec::new(),
        },
    };
    // With one program the entry needs no frame; with several, each gets a cluster.
    let framed = programs.len() > 1;
    for &c in &programs {
        let cluster = framed.then(|| {
            b.view.clusters.push(Cluster {
                label: m.comp_name(c).to_string(),
                kind: ClusterKind::Computation,
                parent: None,
            });
            b.view.clusters.len() - 1
        });
        b.add_comp(c, cluster);
    }
    for c in m.computations() {
        if matches!(roles[c], Some(Role::Program | Role::Fused)) {
            b.add_edges(c);
        }
    }
    b
}

/// The per-computation summary of `m`, whose full view has `full_nodes` nodes.
fn summary_view(
    m: &Module,
    names: &InstNames,
    by_comp: &InstsByComp,
    roles: &Roles,
    full_nodes: usize,
) -> GraphView {
    let mut view = GraphView {
        title: m.name.clone(),
        form: ViewForm::Summary { full_nodes },
        nodes: Vec::new(),
        clusters: Vec::new(),
        edges: Vec::new(),
    };
    let mut node_of: SecondaryMap<CompId, usize> = dense_map(m.comp_capacity(), usize::MAX);
    let programs: Vec<CompId> = m
        .computations()
        .into_iter()
        .filter(|&c| roles[c] == Some(Role::Program))
        .collect();
    for &c in &programs {
        // Count this computation's instructions and those of its fusions, nested ones too.
        let mut per_op = vec![0usize; Opcode::ALL.len()];
        let mut fusions = [0usize; 4];
        let mut fused = 0usize;
        let mut stack = vec![(c, false)];
        while let Some((k, inside)) = stack.pop() {
            for &i in &by_comp[k] {
                let op = m.opcode(i);
                if op == Opcode::Fusion {
                    fusions[fusion_kind(m, i) as usize] += 1;
                    if let Some(body) = m.comp_attr(i, &AttrKey::Calls) {
                        stack.push((body, true));
                    }
                    continue;
                }
                per_op[op as usize] += 1;
                fused += inside as usize;
            }
        }
        let total: usize = per_op.iter().sum();
        let mut lines = vec![format!("{total} instructions, {fused} of them fused")];
        let kinds = [
            FusionKind::Loop,
            FusionKind::Input,
            FusionKind::Output,
            FusionKind::Custom,
        ];
        let fusion_text: Vec<String> = kinds
            .iter()
            .filter(|&&k| fusions[k as usize] > 0)
            .map(|&k| format!("{} {}", fusions[k as usize], k.name()))
            .collect();
        if !fusion_text.is_empty() {
            lines.push(format!("fusions: {}", fusion_text.join(", ")));
        }
        let mut ops: Vec<(usize, Opcode)> = Opcode::ALL
            .iter()
            .map(|&o| (per_op[o as usize], o))
            .filter(|(n, _)| *n > 0)
            .collect();
        ops.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut top = String::new();
        for (k, (n, o)) in ops.iter().take(4).enumerate() {
            let _ = write!(top, "{}{} {n}", if k > 0 { ", " } else { "" }, o.name());
        }
        lines.push(top);
        node_of[c] = view.nodes.len();
        view.nodes.push(Node {
            name: m.comp_name(c).to_string(),
            lines,
            kind: NodeKind::Computation,
            cluster: None,
            boundary: false,
            root: c == m.entry(),
        });
    }
    for &c in &programs {
        for &i in &by_comp[c] {
            let op = m.opcode(i);
            if !calls_programs(op) {
                continue;
            }
            for callee in m.called_comps_iter(i) {
                let to = node_of[callee];
                if to != usize::MAX {
                    view.edges.push(Edge {
                        from: node_of[c],
                        to,
                        label: Some(format!("{} {}", op.name(), names.get(m, i))),
                    });
                }
            }
        }
    }
    view
}

/// Restricts `full` to the nodes at most `depth` edges from the nodes `start`.
fn neighbourhood(
    full: GraphView,
    start: &[usize],
    name: &str,
    depth: usize,
    max_nodes: usize,
) -> GraphView {
    let n = full.nodes.len();
    let mut adj: Vec<Vec<usize>> = vec![Vec::new(); n];
    for e in &full.edges {
        adj[e.from].push(e.to);
        adj[e.to].push(e.from);
    }
    let mut dist = vec![usize::MAX; n];
    let mut queue = VecDeque::new();
    let mut taken = 0usize;
    let mut truncated = false;
    for &s in start {
        if taken == max_nodes.max(1) {
            truncated = true;
            break;
        }
        dist[s] = 0;
        taken += 1;
        queue.push_back(s);
    }
    'search: while let Some(x) = queue.pop_front() {
        if dist[x] == depth {
            continue;
        }
        for &y in &adj[x] {
            if dist[y] == usize::MAX {
                if taken == max_nodes.max(1) {
                    truncated = true;
                    break 'search;
                }
                dist[y] = dist[x] + 1;
                taken += 1;
                queue.push_back(y);
            }
        }
    }
    let keep: Vec<bool> = dist.iter().map(|&d| d != usize::MAX).collect();
    // Renumber nodes, keep the clusters that still hold a node (and their parents).
    let mut new_index = vec![usize::MAX; n];
    let mut cluster_used = vec![false; full.clusters.len()];
    let mut nodes = Vec::new();
    for (k, mut node) in full.nodes.into_iter().enumerate() {
        if !keep[k] {
            continue;
        }
        node.boundary = adj[k].iter().any(|&y| !keep[y]);
        let mut c = node.cluster;
        while let Some(ci) = c {
            cluster_used[ci] = true;
            c = full.clusters[ci].parent;
        }
        new_index[k] = nodes.len();
        nodes.push(node);
    }
    let mut cluster_index = vec![usize::MAX; full.clusters.len()];
    let mut clusters = Vec::new();
    for (k, mut cl) in full.clusters.into_iter().enumerate() {
        if !cluster_used[k] {
            continue;
        }
        cl.parent = cl.parent.map(|p| cluster_index[p]);
        cluster_index[k] = clusters.len();
        clusters.push(cl);
    }
    for node in &mut nodes {
        node.cluster = node.cluster.map(|c| cluster_index[c]);
    }
    let edges = full
        .edges
        .into_iter()
        .filter(|e| keep[e.from] && keep[e.to])
        .map(|e| Edge {
            from: new_index[e.from],
            to: new_index[e.to],
            label: e.label,
        })
        .collect();
    GraphView {
        title: full.title,
        form: ViewForm::Around {
            name: name.to_string(),
            depth,
            truncated,
        },
        nodes,
        clusters,
        edges,
    }
}

/// The view of `m` that `opts` asks for: the neighbourhood of `opts.around`, else the full
/// view, else (when that has more than `opts.max_nodes` nodes) the per-computation summary.
pub fn build_view(m: &Module, opts: &GraphOptions) -> Result<GraphView, GraphError> {
    let by_comp = m.insts_by_comp();
    let roles = roles(m, &by_comp);
    let names = InstNames::new(m);
    let Some(name) = &opts.around else {
        let count = full_node_count(m, &by_comp, &roles);
        if count > opts.max_nodes {
            return Ok(summary_view(m, &names, &by_comp, &roles, count));
        }
        return Ok(full_view_with(m, &names, by_comp, &roles).view);
    };
    let target = m
        .live_ids()
        .into_iter()
        .find(|&i| names.get(m, i) == name.as_str())
        .ok_or_else(|| GraphError(format!("--around: no instruction named '{name}'")))?;
    match roles[m.parent(target)] {
        Some(Role::Program | Role::Fused) => {}
        _ => {
            return Err(GraphError(format!(
                "--around: '{name}' is in computation '{}', which is applied by another \
                 instruction and not drawn",
                m.comp_name(m.parent(target))
            )))
        }
    }
    let built = full_view_with(m, &names, by_comp, &roles);
    let start: Vec<usize> = if built.cluster_of[target] != usize::MAX {
        // Every node inside the fusion's cluster (nested clusters included) starts the search.
        let k = built.cluster_of[target];
        let clusters = &built.view.clusters;
        let inside = |mut c: Option<usize>| {
            while let Some(ci) = c {
                if ci == k {
                    return true;
                }
                c = clusters[ci].parent;
            }
            false
        };
        (0..built.view.nodes.len())
            .filter(|&x| inside(built.view.nodes[x].cluster))
            .collect()
    } else {
        vec![built.node_of[target]]
    };
    if start.is_empty() || start.contains(&usize::MAX) {
        return Err(GraphError(format!("--around: '{name}' is not drawn")));
    }
    let full = built.view;
    Ok(neighbourhood(
        full,
        &start,
        name,
        opts.depth,
        opts.max_nodes,
    ))
}
