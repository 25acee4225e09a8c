//! One destination's shipping thread: reads records from the log files, sends them,
//! confirms them, moves the cursor, reconnects with backoff, and records when it falls
//! behind and when it catches up.
//!
//! This file holds the worker, its loop, connecting and the cursor; `send`: a batch read
//! and sent, and sends confirmed; `lag`: the `ship-behind` and `ship-caught-up`
//! records; the [`Stop`] it obeys is in `super::stop`.

mod lag;
mod send;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::conn::Conn;
use super::cursor::CursorFile;
use super::endpoint::Endpoint;
use super::frame::Header;
use super::reader::LogReader;
use crate::canonical;
use crate::writer::Tap;

/// Bytes of records read and framed per send.
const BATCH_BYTES: usize = 64 * 1024;
/// Sends not yet confirmed, at most (their records are read again from the log after a
/// loss, so only their seqs are kept: 24 bytes each).
const MAX_IN_FLIGHT: usize = 4096;
/// A send is confirmed once the collector's kernel acknowledged it and the connection
/// stayed open this long after it: a collector that stops (or crashes) within this
/// time makes the shipper send it again.
const CONFIRM_AFTER: Duration = Duration::from_millis(1000);
/// How often an idle shipper looks for new records; also how long it lets records
/// gather after a batch that was not full, so a busy gateway's records go in large
/// writes rather than one system call each.
const IDLE_POLL: Duration = Duration::from_millis(50);
/// The cursor file is written at most this often while records flow.
const CURSOR_EVERY: Duration = Duration::from_secs(1);
/// Reconnection backoff bounds.
const BACKOFF_MIN: Duration = Duration::from_millis(250);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// How often the lag is looked at while the collector cannot be reached (between
/// attempts that back off up to [`BACKOFF_MAX`]): the outage is what the alert is for.
const OUTAGE_LAG_POLL: Duration = Duration::from_secs(1);

use super::stop::Stop;

/// What a worker needs, handed over when its thread starts.
pub(super) struct Worker {
    /// The destination's name.
    pub name: String,
    /// Where to.
    pub endpoint: Endpoint,
    /// Message header fields.
    pub header: Header,
    /// Lag that makes a `ship-behind` record.
    pub alert_behind: Option<u64>,
    /// Reads the log files.
    pub reader: LogReader,
    /// The shared cursor file.
    pub cursor: Arc<CursorFile>,
    /// The log (head, lifecycle records).
    pub tap: Tap,
    /// When to end.
    pub stop: Arc<Stop>,
}

/// The running state of one worker.
struct Run {
    w: Worker,
    conn: Option<Conn>,
    /// Every record up to this seq is delivered.
    confirmed: u64,
    /// Sends not confirmed yet: the last seq of each, when it went, and where it ends
    /// in the connection's stream.
    in_flight: VecDeque<(u64, Instant, u64)>,
    /// Framed messages of the batch being built, and where each ends.
    buf: Vec<u8>,
    ends: Vec<usize>,
    /// Wait before the next attempt; back to the minimum once records are delivered
    /// (not on connecting: a collector may accept and then refuse, as a TLS one that
    /// wants a client certificate does).
    backoff: Duration,
    next_attempt: Instant,
    /// This outage was logged (once per outage, not per attempt).
    warned: bool,
    cursor_written: Instant,
    /// The confirmed seq last written to the cursor file.
    cursor_seq: u64,
    /// A `ship-behind` record is out, no `ship-caught-up` yet; and the worst lag since.
    behind: bool,
    worst_lag: u64,
}

impl Worker {
    /// The thread's body: ships until told to stop.
    pub(super) fn run(self) {
        let state = self.cursor.get(&self.name);
        let mut run = Run {
            confirmed: state.seq,
            cursor_seq: state.seq,
            behind: state.alerted,
            worst_lag: 0,
            conn: None,
            in_flight: VecDeque::new(),
            buf: Vec::with_capacity(BATCH_BYTES * 2),
            ends: Vec::new(),
            backoff: BACKOFF_MIN,
            next_attempt: Instant::now(),
            warned: false,
            cursor_written: Instant::now(),
            w: self,
        };
        run.w.reader.rewind(state.seq + 1);
        run.main_loop();
    }
}

impl Run {
    fn main_loop(&mut self) {
        while let Some(head) = self.head() {
            let deadline = self.w.stop.deadline();
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            if self.conn.is_none() {
                if deadline.is_some() {
                    break;
                }
                if !self.connect() {
                    // Nothing is sent, yet the backlog grows: the lag is what is not
                    // delivered (the reader was rewound to it).
                    self.watch_lag(head);
                    let wait = self.next_attempt.saturating_duration_since(Instant::now());
                    self.w.stop.sleep(wait.min(OUTAGE_LAG_POLL));
                    continue;
                }
            }
            let sent = self.send_some(head);
            self.confirm(deadline.is_some() && self.w.reader.next_seq() > head);
            self.watch_lag(head);
            if deadline.is_some() && self.confirmed >= head {
                break;
            }
            if sent < BATCH_BYTES {
                self.w.stop.sleep(IDLE_POLL);
            }
        }
        self.finish();
    }

    /// The log's durable head; None once the log is gone.
    fn head(&self) -> Option<u64> {
        self.w.tap.log().map(|l| l.head().0)
    }

    /// Tries to connect; on failure notes the error and schedules the next attempt.
    fn connect(&mut self) -> bool {
        if Instant::now() < self.next_attempt {
            return false;
        }
        match self.w.endpoint.connect() {
            Ok(c) => {
                tracing::info!(destination = %self.w.name, "audit ship: connected");
                self.conn = Some(c);
                self.save(|s| s.state = "connected".into());
                true
            }
            Err(e) => {
                self.fail(&format!("connect: {e}"));
                false
            }
        }
    }

    /// Drops the connection after `error`: what it may have lost is sent again.
    fn fail(&mut self, error: &str) {
        self.conn = None;
        if !self.warned {
            self.warned = true;
            tracing::warn!(destination = %self.w.name, "audit ship: {error}; retrying (backoff up to {BACKOFF_MAX:?}), `fsgate audit ship-status` shows the state");
        }
        self.in_flight.clear();
        self.w.reader.rewind(self.confirmed + 1);
        self.next_attempt = Instant::now() + self.backoff;
        self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
        let now = canonical::now_ts();
        self.save(|s| {
            s.state = "retrying".into();
            s.error = Some(error.to_owned());
            s.error_at = Some(now);
        });
    }
}

impl Run {
    /// Writes the cursor when it moved and the last write is a while ago (or `force`).
    fn write_cursor(&mut self, force: bool) {
        let moved = self.confirmed != self.cursor_seq;
        if !moved || (!force && self.cursor_written.elapsed() < CURSOR_EVERY) {
            return;
        }
        let (seq, now) = (self.confirmed, canonical::now_ts());
        self.save(|s| {
            s.seq = seq;
            s.shipped_at = Some(now);
            s.state = "connected".into();
        });
        self.cursor_seq = seq;
        self.cursor_written = Instant::now();
    }

    /// Writes a change to this destination's entry in the cursor file.
    fn save(&self, change: impl FnOnce(&mut super::cursor::DestState)) {
        if let Err(e) = self.w.cursor.update(&self.w.name, change) {
            tracing::warn!(destination = %self.w.name, "audit ship: {e}");
        }
    }

    fn note_lost(&mut self, first: u64, last: u64) {
        tracing::warn!(destination = %self.w.name, "audit ship: records {first}..{last} were pruned from the log before they were shipped");
        self.save(|s| s.lost = Some(format!("{first}..{last}")));
    }

    /// Writes the final cursor when the gateway stops.
    fn finish(&mut self) {
        if self.conn.is_some() && self.w.reader.next_seq() > self.confirmed + 1 {
            tracing::info!(destination = %self.w.name, "audit ship: stopping with records unconfirmed; they are sent again at the next start");
        }
        if let Some(c) = self.conn.take() {
            c.close();
        }
        let seq = self.confirmed;
        let now = canonical::now_ts();
        self.save(|s| {
            if s.seq != seq {
                s.shipped_at = Some(now);
            }
            s.seq = seq;
            s.state = "stopped".into();
        });
    }
}
