//! Column widths of policy text shown escaped.

use fsgate_base::text::escape_for_humans;

/// How many characters `s` takes once escaped (for column widths).
pub(super) fn shown_len(s: &str) -> usize {
    escape_for_humans(s).chars().count()
}
