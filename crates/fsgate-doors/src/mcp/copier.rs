//! The copier: the SDK's answers to the client, and the direct path's, in order. An
//! answer to a request nobody else recorded is recorded first, on the same blocking-pool
//! job that then writes it: one hand-off per answer. (With two, the `initialize` answer
//! waited at start-up for the pool to make a second thread, the first still finishing
//! the record.)

use std::sync::Arc;

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;
use tokio::io::AsyncRead;
use tokio::sync::mpsc;

use super::flow::{Flow, Pending, id_key};
use super::outgoing;
use crate::stdio::sink::Sink;
use fsgate_gateway::ops::RequestCtx;
use fsgate_gateway::{Gateway, How, Request};

/// Copies answers to the client, recording first each answer to a request nobody else
/// recorded, and releasing each request's room once its answer is written.
pub(super) struct Copier {
    pub(super) flow: Arc<Flow>,
    pub(super) gw: Arc<Gateway>,
    pub(super) ctx: Arc<RequestCtx>,
    pub(super) stateless: Arc<RequestCtx>,
}

/// The members of an outgoing message the copier looks at.
#[derive(Deserialize)]
struct Outgoing {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<IgnoredAny>,
    #[serde(default)]
    error: Option<RpcError>,
}

#[derive(Deserialize)]
struct RpcError {
    code: i64,
    message: String,
}

/// The record an answer needs before it goes out.
struct Entry {
    ctx: Arc<RequestCtx>,
    name: String,
    outcome: Result<(), (i64, String)>,
    /// The request's id: if the record cannot be made, the answer becomes that error.
    /// None for an error under no id, which goes out as it is.
    id: Option<Value>,
}

impl Entry {
    /// Records it; gives back the line to write.
    fn record(self, gw: &Gateway, line: Vec<u8>) -> Vec<u8> {
        let done = gw
            .serve(
                &self.ctx,
                Request::message(self.name, self.outcome),
                How::alone(),
            )
            .0;
        let Err(e) = done else {
            return line;
        };
        let Some(id) = self.id else {
            tracing::error!(
                "a refusal by the SDK could not be recorded: {}",
                e.message()
            );
            return line;
        };
        let answer = serde_json::json!({"jsonrpc": "2.0", "id": id, "error": e.to_rpc_error()});
        let mut line = answer.to_string().into_bytes();
        line.push(b'\n');
        line
    }
}

impl Copier {
    pub(super) async fn run<R>(
        self,
        from: R,
        to: Arc<Sink>,
        mut own: mpsc::Receiver<outgoing::Outgoing>,
    ) -> std::io::Result<()>
    where
        R: AsyncRead + Unpin,
    {
        use tokio::io::{AsyncBufReadExt, BufReader};
        let mut from = BufReader::new(from);
        let mut line = Vec::new();
        let mut own_open = true;
        loop {
            tokio::select! {
                // Cancel-safe: bytes read so far stay in `line` for the next call.
                n = from.read_until(b'\n', &mut line) => {
                    if n? == 0 {
                        if !line.is_empty() {
                            to.write_owned(line).await?;
                        }
                        break;
                    }
                    if line.ends_with(b"\n") {
                        let (pending, entry) = self.settle(&mut line);
                        line = self.record_and_write(entry, line, &to).await?;
                        drop(pending);
                        if line.capacity() > 1 << 20 {
                            line = Vec::new();
                        }
                        line.clear();
                    }
                }
                msg = own.recv(), if own_open => match msg {
                    Some(first) => {
                        // Whatever else is ready goes out with it (plain bytes in one
                        // write), the requests' rooms given back once written.
                        let mut batch = vec![first];
                        while let Ok(out) = own.try_recv() {
                            if let Some(Err(out)) = batch.last_mut().map(|b| b.absorb(out)) {
                                batch.push(out);
                            }
                        }
                        drop(write_own(&to, batch).await?);
                    }
                    None => own_open = false,
                },
            }
        }
        while let Some(out) = own.recv().await {
            drop(write_own(&to, vec![out]).await?);
        }
        Ok(())
    }

    /// Records `entry`, if any, then writes `line` (or the error that replaced it), on
    /// one job of the blocking pool; gives the line back written.
    async fn record_and_write(
        &self,
        entry: Option<Entry>,
        line: Vec<u8>,
        to: &Arc<Sink>,
    ) -> std::io::Result<Vec<u8>> {
        let Some(entry) = entry else {
            return to.write_owned(line).await;
        };
        let (gw, to) = (Arc::clone(&self.gw), Arc::clone(to));
        tokio::task::spawn_blocking(move || {
            let line = entry.record(&gw, line);
            to.write(&line).map(|()| line)
        })
        .await
        .map_err(std::io::Error::other)?
    }

    /// The request `line` answers (its room comes back once the answer is written), and
    /// the record to make first if nobody else records it. An error answer quoting too
    /// much of its request is bounded here.
    fn settle(&self, line: &mut Vec<u8>) -> (Option<Pending>, Option<Entry>) {
        let Some(out) = serde_json::from_slice::<Outgoing>(line).ok() else {
            return (None, None);
        };
        if out.method.is_some() {
            return (None, None);
        }
        if out
            .error
            .as_ref()
            .is_some_and(|e| e.message.len() > fsgate_base::error::MAX_ECHO)
        {
            bound_error_line(line);
        }
        let Some(id) = out.id.filter(|v| !v.is_null()) else {
            // An error under no id (the SDK found a message malformed; the pump hands
            // it only what it decoded, so this should not come): record that refusal,
            // as nobody else will.
            let entry = out.error.map(|e| Entry {
                ctx: Arc::clone(&self.ctx),
                name: "invalid-message".into(),
                outcome: Err((e.code, e.message)),
                id: None,
            });
            return (None, entry);
        };
        let Some(pending) = self.flow.take(&id_key(&id)) else {
            return (None, None);
        };
        if pending.claimed {
            return (Some(pending), None);
        }
        let ctx = if pending.stateless {
            &self.stateless
        } else {
            &self.ctx
        };
        let entry = Entry {
            ctx: Arc::clone(ctx),
            name: pending.method.clone(),
            outcome: out.error.map_or(Ok(()), |e| Err((e.code, e.message))),
            id: Some(id),
        };
        (Some(pending), Some(entry))
    }
}

/// An error answer of the SDK's whose message quotes too much of the request (a
/// method or tool name, a value): rewritten with its error bounded
/// ([`fsgate_base::error::echo_error`]).
fn bound_error_line(line: &mut Vec<u8>) {
    let Ok(mut v) = serde_json::from_slice::<Value>(line) else {
        return;
    };
    if let Some(e) = v.get_mut("error") {
        fsgate_base::error::echo_error(e);
    }
    let Ok(mut bytes) = serde_json::to_vec(&v) else {
        return;
    };
    bytes.push(b'\n');
    *line = bytes;
}

/// Writes the direct path's answers in order; gives them back written.
async fn write_own(
    to: &Arc<Sink>,
    batch: Vec<outgoing::Outgoing>,
) -> std::io::Result<Vec<outgoing::Outgoing>> {
    to.write_with_owned(move |w| {
        for out in &batch {
            out.write_to(w)?;
        }
        Ok(batch)
    })
    .await
}
