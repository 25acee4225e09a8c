//! A JSON object's top-level members read as written: in order, each value as its raw
//! text, each key decoded and marked when it was written with escapes.

use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

/// A JSON object's members in order, each value as its raw text; keys decoded, those
/// written with escapes marked (see [`Key`]).
pub(super) struct Members<'a>(pub(super) Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for Members<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Members<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'a>, A::Error> {
                let mut members = Vec::new();
                while let Some((k, v)) = map.next_entry::<Key, &'de RawValue>()? {
                    if k.escaped {
                        // Marked so that `ambiguity` refuses the line (answering its id).
                        members.push((format!("{ESCAPED_MARK}{}", k.text), v));
                    } else {
                        members.push((k.text, v));
                    }
                }
                Ok(Members(members))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

/// Prefixed to a key written with escapes: no JSON-RPC member is then found under it.
pub(super) const ESCAPED_MARK: char = '\u{0}';

/// An object key, and whether it was written with escapes (`"\u006dethod"`): serde_json
/// hands over a borrowed string only when the key's text is the key itself.
struct Key {
    text: String,
    escaped: bool,
}

impl<'de> serde::Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object key")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Key, E> {
                Ok(Key {
                    text: s.to_string(),
                    escaped: false,
                })
            }
            fn visit_str<E>(self, s: &str) -> Result<Key, E> {
                Ok(Key {
                    text: s.to_string(),
                    escaped: true,
                })
            }
        }
        d.deserialize_str(V)
    }
}

impl<'a> Members<'a> {
    pub(super) fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }
}
