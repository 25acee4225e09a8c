//! The decision engine: compiled rules and secret-name patterns, and the pure function
//! (`decide`) that names the rule behind every decision, `explain` with it, and what
//! each gateway operation needs (`access`).
//!
//! # Layer
//!
//! Owns: the decision, its rules and their conditions (`condition.rs`), secret names,
//! the fixed floor, and what each operation needs. Depends on `fsgate-base` alone. May
//! not touch: the policy file (the layer above builds an [`Engine`] from it), the
//! filesystem beyond resolving the floor's paths at start-up, or any door; a decision
//! is a pure function of the engine and the facts it is given.
//!
//! Deny wins over allow; nothing matched means deny (`default-deny`).

mod access;
mod condition;
mod decide;
mod effect;
mod engine;
mod entries;
mod facts;
pub mod floor;
mod limits;
mod rule;
mod secrets;

pub use access::{ACCESS_NAMES, Access, AccessStep};
pub use condition::Condition;
pub use decide::{DEFAULT_DENY, Decision, TraceStep};
pub use effect::Effect;
pub use engine::Engine;
pub use entries::EntryFilter;
pub use facts::{EntryKind, PathFacts};
pub use limits::{BinaryMode, Limits};
pub use rule::{OpClass, Rule};
pub use secrets::{SecretPattern, Secrets, Waivers, leaves_out};
