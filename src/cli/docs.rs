//! `fsgate completions SHELL` and `fsgate man`: generated from the clap definitions at
//! run time, so an installed binary (`cargo install`) carries its own, always current.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use clap::CommandFactory;

use super::args::Cli;
use super::exit::fail;

/// Prints the completion script for `shell` to stdout.
pub(super) fn completions(shell: clap_complete::Shell) -> ExitCode {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "fsgate", &mut out);
    write_stdout(&out)
}

/// Prints fsgate(1) to stdout, or with `dir` writes a page per command into it
/// (fsgate.1, fsgate-serve.1, fsgate-audit-verify.1, ...).
pub(super) fn man(dir: Option<&Path>) -> ExitCode {
    let cmd = Cli::command();
    if let Some(dir) = dir {
        let written =
            std::fs::create_dir_all(dir).and_then(|()| clap_mangen::generate_to(cmd, dir));
        return match written {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(&format!(
                "cannot write the man pages into {}: {e}",
                dir.display()
            )),
        };
    }
    let mut out = Vec::new();
    if let Err(e) = clap_mangen::Man::new(cmd).render(&mut out) {
        return fail(&format!("cannot render the man page: {e}"));
    }
    write_stdout(&out)
}

fn write_stdout(bytes: &[u8]) -> ExitCode {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        // `fsgate man | head`: the reader had what it wanted.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => fail(&format!("cannot write to stdout: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use crate::cli::args::Cli;

    /// clap's own consistency checks over the whole command line (names, conflicts,
    /// requirements), which the generators rely on.
    #[test]
    fn command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    /// Every command, nested ones included, renders a page naming itself.
    #[test]
    fn every_command_renders_a_man_page() {
        fn walk(cmd: &clap::Command, n: &mut usize) {
            let name = cmd.get_display_name().unwrap_or(cmd.get_name()).to_owned();
            let mut page = Vec::new();
            clap_mangen::Man::new(cmd.clone())
                .render(&mut page)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let page = String::from_utf8_lossy(&page);
            assert!(page.contains(&format!(".TH {name} 1")), "{name}: {page}");
            *n += 1;
            for sub in cmd.get_subcommands() {
                walk(sub, n);
            }
        }
        let mut cmd = Cli::command();
        cmd.build();
        let mut n = 0;
        walk(&cmd, &mut n);
        assert!(n >= 20, "fsgate and its subcommands: {n} pages");
    }
}
