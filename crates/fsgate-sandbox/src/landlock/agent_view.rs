//! What the kernel enforces of an agent's plan: `Fully` only when every planned
//! restriction holds, and the lines that say what confines it.

use ::landlock::{ABI, LandlockStatus};

use super::abi::{FULL_ABI, absent_reason, missing_for, usable_abi};
use crate::child::{self, UnixFilter};
use crate::describe::{AgentView, network_line};
use crate::plan::{AgentNetwork, AgentPlan};
use crate::status::Enforcement;

/// What the kernel enforces of `plan`: `Fully` only when every planned restriction
/// holds; the TCP, Unix socket and process lines for the detail.
pub(super) fn agent_view(
    plan: &AgentPlan,
    landlock: LandlockStatus,
    unix: UnixFilter,
    caps: child::CapsView,
) -> AgentView {
    let abi = usable_abi(landlock);
    let mut missing = Vec::new();
    match abi {
        None => missing.push(format!(
            "no kernel sandbox: {}; files, TCP and signals are not restricted",
            absent_reason(landlock)
        )),
        Some(abi) => {
            for m in missing_for(abi) {
                // The agent keeps all TCP unless the policy restricts it.
                if !m.starts_with("TCP") || plan.network != AgentNetwork::All {
                    missing.push(m);
                }
            }
        }
    }
    let per_path = abi.is_some_and(|a| a >= ABI::V9);
    if !plan.unix_sockets.is_empty() && !per_path {
        missing.push(
            "the kernel cannot limit which pathname Unix sockets the agent connects to \
             (needs Landlock ABI 9): every pathname socket the agent's user may open is reachable"
                .to_owned(),
        );
    }
    if unix == UnixFilter::Unsupported {
        missing.push(
            "pathname Unix sockets are not restricted: no seccomp filter for this architecture \
             and no Landlock ABI 9"
                .to_owned(),
        );
    }
    let mut lines = vec![
        network_line(&plan.network),
        sockets_line(plan, per_path, unix),
    ];
    lines.push("own session, no terminal, inherited descriptors closed".to_owned());
    if child::seccomp_supported() {
        lines.push(
            "kernel keyrings, chown and set-uid/set-gid/other-writable chmod refused (seccomp)"
                .to_owned(),
        );
        lines.push(
            "pseudo-terminals only in fsgate's view, a devpts instance of the agent's own \
             (/dev/ptmx, /dev/pts); TIOCSTI and TIOCLINUX refused (seccomp)"
                .to_owned(),
        );
        if plan.network != AgentNetwork::All {
            lines
                .push("MPTCP sockets refused (seccomp; Landlock's TCP rules miss them)".to_owned());
        }
    } else {
        missing.push(
            "kernel keyrings, chown and set-uid/set-gid/other-writable chmod are not refused: \
             no seccomp filter for this architecture"
                .to_owned(),
        );
    }
    lines.push(caps_line(caps).to_owned());
    if abi.is_some_and(|a| a >= ABI::V6) {
        lines.push("scoped to the sandbox: abstract Unix sockets, signals".to_owned());
    }
    let enforcement = match abi {
        None => Enforcement::Not,
        Some(a) if missing.is_empty() && a >= FULL_ABI => Enforcement::Fully,
        Some(_) => Enforcement::Partially,
    };
    AgentView {
        abi: abi.map(|a| a as u8),
        enforcement,
        missing,
        lines,
    }
}

/// Whether seccomp must refuse `socket(AF_UNIX)`: no socket is listed and Landlock
/// cannot refuse pathname sockets itself (ABI 9).
pub(super) fn blocks_unix(plan: &AgentPlan, abi: Option<ABI>) -> bool {
    plan.unix_sockets.is_empty() && abi.is_none_or(|a| a < ABI::V9)
}

fn caps_line(caps: child::CapsView) -> &'static str {
    match caps {
        child::CapsView::NoneHeld => "no capabilities",
        child::CapsView::Dropped => "capabilities dropped",
        // no_new_privs keeps exec from granting any of the bounding set.
        child::CapsView::BoundingKept => {
            "capabilities dropped (bounding set kept: no CAP_SETPCAP to empty it; \
             no_new_privs keeps exec from granting it)"
        }
    }
}

/// "pathname Unix sockets: none (...)", "... only A, B", or "... all (...)".
fn sockets_line(plan: &AgentPlan, per_path: bool, unix: UnixFilter) -> String {
    let list = || {
        plan.unix_sockets
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match (plan.unix_sockets.is_empty(), per_path, unix) {
        (true, true, _) => "pathname Unix sockets: none (Landlock)".to_owned(),
        (true, false, UnixFilter::Refused) => {
            "pathname Unix sockets: none (seccomp refuses socket(AF_UNIX) and io_uring; \
             socketpair allowed)"
                .to_owned()
        }
        (true, false, _) => "pathname Unix sockets: not restricted".to_owned(),
        (false, true, _) => format!("pathname Unix sockets: only {}", list()),
        (false, false, _) => format!(
            "pathname Unix sockets: all, not per path (listed: {}; per-path limits need Landlock ABI 9)",
            list()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(abi: ABI) -> LandlockStatus {
        LandlockStatus::Available {
            effective_abi: abi,
            kernel_abi: None,
        }
    }

    #[test]
    fn agent_status_is_honest_per_abi() {
        use child::CapsView::{BoundingKept, Dropped, NoneHeld};
        let mut plan = AgentPlan::default();
        let full = agent_view(&plan, at(ABI::V7), UnixFilter::Refused, Dropped);
        assert_eq!(full.enforcement, Enforcement::Fully, "{:?}", full.missing);
        assert!(full.lines.contains(&"capabilities dropped".to_owned()));
        // Without CAP_SETPCAP the bounding set stays, and the line says so.
        let kept = agent_view(&plan, at(ABI::V7), UnixFilter::Refused, BoundingKept);
        assert!(
            kept.lines.iter().any(|l| l.contains("bounding set kept")),
            "{kept:?}"
        );
        // TCP restricted by the policy, but not by an ABI 3 kernel: said so.
        let v3 = agent_view(&plan, at(ABI::V3), UnixFilter::Refused, NoneHeld);
        assert!(!v3.missing.iter().any(|m| m.starts_with("TCP")), "{v3:?}");
        plan.network = AgentNetwork::None;
        let v3 = agent_view(&plan, at(ABI::V3), UnixFilter::Refused, NoneHeld);
        assert!(v3.missing.iter().any(|m| m.starts_with("TCP")), "{v3:?}");
        assert_eq!(v3.enforcement, Enforcement::Partially);
        // Listed sockets: per path from ABI 9 only.
        plan.unix_sockets.push("/run/a.sock".into());
        let v7 = agent_view(&plan, at(ABI::V7), UnixFilter::NotNeeded, NoneHeld);
        assert_eq!(v7.enforcement, Enforcement::Partially);
        assert!(
            v7.lines.iter().any(|l| l.contains("not per path")),
            "{v7:?}"
        );
        let v9 = agent_view(&plan, at(ABI::V9), UnixFilter::NotNeeded, NoneHeld);
        assert_eq!(v9.enforcement, Enforcement::Fully, "{:?}", v9.missing);
        assert!(
            v9.lines
                .contains(&"pathname Unix sockets: only /run/a.sock".to_owned())
        );
        // No seccomp for this architecture: unrestricted, and said so.
        plan.unix_sockets.clear();
        let odd = agent_view(&plan, at(ABI::V7), UnixFilter::Unsupported, NoneHeld);
        assert_eq!(odd.enforcement, Enforcement::Partially);
        let none = agent_view(
            &plan,
            LandlockStatus::NotImplemented,
            UnixFilter::Refused,
            NoneHeld,
        );
        assert_eq!((none.enforcement, none.abi), (Enforcement::Not, None));
        assert!(!blocks_unix(&plan, Some(ABI::V9)) && blocks_unix(&plan, Some(ABI::V8)));
    }
}
