//! The serving commands' arguments parsed alone. `Cli::parse` builds every
//! subcommand's arguments first (the audit, policy and backup tools have many), which
//! took 0.5-1.5 ms of each gateway's start. `serve` and `acp` try a parser of their own
//! arguments only; anything it does not accept (help, a mistake, another command) goes
//! to the full parser, so that every message a user sees is the full parser's.

use std::ffi::OsString;

use clap::{Args, FromArgMatches};

use super::args::{AcpArgs, Command, ServeArgs};

/// The command, when argv is `fsgate serve ...` or `fsgate acp ...` and its own
/// parser accepts the rest; None means "use the full parser".
pub(super) fn parse(argv: impl IntoIterator<Item = OsString>) -> Option<Command> {
    let mut argv = argv.into_iter().skip(1);
    let sub = argv.next()?;
    let rest: Vec<OsString> = argv.collect();
    if sub == "serve" {
        alone::<ServeArgs>("serve", &rest).map(Command::Serve)
    } else if sub == "acp" {
        alone::<AcpArgs>("acp", &rest).map(Command::Acp)
    } else {
        None
    }
}

/// `T` parsed from `args` by a command that has `T`'s arguments and nothing else.
fn alone<T: Args + FromArgMatches>(name: &'static str, args: &[OsString]) -> Option<T> {
    let cmd = T::augment_args(clap::Command::new(name).no_binary_name(true));
    let matches = cmd.try_get_matches_from(args).ok()?;
    T::from_arg_matches(&matches).ok()
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::args::Cli;

    fn argv(s: &str) -> Vec<OsString> {
        s.split_whitespace().map(OsString::from).collect()
    }

    /// What the full parser makes of `s`, printed.
    fn full(s: &str) -> String {
        format!("{:?}", Cli::try_parse_from(argv(s)).expect(s).command)
    }

    #[test]
    fn the_serving_commands_parse_as_the_full_parser_parses_them() {
        for s in [
            "fsgate serve --workspace /w",
            "fsgate serve --workspace /w --transport mcp",
            "fsgate serve --transport ws --listen 8080 --workspace /w --policy p.toml",
            "fsgate serve --workspace=/w --audit-log /l/a.jsonl --backup-dir /b --check-sandbox",
            "fsgate acp --workspace /w -- agent --flag x",
            "fsgate acp --workspace /w --policy p.toml -- agent",
        ] {
            let alone = parse(argv(s)).unwrap_or_else(|| panic!("not parsed alone: {s}"));
            assert_eq!(format!("{alone:?}"), full(s), "{s}");
        }
    }

    /// Help, version, mistakes and the other commands are left to the full parser.
    #[test]
    fn everything_else_goes_to_the_full_parser() {
        for s in [
            "fsgate",
            "fsgate --version",
            "fsgate serve --help",
            "fsgate serve -h",
            "fsgate serve --version",
            "fsgate serve --workspace /w --no-such-flag",
            "fsgate serve --transport carrier-pigeon --workspace /w",
            "fsgate acp --workspace /w",
            "fsgate audit verify log.jsonl",
            "fsgate policy check p.toml",
            "fsgate server --workspace /w",
        ] {
            assert!(parse(argv(s)).is_none(), "{s}");
        }
    }
}
