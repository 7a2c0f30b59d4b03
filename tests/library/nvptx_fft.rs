//! The nvptx backend's `fft` kernels (`codegen-nvptx/src/fft.rs`) and `rng-bit-generator`
//! kernel on the simulator, on shapes XLA's test modules do not have: length 1, prime
//! lengths, mixed radices, 2-D and 3-D transforms, batches, `RFFT` and `IRFFT` of odd
//! lengths, Bluestein's lengths (a prime factor above 31), a length past the one-table
//! twiddle limit; and `rng-bit-generator` of every algorithm and width. A module of the
//! `library` test binary.
//!
//! FFT accuracy is the largest error relative to the largest result. A `c64` transform is
//! measured against the exact answer (the evaluator's transform of the same values in `c128`,
//! whose own error is some `1e-16`): the simulator's must be within a few times the `cpu`
//! backend's (rustfft's, the evaluator's algorithm), lengths with a prime factor above 31
//! (Bluestein's transform) included. A `c128` transform is measured against the evaluator's: within
//! `1e-13`. `rng-bit-generator` must give the interpreter's bits exactly.

use axle::backend::{pipeline_for, CompileOptions};
use axle::backends::registry;
use axle::ir::{parse_module, ArrayLiteral, ArrayShape, ElementType, Literal, Module};

/// Runs `m` on `backend` after its default pipeline, as `axle run` does.
pub fn run_on(backend: &str, m: &Module, args: &[Literal]) -> Result<Vec<ArrayLiteral>, String> {
    let p = registry().get(backend).map_err(|e| e.to_string())?;
    let opts = CompileOptions {
        pipeline: pipeline_for(&*p, None),
        ..Default::default()
    };
    let exe = p
        .compiler()
        .compile(m.clone(), &opts)
        .map_err(|e| e.to_string())?;
    axle::run::run_literals(&*p, &*exe, args).map_err(|e| e.to_string())
}

/// `n` reproducible values in `[-1, 1)`.
fn values(n: usize, seed: u64) -> Vec<f64> {
    (0..n as u64)
        .map(|i| axle_testkit::noise(seed, i))
        .collect()
}

/// An array of `ty` and `dims` holding `parts` (interleaved for complex types).
fn array(ty: ElementType, dims: &[i64], parts: &[f64]) -> Literal {
    let wide = matches!(ty, ElementType::F64 | ElementType::C128);
    let data: Vec<u8> = if wide {
        parts.iter().flat_map(|v| v.to_le_bytes()).collect()
    } else {
        parts
            .iter()
            .flat_map(|&v| (v as f32).to_le_bytes())
            .collect()
    };
    Literal::Array(ArrayLiteral::new(ArrayShape::new(ty, dims), data).expect("sized"))
}

/// The parts of a float or complex array, as `f64`.
fn parts(a: &ArrayLiteral) -> Vec<f64> {
    match a.shape.ty {
        ElementType::F64 | ElementType::C128 => a
            .data
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")))
            .collect(),
        _ => a
            .data
            .chunks_exact(4)
            .map(|b| f64::from(f32::from_le_bytes(b.try_into().expect("4 bytes"))))
            .collect(),
    }
}

/// The largest difference from `exact` relative to its largest magnitude.
fn error(got: &[f64], exact: &[f64]) -> f64 {
    assert_eq!(got.len(), exact.len());
    let scale = exact.iter().fold(0f64, |m, x| m.max(x.abs())).max(1e-300);
    got.iter()
        .zip(exact)
        .map(|(g, e)| (g - e).abs())
        .fold(0f64, f64::max)
        / scale
}

/// One transform: `fft_type`, operand type and dimensions, result type and dimensions,
/// `fft_length`.
struct Case {
    kind: &'static str,
    in_ty: ElementType,
    in_dims: Vec<i64>,
    out_ty: ElementType,
    out_dims: Vec<i64>,
    lengths: Vec<i64>,
}

impl Case {
    fn text(&self, wide: bool) -> String {
        let widen = |t: ElementType| match (wide, t) {
            (true, ElementType::C64) => ElementType::C128,
            (true, ElementType::F32) => ElementType::F64,
            _ => t,
        };
        let shape = |t: ElementType, d: &[i64]| {
            let d: Vec<String> = d.iter().map(i64::to_string).collect();
            format!("{}[{}]", widen(t).name(), d.join(","))
        };
        let l: Vec<String> = self.lengths.iter().map(i64::to_string).collect();
        format!(
            "HloModule f\n\nENTRY e {{\n  x = {} parameter(0)\n  ROOT y = {} fft(x), \
             fft_type={}, fft_length={{{}}}\n}}\n",
            shape(self.in_ty, &self.in_dims),
            shape(self.out_ty, &self.out_dims),
            self.kind,
            l.join(",")
        )
    }

    /// The errors of `nvptx-sim` and `cpu` against the exact transform (in double precision,
    /// against the evaluator's, which is the cpu backend's), and whether the case is in
    /// double precision.
    fn errors(&self, seed: u64) -> (f64, f64, bool) {
        let wide = matches!(self.in_ty, ElementType::F64 | ElementType::C128);
        let n: i64 = self.in_dims.iter().product();
        let per = if self.in_ty.is_complex() { 2 } else { 1 };
        let mut vals = values(n as usize * per, seed);
        if self.kind == "IRFFT" {
            // A Hermitian last dimension: its first (and, for even lengths, last) entries
            // real, as a real signal's spectrum has them.
            let half = *self.in_dims.last().expect("rank") as usize;
            let full = *self.out_dims.last().expect("rank") as usize;
            for line in vals.chunks_mut(2 * half) {
                line[1] = 0.0;
                if full.is_multiple_of(2) {
                    line[2 * half - 1] = 0.0;
                }
            }
        }
        let m = parse_module(&self.text(false)).expect("parses");
        let arg = array(self.in_ty, &self.in_dims, &vals);
        let sim = run_on("nvptx-sim", &m, std::slice::from_ref(&arg)).expect("runs on nvptx-sim");
        let cpu = run_on("cpu", &m, std::slice::from_ref(&arg)).expect("runs on cpu");
        let exact = if wide {
            let r = run_on("interpreter", &m, &[arg]).expect("evaluates");
            parts(&r[0])
        } else {
            // The same values (exactly representable in f32) in double precision.
            let rounded: Vec<f64> = vals.iter().map(|&v| f64::from(v as f32)).collect();
            let mw = parse_module(&self.text(true)).expect("parses");
            let wide_ty = if self.in_ty.is_complex() {
                ElementType::C128
            } else {
                ElementType::F64
            };
            let argw = array(wide_ty, &self.in_dims, &rounded);
            parts(&run_on("interpreter", &mw, &[argw]).expect("evaluates")[0])
        };
        assert_eq!(
            sim[0].shape.dims.to_vec(),
            self.out_dims,
            "{}",
            self.text(false)
        );
        (
            error(&parts(&sim[0]), &exact),
            error(&parts(&cpu[0]), &exact),
            wide,
        )
    }
}

fn case(kind: &'static str, ty: &str, dims: &[i64], lengths: &[i64]) -> Case {
    let (c, r) = match ty {
        "f64" => (ElementType::C128, ElementType::F64),
        _ => (ElementType::C64, ElementType::F32),
    };
    let last = dims.len() - 1;
    let n = *lengths.last().expect("a length");
    let mut half = dims.to_vec();
    half[last] = n / 2 + 1;
    let (in_ty, in_dims, out_ty, out_dims) = match kind {
        "RFFT" => (r, dims.to_vec(), c, half),
        "IRFFT" => (c, half, r, dims.to_vec()),
        _ => (c, dims.to_vec(), c, dims.to_vec()),
    };
    Case {
        kind,
        in_ty,
        in_dims,
        out_ty,
        out_dims,
        lengths: lengths.to_vec(),
    }
}

/// Every kind on lengths 1, primes, mixed radices, 2-D and 3-D, batches, odd real lengths and
/// a length past the one-table twiddle limit, in both precisions: within a few times the cpu
/// backend's error in `c64` (and never above `1e-5`), within `1e-13` in `c128`.
#[test]
fn fft_kernels_are_as_accurate_as_the_cpu_backend() {
    let cases = [
        case("FFT", "f32", &[1], &[1]),
        case("FFT", "f32", &[3, 1], &[1]),
        case("IFFT", "f32", &[2, 7], &[7]),
        case("FFT", "f32", &[97], &[97]),
        case("FFT", "f32", &[1009], &[1009]),
        case("IFFT", "f32", &[4099], &[4099]),
        case("FFT", "f64", &[1009], &[1009]),
        case("FFT", "f32", &[3, 53, 6], &[53, 6]),
        case("RFFT", "f32", &[2, 37], &[37]),
        case("IRFFT", "f32", &[3, 41], &[41]),
        case("IRFFT", "f64", &[2, 43], &[43]),
        case("FFT", "f64", &[101], &[101]),
        case("IFFT", "f32", &[2, 360], &[360]),
        case("FFT", "f32", &[1000], &[1000]),
        case("FFT", "f32", &[3, 12, 10], &[12, 10]),
        case("IFFT", "f64", &[3, 12, 10], &[12, 10]),
        case("FFT", "f32", &[2, 6, 5, 4], &[6, 5, 4]),
        case("IFFT", "f64", &[2, 6, 5, 4], &[6, 5, 4]),
        case("FFT", "f32", &[16, 64], &[64]),
        case("RFFT", "f32", &[1], &[1]),
        case("RFFT", "f32", &[7], &[7]),
        case("RFFT", "f32", &[3, 15], &[15]),
        case("RFFT", "f64", &[4, 9, 6], &[9, 6]),
        case("RFFT", "f32", &[2, 3, 5, 7], &[3, 5, 7]),
        case("IRFFT", "f32", &[2, 1], &[1]),
        case("IRFFT", "f32", &[3, 15], &[15]),
        case("IRFFT", "f64", &[5, 6], &[5, 6]),
        case("IRFFT", "f32", &[2, 3, 5, 7], &[3, 5, 7]),
        case("FFT", "f32", &[20_000], &[20_000]),
        case("IFFT", "f64", &[18_000], &[18_000]),
    ];
    let mut report = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let (sim, cpu, wide) = c.errors(i as u64 + 1);
        let line = format!(
            "{} {} {:?} of {:?}: nvptx-sim {sim:.2e}{}",
            c.kind,
            c.in_ty.name(),
            c.lengths,
            c.in_dims,
            if wide {
                " against the evaluator".to_string()
            } else {
                format!(", cpu {cpu:.2e}")
            }
        );
        let ok = if wide {
            sim <= 1e-13
        } else {
            sim <= 3.0 * cpu.max(f64::from(f32::EPSILON))
        };
        assert!(ok, "{line}");
        report.push(line);
    }
    eprintln!("{}", report.join("\n"));
}

/// A transform of no elements gives zeros, and a result with none launches nothing.
#[test]
fn fft_of_nothing_is_zeros() {
    let text = "HloModule z\n\nENTRY e {\n  x = c64[3,0] parameter(0)\n  \
                ROOT y = c64[3,0] fft(x), fft_type=FFT, fft_length={0}\n}\n";
    let m = parse_module(text).expect("parses");
    let arg = array(ElementType::C64, &[3, 0], &[]);
    let got = run_on("nvptx-sim", &m, &[arg]).expect("runs");
    assert_eq!(got[0].shape.dims.to_vec(), vec![3, 0]);
    let text = "HloModule z\n\nENTRY e {\n  x = c64[2,1] parameter(0)\n  \
                ROOT y = c64[2,1] fft(x), fft_type=FFT, fft_length={0}\n}\n";
    let m = parse_module(text).expect("parses");
    let arg = array(ElementType::C64, &[2, 1], &[1.0, 2.0, 3.0, 4.0]);
    let got = run_on("nvptx-sim", &m, std::slice::from_ref(&arg)).expect("runs");
    let want = run_on("interpreter", &m, &[arg]).expect("evaluates");
    assert_eq!(got[0].data, want[0].data);
    assert!(parts(&got[0]).iter().all(|&x| x == 0.0));
}

/// `rng-bit-generator` on the simulator (and the cpu backend, whose kernel body it shares)
/// gives the interpreter's bits and new state, for ThreeFry (an odd dimension split, whose
/// last pair has no odd element: the shared body used to store one past the end, 64-bit
/// words) and Philox (2- and 3-word states, a count not a multiple of four, narrow types).
#[test]
fn rng_bit_generator_matches_the_interpreter() {
    let cases = [
        ("rng_three_fry", 2, "u32[7,5]"),
        ("rng_three_fry", 2, "u64[9]"),
        ("rng_three_fry", 2, "u8[3,4]"),
        ("rng_philox", 3, "u32[13]"),
        ("rng_philox", 2, "u64[5,3]"),
        ("rng_default", 3, "u16[2,9]"),
        ("rng_philox", 3, "f32[1000]"),
    ];
    for (algo, words, shape) in cases {
        let text = format!(
            "HloModule r\n\nENTRY e {{\n  s = u64[{words}] parameter(0)\n  \
             ROOT r = (u64[{words}], {shape}) rng-bit-generator(s), algorithm={algo}\n}}\n"
        );
        let m = parse_module(&text).expect("parses");
        let state: Vec<u8> = [0x0123_4567_89ab_cdefu64, u64::MAX - 2, 77]
            .iter()
            .take(words)
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let arg = Literal::Array(
            ArrayLiteral::new(ArrayShape::new(ElementType::U64, &[words as i64]), state)
                .expect("sized"),
        );
        let want = run_on("interpreter", &m, std::slice::from_ref(&arg)).expect("evaluates");
        for backend in ["nvptx-sim", "cpu"] {
            let got = run_on(backend, &m, std::slice::from_ref(&arg)).expect("runs");
            assert_eq!(got.len(), 2, "{backend}: {text}");
            for (g, w) in got.iter().zip(&want) {
                assert_eq!(g.shape, w.shape, "{backend}: {text}");
                assert_eq!(g.data, w.data, "{backend}: {text}");
            }
        }
    }
}

/// The PTX of the FFT kernels (one twiddle table, two tables past [`DIRECT_TABLE_MAX`], a
/// real input, a Hermitian read, Bluestein's chirp and filter) and of `rng-bit-generator`, for `sm_80` and `sm_90`, is
/// accepted by NVIDIA's assembler where one is found (`AXLE_PTXAS`, `PATH` or a CUDA
/// toolkit, as `tests/nvptx_ptxas.rs` finds it); where none is, the PTX must still hold
/// every kernel and the tables as module constants.
///
/// [`DIRECT_TABLE_MAX`]: axle_codegen_nvptx::fft::DIRECT_TABLE_MAX
#[test]
fn fft_and_rng_kernels_assemble() {
    use axle_codegen_nvptx::ptxas::{assemble, find_ptxas};
    use axle_codegen_nvptx::{emit_text, Emit, GpuArch, NvptxOptions};
    let text = "HloModule k\n\nENTRY e {\n  a = c64[4,12] parameter(0)\n  \
                b = f32[3,20000] parameter(1)\n  c = c128[2,5,4] parameter(2)\n  \
                s = u64[2] parameter(3)\n  d = f32[2,37] parameter(4)\n  \
                w = c64[2,19] fft(d), fft_type=RFFT, fft_length={37}\n  \
                x = c64[4,12] fft(a), fft_type=IFFT, fft_length={12}\n  \
                y = c64[3,10001] fft(b), fft_type=RFFT, fft_length={20000}\n  \
                z = f64[2,5,6] fft(c), fft_type=IRFFT, fft_length={5,6}\n  \
                r = (u64[2], u32[7,5]) rng-bit-generator(s), algorithm=rng_three_fry\n  \
                ROOT t = (c64[4,12], c64[3,10001], f64[2,5,6], (u64[2], u32[7,5]), \
                c64[2,19]) tuple(x, y, z, r, w)\n}\n";
    let m = parse_module(text).expect("parses");
    let ptxas = find_ptxas();
    for arch in GpuArch::ALL {
        let opts = NvptxOptions {
            gpu_arch: arch,
            ..Default::default()
        };
        let ptx = emit_text(&m, &opts, Emit::Ptx).expect("emits PTX");
        for name in [
            "axle_fft_w12_f32",
            "axle_fft_wc20000",
            "axle_fft_wf20000",
            "axle_fft_bs37_128_f32",
            "axle_fft_w74_f32",
            "_x",
            "_r",
            "_w",
        ] {
            assert!(ptx.contains(name), "{}: no {name} in the PTX", arch.name());
        }
        match &ptxas {
            Some(p) => {
                assemble(p, &ptx, arch, "fft").expect("ptxas accepts the PTX");
            }
            None => eprintln!(
                "no ptxas found: the PTX for {} is not assembled",
                arch.name()
            ),
        }
    }
}
