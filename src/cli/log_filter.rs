//! What the log leaves out by default: the FUSE library's word that a reply could not
//! be sent because the kernel no longer waits for it (ENOENT: a request it dropped, as
//! when an interrupted one was answered first). Nothing a person can act on; every
//! other word of the library's, and this one under `RUST_LOG=fuser=debug`, still shows.

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

/// Drops the unsent-reply events of the FUSE library whose cause is ENOENT.
#[derive(Debug, Default)]
pub(crate) struct QuietDroppedReplies {
    /// `RUST_LOG` asked for the library's debug words: nothing is dropped.
    pub(crate) keep_all: bool,
}

impl<S: Subscriber> Layer<S> for QuietDroppedReplies {
    fn event_enabled(&self, event: &Event<'_>, _ctx: Context<'_, S>) -> bool {
        if self.keep_all {
            return true;
        }
        let mut seen = Seen::default();
        event.record(&mut seen);
        !(seen.from_replies && seen.dropped)
    }
}

/// What an event's fields say (a `log` record's target arrives as `log.target`).
#[derive(Debug, Default)]
struct Seen {
    from_replies: bool,
    dropped: bool,
}

impl Visit for Seen {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "log.target" {
            self.from_replies = value == "fuser::reply";
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let text = format!("{value:?}");
            self.dropped = text.starts_with("Failed to send FUSE reply")
                && text.contains(&std::io::Error::from_raw_os_error(libc::ENOENT).to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::prelude::*;

    /// Counts the events that reach it.
    #[derive(Default, Clone)]
    struct Count(std::sync::Arc<std::sync::atomic::AtomicUsize>);

    impl<S: Subscriber> Layer<S> for Count {
        fn on_event(&self, _e: &Event<'_>, _c: Context<'_, S>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    fn reaching(keep_all: bool, emit: impl FnOnce()) -> usize {
        let count = Count::default();
        let subscriber = tracing_subscriber::registry()
            .with(QuietDroppedReplies { keep_all })
            .with(count.clone());
        tracing::subscriber::with_default(subscriber, emit);
        count.0.load(std::sync::atomic::Ordering::SeqCst)
    }

    #[test]
    fn only_the_librarys_unsent_reply_for_a_dropped_request_is_left_out() {
        let enoent = std::io::Error::from_raw_os_error(libc::ENOENT);
        let einval = std::io::Error::from_raw_os_error(libc::EINVAL);
        let dropped = || {
            tracing::error!(
                log.target = "fuser::reply",
                "Failed to send FUSE reply: {enoent}"
            );
        };
        assert_eq!(reaching(false, dropped), 0);
        assert_eq!(reaching(true, dropped), 1, "RUST_LOG asked for it");
        let other = || {
            tracing::error!(
                log.target = "fuser::reply",
                "Failed to send FUSE reply: {einval}"
            );
            tracing::warn!(
                log.target = "fuser::reply",
                "Reply not sent for operation 7"
            );
            tracing::error!(log.target = "fsgate", "Failed to send FUSE reply: {enoent}");
        };
        assert_eq!(reaching(false, other), 3);
    }

    /// The record as the FUSE library logs it, through the log bridge, to the layers
    /// `fsgate` runs with: a writer of its own sees what reaches stderr.
    #[test]
    fn the_bridged_record_never_reaches_the_written_log() {
        use tracing_subscriber::layer::SubscriberExt;
        let written = Written::default();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("warn"))
            .with_writer(written.clone())
            .with_ansi(false)
            .finish()
            .with(QuietDroppedReplies { keep_all: false });
        let send = |cause: i32| {
            let err = std::io::Error::from_raw_os_error(cause);
            let args = format_args!("Failed to send FUSE reply: {err}");
            let record = log::Record::builder()
                .target("fuser::reply")
                .level(log::Level::Error)
                .args(args)
                .build();
            tracing_log::format_trace(&record).expect("bridged");
        };
        tracing::subscriber::with_default(subscriber, || {
            send(libc::ENOENT);
            send(libc::EINVAL);
        });
        let text = written.text();
        assert!(!text.contains("No such file"), "{text}");
        assert!(
            text.contains("Failed to send FUSE reply: Invalid argument"),
            "{text}"
        );
    }

    /// A log writer that keeps what it is given.
    #[derive(Clone, Default)]
    struct Written(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl Written {
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock().expect("written")).into_owned()
        }
    }

    impl std::io::Write for Written {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("written").extend_from_slice(b);
            Ok(b.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Written {
        type Writer = Written;

        fn make_writer(&'a self) -> Written {
            self.clone()
        }
    }
}
