//! [`PluginError`], the plugin's `PJRT_Error`, and [`guard`], which every C entry point runs its
//! body under.
//!
//! Invariants:
//! - A `*mut PJRT_Error` handed to the client is a `Box<PluginError>` leaked with
//!   [`PluginError::into_raw`]; the client frees it with `PJRT_Error_Destroy`, the only place that
//!   takes it back.
//! - No panic crosses the C boundary: [`guard`] catches it and returns an `INTERNAL` error naming
//!   the entry point, so a host process (a Python interpreter) survives any program it hands us.
//! - An argument struct smaller than the one this plugin was built against is refused
//!   ([`check_args`]) rather than read past its end.

use std::ffi::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};

use pjrt_sys::{
    PJRT_Error, PJRT_Error_Code, PJRT_Error_Code_PJRT_Error_Code_FAILED_PRECONDITION,
    PJRT_Error_Code_PJRT_Error_Code_INTERNAL, PJRT_Error_Code_PJRT_Error_Code_INVALID_ARGUMENT,
    PJRT_Error_Code_PJRT_Error_Code_UNIMPLEMENTED, PJRT_Error_Destroy_Args,
    PJRT_Error_GetCode_Args, PJRT_Error_Message_Args,
};

/// An error returned through the C API: a status code and Axle's message.
#[derive(Clone, Debug, PartialEq)]
pub struct PluginError {
    /// The `PJRT_Error_Code`.
    pub code: PJRT_Error_Code,
    /// The message the client shows (JAX raises it as the exception's text).
    pub message: String,
}

/// What every entry point returns before it is turned into a `PJRT_Error` pointer.
pub type PluginResult<T = ()> = Result<T, PluginError>;

impl PluginError {
    /// An `INVALID_ARGUMENT` error: the caller handed something wrong (a bad program, a wrong
    /// buffer, an unknown option).
    pub fn invalid(message: impl Into<String>) -> PluginError {
        PluginError {
            code: PJRT_Error_Code_PJRT_Error_Code_INVALID_ARGUMENT,
            message: message.into(),
        }
    }

    /// An `UNIMPLEMENTED` error naming what Axle does not do.
    pub fn unimplemented(message: impl Into<String>) -> PluginError {
        PluginError {
            code: PJRT_Error_Code_PJRT_Error_Code_UNIMPLEMENTED,
            message: message.into(),
        }
    }

    /// A `FAILED_PRECONDITION` error: the object is in the wrong state (a deleted buffer).
    pub fn precondition(message: impl Into<String>) -> PluginError {
        PluginError {
            code: PJRT_Error_Code_PJRT_Error_Code_FAILED_PRECONDITION,
            message: message.into(),
        }
    }

    /// An `INTERNAL` error: something in Axle went wrong.
    pub fn internal(message: impl Into<String>) -> PluginError {
        PluginError {
            code: PJRT_Error_Code_PJRT_Error_Code_INTERNAL,
            message: message.into(),
        }
    }

    /// Leaks the error as the pointer the C API returns.
    pub fn into_raw(self) -> *mut PJRT_Error {
        Box::into_raw(Box::new(self)) as *mut PJRT_Error
    }

    /// Borrows the error behind a pointer [`PluginError::into_raw`] made.
    ///
    /// # Safety
    /// `p` is null or came from [`PluginError::into_raw`] and was not destroyed.
    pub unsafe fn from_ptr<'a>(p: *const PJRT_Error) -> Option<&'a PluginError> {
        (p as *const PluginError).as_ref()
    }
}

impl From<axle::Error> for PluginError {
    fn from(e: axle::Error) -> Self {
        match e {
            axle::Error::Parse(_) | axle::Error::Build(_) | axle::Error::Array(_) => {
                PluginError::invalid(e.to_string())
            }
            axle::Error::Backend(_) => {
                let message = e.to_string();
                if message.contains("not supported") || message.contains("unsupported") {
                    PluginError::unimplemented(message)
                } else {
                    PluginError::invalid(message)
                }
            }
        }
    }
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}

/// Whether `AXLE_PJRT_TRACE` is set (not empty, not `0`): every entry point then prints its name,
/// and its error when it fails, to stderr.
fn tracing() -> bool {
    static TRACE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TRACE.get_or_init(|| std::env::var("AXLE_PJRT_TRACE").is_ok_and(|v| !v.is_empty() && v != "0"))
}

/// Runs the body of the entry point `name`: its error, or a panic it raised, becomes the
/// `PJRT_Error` the client gets; success is a null pointer.
pub fn guard(name: &str, body: impl FnOnce() -> PluginResult) -> *mut PJRT_Error {
    let trace = tracing();
    if trace {
        eprintln!("axle-pjrt: {name}");
    }
    let outcome = catch_unwind(AssertUnwindSafe(body));
    if trace {
        if let Ok(Err(e)) = &outcome {
            eprintln!("axle-pjrt: {name} -> error {}: {}", e.code, e.message);
        }
    }
    match outcome {
        Ok(Ok(())) => std::ptr::null_mut(),
        Ok(Err(e)) => e.into_raw(),
        Err(p) => PluginError::internal(format!(
            "axle: internal error in {name}: {}",
            panic_message(p.as_ref())
        ))
        .into_raw(),
    }
}

/// Checks the argument struct `args` of entry point `name`: not null, and reaching into the last
/// field of the struct this plugin reads (a client built against an older API passes a smaller
/// one).
///
/// # Safety
/// `args` is null or points to a struct whose first field is its `struct_size`.
pub unsafe fn check_args<'a, T>(name: &str, args: *mut T) -> PluginResult<&'a mut T> {
    if args.is_null() {
        return Err(PluginError::invalid(format!("{name}: null arguments")));
    }
    let size = *(args as *const usize);
    // The C API's `struct_size` is the end of the last field (`PJRT_STRUCT_SIZE`), without the
    // trailing padding `size_of` counts, which is less than the alignment.
    let want = std::mem::size_of::<T>() + 1 - std::mem::align_of::<T>();
    if size < want {
        return Err(PluginError::invalid(format!(
            "{name}: argument struct of {size} bytes, this plugin needs {want} (a client built \
             against an older PJRT C API)"
        )));
    }
    Ok(&mut *args)
}

/// Defines `unsafe extern "C" fn $name(args: *mut $ty) -> *mut PJRT_Error` running `$body` with
/// `$args: &mut $ty` under [`guard`] and [`check_args`].
macro_rules! entry {
    ($(#[$meta:meta])* fn $name:ident($args:ident: $ty:ty) $body:block) => {
        $(#[$meta])*
        pub(crate) unsafe extern "C" fn $name(raw: *mut $ty) -> *mut pjrt_sys::PJRT_Error {
            $crate::error::guard(stringify!($name), || {
                // SAFETY: the client passes its argument struct, `struct_size` first.
                #[allow(unused_mut)]
                let mut $args: &mut $ty = unsafe { $crate::error::check_args(stringify!($name), raw)? };
                $body
            })
        }
    };
}
pub(crate) use entry;

/// `PJRT_Error_Destroy`: frees an error this plugin returned.
pub(crate) unsafe extern "C" fn error_destroy(args: *mut PJRT_Error_Destroy_Args) {
    let Some(args) = args.as_mut() else { return };
    if !args.error.is_null() {
        // SAFETY: every error pointer the client holds came from `into_raw`.
        drop(Box::from_raw(args.error as *mut PluginError));
        args.error = std::ptr::null_mut();
    }
}

/// `PJRT_Error_Message`: the message of an error, valid until it is destroyed.
pub(crate) unsafe extern "C" fn error_message(args: *mut PJRT_Error_Message_Args) {
    let Some(args) = args.as_mut() else { return };
    match PluginError::from_ptr(args.error) {
        Some(e) => {
            args.message = e.message.as_ptr() as *const c_char;
            args.message_size = e.message.len();
        }
        None => {
            args.message = std::ptr::null();
            args.message_size = 0;
        }
    }
}

entry! {
    /// `PJRT_Error_GetCode`: the status code of an error.
    fn error_get_code(args: PJRT_Error_GetCode_Args) {
        // SAFETY: error pointers come from `into_raw`.
        let e = unsafe { PluginError::from_ptr(args.error) }
            .ok_or_else(|| PluginError::invalid("PJRT_Error_GetCode: null error"))?;
        args.code = e.code;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_an_internal_error_naming_the_entry_point() {
        let e = guard("PJRT_Test", || panic!("boom"));
        // SAFETY: made by `guard`.
        let err = unsafe { PluginError::from_ptr(e) }.unwrap().clone();
        assert_eq!(err.code, PJRT_Error_Code_PJRT_Error_Code_INTERNAL);
        assert!(
            err.message.contains("PJRT_Test") && err.message.contains("boom"),
            "{err:?}"
        );
        // SAFETY: made by `into_raw`, destroyed once.
        drop(unsafe { Box::from_raw(e as *mut PluginError) });
    }

    #[test]
    fn a_short_argument_struct_is_refused() {
        let mut args = PJRT_Error_GetCode_Args {
            struct_size: 16,
            extension_start: std::ptr::null_mut(),
            error: std::ptr::null(),
            code: 0,
        };
        // SAFETY: a live struct.
        let e = unsafe { error_get_code(&mut args) };
        // SAFETY: made by `guard`.
        let err = unsafe { PluginError::from_ptr(e) }.unwrap().clone();
        assert_eq!(err.code, PJRT_Error_Code_PJRT_Error_Code_INVALID_ARGUMENT);
        assert!(err.message.contains("16 bytes"), "{err:?}");
        // SAFETY: made by `into_raw`, destroyed once.
        drop(unsafe { Box::from_raw(e as *mut PluginError) });
    }
}
