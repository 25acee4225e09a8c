//! What a rule does where it applies.

/// Allow, deny, or ask a person.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    /// Grants the operation.
    Allow,
    /// Refuses the operation; wins over any allow or ask.
    Deny,
    /// Grants the operation only if a person says yes when it is requested (through the
    /// client's own prompt); wins over any allow. No answer in time means deny.
    Ask,
}

impl Effect {
    /// `allow`, `deny` or `ask`, as written in a policy.
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Allow => "allow",
            Effect::Deny => "deny",
            Effect::Ask => "ask",
        }
    }

    /// How strongly it holds when two steps of one operation disagree: deny, then ask,
    /// then allow.
    pub fn weight(self) -> u8 {
        match self {
            Effect::Allow => 0,
            Effect::Ask => 1,
            Effect::Deny => 2,
        }
    }
}
