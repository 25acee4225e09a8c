//! `[content]` merged: additive; the base's built-ins stay on, its rules enabled, and
//! no allowlist of the extending file lets content through them.

use super::Merged;
use crate::compose::layer::Layer;
use crate::content::ContentScanner;
use crate::error::PolicyError;
use crate::position::{key_line, line_col, section_line};
use crate::raw::RawContent;

impl Merged {
    /// `[content]`: additive. The base's built-ins stay on, its rules enabled, and no
    /// allowlist of the extending file lets content through them.
    pub(super) fn check_content(&self, layer: &Layer) -> Result<(), PolicyError> {
        let (Some(b), Some(p)) = (&self.raw.content, &layer.raw.content) else {
            return Ok(());
        };
        let line = |key: &str| match key_line(&layer.text, "content", key) {
            0 => section_line(&layer.text, "content"),
            n => n,
        };
        if b.builtin && !p.builtin {
            return Err(self.refuse(
                "content.builtin",
                line("builtin"),
                "cannot turn off the base's built-in content rules".into(),
            ));
        }
        let active: Vec<&str> = self.content.iter().flat_map(|c| c.rule_ids()).collect();
        for d in &p.disabled_rules {
            let d = d.get_ref().as_str();
            let bare = d.strip_prefix("content:").unwrap_or(d);
            if active.contains(&format!("content:{bare}").as_str()) {
                return Err(self.refuse(
                    "content.disabled_rules",
                    line("disabled_rules"),
                    format!("cannot disable the base's content rule `{bare}`"),
                ));
            }
        }
        // An inline rule of the same id would replace the base's rule (built-in ones too).
        // (A base's own inline rule, even one it disables, would be a duplicate id.)
        let taken = |id: &str| {
            active.contains(&format!("content:{id}").as_str())
                || b.rules.iter().any(|r| r.id.get_ref() == id)
        };
        if let Some(r) = p.rules.iter().find(|r| taken(r.id.get_ref())) {
            return Err(self.refuse(
                "content.rules",
                line_col(&layer.text, r.id.span().start).0,
                format!(
                    "content rule `{}` is the base's: a rule of the same id here would replace it; use another id",
                    r.id.get_ref()
                ),
            ));
        }
        if !p.allowlists.is_empty() {
            return Err(self.refuse(
                "content.allowlists",
                line("allowlists"),
                "an allowlist here would let content through the base's content rules; add allowlists to the base".into(),
            ));
        }
        // A gitleaks file's global allowlists would apply to the base's rules too.
        if p.gitleaks_config.is_some() {
            return Err(self.refuse(
                "content.gitleaks_config",
                line("gitleaks_config"),
                "a gitleaks config here could allowlist content the base's rules refuse; name it in the base".into(),
            ));
        }
        Ok(())
    }

    pub(super) fn merge_content(
        &mut self,
        layer: &Layer,
        mine: Option<ContentScanner>,
    ) -> Result<(), PolicyError> {
        let Some(p) = &layer.raw.content else {
            return Ok(());
        };
        if self.raw.content.is_none() {
            self.content_from = (layer.text.clone(), layer.dir.clone());
        }
        let Some(b) = self.raw.content.take() else {
            self.raw.content = Some(p.clone());
            self.content = mine;
            return Ok(());
        };
        let mut disabled = b.disabled_rules.clone();
        disabled.extend(p.disabled_rules.iter().cloned());
        let merged = RawContent {
            builtin: b.builtin || p.builtin,
            gitleaks_config: b.gitleaks_config,
            disabled_rules: disabled,
            ops: match (b.ops, &p.ops) {
                (Some(mut x), Some(y)) => {
                    x.extend(y.iter().cloned());
                    Some(x)
                }
                _ => None,
            },
            rules: b.rules.into_iter().chain(p.rules.iter().cloned()).collect(),
            allowlists: b.allowlists,
        };
        let (src, dir) = &self.content_from;
        self.content = crate::content::build::compile(Some(&merged), src, dir.as_deref())?;
        self.raw.content = Some(merged);
        Ok(())
    }
}
