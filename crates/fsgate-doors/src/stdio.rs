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

use std::future::Future;
use std::io::{self, PipeReader, PipeWriter, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;

use rustix::event::{PollFd, PollFlags};
use rustix::fs::{FileType, OFlags};
use rustix::io::Errno;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::oneshot;

/// Where a connection's answers go: written by whichever thread made them, whole
/// (a message is never interleaved with another), blocking while the client does not
/// read. Bounding what waits is the door's job (its rooms), as before.
pub(crate) struct Sink {
    out: Mutex<Box<dyn Write + Send>>,
}

impl Sink {
    /// A sink writing to `out`.
    pub(crate) fn new(out: impl Write + Send + 'static) -> Arc<Sink> {
        Arc::new(Sink {
            out: Mutex::new(Box::new(out)),
        })
    }

    /// This process's stdout, its pipe enlarged (see [`enlarge_pipe`]). Written through
    /// its own descriptor, not std's line-buffered `Stdout`: answers are already whole
    /// messages, and a second buffer would search every piece for its last newline.
    pub(crate) fn stdout() -> Arc<Sink> {
        enlarge_pipe(io::stdout().as_fd());
        match io::stdout().as_fd().try_clone_to_owned() {
            Ok(fd) => Sink::new(std::fs::File::from(fd)),
            Err(e) => {
                tracing::debug!("stdout written through std's buffer: {e}");
                Sink::new(io::stdout())
            }
        }
    }

    /// Writes `bytes` (whole messages) and flushes; blocks until written.
    pub(crate) fn write(&self, bytes: &[u8]) -> io::Result<()> {
        self.write_with(|out| out.write_all(bytes))
    }

    /// Lets `write` write whole messages, piece by piece, none other between them (a
    /// large answer encoded as it goes out); then flushes. Blocks until written.
    pub(crate) fn write_with<T>(
        &self,
        write: impl FnOnce(&mut dyn Write) -> io::Result<T>,
    ) -> io::Result<T> {
        let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
        let t = write(&mut **out)?;
        out.flush().map(|()| t)
    }

    /// [`write_with`](Self::write_with) from async code: on the blocking pool, so that a
    /// client that does not read stalls no runtime thread.
    pub(crate) async fn write_with_owned<T: Send + 'static>(
        self: &Arc<Self>,
        write: impl FnOnce(&mut dyn Write) -> io::Result<T> + Send + 'static,
    ) -> io::Result<T> {
        let sink = Arc::clone(self);
        tokio::task::spawn_blocking(move || sink.write_with(write))
            .await
            .map_err(io::Error::other)?
    }

    /// [`write`](Self::write) from async code; gives the buffer back.
    pub(crate) async fn write_owned(self: &Arc<Self>, bytes: Vec<u8>) -> io::Result<Vec<u8>> {
        self.write_with_owned(move |out| out.write_all(&bytes).map(|()| bytes))
            .await
    }
}

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

/// Stdin read with blocking reads by the one thread that reads it (see [`on_thread`]):
/// a request that arrives wakes that thread alone, which may then run it right away,
/// with no runtime worker woken and no worker's core handed over (`block_in_place`
/// wakes or spawns another thread on every call). Each read first polls stdin together
/// with a stop pipe, so that the reader can be stopped while it waits.
pub(crate) struct ThreadReader {
    fd: OwnedFd,
    stop: PipeReader,
}

/// Stops a [`ThreadReader`] and the future [`on_thread`] runs.
pub(crate) struct Stopper {
    /// Dropped to wake the reader from its poll.
    wake: PipeWriter,
    stopped: Arc<AtomicBool>,
    thread: Option<Thread>,
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
    /// Blocks: meant only for a future that has a thread to itself ([`on_thread`]).
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

/// A future running on a thread of its own ([`on_thread`]). Dropped, it stops the
/// future (as [`stop`](Self::stop) does, without waiting for the thread).
pub(crate) struct OnThread<T> {
    stopper: Option<Stopper>,
    done: oneshot::Receiver<T>,
}

impl<T> OnThread<T> {
    /// Waits for the future's output; `None` if it was stopped first.
    pub(crate) async fn finish(mut self) -> Option<T> {
        (&mut self.done).await.ok()
    }

    /// Stops the future unless it has ended, then waits for its thread to let go of it.
    pub(crate) async fn stop(mut self) -> Option<T> {
        if let Some(s) = self.stopper.take() {
            s.stop();
        }
        (&mut self.done).await.ok()
    }
}

impl<T> Drop for OnThread<T> {
    fn drop(&mut self) {
        if let Some(s) = self.stopper.take() {
            s.stop();
        }
    }
}

/// Runs `fut` on a new thread named `name`, polled there alone (parked while it waits),
/// in the current runtime's context (its tasks may spawn, use its timers and channels,
/// and call `Handle::block_on`). For a future that blocks in its reads: a
/// [`ThreadReader`], whose `stopper` this takes.
pub(crate) fn on_thread<F>(
    name: &str,
    fut: F,
    mut stopper: Stopper,
) -> io::Result<OnThread<F::Output>>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let rt = tokio::runtime::Handle::current();
    let stopped = Arc::clone(&stopper.stopped);
    let (tx, done) = oneshot::channel();
    let thread = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            OWN_THREAD.set(true);
            let _rt = rt.enter();
            if let Some(out) = poll_until(fut, &stopped) {
                let _ = tx.send(out);
            }
        })?;
    stopper.thread = Some(thread.thread().clone());
    Ok(OnThread {
        stopper: Some(stopper),
        done,
    })
}

std::thread_local! {
    /// This thread runs an [`on_thread`] future: it may block (nothing else runs here).
    static OWN_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether this thread runs a future of its own ([`on_thread`]), outside the runtime's
/// threads: blocking here holds up nothing but that future.
pub(crate) fn on_own_thread() -> bool {
    OWN_THREAD.get()
}

/// Wakes a thread parked in [`poll_until`].
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `fut` on this thread until it is ready, or `stopped` is set.
fn poll_until<F: Future>(fut: F, stopped: &AtomicBool) -> Option<F::Output> {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    loop {
        if stopped.load(Ordering::Acquire) {
            return None;
        }
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return Some(out);
        }
        std::thread::park();
    }
}

/// A pipe or socket read without blocking, woken by the runtime's epoll.
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

    /// A pipe read by a thread of its own gets every byte and the end; the future's
    /// output comes back to the runtime.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_thread_reader_reads_everything_and_hands_back_the_output() {
        let (r, w) = std::io::pipe().unwrap();
        let (reader, stop) = ThreadReader::new(OwnedFd::from(r)).unwrap();
        let run = async move {
            let mut reader = reader;
            let mut got = String::new();
            reader.read_to_string(&mut got).await.map(|_| got)
        };
        let running = on_thread("t", run, stop).unwrap();
        let writer = std::thread::spawn(move || {
            let mut w = w;
            for i in 0..100 {
                w.write_all(format!("line {i}\n").as_bytes()).unwrap();
            }
        });
        let got = running.finish().await.expect("ran to its end").unwrap();
        writer.join().unwrap();
        let want: String = (0..100).map(|i| format!("line {i}\n")).collect();
        assert_eq!(got, want);
    }

    /// A reader waiting for input that never comes, and a future waiting for something
    /// else, are both stopped, and the future is dropped (what it holds let go).
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_thread_reader_is_stopped_whatever_it_waits_for() {
        let (r, _w) = std::io::pipe().unwrap();
        let (reader, stop) = ThreadReader::new(OwnedFd::from(r)).unwrap();
        let held = Arc::new(());
        let mine = Arc::clone(&held);
        let run = async move {
            let _mine = mine;
            let mut reader = reader;
            let mut buf = [0u8; 16];
            // Ok(0) once stopped: then it waits on, for a sender nobody uses.
            let n = reader.read(&mut buf).await.unwrap();
            let (_tx, rx) = oneshot::channel::<()>();
            let _ = rx.await;
            n
        };
        let running = on_thread("t", run, stop).unwrap();
        assert_eq!(running.stop().await, None, "stopped, not ended");
        assert_eq!(Arc::strong_count(&held), 1, "the future was dropped");

        // Stopped while it waits for something other than input.
        let (r, mut w) = std::io::pipe().unwrap();
        let (reader, stop) = ThreadReader::new(OwnedFd::from(r)).unwrap();
        let (seen_tx, seen) = oneshot::channel();
        let mine = Arc::clone(&held);
        let run = async move {
            let _mine = mine;
            let mut reader = reader;
            let mut buf = [0u8; 16];
            let n = reader.read(&mut buf).await.unwrap();
            let _ = seen_tx.send(n);
            std::future::pending::<()>().await;
        };
        let running = on_thread("t", run, stop).unwrap();
        w.write_all(b"hello").unwrap();
        assert_eq!(seen.await.unwrap(), 5);
        assert_eq!(running.stop().await, None);
        assert_eq!(Arc::strong_count(&held), 1, "the future was dropped");
    }

    /// Dropping the handle (as a signal drops the serving future that awaits it) stops
    /// the future on the thread, and the thread lets go of it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_dropped_handle_stops_the_future() {
        let (r, _w) = std::io::pipe().unwrap();
        let (reader, stop) = ThreadReader::new(OwnedFd::from(r)).unwrap();
        // Sends when dropped: the thread let go of the future (polled or not).
        struct Gone(Option<oneshot::Sender<()>>);
        impl Drop for Gone {
            fn drop(&mut self) {
                if let Some(tx) = self.0.take() {
                    let _ = tx.send(());
                }
            }
        }
        let (gone_tx, gone) = oneshot::channel::<()>();
        let held = Gone(Some(gone_tx));
        let run = async move {
            let _held = held;
            let mut reader = reader;
            let mut buf = [0u8; 16];
            let _ = reader.read(&mut buf).await;
            std::future::pending::<()>().await;
        };
        let running = on_thread("t", run, stop).unwrap();
        drop(running);
        let dropped = tokio::time::timeout(std::time::Duration::from_secs(10), gone).await;
        assert!(matches!(dropped, Ok(Ok(()))), "the future still runs");
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

    /// Messages written from many threads at once come out whole.
    #[test]
    fn messages_from_many_threads_are_not_interleaved() {
        #[derive(Clone, Default)]
        struct Chunky(Arc<Mutex<Vec<u8>>>);
        impl Write for Chunky {
            // A few bytes per call, as a pipe near full would take them.
            fn write(&mut self, b: &[u8]) -> io::Result<usize> {
                let n = b.len().min(7);
                self.0.lock().unwrap().extend_from_slice(&b[..n]);
                std::thread::yield_now();
                Ok(n)
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let out = Chunky::default();
        let sink = Sink::new(out.clone());
        let threads: Vec<_> = (0..8u8)
            .map(|t| {
                let sink = Arc::clone(&sink);
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        let mut msg = vec![b'a' + t; 100];
                        msg.push(b'\n');
                        sink.write(&msg).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let bytes = out.0.lock().unwrap().clone();
        let lines: Vec<&[u8]> = bytes
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        assert_eq!(lines.len(), 400);
        for l in lines {
            assert_eq!(l.len(), 100);
            assert!(l.iter().all(|&b| b == l[0]), "interleaved: {l:?}");
        }
    }
}
