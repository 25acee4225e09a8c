//! This process's stdin and stdout for a stdio door, without a thread hop per message.
//!
//! `tokio::io::stdin()` and `stdout()` run every read and write on the blocking pool: a
//! request read waits for a pool thread to wake the runtime, and an answer written wakes
//! a pool thread. With one request in flight that is two wake-ups on each side of every
//! request (issue 12). Here the MCP and ACP doors read stdin on a thread of their own
//! with blocking reads (`ThreadReader`, `on_thread`), so that a request alone runs
//! on the thread that read it; where that cannot be set up, stdin (a pipe or a socket)
//! is read by the runtime itself (non-blocking, readiness from epoll). Stdout is a
//! `Sink` that the thread which made an answer writes to directly, one whole message
//! batch at a time.

//!
//! Here: stdin read by the runtime, and pipes enlarged; `sink.rs` is stdout,
//! `thread_reader.rs` stdin read by a thread of its own, `own_thread.rs` a future run
//! on that thread.

pub(crate) mod own_thread;
pub(crate) mod sink;
pub(crate) mod thread_reader;

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::pin::Pin;

use std::task::{Context, Poll};

use rustix::fs::{FileType, OFlags};

use tokio::io::{AsyncRead, ReadBuf};

/// This process's stdin: read by the runtime when it is a pipe or a socket, else
/// through `tokio::io::stdin()` (a terminal or a file, which epoll cannot watch or which
/// others may share).
pub fn stdin() -> Box<dyn AsyncRead + Send + Unpin> {
    enlarge_pipe(io::stdin().as_fd());
    match FdReader::stdin() {
        Ok(Some(r)) => Box::new(r),
        Ok(None) => Box::new(tokio::io::stdin()),
        Err(e) => {
            tracing::debug!("stdin read through the blocking pool: {e}");
            Box::new(tokio::io::stdin())
        }
    }
}

/// The capacity asked for a stdio pipe: 1 MiB, the kernel's default
/// `/proc/sys/fs/pipe-max-size`.
const PIPE_BYTES: usize = 1 << 20;

/// Grows `fd`'s buffer to `PIPE_BYTES` (or the system's maximum, if lower) when it is
/// a pipe with less: a 10 MiB read's MCP answer (21 MB) then passes in about 21 pipe-fulls
/// instead of 330, each a wake-up of both sides; pipelined requests likewise. Best effort:
/// a refusal (EPERM over the user's pipe quota, EBUSY) leaves the pipe as it was. Returns
/// the capacity it has (0 if not a pipe).
pub fn enlarge_pipe(fd: BorrowedFd<'_>) -> usize {
    let is_pipe =
        rustix::fs::fstat(fd).is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Fifo);
    if !is_pipe {
        return 0;
    }
    let Ok(now) = rustix::pipe::fcntl_getpipe_size(fd) else {
        return 0;
    };
    let want = PIPE_BYTES.min(pipe_max_size());
    if now >= want {
        return now;
    }
    match rustix::pipe::fcntl_setpipe_size(fd, want) {
        Ok(got) => got,
        Err(e) => {
            tracing::debug!("pipe left at {now} bytes (asked {want}): {e}");
            now
        }
    }
}

/// `/proc/sys/fs/pipe-max-size`, or [`PIPE_BYTES`] if unreadable.
fn pipe_max_size() -> usize {
    std::fs::read_to_string("/proc/sys/fs/pipe-max-size")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(PIPE_BYTES)
}

struct FdReader {
    kind: Kind,
    /// The file status flags it had, put back when done (the open file description is
    /// shared with whoever else holds it).
    restore: OFlags,
}

enum Kind {
    Pipe(tokio::net::unix::pipe::Receiver),
    Socket(tokio::net::UnixStream),
}

impl FdReader {
    /// Stdin, if it is a pipe or a socket; `None` otherwise.
    fn stdin() -> io::Result<Option<FdReader>> {
        let fd = rustix::io::fcntl_dupfd_cloexec(io::stdin().as_fd(), 3)?;
        FdReader::new(fd)
    }

    /// A reader of `fd` (this process's copy of it), if it is a pipe or a socket.
    fn new(fd: OwnedFd) -> io::Result<Option<FdReader>> {
        let kind = FileType::from_raw_mode(rustix::fs::fstat(&fd)?.st_mode);
        let restore = rustix::fs::fcntl_getfl(&fd)?;
        let kind = match kind {
            FileType::Fifo => Kind::Pipe(tokio::net::unix::pipe::Receiver::from_owned_fd(fd)?),
            FileType::Socket => {
                let s = std::os::unix::net::UnixStream::from(fd);
                s.set_nonblocking(true)?;
                match tokio::net::UnixStream::from_std(s) {
                    Ok(s) => Kind::Socket(s),
                    Err(e) => {
                        // Not registered (the descriptor went with the error): put the
                        // flags back through stdin itself.
                        let _ = rustix::fs::fcntl_setfl(io::stdin().as_fd(), restore);
                        return Err(e);
                    }
                }
            }
            _ => return Ok(None),
        };
        Ok(Some(FdReader { kind, restore }))
    }
}

impl AsyncRead for FdReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match &mut self.get_mut().kind {
            Kind::Pipe(p) => Pin::new(p).poll_read(cx, buf),
            Kind::Socket(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl Drop for FdReader {
    fn drop(&mut self) {
        let fd = match &self.kind {
            Kind::Pipe(p) => p.as_fd(),
            Kind::Socket(s) => s.as_fd(),
        };
        let _ = rustix::fs::fcntl_setfl(fd, self.restore);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use tokio::io::AsyncReadExt;

    /// A pipe read through the runtime gets every byte and the end, and its descriptor's
    /// flags are as they were once the reader is gone.
    #[tokio::test]
    async fn a_pipe_is_read_without_blocking_and_left_as_it_was() {
        let (r, w) = std::io::pipe().unwrap();
        let (r, w) = (OwnedFd::from(r), OwnedFd::from(w));
        let before = rustix::fs::fcntl_getfl(&r).unwrap();
        let dup = rustix::io::fcntl_dupfd_cloexec(&r, 3).unwrap();
        let mut reader = FdReader::new(dup).unwrap().expect("a pipe");
        assert!(
            rustix::fs::fcntl_getfl(&r)
                .unwrap()
                .contains(OFlags::NONBLOCK)
        );
        let writer = std::thread::spawn(move || {
            let mut w = std::fs::File::from(w);
            for i in 0..100 {
                w.write_all(format!("line {i}\n").as_bytes()).unwrap();
            }
        });
        let mut got = String::new();
        reader.read_to_string(&mut got).await.unwrap();
        writer.join().unwrap();
        let want: String = (0..100).map(|i| format!("line {i}\n")).collect();
        assert_eq!(got, want);
        drop(reader);
        assert_eq!(rustix::fs::fcntl_getfl(&r).unwrap(), before);
    }

    /// A pipe grows to 1 MiB (or the system's maximum); anything else is left alone.
    #[test]
    fn a_pipe_is_enlarged_and_a_file_is_not() {
        let (r, w) = std::io::pipe().unwrap();
        let want = PIPE_BYTES.min(pipe_max_size());
        let got = enlarge_pipe(w.as_fd());
        assert_eq!(got, rustix::pipe::fcntl_getpipe_size(&r).unwrap());
        // An unprivileged user over the pipe quota keeps the default: best effort.
        assert!(got == want || got == 65536, "{got}");
        assert_eq!(enlarge_pipe(r.as_fd()), got, "already as large: unchanged");
        let file = tempfile::tempfile().unwrap();
        assert_eq!(enlarge_pipe(file.as_fd()), 0);
    }
}
