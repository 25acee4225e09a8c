//! MCP roots as a narrowing: a client that declares the `roots` capability is asked for
//! its roots (`roots/list`) once the session is initialized and again on each
//! `notifications/roots/list_changed`. Its `file://` roots inside the workspace become
//! the session's scope ([`fsgate_gateway::Scope`]): every tool call must stay beneath
//! one of them, on every path into the server (the SDK's and the direct one), whatever
//! the protocol era of the call. Roots outside the workspace are ignored with a warning:
//! roots never widen what `--workspace` grants. No usable roots (none given, none
//! inside, no capability, no answer): the whole workspace. Each change of roots is
//! recorded in the audit log (a `roots` record).
//!
//! A root that contains the workspace narrows nothing: it counts as the workspace.
//! Calls read after the client declared roots (in `initialize`) or announced a change
//! wait for the answer to the ask it leads to, so a call is never served with roots
//! wider than those its client had when it sent the call. Each waits by itself (see
//! [`Asking`]): at most [`MAX_WAITING`] at once, the rest refused at once; the reader
//! serves everything else meanwhile; a call that needs roots never asked for (no
//! `notifications/initialized` yet) sends `roots/list` itself; the end of the input
//! refuses every call still waiting.
//!
//! The 2026-07-28 revision deprecates roots and forbids requests from the server outside
//! a call: its stateless requests carry no roots and are never asked for any. They are
//! served with the whole workspace, whatever roots a 2025-era session on the same
//! connection gave (see `McpServer::stateless`).

// Roots are deprecated in the SDK (SEP-2577) but current in the 2025 revisions.
#![allow(deprecated)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use fsgate_base::error::GatewayError;
use fsgate_gateway::Scope;
use tokio::sync::{Notify, watch};

use percent_encoding::percent_decode_str;
use rmcp::RoleServer;
use rmcp::model::Root;
use rmcp::service::Peer;
use serde_json::{Map, Value, json};

use fsgate_base::path::RelPath;
use fsgate_gateway::ops::RequestCtx;
use fsgate_gateway::{Gateway, Roots};

/// How long the client has to answer `roots/list`; then the session keeps the workspace.
const ASK_WAIT: Duration = Duration::from_secs(5);

/// Roots a session may have in force (each call is checked against each), and ignored
/// roots named one by one in the audit record (the rest are counted).
const MAX_ROOTS: usize = 256;
const MAX_IGNORED_SHOWN: usize = 32;

/// How long a tool call waits for outstanding roots before it is refused (a backstop:
/// the ask ends first).
pub(super) const SETTLE_WAIT: Duration = Duration::from_secs(15);

/// Calls of one session that wait for its roots at once; more are refused at once.
const MAX_WAITING: usize = 64;

/// The asking for one session's roots, and the calls that wait for them. A call waits
/// by itself (a task of its own, see the pump's `park`): the reader goes on meanwhile,
/// so `ping`, stateless calls and the client's `roots/list` answer are read at once.
#[derive(Default)]
pub(super) struct Asking {
    /// The client, from its `initialize` on: a call that needs the roots before
    /// `notifications/initialized` asks for them itself.
    pub peer: std::sync::OnceLock<Peer<RoleServer>>,
    /// The roots were asked for once at least.
    asked: AtomicBool,
    /// Told whenever an ask ends: the waiting calls look again.
    settled: Arc<Notify>,
    /// Calls waiting now.
    waiting: Arc<AtomicUsize>,
}

/// A waiting call's place among the [`MAX_WAITING`].
pub(super) struct Waiting(Arc<AtomicUsize>);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Asking {
    /// Sends `roots/list` unless it was sent already (`again`: send it anyway).
    pub(super) fn ask(
        &self,
        gw: &Arc<Gateway>,
        ctx: &Arc<RequestCtx>,
        peer: Peer<RoleServer>,
        again: bool,
    ) {
        if self.asked.swap(true, Ordering::AcqRel) && !again {
            return;
        }
        let settled = Arc::clone(&self.settled);
        tokio::spawn(ask(Arc::clone(gw), Arc::clone(ctx), peer, settled));
    }

    /// A call needs the roots: they are asked for now if they never were.
    pub(super) fn needed(&self, gw: &Arc<Gateway>, ctx: &Arc<RequestCtx>) {
        if let Some(peer) = self.peer.get() {
            self.ask(gw, ctx, peer.clone(), false);
        }
    }

    /// A place to wait, unless [`MAX_WAITING`] calls wait already.
    pub(super) fn place(&self) -> Result<Waiting, ()> {
        if self.waiting.fetch_add(1, Ordering::AcqRel) >= MAX_WAITING {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            return Err(());
        }
        Ok(Waiting(Arc::clone(&self.waiting)))
    }

    /// Waits until `scope` is settled: None, the call may run. Else (the input ended,
    /// or no answer within [`SETTLE_WAIT`]) the refusal the call gets instead.
    pub(super) async fn wait(
        &self,
        scope: &Scope,
        mut ended: watch::Receiver<bool>,
    ) -> Option<GatewayError> {
        let deadline = tokio::time::Instant::now() + SETTLE_WAIT;
        loop {
            let notified = self.settled.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if *ended.borrow() {
                return Some(unsettled(
                    "the client's input ended before the roots it was asked for arrived".into(),
                ));
            }
            match scope.settled(Duration::ZERO) {
                Ok(_) => return None,
                Err(e) if !scope.waits() || tokio::time::Instant::now() >= deadline => {
                    return Some(e);
                }
                Err(_) => {}
            }
            tokio::select! {
                () = &mut notified => {}
                gone = ended.changed() => if gone.is_err() {
                    let _ = ended.borrow_and_update();
                    return Some(unsettled("the client's input ended before the roots it was asked for arrived".into()));
                },
                () = tokio::time::sleep_until(deadline) => {}
            }
        }
    }
}

/// The refusal of a call that finds too many waiting for the roots already.
pub(super) fn too_many() -> GatewayError {
    unsettled(format!(
        "{MAX_WAITING} calls already wait for the client's roots (roots/list was sent and is not \
         answered yet); answer it, then call again"
    ))
}

/// The refusal of a call that could not wait for its roots.
fn unsettled(reason: String) -> GatewayError {
    GatewayError::Refused {
        reason,
        rule: "client-roots".into(),
        path: String::new(),
    }
}

/// Asks the client for its roots and puts them in force; `settled` is told once the
/// ask ended. Calls wait meanwhile.
async fn ask(gw: Arc<Gateway>, ctx: Arc<RequestCtx>, peer: Peer<RoleServer>, settled: Arc<Notify>) {
    let ticket = ctx.scope.expect();
    let answer = match tokio::time::timeout(ASK_WAIT, peer.list_roots()).await {
        Ok(Ok(list)) => Ok(list.roots),
        Ok(Err(e)) => Err(format!("roots/list failed: {e}")),
        Err(_) => Err(format!(
            "roots/list was not answered within {}s",
            ASK_WAIT.as_secs()
        )),
    };
    let ctx2 = Arc::clone(&ctx);
    let applied = tokio::task::spawn_blocking(move || apply(&gw, &ctx2, ticket, answer)).await;
    if applied.is_err() {
        // Never leave calls waiting; the backstop would refuse them.
        let _ = ctx.scope.set(ticket, None);
    }
    settled.notify_waiters();
}

/// Puts the answer's roots in force and records the change.
fn apply(gw: &Gateway, ctx: &RequestCtx, ticket: u64, answer: Result<Vec<Root>, String>) {
    let mut details = Map::new();
    let roots = match answer {
        Ok(list) => {
            let (accepted, ignored) = sort_out(gw, &list);
            let shown: Vec<Value> = accepted.iter().map(|r| show(gw, r).into()).collect();
            let (shown, count) = recorded(shown, usize::MAX, ACCEPTED_RECORDED_BYTES);
            details.insert("accepted".into(), shown.into());
            if let Some(count) = count {
                details.insert("acceptedCount".into(), count.into());
            }
            let (ignored, count) = recorded(ignored, MAX_IGNORED_SHOWN, IGNORED_RECORDED_BYTES);
            if let Some(count) = count {
                details.insert("ignoredCount".into(), count.into());
            }
            details.insert("ignored".into(), ignored.into());
            (!accepted.is_empty()).then(|| Arc::from(accepted))
        }
        Err(e) => {
            tracing::warn!("{e}; the session keeps the whole workspace");
            details.insert("error".into(), e.into());
            None
        }
    };
    let scope = if roots.is_some() {
        "roots"
    } else {
        "workspace"
    };
    details.insert("scope".into(), scope.into());
    // Recorded when in force; a newer ask's answer is recorded instead.
    if ctx.scope.set(ticket, roots) {
        gw.record(fsgate_gateway::Lifecycle::of(ctx, "roots"), details);
    }
}

/// The bytes, as written in the record, that a `roots` record gives the accepted roots
/// and the ignored ones at most: a client's list never makes a record larger than
/// about 24 KiB, however many and however long its roots.
const ACCEPTED_RECORDED_BYTES: usize = 16 * 1024;
const IGNORED_RECORDED_BYTES: usize = 8 * 1024;

/// The first entries of `list` a record keeps (at most `max`, and `bytes` as written,
/// at least one), and the whole count when some were left out.
fn recorded(mut list: Vec<Value>, max: usize, bytes: usize) -> (Vec<Value>, Option<usize>) {
    let all = list.len();
    let mut total = 0;
    let fit = list
        .iter()
        .take(max)
        .take_while(|v| {
            total += v.to_string().len() + 1;
            total <= bytes
        })
        .count()
        .max(1)
        .min(all);
    list.truncate(fit);
    (list, (fit < all).then_some(all))
}

/// The roots accepted (real workspace paths, without duplicates) and those ignored
/// (`{uri, reason}`), in the client's order.
fn sort_out(gw: &Gateway, list: &[Root]) -> (Vec<RelPath>, Vec<Value>) {
    let mut accepted: Vec<RelPath> = Vec::new();
    let mut ignored = Vec::new();
    for root in list {
        let accepted_one = if accepted.len() < MAX_ROOTS {
            accept(gw, &root.uri)
        } else {
            Err(format!("more than {MAX_ROOTS} roots"))
        };
        match accepted_one {
            Ok(rels) => {
                for rel in rels {
                    if !accepted.contains(&rel) {
                        accepted.push(rel);
                    }
                }
            }
            Err(reason) => {
                if ignored.len() < MAX_IGNORED_SHOWN {
                    tracing::warn!(uri = %clip(&root.uri), "client root ignored: {reason}");
                }
                ignored.push(json!({"uri": clip(&root.uri), "reason": reason}));
            }
        }
    }
    (accepted, ignored)
}

/// The real workspace directories a root URI names, or why it is ignored.
fn accept(gw: &Gateway, uri: &str) -> Result<Vec<RelPath>, String> {
    let path = file_path(uri)?;
    gw.root_dirs(&path).map_err(|e| e.to_string())
}

/// The path of a `file://` URI (empty or `localhost` host), percent-decoded.
fn file_path(uri: &str) -> Result<String, String> {
    let rest = uri
        .strip_prefix("file://")
        .ok_or("not a file:// URI".to_string())?;
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    if !rest.starts_with('/') {
        return Err("a file:// URI with a host other than localhost".into());
    }
    let rest = rest.split(['?', '#']).next().unwrap_or(rest);
    let path = percent_decode_str(rest)
        .decode_utf8()
        .map_err(|_| "its path is not UTF-8".to_string())?;
    Ok(path.into_owned())
}

fn show(gw: &Gateway, rel: &RelPath) -> String {
    gw.show_path(fsgate_gateway::ops::PathStyle::AbsoluteOrRelative, rel)
}

fn clip(s: &str) -> String {
    fsgate_gateway::clip(s)
}

/// The text of `list_allowed_directories`: the roots in force, or the workspace.
pub(super) fn allowed_directories(gw: &Gateway, roots: &Roots) -> String {
    let dirs: Vec<String> = match roots {
        Some(r) => r.iter().map(|rel| show(gw, rel)).collect(),
        None => gw
            .members()
            .root_paths()
            .map(|p| p.to_string_lossy().into_owned())
            .collect(),
    };
    format!("Allowed directories:\n{}", dirs.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_uris_are_decoded_and_others_refused() {
        assert_eq!(file_path("file:///a/b%20c").unwrap(), "/a/b c");
        assert_eq!(file_path("file://localhost/x").unwrap(), "/x");
        assert!(file_path("https://x/y").is_err());
        assert!(file_path("file://host/y").is_err());
        assert!(file_path("file:///a%FF").is_err());
    }
}
