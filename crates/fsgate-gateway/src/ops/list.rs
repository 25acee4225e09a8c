//! The one list of operations: each variant's name and its type (`ops/<operation>.rs`).
//! [`OpId`](super::id::OpId) and [`Op`](super::Op) are both declared from it, so that
//! they cannot disagree; a new operation is one line here.

/// Calls the macro `$then` with the list.
macro_rules! with_operations {
    ($then:ident) => {
        $then! {
            ReadText => ReadText,
            ReadFile => ReadFile,
            Write => Write,
            Edit => Edit,
            Ls => Ls,
            Tree => Tree,
            Stat => Stat,
            Open => Open,
            Glob => Glob,
            Grep => Grep,
            Mkdir => Mkdir,
            Rm => Rm,
            Rename => Rename,
            Chmod => Chmod,
            Symlink => Symlink,
            Utimes => Utimes,
        }
    };
}

pub(crate) use with_operations;
