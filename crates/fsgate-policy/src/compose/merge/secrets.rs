//! `[secrets]` merged: additive; the base's built-ins stay on and its patterns unwaived.

use super::Merged;
use crate::compose::layer::Layer;
use crate::error::PolicyError;
use crate::position::{key_line, line_col};
use fsgate_decide::SecretPattern;

impl Merged {
    /// `[secrets]`: additive. The base's built-ins stay on and its patterns unwaived.
    pub(super) fn check_secrets(&self, layer: &Layer) -> Result<(), PolicyError> {
        let s = &layer.raw.secrets;
        if self.builtin && s.builtin == Some(false) {
            return Err(self.refuse(
                "secrets.builtin",
                key_line(&layer.text, "secrets", "builtin"),
                "cannot turn off the base's built-in secret-name patterns".into(),
            ));
        }
        for (i, w) in s.disabled_patterns.iter().enumerate() {
            let name = w.get_ref().trim();
            let id = format!("secrets:{}", name.strip_prefix("secrets:").unwrap_or(name));
            let message = if self.secrets.iter().any(|p| p.id == id) {
                format!("cannot waive `{id}`: the base denies with it (waive it in the base)")
            } else if !self.builtin && s.builtin != Some(true) {
                format!("waives `{id}`, but the base turns the built-in patterns off")
            } else {
                continue;
            };
            let (line, col) = line_col(&layer.text, w.span().start);
            return Err(PolicyError::Located {
                key: format!("secrets.disabled_patterns[{i}]"),
                line,
                col,
                message: format!("{message} (base policy {})", self.origin),
            });
        }
        Ok(())
    }

    pub(super) fn merge_secrets(
        &mut self,
        layer: &Layer,
        patterns: Vec<SecretPattern>,
        waivers: Vec<SecretPattern>,
    ) {
        // Built-ins come from the extending file only if it turns them on anew.
        let newly_on = !self.builtin && layer.raw.secrets.builtin == Some(true);
        for p in patterns.into_iter().filter(|p| newly_on || !p.builtin) {
            if !self
                .secrets
                .iter()
                .any(|q| q.id == p.id && q.source == p.source)
            {
                self.secrets.push(p);
            }
        }
        for w in waivers.into_iter().filter(|_| newly_on) {
            if !self.waivers.iter().any(|q| q.id == w.id) {
                self.waivers.push(w);
            }
        }
        self.builtin |= newly_on;
        let (r, p) = (&mut self.raw.secrets, &layer.raw.secrets);
        r.patterns.extend(p.patterns.iter().cloned());
        if newly_on {
            r.disabled_patterns
                .extend(p.disabled_patterns.iter().cloned());
        }
    }
}
