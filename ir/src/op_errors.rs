//! The IR's errors about one instruction's attributes (a convolution's geometry, a collective's
//! groups or mode, a Shardy sharding), which every evaluator and emitter passes on as its own
//! error about the instruction at hand: [`crate::from_op_errors!`] writes those conversions.
//!
//! Invariant: the conversion keeps the IR error's message as it is (`Display`); the caller's
//! error type adds the instruction it was working on.

/// Implements `From<E>` for `$fail`, for each of the IR's per-instruction attribute errors
/// ([`crate::ConvGeoError`], [`crate::collective::CollectiveError`],
/// [`crate::sdy::SdyError`]), as `$msg(e.to_string())`.
#[macro_export]
macro_rules! from_op_errors {
    ($fail:ty, $msg:path) => {
        $crate::from_op_errors!(@each $fail, $msg,
            $crate::ConvGeoError,
            $crate::collective::CollectiveError,
            $crate::sdy::SdyError);
    };
    (@each $fail:ty, $msg:path, $($t:ty),*) => {
        $(impl From<$t> for $fail {
            fn from(e: $t) -> Self {
                $msg(e.to_string())
            }
        })*
    };
}
