//! The semantic checks of `policy check`, run on a policy that loads.
//!
//! Questions about what a rule covers are answered by the real decision function on
//! reduced copies of the policy (one rule, no secret names), never by a second
//! implementation of the matching semantics that could drift from it.
//!
//! One file per concern; `run` runs them in the order their findings are listed.

mod agent;
mod content;
mod dead;
mod duplicates;
mod floor;
mod limits;
mod ops;
pub(super) mod samples;
mod secrets;
mod untested;

use std::path::Path;

use super::findings::{LintOptions, Sink};
use crate::Policy;

pub(super) fn run(
    policy: &Policy,
    src: &str,
    sink: &mut Sink<'_>,
    policy_path: Option<&Path>,
    options: &LintOptions,
) {
    duplicates::duplicates(policy, sink);
    dead::dead_rules(policy, sink);
    secrets::secrets(policy, sink);
    secrets::waivers(policy, sink);
    ops::write_without_read(policy, sink);
    ops::ask_list(policy, sink);
    limits::limits(policy, sink);
    limits::ask_timeout(policy, sink);
    let fl = floor::floor(policy, sink, policy_path, options);
    super::reach::run(policy, sink, fl.as_ref(), options);
    super::shadow::shadowed(policy, sink);
    untested::untested(policy, src, sink);
    content::content(policy, sink);
    agent::agent_reach(policy, sink, options);
    agent::agent_credentials(policy, sink);
}
