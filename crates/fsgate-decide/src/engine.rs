//! The engine: the compiled rules, secret names, limits and floor a decision reads.

use crate::effect::Effect;
use crate::floor;
use crate::limits::Limits;
use crate::rule::{OpClass, Rule};
use crate::secrets::{SecretPattern, Secrets, Waivers};
use std::sync::Arc;

/// The compiled rules, secret names and floor a decision reads. Immutable once built;
/// cheap to clone (the rules and the secret-name search are shared).
#[derive(Debug, Clone)]
pub struct Engine {
    /// The rules in force: those for every workspace, and those scoped to `workspace`
    /// (shared: `policy check` makes an engine per rule, each a copy of this one).
    pub(crate) rules: Arc<Vec<Rule>>,
    /// Every rule, scoped ones included, for [`Engine::for_workspace`].
    all_rules: Arc<Vec<Rule>>,
    /// The workspace this engine is for, when several are served.
    workspace: Option<String>,
    pub(crate) secrets: Secrets,
    pub(crate) waivers: Waivers,
    limits: Limits,
    /// Paths no rule can allow: fsgate's own audit log, backups and policy file when
    /// they lie inside the workspace. Set by the gateway at start-up.
    pub(crate) floor: floor::FixedFloor,
}

impl Engine {
    /// An engine for a workspace with no name: the rules for every workspace apply.
    pub fn new(rules: Vec<Rule>, secrets: Secrets, waivers: Waivers, limits: Limits) -> Engine {
        Engine {
            rules: Arc::new(
                rules
                    .iter()
                    .filter(|r| r.applies_in(None))
                    .cloned()
                    .collect(),
            ),
            all_rules: Arc::new(rules),
            workspace: None,
            secrets,
            waivers,
            limits,
            floor: floor::FixedFloor::default(),
        }
    }

    /// The engine as it applies in the workspace `name`: the rules for every workspace
    /// and those whose `workspaces` name it, in file order.
    pub fn for_workspace(&self, name: &str) -> Engine {
        let mut e = self.clone();
        e.rules = Arc::new(
            self.all_rules
                .iter()
                .filter(|r| r.applies_in(Some(name)))
                .cloned()
                .collect(),
        );
        e.workspace = Some(name.to_string());
        e
    }

    /// This engine with `other`'s refusals added: its secret names (and their waivers)
    /// and its `deny` rules, scoped as they were.
    pub fn with_denials_of(mut self, other: &Engine) -> Engine {
        self.secrets = other.secrets.clone();
        self.waivers = other.waivers.clone();
        let denials = |rules: &[Rule]| -> Vec<Rule> {
            rules
                .iter()
                .filter(|r| r.effect == Effect::Deny)
                .cloned()
                .collect()
        };
        let mut rules = denials(&other.rules);
        rules.extend(self.rules.iter().cloned());
        self.rules = Arc::new(rules);
        let mut all = denials(&other.all_rules);
        all.extend(self.all_rules.iter().cloned());
        self.all_rules = Arc::new(all);
        self.workspace = other.workspace.clone();
        self
    }

    /// A copy holding only `rules` and no secret names: lets the real decision answer
    /// "what does this one rule match?" (`policy check`).
    pub fn only(&self, rules: Vec<Rule>) -> Engine {
        let mut e = self.clone();
        e.rules = Arc::new(rules);
        e.secrets = Secrets::none();
        e
    }

    /// The workspace this engine was narrowed to ([`Engine::for_workspace`]).
    pub fn workspace(&self) -> Option<&str> {
        self.workspace.as_deref()
    }

    /// Every workspace name a rule is scoped to.
    pub fn scoped_workspaces(&self) -> std::collections::BTreeSet<&str> {
        self.all_rules
            .iter()
            .filter_map(|r| r.workspaces.as_ref())
            .flatten()
            .map(String::as_str)
            .collect()
    }

    /// Marks paths that no rule can allow (fsgate's own files inside the workspace).
    pub fn set_floor(&mut self, floor: floor::FixedFloor) {
        self.floor = floor;
    }

    /// The fixed floor in force.
    pub fn floor(&self) -> &floor::FixedFloor {
        &self.floor
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The rule with id `id`, if any.
    pub fn rule(&self, id: &str) -> Option<&Rule> {
        self.rules().iter().find(|r| r.id == id)
    }

    /// The rules in force, in file order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The secret-name patterns in force.
    pub fn secrets(&self) -> &Secrets {
        &self.secrets
    }

    /// The built-in secret-name patterns waived by `[secrets] disabled_patterns`.
    pub fn waived_patterns(&self) -> &[SecretPattern] {
        &self.waivers.patterns
    }

    /// True if some allow or ask rule covers `op` at all: drives ACP capability flags and
    /// Landlock rights the kernel grants.
    pub fn can_ever(&self, op: OpClass) -> bool {
        self.rules
            .iter()
            .any(|r| r.effect != Effect::Deny && r.ops[op as usize])
    }
}
