pub mod error;
pub mod path;
pub mod state;
pub mod text;
