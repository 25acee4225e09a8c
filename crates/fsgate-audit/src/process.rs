//! The process a record's `peer` names, read back for `audit show` and `audit report`:
//! `pid N ppid N exe "..." argv [...]` (or `comm "..."`) on the view of `fsgate run`,
//! `pid=N,uid=N` for a stdio peer. Every text here is the process's own choice: it is
//! escaped wherever a person reads it, like any agent-chosen field.

use serde_json::Value;

/// The paths of a coalesced `reads` record, or a request's own path and target.
pub(crate) fn paths_of(v: &Value) -> Vec<&str> {
    if v.get("op").and_then(Value::as_str) == Some(crate::coalesce::OP_READS) {
        let reads = v.get("details").and_then(|d| d.get("reads"));
        let lists = reads
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|m| m.values());
        return lists
            .filter_map(Value::as_array)
            .flatten()
            .filter_map(|e| e.get(0).and_then(Value::as_str))
            .collect();
    }
    ["path", "path2"]
        .iter()
        .filter_map(|k| v.get(*k).and_then(Value::as_str))
        .collect()
}

/// What a `peer` says of its process.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Process {
    pub pid: Option<u32>,
    pub ppid: Option<u32>,
    /// The executable's path.
    pub exe: Option<String>,
    /// The command name (when the executable could not be read).
    pub comm: Option<String>,
    pub argv: Vec<String>,
}

impl Process {
    /// The process `peer` names; None for a peer that names none (an address).
    pub(crate) fn of(peer: &str) -> Option<Process> {
        if let Some(rest) = peer.strip_prefix("pid=") {
            let pid = rest.split(',').next()?.parse().ok()?;
            return Some(Process {
                pid: Some(pid),
                ..Process::default()
            });
        }
        let rest = peer.strip_prefix("pid ")?;
        let (pid, mut rest) = number(rest)?;
        let mut p = Process {
            pid: Some(pid),
            ..Process::default()
        };
        while let Some((word, after)) = rest.trim_start().split_once(' ') {
            rest = match word {
                "ppid" => number(after).map(|(n, r)| {
                    p.ppid = Some(n);
                    r
                })?,
                "exe" | "comm" | "argv" => {
                    let (value, r) = json(after)?;
                    match (word, value) {
                        ("exe", Value::String(s)) => p.exe = Some(s),
                        ("comm", Value::String(s)) => p.comm = Some(s),
                        ("argv", Value::Array(a)) => {
                            p.argv = a
                                .into_iter()
                                .filter_map(|s| s.as_str().map(str::to_owned))
                                .collect();
                        }
                        _ => return None,
                    }
                    r
                }
                _ => return Some(p),
            };
        }
        Some(p)
    }

    /// The command's name: the executable's file name, else `comm`, else the first
    /// argument's file name.
    pub(crate) fn name(&self) -> String {
        let base = |s: &str| s.rsplit('/').next().unwrap_or(s).to_owned();
        match (&self.exe, &self.comm, self.argv.first()) {
            (Some(exe), _, _) => base(exe),
            (None, Some(comm), _) => comm.clone(),
            (None, None, Some(arg)) => base(arg),
            (None, None, None) => String::new(),
        }
    }

    /// Whether `name` is this process's command: its name, its executable's path or
    /// `comm`.
    pub(crate) fn is_command(&self, name: &str) -> bool {
        self.name() == name
            || self.exe.as_deref() == Some(name)
            || self.comm.as_deref() == Some(name)
    }

    /// `cat[123]`, as a table shows it (not yet escaped).
    pub(crate) fn short(&self) -> String {
        match self.pid {
            Some(pid) => format!("{}[{pid}]", self.name()),
            None => self.name(),
        }
    }

    /// The command line, arguments joined by spaces (not yet escaped).
    pub(crate) fn command_line(&self) -> String {
        if self.argv.is_empty() {
            return self.name();
        }
        self.argv.join(" ")
    }
}

/// A decimal number at the start of `s`, and what follows it.
fn number(s: &str) -> Option<(u32, &str)> {
    let end = s.find(' ').unwrap_or(s.len());
    Some((s[..end].parse().ok()?, &s[end..]))
}

/// One JSON value at the start of `s`, and what follows it.
fn json(s: &str) -> Option<(Value, &str)> {
    let mut it = serde_json::Deserializer::from_str(s).into_iter::<Value>();
    let v = it.next()?.ok()?;
    Some((v, &s[it.byte_offset()..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_is_read_back_as_its_process() {
        let p = Process::of(r#"pid 12 ppid 3 exe "/usr/bin/cat" argv ["cat","a b","\u001b[31m"]"#)
            .unwrap();
        assert_eq!((p.pid, p.ppid), (Some(12), Some(3)));
        assert_eq!(p.name(), "cat");
        assert_eq!(p.argv, ["cat", "a b", "\u{1b}[31m"]);
        assert!(p.is_command("cat") && p.is_command("/usr/bin/cat") && !p.is_command("sh"));
        assert_eq!(p.short(), "cat[12]");
        let c = Process::of(r#"pid 5 comm "my prog" argv ["x"]"#).unwrap();
        assert_eq!(c.name(), "my prog");
        assert_eq!(Process::of("pid=42,uid=1000").unwrap().pid, Some(42));
        assert_eq!(Process::of("127.0.0.1:5000"), None);
    }
}
