//! `.npy` I/O against the shared corpus, hand-made odd and corrupt files, and the comparison
//! helper on the corpus outputs.
//!
//! The corpus is `corpus/` in the shared data directory (`common::shared_dir`: `$AXLE_SHARED`, else
//! `../shared` beside the repository, else `/work/shared`).

mod common;

use axle_ir::compare::{compare_arrays, Tolerance};
use axle_ir::npy::{decode_npy, encode_npy, npy_descr, read_npy, read_npy_as, write_npy};
use axle_ir::{ArrayLiteral, ArrayShape, ElementType, NpyError, NpyErrorKind};
use quickcheck::{QuickCheck, TestResult};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn corpus_dir() -> PathBuf {
    let dir = common::shared_dir().join("corpus");
    assert!(
        dir.join("manifest.json").is_file(),
        "corpus not found at {} (set AXLE_SHARED to the shared directory)",
        dir.display()
    );
    dir
}

/// One array entry of the manifest.
struct Entry {
    ty: ElementType,
    dims: Vec<i64>,
    /// `None` for inputs.
    tolerance: Option<Tolerance>,
}

fn parse_tolerance(v: &Value) -> Tolerance {
    match v {
        Value::String(s) if s == "exact" => Tolerance::Exact,
        Value::Object(o) => Tolerance::Close {
            rtol: o["rtol"].as_f64().expect("rtol"),
            atol: o["atol"].as_f64().expect("atol"),
        },
        other => panic!("unknown tolerance {other}"),
    }
}

/// Every array file named in the manifest.
fn manifest() -> BTreeMap<String, Entry> {
    let text = std::fs::read_to_string(corpus_dir().join("manifest.json")).unwrap();
    let json: Value = serde_json::from_str(&text).unwrap();
    let mut entries = BTreeMap::new();
    for case in json["cases"].as_array().unwrap() {
        for (key, is_output) in [("inputs", false), ("outputs", true)] {
            for e in case[key].as_array().unwrap() {
                let dtype = e["dtype"].as_str().unwrap();
                let entry = Entry {
                    ty: ElementType::from_name(dtype)
                        .unwrap_or_else(|| panic!("unknown dtype {dtype}")),
                    dims: e["shape"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|d| d.as_i64().unwrap())
                        .collect(),
                    tolerance: is_output.then(|| parse_tolerance(&e["tolerance"])),
                };
                let file = e["file"].as_str().unwrap().to_string();
                assert!(
                    entries.insert(file.clone(), entry).is_none(),
                    "{file} twice"
                );
            }
        }
    }
    entries
}

/// Every `.npy` file in the corpus directory, sorted.
fn corpus_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "npy"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .npy files in the corpus");
    files
}

fn file_name(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

#[test]
fn corpus_files_match_the_manifest() {
    let manifest = manifest();
    let files = corpus_files();
    let names: Vec<String> = files.iter().map(|p| file_name(p)).collect();
    for name in manifest.keys() {
        assert!(
            names.contains(name),
            "{name} is in the manifest but not on disk"
        );
    }
    for path in &files {
        let name = file_name(path);
        let entry = manifest
            .get(&name)
            .unwrap_or_else(|| panic!("{name} is not in the manifest"));
        let lit = read_npy_as(path, entry.ty).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(lit.ty(), entry.ty, "{name}");
        assert_eq!(&*lit.shape.dims, &entry.dims[..], "{name}");
        assert_eq!(lit.data.len(), lit.len() * entry.ty.byte_size(), "{name}");
        // Without a requested type, a file reads as its own dtype: bf16 is stored as u16.
        let own = read_npy(path).unwrap();
        let own_ty = if entry.ty == ElementType::BF16 {
            ElementType::U16
        } else {
            entry.ty
        };
        assert_eq!(own.ty(), own_ty, "{name}");
        assert_eq!(own.data, lit.data, "{name}");
    }
}

#[test]
fn corpus_round_trips_byte_identical() {
    let manifest = manifest();
    let dir = tempfile::tempdir().unwrap();
    for path in corpus_files() {
        let name = file_name(&path);
        let original = std::fs::read(&path).unwrap();
        let ty = manifest[&name].ty;
        // Read as the manifest type (bf16 included) and as the file's own type.
        for lit in [read_npy_as(&path, ty).unwrap(), read_npy(&path).unwrap()] {
            assert_eq!(encode_npy(&lit).unwrap(), original, "{name} encoded");
            let out = dir.path().join(&name);
            write_npy(&out, &lit).unwrap();
            assert_eq!(std::fs::read(&out).unwrap(), original, "{name} written");
            assert_eq!(
                read_npy_as(&out, lit.ty()).unwrap(),
                lit,
                "{name} read back"
            );
        }
    }
    // Nothing but the written files is left in the directory.
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        corpus_files().len()
    );
}

#[test]
fn corpus_outputs_match_themselves_and_not_a_perturbation() {
    let manifest = manifest();
    let mut perturbed = 0;
    for (name, entry) in &manifest {
        let Some(tol) = entry.tolerance else { continue };
        let lit = read_npy_as(corpus_dir().join(name), entry.ty).unwrap();
        compare_arrays(&lit, &lit, tol).unwrap_or_else(|m| panic!("{name}: {m}"));
        // Change the first element to something far away; the comparison must notice.
        if lit.is_empty() {
            continue;
        }
        let mut changed = lit.clone();
        let w = entry.ty.byte_size();
        let v = lit.get_f64(0);
        let new = if entry.ty.is_floating() {
            axle_ir::literal::f64_to_element(entry.ty, if v.abs() < 1e3 { v + 1e3 } else { 0.0 })
        } else if entry.ty.is_pred() {
            vec![(v == 0.0) as u8]
        } else {
            axle_ir::literal::i128_to_element(entry.ty, lit.get_i128(0) ^ 1)
        };
        changed.data[..w].copy_from_slice(&new);
        let m = compare_arrays(&lit, &changed, tol).unwrap_err();
        assert!(m.to_string().contains("1 of"), "{name}: {m}");
        perturbed += 1;
    }
    assert!(perturbed > 100, "only {perturbed} outputs checked");
}

/// A version 1.0 `.npy` file with header dict `dict` (padded as NumPy pads it) and `data`.
fn npy_bytes(dict: &str, data: &[u8]) -> Vec<u8> {
    let mut text = dict.as_bytes().to_vec();
    while !(10 + text.len() + 1).is_multiple_of(64) {
        text.push(b' ');
    }
    text.push(b'\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(text.len() as u16).to_le_bytes());
    out.extend_from_slice(&text);
    out.extend_from_slice(data);
    out
}

fn header(descr: &str, fortran: bool, shape: &str) -> String {
    let f = if fortran { "True" } else { "False" };
    format!("{{'descr': '{descr}', 'fortran_order': {f}, 'shape': {shape}, }}")
}

/// Writes `bytes` to a file and reads it back with `read_npy`.
fn read_bytes(bytes: &[u8]) -> Result<ArrayLiteral, NpyError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("case.npy");
    std::fs::write(&path, bytes).unwrap();
    let result = read_npy(&path);
    if let Err(e) = &result {
        // Every error names the file.
        assert_eq!(e.path, path);
        assert!(
            e.to_string().starts_with(&path.display().to_string()),
            "{e}"
        );
    }
    result
}

fn read_err(bytes: &[u8]) -> NpyError {
    match read_bytes(bytes) {
        Ok(lit) => panic!("expected an error, read {:?}", lit.shape),
        Err(e) => e,
    }
}

fn valid_file() -> Vec<u8> {
    encode_npy(&ArrayLiteral::from_slice(
        &[2, 3],
        &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0],
    ))
    .unwrap()
}

#[test]
fn truncated_files_are_rejected() {
    let good = valid_file();
    for len in [0, 3, 8, 9, 30, 127] {
        let e = read_err(&good[..len]);
        assert!(
            matches!(e.kind, NpyErrorKind::TruncatedHeader { .. }),
            "{len}: {e}"
        );
        assert!(e.to_string().contains("truncated"), "{e}");
    }
    // Cut inside the data: the header is fine, the data is short.
    let e = read_err(&good[..good.len() - 1]);
    let NpyErrorKind::TruncatedData {
        expected, actual, ..
    } = e.kind
    else {
        panic!("{e}")
    };
    assert_eq!((expected, actual), (24, 23));
    assert!(e.to_string().contains("needs 24 bytes of data"), "{e}");
    // Version 2.0 with a header length larger than the file.
    let mut v2 = b"\x93NUMPY\x02\x00".to_vec();
    v2.extend_from_slice(&u32::MAX.to_le_bytes());
    let e = read_err(&v2);
    assert!(
        matches!(e.kind, NpyErrorKind::TruncatedHeader { .. }),
        "{e}"
    );
}

#[test]
fn a_corpus_file_cut_short_is_truncated_data() {
    let path = corpus_files().into_iter().next().unwrap();
    let bytes = std::fs::read(path).unwrap();
    let e = read_err(&bytes[..bytes.len() - 4]);
    assert!(matches!(e.kind, NpyErrorKind::TruncatedData { .. }), "{e}");
}

#[test]
fn data_shorter_or_longer_than_the_shape_is_rejected() {
    let short = npy_bytes(&header("<f4", false, "(4,)"), &[0; 12]);
    let e = read_err(&short);
    assert!(matches!(e.kind, NpyErrorKind::TruncatedData { .. }), "{e}");
    assert!(e.to_string().contains("[4]"), "{e}");
    let long = npy_bytes(&header("<f4", false, "(2,)"), &[0; 12]);
    let e = read_err(&long);
    assert!(matches!(e.kind, NpyErrorKind::TrailingData { .. }), "{e}");
    // An empty array has no data at all.
    let empty = npy_bytes(&header("<f4", false, "(0, 5)"), &[]);
    let lit = read_bytes(&empty).unwrap();
    assert_eq!(&*lit.shape.dims, &[0, 5]);
    assert!(lit.data.is_empty());
}

#[test]
fn bad_magic_is_not_an_npy_file() {
    let mut bad = valid_file();
    bad[1] = b'n';
    let e = read_err(&bad);
    assert!(matches!(e.kind, NpyErrorKind::NotNpy), "{e}");
    assert!(e.to_string().contains("not a .npy file"), "{e}");
    let e = read_err(b"HloModule jit_f\n");
    assert!(matches!(e.kind, NpyErrorKind::NotNpy), "{e}");
    let mut version = valid_file();
    version[6] = 9;
    let e = read_err(&version);
    assert!(
        matches!(
            e.kind,
            NpyErrorKind::UnsupportedVersion { major: 9, minor: 0 }
        ),
        "{e}"
    );
}

#[test]
fn bad_headers_are_rejected() {
    let data = [0u8; 16];
    let cases: Vec<(String, &str)> = vec![
        ("this is not python".into(), "not a Python literal"),
        ("[1, 2, 3]".into(), "expected a dict"),
        (
            "{'descr': '<f4', 'shape': (4,)}".into(),
            "missing key 'fortran_order'",
        ),
        (
            "{'descr': '<f4', 'fortran_order': False}".into(),
            "missing key 'shape'",
        ),
        (
            "{'fortran_order': False, 'shape': (4,)}".into(),
            "missing key 'descr'",
        ),
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'extra': 1}".into(),
            "unexpected key 'extra'",
        ),
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'shape': (4,)}".into(),
            "duplicate key",
        ),
        (header("<f4", false, "(-1,)"), "non-negative"),
        (header("<f4", false, "(1.5,)"), "non-negative"),
        (
            header("<f4", false, "(99999999999999999999999,)"),
            "non-negative",
        ),
        (header("<f4", false, "4"), "'shape' must be a tuple"),
        (
            header("<f4", false, "(4294967296, 4294967296, 16)"),
            "too many elements",
        ),
        (header("<f8", false, "(4611686018427387904,)"), "too large"),
        (
            "{'descr': '<f4', 'fortran_order': 'no', 'shape': (4,), }".into(),
            "'fortran_order' must be True or False",
        ),
        (
            "{'descr': 4, 'fortran_order': False, 'shape': (4,), }".into(),
            "'descr' must be a string",
        ),
        (
            format!(
                "{{'descr': '<f4', 'fortran_order': False, 'shape': {}4{}, }}",
                "(".repeat(5000),
                ",)".repeat(5000)
            ),
            "nest more than",
        ),
    ];
    for (dict, needle) in cases {
        let e = read_err(&npy_bytes(&dict, &data));
        assert!(matches!(e.kind, NpyErrorKind::BadHeader(_)), "{dict}: {e}");
        assert!(e.to_string().contains(needle), "{dict}: {e}");
    }
    // A header that is not UTF-8.
    let mut bytes = npy_bytes(&header("<f4", false, "(4,)"), &data);
    bytes[12] = 0xff;
    let e = read_err(&bytes);
    assert!(e.to_string().contains("UTF-8"), "{e}");
}

#[test]
fn unsupported_dtypes_are_named() {
    for descr in ["<U3", "|O", "<f16", "|S5", "<M8[ns]", "|V8", "|i4"] {
        let e = read_err(&npy_bytes(&header(descr, false, "(2,)"), &[0; 16]));
        assert!(
            matches!(e.kind, NpyErrorKind::UnsupportedDtype { .. }),
            "{descr}: {e}"
        );
        assert!(e.to_string().contains(descr), "{e}");
    }
    let structured = "{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': False, \
                      'shape': (2,), }";
    let e = read_err(&npy_bytes(structured, &[0; 16]));
    assert!(
        matches!(e.kind, NpyErrorKind::UnsupportedDtype { .. }),
        "{e}"
    );
    assert!(e.to_string().contains("structured"), "{e}");
}

#[test]
fn read_as_requires_the_dtype_except_bf16_from_u16() {
    let dir = tempfile::tempdir().unwrap();
    let f32_path = dir.path().join("f32.npy");
    write_npy(&f32_path, &ArrayLiteral::from_slice(&[2], &[1.0f32, 2.0])).unwrap();
    for ty in [ElementType::S32, ElementType::BF16, ElementType::F64] {
        let e = read_npy_as(&f32_path, ty).unwrap_err();
        let NpyErrorKind::DtypeMismatch {
            expected, found, ..
        } = &e.kind
        else {
            panic!("{e}")
        };
        assert_eq!((*expected, *found), (ty, ElementType::F32));
        assert!(e.to_string().contains("'<f4'"), "{e}");
    }
    let u16_path = dir.path().join("u16.npy");
    let bits = [
        half::bf16::from_f32(1.5).to_bits(),
        half::bf16::NAN.to_bits(),
    ];
    write_npy(&u16_path, &ArrayLiteral::from_slice(&[2], &bits)).unwrap();
    let lit = read_npy_as(&u16_path, ElementType::BF16).unwrap();
    assert_eq!(lit.ty(), ElementType::BF16);
    assert_eq!(lit.get_f64(0), 1.5);
    assert!(lit.get_f64(1).is_nan());
    assert_eq!(
        read_npy_as(&u16_path, ElementType::U16).unwrap().ty(),
        ElementType::U16
    );
    assert!(read_npy_as(&u16_path, ElementType::F16).is_err());
    // A bf16 literal is written as uint16.
    let bf16_path = dir.path().join("bf16.npy");
    write_npy(&bf16_path, &lit).unwrap();
    assert!(String::from_utf8_lossy(&std::fs::read(&bf16_path).unwrap()).contains("'<u2'"));
    assert_eq!(
        std::fs::read(&bf16_path).unwrap(),
        std::fs::read(&u16_path).unwrap()
    );
}

#[test]
fn missing_file_is_an_io_error_naming_the_path() {
    let e = read_npy("/nonexistent/dir/x.npy").unwrap_err();
    assert!(matches!(e.kind, NpyErrorKind::Io(_)), "{e}");
    assert!(
        e.to_string()
            .starts_with("/nonexistent/dir/x.npy: I/O error"),
        "{e}"
    );
}

#[test]
fn big_endian_files_are_converted() {
    let values = [1.5f32, -2.0, 3.25, f32::INFINITY, 0.0, -0.0];
    let be: Vec<u8> = values.iter().flat_map(|v| v.to_be_bytes()).collect();
    let lit = read_bytes(&npy_bytes(&header(">f4", false, "(2, 3)"), &be)).unwrap();
    assert_eq!(lit.to_vec::<f32>().unwrap(), values);
    let ints = [1i64, -2, i64::MAX];
    let be: Vec<u8> = ints.iter().flat_map(|v| v.to_be_bytes()).collect();
    let lit = read_bytes(&npy_bytes(&header(">i8", false, "(3,)"), &be)).unwrap();
    assert_eq!(lit.to_vec::<i64>().unwrap(), ints);
    // Complex: each part is swapped on its own; the real part stays first.
    let mut be = Vec::new();
    for v in [1.0f32, 2.0, -3.0, 4.5] {
        be.extend_from_slice(&v.to_be_bytes());
    }
    let lit = read_bytes(&npy_bytes(&header(">c8", false, "(2,)"), &be)).unwrap();
    assert_eq!(lit.ty(), ElementType::C64);
    let le: Vec<u8> = [1.0f32, 2.0, -3.0, 4.5]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(lit.data, le);
    // A big-endian file writes back as little-endian, as NumPy would save the same values.
    let back = decode_npy(&encode_npy(&lit).unwrap()).unwrap();
    assert_eq!(back, lit);
}

#[test]
fn fortran_order_files_are_transposed_to_row_major() {
    // [[0, 1, 2], [3, 4, 5]] in column-major order.
    let col: Vec<u8> = [0i16, 3, 1, 4, 2, 5]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let lit = read_bytes(&npy_bytes(&header("<i2", true, "(2, 3)"), &col)).unwrap();
    assert_eq!(&*lit.shape.dims, &[2, 3]);
    assert_eq!(lit.to_vec::<i16>().unwrap(), [0, 1, 2, 3, 4, 5]);
    // Fortran order and big-endian together, rank 3: element (i, j, k) = 100i + 10j + k.
    let dims = [2usize, 3, 4];
    let mut col = Vec::new();
    for k in 0..dims[2] {
        for j in 0..dims[1] {
            for i in 0..dims[0] {
                col.extend_from_slice(&((100 * i + 10 * j + k) as f64).to_be_bytes());
            }
        }
    }
    let lit = read_bytes(&npy_bytes(&header(">f8", true, "(2, 3, 4)"), &col)).unwrap();
    let want: Vec<f64> = (0..2)
        .flat_map(|i| (0..3).flat_map(move |j| (0..4).map(move |k| (100 * i + 10 * j + k) as f64)))
        .collect();
    assert_eq!(lit.to_vec::<f64>().unwrap(), want);
}

#[test]
fn bool_bytes_other_than_one_read_as_true() {
    let lit = read_bytes(&npy_bytes(&header("|b1", false, "(3,)"), &[0, 1, 2])).unwrap();
    assert_eq!(lit.to_vec::<bool>().unwrap(), [false, true, true]);
    assert_eq!(lit.data, [0, 1, 1]);
}

#[test]
fn every_npy_dtype_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let shapes: [&[i64]; 5] = [&[], &[0], &[3], &[2, 0, 3], &[2, 3, 4]];
    let mut written = 0;
    for &ty in ElementType::ALL {
        let Some(descr) = npy_descr(ty) else {
            continue;
        };
        for dims in shapes {
            let n: i64 = dims.iter().product();
            let data: Vec<u8> = (0..n as usize * ty.byte_size())
                .map(|i| {
                    if ty.is_pred() {
                        (i % 2) as u8
                    } else if ty.bits() < 8 {
                        // A sub-byte element's byte holds only its low bits.
                        (i * 37 + 5) as u8 & ((1 << ty.bits()) - 1)
                    } else {
                        (i * 37 + 5) as u8
                    }
                })
                .collect();
            let lit = ArrayLiteral {
                shape: ArrayShape::new(ty, dims),
                data,
            };
            let path = dir.path().join(format!("{ty}_{}.npy", dims.len()));
            write_npy(&path, &lit).unwrap();
            let bytes = std::fs::read(&path).unwrap();
            assert!(String::from_utf8_lossy(&bytes).contains(descr), "{ty}");
            assert_eq!(
                (bytes.len() - lit.data.len()) % 64,
                0,
                "{ty}: data not aligned"
            );
            assert_eq!(read_npy_as(&path, ty).unwrap(), lit, "{ty} {dims:?}");
            written += 1;
        }
    }
    // 15 numpy dtypes, bf16 as uint16, and s2, s4, u2 and u4 as int8 and uint8.
    assert_eq!(written, 19 * shapes.len());
}

/// Every value of `ty` (a 2- or 4-bit integer type), in order, as one-byte literal elements.
fn sub_byte_values(ty: ElementType) -> (Vec<i64>, ArrayLiteral) {
    let bits = ty.bits() as i64;
    let values: Vec<i64> = if ty.is_signed_int() {
        (-(1 << (bits - 1))..(1 << (bits - 1))).collect()
    } else {
        (0..(1 << bits)).collect()
    };
    let lit = ArrayLiteral {
        shape: ArrayShape::new(ty, &[values.len() as i64]),
        data: values
            .iter()
            .map(|&v| (v as u8) & ((1 << bits) - 1))
            .collect(),
    };
    (values, lit)
}

#[test]
fn sub_byte_integers_travel_as_int8_and_uint8_values() {
    use ElementType::*;
    let dir = tempfile::tempdir().unwrap();
    for (ty, carrier, descr) in [
        (S2, S8, "|i1"),
        (S4, S8, "|i1"),
        (U2, U8, "|u1"),
        (U4, U8, "|u1"),
    ] {
        let (values, lit) = sub_byte_values(ty);
        let path = dir.path().join(format!("{ty}.npy"));
        write_npy(&path, &lit).unwrap();
        // The file is what numpy writes for the values as int8/uint8 (s4's -1 is 0xff there,
        // 0x0f in the literal).
        let plain = read_npy(&path).unwrap();
        assert_eq!(plain.ty(), carrier, "{ty}");
        let bytes: Vec<u8> = values.iter().map(|&v| v as u8).collect();
        assert_eq!(plain.data, bytes, "{ty}");
        assert!(String::from_utf8_lossy(&std::fs::read(&path).unwrap()).contains(descr));
        assert_eq!(npy_descr(ty), Some(descr));
        // Read as the sub-byte type, it is the literal again.
        assert_eq!(read_npy_as(&path, ty).unwrap(), lit, "{ty}");
    }
}

#[test]
fn sub_byte_literals_write_their_low_bits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s4.npy");
    // Bytes whose upper bits are set: the element is the low nibble (0xf7 is 7, 0x08 is -8).
    let lit = ArrayLiteral {
        shape: ArrayShape::new(ElementType::S4, &[3]),
        data: vec![0xf7, 0x08, 0x1f],
    };
    write_npy(&path, &lit).unwrap();
    assert_eq!(
        read_npy(&path).unwrap().to_vec::<i8>().unwrap(),
        [7, -8, -1]
    );
    assert_eq!(
        read_npy_as(&path, ElementType::S4).unwrap().data,
        [0x07, 0x08, 0x0f]
    );
}

#[test]
fn sub_byte_values_out_of_range_name_the_file_index_and_value() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, &[u8], ElementType, &str); 5] = [
        (
            "|i1",
            "(2, 3)",
            &[0, 1, 7, -8i8 as u8, 8, 0],
            ElementType::S4,
            "element 4 (index [1, 1]) holds 8, outside the range of s4 [-8, 7]",
        ),
        (
            "|i1",
            "(4,)",
            &[0, -9i8 as u8, 0, 0],
            ElementType::S4,
            "element 1 (index [1]) holds -9, outside the range of s4 [-8, 7]",
        ),
        (
            "|u1",
            "(2, 2)",
            &[15, 0, 3, 16],
            ElementType::U4,
            "element 3 (index [1, 1]) holds 16, outside the range of u4 [0, 15]",
        ),
        (
            "|i1",
            "()",
            &[2],
            ElementType::S2,
            "element 0 (index []) holds 2, outside the range of s2 [-2, 1]",
        ),
        (
            "|u1",
            "(3,)",
            &[3, 255, 0],
            ElementType::U2,
            "element 1 (index [1]) holds 255, outside the range of u2 [0, 3]",
        ),
    ];
    for (descr, shape, data, ty, msg) in cases {
        let path = dir.path().join("bad.npy");
        std::fs::write(&path, npy_bytes(&header(descr, false, shape), data)).unwrap();
        let e = read_npy_as(&path, ty).unwrap_err();
        assert!(matches!(e.kind, NpyErrorKind::OutOfRange { .. }), "{e}");
        assert_eq!(e.to_string(), format!("{}: {msg}", path.display()));
    }
    // A column-major file is checked in row-major order: [[0, 1, 2], [3, 9, 5]] stored as
    // 0 3 1 9 2 5 has its bad value at [1, 1], row-major element 4.
    let path = dir.path().join("fortran.npy");
    std::fs::write(
        &path,
        npy_bytes(&header("|i1", true, "(2, 3)"), &[0, 3, 1, 9, 2, 5]),
    )
    .unwrap();
    let e = read_npy_as(&path, ElementType::S4).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: element 4 (index [1, 1]) holds 9, outside the range of s4 [-8, 7]",
            path.display()
        )
    );
}

#[test]
fn sub_byte_types_take_only_their_carrier_dtype() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.npy");
    let cases = [
        (
            "|u1",
            ElementType::S4,
            "expected element type s4 ('|i1') but the file holds u8 ('|u1')",
        ),
        (
            "|i1",
            ElementType::U2,
            "expected element type u2 ('|u1') but the file holds s8 ('|i1')",
        ),
        (
            "<i2",
            ElementType::S4,
            "expected element type s4 ('|i1') but the file holds s16 ('<i2')",
        ),
    ];
    for (descr, ty, msg) in cases {
        let width = if descr == "<i2" { 2 } else { 1 };
        std::fs::write(
            &path,
            npy_bytes(&header(descr, false, "(2,)"), &vec![0; 2 * width]),
        )
        .unwrap();
        let e = read_npy_as(&path, ty).unwrap_err();
        assert_eq!(e.to_string(), format!("{}: {msg}", path.display()));
    }
}

#[test]
fn types_without_an_npy_dtype_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for ty in [
        ElementType::F8E5M2,
        ElementType::F8E4M3FN,
        ElementType::F4E2M1FN,
    ] {
        let lit = ArrayLiteral::zeros(ArrayShape::new(ty, &[2]));
        let e = write_npy(dir.path().join("x.npy"), &lit).unwrap_err();
        assert!(
            matches!(e.kind, NpyErrorKind::UnwritableType(t) if t == ty),
            "{e}"
        );
        assert!(e.to_string().contains(ty.name()), "{e}");
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn failed_writes_leave_no_partial_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.npy");
    let good = ArrayLiteral::from_slice(&[2], &[1i32, 2]);
    write_npy(&path, &good).unwrap();
    let before = std::fs::read(&path).unwrap();
    // A literal whose data does not fit its shape: the old file stays as it was.
    let mut bad = good.clone();
    bad.data.pop();
    let e = write_npy(&path, &bad).unwrap_err();
    assert!(matches!(e.kind, NpyErrorKind::InvalidLiteral(_)), "{e}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    // The destination is a directory: the rename fails and the temporary file is removed.
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join("keep"), b"x").unwrap();
    let e = write_npy(&sub, &good).unwrap_err();
    assert!(matches!(e.kind, NpyErrorKind::Io(_)), "{e}");
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| file_name(&e.unwrap().path()))
        .collect();
    names.sort();
    assert_eq!(names, ["out.npy", "sub"]);
    // The directory does not exist.
    let e = write_npy(dir.path().join("missing/out.npy"), &good).unwrap_err();
    assert!(matches!(e.kind, NpyErrorKind::Io(_)), "{e}");
    assert!(e.to_string().contains("missing/out.npy"), "{e}");
}

#[cfg(unix)]
#[test]
fn written_files_get_ordinary_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain");
    std::fs::write(&plain, b"").unwrap();
    let path = dir.path().join("x.npy");
    write_npy(&path, &ArrayLiteral::scalar(1.0f32)).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), mode(&plain));
}

#[test]
fn mutated_files_never_panic() {
    fn prop(flips: Vec<(u16, u8)>, cut: u16) -> TestResult {
        let mut bytes = valid_file();
        for (at, v) in flips {
            let at = at as usize % bytes.len();
            bytes[at] = v;
        }
        bytes.truncate(cut as usize % (bytes.len() + 1));
        // Any result is fine; what matters is that decoding returns.
        let _ = decode_npy(&bytes);
        TestResult::passed()
    }
    QuickCheck::new()
        .tests(2000)
        .quickcheck(prop as fn(Vec<(u16, u8)>, u16) -> TestResult);
}

#[test]
fn header_text_mutations_never_panic() {
    fn prop(text: String, data: Vec<u8>) -> TestResult {
        let _ = decode_npy(&npy_bytes(&text, &data));
        let dict = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({text}), }}");
        let _ = decode_npy(&npy_bytes(&dict, &data));
        TestResult::passed()
    }
    QuickCheck::new()
        .tests(2000)
        .quickcheck(prop as fn(String, Vec<u8>) -> TestResult);
}
