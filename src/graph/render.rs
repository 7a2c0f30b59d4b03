//! The output of `axle graph`: the format chosen by the output file's extension, SVG laid out
//! by Graphviz's `dot`, and a write that leaves either the whole file or nothing.
//!
//! `.dot` (or `.gv`) is the text of [`super::dot::to_dot`]; `.svg` is that text laid out by
//! `dot -Tsvg` (the program named by `AXLE_DOT`, default `dot` on the `PATH`; `make deps`
//! installs Debian's `graphviz`); `.html` is the SVG inside the page of [`super::html`].
//! Everything is rendered in memory first and then written to a temporary file beside the
//! output, renamed over it at the end, so an error (no Graphviz, a failed layout, an
//! unwritable directory) never leaves a partial file.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{GraphError, GraphView, ViewForm};

/// An output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphFormat {
    /// Graphviz text.
    Dot,
    /// SVG laid out by Graphviz.
    Svg,
    /// A self-contained HTML page around the SVG, with pan, zoom and search.
    Html,
}

impl GraphFormat {
    /// The format for an output path, by its extension.
    pub fn from_path(path: &Path) -> Result<GraphFormat, GraphError> {
        let ext = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase());
        match ext.as_deref() {
            Some("dot" | "gv") => Ok(GraphFormat::Dot),
            Some("svg") => Ok(GraphFormat::Svg),
            Some("html" | "htm") => Ok(GraphFormat::Html),
            other => Err(GraphError(format!(
                "{}: error: cannot tell the output format from {}; name the file .svg, .dot or \
                 .html",
                path.display(),
                match other {
                    Some(e) => format!("the extension '.{e}'"),
                    None => "a name without an extension".into(),
                }
            ))),
        }
    }
}

/// What [`write_graph`] wrote.
#[derive(Clone, Debug)]
pub struct GraphReport {
    /// The view's form.
    pub form: ViewForm,
    /// Nodes drawn.
    pub nodes: usize,
    /// Clusters drawn.
    pub clusters: usize,
    /// Edges drawn.
    pub edges: usize,
    /// Bytes written.
    pub bytes: usize,
    /// Time Graphviz took to lay the graph out (SVG and HTML).
    pub layout: Option<Duration>,
}

/// The Graphviz program `axle graph` runs.
fn dot_program() -> String {
    std::env::var("AXLE_DOT").unwrap_or_else(|_| "dot".to_string())
}

/// Graph attributes that make Graphviz's layout of large graphs much faster (fewer
/// crossing-minimisation and network-simplex iterations, straight edges), used above
/// [`FAST_LAYOUT_NODES`] nodes: on the baseline's `large_deep_dag_1k` after the `cpu` pipeline
/// they cut the layout from 21.5 s to 1.9 s (see `docs/graph.md`).
pub const FAST_LAYOUT_ARGS: [&str; 5] = [
    "-Gsplines=line",
    "-Gmclimit=0.1",
    "-Gnslimit=1",
    "-Gnslimit1=1",
    "-Gremincross=false",
];

/// Above this many nodes Graphviz runs with [`FAST_LAYOUT_ARGS`].
pub const FAST_LAYOUT_NODES: usize = 300;

/// Lays `dot_text` out as SVG with Graphviz (with [`FAST_LAYOUT_ARGS`] when `fast`), giving up
/// after `timeout`.
pub fn dot_to_svg(dot_text: &str, fast: bool, timeout: Duration) -> Result<String, GraphError> {
    let prog = dot_program();
    let mut cmd = Command::new(&prog);
    cmd.arg("-Tsvg");
    if fast {
        cmd.args(FAST_LAYOUT_ARGS);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            GraphError(format!(
                "error: cannot run Graphviz '{prog}' to draw SVG ({e}); install it (`make deps`, \
                 or apt-get install graphviz), or write .dot"
            ))
        })?;
    // Feed and drain the pipes on their own threads so that a large graph cannot dead-lock on
    // full pipes while this thread watches the clock.
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let text = dot_text.to_string();
    let writer = std::thread::spawn(move || stdin.write_all(text.as_bytes()));
    let drain = |r: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let t0 = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if t0.elapsed() < timeout => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(GraphError(format!(
                    "error: Graphviz '{prog}' did not lay the graph out within {} s; draw less \
                     (--around NAME --depth K, or a smaller --max-nodes for a per-computation \
                     summary), allow more (--layout-timeout), or write .dot",
                    timeout.as_secs_f64()
                )));
            }
            Err(e) => return Err(GraphError(format!("error: Graphviz '{prog}' failed: {e}"))),
        }
    };
    let out = stdout.join().expect("the reader thread does not panic");
    let err = stderr.join().expect("the reader thread does not panic");
    let written = writer.join().expect("the writer thread does not panic");
    if !status.success() {
        // Graphviz can print a line per node; the first few say enough.
        let text = String::from_utf8_lossy(&err);
        let mut lines: Vec<&str> = text.trim().lines().take(10).collect();
        if text.trim().lines().count() > 10 {
            lines.push("...");
        }
        return Err(GraphError(format!(
            "error: Graphviz '{prog}' failed ({status}):\n{}",
            lines.join("\n")
        )));
    }
    written.map_err(|e| GraphError(format!("error: writing to Graphviz '{prog}': {e}")))?;
    String::from_utf8(out).map_err(|_| {
        GraphError(format!(
            "error: Graphviz '{prog}' wrote SVG that is not UTF-8"
        ))
    })
}

/// Writes `bytes` to `path` through a temporary file in the same directory, renamed over
/// `path` once complete.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), GraphError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let fail =
        |e: std::io::Error| GraphError(format!("{}: error: cannot write: {e}", path.display()));
    // A temporary file is private (0600) by default; the output gets ordinary permissions.
    let mut builder = tempfile::Builder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o644));
    }
    let mut tmp = builder.tempfile_in(dir).map_err(fail)?;
    tmp.write_all(bytes).map_err(fail)?;
    tmp.persist(path).map_err(|e| fail(e.error))?;
    Ok(())
}

/// Renders `view` in `format` and writes it to `path` (all of it, or nothing on error); a
/// Graphviz layout taking longer than `layout_timeout` is an error.
pub fn write_graph(
    view: &GraphView,
    format: GraphFormat,
    path: &Path,
    layout_timeout: Duration,
) -> Result<GraphReport, GraphError> {
    let dot_text = super::dot::to_dot(view);
    let mut layout = None;
    let bytes = match format {
        GraphFormat::Dot => dot_text.into_bytes(),
        GraphFormat::Svg | GraphFormat::Html => {
            let t0 = Instant::now();
            let fast = view.nodes.len() > FAST_LAYOUT_NODES;
            let svg = dot_to_svg(&dot_text, fast, layout_timeout)?;
            layout = Some(t0.elapsed());
            if format == GraphFormat::Svg {
                svg.into_bytes()
            } else {
                super::html::page(view, &svg).into_bytes()
            }
        }
    };
    write_atomically(path, &bytes)?;
    Ok(GraphReport {
        form: view.form.clone(),
        nodes: view.nodes.len(),
        clusters: view.clusters.len(),
        edges: view.edges.len(),
        bytes: bytes.len(),
        layout,
    })
}
