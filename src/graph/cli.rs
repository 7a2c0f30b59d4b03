//! The `axle graph` command: its arguments and what it does with them, so that `main.rs` only
//! dispatches.
//!
//! Order of work: the output format is checked from `-o`'s extension before anything is read,
//! then the module is loaded (by the caller's loader, which renders parse and verifier errors
//! against the file), the pipeline of `--passes` runs (a standard pipeline's name or pipeline
//! text; `none`, the default, draws the module as given), the view is built and written
//! (whole, or not at all). Every error is a message for standard error; nothing is printed or
//! written before it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use axle_ir::{Module, PassManagerOptions, VerifyMode};

use super::{build_view, write_graph, GraphFormat, GraphOptions, ViewForm, DEFAULT_MAX_NODES};
use crate::backend::NO_PIPELINE;

/// The arguments of `axle graph`.
#[derive(clap::Args, Debug, Clone)]
pub struct GraphArgs {
    /// The HLO file (`.hlo`, or gzipped `.hlo.gz`).
    pub file: PathBuf,
    /// The output: `.svg`, `.dot` or `.html`, chosen by the extension.
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
    /// A pipeline to run first (a standard pipeline's name such as `cpu`, or pipeline text);
    /// default `none`, the module as given.
    #[arg(long, default_value = NO_PIPELINE)]
    pub passes: String,
    /// Draw only the neighbourhood of this instruction or fusion.
    #[arg(long)]
    pub around: Option<String>,
    /// The neighbourhood's radius in edges (with --around).
    #[arg(long, default_value_t = 3, requires = "around")]
    pub depth: usize,
    /// Above this many instructions to draw, draw a per-computation summary instead (and cut a
    /// neighbourhood there).
    #[arg(long, default_value_t = DEFAULT_MAX_NODES)]
    pub max_nodes: usize,
    /// Give up when Graphviz takes longer than this many seconds to lay the graph out (.svg and
    /// .html).
    #[arg(long, default_value_t = 60.0)]
    pub layout_timeout: f64,
}

/// Runs `axle graph`; `load` reads, parses and verifies a module. Returns the line to print.
pub fn run(
    args: &GraphArgs,
    load: impl FnOnce(&Path) -> Result<Module, String>,
) -> Result<String, String> {
    let format = GraphFormat::from_path(&args.output).map_err(|e| e.0)?;
    let timeout = Duration::try_from_secs_f64(args.layout_timeout)
        .ok()
        .filter(|t| !t.is_zero())
        .ok_or_else(|| {
            "error: --layout-timeout must be a positive number of seconds".to_string()
        })?;
    let mut m = load(&args.file)?;
    let shown = args.file.display();
    if args.passes != NO_PIPELINE {
        let text = crate::passes::standard_pipeline(&args.passes).unwrap_or(&args.passes);
        let opts = PassManagerOptions {
            verify: VerifyMode::End,
            ..Default::default()
        };
        crate::passes::optimize(&mut m, text, opts).map_err(|e| match e {
            crate::passes::OptimizeError::Pipeline(e) => {
                format!("error: --passes:\n{}", e.render())
            }
            e => format!("{shown}: error: {e}"),
        })?;
    }
    let opts = GraphOptions {
        around: args.around.clone(),
        depth: args.depth,
        max_nodes: args.max_nodes,
    };
    let view = build_view(&m, &opts).map_err(|e| format!("{shown}: error: {e}"))?;
    let r = write_graph(&view, format, &args.output, timeout).map_err(|e| e.0)?;
    let form = match &r.form {
        ViewForm::Full => String::new(),
        ViewForm::Around { truncated, .. } => {
            if *truncated {
                format!(" (neighbourhood cut at --max-nodes {})", args.max_nodes)
            } else {
                String::new()
            }
        }
        ViewForm::Summary { full_nodes } => format!(
            " (per-computation summary: {full_nodes} instructions exceed --max-nodes {}; use \
             --around NAME or a larger --max-nodes)",
            args.max_nodes
        ),
    };
    Ok(format!(
        "wrote {}: {} nodes, {} clusters, {} edges, {} bytes{}{form}\n",
        args.output.display(),
        r.nodes,
        r.clusters,
        r.edges,
        r.bytes,
        r.layout
            .map(|d| format!(", layout {:.1} ms", d.as_secs_f64() * 1e3))
            .unwrap_or_default()
    ))
}
