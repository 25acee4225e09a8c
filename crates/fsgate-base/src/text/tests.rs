use proptest::prelude::*;
use unicode_general_category::{GeneralCategory as G, get_general_category};

use super::*;

/// Characters an agent would use to fool a reader: ESC, BEL, newline, CR, tab, NUL, DEL,
/// C1 (CSI U+009B), bidi controls, zero-width characters, BOM, soft hyphen, separators,
/// a tag character, variation selectors, Hangul filler, an unassigned code point.
const HOSTILE: &[char] = &[
    '\u{1b}',
    '\u{7}',
    '\n',
    '\r',
    '\t',
    '\0',
    '\u{7f}',
    '\u{9b}',
    '\u{85}',
    '\u{202a}',
    '\u{202b}',
    '\u{202c}',
    '\u{202d}',
    '\u{202e}',
    '\u{2066}',
    '\u{2067}',
    '\u{2068}',
    '\u{2069}',
    '\u{200e}',
    '\u{200f}',
    '\u{61c}',
    '\u{200b}',
    '\u{200c}',
    '\u{200d}',
    '\u{2060}',
    '\u{feff}',
    '\u{ad}',
    '\u{2028}',
    '\u{2029}',
    '\u{e0041}',
    '\u{e007f}',
    '\u{fe0f}',
    '\u{e0100}',
    '\u{3164}',
    '\u{180e}',
    '\u{34f}',
    '\u{fff9}',
    '\u{e0000}',
    '\\',
];

/// Reverses the escaping; `None` if `s` is not an output of [`escape_bytes`].
fn unescape(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c != '\\' {
            let mut b = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
            continue;
        }
        match it.next()? {
            '\\' => out.push(b'\\'),
            'n' => out.push(b'\n'),
            'r' => out.push(b'\r'),
            't' => out.push(b'\t'),
            'x' => {
                let hex: String = [it.next()?, it.next()?].iter().collect();
                out.push(u8::from_str_radix(&hex, 16).ok()?);
            }
            'u' => {
                (it.next()? == '{').then_some(())?;
                let hex: String = it.by_ref().take_while(|c| *c != '}').collect();
                let c = char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?;
                let mut b = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
            }
            _ => return None,
        }
    }
    Some(out)
}

/// The classes that must never appear raw, by an independent table.
fn forbidden(c: char) -> bool {
    matches!(
        get_general_category(c),
        G::Control | G::Format | G::LineSeparator | G::ParagraphSeparator
    ) || HOSTILE.contains(&c)
}

fn hostile_string() -> impl Strategy<Value = String> {
    let pick = prop::sample::select(HOSTILE.to_vec());
    prop::collection::vec(
        prop_oneof![any::<char>(), pick, Just('u'), Just('{')],
        0..40,
    )
    .prop_map(|v| v.into_iter().collect())
}

#[test]
fn known_cases() {
    assert_eq!(escape_for_humans("src/main.rs"), "src/main.rs");
    assert!(matches!(escape_for_humans("plain"), Cow::Borrowed(_)));
    assert_eq!(escape_for_humans("a\u{1b}[2Jb\n"), "a\\u{1b}[2Jb\\n");
    assert_eq!(escape_for_humans("doc\u{202e}gnp.sh"), "doc\\u{202e}gnp.sh");
    assert_eq!(
        escape_for_humans("\u{1b}]8;;http://x\u{7}y"),
        "\\u{1b}]8;;http://x\\u{7}y"
    );
    assert_eq!(
        escape_for_humans("a\\u{1b}"),
        "a\\\\u{1b}",
        "a forged escape"
    );
    assert_eq!(escape_for_humans("\u{9b}2J\t\r"), "\\u{9b}2J\\t\\r");
    assert_eq!(escape_for_humans("zero\u{200b}width"), "zero\\u{200b}width");
    assert_eq!(escape_bytes(b"bad\xff\xfename"), "bad\\xff\\xfename");
    assert_eq!(escape_bytes(b"ok\\x41"), "ok\\\\x41");
}

/// ASCII is escaped without the Unicode class: exactly the characters the class names.
#[test]
fn ascii_is_escaped_as_the_unicode_class_says() {
    let class = Regex::new(UNSAFE_CLASS).expect("the class compiles");
    for b in 0..=127u8 {
        let c = char::from(b);
        let s = c.to_string();
        assert_eq!(needs_escape(c), class.is_match(&s), "{c:?}");
        assert_eq!(
            escape_for_humans(&s) != s,
            class.is_match(&s),
            "{c:?} -> {:?}",
            escape_for_humans(&s)
        );
    }
}

#[test]
fn printable_unicode_stays() {
    for s in [
        "café",
        "naïve résumé",
        "日本語のファイル",
        "😀🦀",
        "Ελληνικά",
        "עברית",
        "a b",
    ] {
        assert_eq!(escape_for_humans(s), s);
    }
}

#[test]
fn display_wrappers_pad_the_escaped_text() {
    assert_eq!(format!("[{:<6}]", Esc("a\nb")), "[a\\nb  ]");
    let p = Path::new("x\u{202e}y");
    assert_eq!(format!("{}", EscPath(p)), "x\\u{202e}y");
    use std::os::unix::ffi::OsStrExt;
    let raw = Path::new(OsStr::from_bytes(b"n\x80\x1b"));
    assert_eq!(format!("{}", EscPath(raw)), "n\\x80\\u{1b}");
}

#[test]
fn every_hostile_character_is_escaped() {
    for c in HOSTILE {
        let out = escape_for_humans(&c.to_string()).into_owned();
        assert!(out.starts_with('\\'), "{c:?} -> {out:?}");
        assert!(
            out.chars().all(|c| c.is_ascii_graphic()),
            "{c:?} -> {out:?}"
        );
    }
}

#[test]
fn the_log_writer_escapes_all_but_the_final_newline() {
    assert_eq!(
        escape_event(b"WARN path=a\nb\x1b[2J\n"),
        b"WARN path=a\\nb\\u{1b}[2J\n"
    );
    assert_eq!(escape_event(b"no end\r"), b"no end\\r");
}

#[test]
fn an_agents_stderr_is_copied_line_by_line_escaped() {
    let input = b"ready\n\x1b[2Jwiped\x07\n\xe2\x80\xaeevil\nno newline";
    let mut out = Vec::new();
    copy_escaped(&input[..], &mut out, "agent: ");
    assert_eq!(
        String::from_utf8(out).ok().as_deref(),
        Some("agent: ready\nagent: \\u{1b}[2Jwiped\\u{7}\nagent: \\u{202e}evil\nagent: no newline")
    );
}

proptest! {
    #[test]
    fn output_never_holds_an_escaped_class(s in hostile_string()) {
        let out = escape_for_humans(&s);
        prop_assert!(!out.chars().any(|c| c != '\\' && forbidden(c)), "{:?}", out);
    }

    #[test]
    fn any_string_round_trips(s in hostile_string()) {
        let out = escape_for_humans(&s);
        prop_assert_eq!(unescape(&out), Some(s.into_bytes()));
    }

    #[test]
    fn any_bytes_round_trip(b in prop::collection::vec(any::<u8>(), 0..40)) {
        let out = escape_bytes(&b);
        prop_assert!(!out.chars().any(|c| c != '\\' && forbidden(c)));
        prop_assert_eq!(unescape(&out), Some(b));
    }

    #[test]
    fn distinct_inputs_give_distinct_outputs(a in hostile_string(), b in hostile_string()) {
        prop_assume!(a != b);
        prop_assert_ne!(escape_for_humans(&a), escape_for_humans(&b));
    }
}

#[test]
fn tail_keeps_the_end_on_a_character_boundary() {
    assert_eq!(tail("short", 10), "short");
    assert_eq!(tail("a/b/c/name.txt", 8), "...name.txt");
    // "é" is two bytes: a cut inside it moves past it.
    assert_eq!(tail("xé/f", 3), ".../f");
}
