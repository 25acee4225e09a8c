use proptest::prelude::*;

use super::*;

#[test]
fn csv_cells_are_quoted_and_defused() {
    assert_eq!(csv_cell("plain"), "plain");
    assert_eq!(csv_cell("a,b"), "\"a,b\"");
    assert_eq!(csv_cell("say \"hi\""), "\"say \"\"hi\"\"\"");
    assert_eq!(csv_cell("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
    assert_eq!(csv_cell("-32003"), "-32003");
    assert_eq!(csv_cell("-rf"), "'-rf");
    assert_eq!(csv_cell("  =1+1"), "'  =1+1");
    assert_eq!(csv_cell(" \t@SUM(A1)"), "' \t@SUM(A1)");
    assert_eq!(csv_cell("-"), "'-");
}

#[test]
fn control_characters_never_reach_the_terminal() {
    assert_eq!(clean("a\u{1b}[31mb\n"), "a\\u{1b}[31mb\\n");
    assert_eq!(clean("doc\u{202e}gnp.sh"), "doc\\u{202e}gnp.sh");
}

#[test]
fn cuts_say_so_and_keep_both_ends_of_a_path() {
    assert_eq!(cut_middle("src/deeply/nested/file.rs", 12), "src/d…ile.rs");
    assert_eq!(cut_middle("short", 12), "short");
    assert_eq!(cut_end("a long reason", 6), "a lon…");
    // Wide characters count twice.
    assert_eq!(width("日本語"), 6);
    assert_eq!(cut_middle("日本語日本語", 5), "日…語");
    assert_eq!(cut_middle("日本語日本語", 6), "日…語");
    assert_eq!(pad("日本", 6, false), "日本  ");
}

/// Characters an agent would use to fool a reader, mixed into arbitrary text.
fn hostile() -> impl Strategy<Value = String> {
    let pick = prop_oneof![
        any::<char>().prop_map(String::from),
        Just("\u{1b}[2J".to_string()),
        Just("\u{1b}]8;;http://x\u{7}".to_string()),
        Just("\u{202e}".to_string()),
        Just("\u{2066}".to_string()),
        Just("\n".to_string()),
        Just("\r".to_string()),
        Just("\t".to_string()),
        Just(" ".to_string()),
        Just("=".to_string()),
        Just("+".to_string()),
        Just("-".to_string()),
        Just("@".to_string()),
        Just("\u{a0}".to_string()),
    ];
    proptest::collection::vec(pick, 0..12).prop_map(|v| v.concat())
}

fn inert(c: char) -> bool {
    !(c.is_control()
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{61c}' | '\u{feff}' | '\u{2028}' | '\u{2029}'))
}

proptest! {
    #[test]
    fn escaped_cells_hold_no_control_or_bidi_character(s in hostile(), w in 1usize..40) {
        let c = clean(&s);
        prop_assert!(c.chars().all(inert), "{c:?}");
        for cut in [cut_middle(&c, w), cut_end(&c, w)] {
            prop_assert!(cut.chars().all(inert), "{cut:?}");
            prop_assert!(width(&cut) <= w.max(1), "{cut:?} wider than {w}");
        }
    }

    #[test]
    fn csv_cells_never_start_a_formula(s in hostile()) {
        let cell = csv_cell(&clean(&s));
        prop_assert!(cell.chars().all(inert), "{cell:?}");
        let body = cell.strip_prefix('"').unwrap_or(&cell);
        let start = body.trim_start_matches(char::is_whitespace);
        let number = body.strip_prefix('-').is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
        prop_assert!(number || !start.starts_with(['=', '+', '-', '@']), "{cell:?}");
    }
}

#[test]
fn a_field_the_writer_cut_says_so() {
    let v = serde_json::json!({"path": "aaa", "op": "x",
        "details": {"cut": {"/path": {"bytes": 2097152, "sha256": "ab"}}}});
    assert_eq!(raw(&v, "path"), "aaa… (2097152 bytes)");
    assert_eq!(raw(&v, "op"), "x");
}
