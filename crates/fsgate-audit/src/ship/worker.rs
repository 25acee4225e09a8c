//! One destination's shipping thread: reads records from the log files, sends them,
//! confirms them, moves the cursor, reconnects with backoff, and records when it falls
//! behind and when it catches up.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::conn::Conn;
use super::cursor::CursorFile;
use super::endpoint::Endpoint;
use super::frame::{self, Header};
use super::reader::LogReader;
use crate::canonical;
use crate::record::AuditEvent;
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
/// How often a stopping shipper looks whether its last sends were acknowledged.
const DRAIN_POLL: Duration = Duration::from_millis(5);
/// The cursor file is written at most this often while records flow.
const CURSOR_EVERY: Duration = Duration::from_secs(1);
/// Reconnection backoff bounds.
const BACKOFF_MIN: Duration = Duration::from_millis(250);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// How often the lag is looked at while the collector cannot be reached (between
/// attempts that back off up to [`BACKOFF_MAX`]): the outage is what the alert is for.
const OUTAGE_LAG_POLL: Duration = Duration::from_secs(1);

/// Tells the shipping threads to finish (and by when).
#[derive(Debug, Default)]
pub(super) struct Stop {
    /// Set once: ship what is left until this instant, then end.
    deadline: Mutex<Option<Instant>>,
    /// Wakes sleeping threads.
    cv: Condvar,
}

impl Stop {
    /// Asks the threads to drain until `deadline` and end.
    pub(super) fn request(&self, deadline: Instant) {
        *self.lock() = Some(deadline);
        self.cv.notify_all();
    }

    /// The drain deadline, once stopping.
    fn deadline(&self) -> Option<Instant> {
        *self.lock()
    }

    /// Sleeps for `d`, or until asked to stop; once stopping, a few milliseconds.
    fn sleep(&self, d: Duration) {
        let guard = self.lock();
        let d = if guard.is_some() {
            d.min(DRAIN_POLL)
        } else {
            d
        };
        let _ = self.cv.wait_timeout(guard, d);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.deadline
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

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

    /// Reads and sends one batch; the bytes of records sent.
    fn send_some(&mut self, head: u64) -> usize {
        if self.in_flight.len() >= MAX_IN_FLIGHT || self.w.reader.next_seq() > head {
            return 0;
        }
        let Some(datagram) = self.conn.as_ref().map(Conn::is_datagram) else {
            return 0;
        };
        self.buf.clear();
        self.ends.clear();
        let (buf, ends, header) = (&mut self.buf, &mut self.ends, &self.w.header);
        let (mut last, mut bytes) = (0, 0);
        let read = self.w.reader.read(head, BATCH_BYTES, &mut |seq, line| {
            bytes += line.len();
            if datagram {
                frame::push_local(buf, header, line);
            } else {
                frame::push_octet_counted(buf, header, seq, line);
            }
            ends.push(buf.len());
            last = seq;
        });
        match read {
            Ok(out) => {
                if let Some((first, end)) = out.skipped {
                    self.note_lost(first, end);
                }
            }
            Err(e) => {
                self.fail(&format!("reading the log: {e}"));
                return 0;
            }
        }
        if self.ends.is_empty() {
            return 0;
        }
        let sent = match self.conn.as_mut() {
            Some(c) => c.send(&self.buf, &self.ends),
            None => return 0,
        };
        match sent {
            Ok(()) => {
                let end = self.conn.as_ref().map_or(0, Conn::written);
                self.in_flight.push_back((last, Instant::now(), end));
                bytes
            }
            Err(e) => {
                // What the collector said before it hung up (a TLS alert: certificate
                // required, unknown CA) says more than the broken pipe.
                let said = self.conn.as_mut().and_then(|c| c.check_alive().err());
                let said = said.map(|s| format!(" ({s})")).unwrap_or_default();
                self.fail(&format!("send: {e}{said}"));
                0
            }
        }
    }

    /// Confirms the sends that are old enough (all of them when `now`, once stopping
    /// with everything sent), and moves the cursor.
    fn confirm(&mut self, now: bool) {
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        let acked = conn.acked();
        let datagram = conn.is_datagram();
        let due = |&(_, sent, end): &(u64, Instant, u64)| {
            (now || sent.elapsed() >= CONFIRM_AFTER) && (datagram || end <= acked)
        };
        if !self.in_flight.front().is_some_and(due) {
            self.write_cursor(false);
            return;
        }
        if let Err(e) = conn.check_alive() {
            self.fail(&e);
            return;
        }
        while let Some(&entry) = self.in_flight.front() {
            if !due(&entry) {
                break;
            }
            self.confirmed = entry.0;
            self.in_flight.pop_front();
            self.backoff = BACKOFF_MIN;
            if std::mem::take(&mut self.warned) {
                tracing::info!(destination = %self.w.name, "audit ship: delivering again");
            }
        }
        self.write_cursor(now);
    }

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

    /// Records falling behind by more than the limit, and catching up, once each.
    fn watch_lag(&mut self, head: u64) {
        let Some(limit) = self.w.alert_behind else {
            return;
        };
        // Lag counts what is not sent: confirmation trails sending by design.
        let lag = head.saturating_sub(self.w.reader.next_seq() - 1);
        self.worst_lag = self.worst_lag.max(lag);
        if !self.behind && lag > limit {
            self.behind = true;
            self.record("ship-behind", lag, Some(limit));
            self.save(|s| s.alerted = true);
        } else if self.behind && lag == 0 && self.in_flight.is_empty() {
            self.behind = false;
            self.record("ship-caught-up", self.worst_lag, None);
            self.worst_lag = 0;
            self.save(|s| s.alerted = false);
        }
    }

    fn record(&self, kind: &str, lag: u64, limit: Option<u64>) {
        let mut d = Map::new();
        d.insert("destination".into(), Value::String(self.w.name.clone()));
        d.insert("shipped".into(), json!(self.confirmed));
        if let Some(limit) = limit {
            d.insert("behind".into(), json!(lag));
            d.insert("limit".into(), json!(limit));
        } else {
            d.insert("worstBehind".into(), json!(lag));
        }
        if let Some(log) = self.w.tap.log()
            && let Err(e) = log.append(AuditEvent::lifecycle(kind, d))
        {
            tracing::warn!(destination = %self.w.name, "audit ship: cannot record `{kind}`: {e}");
        }
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
