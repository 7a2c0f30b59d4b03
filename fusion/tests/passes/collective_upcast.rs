//! `collective-upcast` on hand-written modules: which collectives it moves to `f32` (array-form
//! `bf16` all-reduce and reduce-scatter with a one-op reducer) and which it leaves (tuple forms,
//! `f32`, other reducers), and that the result verifies and keeps the collectives' attributes.
//! Its numerics against XLA are checked on devices in the root package's `cpu` tests.

use axle_fusion::run_on_copy;
use axle_ir::{parse_module, print_module};

fn module(body: &str, reducer: &str) -> String {
    format!(
        "HloModule m, num_partitions=2\n\n\
         red {{\n  a = bf16[] parameter(0)\n  b = bf16[] parameter(1)\n  ROOT r = bf16[] {reducer}\n}}\n\n\
         redf {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT r = f32[] add(a, b)\n}}\n\n\
         ENTRY e {{\n{body}}}\n"
    )
}

fn upcast(text: &str) -> String {
    let m = parse_module(text).expect("parses");
    print_module(&run_on_copy(&m, "collective-upcast,dce").expect("runs and verifies"))
}

#[test]
fn bf16_all_reduce_and_reduce_scatter_run_in_f32() {
    let body = "  x = bf16[4] parameter(0)\n  \
                s = bf16[4] all-reduce(x), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=red\n  \
                t = bf16[2] reduce-scatter(x), channel_id=2, replica_groups={{0,1}}, use_global_device_ids=true, dimensions={0}, to_apply=red\n  \
                ROOT o = (bf16[4], bf16[2]) tuple(s, t)\n";
    let out = upcast(&module(body, "add(a, b)"));
    assert!(
        out.contains("f32[4] all-reduce(") && out.contains("f32[2] reduce-scatter("),
        "{out}"
    );
    assert!(out.contains("add_promoted.f32"), "{out}");
    assert!(!out.contains("bf16[4] all-reduce("), "{out}");
    assert!(!out.contains("bf16[2] reduce-scatter("), "{out}");
    // Names and attributes stay: the final converts carry the collectives' names.
    assert!(out.contains("s = bf16[4] convert("), "{out}");
    assert!(out.contains("channel_id=2"), "{out}");
    assert!(out.contains("dimensions={0}"), "{out}");
}

#[test]
fn maximum_reducers_are_upcast_too() {
    let body = "  x = bf16[4] parameter(0)\n  \
                ROOT s = bf16[4] all-reduce(x), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=red\n";
    let out = upcast(&module(body, "maximum(a, b)"));
    assert!(out.contains("maximum_promoted.f32"), "{out}");
    assert!(out.contains("f32[4] all-reduce("), "{out}");
}

#[test]
fn other_collectives_are_left_alone() {
    let cases = [
        // A reducer of more than one op.
        (
            "  x = bf16[4] parameter(0)\n  \
             ROOT s = bf16[4] all-reduce(x), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=red\n",
            "add(a, a)",
        ),
        // The tuple form.
        (
            "  x = bf16[4] parameter(0)\n  y = bf16[4] parameter(1)\n  \
             ROOT s = (bf16[4], bf16[4]) all-reduce(x, y), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=red\n",
            "add(a, b)",
        ),
        // f32.
        (
            "  x = f32[4] parameter(0)\n  \
             ROOT s = f32[4] all-reduce(x), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=redf\n",
            "add(a, b)",
        ),
    ];
    for (body, reducer) in cases {
        let text = module(body, reducer);
        let before = print_module(&parse_module(&text).unwrap());
        let m = parse_module(&text).unwrap();
        let after = print_module(&run_on_copy(&m, "collective-upcast").expect("runs"));
        assert_eq!(before, after, "rewritten:\n{after}");
    }
}
