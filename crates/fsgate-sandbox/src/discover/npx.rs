//! `npx NAME` and `npm exec NAME` / `npm x NAME` running a locally installed bin.
//!
//! npx looks for `node_modules/.bin/NAME` from the working directory upwards. When it is
//! there, the agent needs that `node_modules`, and the bin is discovered like any
//! program. When it is not, nothing more is granted: npx then downloads the package into
//! its cache under the agent's HOME, which is the agent's private scratch directory.
//!
//! Nothing else of the project is granted. npm 11 reads the project's `package.json` and
//! `.npmrc` at start, but runs the local bin all the same when Landlock refuses them
//! (found by experiment); a project `.npmrc` often holds registry tokens.

use std::ffi::OsStr;
use std::path::Path;

use super::{DiscoverError, Discovery};
use crate::plan::AgentAccess;

/// npx options that take the next word as their value.
const VALUE_OPTIONS: &[&str] = &[
    "-p",
    "--package",
    "-c",
    "--call",
    "-w",
    "--workspace",
    "--prefix",
    "--cache",
    "--userconfig",
    "--registry",
];

impl Discovery<'_> {
    /// Grants a local `node_modules/.bin/NAME` that `npx NAME` would run.
    pub(super) fn npx(&mut self) -> Result<(), DiscoverError> {
        let Some(name) = npx_bin(self.input.program, self.input.args) else {
            return Ok(());
        };
        for dir in self.input.cwd.ancestors() {
            let modules = dir.join("node_modules");
            let bin = modules.join(".bin").join(name);
            if bin.is_file() {
                if let Some(nm) = self.node_modules_at(&modules) {
                    let why = format!("node_modules of `npx {name}`");
                    self.grant(&nm, AgentAccess::ReadExec, why);
                }
                return self.program(&bin, &format!("`npx {name}` bin"), 0);
            }
        }
        self.notes.push(format!(
            "`npx {name}`: no node_modules/.bin/{name} in {} or above; npx will download \
             the package into the agent's HOME (its scratch directory)",
            self.input.cwd.display()
        ));
        Ok(())
    }
}

/// The bin name `npx ARGS` (or `npm exec|x ARGS`) runs, if the program is one of those.
fn npx_bin<'a>(program: &OsStr, args: &'a [std::ffi::OsString]) -> Option<&'a str> {
    let base = Path::new(program).file_name()?;
    let args = if base == "npx" {
        args
    } else if base == "npm" && matches!(args.first()?.to_str()?, "exec" | "x") {
        &args[1..]
    } else {
        return None;
    };
    let mut words = args.iter().map(|a| a.to_str());
    while let Some(w) = words.next() {
        let w = w?;
        if w == "--" {
            return words.next().flatten().and_then(bin_of_spec);
        }
        if VALUE_OPTIONS.contains(&w) {
            words.next();
        } else if !w.starts_with('-') {
            return bin_of_spec(w);
        }
    }
    None
}

/// The bin name of a package spec: `pkg`, `pkg@1.2`, `@scope/pkg@1.2` → `pkg`. None for
/// paths, URLs and git specs, which are never a local bin.
fn bin_of_spec(spec: &str) -> Option<&str> {
    let (scoped, rest) = match spec.strip_prefix('@') {
        Some(r) => (true, r),
        None => (false, spec),
    };
    let name = rest.split('@').next()?;
    let name = if scoped {
        name.split_once('/')?.1
    } else {
        name
    };
    let bad = name.is_empty() || name.contains(['/', ':', '\\']) || name.starts_with('.');
    (!bad).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npx_names_the_bin() {
        let a = |v: &[&str]| {
            v.iter()
                .map(|s| s.into())
                .collect::<Vec<std::ffi::OsString>>()
        };
        let npx = OsStr::new("/usr/bin/npx");
        assert_eq!(npx_bin(npx, &a(&["-y", "x", "--flag"])), Some("x"));
        assert_eq!(npx_bin(npx, &a(&["-p", "pkg", "tool"])), Some("tool"));
        assert_eq!(npx_bin(npx, &a(&["--", "@s/agent@1.0"])), Some("agent"));
        assert_eq!(npx_bin(npx, &a(&["./local.js"])), None);
        assert_eq!(npx_bin(npx, &a(&["github:u/r"])), None);
        let npm = OsStr::new("npm");
        assert_eq!(npx_bin(npm, &a(&["exec", "x@2"])), Some("x"));
        assert_eq!(npx_bin(npm, &a(&["install", "x"])), None);
        assert_eq!(npx_bin(OsStr::new("node"), &a(&["x"])), None);
    }
}
