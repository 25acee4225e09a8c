//! Falling behind by more than the limit and catching up again, each said once in a
//! lifecycle record (`ship-behind`, `ship-caught-up`).

use serde_json::{Map, Value, json};

use super::Run;
use crate::record::AuditEvent;

impl Run {
    /// Records falling behind by more than the limit, and catching up, once each.
    pub(super) fn watch_lag(&mut self, head: u64) {
        let Some(limit) = self.w.alert_behind else {
            return;
        };
        // Lag counts what is not sent: confirmation trails sending by design.
        let lag = head.saturating_sub(self.w.reader.next_seq() - 1);
        self.worst_lag = self.worst_lag.max(lag);
        if !self.behind && lag > limit {
            self.behind = true;
            self.record("ship-behind", lag, Some(limit));
            self.save(|s| s.alerted = true);
        } else if self.behind && lag == 0 && self.in_flight.is_empty() {
            self.behind = false;
            self.record("ship-caught-up", self.worst_lag, None);
            self.worst_lag = 0;
            self.save(|s| s.alerted = false);
        }
    }

    pub(super) fn record(&self, kind: &str, lag: u64, limit: Option<u64>) {
        let mut d = Map::new();
        d.insert("destination".into(), Value::String(self.w.name.clone()));
        d.insert("shipped".into(), json!(self.confirmed));
        if let Some(limit) = limit {
            d.insert("behind".into(), json!(lag));
            d.insert("limit".into(), json!(limit));
        } else {
            d.insert("worstBehind".into(), json!(lag));
        }
        if let Some(log) = self.w.tap.log()
            && let Err(e) = log.append(AuditEvent::lifecycle(kind, d))
        {
            tracing::warn!(destination = %self.w.name, "audit ship: cannot record `{kind}`: {e}");
        }
    }
}
