//! `rng-bit-generator`, bit-exact with XLA's expansion of it (`RngBitGeneratorExpander` over
//! the ThreeFry-2x32 and Philox-4x32 generators of XLA's `prng` library). The default algorithm
//! is Philox, as on XLA's CPU backend.
//!
//! State layout: `state[0]` is the key. ThreeFry uses `state[1]` as a 64-bit counter; Philox
//! uses `state[1..3]` as a 128-bit counter (or, with a 2-element state, the reversed state
//! `[state[1], state[0]]`, of which only the low word is written back). Values narrower than
//! 32 bits take the low bits of a 32-bit draw; 64-bit values combine two 32-bit words.

use super::shape_ops as so;
use super::{Evaluator, R};
use axle_ir::{ArrayLiteral, AttrKey, AttrValue, ElementType, InstId, Literal, Shape};

fn threefry2x32(x: [u32; 2], key: [u32; 2]) -> [u32; 2] {
    const ROT: [u32; 8] = [13, 15, 26, 6, 17, 29, 16, 24];
    let ks = [key[0], key[1], 0x1BD1_1BDA ^ key[0] ^ key[1]];
    let mut x = [x[0].wrapping_add(ks[0]), x[1].wrapping_add(ks[1])];
    let round = |x: &mut [u32; 2], r: u32| {
        x[0] = x[0].wrapping_add(x[1]);
        x[1] = x[1].rotate_left(r);
        x[1] ^= x[0];
    };
    for (i, inject) in [(0usize, 1u32), (1, 2), (0, 3), (1, 4), (0, 5)] {
        for r in 0..4 {
            round(&mut x, ROT[i * 4 + r]);
        }
        let s = inject as usize;
        x[0] = x[0].wrapping_add(ks[s % 3]);
        x[1] = x[1].wrapping_add(ks[(s + 1) % 3]).wrapping_add(inject);
    }
    x
}

fn philox4x32(mut x: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    const W_A: u32 = 0x9E37_79B9;
    const W_B: u32 = 0xBB67_AE85;
    const M_A: u64 = 0xD251_1F53;
    const M_B: u64 = 0xCD9E_8D57;
    let mut k = key;
    for _ in 0..10 {
        let p0 = x[0] as u64 * M_A;
        let p1 = x[2] as u64 * M_B;
        x = [
            ((p1 >> 32) as u32) ^ x[1] ^ k[0],
            p1 as u32,
            ((p0 >> 32) as u32) ^ x[3] ^ k[1],
            p0 as u32,
        ];
        k = [k[0].wrapping_add(W_A), k[1].wrapping_add(W_B)];
    }
    x
}

fn split(v: u64) -> [u32; 2] {
    [v as u32, (v >> 32) as u32]
}

/// ThreeFry 32-bit draws for `dims`, and the counter increment.
fn threefry32(key: u64, counter: u64, dims: &[i64]) -> (Vec<u32>, u64) {
    // XLA splits the shape in two halves along the first even dimension (else the largest one),
    // draws a pair of words per element of the half shape, and interleaves the pair along the
    // split dimension.
    let n = so::numel(dims);
    if dims.is_empty() {
        let o = threefry2x32(split(counter), split(key));
        return (vec![o[0]], 1);
    }
    let split_dim = dims.iter().position(|d| d % 2 == 0).unwrap_or_else(|| {
        let mut best = 0;
        for (i, &d) in dims.iter().enumerate() {
            if d > dims[best] {
                best = i;
            }
        }
        best
    });
    let mut half = dims.to_vec();
    half[split_dim] = (dims[split_dim] + 1) / 2;
    let hst = so::strides(&half);
    let mut out = vec![0u32; n];
    let mut idx = vec![0i64; dims.len()];
    for o in out.iter_mut() {
        let s = idx[split_dim];
        let mut lin = 0i64;
        for d in 0..dims.len() {
            let c = if d == split_dim { s / 2 } else { idx[d] };
            lin += c * hst[d];
        }
        let r = threefry2x32(split(counter.wrapping_add(lin as u64)), split(key));
        *o = r[(s % 2) as usize];
        for d in (0..dims.len()).rev() {
            idx[d] += 1;
            if idx[d] < dims[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    (out, so::numel(&half) as u64)
}

/// `rng-bit-generator`.
pub(crate) fn rng_bit_generator(
    ev: &mut Evaluator,
    id: InstId,
    state: &ArrayLiteral,
) -> R<Literal> {
    let m = ev.m;
    let (state_shape, data_shape) = match m.shape(id) {
        Shape::Tuple(ids) if ids.len() == 2 => (
            m.shape_of(ids[0]).as_array().cloned(),
            m.shape_of(ids[1]).as_array().cloned(),
        ),
        _ => (None, None),
    };
    let (Some(_), Some(data_shape)) = (state_shape, data_shape) else {
        return Err("rng-bit-generator returns a (state, data) tuple".into());
    };
    if state.ty() != ElementType::U64 || state.shape.rank() != 1 || state.len() < 2 {
        return Err("rng-bit-generator needs a u64 state of at least 2 elements".into());
    }
    let st: Vec<u64> = state
        .data
        .chunks_exact(8)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let algo = match m.attr(id, &AttrKey::Algorithm) {
        Some(AttrValue::Ident(s)) => s.to_string(),
        None => "rng_default".into(),
        _ => return Err("bad algorithm attribute".into()),
    };
    let ty = data_shape.ty;
    let bits = ty.bits();
    if !(ty.is_int() || ty.is_float()) || !matches!(bits, 8 | 16 | 32 | 64) {
        return Err(format!("rng-bit-generator does not produce {}", ty.name()).into());
    }
    let dims = data_shape.dims.to_vec();
    let n = so::numel(&dims);
    let key = st[0];
    let mut new_state = st.clone();
    let words: Vec<u64> = match algo.as_str() {
        "rng_three_fry" => {
            let counter = st[1];
            if bits == 64 {
                let mut out = Vec::with_capacity(n);
                for i in 0..n {
                    let o = threefry2x32(split(counter.wrapping_add(i as u64)), split(key));
                    out.push(o[0] as u64 | (o[1] as u64) << 32);
                }
                new_state[1] = counter.wrapping_add(n as u64);
                out
            } else {
                let (v, inc) = threefry32(key, counter, &dims);
                new_state[1] = counter.wrapping_add(inc);
                v.into_iter().map(|x| x as u64).collect()
            }
        }
        "rng_default" | "rng_philox" => {
            let (lo, hi) = if st.len() >= 3 {
                (st[1], st[2])
            } else {
                (st[1], st[0])
            };
            let k = split(key);
            let draws = if bits == 64 { 2 * n } else { n };
            let n4 = draws.div_ceil(4);
            let mut blocks = Vec::with_capacity(n4);
            for i in 0..n4 as u64 {
                let l = lo.wrapping_add(i);
                let h = if l < lo { hi.wrapping_add(1) } else { hi };
                let (a, b) = (split(l), split(h));
                blocks.push(philox4x32([a[0], a[1], b[0], b[1]], k));
            }
            let nl = lo.wrapping_add(n4 as u64);
            let nh = if nl < lo { hi.wrapping_add(1) } else { hi };
            if st.len() >= 3 {
                new_state[1] = nl;
                new_state[2] = nh;
            } else {
                new_state[1] = nl;
            }
            if bits == 64 {
                (0..n)
                    .map(|i| {
                        let b = blocks[i / 2];
                        let j = 2 * (i % 2);
                        b[j] as u64 | (b[j + 1] as u64) << 32
                    })
                    .collect()
            } else {
                (0..n).map(|i| blocks[i / 4][i % 4] as u64).collect()
            }
        }
        a => return Err(format!("unsupported rng algorithm {a}").into()),
    };
    let w = ty.byte_size();
    let mut data = Vec::with_capacity(n * w);
    for v in words {
        data.extend_from_slice(&v.to_le_bytes()[..w]);
    }
    let state_bytes: Vec<u8> = new_state.iter().flat_map(|v| v.to_le_bytes()).collect();
    Ok(Literal::Tuple(vec![
        Literal::Array(so::array(ElementType::U64, &state.shape.dims, state_bytes)),
        Literal::Array(so::array(ty, &dims, data)),
    ]))
}
