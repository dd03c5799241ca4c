//! A Java `Native.Progress` callback as the core's progress function, for the long runs
//! (a panorama sequence, a tile grid): the core calls it between steps, on the calling
//! thread, outside any critical section.

use crate::error::{BridgeError, Result};
use jni::objects::JObject;
use jni::sys::jint;
use jni::{jni_sig, jni_str, Env};
use std::ops::ControlFlow;

/// Runs `run` with a progress function that calls `progress.progress(done, total)` (a
/// null `progress` is never called). When it returns false the run's
/// `tessera_core::Error::Cancelled` becomes a `CancellationException` saying
/// "`what` cancelled after `step` `done` of `total`"; an exception thrown by the callback
/// (or a missing method) stops the run too and is left pending, so Java sees that
/// exception, and no JNI call is made after it.
pub fn with_java_progress<R>(
    env: &mut Env<'_>,
    progress: &JObject<'_>,
    total: usize,
    (what, step): (&str, &str),
    run: impl FnOnce(&mut dyn FnMut(usize) -> ControlFlow<()>) -> tessera_core::Result<R>,
) -> Result<R> {
    let mut callback_err = None;
    let mut last_done = 0;
    let result = {
        let mut report = |done: usize| -> ControlFlow<()> {
            last_done = done;
            if progress.is_null() {
                return ControlFlow::Continue(());
            }
            let args = [(done as jint).into(), (total as jint).into()];
            match env.call_method(progress, jni_str!("progress"), jni_sig!("(II)Z"), &args).and_then(|v| v.z()) {
                Ok(true) => ControlFlow::Continue(()),
                Ok(false) => ControlFlow::Break(()),
                Err(e) => {
                    callback_err = Some(e);
                    ControlFlow::Break(())
                }
            }
        };
        run(&mut report)
    };
    if let Some(e) = callback_err {
        return Err(e.into());
    }
    match result {
        Err(tessera_core::Error::Cancelled) => Err(BridgeError::Cancelled(format!("{what} cancelled after {step} {last_done} of {total}"))),
        r => Ok(r?),
    }
}
