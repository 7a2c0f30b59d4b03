//! Chrome traces of profiled runs: the [Trace Event Format] that Perfetto and
//! `chrome://tracing` load, one complete event (`"ph": "X"`) per kernel call on the thread that
//! runs the program and per range of a parallel kernel on the pool thread that ran it.
//!
//! Events carry the kernel's name (`kN.name (opcode)`), and in `args` what it computes and, for
//! a range, its items. Times are microseconds from the first traced run's start. The output is
//! a pure function of its inputs: events in the order given, strings escaped as JSON requires.
//!
//! [Trace Event Format]: https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU

use std::fmt::Write;

use axle_codegen_cpu::TraceSpan;
use axle_ir::json::write_string as json_str;

/// The trace of `spans` as JSON; `kernels` gives each kernel number's name and detail.
pub fn chrome_trace(kernels: &[(&str, &str)], spans: &[TraceSpan]) -> String {
    let mut s = String::from("{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
    let _ = write!(
        s,
        "  {{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"args\": {{\"name\": \"axle cpu\"}}}}"
    );
    for sp in spans {
        let (name, detail) = kernels.get(sp.kernel).copied().unwrap_or(("", ""));
        s.push_str(",\n  {\"name\": ");
        json_str(&mut s, name);
        let _ = write!(
            s,
            ", \"cat\": \"{}\", \"ph\": \"X\", \"pid\": 1, \"tid\": {}, \"ts\": {:.3}, \"dur\": {:.3}, \"args\": {{\"detail\": ",
            if sp.range.is_some() { "range" } else { "kernel" },
            sp.thread,
            sp.start.as_secs_f64() * 1e6,
            sp.duration.as_secs_f64() * 1e6
        );
        json_str(&mut s, detail);
        if let Some((b, e)) = sp.range {
            let _ = write!(s, ", \"items\": [{b}, {e}]");
        }
        s.push_str("}}");
    }
    s.push_str("\n]}\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn events_are_valid_json_with_escaped_names() {
        let spans = [
            TraceSpan {
                kernel: 0,
                thread: 0,
                start: Duration::from_micros(5),
                duration: Duration::from_micros(7),
                range: None,
            },
            TraceSpan {
                kernel: 1,
                thread: 3,
                start: Duration::from_micros(6),
                duration: Duration::from_micros(2),
                range: Some((4, 8)),
            },
        ];
        let t = chrome_trace(&[("k0.a (dot)", "gemm: \"q\"\n"), ("k1.b\\c", "")], &spans);
        let v: serde_json::Value = serde_json::from_str(&t).expect("valid JSON");
        let ev = v["traceEvents"].as_array().expect("events");
        assert_eq!(ev.len(), 3);
        assert_eq!(ev[1]["name"], "k0.a (dot)");
        assert_eq!(ev[1]["args"]["detail"], "gemm: \"q\"\n");
        assert_eq!(ev[1]["ts"].as_f64(), Some(5.0));
        assert_eq!(ev[1]["dur"].as_f64(), Some(7.0));
        assert_eq!(ev[2]["name"], "k1.b\\c");
        assert_eq!(ev[2]["tid"], 3);
        assert_eq!(ev[2]["cat"], "range");
        assert_eq!(ev[2]["args"]["items"][1], 8);
    }
}
