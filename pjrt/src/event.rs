//! [`Event`], the plugin's `PJRT_Event`. Axle runs every transfer and execution before the call
//! that starts it returns, so every event is born ready, carrying that call's outcome.
//!
//! Invariant: a `*mut PJRT_Event` handed out is a leaked `Box<Event>`, freed only by
//! `PJRT_Event_Destroy`.

use pjrt_sys::*;

use crate::error::{entry, PluginError, PluginResult};

/// A completed event and its outcome.
pub struct Event {
    error: Option<PluginError>,
}

impl Event {
    /// A ready event with `outcome`, as the pointer the C API hands out.
    pub fn ready(outcome: PluginResult) -> *mut PJRT_Event {
        Box::into_raw(Box::new(Event {
            error: outcome.err(),
        })) as *mut PJRT_Event
    }

    fn get<'a>(p: *mut PJRT_Event) -> PluginResult<&'a Event> {
        // SAFETY: event pointers come from `ready`.
        unsafe { (p as *const Event).as_ref() }
            .ok_or_else(|| PluginError::invalid("axle: null PJRT_Event"))
    }
}

entry! {
    /// `PJRT_Event_Destroy`.
    fn event_destroy(args: PJRT_Event_Destroy_Args) {
        if !args.event.is_null() {
            // SAFETY: event pointers come from `Event::ready`.
            drop(unsafe { Box::from_raw(args.event as *mut Event) });
        }
        Ok(())
    }
}

entry! {
    /// `PJRT_Event_IsReady`: always true.
    fn event_is_ready(args: PJRT_Event_IsReady_Args) {
        Event::get(args.event)?;
        args.is_ready = true;
        Ok(())
    }
}

entry! {
    /// `PJRT_Event_Error`: the outcome of the operation the event tracks.
    fn event_error(args: PJRT_Event_Error_Args) {
        match &Event::get(args.event)?.error {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}

entry! {
    /// `PJRT_Event_Await`: returns the outcome at once.
    fn event_await(args: PJRT_Event_Await_Args) {
        match &Event::get(args.event)?.error {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}

entry! {
    /// `PJRT_Event_OnReady`: calls the callback now, handing it the outcome (which it owns).
    fn event_on_ready(args: PJRT_Event_OnReady_Args) {
        let event = Event::get(args.event)?;
        let callback = args
            .callback
            .ok_or_else(|| PluginError::invalid("PJRT_Event_OnReady: null callback"))?;
        let error = event.error.clone().map_or(std::ptr::null_mut(), PluginError::into_raw);
        // SAFETY: the client's callback, called once with its own argument.
        unsafe { callback(error, args.user_arg) };
        Ok(())
    }
}
