//! Which operation a request is, without its arguments: what records, questions and
//! doors name an operation by. Declared from the list (`ops/list.rs`); what each one
//! is asked is answered by its type (`ops/operation.rs`).

/// Declares [`OpId`] and [`OpId::ALL`] from the list's variant names.
macro_rules! declare_ids {
    ($($variant:ident => $ty:ident,)*) => {
        /// Which operation a request is, without its arguments.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum OpId {
            $(#[doc = concat!("`", stringify!($ty), "`.")] $variant,)*
        }

        impl OpId {
            /// Every operation, in declaration order: what a door searches to decode a
            /// method name it has mapped each operation to.
            pub const ALL: &'static [OpId] = &[$(OpId::$variant,)*];
        }
    };
}

super::list::with_operations!(declare_ids);

/// (Only so that a request's facts can start empty; `Facts::new` sets the request's
/// own.)
impl Default for OpId {
    fn default() -> OpId {
        OpId::ReadText
    }
}
