//! Complex dots on the nvptx backend's simulator: a loop kernel computes each output element
//! by the shared elemental form (the tiled dot kernels take real types only), unfused and
//! fused with an elementwise epilogue, batched, in `c64` and `c128`, against the
//! interpreter. A module of the `library` test binary.

use axle::ir::{
    compare_arrays, parse_module, ArrayLiteral, ArrayShape, ElementType, Literal, Tolerance,
};

use crate::nvptx_fft::run_on;

/// A complex array of `dims` with reproducible parts in `[-1, 1)`.
fn complex(ty: ElementType, dims: &[i64], seed: u64) -> Literal {
    let n: i64 = dims.iter().product();
    let data: Vec<u8> = (0..2 * n as u64)
        .flat_map(|i| {
            let v = axle_testkit::noise(seed, i);
            if ty == ElementType::C128 {
                v.to_le_bytes().to_vec()
            } else {
                (v as f32).to_le_bytes().to_vec()
            }
        })
        .collect();
    Literal::Array(ArrayLiteral::new(ArrayShape::new(ty, dims), data).expect("sized"))
}

#[test]
fn complex_dots_match_the_interpreter() {
    let cases = [
        (
            "c64",
            "HloModule d\n\nENTRY e {\n  a = c64[5,5] parameter(0)\n  b = c64[5,1] parameter(1)\n  \
             c = c64[5,1] parameter(2)\n  d = c64[5,1] dot(a, b), lhs_contracting_dims={1}, \
             rhs_contracting_dims={0}\n  ROOT s = c64[5,1] add(d, c)\n}\n",
            vec![vec![5, 5], vec![5, 1], vec![5, 1]],
        ),
        (
            "c128",
            "HloModule d\n\nENTRY e {\n  a = c128[3,4,33] parameter(0)\n  \
             b = c128[3,33,6] parameter(1)\n  ROOT d = c128[3,4,6] dot(a, b), \
             lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, \
             rhs_contracting_dims={1}\n}\n",
            vec![vec![3, 4, 33], vec![3, 33, 6]],
        ),
        (
            "c64",
            "HloModule d\n\nENTRY e {\n  a = c64[7,40] parameter(0)\n  b = c64[9,40] parameter(1)\n  \
             d = c64[7,9] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={1}\n  \
             ROOT n = c64[7,9] negate(d)\n}\n",
            vec![vec![7, 40], vec![9, 40]],
        ),
    ];
    for (ty, text, shapes) in cases {
        let ty = ElementType::from_name(ty).expect("a type");
        let m = parse_module(text).expect("parses");
        let args: Vec<Literal> = shapes
            .iter()
            .enumerate()
            .map(|(k, d)| complex(ty, d, k as u64 + 1))
            .collect();
        let want = run_on("interpreter", &m, &args).expect("evaluates");
        let got = run_on("nvptx-sim", &m, &args).expect("runs on nvptx-sim");
        let tol = if ty == ElementType::C128 {
            Tolerance::Close {
                rtol: 1e-13,
                atol: 1e-14,
            }
        } else {
            Tolerance::Close {
                rtol: 1e-5,
                atol: 1e-6,
            }
        };
        compare_arrays(&want[0], &got[0], tol).unwrap_or_else(|e| panic!("{text}: {e}"));
    }
}
