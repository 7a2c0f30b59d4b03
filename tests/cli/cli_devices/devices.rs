//! `axle run --devices N` on the interpreter, the cpu backend and `nvptx-sim`: JAX's shard_map
//! modules on global inputs, XLA's per-device modules on per-device inputs, outputs per device,
//! and the errors of runs that cannot work. A module of the `cli` test binary (one binary less
//! to link).

use axle_ir::{compare_arrays, read_npy, Tolerance};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testkit/collectives")
}

fn axle(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_axle"))
        .args(args)
        .env_remove("AXLE_MEMORY_LIMIT")
        .output()
        .expect("axle runs")
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn close(want: &Path, got: &Path) {
    let (w, g) = (read_npy(want).unwrap(), read_npy(got).unwrap());
    compare_arrays(
        &w,
        &g,
        Tolerance::Close {
            rtol: 1e-5,
            atol: 1e-6,
        },
    )
    .unwrap_or_else(|e| panic!("{}: {e}", got.display()));
}

#[test]
fn shard_map_module_on_global_inputs() {
    for backend in ["interpreter", "cpu", "nvptx-sim"] {
        shard_map_module_on(backend);
    }
}

fn shard_map_module_on(backend: &str) {
    let c = corpus();
    let out = tempfile::tempdir().unwrap();
    let mut args: Vec<String> = [
        "run",
        &s(&c.join("tp_mlp_2.hlo")),
        "--backend",
        backend,
        "--devices",
        "2",
        "--out-dir",
        &s(out.path()),
    ]
    .iter()
    .map(|x| x.to_string())
    .collect();
    for k in 0..3 {
        args.push("--input".into());
        args.push(s(&c.join(format!("tp_mlp_2.in{k}.npy"))));
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = axle(&refs);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        stdout.contains("2 devices (1 replicas x 2 partitions)"),
        "{stdout}"
    );
    assert!(stdout.contains("(the same on every device)"), "{stdout}");
    for d in 0..2 {
        close(
            &c.join("tp_mlp_2.out0.npy"),
            &out.path().join(format!("d{d}/out0.npy")),
        );
    }
}

#[test]
fn per_device_module_on_per_device_inputs() {
    for backend in ["interpreter", "cpu", "nvptx-sim"] {
        per_device_module_on(backend);
    }
}

fn per_device_module_on(backend: &str) {
    let c = corpus();
    let out = tempfile::tempdir().unwrap();
    let mut args: Vec<String> = [
        "run",
        &s(&c.join("ppermute_ring_4.opt.hlo")),
        "--backend",
        backend,
        "--devices",
        "4",
        "--out-dir",
        &s(out.path()),
    ]
    .iter()
    .map(|x| x.to_string())
    .collect();
    for d in 0..4 {
        args.push("--input".into());
        args.push(s(&c.join(format!("ppermute_ring_4.d{d}.in0.npy"))));
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = axle(&refs);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for d in 0..4 {
        for k in 0..2 {
            close(
                &c.join(format!("ppermute_ring_4.d{d}.out{k}.npy")),
                &out.path().join(format!("d{d}/out{k}.npy")),
            );
        }
    }
}

#[test]
fn runs_that_cannot_work_are_errors() {
    let c = corpus();
    let f = s(&c.join("ppermute_ring_4.opt.hlo"));
    // The header says 4 devices.
    let o = axle(&["run", &f, "--backend", "interpreter", "--devices", "2"]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.contains("the module is for 4 devices (replica_count=1, num_partitions=4), not 2"),
        "{e}"
    );
    // A module for 4 devices on one device of nvptx-sim: its collectives need the others.
    let o = axle(&["run", &f, "--backend", "nvptx-sim"]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("needs a multi-device run"), "{e}");
    // Three input files fit neither one set nor one set per device.
    let i = s(&c.join("ppermute_ring_4.d0.in0.npy"));
    let o = axle(&[
        "run",
        &f,
        "--backend",
        "interpreter",
        "--devices",
        "4",
        "--input",
        &i,
        "--input",
        &i,
        "--input",
        &i,
    ]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("or 4 times as many"), "{e}");
    // Zero devices is refused by the argument parser (status 2).
    let o = axle(&["run", &f, "--backend", "interpreter", "--devices", "0"]);
    assert_eq!(o.status.code(), Some(2));
}
