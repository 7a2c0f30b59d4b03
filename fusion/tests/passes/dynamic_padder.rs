//! `dynamic-padder` against the evaluator: each dynamic module (its sizes entry parameters),
//! made static by the pass, gives for every size from 0 to the bound what the evaluator gives
//! for a static module written for that size (the defined elements sliced out, a dynamic result
//! padded with zeros to its bound), bit for bit; and the forms it cannot rewrite are refused
//! naming the op and "dynamic dimension".

use axle_analysis::evaluate;
use axle_fusion::dynamic_padder::has_dynamic_sizes;
use axle_fusion::run_on_copy;
use axle_ir::{compare_literals, parse_module, ArrayLiteral, Literal, Module, Tolerance};

/// Deterministic small integers in `[-9, 9]` (exact in f32 sums and products).
fn ints(n: usize, seed: u64) -> Vec<i32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % 19) as i32 - 9
        })
        .collect()
}

fn s32(dims: &[i64], seed: u64) -> Literal {
    let n: i64 = dims.iter().product();
    Literal::Array(ArrayLiteral::from_slice(dims, &ints(n as usize, seed)))
}

fn f32s(dims: &[i64], seed: u64) -> Literal {
    let n: i64 = dims.iter().product();
    let v: Vec<f32> = ints(n as usize, seed)
        .into_iter()
        .map(|x| x as f32)
        .collect();
    Literal::Array(ArrayLiteral::from_slice(dims, &v))
}

fn size(v: i32) -> Literal {
    Literal::Array(ArrayLiteral::from_slice(&[], &[v]))
}

fn padded(text: &str) -> Module {
    let m = parse_module(text).expect("the dynamic module parses");
    assert!(has_dynamic_sizes(&m));
    let p = run_on_copy(&m, "dynamic-padder,dce").expect("the padder rewrites it");
    assert!(!has_dynamic_sizes(&p), "sizes are left");
    let text = axle_ir::print_module(&p);
    assert!(!text.contains("<="), "a dynamic shape is left:\n{text}");
    p
}

/// Checks `dynamic` (inputs `data` then one size each) against `reference(sizes)` (inputs
/// `data`) for every combination of `sizes` drawn from `ranges`.
fn check(
    dynamic: &str,
    data: &[Literal],
    ranges: &[std::ops::RangeInclusive<i32>],
    reference: impl Fn(&[i32]) -> String,
) {
    let p = padded(dynamic);
    let mut combos: Vec<Vec<i32>> = vec![Vec::new()];
    for r in ranges {
        combos = combos
            .into_iter()
            .flat_map(|c| {
                r.clone().map(move |v| {
                    let mut c = c.clone();
                    c.push(v);
                    c
                })
            })
            .collect();
    }
    for sizes in combos {
        let mut args = data.to_vec();
        args.extend(sizes.iter().map(|&s| size(s)));
        let got = evaluate(&p, &args).expect("the padded module evaluates");
        let r = parse_module(&reference(&sizes)).expect("the reference parses");
        let want = evaluate(&r, data).expect("the reference evaluates");
        if let Err(e) = compare_literals(&want, &got, Tolerance::Exact) {
            panic!("sizes {sizes:?}: {e:?}\n{}", axle_ir::print_module(&p));
        }
    }
}

const ADD: &str = "add { a = s32[] parameter(0)\n b = s32[] parameter(1)\n ROOT c = s32[] add(a, b) }\n\
                   max { a = s32[] parameter(0)\n b = s32[] parameter(1)\n ROOT c = s32[] maximum(a, b) }\n";

#[test]
fn reduce_over_a_dynamic_dimension_counts_only_the_defined_elements() {
    let dynamic = format!(
        "HloModule m\n{ADD}ENTRY e {{\n x = s32[3,8] parameter(0)\n n = s32[] parameter(1)\n \
         d = s32[3,<=8] set-dimension-size(x, n), dimensions={{1}}\n z = s32[] constant(0)\n \
         lo = s32[] constant(-2147483648)\n s = s32[3] reduce(d, z), dimensions={{1}}, to_apply=add\n \
         m = s32[3] reduce(d, lo), dimensions={{1}}, to_apply=max\n ROOT t = (s32[3], s32[3]) tuple(s, m)\n}}\n"
    );
    check(&dynamic, &[s32(&[3, 8], 1)], &[0..=8], |s| {
        format!(
            "HloModule r\n{ADD}ENTRY e {{\n x = s32[3,8] parameter(0)\n d = s32[3,{n}] slice(x), slice={{[0:3], [0:{n}]}}\n \
             z = s32[] constant(0)\n lo = s32[] constant(-2147483648)\n s = s32[3] reduce(d, z), dimensions={{1}}, to_apply=add\n \
             m = s32[3] reduce(d, lo), dimensions={{1}}, to_apply=max\n ROOT t = (s32[3], s32[3]) tuple(s, m)\n}}\n",
            n = s[0]
        )
    });
}

#[test]
fn elementwise_and_get_dimension_size_follow_the_size() {
    let dynamic = format!(
        "HloModule m\n{ADD}ENTRY e {{\n x = s32[6] parameter(0)\n n = s32[] parameter(1)\n \
         d = s32[<=6] set-dimension-size(x, n), dimensions={{0}}\n a = s32[<=6] add(d, x)\n \
         b = s32[<=6] multiply(a, d)\n c = s32[2,<=6] broadcast(b), dimensions={{1}}\n \
         t = s32[<=6,2] transpose(c), dimensions={{1,0}}\n z = s32[] constant(0)\n \
         r = s32[] reduce(t, z), dimensions={{0,1}}, to_apply=add\n g = s32[] get-dimension-size(t), dimensions={{0}}\n \
         ROOT o = (s32[], s32[]) tuple(r, g)\n}}\n"
    );
    check(&dynamic, &[s32(&[6], 2)], &[0..=6], |s| {
        format!(
            "HloModule r\n{ADD}ENTRY e {{\n x = s32[6] parameter(0)\n d = s32[{n}] slice(x), slice={{[0:{n}]}}\n \
             a = s32[{n}] add(d, d)\n b = s32[{n}] multiply(a, d)\n c = s32[2,{n}] broadcast(b), dimensions={{1}}\n \
             t = s32[{n},2] transpose(c), dimensions={{1,0}}\n z = s32[] constant(0)\n \
             r = s32[] reduce(t, z), dimensions={{0,1}}, to_apply=add\n g = s32[] constant({n})\n \
             ROOT o = (s32[], s32[]) tuple(r, g)\n}}\n",
            n = s[0]
        )
    });
}

#[test]
fn elementwise_operands_of_different_sizes_follow_xla() {
    // XLA's rule: a size of 1 broadcasts against the other, else the smaller size counts.
    let dynamic = format!(
        "HloModule m\n{ADD}ENTRY e {{\n x = s32[4,2] parameter(0)\n y = s32[4,2] parameter(1)\n \
         a = s32[] parameter(2)\n b = s32[] parameter(3)\n \
         xd = s32[<=4,2] set-dimension-size(x, a), dimensions={{0}}\n yd = s32[<=4,2] set-dimension-size(y, b), dimensions={{0}}\n \
         s = s32[<=4,2] subtract(xd, yd)\n z = s32[] constant(0)\n r = s32[2] reduce(s, z), dimensions={{0}}, to_apply=add\n \
         g = s32[] get-dimension-size(s), dimensions={{0}}\n ROOT o = (s32[2], s32[]) tuple(r, g)\n}}\n"
    );
    check(
        &dynamic,
        &[s32(&[4, 2], 12), s32(&[4, 2], 13)],
        &[0..=4, 0..=4],
        |s| {
            let (a, b) = (s[0], s[1]);
            let n = if (a == 1 && b > 1) || (b == 1 && a > 1) {
                a.max(b)
            } else {
                a.min(b)
            };
            let side = |v: &str, k: i32| {
                if k == 1 && n > 1 {
                    format!(
                    " {v}1 = s32[1,2] slice({v}), slice={{[0:1], [0:2]}}\n {v}r = s32[2] reshape({v}1)\n \
                     {v}s = s32[{n},2] broadcast({v}r), dimensions={{1}}\n"
                )
                } else {
                    format!(" {v}s = s32[{n},2] slice({v}), slice={{[0:{n}], [0:2]}}\n")
                }
            };
            format!(
            "HloModule r\n{ADD}ENTRY e {{\n x = s32[4,2] parameter(0)\n y = s32[4,2] parameter(1)\n{}{} \
             s = s32[{n},2] subtract(xs, ys)\n z = s32[] constant(0)\n r = s32[2] reduce(s, z), dimensions={{0}}, to_apply=add\n \
             g = s32[] constant({n})\n ROOT o = (s32[2], s32[]) tuple(r, g)\n}}\n",
            side("x", a),
            side("y", b)
        )
        },
    );
}

#[test]
fn a_dynamic_result_is_its_defined_elements_then_zeros() {
    // Also reshape that moves the padding (a gather) and one that keeps it in place.
    let dynamic =
        "HloModule m\nENTRY e {\n x = s32[2,4,3] parameter(0)\n n = s32[] parameter(1)\n \
         d = s32[2,<=4,3] set-dimension-size(x, n), dimensions={1}\n \
         f = s32[<=24] reshape(d)\n k = s32[2,<=4,3,1] reshape(d)\n \
         ROOT o = (s32[<=24], s32[2,<=4,3,1]) tuple(f, k)\n}\n";
    check(dynamic, &[s32(&[2, 4, 3], 3)], &[0..=4], |s| {
        let n = s[0];
        format!(
            "HloModule r\nENTRY e {{\n x = s32[2,4,3] parameter(0)\n d = s32[2,{n},3] slice(x), slice={{[0:2], [0:{n}], [0:3]}}\n \
             f = s32[{m}] reshape(d)\n z = s32[] constant(0)\n fp = s32[24] pad(f, z), padding=0_{p}\n \
             k = s32[2,{n},3,1] reshape(d)\n kp = s32[2,4,3,1] pad(k, z), padding=0_0x0_{q}x0_0x0_0\n \
             ROOT o = (s32[24], s32[2,4,3,1]) tuple(fp, kp)\n}}\n",
            m = 6 * n,
            p = 24 - 6 * n,
            q = 4 - n
        )
    });
}

#[test]
fn dynamic_reshape_packs_and_unpacks() {
    let dynamic = "HloModule m\nENTRY e {\n x = s32[3,4] parameter(0)\n a = s32[] parameter(1)\n \
         b = s32[] parameter(2)\n d = s32[<=3,<=4] set-dimension-size(x, a), dimensions={0}\n \
         d2 = s32[<=3,<=4] set-dimension-size(d, b), dimensions={1}\n \
         ab = s32[] multiply(a, b)\n ROOT r = s32[<=12] dynamic-reshape(d2, ab)\n}\n";
    check(dynamic, &[s32(&[3, 4], 4)], &[0..=3, 0..=4], |s| {
        let (a, b) = (s[0], s[1]);
        format!(
            "HloModule r\nENTRY e {{\n x = s32[3,4] parameter(0)\n d = s32[{a},{b}] slice(x), slice={{[0:{a}], [0:{b}]}}\n \
             f = s32[{m}] reshape(d)\n z = s32[] constant(0)\n ROOT fp = s32[12] pad(f, z), padding=0_{p}\n}}\n",
            m = a * b,
            p = 12 - a * b
        )
    });
}

#[test]
fn slice_concatenate_and_reverse() {
    let dynamic = "HloModule m\nENTRY e {\n x = s32[4] parameter(0)\n y = s32[3] parameter(1)\n \
         w = s32[5] parameter(2)\n a = s32[] parameter(3)\n c = s32[] parameter(4)\n \
         xd = s32[<=4] set-dimension-size(x, a), dimensions={0}\n wd = s32[<=5] set-dimension-size(w, c), dimensions={0}\n \
         whole = s32[<=4] slice(xd), slice={[0:4]}\n head = s32[1] slice(xd), slice={[0:1]}\n \
         cat = s32[<=12] concatenate(whole, y, wd), dimensions={0}\n rev = s32[<=5] reverse(wd), dimensions={0}\n \
         ROOT o = (s32[1], s32[<=12], s32[<=5]) tuple(head, cat, rev)\n}\n";
    let data = [s32(&[4], 5), s32(&[3], 6), s32(&[5], 7)];
    check(dynamic, &data, &[0..=4, 0..=5], |s| {
        let (a, c) = (s[0], s[1]);
        format!(
            "HloModule r\nENTRY e {{\n x = s32[4] parameter(0)\n y = s32[3] parameter(1)\n w = s32[5] parameter(2)\n \
             xs = s32[{a}] slice(x), slice={{[0:{a}]}}\n ws = s32[{c}] slice(w), slice={{[0:{c}]}}\n \
             head = s32[1] slice(x), slice={{[0:1]}}\n cat = s32[{t}] concatenate(xs, y, ws), dimensions={{0}}\n \
             z = s32[] constant(0)\n catp = s32[12] pad(cat, z), padding=0_{tp}\n \
             rev = s32[{c}] reverse(ws), dimensions={{0}}\n revp = s32[5] pad(rev, z), padding=0_{rp}\n \
             ROOT o = (s32[1], s32[12], s32[5]) tuple(head, catp, revp)\n}}\n",
            t = a + 3 + c,
            tp = 12 - (a + 3 + c),
            rp = 5 - c
        )
    });
}

#[test]
fn dot_over_a_dynamic_contracting_dimension_ignores_the_padding() {
    // The lhs's last column and the rhs's last row hold infinities: past any size below 5,
    // they are padding and must not turn the result into NaN.
    let dynamic = "HloModule m\nENTRY e {\n x = f32[2,5] parameter(0)\n y = f32[5,3] parameter(1)\n \
         n = s32[] parameter(2)\n i = f32[] constant(inf)\n ic = f32[2,1] broadcast(i), dimensions={}\n \
         ir = f32[1,3] broadcast(i), dimensions={}\n xh = f32[2,4] slice(x), slice={[0:2], [0:4]}\n \
         yh = f32[4,3] slice(y), slice={[0:4], [0:3]}\n xi = f32[2,5] concatenate(xh, ic), dimensions={1}\n \
         yi = f32[5,3] concatenate(yh, ir), dimensions={0}\n \
         xd = f32[2,<=5] set-dimension-size(xi, n), dimensions={1}\n \
         ROOT d = f32[2,3] dot(xd, yi), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
    check(
        dynamic,
        &[f32s(&[2, 5], 8), f32s(&[5, 3], 9)],
        &[0..=4],
        |s| {
            let n = s[0];
            format!(
            "HloModule r\nENTRY e {{\n x = f32[2,5] parameter(0)\n y = f32[5,3] parameter(1)\n \
             xs = f32[2,{n}] slice(x), slice={{[0:2], [0:{n}]}}\n ys = f32[{n},3] slice(y), slice={{[0:{n}], [0:3]}}\n \
             ROOT d = f32[2,3] dot(xs, ys), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n}}\n"
        )
        },
    );
}

#[test]
fn a_size_out_of_range_is_read_back_as_given_and_masks_within_the_bound() {
    let dynamic = format!(
        "HloModule m\n{ADD}ENTRY e {{\n x = s32[4] parameter(0)\n n = s32[] parameter(1)\n \
         d = s32[<=4] set-dimension-size(x, n), dimensions={{0}}\n z = s32[] constant(0)\n \
         r = s32[] reduce(d, z), dimensions={{0}}, to_apply=add\n g = s32[] get-dimension-size(d), dimensions={{0}}\n \
         ROOT o = (s32[], s32[]) tuple(r, g)\n}}\n"
    );
    let p = padded(&dynamic);
    let x = s32(&[4], 10);
    let Literal::Array(xa) = &x else {
        unreachable!()
    };
    let total: i32 = (0..4).map(|k| xa.get_i128(k) as i32).sum();
    for (n, sum) in [(-3, 0), (7, total)] {
        let got = evaluate(&p, &[x.clone(), size(n)]).expect("evaluates");
        let want = Literal::Tuple(vec![size(sum), size(n)]);
        compare_literals(&want, &got, Tolerance::Exact)
            .unwrap_or_else(|e| panic!("size {n}: {e:?}"));
    }
}

#[test]
fn pad_and_gather_over_a_dynamic_dimension() {
    // Edge and interior padding of the defined elements (the result's size follows), a static
    // dimension padded as well, and a gather whose slices take the dynamic dimension whole.
    let dynamic = format!(
        "HloModule m\n{ADD}ENTRY e {{\n x = s32[2,4] parameter(0)\n n = s32[] parameter(1)\n \
         d = s32[2,<=4] set-dimension-size(x, n), dimensions={{1}}\n v = s32[] constant(7)\n \
         p = s32[3,<=10] pad(d, v), padding=1_0x1_2_1\n \
         i = s32[] constant(1)\n g = s32[<=4] gather(d, i), offset_dims={{0}}, collapsed_slice_dims={{0}}, \
         start_index_map={{0}}, index_vector_dim=0, slice_sizes={{1,4}}\n z = s32[] constant(0)\n \
         gs = s32[] reduce(g, z), dimensions={{0}}, to_apply=add\n \
         ROOT o = (s32[3,<=10], s32[]) tuple(p, gs)\n}}\n"
    );
    check(&dynamic, &[s32(&[2, 4], 11)], &[0..=4], |s| {
        let n = s[0];
        let w = 1 + n + (n - 1).max(0) + 2;
        format!(
            "HloModule r\n{ADD}ENTRY e {{\n x = s32[2,4] parameter(0)\n d = s32[2,{n}] slice(x), slice={{[0:2], [0:{n}]}}\n \
             v = s32[] constant(7)\n p = s32[3,{w}] pad(d, v), padding=1_0x1_2_1\n z = s32[] constant(0)\n \
             pp = s32[3,10] pad(p, z), padding=0_0x0_{r}\n r1 = s32[1,{n}] slice(d), slice={{[1:2], [0:{n}]}}\n \
             gs = s32[] reduce(r1, z), dimensions={{0,1}}, to_apply=add\n \
             ROOT o = (s32[3,10], s32[]) tuple(pp, gs)\n}}\n",
            r = 10 - w
        )
    });
}

#[test]
fn sort_along_a_dynamic_dimension_sorts_the_defined_elements() {
    // One key (largest first) with a value carried along; the padding, holding both small and
    // large values, must stay behind the defined elements.
    let dynamic = "HloModule m\ngt { a = s32[] parameter(0)\n b = s32[] parameter(1)\n c = s32[] parameter(2)\n \
         d = s32[] parameter(3)\n ROOT r = pred[] compare(a, b), direction=GT }\n\
         ENTRY e {\n x = s32[2,6] parameter(0)\n v = s32[2,6] parameter(1)\n n = s32[] parameter(2)\n \
         xd = s32[2,<=6] set-dimension-size(x, n), dimensions={1}\n vd = s32[2,<=6] set-dimension-size(v, n), dimensions={1}\n \
         ROOT s = (s32[2,<=6], s32[2,<=6]) sort(xd, vd), dimensions={1}, is_stable=true, to_apply=gt\n}\n";
    check(
        dynamic,
        &[s32(&[2, 6], 14), s32(&[2, 6], 15)],
        &[0..=6],
        |s| {
            let n = s[0];
            format!(
            "HloModule r\ngt {{ a = s32[] parameter(0)\n b = s32[] parameter(1)\n c = s32[] parameter(2)\n \
             d = s32[] parameter(3)\n ROOT r = pred[] compare(a, b), direction=GT }}\n\
             ENTRY e {{\n x = s32[2,6] parameter(0)\n v = s32[2,6] parameter(1)\n \
             xs = s32[2,{n}] slice(x), slice={{[0:2], [0:{n}]}}\n vs = s32[2,{n}] slice(v), slice={{[0:2], [0:{n}]}}\n \
             t = (s32[2,{n}], s32[2,{n}]) sort(xs, vs), dimensions={{1}}, is_stable=true, to_apply=gt\n \
             t0 = s32[2,{n}] get-tuple-element(t), index=0\n t1 = s32[2,{n}] get-tuple-element(t), index=1\n \
             z = s32[] constant(0)\n p0 = s32[2,6] pad(t0, z), padding=0_0x0_{r}\n p1 = s32[2,6] pad(t1, z), padding=0_0x0_{r}\n \
             ROOT o = (s32[2,6], s32[2,6]) tuple(p0, p1)\n}}\n",
            r = 6 - n
        )
        },
    );
}

#[test]
fn scatter_skips_the_updates_past_the_size() {
    // An assignment combiner, so masking the updates would not do: the padded updates must
    // not be applied at all.
    let set = "set { a = f32[] parameter(0)\n ROOT b = f32[] parameter(1) }\n";
    let dynamic = format!(
        "HloModule m\n{set}ENTRY e {{\n x = f32[4,3] parameter(0)\n u = f32[3,3] parameter(1)\n n = s32[] parameter(2)\n \
         i = s32[3] constant({{2, 0, 3}})\n id = s32[<=3] set-dimension-size(i, n), dimensions={{0}}\n \
         ud = f32[<=3,3] set-dimension-size(u, n), dimensions={{0}}\n \
         ROOT s = f32[4,3] scatter(x, id, ud), update_window_dims={{1}}, inserted_window_dims={{0}}, \
         scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=set\n}}\n"
    );
    check(
        &dynamic,
        &[f32s(&[4, 3], 16), f32s(&[3, 3], 17)],
        &[0..=3],
        |s| {
            let n = s[0];
            let idx = ["2", "0", "3"][..n as usize].join(", ");
            format!(
            "HloModule r\n{set}ENTRY e {{\n x = f32[4,3] parameter(0)\n u = f32[3,3] parameter(1)\n \
             i = s32[{n}] constant({{{idx}}})\n us = f32[{n},3] slice(u), slice={{[0:{n}], [0:3]}}\n \
             ROOT s = f32[4,3] scatter(x, i, us), update_window_dims={{1}}, inserted_window_dims={{0}}, \
             scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=set\n}}\n"
        )
        },
    );
}

#[test]
fn reduce_window_over_a_dynamic_dimension() {
    // Windows of 2 with one element of high padding: the last window reads the padding value
    // (the init), not the padded elements past the size.
    let dynamic = format!(
        "HloModule m\n{ADD}ENTRY e {{\n x = s32[3,5] parameter(0)\n n = s32[] parameter(1)\n \
         d = s32[3,<=5] set-dimension-size(x, n), dimensions={{1}}\n z = s32[] constant(0)\n \
         ROOT w = s32[3,<=5] reduce-window(d, z), window={{size=1x2 pad=0_0x0_1}}, to_apply=add\n}}\n"
    );
    check(&dynamic, &[s32(&[3, 5], 18)], &[0..=5], |s| {
        let n = s[0];
        format!(
            "HloModule r\n{ADD}ENTRY e {{\n x = s32[3,5] parameter(0)\n d = s32[3,{n}] slice(x), slice={{[0:3], [0:{n}]}}\n \
             z = s32[] constant(0)\n w = s32[3,{n}] reduce-window(d, z), window={{size=1x2 pad=0_0x0_1}}, to_apply=add\n \
             ROOT p = s32[3,5] pad(w, z), padding=0_0x0_{r}\n}}\n",
            r = 5 - n
        )
    });
}

#[test]
fn ops_it_cannot_rewrite_are_refused_by_name() {
    for (op, line) in [
        ("scatter", "ROOT p = s32[4] scatter(x, i, d2), update_window_dims={0}, inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add"),
        (
            "convolution",
            "f = f32[1,<=4,1] convert(r)\n ROOT p = f32[1,3,1] convolution(f, k), window={size=2}, dim_labels=b0f_0io->b0f",
        ),
    ] {
        let text = format!(
            "HloModule m\n{ADD}lt {{ a = s32[] parameter(0)\n b = s32[] parameter(1)\n ROOT c = pred[] compare(a, b), direction=LT }}\n\
             ENTRY e {{\n x = s32[4] parameter(0)\n n = s32[] parameter(1)\n z = s32[] constant(0)\n \
             i = s32[1,1] constant({{{{0}}}})\n u = s32[2] constant({{5, 6}})\n \
             d2 = s32[<=2] set-dimension-size(u, n), dimensions={{0}}\n \
             r = s32[1,<=4,1] reshape(d)\n k = f32[2,1,1] constant({{{{{{1}}}},{{{{1}}}}}})\n \
             d = s32[<=4] set-dimension-size(x, n), dimensions={{0}}\n {line}\n}}\n"
        );
        let m = parse_module(&text).expect("parses");
        let e = run_on_copy(&m, "dynamic-padder").expect_err("refused");
        assert!(
            e.contains(op) && e.contains("dynamic dimension"),
            "{op}: {e}"
        );
    }
}

/// A case name, its input's dimensions, and the dimensions and values of the result XLA's test
/// expects.
type Expectation = (&'static str, &'static [i64], &'static [i64], &'static [i32]);

/// Modules of XLA's dynamic padder tests (as extracted into `testkit/xlatests-passes`) on the
/// inputs those tests give (iotas), against the values the tests expect. XLA CPU through JAX's
/// HLO-to-StableHLO import ignores these sizes (a reshape reads every element; a
/// `get-dimension-size` of a size set on a dimension its shape does not flag reads the bound),
/// so those cases' reference outputs are not XLA's padder semantics:
/// `implementation_defined.txt` says so.
#[test]
fn xla_padder_tests_expectations() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testkit/xlatests-passes");
    let cases: [Expectation; 4] = [
        ("dynamic_padder_test_22", &[12], &[2, 2], &[2, 4, 10, 12]),
        ("dynamic_padder_test_23", &[2, 6], &[2, 2], &[1, 5, 13, 17]),
        ("dynamic_padder_test_24", &[6, 2], &[2, 2], &[2, 4, 10, 12]),
        ("dynamic_padder_test_40", &[3], &[], &[2]),
    ];
    for (name, in_dims, out_dims, want) in cases {
        let text = std::fs::read_to_string(dir.join(format!("{name}.hlo"))).expect("the case");
        let p = padded(&text);
        let n: i64 = in_dims.iter().product();
        let iota: Vec<i32> = (0..n as i32).collect();
        let x = Literal::Array(ArrayLiteral::from_slice(in_dims, &iota));
        let got = evaluate(&p, &[x]).expect("evaluates");
        let want = Literal::Array(ArrayLiteral::from_slice(out_dims, want));
        compare_literals(&want, &got, Tolerance::Exact).unwrap_or_else(|e| panic!("{name}: {e:?}"));
    }
}
