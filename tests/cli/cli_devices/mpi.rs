//! `axle run` under `mpirun -n 2` (one device per rank, Open MPI): JAX's tensor-parallel
//! `shard_map` module on the cpu backend against XLA's outputs, written by rank 0 for both
//! devices; and a rank whose collective fails ends the whole job with its error. A module of
//! the `cli` test binary; needs `mpirun` (.ci/deps installs Open MPI).

use axle_ir::{compare_arrays, read_npy, Tolerance};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testkit/collectives")
}

/// `mpirun -n 2 axle ARGS` (as root too, more ranks than cores allowed).
fn mpirun(args: &[String]) -> Output {
    Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-n", "2"])
        .arg(env!("CARGO_BIN_EXE_axle"))
        .args(args)
        .env_remove("AXLE_MEMORY_LIMIT")
        .output()
        .expect("mpirun runs (Open MPI: .ci/deps installs it)")
}

#[test]
fn shard_map_module_on_two_ranks() {
    let c = corpus();
    let out = tempfile::tempdir().unwrap();
    let mut args: Vec<String> = vec![
        "run".into(),
        c.join("tp_mlp_2.hlo").display().to_string(),
        "--backend".into(),
        "cpu".into(),
        "--out-dir".into(),
        out.path().display().to_string(),
    ];
    for k in 0..3 {
        args.push("--input".into());
        args.push(c.join(format!("tp_mlp_2.in{k}.npy")).display().to_string());
    }
    let o = mpirun(&args);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(stdout.contains("backend cpu (MPI, 2 ranks)"), "{stdout}");
    // Rank 0 alone prints the summary.
    assert_eq!(stdout.matches("2 devices").count(), 1, "{stdout}");
    let want = read_npy(c.join("tp_mlp_2.out0.npy")).unwrap();
    for d in 0..2 {
        let got = read_npy(out.path().join(format!("d{d}/out0.npy"))).unwrap();
        compare_arrays(
            &want,
            &got,
            Tolerance::Close {
                rtol: 1e-5,
                atol: 1e-6,
            },
        )
        .unwrap_or_else(|e| panic!("device {d}: {e}"));
    }
}

#[test]
fn a_failing_rank_ends_the_job() {
    // Per-device inputs where device 1's first file has the wrong shape: rank 1 fails before
    // its first collective, rank 0 waits in it until the job is aborted.
    let c = corpus();
    let mut args: Vec<String> = vec![
        "run".into(),
        c.join("tp_mlp_2.hlo").display().to_string(),
        "--backend".into(),
        "cpu".into(),
        "--timeout".into(),
        "60".into(),
    ];
    for k in [0, 1, 2, 1, 1, 2] {
        args.push("--input".into());
        args.push(c.join(format!("tp_mlp_2.in{k}.npy")).display().to_string());
    }
    let t = Instant::now();
    let o = mpirun(&args);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{e}");
    assert!(e.contains("device 1: device 1's inputs"), "{e}");
    // Well before the collective's timeout.
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
}
