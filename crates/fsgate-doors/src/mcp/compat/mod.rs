//! The reference filesystem server's tools (and the shapes it shares with the contract's
//! read_text_file and edit_file), each composed of gateway operations: nothing here
//! touches the filesystem, so policy, audit and backups apply to every step.

mod change;
mod info;
mod list;
mod read;
mod shared;

pub(super) use change::{edit, move_file};
pub(super) use info::file_info;
pub(super) use list::{list_directory, list_with_sizes, search_files, tree};
pub(super) use read::{read_media, read_multiple, read_text};
