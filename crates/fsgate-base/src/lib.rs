//! fsgate's shared vocabulary, the bottom layer: workspace-relative paths ([`path`]),
//! escaping of agent-chosen text for people ([`text`]), the wire error codes and the
//! gateway's error type ([`error`]), the per-workspace state directory ([`state`]), and
//! SHA-256 ([`sha256`]), the one hasher of every layer.
//!
//! # Layer
//!
//! Owns: pure functions and plain types every other layer shares. May not touch: any
//! other fsgate crate, the workspace, a socket or a thread; the only filesystem call is
//! [`state::workspace_state_dir`]'s `canonicalize` of a start-up argument.

pub mod error;
pub mod path;
pub mod sha256;
pub mod state;
pub mod text;
