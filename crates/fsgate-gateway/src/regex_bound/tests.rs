use grep_regex::RegexMatcherBuilder;
use proptest::prelude::*;

use crate::regex_bound::*;

/// Compiles `pattern` as grep does, with the size limit set to `limit`.
fn compiles_within(pattern: &str, ignore_case: bool, limit: u64) -> bool {
    RegexMatcherBuilder::new()
        .case_insensitive(ignore_case)
        .size_limit(usize::try_from(limit).unwrap_or(usize::MAX))
        .build(pattern)
        .is_ok()
}

/// The bound never under-estimates: compiled with its own bound as the engine's size
/// limit, a pattern the bound accepts compiles.
fn assert_bound_holds(pattern: &str, ignore_case: bool) {
    if let Ok(Bounds {
        compiled: Some(bound),
        ..
    }) = check(pattern, ignore_case)
    {
        assert!(
            compiles_within(pattern, ignore_case, bound),
            "{pattern:?} (ignore case {ignore_case}): bound {bound} under the engine's size"
        );
    }
}

/// Patterns people search with.
const EVERYDAY: &[&str] = &[
    "needle",
    r"fn \w+\(",
    r"\bTODO\b|FIXME",
    r"[a-z]+_[0-9]{2,4}",
    r"^\s*use\s+[\w:]+;",
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}",
    r"(?i)error|warn(ing)?",
    r"\p{L}+\s+\p{L}+",
    r"[^\n]{0,200}",
    r"(?s).{0,100}end",
    r"\w{50}",
    r"[A-Za-z0-9_]{1000}",
    r"^$",
    "",
];

#[test]
fn everyday_patterns_are_accepted_and_the_bound_holds_for_them() {
    for p in EVERYDAY {
        for ci in [false, true] {
            let b = check(p, ci).unwrap_or_else(|e| panic!("{p:?} refused: {e}"));
            assert!(b.compiled.is_some(), "{p:?} parses");
            assert_bound_holds(p, ci);
        }
    }
}

#[test]
fn short_patterns_that_compile_huge_are_refused_before_compiling() {
    for p in [
        r"(?i)\w{1000}",
        r"\p{L}{10000}",
        r"\w{100}",
        r"((a{100}){100}){100}",
    ] {
        match check(p, false) {
            Err(TooLarge::Compiled { bound }) => assert!(bound > MAX_COMPILED_BYTES),
            other => panic!("{p:?}: {other:?}"),
        }
    }
}

#[test]
fn patterns_whose_parse_is_costly_are_refused_before_translating() {
    assert!(matches!(
        check(&r"(?i)\pL".repeat(200), false),
        Err(TooLarge::Classes)
    ));
    let long = "a".repeat(MAX_PATTERN_BYTES + 1);
    assert!(matches!(check(&long, false), Err(TooLarge::Long { .. })));
    // Many literals are cheap and stay accepted.
    let words = (0..500)
        .map(|i| format!("word{i}"))
        .collect::<Vec<_>>()
        .join("|");
    assert!(check(&words, true).is_ok());
}

#[test]
fn a_pattern_that_does_not_parse_is_left_to_the_compile_to_report() {
    let b = check("a(b", false).expect("not refused for size");
    assert!(b.compiled.is_none());
}

#[test]
fn the_bound_saturates_instead_of_overflowing() {
    let p = r"(((\w{4294967295}){4294967295}){4294967295})";
    assert!(matches!(
        check(p, false),
        Err(TooLarge::Compiled { bound: u64::MAX })
    ));
}

/// Pieces random patterns are made of: literals, Unicode and byte classes, anchors.
fn atom() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "a",
        "xyz",
        r"\w",
        r"\W",
        r"\d",
        r"\s",
        r"\pL",
        r"\p{Greek}",
        "[a-f0-9]",
        "[^a]",
        ".",
        "(?s:.)",
        r"(?-u:\xff)",
        r"(?-u:\w)",
        "é",
        r"\b",
        "^",
        "$",
        "(?i:k)",
    ])
    .prop_map(str::to_string)
}

fn pattern() -> impl Strategy<Value = String> {
    atom().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 1..4).prop_map(|v| v.concat()),
            prop::collection::vec(inner.clone(), 1..4).prop_map(|v| format!("(?:{})", v.join("|"))),
            (inner.clone(), 0u32..12, 0u32..6)
                .prop_map(|(p, min, extra)| format!("(?:{p}){{{min},{}}}", min + extra)),
            (inner.clone(), 0u32..12).prop_map(|(p, n)| format!("(?:{p}){{{n},}}")),
            inner.clone().prop_map(|p| format!("({p})*")),
            inner.prop_map(|p| format!("(?i:{p})+")),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn the_bound_never_under_estimates_the_engine(p in pattern(), ci in any::<bool>()) {
        assert_bound_holds(&p, ci);
    }
}
