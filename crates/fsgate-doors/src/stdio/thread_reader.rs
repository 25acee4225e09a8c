//! Stdin read with blocking reads by the one thread that reads it, and what stops it.

use std::io::{self, PipeReader, PipeWriter};
use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::thread::Thread;

use rustix::event::{PollFd, PollFlags};

use rustix::io::Errno;
use tokio::io::{AsyncRead, ReadBuf};

use super::enlarge_pipe;

/// Stdin read with blocking reads by the one thread that reads it (see [`on_thread`](super::own_thread::on_thread)):
/// a request that arrives wakes that thread alone, which may then run it right away,
/// with no runtime worker woken and no worker's core handed over (`block_in_place`
/// wakes or spawns another thread on every call). Each read first polls stdin together
/// with a stop pipe, so that the reader can be stopped while it waits.
pub(crate) struct ThreadReader {
    fd: OwnedFd,
    stop: PipeReader,
}

/// Stops a [`ThreadReader`] and the future [`on_thread`](super::own_thread::on_thread) runs.
pub(crate) struct Stopper {
    /// Dropped to wake the reader from its poll.
    wake: PipeWriter,
    pub(super) stopped: Arc<AtomicBool>,
    pub(super) thread: Option<Thread>,
}

impl ThreadReader {
    /// This process's stdin (its pipe enlarged), and what stops its reader.
    pub(crate) fn stdin() -> io::Result<(ThreadReader, Stopper)> {
        enlarge_pipe(io::stdin().as_fd());
        let fd = rustix::io::fcntl_dupfd_cloexec(io::stdin().as_fd(), 3)?;
        ThreadReader::new(fd)
    }

    /// A reader of `fd`, and what stops it.
    pub(crate) fn new(fd: OwnedFd) -> io::Result<(ThreadReader, Stopper)> {
        let (stop, wake) = io::pipe()?;
        let stopper = Stopper {
            wake,
            stopped: Arc::new(AtomicBool::new(false)),
            thread: None,
        };
        Ok((ThreadReader { fd, stop }, stopper))
    }

    /// Waits for input (or the stop), then reads it; `Ok(0)` at the end or once stopped.
    fn read_blocking(&self, dst: &mut [u8]) -> io::Result<usize> {
        loop {
            let mut fds = [
                PollFd::new(&self.fd, PollFlags::IN),
                PollFd::new(&self.stop, PollFlags::IN),
            ];
            match rustix::event::poll(&mut fds, None) {
                Ok(_) | Err(Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
            if !fds[1].revents().is_empty() {
                return Ok(0);
            }
            if fds[0].revents().is_empty() {
                continue;
            }
            // A description someone made non-blocking may say EAGAIN: poll again.
            match rustix::io::read(&self.fd, &mut *dst) {
                Ok(n) => return Ok(n),
                Err(Errno::INTR | Errno::AGAIN) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

impl AsyncRead for ThreadReader {
    /// Blocks: meant only for a future that has a thread to itself ([`on_thread`](super::own_thread::on_thread)).
    fn poll_read(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let n = self.read_blocking(buf.initialize_unfilled());
        Poll::Ready(n.map(|n| buf.advance(n)))
    }
}

impl Stopper {
    /// Stops the reader (its reads end) and the future (dropped when next woken or
    /// when it next waits), whatever it waits for.
    pub(crate) fn stop(self) {
        self.stopped.store(true, Ordering::Release);
        if let Some(t) = &self.thread {
            t.unpark();
        }
        drop(self.wake);
    }
}
