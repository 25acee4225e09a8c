//! read_text_file and read_file.

use crate::facts::Facts;
use crate::facts::content_digest;
use crate::ops::cx::Cx;
use crate::request::RequestCtx;
use crate::rules::ws_error;
use fsgate_base::error::GatewayError;
use fsgate_base::path::RelPath;
use fsgate_decide::{Access, BinaryMode, EntryKind, OpClass};
use fsgate_policy::Policy;
use fsgate_policy::media::media_type;
use fsgate_workspace::Follow;

/// Content from this size on is hashed beside the content rules' scan (see
/// [`Gateway::hash_and_check`]); below it a thread's start costs more than it saves.
pub(crate) const HASH_BESIDE_MIN: usize = 1 << 20;

impl Cx<'_> {
    /// Reads the file at `path` under the policy's read checks and limits.
    pub(crate) fn read_bytes(
        &self,
        path: &str,
        facts: &mut Facts,
    ) -> Result<(Vec<u8>, String), GatewayError> {
        let (bytes, real, shown) = self.read_unchecked_content(path, facts)?;
        self.hash_and_check(&real, &bytes, &shown, facts)?;
        Ok((bytes, shown))
    }

    /// Reads the file at `path` under the policy's path checks and limits; its content
    /// is neither hashed nor checked yet. Returns the content, its real path and the
    /// path as shown.
    pub(crate) fn read_unchecked_content(
        &self,
        path: &str,
        facts: &mut Facts,
    ) -> Result<(Vec<u8>, RelPath, String), GatewayError> {
        let rp = self.parse_path(path)?;
        facts.path = Some(rp.rel.as_str().to_string());
        let (real, opened) = self.locate_file(&rp, facts)?;
        let limit = self.pol.limits().max_read_bytes;
        // Hold room for the content before reading it (see `budget`), sized by the
        // opened file's own fstat: no second lookup on the read path.
        let (budget, waiting) = (&self.budget, facts.waiting);
        let lease = |size| facts.lease = Some(budget.lease_as(size, waiting));
        let content = match opened {
            Some(file) => self.workspace.read_opened(file, limit, lease),
            None => self.workspace.read_file_sized(&real, limit, lease),
        }
        .map_err(|e| ws_error(e, &rp.shown))?;
        let read = Access::Class(OpClass::Read);
        self.check_size(read, (&rp, &real), content.bytes.len() as u64, facts)?;
        Ok((content.bytes, real, rp.shown))
    }

    /// Notes the content's digest for the record and decides the content rules on the
    /// very bytes read.
    pub(crate) fn hash_and_check(
        &self,
        real: &RelPath,
        bytes: &[u8],
        shown: &str,
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        self.hash_and_check_then(real, bytes, shown, facts, || Ok(()))
    }

    /// [`Self::hash_and_check`], then `then` (what the answer needs of the content) if
    /// the rules pass. Large content is hashed on a second thread while this one scans it
    /// and runs `then`: on a 10 MiB file hashing is the longest pass (tens of
    /// milliseconds on a CPU without SHA instructions) and the answer waits for it.
    pub(crate) fn hash_and_check_then<T>(
        &self,
        real: &RelPath,
        bytes: &[u8],
        shown: &str,
        facts: &mut Facts,
        then: impl FnOnce() -> Result<T, GatewayError>,
    ) -> Result<T, GatewayError> {
        if bytes.len() < HASH_BESIDE_MIN {
            let digest: [u8; 32] = fsgate_base::sha256::Sha256::digest(bytes);
            facts.content_hashed(bytes.len(), hex::encode(digest));
            self.check_content_digested(OpClass::Read, real, (bytes, &digest), shown)?;
            return then();
        }
        let scan = || {
            self.check_content(OpClass::Read, real, bytes, shown)
                .and_then(|()| then())
        };
        let (digest, checked) = std::thread::scope(|s| {
            let hasher = std::thread::Builder::new()
                .name("fsgate-hash".into())
                .spawn_scoped(s, || content_digest(bytes));
            let checked = scan();
            // No thread (or a panic in it): hash here instead.
            (hasher.ok().and_then(|h| h.join().ok()), checked)
        });
        let digest = digest.unwrap_or_else(|| content_digest(bytes));
        facts.content_hashed(bytes.len(), digest);
        checked
    }

    /// [`Gateway::locate`] for a read, with the file opened for it when the request's
    /// path has no symlink in it: the policy decides on the path first, then one
    /// `openat2` both proves the path is its own real path and opens it (instead of one
    /// open to resolve and another to read). Otherwise it resolves as `locate` does,
    /// and the read opens the real path.
    pub(crate) fn locate_file(
        &self,
        rp: &crate::scope::ReqPath,
        facts: &mut Facts,
    ) -> Result<(RelPath, Option<std::fs::File>), GatewayError> {
        let kind = EntryKind::File;
        Self::in_roots(rp, &rp.rel, facts)?;
        self.check(OpClass::Read, &rp.rel, kind, &rp.shown, facts)?;
        if let Some(file) = self.workspace.open_plain(&rp.rel) {
            return Ok((rp.rel.clone(), Some(file)));
        }
        let res = self.resolve_checked(OpClass::Read, rp, Follow::All, kind, facts)?;
        Ok((res.real, None))
    }
}

/// Grows the read's lease to what its answer holds until queued: the content and its
/// encoded form (up to six times larger), not only the bytes read. The oldest lease
/// grows at once, so this cannot deadlock (see `budget`).
pub(crate) fn hold_answer(facts: &mut Facts, bytes: u64) {
    if let Some(lease) = facts.lease.as_mut()
        && lease.bytes() < bytes
    {
        lease.resize(bytes);
    }
}

/// Copies of read content in one answer, as the door in use sends it (at least one).
pub(crate) fn copies(ctx: &RequestCtx) -> u64 {
    ctx.door.content_copies.max(1)
}

/// Refuses content whose answer would exceed the message limit once JSON-encoded (a
/// file of control characters grows up to six times): the answer is never built.
/// Ok: the encoded size of every copy the door sends.
pub(crate) fn answer_fits(
    pol: &Policy,
    ctx: &RequestCtx,
    content: &str,
    shown: &str,
) -> Result<u64, GatewayError> {
    pub(crate) const ENVELOPE: u64 = 4096;
    let encoded = super::budget::json_text_len(content) * copies(ctx) + ENVELOPE;
    let max = pol.limits().max_message_bytes;
    if encoded <= max {
        return Ok(encoded);
    }
    // Each door names its own way to read less.
    let hint = ctx.door.read_in_parts;
    Err(GatewayError::Limit {
        reason: format!(
            "the answer would be {encoded} bytes once encoded, over the message limit of {max} bytes{hint}"
        ),
        rule: "limits.max_message_bytes".into(),
        path: shown.to_string(),
    })
}

/// The refusal of binary content as text; where the policy allows binary reads, it
/// names the way to read it as base64 on the door in use.
pub(crate) fn binary_refusal(pol: &Policy, ctx: &RequestCtx, shown: &str) -> GatewayError {
    const AS_TEXT: &str = "binary content (NUL byte or invalid UTF-8) cannot be read as text";
    let reason = match pol.limits().binary {
        BinaryMode::Deny => {
            "binary content (NUL byte or invalid UTF-8); the policy denies binary reads".into()
        }
        BinaryMode::Base64 => format!("{AS_TEXT}{}", ctx.door.binary_read),
        BinaryMode::Media => match media_type(shown) {
            Some(_) => format!("{AS_TEXT}{}", ctx.door.media_read),
            None => "binary content (NUL byte or invalid UTF-8); the policy denies binary reads \
                     except of media files (images, audio)"
                .into(),
        },
    };
    GatewayError::Limit {
        reason,
        rule: "limits.binary".into(),
        path: shown.to_string(),
    }
}

/// The bytes as text, or a binary refusal.
pub(crate) fn text_or_refuse(
    pol: &Policy,
    ctx: &RequestCtx,
    bytes: Vec<u8>,
    shown: &str,
) -> Result<String, GatewayError> {
    text_of(pol, ctx, &bytes, shown)?;
    String::from_utf8(bytes).map_err(|_| binary_refusal(pol, ctx, shown))
}

/// The bytes as text (borrowed), or a binary refusal.
pub(crate) fn text_of<'a>(
    pol: &Policy,
    ctx: &RequestCtx,
    bytes: &'a [u8],
    shown: &str,
) -> Result<&'a str, GatewayError> {
    if bytes[..bytes.len().min(8192)].contains(&0) {
        return Err(binary_refusal(pol, ctx, shown));
    }
    std::str::from_utf8(bytes).map_err(|_| binary_refusal(pol, ctx, shown))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::door::DoorSpec;
    use crate::door::PathStyle;

    /// A door that names its ways to read, and sends content twice.
    static HINTED: DoorSpec = DoorSpec {
        name: "hinted",
        content_copies: 2,
        read_in_parts: "; in parts",
        binary_read: "; as base64",
        media_read: "; as media",
        for_processes: false,
    };

    fn ctx(door: &'static DoorSpec) -> RequestCtx {
        RequestCtx {
            style: PathStyle::Absolute,
            session: String::new(),
            door,
            peer: String::new(),
            scope: Default::default(),
            asker: None,
            notifier: None,
        }
    }

    fn reason(e: GatewayError) -> String {
        match e {
            GatewayError::Limit { reason, .. } => reason,
            other => panic!("not a limit: {other:?}"),
        }
    }

    #[test]
    fn large_content_hashed_beside_the_scan_is_recorded_and_still_refused() {
        let pol = Policy::from_toml(fsgate_policy::DEFAULT_POLICY_TOML, "test").unwrap();
        let real = RelPath::parse_rooted("/big.txt").unwrap();
        let mut text = "plain words on a line\n".repeat(HASH_BESIDE_MIN / 20);
        assert!(text.len() >= HASH_BESIDE_MIN);
        let dir = tempfile::tempdir().unwrap();
        let gw = crate::Gateway::new(
            pol.clone(),
            fsgate_workspace::Workspace::open(dir.path()).unwrap(),
        );
        let req = ctx(&crate::door::TEST_DOOR);
        let cx = gw.cx(&pol, &req);
        let mut facts = Facts::default();
        cx.hash_and_check(&real, text.as_bytes(), "/w/big.txt", &mut facts)
            .unwrap();
        assert_eq!(facts.sha256, Some(content_digest(text.as_bytes())));
        assert_eq!(facts.bytes, Some(text.len() as u64));
        // A secret at the end of the content is found while it is hashed.
        text.push_str(&format!(
            "aws_access_key_id = {}\n",
            ["AKIA", "UJZDEGXDNCF32EPF"].concat()
        ));
        let mut facts = Facts::default();
        let e = cx.hash_and_check(&real, text.as_bytes(), "/w/big.txt", &mut facts);
        assert!(matches!(e, Err(GatewayError::Refused { .. })), "{e:?}");
        assert_eq!(facts.sha256, Some(content_digest(text.as_bytes())));
    }

    #[test]
    fn refusals_end_with_the_way_to_read_the_door_in_use_names() {
        const AS_TEXT: &str = "binary content (NUL byte or invalid UTF-8) cannot be read as text";
        let (plain, hinted) = (&crate::door::TEST_DOOR, &HINTED);
        let media = Policy::from_toml(fsgate_policy::DEFAULT_POLICY_TOML, "test").unwrap();
        let read = |pol: &Policy, d, path| {
            reason(text_or_refuse(pol, &ctx(d), b"a\0b".to_vec(), path).unwrap_err())
        };
        assert_eq!(
            read(&media, hinted, "/w/b.png"),
            format!("{AS_TEXT}; as media")
        );
        assert_eq!(read(&media, plain, "/w/b.png"), AS_TEXT);
        assert!(read(&media, hinted, "/w/b").ends_with("except of media files (images, audio)"));
        let text = fsgate_policy::DEFAULT_POLICY_TOML
            .replace("binary = \"media\"", "binary = \"base64\"")
            .replace("[limits]\n", "[limits]\nmax_message_bytes = 8192\n");
        let pol = Policy::from_toml(&text, "test").unwrap();
        assert_eq!(read(&pol, hinted, "/w/b"), format!("{AS_TEXT}; as base64"));
        assert_eq!(read(&pol, plain, "/w/b"), AS_TEXT);
        let big = "x".repeat(5000);
        let over = |d| reason(answer_fits(&pol, &ctx(d), &big, "/w/b").unwrap_err());
        assert!(over(hinted).ends_with("limit of 8192 bytes; in parts"));
        assert!(over(plain).ends_with("limit of 8192 bytes"));
        // A door that sends the content twice: 3000 bytes fit once into 8192 with the
        // envelope, not twice.
        let half = "x".repeat(3000);
        assert!(answer_fits(&pol, &ctx(plain), &half, "/w/b").is_ok());
        assert!(answer_fits(&pol, &ctx(hinted), &half, "/w/b").is_err());
    }
}
