//! A future run on a thread of its own, polled there alone, in the runtime's context;
//! stopped with its reader, or when its handle is dropped.

use std::future::Future;
use std::io;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;

use tokio::sync::oneshot;

use super::thread_reader::Stopper;

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
/// [`ThreadReader`](super::thread_reader::ThreadReader), whose `stopper` this takes.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stdio::thread_reader::ThreadReader;
    use std::io::Write;
    use std::os::fd::OwnedFd;
    use tokio::io::AsyncReadExt;

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
}
