//! A connection's outgoing messages, bounded in bytes (issue: a client that stops
//! reading must not grow the gateway).
//!
//! Each queued message holds as many units of the connection's room as it has bytes
//! (at least one, at most the whole room) until the writer has written it. A sender
//! waits while there is no room, and the connection's reader waits before taking a new
//! request while the room is used up ([`Outbox::wait_for_room`]), so unwritten answers
//! never exceed the bound, whatever the client does.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

/// One queued message and the room it holds until written.
pub(crate) struct Queued<M> {
    /// The message.
    pub msg: M,
    /// Released when the message is dropped after writing.
    _room: OwnedSemaphorePermit,
    /// Its share of the room shared by every connection, if any.
    _total: Option<OwnedSemaphorePermit>,
}

/// The room a message held, once the message itself was taken out ([`Queued::split`]).
pub(crate) struct Room {
    _room: OwnedSemaphorePermit,
    _total: Option<OwnedSemaphorePermit>,
}

impl<M> Queued<M> {
    /// The message and its room apart: a writer that hands messages to a buffered sink
    /// keeps the room until the buffer is flushed.
    pub(crate) fn split(self) -> (M, Room) {
        let room = Room {
            _room: self._room,
            _total: self._total,
        };
        (self.msg, room)
    }
}

/// The sending side; clone it for each producer.
pub(crate) struct Outbox<M> {
    tx: mpsc::UnboundedSender<Queued<M>>,
    room: Arc<Semaphore>,
    cap: u32,
    /// Room shared with other connections (the WebSocket server's total), and its size.
    total: Option<(Arc<Semaphore>, u32)>,
}

impl<M> Clone for Outbox<M> {
    fn clone(&self) -> Self {
        Outbox {
            tx: self.tx.clone(),
            room: Arc::clone(&self.room),
            cap: self.cap,
            total: self.total.clone(),
        }
    }
}

impl<M> Outbox<M> {
    /// An outbox of `cap_bytes` and the receiver its writer drains.
    pub(crate) fn new(cap_bytes: usize) -> (Outbox<M>, mpsc::UnboundedReceiver<Queued<M>>) {
        let cap = u32::try_from(cap_bytes.max(1)).unwrap_or(u32::MAX >> 4);
        let (tx, rx) = mpsc::unbounded_channel();
        let room = Arc::new(Semaphore::new(cap as usize));
        let total = None;
        (
            Outbox {
                tx,
                room,
                cap,
                total,
            },
            rx,
        )
    }

    /// Also bounds this outbox by `total`, room shared with other connections (made by
    /// [`shared_room`]).
    pub(crate) fn sharing(mut self, total: &SharedRoom) -> Outbox<M> {
        self.total = Some((Arc::clone(&total.0), total.1));
        self
    }

    /// Queues `msg` of `len` bytes once there is room for it; false if the writer is gone.
    pub(crate) async fn send(&self, msg: M, len: usize) -> bool {
        let units = u32::try_from(len).unwrap_or(u32::MAX).clamp(1, self.cap);
        let Ok(room) = Arc::clone(&self.room).acquire_many_owned(units).await else {
            return false;
        };
        let total = match &self.total {
            Some((t, cap)) => {
                let Ok(p) = Arc::clone(t).acquire_many_owned(units.min(*cap)).await else {
                    return false;
                };
                Some(p)
            }
            None => None,
        };
        let queued = Queued {
            msg,
            _room: room,
            _total: total,
        };
        self.tx.send(queued).is_ok()
    }

    /// Queues `msg` of `len` bytes now if there is room for it, else hands it back (also
    /// when the writer is gone): for a sender that must not wait and must keep its
    /// place in the order.
    pub(crate) fn try_send(&self, msg: M, len: usize) -> Result<(), M> {
        let units = u32::try_from(len).unwrap_or(u32::MAX).clamp(1, self.cap);
        let Ok(room) = Arc::clone(&self.room).try_acquire_many_owned(units) else {
            return Err(msg);
        };
        let total = match &self.total {
            Some((t, cap)) => match Arc::clone(t).try_acquire_many_owned(units.min(*cap)) {
                Ok(p) => Some(p),
                Err(_) => return Err(msg),
            },
            None => None,
        };
        let queued = Queued {
            msg,
            _room: room,
            _total: total,
        };
        self.tx.send(queued).map_err(|e| e.0.msg)
    }

    /// Waits until some of the room is free (the client has read what filled it).
    pub(crate) async fn wait_for_room(&self) {
        if let Ok(p) = self.room.acquire().await {
            drop(p);
        }
    }

    /// Whether the writer is gone (the client can no longer be answered).
    pub(crate) fn closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// Bytes queued and not yet written.
    pub(crate) fn unwritten(&self) -> usize {
        (self.cap as usize).saturating_sub(self.room.available_permits())
    }
}

/// Room shared by several outboxes: (the semaphore, its size in bytes).
#[derive(Clone, Debug)]
pub(crate) struct SharedRoom(Arc<Semaphore>, u32);

/// Room of `cap_bytes` shared by several outboxes.
pub(crate) fn shared_room(cap_bytes: usize) -> SharedRoom {
    let cap = u32::try_from(cap_bytes.max(1)).unwrap_or(u32::MAX >> 4);
    SharedRoom(Arc::new(Semaphore::new(cap as usize)), cap)
}

impl Outbox<Vec<u8>> {
    /// [`send`](Self::send) of bytes, counted by their length.
    pub(crate) async fn send_bytes(&self, bytes: Vec<u8>) -> bool {
        let len = bytes.len();
        self.send(bytes, len).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn senders_wait_while_unwritten_bytes_fill_the_room() {
        let (out, mut rx) = Outbox::<Vec<u8>>::new(10);
        assert!(out.send(vec![0; 6], 6).await);
        assert_eq!(out.unwritten(), 6);
        let o2 = out.clone();
        let blocked = tokio::spawn(async move { o2.send(vec![0; 6], 6).await });
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
        assert!(!blocked.is_finished(), "no room: the sender must wait");
        drop(rx.recv().await); // written
        assert!(blocked.await.unwrap());
        assert_eq!(out.unwritten(), 6);
        // A message larger than the room takes all of it, alone.
        drop(rx.recv().await);
        assert!(out.send(vec![0; 100], 100).await);
        assert_eq!(out.unwritten(), 10);
    }
}
