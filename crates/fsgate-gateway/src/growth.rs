//! The log's growth budgets at the gateway's door ([`fsgate_audit::growth`]): a request
//! of a session (or a process) that has spent its minute's audit bytes is refused before
//! any work, with -32004; the first refusal of the minute is recorded, the rest counted.

use std::time::Duration;

use crate::facts::Facts;
use crate::gateway::Request;
use crate::record::record_message;
use crate::request::RequestCtx;
use fsgate_audit::AuditLog;
use fsgate_audit::growth::Refusal;
use fsgate_base::error::{GatewayError, code};

/// Ok if the growth budgets of `audit` let `request` in; else its refusal, recorded
/// when it is the first of its minute.
pub(super) fn within_growth(
    audit: Option<&AuditLog>,
    ctx: &RequestCtx,
    request: &Request,
) -> Result<(), GatewayError> {
    let Some(audit) = audit else {
        return Ok(());
    };
    let refusal = match audit.admit(&ctx.session) {
        Ok(()) => return Ok(()),
        Err(r) => r,
    };
    let err = limit_error(&refusal, request);
    if refusal.first {
        record_growth_refusal(audit, ctx, request, &err, refusal.scope.rule())?;
    }
    Err(err)
}

/// The refused request's own record (its minute's first refusal).
fn record_growth_refusal(
    audit: &AuditLog,
    ctx: &RequestCtx,
    request: &Request,
    err: &GatewayError,
    rule: &'static str,
) -> Result<(), GatewayError> {
    match request {
        Request::Op(op) => {
            let mut facts = Facts::new(op.id(), op.audit_args());
            for (name, given) in op.path_texts() {
                match name {
                    "path" => facts.path = Some(given.to_string()),
                    "path2" => facts.path2 = Some(given.to_string()),
                    _ => {}
                }
            }
            facts.finish(&Err(err.clone()), Duration::ZERO);
            let event = facts.into_event(ctx);
            audit.append(event).map(|_| ()).map_err(|e| {
                GatewayError::Internal(format!("{e}; the request could not be recorded"))
            })
        }
        Request::Message { name, .. } => {
            let outcome = Err((code::LIMIT, err.message()));
            record_message(Some(audit), ctx, name, outcome, Some(rule))
        }
    }
}

/// The -32004 answer: which budget, how long until it refills.
fn limit_error(refusal: &Refusal, request: &Request) -> GatewayError {
    let path = match request {
        Request::Op(op) => op
            .path_texts()
            .first()
            .map(|(_, p)| fsgate_base::error::echo(p).into_owned())
            .unwrap_or_default(),
        Request::Message { .. } => String::new(),
    };
    GatewayError::Limit {
        reason: refusal.reason(),
        rule: refusal.scope.rule().to_string(),
        path,
    }
}
