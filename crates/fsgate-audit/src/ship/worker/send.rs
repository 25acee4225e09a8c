//! Sending: one batch of records read from the log, framed and sent; the sends
//! confirmed once acknowledged and old enough (or all of them, once stopping).

use std::time::Instant;

use super::{BACKOFF_MIN, BATCH_BYTES, CONFIRM_AFTER, MAX_IN_FLIGHT, Run};
use crate::ship::conn::Conn;
use crate::ship::frame::{self};

impl Run {
    /// Reads and sends one batch; the bytes of records sent.
    pub(super) fn send_some(&mut self, head: u64) -> usize {
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
    pub(super) fn confirm(&mut self, now: bool) {
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
}
