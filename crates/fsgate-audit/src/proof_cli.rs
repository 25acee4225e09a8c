//! `fsgate audit prove` and `fsgate audit check-proof`: files and exit codes around
//! [`super::proof`].

use std::io::Write;
use std::path::{Path, PathBuf};

use super::proof::{self, ProofError, Proven};
use super::series;

/// What `prove` was given.
pub(super) struct ProveArgs {
    pub(super) log: Option<PathBuf>,
    pub(super) seq: Option<u64>,
    pub(super) consistency: Option<Vec<PathBuf>>,
    pub(super) checkpoint: Option<PathBuf>,
    pub(super) out: Option<PathBuf>,
}

/// Writes the proof; exit 0 written, 2 not.
pub(super) fn prove(args: ProveArgs, out: &mut dyn Write) -> i32 {
    match make(&args) {
        Ok(text) => match &args.out {
            Some(file) => match std::fs::write(file, text) {
                Ok(()) => 0,
                Err(e) => fail(&format!("{}: {e}", file.display())),
            },
            None => i32::from(out.write_all(text.as_bytes()).is_err()) * 2,
        },
        Err(e) => fail(&e.to_string()),
    }
}

fn make(args: &ProveArgs) -> Result<String, ProofError> {
    if let Some([old, new]) = args.consistency.as_deref() {
        let log = match &args.log {
            Some(log) => log.clone(),
            None => log_beside(new)?,
        };
        let old = proof::checkpoint_with_tree(old)?;
        let new = proof::checkpoint_with_tree(new)?;
        return proof::prove_consistency(&log, &old, &new);
    }
    let (Some(log), Some(seq)) = (&args.log, args.seq) else {
        return Err(ProofError::Unprovable("name the LOG and the SEQ".into()));
    };
    let dir = log.parent().unwrap_or(Path::new("."));
    let cp_file = match &args.checkpoint {
        Some(f) => f.clone(),
        None => dir.join(series::checkpoint_name(&series::file_name(log))),
    };
    let cp = proof::checkpoint_with_tree(&cp_file)?;
    proof::prove_inclusion(log, seq, &cp)
}

/// `NAME` for a checkpoint file `NAME.checkpoint`.
fn log_beside(checkpoint: &Path) -> Result<PathBuf, ProofError> {
    let name = series::file_name(checkpoint);
    match name.strip_suffix(".checkpoint") {
        Some(base) => Ok(checkpoint.with_file_name(base)),
        None => Err(ProofError::Unprovable(format!(
            "{}: name the LOG (NEW is not a NAME.checkpoint file)",
            checkpoint.display()
        ))),
    }
}

/// Checks a proof; exit 0 valid, 1 invalid, 2 unreadable.
pub(super) fn check_proof(file: &Path, pubkey: &str, out: &mut dyn Write) -> i32 {
    let key = match super::keys::parse_public_key(pubkey) {
        Ok(k) => k,
        Err(e) => return fail(&format!("--pubkey: {e}")),
    };
    let text = match std::fs::read(file) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) => return fail(&format!("{}: {e}", file.display())),
    };
    let verdict = match proof::check(&text, &key) {
        Ok(Proven::Inclusion {
            origin,
            seq,
            size,
            record,
        }) => {
            let record = fsgate_base::text::escape_for_humans(&record);
            format!("VALID  record seq {seq} is in log {origin} (tree size {size})\n  {record}\n")
        }
        Ok(Proven::Consistency { origin, old, new }) => {
            format!("VALID  log {origin}: tree size {new} extends tree size {old}\n")
        }
        Err(ProofError::Invalid(m)) => {
            let _ = out.write_all(
                format!("INVALID  {}\n", fsgate_base::text::escape_for_humans(&m)).as_bytes(),
            );
            return 1;
        }
        Err(e) => return fail(&e.to_string()),
    };
    i32::from(out.write_all(verdict.as_bytes()).is_err()) * 2
}

fn fail(e: &str) -> i32 {
    fsgate_base::text::eprint_line(&format!("fsgate audit: {e}"));
    2
}
