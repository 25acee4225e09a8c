//! What a `tools/call` asks, read once by the input pump for the one path every call
//! takes (see `direct`): the tool, its arguments, the context it runs in, and what its
//! answer may carry.
//!
//! A plain call of the 2025 session (a name and arguments, nothing else) is read by a
//! small parser of its own. Any other call (`_meta`, a stateless request, a retry of a
//! multi round-trip request) is read as the SDK reads it, and first meets the checks
//! the SDK makes before a handler sees a request, with the SDK's own checks and
//! errors: a `_meta` protocol version the server supports, and for 2026-07-28 the
//! request's required `_meta` keys.

use std::sync::{Arc, OnceLock};

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, ClientJsonRpcMessage, ClientRequest, GetMeta, JsonObject,
    JsonRpcMessage, ProtocolVersion, RequestMetaObject,
};
use serde::Deserialize;

use super::mrtr;
use super::tool_id::ToolId;
use fsgate_gateway::ops::RequestCtx;

/// A call ready to run.
pub(super) struct Call {
    /// The tool.
    pub tool: ToolId,
    /// Its arguments (absent: none).
    pub args: JsonObject,
    /// Where it runs: the 2025 session, a stateless request's, or a stateless round's.
    pub ctx: Arc<RequestCtx>,
    /// What its answer may carry.
    pub era: Era,
}

/// What the answer of a call may carry, by the protocol version it was sent under.
pub(super) struct Era {
    /// Its version (its `_meta`'s, else the session's) is 2026-07-28 or later: the
    /// result keeps `resultType`, and may ask for input.
    pub modern: bool,
    /// The multi round-trip round of a stateless call from a client that can be asked
    /// (see `mrtr`).
    pub round: Option<Arc<mrtr::Round>>,
}

/// Why a call is not run.
pub(super) enum Unrun {
    /// Params the SDK could not read as a `tools/call`'s.
    Unreadable,
    /// An error the answer carries: an unsupported protocol version, missing `_meta`
    /// keys, an unknown tool, a refused `requestState`.
    Refused(McpError),
}

/// What reading a call needs, one per connection.
pub(super) struct Calls {
    /// The 2025 session's context.
    pub ctx: Arc<RequestCtx>,
    /// Stateless requests' context.
    pub stateless: Arc<RequestCtx>,
    /// The signing key of `requestState`s; None: stateless requests are not asked.
    pub states: Option<Arc<mrtr::States>>,
    /// The protocol version the session's `initialize` agreed on.
    pub session_version: OnceLock<ProtocolVersion>,
    /// The session's roots, asked for and waited on (see `roots`).
    pub roots: super::roots::Asking,
}

/// The protocol versions the server supports: what `initialize` may agree to and what
/// a request's `_meta` may name.
pub(super) fn supported_versions() -> &'static [ProtocolVersion] {
    ProtocolVersion::KNOWN_VERSIONS
}

/// Whether `v` is the stateless revision or later (ISO dates compare as text).
fn is_modern(v: &ProtocolVersion) -> bool {
    v.as_str() >= ProtocolVersion::V_2026_07_28.as_str()
}

impl Calls {
    /// The call on `line` (a `tools/call` request; `stateless`: its `_meta` names a
    /// protocol version), or why it is not run.
    pub(super) fn read(&self, line: &[u8], stateless: bool) -> Result<Call, Unrun> {
        if !stateless && let Some(plain) = plain(line) {
            return Ok(Call {
                tool: known(&plain.name)?,
                args: plain.arguments.unwrap_or_default(),
                ctx: Arc::clone(&self.ctx),
                era: Era {
                    modern: self.session_is_modern(),
                    round: None,
                },
            });
        }
        let (params, meta) = params(line).ok_or(Unrun::Unreadable)?;
        check_meta(&meta).map_err(Unrun::Refused)?;
        let tool = known(&params.name)?;
        let args = params.arguments.clone().unwrap_or_default();
        let modern = meta
            .protocol_version()
            .map_or_else(|| self.session_is_modern(), |v| is_modern(&v));
        if !stateless {
            let ctx = Arc::clone(&self.ctx);
            let era = Era {
                modern,
                round: None,
            };
            return Ok(Call {
                tool,
                args,
                ctx,
                era,
            });
        }
        let round = self.round(&params, &meta, &args)?;
        let ctx = match &round {
            Some(r) => Arc::new(self.asking(r)),
            None => Arc::clone(&self.stateless),
        };
        let era = Era { modern, round };
        Ok(Call {
            tool,
            args,
            ctx,
            era,
        })
    }

    fn session_is_modern(&self) -> bool {
        self.session_version.get().is_some_and(is_modern)
    }

    /// The round of a stateless call from a client whose request declares form
    /// elicitation (None: it cannot be asked that way).
    fn round(
        &self,
        params: &CallToolRequestParams,
        meta: &RequestMetaObject,
        args: &JsonObject,
    ) -> Result<Option<Arc<mrtr::Round>>, Unrun> {
        let Some(states) = &self.states else {
            return Ok(None);
        };
        let forms = meta
            .client_capabilities()
            .and_then(|c| c.elicitation)
            .is_some_and(|e| e.form.is_some() || e.url.is_none());
        if !forms {
            return Ok(None);
        }
        let responses = params
            .input_responses
            .as_ref()
            .and_then(|r| serde_json::to_value(r).ok());
        let round = mrtr::Round::begin(
            states,
            &self.stateless.session,
            (&params.name, args),
            (params.request_state.as_deref(), responses.as_ref()),
        )
        .map_err(|e| Unrun::Refused(McpError::invalid_params(e, None)))?;
        Ok(Some(Arc::new(round)))
    }

    /// The stateless context with `round` as its asker.
    fn asking(&self, round: &Arc<mrtr::Round>) -> RequestCtx {
        RequestCtx {
            scope: fsgate_gateway::Scope::default(),
            asker: Some(Arc::clone(round) as Arc<dyn fsgate_gateway::ask::Asker>),
            notifier: None,
            ..(*self.stateless).clone()
        }
    }
}

/// The tool named `name`, or the SDK's error for an unknown one.
fn known(name: &str) -> Result<ToolId, Unrun> {
    ToolId::from_name(name).ok_or_else(|| {
        let name = fsgate_base::error::echo(name);
        Unrun::Refused(McpError::invalid_params(
            format!("unknown tool: {name}"),
            None,
        ))
    })
}

/// The checks the SDK makes of a request's `_meta` before its handler sees it: the
/// protocol version it names is supported, and a 2026-07-28 request carries the keys
/// that revision requires.
fn check_meta(meta: &RequestMetaObject) -> Result<(), McpError> {
    let Some(version) = meta.protocol_version() else {
        return Ok(());
    };
    let supported = supported_versions();
    if !supported.contains(&version) {
        return Err(McpError::unsupported_protocol_version(version, supported));
    }
    if is_modern(&version) {
        let missing = meta.missing_required_keys(&ProtocolVersion::V_2026_07_28);
        if !missing.is_empty() {
            return Err(McpError::invalid_params(
                format!(
                    "request _meta is missing or has malformed required fields: {}",
                    missing.join(", ")
                ),
                None,
            ));
        }
    }
    Ok(())
}

/// The params of a plain call: a name and arguments, nothing else.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Plain {
    name: String,
    #[serde(default)]
    arguments: Option<JsonObject>,
}

#[derive(Deserialize)]
struct PlainMessage {
    params: Plain,
}

/// `line`'s params if it is a plain call.
fn plain(line: &[u8]) -> Option<Plain> {
    serde_json::from_slice::<PlainMessage>(line)
        .ok()
        .map(|m| m.params)
}

/// `line`'s params as the SDK reads a `tools/call`'s, if it can, and their `_meta`
/// (which the SDK keeps apart from the params).
fn params(line: &[u8]) -> Option<(CallToolRequestParams, RequestMetaObject)> {
    let msg: ClientJsonRpcMessage = serde_json::from_slice(line.trim_ascii()).ok()?;
    let JsonRpcMessage::Request(r) = msg else {
        return None;
    };
    let mut meta = r.request.get_meta().clone();
    let ClientRequest::CallToolRequest(call) = r.request else {
        return None;
    };
    if let Some(inner) = &call.params.meta {
        meta.extend(inner.clone());
    }
    Some((call.params, meta))
}
