//! utimes: a file's or directory's access and modification times, decided as a write
//! of it (the filesystem view's `touch`, `utime`, `cp -p`). A link is never followed:
//! its own times are not set either, it is refused as chmod refuses it.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::facts::Facts;
use crate::ops::cx::Cx;
use crate::ops::operation::{Operation, Places};
use crate::ops::output::Output;
use crate::rules::ws_error;
use fsgate_audit::ChangeOp;
use fsgate_base::error::GatewayError;
use fsgate_decide::{EntryKind, OpClass};
use fsgate_workspace::Follow;
use serde_json::{Map, Value};

/// One of the two times, as asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetTime {
    /// Left as it is.
    Leave,
    /// The gateway's current time.
    Now,
    /// This time, in nanoseconds since the epoch.
    At(i64),
}

impl SetTime {
    /// The time to set (None: left), "now" read once by the gateway so that the record
    /// says exactly what was set.
    fn resolve(self, now: i64) -> Option<i64> {
        match self {
            SetTime::Leave => None,
            SetTime::Now => Some(now),
            SetTime::At(ns) => Some(ns),
        }
    }

    fn recorded(self) -> Option<Value> {
        match self {
            SetTime::Leave => None,
            SetTime::Now => Some("now".into()),
            SetTime::At(ns) => Some(ns.into()),
        }
    }
}

/// A file's or directory's times (the filesystem view's setattr with a time).
#[derive(Debug, Clone)]
pub struct Utimes {
    /// Path as given.
    pub path: String,
    /// The access time.
    pub atime: SetTime,
    /// The modification time.
    pub mtime: SetTime,
}

impl Operation for Utimes {
    const CHANGE: Option<ChangeOp> = Some(ChangeOp::Utimes);

    fn name() -> &'static str {
        ChangeOp::Utimes.name()
    }

    fn texts(&self) -> Vec<(&'static str, &str)> {
        vec![("path", self.path.as_str())]
    }

    fn places_mut(&mut self) -> Places<'_> {
        (Some(&mut self.path), None)
    }

    fn audit_args(&self, args: &mut Map<String, Value>) {
        for (k, t) in [("atime", self.atime), ("mtime", self.mtime)] {
            if let Some(v) = t.recorded() {
                args.insert(k.into(), v);
            }
        }
    }

    fn run(&self, cx: &Cx<'_>, facts: &mut Facts) -> Result<Output, GatewayError> {
        cx.utimes(self, facts)
    }
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .ok()
        .and_then(|d| i64::try_from(d.as_nanos()).ok())
        .unwrap_or(0)
}

impl Cx<'_> {
    fn utimes(&self, op: &Utimes, facts: &mut Facts) -> Result<Output, GatewayError> {
        let rp = self.parse_path(&op.path)?;
        facts.path = Some(rp.rel.as_str().to_string());
        let res = self.locate(OpClass::Write, &rp, Follow::All, EntryKind::Unknown, facts)?;
        if !res.exists {
            return Err(GatewayError::NotFound { path: rp.shown });
        }
        let kind = if self.is_real_dir(&res.real) {
            EntryKind::Dir
        } else {
            EntryKind::File
        };
        self.check(OpClass::Write, &res.real, kind, &rp.shown, facts)?;
        facts.real.0 = Some(res.real.as_str().to_string());
        let old = self
            .workspace
            .times_of(&res.real)
            .map_err(|e| ws_error(e, &rp.shown))?;
        let now = now_ns();
        let (atime, mtime) = (op.atime.resolve(now), op.mtime.resolve(now));
        for (k, v) in [
            ("oldAtime", Some(old.atime)),
            ("oldMtime", Some(old.mtime)),
            ("atime", atime),
            ("mtime", mtime),
        ] {
            if let Some(v) = v {
                facts.args.insert(k.into(), v.into());
            }
        }
        self.intend(facts)?;
        self.workspace
            .utimes(&res.real, atime, mtime)
            .map_err(|e| ws_error(e, &rp.shown))?;
        Ok(Output::Unit)
    }
}
