//! `axle-graphs`: the compile-time study tool.
//!
//! ```text
//! axle-graphs emit FAMILY INSTRUCTIONS [--seed S] [-o OUT.hlo]
//! axle-graphs sweep [--families a,b] [--sizes 1000,10000] [--axle PATH] [--xla-python PATH]
//!                   [--xla-timeout SECS] [--xla-max-size N] [--axle-timeout SECS] [--seed S]
//!                   [--out DIR]
//! axle-graphs plot DIR/scaling.json [-o OUT.svg]
//! ```
//!
//! `sweep` writes each generated graph to a scratch file, compiles it with
//! `axle compile --quiet --no-cache` (JIT, the default `cpu` pipeline, never the compilation
//! cache) and, when `--xla-python` names a Python with jax 0.10.2, with XLA CPU
//! (`bench/xla/compile_once.py`, up to `--xla-max-size` instructions), each in a fresh process,
//! one after the other for each size. It records every process's wall time and peak RSS
//! (`VmHWM`, sampled every 20 ms); XLA's row also has its compile time without the Python
//! start-up. A compile that outlives its timeout is killed and recorded as such. It writes
//! `DIR/scaling.csv`, `DIR/scaling.json` and `DIR/scaling.svg` (compile time and peak RSS
//! against instructions, log-log).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use axle_bench::graphs::Family;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("emit") => emit(&args[1..]),
        Some("sweep") => sweep(&args[1..]),
        Some("plot") => plot_cmd(&args[1..]),
        _ => Err(USAGE.to_string()),
    };
    if let Err(e) = result {
        eprintln!("{e}");
        std::process::exit(1);
    }
}

const USAGE: &str = "usage: axle-graphs emit FAMILY INSTRUCTIONS [--seed S] [-o OUT.hlo]\n       \
     axle-graphs sweep [--families a,b] [--sizes 1000,10000] [--axle PATH] [--xla-python PATH] \
     [--xla-timeout SECS] [--xla-max-size N] [--axle-timeout SECS] [--seed S] [--out DIR]\n       \
     axle-graphs plot DIR/scaling.json [-o OUT.svg]";

/// The value after `--name`, if given.
fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

fn number<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> Result<T, String> {
    match flag(args, name) {
        None => Ok(default),
        Some(v) => v
            .replace('_', "")
            .parse()
            .map_err(|_| format!("error: {name}: not a number: '{v}'")),
    }
}

fn family(name: &str) -> Result<Family, String> {
    Family::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = Family::ALL.iter().map(|f| f.name()).collect();
        format!(
            "error: unknown family '{name}' (families: {})",
            names.join(", ")
        )
    })
}

fn emit(args: &[String]) -> Result<(), String> {
    let (Some(f), Some(n)) = (args.first(), args.get(1)) else {
        return Err(USAGE.to_string());
    };
    let n: usize = n
        .replace('_', "")
        .parse()
        .map_err(|_| format!("error: not a number of instructions: '{n}'"))?;
    let text = family(f)?.generate(n, number(args, "--seed", 0)?);
    match flag(args, "-o") {
        Some(out) => std::fs::write(out, text).map_err(|e| format!("{out}: error: {e}")),
        None => {
            print!("{text}");
            Ok(())
        }
    }
}

/// One measured compile.
#[derive(Clone, Debug)]
struct Row {
    family: String,
    target: usize,
    instructions: usize,
    tool: &'static str,
    /// Wall time of the whole process, seconds.
    wall_s: f64,
    /// XLA's compile time from HLO text, without the Python start-up.
    compile_s: Option<f64>,
    peak_rss_mb: f64,
    status: String,
}

/// How a child process ended.
struct Finished {
    wall: Duration,
    max_rss_kb: i64,
    exit: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `cmd` to completion or until `timeout` (then kills it), measuring its wall time and
/// peak RSS (`VmHWM`, sampled every 20 ms until it exits).
fn run_child(mut cmd: Command, timeout: Duration) -> Result<Finished, String> {
    let out_file = tempfile_path("stdout");
    let err_file = tempfile_path("stderr");
    let out = std::fs::File::create(&out_file).map_err(|e| e.to_string())?;
    let err = std::fs::File::create(&err_file).map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    let child = cmd
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("error: cannot start {cmd:?}: {e}"))?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let mut killed = false;
    let mut hwm_kb = 0;
    loop {
        // The child's own high-water mark: its address space is new since `exec`, unlike
        // `ru_maxrss`, which also counts the (large) parent's pages it shared before the exec.
        hwm_kb = hwm_kb.max(vm_hwm_kb(pid).unwrap_or(0));
        // SAFETY: `pid` is our child, not yet reaped; the pointers are to live locals.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            break;
        }
        if r < 0 {
            return Err(format!("error: wait4: {}", std::io::Error::last_os_error()));
        }
        if !killed && t0.elapsed() > timeout {
            // SAFETY: sending a signal to our own unreaped child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            killed = true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let wall = t0.elapsed();
    let stdout = std::fs::read_to_string(&out_file).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_file).unwrap_or_default();
    let _ = std::fs::remove_file(&out_file);
    let _ = std::fs::remove_file(&err_file);
    let exit = if killed {
        None
    } else if libc::WIFEXITED(status) {
        Some(libc::WEXITSTATUS(status))
    } else {
        Some(128 + libc::WTERMSIG(status))
    };
    Ok(Finished {
        wall,
        max_rss_kb: hwm_kb,
        exit,
        stdout,
        stderr,
    })
}

/// `VmHWM` of a live process, in KiB.
fn vm_hwm_kb(pid: libc::pid_t) -> Option<i64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn tempfile_path(what: &str) -> PathBuf {
    std::env::temp_dir().join(format!("axle-graphs-{}-{what}", std::process::id()))
}

fn status_of(f: &Finished, timeout: Duration) -> String {
    match f.exit {
        None => format!("timeout after {} s", timeout.as_secs()),
        Some(0) => "ok".into(),
        Some(c) => {
            let last = f.stderr.lines().last().unwrap_or("").replace(',', ";");
            format!("exit {c}: {last}")
        }
    }
}

fn sweep(args: &[String]) -> Result<(), String> {
    let families: Vec<Family> = flag(args, "--families")
        .unwrap_or("layer_stack,deep_dag,wide")
        .split(',')
        .map(family)
        .collect::<Result<_, _>>()?;
    let sizes: Vec<usize> = flag(args, "--sizes")
        .unwrap_or("1000,10000,100000")
        .split(',')
        .map(|s| {
            s.replace('_', "")
                .parse()
                .map_err(|_| format!("error: --sizes: not a number: '{s}'"))
        })
        .collect::<Result<_, _>>()?;
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let axle = flag(args, "--axle")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/release/axle"));
    let xla = flag(args, "--xla-python").map(PathBuf::from);
    let xla_timeout = Duration::from_secs(number(args, "--xla-timeout", 600)?);
    let xla_max: usize = number(args, "--xla-max-size", usize::MAX)?;
    let axle_timeout = Duration::from_secs(number(args, "--axle-timeout", 600)?);
    let seed: u64 = number(args, "--seed", 0)?;
    let out = PathBuf::from(flag(args, "--out").unwrap_or("scaling"));
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: error: {e}", out.display()))?;
    let mut rows = Vec::new();
    for &f in &families {
        for &size in &sizes {
            let text = f.generate(size, seed);
            let instructions = axle_ir::parse_module(&text)
                .map_err(|e| e.render(f.name()))?
                .num_live_insts();
            let file = std::env::temp_dir().join(format!(
                "axle-graphs-{}-{}-{size}.hlo",
                std::process::id(),
                f.name()
            ));
            std::fs::write(&file, &text).map_err(|e| format!("{}: error: {e}", file.display()))?;
            drop(text);
            let row = |tool, fin: &Finished, timeout, compile_s| Row {
                family: f.name().into(),
                target: size,
                instructions,
                tool,
                wall_s: fin.wall.as_secs_f64(),
                compile_s,
                peak_rss_mb: fin.max_rss_kb as f64 / 1024.0,
                status: status_of(fin, timeout),
            };
            let mut cmd = Command::new(&axle);
            cmd.arg("compile")
                .arg(&file)
                .arg("--quiet")
                .arg("--no-cache");
            let fin = run_child(cmd, axle_timeout)?;
            rows.push(row("axle", &fin, axle_timeout, None));
            eprintln!("{}", csv_line(rows.last().expect("pushed")));
            if let Some(py) = xla.as_ref().filter(|_| size <= xla_max) {
                let mut cmd = Command::new(py);
                cmd.arg(root.join("bench/xla/compile_once.py")).arg(&file);
                let fin = run_child(cmd, xla_timeout)?;
                let compile_s = fin
                    .stdout
                    .lines()
                    .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                    .find_map(|v| v["compile_s"].as_f64());
                rows.push(row("xla", &fin, xla_timeout, compile_s));
                eprintln!("{}", csv_line(rows.last().expect("pushed")));
            }
            let _ = std::fs::remove_file(&file);
        }
    }
    let mut csv = String::from(CSV_HEADER);
    for r in &rows {
        csv.push_str(&csv_line(r));
        csv.push('\n');
    }
    write(&out.join("scaling.csv"), &csv)?;
    let json = serde_json::Value::Array(rows.iter().map(to_json).collect());
    write(
        &out.join("scaling.json"),
        &serde_json::to_string_pretty(&json).expect("serializable"),
    )?;
    plot(&rows, &out.join("scaling.svg"))?;
    println!(
        "wrote {} rows to {}/scaling.{{csv,json,svg}}",
        rows.len(),
        out.display()
    );
    Ok(())
}

const CSV_HEADER: &str = "family,target,instructions,tool,wall_s,compile_s,peak_rss_mb,status\n";

fn csv_line(r: &Row) -> String {
    format!(
        "{},{},{},{},{:.3},{},{:.1},{}",
        r.family,
        r.target,
        r.instructions,
        r.tool,
        r.wall_s,
        r.compile_s.map(|c| format!("{c:.3}")).unwrap_or_default(),
        r.peak_rss_mb,
        r.status
    )
}

fn to_json(r: &Row) -> serde_json::Value {
    serde_json::json!({
        "family": r.family,
        "target": r.target,
        "instructions": r.instructions,
        "tool": r.tool,
        "wall_s": r.wall_s,
        "compile_s": r.compile_s,
        "peak_rss_mb": r.peak_rss_mb,
        "status": r.status,
    })
}

fn from_json(v: &serde_json::Value) -> Option<Row> {
    Some(Row {
        family: v["family"].as_str()?.to_string(),
        target: v["target"].as_u64()? as usize,
        instructions: v["instructions"].as_u64()? as usize,
        tool: match v["tool"].as_str()? {
            "xla" => "xla",
            _ => "axle",
        },
        wall_s: v["wall_s"].as_f64()?,
        compile_s: v["compile_s"].as_f64(),
        peak_rss_mb: v["peak_rss_mb"].as_f64()?,
        status: v["status"].as_str()?.to_string(),
    })
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: error: {e}", path.display()))
}

fn plot_cmd(args: &[String]) -> Result<(), String> {
    let Some(input) = args.first() else {
        return Err(USAGE.to_string());
    };
    let text = std::fs::read_to_string(input).map_err(|e| format!("{input}: error: {e}"))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{input}: error: {e}"))?;
    let rows: Vec<Row> = v
        .as_array()
        .ok_or_else(|| format!("{input}: error: not a JSON array of rows"))?
        .iter()
        .map(|r| from_json(r).ok_or_else(|| format!("{input}: error: a row lacks a field: {r}")))
        .collect::<Result<_, _>>()?;
    let out = flag(args, "-o").unwrap_or("scaling.svg");
    plot(&rows, Path::new(out))?;
    println!("wrote {out}");
    Ok(())
}

/// A plotted quantity: its label, its axis range and how to read it from a row.
type Metric<'a> = (&'a str, f64, f64, &'a dyn Fn(&Row) -> f64);

/// Compile time (finished compiles; XLA's without the Python start-up) and peak RSS against
/// instructions, log-log, one series per tool and family.
fn plot(rows: &[Row], path: &Path) -> Result<(), String> {
    use plotters::prelude::*;
    let err = |e: &dyn std::fmt::Display| format!("{}: error: plotting: {e}", path.display());
    let ok: Vec<&Row> = rows.iter().filter(|r| r.status == "ok").collect();
    if ok.is_empty() {
        return Err(format!(
            "{}: error: no finished compile to plot",
            path.display()
        ));
    }
    let time = |r: &Row| r.compile_s.unwrap_or(r.wall_s).max(1e-3);
    let xmax = ok.iter().map(|r| r.instructions).max().unwrap_or(1) as f64 * 1.5;
    let xmin = ok.iter().map(|r| r.instructions).min().unwrap_or(1) as f64 / 1.5;
    let tmax = ok.iter().map(|r| time(r)).fold(1.0, f64::max) * 1.5;
    let tmin = ok.iter().map(|r| time(r)).fold(f64::MAX, f64::min) / 1.5;
    let mmax = ok.iter().map(|r| r.peak_rss_mb).fold(1.0, f64::max) * 1.5;
    let mmin = ok.iter().map(|r| r.peak_rss_mb).fold(f64::MAX, f64::min) / 1.5;
    let mut series: Vec<(String, &'static str)> = Vec::new();
    for r in &ok {
        let key = (r.family.clone(), r.tool);
        if !series.contains(&key) {
            series.push(key);
        }
    }
    let root = SVGBackend::new(path, (1200, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let panels = root.split_evenly((1, 2));
    let metrics: [Metric; 2] = [
        ("compile time (s)", tmin, tmax, &time),
        ("peak RSS (MB)", mmin, mmax, &|r: &Row| r.peak_rss_mb),
    ];
    for (panel, (label, lo, hi, value)) in panels.iter().zip(metrics) {
        let mut chart = ChartBuilder::on(panel)
            .caption(label, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d((xmin..xmax).log_scale(), (lo..hi).log_scale())
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc("instructions")
            .y_desc(label)
            .draw()
            .map_err(|e| err(&e))?;
        for (k, (fam, tool)) in series.iter().enumerate() {
            let color = Palette99::pick(k).to_rgba();
            let mut pts: Vec<(f64, f64)> = ok
                .iter()
                .filter(|r| &r.family == fam && r.tool == *tool)
                .map(|r| (r.instructions as f64, value(r)))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            let style = if *tool == "xla" {
                ShapeStyle::from(color).stroke_width(2)
            } else {
                ShapeStyle::from(color).stroke_width(3)
            };
            chart
                .draw_series(LineSeries::new(pts.clone(), style))
                .map_err(|e| err(&e))?
                .label(format!("{tool} {fam}"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
                .map_err(|e| err(&e))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}
