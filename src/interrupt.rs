//! The `axle` command line's cleanup on interruption (a module of the binary, not of the
//! library): temporary files the CLI is writing (see `stage_file` in `main.rs`) are registered
//! here, and SIGINT, SIGTERM, SIGHUP and SIGPIPE delete the registered ones before the process
//! ends with the signal's usual status (quietly, for a closed pipe such as `axle explore ... |
//! head`). So an interrupted command (an endless `explore` stopped with Ctrl-C, say) leaves
//! neither a half-written output nor a stray temporary file.
//!
//! Invariants: the handler only loads and swaps atomics and calls `unlink`, `signal` and
//! `raise`, all async-signal-safe; a path is registered as a leaked C string and freed only by
//! [`Registration::drop`] after it has been swapped out of its slot, so the handler never sees a
//! freed pointer.

use std::ffi::CString;
use std::path::Path;
use std::sync::atomic::{AtomicPtr, Ordering};

/// How many temporary files can be registered at once (the CLI stages at most two).
const SLOTS: usize = 8;

static PENDING: [AtomicPtr<libc::c_char>; SLOTS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];

/// Installs the handler (once, before any file is staged).
pub fn install() {
    #[cfg(unix)]
    // SAFETY: `on_signal` is an `extern "C" fn(c_int)` doing only async-signal-safe work.
    unsafe {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE] {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
}

extern "C" fn on_signal(sig: libc::c_int) {
    for slot in &PENDING {
        let p = slot.swap(std::ptr::null_mut(), Ordering::SeqCst);
        if !p.is_null() {
            // SAFETY: `p` is a NUL-terminated path leaked by `register` and not freed while
            // it is in a slot.
            unsafe {
                libc::unlink(p);
            }
        }
    }
    // SAFETY: restoring the default disposition and re-raising ends the process as the signal
    // would have.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

/// A registered temporary file: deleted by the handler if a signal comes while this lives.
pub struct Registration(Option<usize>);

/// Registers `path` (a file about to be written). With every slot taken, the file is simply
/// not cleaned up on interruption.
pub fn register(path: &Path) -> Registration {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return Registration(None);
    };
    let raw = c.into_raw();
    for (k, slot) in PENDING.iter().enumerate() {
        if slot
            .compare_exchange(
                std::ptr::null_mut(),
                raw,
                Ordering::SeqCst,
                Ordering::SeqCst,
            )
            .is_ok()
        {
            return Registration(Some(k));
        }
    }
    // SAFETY: `raw` came from `into_raw` above and was never shared.
    drop(unsafe { CString::from_raw(raw) });
    Registration(None)
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(k) = self.0 {
            let p = PENDING[k].swap(std::ptr::null_mut(), Ordering::SeqCst);
            if !p.is_null() {
                // SAFETY: `p` came from `into_raw` in `register` and is out of its slot.
                drop(unsafe { CString::from_raw(p) });
            }
        }
    }
}
