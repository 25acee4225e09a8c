//! The SDK's transport: the messages the input pump read, decoded and let through, in;
//! the SDK's own messages, out as lines to the output copier.
//!
//! The pump decodes each message the SDK is to see (the decoding the SDK's line
//! transport would otherwise do), so that it knows what the SDK will make of it: a line
//! the SDK cannot read is answered by the pump under its own id, never with the null
//! id the SDK's line transport gives it, and a message is never handed to the SDK where
//! the SDK would end the connection over it (see [`super::era::opens`]).

use std::future::Future;
use std::io;
use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{Mutex, mpsc};

/// Messages the pump hands over and the SDK has not taken yet: one, as a message may
/// be as large as the message limit (a request also holds room in the connection's
/// flow; a notification or a response holds nothing else).
pub(super) const QUEUED: usize = 1;

/// One connection's transport for the SDK.
pub(super) struct Wire<W> {
    from_pump: mpsc::Receiver<ClientJsonRpcMessage>,
    /// Where answers go, one whole line at a time; None once closed.
    out: Arc<Mutex<Option<W>>>,
}

impl<W> Wire<W> {
    pub(super) fn new(from_pump: mpsc::Receiver<ClientJsonRpcMessage>, out: W) -> Wire<W> {
        Wire {
            from_pump,
            out: Arc::new(Mutex::new(Some(out))),
        }
    }
}

impl<W> Transport<RoleServer> for Wire<W>
where
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = io::Result<()>> + Send + 'static {
        let out = Arc::clone(&self.out);
        async move {
            let mut line = serde_json::to_vec(&item).map_err(io::Error::other)?;
            line.push(b'\n');
            let mut out = out.lock().await;
            let w = out
                .as_mut()
                .ok_or_else(|| io::Error::from(io::ErrorKind::BrokenPipe))?;
            w.write_all(&line).await?;
            w.flush().await
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ClientJsonRpcMessage>> + Send {
        self.from_pump.recv()
    }

    fn close(&mut self) -> impl Future<Output = io::Result<()>> + Send {
        let out = Arc::clone(&self.out);
        async move {
            if let Some(mut w) = out.lock().await.take() {
                w.shutdown().await?;
            }
            Ok(())
        }
    }
}
