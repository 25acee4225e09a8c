//! A request's regex bounded before it is compiled. The regex engine checks its size
//! limit while it builds, after the memory is spent: a short pattern such as
//! `(?i)\w{1000}` (a class of hundreds of Unicode ranges, repeated a thousand times)
//! spent 85-170 MiB before it was refused. Here the pattern is parsed (cheap: the
//! parse keeps a repetition as one node) and an upper bound of its compiled size is
//! computed from the parse; a pattern over [`MAX_COMPILED_BYTES`] is refused before any
//! compile, and one under it leases [`Bounds::lease_bytes`] of the gateway's budget while
//! it is compiled and used. The parse itself is bounded first: translated, a class such
//! as `(?i)\pL` is hundreds of ranges (4 KiB of such classes spent 60 MiB and 0.5 s).

use regex_syntax::hir::{Class, Hir, HirKind};
use regex_syntax::utf8::Utf8Sequences;

/// The largest compiled-size bound a pattern may have: `\w{50}` (about 7 MiB) passes,
/// `\w{100}` does not.
pub(crate) const MAX_COMPILED_BYTES: u64 = 8 << 20;

/// The regex engine's lazy DFA cache per search (grep-regex's default is 1000 MiB, the
/// regex crate's 2 MiB).
pub(crate) const DFA_CACHE_BYTES: usize = 8 << 20;

/// One NFA state while the engine builds (its `size_of::<State>()` on 64-bit).
const STATE: u64 = 32;
/// One byte-range transition.
const TRANSITION: u64 = 8;
/// What every regex's NFA holds besides its pattern (start states, the unanchored
/// prefix `(?s:.)*?`): under 1 KiB measured.
const BASE: u64 = 4 << 10;

/// The longest pattern grep takes.
pub(crate) const MAX_PATTERN_BYTES: usize = 16 << 10;

/// The most the parse of a pattern may spend (see [`parse_cost`]): 128 classes.
const MAX_PARSE_BYTES: u64 = 8 << 20;

/// What the parse spends on a class at most: a Unicode class such as `(?i)\pL` or
/// `[^\w]` is hundreds of ranges once translated (measured up to 52 KiB).
const CLASS_PARSE_BYTES: u64 = 64 << 10;

/// What the parse spends on any other node at most (a case-insensitive literal is a
/// small class: 0.4 KiB measured).
const NODE_PARSE_BYTES: u64 = 512;

/// Why a pattern is refused before it is compiled.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TooLarge {
    /// Longer than [`MAX_PATTERN_BYTES`].
    #[error(
        "regex too large: {len} bytes, more than the {} a pattern may have",
        MAX_PATTERN_BYTES
    )]
    Long {
        /// Its length.
        len: usize,
    },
    /// More classes than the parse may translate.
    #[error(
        "regex too large: more than {} character classes",
        MAX_PARSE_BYTES / CLASS_PARSE_BYTES
    )]
    Classes,
    /// Its compiled size could pass [`MAX_COMPILED_BYTES`].
    #[error(
        "regex too large: compiled it could take up to {} MiB, more than the {} MiB a \
         pattern may (use fewer repetitions of a class, or an ASCII class such as \
         [0-9A-Za-z_] for \\w)", .bound.div_ceil(1 << 20), MAX_COMPILED_BYTES >> 20
    )]
    Compiled {
        /// The bound computed.
        bound: u64,
    },
}

/// A pattern's bounds, known before it is compiled.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    /// What its parse may spend.
    pub(crate) parse: u64,
    /// Its compiled size ([`compiled_bound`]); `None` if it does not parse (the
    /// compile then reports why).
    pub(crate) compiled: Option<u64>,
}

impl Bounds {
    /// Bytes of the budget the pattern holds while parsed, compiled and searched with:
    /// its parse, and the engine's peak while it builds (measured at 1.1-1.6x the
    /// compiled bound for large patterns, about 0.5 MiB of fixed cost for small ones)
    /// and one search's caches.
    pub(crate) fn lease_bytes(&self) -> u64 {
        let compiled = self.compiled.unwrap_or(0);
        self.parse
            .saturating_add(compiled.saturating_mul(2))
            .saturating_add(1 << 20)
    }
}

/// A pattern read as written, not yet translated.
pub(crate) struct Syntax {
    wrapped: String,
    ast: Option<regex_syntax::ast::Ast>,
    /// What its translation may spend ([`parse_cost`]).
    pub(crate) parse: u64,
}

/// `pattern` read as grep compiles it (wrapped in `(?:...)`); an error if it is too
/// long or its translation could spend more than [`MAX_PARSE_BYTES`]. The syntax tree
/// keeps each class as written, so this is cheap.
pub(crate) fn syntax(pattern: &str) -> Result<Syntax, TooLarge> {
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(TooLarge::Long { len: pattern.len() });
    }
    let wrapped = format!("(?:{pattern})");
    let ast = regex_syntax::ast::parse::Parser::new().parse(&wrapped).ok();
    let parse = ast.as_ref().map_or(0, parse_cost);
    if parse > MAX_PARSE_BYTES {
        return Err(TooLarge::Classes);
    }
    Ok(Syntax {
        wrapped,
        ast,
        parse,
    })
}

impl Syntax {
    /// The pattern's bounds with grep-regex's syntax settings; an error if it could
    /// compile to more than [`MAX_COMPILED_BYTES`].
    pub(crate) fn bounds(&self, ignore_case: bool) -> Result<Bounds, TooLarge> {
        let unparsed = Bounds {
            parse: self.parse,
            compiled: None,
        };
        let Some(ast) = &self.ast else {
            return Ok(unparsed);
        };
        let hir = regex_syntax::hir::translate::TranslatorBuilder::new()
            .utf8(false)
            .case_insensitive(ignore_case)
            .build()
            .translate(&self.wrapped, ast);
        let Ok(hir) = hir else {
            return Ok(unparsed);
        };
        let bound = compiled_bound(&hir);
        if bound > MAX_COMPILED_BYTES {
            return Err(TooLarge::Compiled { bound });
        }
        Ok(Bounds {
            parse: self.parse,
            compiled: Some(bound),
        })
    }
}

/// [`syntax`] then [`Syntax::bounds`].
#[cfg(test)]
pub(crate) fn check(pattern: &str, ignore_case: bool) -> Result<Bounds, TooLarge> {
    syntax(pattern)?.bounds(ignore_case)
}

/// An upper bound of what translating `ast` spends: each class at most
/// [`CLASS_PARSE_BYTES`], every other node [`NODE_PARSE_BYTES`].
fn parse_cost(ast: &regex_syntax::ast::Ast) -> u64 {
    struct Cost(u64);
    impl regex_syntax::ast::Visitor for Cost {
        type Output = u64;
        type Err = std::convert::Infallible;
        fn finish(self) -> Result<u64, Self::Err> {
            Ok(self.0)
        }
        fn visit_pre(&mut self, ast: &regex_syntax::ast::Ast) -> Result<(), Self::Err> {
            use regex_syntax::ast::Ast;
            let cost = match ast {
                Ast::ClassUnicode(_) | Ast::ClassPerl(_) | Ast::ClassBracketed(_) => {
                    CLASS_PARSE_BYTES
                }
                _ => NODE_PARSE_BYTES,
            };
            self.0 = self.0.saturating_add(cost);
            Ok(())
        }
    }
    match regex_syntax::ast::visit(ast, Cost(0)) {
        Ok(cost) => cost,
        Err(never) => match never {},
    }
}

/// An upper bound of the bytes the regex engine's NFA builder counts against its size
/// limit, for the forward and the reverse NFA alike: each node's states, a repetition's
/// sub-pattern once per copy the compiler makes of it.
pub(crate) fn compiled_bound(hir: &Hir) -> u64 {
    BASE.saturating_add(node_bound(hir))
}

fn node_bound(hir: &Hir) -> u64 {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => STATE,
        HirKind::Literal(lit) => (lit.0.len() as u64).saturating_mul(STATE + TRANSITION),
        HirKind::Class(Class::Bytes(c)) => 2 * STATE + TRANSITION * c.ranges().len() as u64,
        HirKind::Class(Class::Unicode(c)) => unicode_class_bound(c),
        HirKind::Repetition(rep) => {
            // `{n}` and `{n,}` compile n copies (at least one), `{n,m}` m copies, each
            // with a union state.
            let copies = u64::from(rep.max.unwrap_or(rep.min).max(1));
            copies.saturating_mul(node_bound(&rep.sub).saturating_add(STATE + TRANSITION))
        }
        HirKind::Capture(cap) => node_bound(&cap.sub).saturating_add(2 * STATE),
        HirKind::Concat(subs) => subs
            .iter()
            .fold(STATE, |sum, h| sum.saturating_add(node_bound(h))),
        HirKind::Alternation(subs) => subs.iter().fold(2 * STATE, |sum, h| {
            sum.saturating_add(node_bound(h)).saturating_add(TRANSITION)
        }),
    }
}

/// A Unicode class compiles to its UTF-8 byte sequences: at most one state a byte of
/// each (sequences share states in the forward NFA, not in the reverse one), and one
/// union alternate a sequence.
fn unicode_class_bound(class: &regex_syntax::hir::ClassUnicode) -> u64 {
    let per_seq = |len: usize| len as u64 * (STATE + TRANSITION) + 4;
    class
        .ranges()
        .iter()
        .flat_map(|r| Utf8Sequences::new(r.start(), r.end()))
        .fold(2 * STATE, |sum, seq| sum.saturating_add(per_seq(seq.len())))
}

#[cfg(test)]
mod tests;
