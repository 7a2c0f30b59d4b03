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

/// Lays `dot_text` out as SVG with Graphviz.
pub fn dot_to_svg(dot_text: &str) -> Result<String, GraphError> {
    let prog = dot_program();
    let mut child = Command::new(&prog)
        .arg("-Tsvg")
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
    // Write on another thread so a large graph cannot dead-lock on full pipes.
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let text = dot_text.to_string();
    let writer = std::thread::spawn(move || stdin.write_all(text.as_bytes()));
    let out = child
        .wait_with_output()
        .map_err(|e| GraphError(format!("error: Graphviz '{prog}' failed: {e}")))?;
    let written = writer.join().expect("the writer thread does not panic");
    if !out.status.success() {
        return Err(GraphError(format!(
            "error: Graphviz '{prog}' failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    written.map_err(|e| GraphError(format!("error: writing to Graphviz '{prog}': {e}")))?;
    String::from_utf8(out.stdout).map_err(|_| {
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
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(fail)?;
    tmp.write_all(bytes).map_err(fail)?;
    tmp.persist(path).map_err(|e| fail(e.error))?;
    Ok(())
}

/// Renders `view` in `format` and writes it to `path` (all of it, or nothing on error).
pub fn write_graph(
    view: &GraphView,
    format: GraphFormat,
    path: &Path,
) -> Result<GraphReport, GraphError> {
    let dot_text = super::dot::to_dot(view);
    let mut layout = None;
    let bytes = match format {
        GraphFormat::Dot => dot_text.into_bytes(),
        GraphFormat::Svg | GraphFormat::Html => {
            let t0 = Instant::now();
            let svg = dot_to_svg(&dot_text)?;
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
