//! Signals from the first instant.
//!
//! `serve` and `acp` call [`hold`] before start-up does anything: SIGTERM, SIGINT and
//! SIGHUP are blocked on the main thread, and every thread created later inherits the
//! mask, so a signal that arrives while the gateway is still loading its policy, opening
//! its log or confining itself waits instead of killing the process between its `start`
//! record and its `stop` record. The signals stay blocked in every thread for the whole
//! run: once the runtime exists, [`listen`] reads them from a signalfd(2) on the
//! runtime's own event loop and hands them over as messages. No handler runs inside
//! another thread's code, no thread waits for them, and a signal that waited is read as
//! soon as the runtime first polls.
//! Child processes get an empty mask ([`unblock_in_child`]).
//!
//! A SIGINT that was ignored when fsgate started (a script's `fsgate serve &`, which the
//! shell starts with SIGINT ignored so that an interrupt at the terminal spares it) stays
//! ignored: only SIGTERM stops such a gateway, as with any program started that way.

use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
use tokio::sync::{mpsc, watch};

/// The signals fsgate answers.
fn set() -> SigSet {
    let mut s = SigSet::empty();
    for sig in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        s.add(sig);
    }
    s
}

/// Whether SIGINT was ignored when the process started (see the module's text).
static INT_IGNORED_AT_START: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Blocks SIGTERM, SIGINT and SIGHUP on this thread (and so on every thread it starts),
/// and notes whether SIGINT came ignored. Call first thing on the main thread, before any
/// other thread exists.
pub fn hold() -> Result<(), String> {
    pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set()), None)
        .map_err(|e| format!("cannot block signals during start-up: {e}"))?;
    let ignored = int_ignored().map_err(|e| format!("cannot read SIGINT's disposition: {e}"))?;
    INT_IGNORED_AT_START.store(ignored, std::sync::atomic::Ordering::Relaxed);
    Ok(())
}

/// Whether SIGINT's disposition is "ignore" (queried, not changed).
#[allow(unsafe_code)]
fn int_ignored() -> std::io::Result<bool> {
    let mut old = std::mem::MaybeUninit::<libc::sigaction>::zeroed();
    // SAFETY: a null new action only reads the current one into `old`, which is sized
    // for it; zeroed is a valid sigaction.
    let rc = unsafe { libc::sigaction(libc::SIGINT, std::ptr::null(), old.as_mut_ptr()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: sigaction succeeded, so it wrote the whole struct.
    let old = unsafe { old.assume_init() };
    Ok(old.sa_sigaction == libc::SIG_IGN)
}

/// The first SIGTERM or SIGINT, once one came.
pub struct Stop(watch::Receiver<Option<&'static str>>);

impl Stop {
    /// Resolves with the name of the first SIGTERM or SIGINT.
    pub async fn termination(&mut self) -> &'static str {
        let got = self.0.wait_for(Option::is_some).await.map(|v| *v);
        match got {
            Ok(name) => name.unwrap_or("SIGTERM"),
            // The signal reader ends only with the runtime; then nothing more comes.
            Err(_) => std::future::pending().await,
        }
    }
}

/// SIGHUPs: one message each (a burst that arrives while a reload runs is one more).
pub type Reloads = mpsc::Receiver<()>;

/// Starts taking the held signals (they stay blocked everywhere) on `rt`, from a
/// signalfd(2) its event loop watches: no thread of its own, and nothing runs until a
/// signal comes. Returns what the runtime awaits: the stop, and the reload requests.
pub fn listen(rt: &tokio::runtime::Handle) -> Result<(Stop, Reloads), String> {
    use nix::sys::signalfd::{SfdFlags, SignalFd};
    let (stop_tx, stop_rx) = watch::channel(None);
    let (hup_tx, hup_rx) = mpsc::channel(1);
    let fd = SignalFd::with_flags(&set(), SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
        .map_err(|e| format!("cannot take signals (signalfd): {e}"))?;
    let watched = watch_signal_fd(rt, fd)?;
    rt.spawn(async move {
        loop {
            let Ok(mut ready) = watched.readable().await else {
                return;
            };
            // Every signal that waits, then wait again (EAGAIN clears the readiness).
            loop {
                match watched.get_ref().read_signal() {
                    Ok(Some(info)) => take(info.ssi_signo, &stop_tx, &hup_tx),
                    Ok(None) => {
                        ready.clear_ready();
                        break;
                    }
                    Err(nix::errno::Errno::EINTR) => {}
                    Err(e) => {
                        tracing::debug!("signalfd: {e}");
                        ready.clear_ready();
                        break;
                    }
                }
            }
        }
    });
    Ok((Stop(stop_rx), hup_rx))
}

/// Registers `fd` with `rt`'s event loop.
#[allow(unsafe_code)]
fn watch_signal_fd(
    rt: &tokio::runtime::Handle,
    fd: nix::sys::signalfd::SignalFd,
) -> Result<tokio::io::unix::AsyncFd<nix::sys::signalfd::SignalFd>, String> {
    let _entered = rt.enter();
    // SAFETY: the SignalFd owns its descriptor, which stays open and unchanged until the
    // AsyncFd (which owns the SignalFd) is dropped.
    unsafe { tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
        .map_err(|e| format!("cannot take signals (epoll): {e}"))
}

/// Hands one signal to the runtime: SIGHUP a reload, SIGTERM and SIGINT the stop.
fn take(signo: u32, stop_tx: &watch::Sender<Option<&'static str>>, hup_tx: &mpsc::Sender<()>) {
    let sig = i32::try_from(signo)
        .ok()
        .and_then(|n| Signal::try_from(n).ok());
    match sig {
        Some(Signal::SIGHUP) => {
            let _ = hup_tx.try_send(());
        }
        Some(Signal::SIGINT) if INT_IGNORED_AT_START.load(std::sync::atomic::Ordering::Relaxed) => {
            tracing::info!("SIGINT ignored: it was ignored when fsgate started");
        }
        Some(sig @ (Signal::SIGINT | Signal::SIGTERM)) => {
            let name = if sig == Signal::SIGINT {
                "SIGINT"
            } else {
                "SIGTERM"
            };
            stop_tx.send_if_modified(|v| v.is_none() && v.replace(name).is_none());
        }
        _ => tracing::debug!("signalfd: unexpected signal {signo}"),
    }
}

/// Clears in `cmd`'s child the mask [`hold`] set (the standard library passes the
/// parent's mask on), so that a hosted agent receives SIGTERM, SIGINT and SIGHUP as usual.
#[allow(unsafe_code)]
pub fn unblock_in_child(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let set = set();
    // SAFETY: the closure runs in the forked child, where only async-signal-safe calls
    // are allowed. The set was built before the fork and is moved in; the closure makes
    // one rt_sigprocmask(2) call on it, with no allocation and no lock.
    unsafe {
        cmd.pre_exec(move || {
            pthread_sigmask(SigmaskHow::SIG_UNBLOCK, Some(&set), None).map_err(std::io::Error::from)
        });
    }
}
