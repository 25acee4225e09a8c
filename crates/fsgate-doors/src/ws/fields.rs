//! A request's fields read (typed, bounded in what they accept) into the operation its
//! `type` names.

use base64::Engine;
use fsgate_gateway::ops;
use serde_json::{Map, Value};

use fsgate_base::error::GatewayError;

use fsgate_gateway::ops::{Op, OpId};

use super::response::Head;

/// Typed access to a message's fields.
pub(super) struct Fields<'a> {
    pub(super) msg: &'a Map<String, Value>,
}

impl Fields<'_> {
    pub(super) fn string(&self, name: &str) -> Result<Option<String>, GatewayError> {
        match self.msg.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(GatewayError::InvalidParams(format!(
                "\"{name}\" must be a string"
            ))),
        }
    }

    pub(super) fn required(&self, name: &str) -> Result<String, GatewayError> {
        self.string(name)?
            .ok_or_else(|| GatewayError::InvalidParams(format!("missing \"{name}\"")))
    }

    pub(super) fn flag(&self, name: &str) -> Result<bool, GatewayError> {
        match self.msg.get(name) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(GatewayError::InvalidParams(format!(
                "\"{name}\" must be a boolean"
            ))),
        }
    }

    /// `encoding`: true for base64, false for utf-8 (the default).
    pub(super) fn base64(&self) -> Result<bool, GatewayError> {
        match self.string("encoding")?.as_deref() {
            None | Some("utf-8" | "utf8") => Ok(false),
            Some("base64") => Ok(true),
            Some(other) => Err(GatewayError::InvalidParams(format!(
                "unknown encoding {other:?}; use \"utf-8\" or \"base64\""
            ))),
        }
    }
}

/// The channel's message type that asks for `op`, if the channel offers it.
pub(crate) fn type_of(op: OpId) -> Option<&'static str> {
    Some(match op {
        OpId::Ls => "list",
        OpId::ReadFile => "read",
        OpId::Write => "write",
        OpId::Mkdir => "mkdir",
        OpId::Rm => "delete",
        OpId::Rename => "rename",
        OpId::Stat => "stat",
        // Not the channel's, nor an operation added later until it offers it.
        _ => return None,
    })
}

/// A request's operation, and whether a read asked for base64; None for a type no one
/// serves.
pub(super) fn op_of(head: &Head, f: &Fields<'_>) -> Result<Option<(Op, bool)>, GatewayError> {
    let kind = head.kind.as_str();
    let Some(id) = OpId::ALL
        .iter()
        .copied()
        .find(|&op| type_of(op) == Some(kind))
    else {
        return Ok(None);
    };
    let base64 = id == OpId::ReadFile && f.base64()?;
    let op = decode(id, f)?;
    if head.request_id.is_none() {
        return Err(GatewayError::InvalidParams("missing \"requestId\"".into()));
    }
    Ok(Some((op, base64)))
}

/// A request's fields as `op`, the operation its type names.
fn decode(op: OpId, f: &Fields<'_>) -> Result<Op, GatewayError> {
    Ok(match op {
        OpId::Ls => list_op(f)?,
        OpId::ReadFile => Op::ReadFile(ops::ReadFile {
            path: f.required("path")?,
        }),
        OpId::Write => write_op(f)?,
        OpId::Mkdir => Op::Mkdir(ops::Mkdir {
            path: f.required("path")?,
            recursive: f.flag("recursive")?,
        }),
        OpId::Rm => Op::Rm(ops::Rm {
            path: f.required("path")?,
            recursive: f.flag("recursive")?,
        }),
        OpId::Rename => Op::Rename(ops::Rename {
            from: f.required("oldPath")?,
            to: f.required("newPath")?,
            replace: true,
        }),
        OpId::Stat => Op::Stat(ops::Stat {
            path: f.required("path")?,
            follow: true,
        }),
        // Not offered (see `type_of`): no message reaches here for them.
        _ => {
            return Err(GatewayError::InvalidParams(format!(
                "{} is not a message type of this channel",
                op.name()
            )));
        }
    })
}

/// A `list` request: one directory's page (a recursive listing is refused).
fn list_op(f: &Fields<'_>) -> Result<Op, GatewayError> {
    if f.flag("recursive")? {
        return Err(GatewayError::InvalidParams(
            "recursive listing is not supported; list each directory".into(),
        ));
    }
    Ok(Op::Ls(ops::Ls {
        path: f.string("path")?.unwrap_or_else(|| "/".into()),
        cursor: f.string("cursor")?,
        kinds_only: false,
    }))
}

/// A `write` request: text, or bytes sent as base64 (`"encoding": "base64"`).
fn write_op(f: &Fields<'_>) -> Result<Op, GatewayError> {
    let path = f.required("path")?;
    let content = f.required("content")?;
    if !f.base64()? {
        return Ok(Op::Write(ops::Write::text(path, content)));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(content.as_bytes())
        .map_err(|e| GatewayError::InvalidParams(format!("content is not valid base64: {e}")))?;
    Ok(Op::Write(ops::Write::bytes(path, bytes)))
}
