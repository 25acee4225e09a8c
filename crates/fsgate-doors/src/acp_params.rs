//! ACP's file methods: the operation each one names, and a request's params decoded
//! into that operation.

use serde::Deserialize;
use serde_json::{Value, json};

use fsgate_base::error::GatewayError;
use fsgate_gateway::ops::{self, Op, OpId};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PathParams {
    path: String,
}

/// `_fsgate/ls`: a directory, and where its page starts (a previous `nextCursor`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LsParams {
    path: String,
    cursor: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReadParams {
    path: String,
    line: Option<u64>,
    limit: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WriteParams {
    path: String,
    content: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EditParams {
    path: String,
    old_text: String,
    new_text: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RecursiveParams {
    path: String,
    #[serde(default)]
    recursive: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RenameParams {
    old_path: String,
    new_path: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GlobParams {
    pattern: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GrepParams {
    pattern: String,
    path: Option<String>,
    #[serde(default)]
    ignore_case: Option<bool>,
    include_glob: Option<String>,
    max_results: Option<u64>,
}

fn parse<T: for<'de> Deserialize<'de>>(method: &str, params: Value) -> Result<T, GatewayError> {
    let params = if params.is_null() { json!({}) } else { params };
    serde_json::from_value(params)
        .map_err(|e| GatewayError::InvalidParams(format!("{method}: {e}")))
}

/// The ACP method that serves `op`, if ACP offers it (a `tree` it does not).
pub(crate) fn method_of(op: OpId) -> Option<&'static str> {
    Some(match op {
        OpId::ReadText => "fs/read_text_file",
        OpId::Write => "fs/write_text_file",
        OpId::ReadFile => "_fsgate/read_file",
        OpId::Edit => "_fsgate/edit_text_file",
        OpId::Ls => "_fsgate/ls",
        OpId::Stat => "_fsgate/stat",
        OpId::Glob => "_fsgate/glob",
        OpId::Grep => "_fsgate/grep",
        OpId::Mkdir => "_fsgate/mkdir",
        OpId::Rm => "_fsgate/rm",
        OpId::Rename => "_fsgate/rename",
        // Not ACP's (a tree, the filesystem view's open, chmod and symlink), nor an
        // operation added later until this door offers it.
        _ => return None,
    })
}

/// Translates an ACP file-system request into an [`Op`]; `Ok(None)` if the method is
/// not one of them.
pub(crate) fn to_op(method: &str, params: Value) -> Result<Option<Op>, GatewayError> {
    match OpId::ALL
        .iter()
        .copied()
        .find(|&op| method_of(op) == Some(method))
    {
        Some(op) => decode(op, method, params).map(Some),
        None => Ok(None),
    }
}

/// The params of `method`, the method of `op`, as that operation.
fn decode(op: OpId, method: &str, params: Value) -> Result<Op, GatewayError> {
    Ok(match op {
        OpId::ReadText => {
            let p: ReadParams = parse(method, params)?;
            Op::ReadText(ops::ReadText {
                path: p.path,
                line: p.line,
                limit: p.limit,
            })
        }
        OpId::Write => {
            let p: WriteParams = parse(method, params)?;
            Op::Write(ops::Write::text(p.path, p.content))
        }
        OpId::ReadFile => Op::ReadFile(ops::ReadFile {
            path: parse::<PathParams>(method, params)?.path,
        }),
        OpId::Edit => {
            let p: EditParams = parse(method, params)?;
            Op::Edit(ops::Edit {
                path: p.path,
                old_text: p.old_text,
                new_text: p.new_text,
            })
        }
        OpId::Ls => {
            let p: LsParams = parse(method, params)?;
            Op::Ls(ops::Ls {
                path: p.path,
                cursor: p.cursor,
                kinds_only: false,
            })
        }
        OpId::Stat => Op::Stat(ops::Stat {
            path: parse::<PathParams>(method, params)?.path,
            follow: true,
        }),
        OpId::Glob => Op::Glob(ops::Glob {
            pattern: parse::<GlobParams>(method, params)?.pattern,
        }),
        OpId::Grep => {
            let p: GrepParams = parse(method, params)?;
            Op::Grep(ops::Grep {
                pattern: p.pattern,
                path: p.path,
                ignore_case: p.ignore_case.unwrap_or(false),
                include_glob: p.include_glob,
                max_results: p.max_results,
            })
        }
        OpId::Mkdir => {
            let p: RecursiveParams = parse(method, params)?;
            Op::Mkdir(ops::Mkdir {
                path: p.path,
                recursive: p.recursive.unwrap_or(false),
            })
        }
        OpId::Rm => {
            let p: RecursiveParams = parse(method, params)?;
            Op::Rm(ops::Rm {
                path: p.path,
                recursive: p.recursive.unwrap_or(false),
            })
        }
        OpId::Rename => {
            let p: RenameParams = parse(method, params)?;
            Op::Rename(ops::Rename {
                from: p.old_path,
                to: p.new_path,
                replace: true,
            })
        }
        // Not offered (see `method_of`): no method reaches here for them.
        _ => {
            return Err(GatewayError::InvalidParams(format!(
                "{method}: not an ACP method"
            )));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each method ACP offers names one operation, and a request of that method decodes
    /// to it.
    #[test]
    fn every_method_decodes_to_the_operation_it_names() {
        let offered: Vec<(OpId, &str)> = OpId::ALL
            .iter()
            .filter_map(|&id| method_of(id).map(|m| (id, m)))
            .collect();
        assert_eq!(offered.len(), 11, "{offered:?}");
        let params = json!({"path": "/w/a", "content": "x", "oldText": "a", "newText": "b",
            "pattern": "x", "oldPath": "/w/a", "newPath": "/w/b"});
        for &(id, method) in &offered {
            let op = to_op(method, params.clone()).ok().flatten();
            assert_eq!(op.map(|o| o.id()), Some(id), "{method}");
            assert_eq!(
                offered.iter().filter(|(_, m)| *m == method).count(),
                1,
                "{method}"
            );
        }
        assert!(matches!(to_op("fs/unknown", params), Ok(None)));
    }
}
