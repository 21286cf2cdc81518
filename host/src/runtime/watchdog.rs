//! The deadline of a call that is blocked in a system call. WASI file I/O runs on the calling
//! thread (`allow_blocking_current_thread`), so a guest opening a FIFO with no writer blocks in
//! `open(2)` inside the host, where neither the epoch (checked only in wasm code) nor the
//! call's tokio timeout (the blocked poll never returns) can end it. Each running call
//! registers its OS thread and deadline here; once the deadline has passed, the epoch ticker
//! sends that thread a signal whose handler is installed without `SA_RESTART`, so the blocking
//! system call fails with `EINTR`, wasmtime-wasi returns `interrupted` to the guest, and the
//! guest's next wasm instruction meets the expired epoch and traps.

use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};
use toolhost_core::CancelSignal;

/// `SIGURG`: its default action is to ignore it, so a stray one (should the handler ever be
/// replaced) does nothing; toolhost opens no socket that asks for it (out-of-band data).
const SIGNAL: libc::c_int = libc::SIGURG;

/// How long after its deadline a call is interrupted: by then its epoch deadline (counted in
/// ticks, rounded up) has passed too, so the interrupted guest traps instead of retrying.
const GRACE: Duration = Duration::from_millis(15);

struct Watched {
    id: u64,
    thread: libc::pthread_t,
    interrupt_at: Instant,
    /// Interrupted at once when raised (the caller gave the call up).
    cancel: Option<CancelSignal>,
}

/// The calls running now, by OS thread.
pub(super) struct Watchdog {
    watched: Mutex<(u64, Vec<Watched>)>,
}

/// Keeps a call watched; dropping it stops the watch (no signal is sent after `drop` returns).
pub(super) struct Watch<'a> {
    dog: &'a Watchdog,
    id: u64,
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        let mut w = self.dog.watched.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = w.1.iter().position(|x| x.id == self.id) {
            w.1.swap_remove(i);
        }
    }
}

static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // Interrupting the system call is the whole point; pass the signal on to a handler someone
    // else had installed for it.
    if let Some(prev) = PREVIOUS.get() {
        let h = prev.sa_sigaction;
        if h != libc::SIG_DFL && h != libc::SIG_IGN {
            // SAFETY: `h` is the handler that was installed for this signal before ours, called
            // with the arguments its flags say it takes.
            unsafe {
                if prev.sa_flags & libc::SA_SIGINFO != 0 {
                    let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) = std::mem::transmute(h);
                    f(sig, info, ctx);
                } else {
                    let f: extern "C" fn(libc::c_int) = std::mem::transmute(h);
                    f(sig);
                }
            }
        }
    }
}

/// Install the handler once per process. `Err` names why it could not be (then blocked calls
/// stay blocked past their deadline, as without the watchdog).
fn install_handler() -> Result<(), String> {
    static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            // SAFETY: plain sigaction(2) calls with zeroed, then filled, structs; the handler
            // only reads an immutable static.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
                // No SA_RESTART: that is what makes the blocked call return EINTR. SA_ONSTACK:
                // the thread may be running wasm on a small fiber stack.
                action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut action.sa_mask);
                let mut previous: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(SIGNAL, &action, &mut previous) != 0 {
                    return Err(format!("sigaction: {}", std::io::Error::last_os_error()));
                }
                let _ = PREVIOUS.set(previous);
            }
            Ok(())
        })
        .clone()
}

impl Watchdog {
    pub(super) fn new() -> Self {
        if let Err(e) = install_handler() {
            tracing::warn!("calls blocked in a system call cannot be interrupted at their deadline: {e}");
        }
        Self { watched: Mutex::new((0, Vec::new())) }
    }

    /// Watch the calling OS thread until the returned guard drops; past `deadline`, or once
    /// `cancel` is raised, it is interrupted.
    pub(super) fn watch(&self, deadline: Instant, cancel: Option<CancelSignal>) -> Watch<'_> {
        // SAFETY: pthread_self has no preconditions.
        let thread = unsafe { libc::pthread_self() };
        let mut w = self.watched.lock().unwrap_or_else(|p| p.into_inner());
        w.0 += 1;
        let id = w.0;
        w.1.push(Watched { id, thread, interrupt_at: deadline + GRACE, cancel });
        Watch { dog: self, id }
    }

    /// Called by the epoch ticker: interrupt every watched thread past its deadline. Repeated
    /// each tick until the call ends, in case the guest retries the interrupted call.
    pub(super) fn tick(&self, now: Instant) {
        let w = self.watched.lock().unwrap_or_else(|p| p.into_inner());
        for x in w.1.iter().filter(|x| now >= x.interrupt_at || x.cancel.as_ref().is_some_and(|c| c.is_cancelled())) {
            // SAFETY: the thread is alive: it removes its entry (under this lock) before its
            // call returns, and a thread cannot exit inside a call.
            unsafe {
                libc::pthread_kill(x.thread, SIGNAL);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_blocked_in_a_system_call_is_interrupted_after_its_deadline() {
        let dog = std::sync::Arc::new(Watchdog::new());
        let (r, _w) = std::os::unix::net::UnixStream::pair().unwrap();
        let d = dog.clone();
        let blocked = std::thread::spawn(move || {
            let _watch = d.watch(Instant::now() + Duration::from_millis(100), None);
            let mut buf = [0u8; 1];
            let start = Instant::now();
            // read(2) on a socket nobody writes to blocks until interrupted.
            let r = std::io::Read::read(&mut &r, &mut buf);
            (r.map_err(|e| e.kind()), start.elapsed())
        });
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let ticker = {
            let (d, done) = (dog.clone(), done.clone());
            std::thread::spawn(move || {
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(5));
                    d.tick(Instant::now());
                }
            })
        };
        let (result, elapsed) = blocked.join().unwrap();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        ticker.join().unwrap();
        assert_eq!(result, Err(std::io::ErrorKind::Interrupted));
        assert!(elapsed >= Duration::from_millis(100), "not before the deadline: {elapsed:?}");
        assert!(dog.watched.lock().unwrap().1.is_empty(), "the watch ended with the call");
    }
}
