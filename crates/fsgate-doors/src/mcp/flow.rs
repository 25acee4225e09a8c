//! The requests of one MCP connection between the moment the input pump hands them to
//! the SDK and the moment their answer is written to the client: who records each, and
//! the bytes they hold.
//!
//! The SDK answers some requests without calling a handler of ours (a request refused
//! for its `_meta`, an unsupported protocol version), so recording cannot be left to handlers. Instead each
//! request is entered here by the pump; a handler that records by itself (a tool call,
//! through its gateway operations) *claims* it; the output copier records every answer
//! whose request nobody claimed, before writing it. Exactly one record per request.
//!
//! Memory: a request holds room for its input line until its answer is written, and a
//! tool answer holds room for its encoded size from the moment it is built. The pump
//! takes no new request while either room is used up, so a client that stops reading
//! stops the connection instead of growing it.
//!
//! A request the client cancels (`notifications/cancelled`) leaves the table at once:
//! the SDK may never answer it. It is recorded as cancelled unless its handler already
//! claimed it; an answer that still comes is written unrecorded.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

use fsgate_gateway::Lease;

/// A request handed to the SDK and not yet answered.
pub(super) struct Pending {
    /// Its JSON-RPC method, for its record.
    pub method: String,
    /// Someone else records it (a tool call records its gateway operations).
    pub claimed: bool,
    /// A stateless (2026-07-28) request: recorded in the stateless requests' context.
    pub stateless: bool,
    /// Told (by being dropped) once the request is answered or cancelled.
    _done: Option<oneshot::Sender<()>>,
    /// Which request under this id: a client may reuse an id once its request was
    /// cancelled, and the old call's answer must not take the new request's place.
    serial: u64,
    /// Room held for its input line.
    _input: OwnedSemaphorePermit,
    /// Room held for its answer, once built.
    room: Option<OwnedSemaphorePermit>,
    /// The content budget its answer holds (see the gateway's `budget`), kept until the
    /// answer is written so that unwritten content counts there too.
    leases: Vec<Lease>,
}

/// Input room a request holds at least, so that many tiny requests are bounded too.
const MIN_INPUT_UNITS: usize = 64 * 1024;

/// The connection's pending requests and byte rooms.
pub(super) struct Flow {
    pending: Mutex<HashMap<String, Pending>>,
    /// Bytes of request lines in flight.
    input: Arc<Semaphore>,
    /// Encoded bytes of answers built and not yet written.
    answers: Arc<Semaphore>,
    cap: u32,
    /// The next request's serial.
    serials: AtomicU64,
}

/// The key of a JSON-RPC id: its JSON text.
pub(super) fn id_key(id: &impl serde::Serialize) -> String {
    serde_json::to_string(id).unwrap_or_default()
}

impl Flow {
    /// Rooms of `cap_bytes` each for input and for answers.
    pub(super) fn new(cap_bytes: usize) -> Arc<Flow> {
        let cap = u32::try_from(cap_bytes.max(MIN_INPUT_UNITS)).unwrap_or(u32::MAX >> 4);
        Arc::new(Flow {
            pending: Mutex::new(HashMap::new()),
            input: Arc::new(Semaphore::new(cap as usize)),
            answers: Arc::new(Semaphore::new(cap as usize)),
            cap,
            serials: AtomicU64::new(0),
        })
    }

    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn units(&self, bytes: usize) -> u32 {
        u32::try_from(bytes).unwrap_or(u32::MAX).clamp(1, self.cap)
    }

    /// Requests pending (admitted and not yet answered).
    pub(super) fn in_flight(&self) -> usize {
        self.table().len()
    }

    /// Whether a request with this id is already pending.
    pub(super) fn is_pending(&self, key: &str) -> bool {
        self.table().contains_key(key)
    }

    /// Waits until there is room for an answer and for a request line of `len` bytes,
    /// then enters the request (`stateless` or of the session; `done` is dropped once
    /// it is answered or cancelled); returns its serial. Call before handing it on.
    pub(super) async fn admit(
        &self,
        key: String,
        method: String,
        len: usize,
        stateless: bool,
        done: Option<oneshot::Sender<()>>,
    ) -> u64 {
        self.wait_for_answer_room().await;
        let units = self.units(len.max(MIN_INPUT_UNITS));
        let serial = self.serials.fetch_add(1, Ordering::Relaxed);
        let Ok(input) = Arc::clone(&self.input).acquire_many_owned(units).await else {
            return serial;
        };
        let pending = Pending {
            method,
            claimed: false,
            stateless,
            _done: done,
            serial,
            _input: input,
            room: None,
            leases: Vec::new(),
        };
        self.table().insert(key, pending);
        serial
    }

    /// [`admit`](Self::admit) without waiting: None unless the request's room is free
    /// now and half the input room stays free beside it (for the requests that are
    /// served meanwhile: a call waiting for roots must never stop the reading).
    pub(super) fn try_admit(
        &self,
        key: String,
        method: String,
        len: usize,
        stateless: bool,
    ) -> Option<u64> {
        let units = self.units(len.max(MIN_INPUT_UNITS));
        let left = self.input.available_permits();
        if left < units as usize + self.cap as usize / 2 {
            return None;
        }
        let input = Arc::clone(&self.input).try_acquire_many_owned(units).ok()?;
        let serial = self.serials.fetch_add(1, Ordering::Relaxed);
        let pending = Pending {
            method,
            claimed: false,
            stateless,
            _done: None,
            serial,
            _input: input,
            room: None,
            leases: Vec::new(),
        };
        self.table().insert(key, pending);
        Some(serial)
    }

    /// [`claim`](Self::claim), only if the request under `key` is the one admitted as
    /// `serial`.
    pub(super) fn claim_serial(&self, key: &str, serial: u64) -> bool {
        match self.table().get_mut(key) {
            Some(p) if p.serial == serial => {
                p.claimed = true;
                true
            }
            _ => false,
        }
    }

    /// [`take`](Self::take), only if the request under `key` is the one admitted as
    /// `serial`.
    pub(super) fn take_serial(&self, key: &str, serial: u64) -> Option<Pending> {
        let mut table = self.table();
        match table.get(key) {
            Some(p) if p.serial == serial => table.remove(key),
            _ => None,
        }
    }

    /// Waits while unwritten answers fill the room: work that will make an answer
    /// does not start meanwhile.
    pub(super) async fn wait_for_answer_room(&self) {
        if let Ok(p) = self.answers.acquire().await {
            drop(p);
        }
    }

    /// [`hold_answer`](Self::hold_answer) if there is room now; else the leases back.
    pub(super) fn try_hold_answer(
        &self,
        key: &str,
        bytes: usize,
        leases: Vec<Lease>,
    ) -> Result<(), Vec<Lease>> {
        let units = self.units(bytes);
        let Ok(room) = Arc::clone(&self.answers).try_acquire_many_owned(units) else {
            return Err(leases);
        };
        if let Some(p) = self.table().get_mut(key) {
            p.room = Some(room);
            p.leases = leases;
        }
        Ok(())
    }

    /// Holds room for an answer of `bytes` encoded bytes, and its content `leases`,
    /// until it is written, waiting while the unwritten answers fill the room.
    pub(super) async fn hold_answer(&self, key: &str, bytes: usize, leases: Vec<Lease>) {
        let units = self.units(bytes);
        let Ok(room) = Arc::clone(&self.answers).acquire_many_owned(units).await else {
            return;
        };
        if let Some(p) = self.table().get_mut(key) {
            p.room = Some(room);
            p.leases = leases;
        }
    }

    /// The request an answer is for; its room comes back when the value is dropped.
    pub(super) fn take(&self, key: &str) -> Option<Pending> {
        self.table().remove(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn admission_waits_while_unwritten_answers_fill_the_room() {
        let flow = Flow::new(MIN_INPUT_UNITS * 2);
        flow.admit("1".into(), "tools/call".into(), 10, false, None)
            .await;
        flow.hold_answer("1", usize::MAX, Vec::new()).await;
        let f2 = Arc::clone(&flow);
        let waiting =
            tokio::spawn(async move { f2.admit("2".into(), "ping".into(), 10, false, None).await });
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert!(!waiting.is_finished(), "no room: no new request");
        drop(flow.take("1")); // written
        waiting.await.unwrap();
        assert!(flow.is_pending("2"));
    }

    /// A client may reuse an id once its request was cancelled: the old call can then
    /// neither claim nor take the new request's place (found in review).
    #[tokio::test]
    async fn a_reused_id_belongs_to_its_newest_request_only() {
        let flow = Flow::new(MIN_INPUT_UNITS * 4);
        let old = flow
            .admit("5".into(), "tools/call".into(), 10, false, None)
            .await;
        assert!(flow.claim_serial("5", old));
        drop(flow.take("5")); // cancelled by the client
        let new = flow
            .admit("5".into(), "tools/call".into(), 10, false, None)
            .await;
        assert_ne!(old, new);
        assert!(
            !flow.claim_serial("5", old),
            "the old call claimed the new request"
        );
        assert!(
            flow.take_serial("5", old).is_none(),
            "the old call took the new request"
        );
        assert!(flow.claim_serial("5", new));
        assert!(flow.take_serial("5", new).is_some());
    }

    #[tokio::test]
    async fn input_lines_in_flight_are_bounded_in_bytes() {
        let flow = Flow::new(MIN_INPUT_UNITS * 2);
        flow.admit("1".into(), "a".into(), MIN_INPUT_UNITS * 2, false, None)
            .await;
        let f2 = Arc::clone(&flow);
        let waiting =
            tokio::spawn(async move { f2.admit("2".into(), "b".into(), 1, false, None).await });
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert!(!waiting.is_finished());
        drop(flow.take("1"));
        waiting.await.unwrap();
    }
}
