//! Where a stdio connection's answers go: written whole by the thread that made them.

use std::io::{self, Write};
use std::os::fd::AsFd;

use std::sync::{Arc, Mutex, PoisonError};

use super::enlarge_pipe;

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

#[cfg(test)]
mod tests {
    use super::*;

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
