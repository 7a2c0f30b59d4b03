//! Text -> IR -> `HloModuleProto` -> IR -> text is the identity on every HLO file of the shared
//! data: the corpus (`NAME.hlo`, `NAME.opt.hlo`, `NAME.debug.hlo`), the models and the
//! baseline programs (the gzipped ones included), the collectives corpus
//! (`testkit/collectives`) and this crate's `tests/data/*.hlo`, one named
//! trial per file. Each trial also checks that writing the module read back gives the same
//! bytes (the writer is deterministic and the reader loses nothing the writer wrote).
//!
//! `large_wide_300k.hlo.gz` (16.7 MB of text, about 18 s alone in a debug build) runs only in
//! optimized builds (`cargo test --release -p axle-hlo-proto --test roundtrip`), so the debug
//! suite stays near 15 s; its 1k, 10k and 100k siblings run in both.
//!
//! One more trial proves the comparison can fail: a proto whose constant is changed must
//! print differently.

use std::io::Read;
use std::path::{Path, PathBuf};

use axle_hlo_proto::{read_module, write_module};
use axle_ir::{parse_module, print_module};
use libtest_mimic::{Arguments, Failed, Trial};

fn read_text(path: &Path) -> Result<String, Failed> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if path.extension().is_some_and(|e| e == "gz") {
        let mut s = String::new();
        flate2::read::MultiGzDecoder::new(&bytes[..])
            .read_to_string(&mut s)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(s)
    } else {
        Ok(String::from_utf8(bytes).map_err(|e| e.to_string())?)
    }
}

/// The first line where `a` and `b` differ, for a readable failure.
fn first_difference(a: &str, b: &str) -> String {
    for (k, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        if x != y {
            return format!("line {}:\n  text:  {x}\n  proto: {y}", k + 1);
        }
    }
    format!(
        "the texts have {} and {} lines",
        a.lines().count(),
        b.lines().count()
    )
}

fn round_trip(path: &Path) -> Result<(), Failed> {
    let text = read_text(path)?;
    let m = parse_module(&text).map_err(|e| e.render(&path.display().to_string()))?;
    let printed = print_module(&m);
    let bytes = write_module(&m).map_err(|e| e.to_string())?;
    let back = read_module(&bytes).map_err(|e| e.to_string())?;
    let reprinted = print_module(&back);
    if printed != reprinted {
        return Err(format!(
            "text and proto differ at {}",
            first_difference(&printed, &reprinted)
        )
        .into());
    }
    let again = write_module(&back).map_err(|e| e.to_string())?;
    if again != bytes {
        return Err("writing the module read back gives different bytes".into());
    }
    Ok(())
}

fn hlo_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.retain(|p| {
        let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        n.ends_with(".hlo") || n.ends_with(".hlo.gz")
    });
    v.sort();
    v
}

/// The comparison notices a changed proto: the first `f32[]` constant's value is changed.
fn mismatch_is_noticed() -> Result<(), Failed> {
    use pjrt_sys::protos::xla::HloModuleProto;
    use prost::Message;
    let m = parse_module(
        "HloModule m\n\nENTRY e {\n  p = f32[] parameter(0)\n  c = f32[] constant(2)\n  ROOT a = f32[] add(p, c)\n}\n",
    )?;
    let mut proto = HloModuleProto::decode(&write_module(&m)?[..])?;
    let lit = proto.computations[0]
        .instructions
        .iter_mut()
        .find_map(|i| i.literal.as_mut())
        .ok_or("no literal written")?;
    lit.f32s = vec![3.0];
    let changed = read_module(&proto.encode_to_vec())?;
    if print_module(&changed) == print_module(&m) {
        return Err("a changed constant prints as the original".into());
    }
    Ok(())
}

/// Files too large for a debug build's test time, covered by the release run.
const RELEASE_ONLY: &[&str] = &["large_wide_300k.hlo.gz"];

fn main() {
    let args = Arguments::from_args();
    let shared = axle_testkit::shared_dir();
    let mut trials = Vec::new();
    let mut count = 0;
    for sub in ["corpus", "models", "baseline"] {
        for path in hlo_files(&shared.join(sub)) {
            count += 1;
            let file = path.file_name().unwrap().to_string_lossy().to_string();
            if cfg!(debug_assertions) && RELEASE_ONLY.contains(&file.as_str()) {
                continue;
            }
            let name = format!("{sub}/{}", path.file_name().unwrap().to_string_lossy());
            trials.push(Trial::test(name, move || round_trip(&path)));
        }
    }
    assert!(
        count > 0,
        "no HLO files under {} (set AXLE_SHARED)",
        shared.display()
    );
    // This crate's own texts (the XLA fixtures' sources: opcodes and literals the shared data
    // lacks, such as `mulhi`).
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    for path in hlo_files(&data) {
        let name = format!("data/{}", path.file_name().unwrap().to_string_lossy());
        trials.push(Trial::test(name, move || round_trip(&path)));
    }
    // The collectives corpus: typed replica groups, pairs and channel ids in JAX's and XLA's
    // forms.
    let coll = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testkit/collectives");
    let before = trials.len();
    for path in hlo_files(&coll) {
        let name = format!(
            "collectives/{}",
            path.file_name().unwrap().to_string_lossy()
        );
        trials.push(Trial::test(name, move || round_trip(&path)));
    }
    assert!(
        trials.len() > before,
        "no HLO files under {}",
        coll.display()
    );
    trials.push(Trial::test("mismatch_is_noticed", mismatch_is_noticed));
    libtest_mimic::run(&args, trials).exit();
}
