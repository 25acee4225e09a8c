//! Signals from the first instant.
//!
//! `serve` and `acp` call [`hold`] before start-up does anything: SIGTERM, SIGINT and
//! SIGHUP are blocked on the main thread, and every thread created later inherits the
//! mask, so a signal that arrives while the gateway is still loading its policy, opening
//! its log or confining itself waits instead of killing the process between its `start`
//! record and its `stop` record. Once the runtime exists, [`listen`] registers tokio's
//! handlers and only then unblocks the main thread: a signal that waited is delivered at
//! that moment and handled like any other (stop record, final checkpoint, exit 0).
//! Child processes start with an empty mask (the standard library resets it).

use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
use tokio::signal::unix::{SignalKind, signal};

/// The signals fsgate answers.
fn set() -> SigSet {
    let mut s = SigSet::empty();
    for sig in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        s.add(sig);
    }
    s
}

/// Blocks SIGTERM, SIGINT and SIGHUP on this thread (and so on every thread it starts).
/// Call first thing on the main thread, before any other thread exists.
pub fn hold() -> Result<(), String> {
    pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set()), None)
        .map_err(|e| format!("cannot block signals during start-up: {e}"))
}

/// tokio's streams for the signals fsgate answers.
pub struct Listening {
    /// SIGTERM: stop.
    pub term: tokio::signal::unix::Signal,
    /// SIGINT: stop.
    pub int: tokio::signal::unix::Signal,
    /// SIGHUP: reload the policy.
    pub hup: tokio::signal::unix::Signal,
}

/// The two signals that stop fsgate.
pub struct Stop {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Listening {
    /// The stopping signals alone (SIGHUP goes to the reload task).
    pub fn stop_only(term: tokio::signal::unix::Signal, int: tokio::signal::unix::Signal) -> Stop {
        Stop { term, int }
    }
}

impl Stop {
    /// Resolves with the name of the first SIGTERM or SIGINT.
    pub async fn termination(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}

/// Registers the handlers in `runtime`, then unblocks the signals on this (the main)
/// thread, where any that arrived during start-up are delivered now.
pub fn listen(runtime: &tokio::runtime::Runtime) -> Result<Listening, String> {
    let _guard = runtime.enter();
    let stream = |kind: SignalKind| {
        signal(kind).map_err(|e| format!("cannot listen for signal {}: {e}", kind.as_raw_value()))
    };
    let listening = Listening {
        term: stream(SignalKind::terminate())?,
        int: stream(SignalKind::interrupt())?,
        hup: stream(SignalKind::hangup())?,
    };
    pthread_sigmask(SigmaskHow::SIG_UNBLOCK, Some(&set()), None)
        .map_err(|e| format!("cannot unblock signals: {e}"))?;
    Ok(listening)
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
