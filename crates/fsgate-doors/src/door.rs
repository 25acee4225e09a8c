//! What a door is: one [`Door`] trait for its wire (decode a request, encode an answer,
//! encode a refusal, run a request that composes operations) and one way to serve a
//! decoded request (`serve`), alone or in a batch. A door that implements it keeps only
//! its wire: its connection loop decides where a request runs (a task, its batch thread)
//! and this module does the rest the same way for every door: the gateway serves each
//! operation or records the message, and the door's codec turns the outcome into bytes.

use std::cell::RefCell;
use std::ops::Deref;

use fsgate_base::error::GatewayError;
use fsgate_gateway::ops::{Op, Output, RequestCtx};
use fsgate_gateway::{Batch, Gateway, How, Lease, Request};

/// The audit outcome of a message that is no workspace operation (the gateway records
/// it as the answer says: `Ok`, or the error's code and message).
pub type Outcome = Result<(), (i64, String)>;

/// One door's wire: what a request decodes into, and how an answer is encoded.
pub trait Door {
    /// A request as the door's connection loop hands it over, not yet decoded.
    type Wire;
    /// What an answer echoes of its request (its id, the type it answers...).
    type Tag;
    /// An answer, encoded as the door sends it.
    type Answer;
    /// A request that composes several operations (see [`Door::run`]).
    type Task;

    /// Decodes a request: a workspace operation for the gateway, a task of several
    /// ([`Door::run`]), or any other message, answered by the door itself once recorded.
    fn decode(&self, gw: &Gateway, wire: Self::Wire) -> Decoded<Self>;

    /// The answer to an operation the gateway served.
    fn encode(&self, gw: &Gateway, tag: &Self::Tag, out: Output) -> Self::Answer;

    /// The answer to a request the gateway refused or failed (or whose record could not
    /// be written).
    fn refuse(&self, tag: &Self::Tag, e: &GatewayError) -> Self::Answer;

    /// The answer to a request that panicked (a bug): an internal error.
    fn panicked(&self, tag: &Self::Tag) -> Self::Answer {
        self.refuse(tag, &GatewayError::Internal("request task failed".into()))
    }

    /// Runs a task: a request made of several operations, each served through `ops`
    /// (an MCP tool: an edit reads, then writes). A door whose every request is one
    /// operation has none ([`std::convert::Infallible`]).
    fn run(&self, gw: &Gateway, ops: &Ops<'_>, tag: &Self::Tag, task: Self::Task) -> Ran<Self>;
}

/// How a task ended.
pub enum Ran<D: Door + ?Sized> {
    /// Its answer (a refusal of one of its operations included: that operation's record
    /// says so).
    Answer(D::Answer),
    /// Refused by the door itself (arguments that do not fit, a limit of the wire),
    /// after or without operations: recorded as the message `name` with `outcome`, then
    /// answered with `answer`, as a [`Decoded::Message`] is.
    Refused {
        /// The name its record gives it.
        name: String,
        /// What the answer says, for the record.
        outcome: Outcome,
        /// Its answer.
        answer: D::Answer,
    },
}

/// A decoded request.
pub enum Decoded<D: Door + ?Sized> {
    /// A workspace operation: the gateway decides, records and runs it, the door
    /// encodes its outcome.
    Op {
        /// The operation.
        op: Op,
        /// What its answer echoes.
        tag: D::Tag,
    },
    /// A request made of several operations, which the door runs ([`Door::run`]).
    Task {
        /// The task.
        task: D::Task,
        /// What its answer echoes.
        tag: D::Tag,
    },
    /// Any other message (a handshake, an unknown method, malformed params): recorded
    /// as `name` with `outcome`, then answered with `answer` (or, if the record could
    /// not be written, refused with that error: no answer before its record).
    Message {
        /// The name its audit record gives it.
        name: String,
        /// What its answer echoes.
        tag: D::Tag,
        /// Its answer.
        answer: D::Answer,
        /// What the answer says, for the record.
        outcome: Outcome,
    },
}

/// A request served: its answer, and the content leases it holds until the answer is
/// queued for the client (see the gateway's `budget`).
pub struct Served<D: Door + ?Sized> {
    /// What the answer echoes (to refuse in its place, see `Served::settled`).
    pub tag: D::Tag,
    /// The encoded answer.
    pub answer: D::Answer,
    /// The content the answer holds.
    pub leases: Vec<Lease>,
}

impl<D: Door + ?Sized> Served<D> {
    /// The answer once its batch is settled ([`Gateway::settle`]): as it is, or, if the
    /// batch's records could not be written, the refusal saying so (its lease let go).
    pub(crate) fn settled(self, door: &D, settled: &Result<(), GatewayError>) -> Served<D> {
        match settled {
            Ok(()) => self,
            Err(e) => Served {
                answer: door.refuse(&self.tag, e),
                tag: self.tag,
                leases: Vec::new(),
            },
        }
    }
}

/// Decodes and serves one request (see `serve`).
pub fn serve_wire<D: Door + ?Sized>(
    door: &D,
    gw: &Gateway,
    ctx: &RequestCtx,
    batch: Option<&Batch>,
    wire: D::Wire,
) -> Served<D> {
    let decoded = door.decode(gw, wire);
    serve(door, gw, ctx, batch, decoded)
}

/// Serves one decoded request under `ctx`, in `batch` if one is given (its answer then
/// waits for the batch to be settled), alone otherwise; a request that panics is
/// answered with an internal error, and whatever runs it lives on.
pub(crate) fn serve<D: Door + ?Sized>(
    door: &D,
    gw: &Gateway,
    ctx: &RequestCtx,
    batch: Option<&Batch>,
    decoded: Decoded<D>,
) -> Served<D> {
    let ops = Ops::new(ctx, batch);
    let (tag, ran) = match decoded {
        Decoded::Op { op, tag } => {
            let ran = caught(|| match ops.serve_op(gw, op) {
                Ok(out) => door.encode(gw, &tag, out),
                Err(e) => door.refuse(&tag, &e),
            });
            (tag, ran)
        }
        Decoded::Task { task, tag } => {
            let ran = caught(|| match door.run(gw, &ops, &tag, task) {
                Ran::Answer(answer) => answer,
                Ran::Refused {
                    name,
                    outcome,
                    answer,
                } => recorded(door, gw, ctx, &tag, (name, outcome), answer),
            });
            (tag, ran)
        }
        Decoded::Message {
            name,
            tag,
            answer,
            outcome,
        } => {
            let ran = caught(|| recorded(door, gw, ctx, &tag, (name, outcome), answer));
            (tag, ran)
        }
    };
    match ran {
        Ok(answer) => Served {
            tag,
            answer,
            leases: ops.into_leases(),
        },
        Err(_) => {
            tracing::error!("request panicked");
            let answer = door.panicked(&tag);
            Served {
                tag,
                answer,
                leases: Vec::new(),
            }
        }
    }
}

/// `answer` once the message `name` is recorded with `outcome`; the refusal saying why
/// if it cannot be (no answer before its record).
fn recorded<D: Door + ?Sized>(
    door: &D,
    gw: &Gateway,
    ctx: &RequestCtx,
    tag: &D::Tag,
    (name, outcome): (String, Outcome),
    answer: D::Answer,
) -> D::Answer {
    match gw
        .serve(ctx, Request::message(name, outcome), How::alone())
        .0
    {
        Ok(_) => answer,
        Err(e) => door.refuse(tag, &e),
    }
}

/// `f`'s result, or the panic it ended in.
fn caught<T>(f: impl FnOnce() -> T) -> std::thread::Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
}

/// One request's way into the gateway: its context, the batch it runs in (if any, see
/// `crate::batch`), and the content leases its operations' answers hold (see the
/// gateway's `budget`), kept with the request's answer until it is written: a client
/// that stops reading then holds at most the gateway's budget of content, however many
/// requests it sends. Derefs to the context, which is what most of a task reads.
pub struct Ops<'a> {
    ctx: &'a RequestCtx,
    batch: Option<&'a Batch>,
    leases: RefCell<Vec<Lease>>,
}

impl<'a> Ops<'a> {
    /// A request under `ctx`, in `batch` if one is given.
    pub fn new(ctx: &'a RequestCtx, batch: Option<&'a Batch>) -> Ops<'a> {
        Ops {
            ctx,
            batch,
            leases: RefCell::new(Vec::new()),
        }
    }

    /// Serves `op` for this request, keeping any lease its answer holds.
    pub(crate) fn serve_op(&self, gw: &Gateway, op: Op) -> Result<Output, GatewayError> {
        let (result, lease) = self.serve_op_apart(gw, op);
        self.keep(lease);
        result
    }

    /// Serves `op` for this request, handing its lease to the caller, who keeps it
    /// ([`Ops::keep`]) while it holds the answer, or drops it with the answer. Once the
    /// request holds a lease, a further one passes the budget rather than wait for it
    /// (`How::further`).
    pub(crate) fn serve_op_apart(
        &self,
        gw: &Gateway,
        op: Op,
    ) -> (Result<Output, GatewayError>, Option<Lease>) {
        let how = How::batched(self.batch);
        if self.leases.borrow().is_empty() {
            gw.serve(self.ctx, Request::Op(op), how)
        } else {
            gw.serve(self.ctx, Request::Op(op), how.further())
        }
    }

    /// Keeps `lease` with the request's answer until it is written.
    pub(crate) fn keep(&self, lease: Option<Lease>) {
        if let Some(l) = lease {
            self.leases.borrow_mut().push(l);
        }
    }

    /// The leases the request's answers hold.
    pub(crate) fn into_leases(self) -> Vec<Lease> {
        self.leases.into_inner()
    }
}

impl Deref for Ops<'_> {
    type Target = RequestCtx;

    fn deref(&self) -> &RequestCtx {
        self.ctx
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acp::{Acp, AcpRequest};
    use crate::ws::protocol::{self, Echo, Incoming, Ws};
    use crate::ws::response::Head;
    use fsgate_gateway::ops;
    use fsgate_gateway::ops::{Encoding, PathStyle};
    use serde_json::{Value, json};

    /// A gateway on a workspace holding `a.txt` ("hi"), and its root.
    fn gateway() -> (tempfile::TempDir, String, Gateway) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().canonicalize().expect("root");
        std::fs::write(root.join("a.txt"), "hi").expect("write");
        let pol = fsgate_policy::Policy::builtin_default().expect("policy");
        let ws = fsgate_workspace::Workspace::open(&root).expect("workspace");
        let root = root.to_string_lossy().into_owned();
        (tmp, root, Gateway::new(pol, ws))
    }

    fn ctx(style: PathStyle, door: &'static fsgate_gateway::DoorSpec) -> RequestCtx {
        RequestCtx {
            style,
            session: "s".into(),
            door,
            peer: "t".into(),
            scope: Default::default(),
            asker: None,
            notifier: None,
        }
    }

    fn acp_request(method: &str, params: Value) -> AcpRequest {
        AcpRequest {
            id: json!(7),
            method: method.into(),
            params,
        }
    }

    fn ws_request(text: &str) -> protocol::WsRequest {
        match protocol::parse(text) {
            Incoming::Request(r) => r,
            other => panic!("not a request: {other:?}"),
        }
    }

    fn refused() -> GatewayError {
        GatewayError::Refused {
            reason: "secret".into(),
            rule: "secrets:dotenv".into(),
            path: "/.env".into(),
        }
    }

    #[test]
    fn acp_decodes_a_file_method_into_its_op_and_anything_else_into_a_message() {
        let (_tmp, _, gw) = gateway();
        let read = acp_request("fs/read_text_file", json!({"path": "/w/a", "line": 2}));
        match Acp.decode(&gw, read) {
            Decoded::Op { op, tag } => {
                assert_eq!(tag, json!(7));
                assert!(
                    matches!(op, Op::ReadText(ops::ReadText { path, line: Some(2), limit: None }) if path == "/w/a")
                );
            }
            Decoded::Message { answer, .. } => panic!("not an op: {answer}"),
        }
        let unknown = acp_request("fs/frob", Value::Null);
        match Acp.decode(&gw, unknown) {
            Decoded::Message {
                name,
                answer,
                outcome,
                ..
            } => {
                assert_eq!(name, "fs/frob");
                let text = r#"{"error":{"code":-32601,"message":"method not found: fs/frob"},"id":7,"jsonrpc":"2.0"}"#;
                assert_eq!(answer.to_string(), text);
                assert_eq!(outcome, Err((-32601, "method not found: fs/frob".into())));
            }
            Decoded::Op { op, .. } => panic!("an op: {op:?}"),
        }
        let bad = acp_request("_fsgate/stat", json!({"nopath": 1}));
        assert!(matches!(
            Acp.decode(&gw, bad),
            Decoded::Message {
                outcome: Err((-32602, _)),
                ..
            }
        ));
    }

    #[test]
    fn acp_encodes_a_result_and_a_refusal_as_json_rpc_responses() {
        let (_tmp, _, gw) = gateway();
        let answer = Acp.encode(&gw, &json!(7), Output::Text("hi".into()));
        assert_eq!(
            answer.to_string(),
            r#"{"id":7,"jsonrpc":"2.0","result":{"content":"hi"}}"#
        );
        let refusal = Acp.refuse(&json!("x"), &refused());
        assert_eq!(
            refusal.to_string(),
            r#"{"error":{"code":-32003,"data":{"path":"/.env","reason":"secret","rule":"secrets:dotenv"},"message":"refused: secret (rule secrets:dotenv, path /.env)"},"id":"x","jsonrpc":"2.0"}"#
        );
    }

    #[test]
    fn ws_decodes_a_request_into_its_op_and_an_unknown_type_into_a_message() {
        let (_tmp, _, gw) = gateway();
        let ws = Ws { max: 4096 };
        let read = ws_request(
            r#"{"channel":"files","type":"read","requestId":1,"path":"/a","encoding":"base64"}"#,
        );
        match ws.decode(&gw, read) {
            Decoded::Op { op, tag } => {
                assert!(tag.base64);
                assert_eq!(tag.head.request_id, Some(json!(1)));
                assert!(matches!(op, Op::ReadFile(ops::ReadFile { path }) if path == "/a"));
            }
            Decoded::Message { answer, .. } => panic!("not an op: {answer}"),
        }
        let unknown = ws_request(r#"{"channel":"files","type":"frob","requestId":"q"}"#);
        match ws.decode(&gw, unknown) {
            Decoded::Message {
                name,
                answer,
                outcome,
                ..
            } => {
                assert_eq!(name, "frob");
                let v: Value = serde_json::from_str(&answer).expect("json");
                assert_eq!(v["errorInfo"]["code"], json!(-32601));
                assert_eq!(
                    (v["type"].clone(), v["requestId"].clone()),
                    (json!("frob"), json!("q"))
                );
                assert!(matches!(outcome, Err((-32601, _))));
            }
            Decoded::Op { op, .. } => panic!("an op: {op:?}"),
        }
    }

    #[test]
    fn ws_encodes_data_and_a_refusal_as_channel_messages() {
        let (_tmp, _, gw) = gateway();
        let ws = Ws { max: 4096 };
        let tag = Echo {
            head: Head {
                kind: "read".into(),
                request_id: Some(json!(1)),
            },
            base64: true,
        };
        let file = Output::File {
            content: "hi".into(),
            encoding: Encoding::Utf8,
        };
        assert_eq!(
            ws.encode(&gw, &tag, file),
            r#"{"channel":"files","data":{"content":"aGk=","encoding":"base64"},"requestId":1,"type":"read"}"#
        );
        assert_eq!(
            ws.refuse(&tag, &refused()),
            r#"{"channel":"files","error":"Access denied: /.env: secret","errorInfo":{"code":-32003,"message":"refused: secret (rule secrets:dotenv, path /.env)","path":"/.env","reason":"secret","rule":"secrets:dotenv"},"requestId":1,"type":"read"}"#
        );
        // An answer over the message limit is the limit error in its place.
        let big = Output::Text("x".repeat(5000));
        let v: Value = serde_json::from_str(&ws.encode(&gw, &tag, big)).expect("json");
        assert_eq!(v["errorInfo"]["code"], json!(-32004));
    }

    /// A request served in a batch is answered as one served alone, once the batch is
    /// settled; a failed settling puts the refusal in its place.
    #[test]
    fn a_request_in_a_batch_is_answered_as_one_alone() {
        let (_tmp, root, gw) = gateway();
        let ctx = ctx(PathStyle::Absolute, &crate::acp::DOOR);
        let read = || {
            acp_request(
                "fs/read_text_file",
                json!({"path": format!("{root}/a.txt")}),
            )
        };
        let alone = serve_wire(&Acp, &gw, &ctx, None, read());
        assert_eq!(
            alone.answer.to_string(),
            r#"{"id":7,"jsonrpc":"2.0","result":{"content":"hi"}}"#
        );
        let batch = Batch::new();
        let batched = serve_wire(&Acp, &gw, &ctx, Some(&batch), read());
        let settled = gw.settle(batch);
        let batched = batched.settled(&Acp, &settled);
        assert_eq!(batched.answer, alone.answer);
        let failed = Err(GatewayError::Internal("disk full".into()));
        let withheld = alone.settled(&Acp, &failed);
        assert_eq!(withheld.answer["error"]["code"], json!(-32603));
        assert!(withheld.leases.is_empty());
    }

    /// A message is answered as the door decoded it, and a refused operation with the
    /// door's refusal.
    #[test]
    fn a_message_and_a_refusal_are_answered_in_the_doors_words() {
        let (_tmp, _, gw) = gateway();
        let ctx = ctx(PathStyle::Rooted, &crate::ws::DOOR);
        let ws = Ws { max: 4096 };
        let missing =
            ws_request(r#"{"channel":"files","type":"stat","requestId":3,"path":"/nope"}"#);
        let served = serve_wire(&ws, &gw, &ctx, None, missing);
        let v: Value = serde_json::from_str(&served.answer).expect("json");
        assert_eq!(v["error"], json!("File not found: /nope"));
        assert_eq!(v["requestId"], json!(3));
        let unknown = ws_request(r#"{"channel":"files","type":"frob","requestId":4}"#);
        let served = serve_wire(&ws, &gw, &ctx, None, unknown);
        let v: Value = serde_json::from_str(&served.answer).expect("json");
        assert_eq!(v["errorInfo"]["code"], json!(-32601));
        assert_eq!(v["requestId"], json!(4));
    }

    /// A door whose every request is a task that panics, or refuses itself.
    struct Tasks;

    impl Door for Tasks {
        type Wire = bool;
        type Tag = ();
        type Answer = String;
        type Task = bool;

        fn decode(&self, _: &Gateway, panics: bool) -> Decoded<Tasks> {
            Decoded::Task {
                task: panics,
                tag: (),
            }
        }
        fn encode(&self, _: &Gateway, _: &(), _: Output) -> String {
            "encoded".into()
        }
        fn refuse(&self, _: &(), e: &GatewayError) -> String {
            format!("refused: {}", e.message())
        }
        fn panicked(&self, _: &()) -> String {
            "panicked".into()
        }
        fn run(&self, _: &Gateway, _: &Ops<'_>, _: &(), panics: bool) -> Ran<Tasks> {
            assert!(!panics, "a task that panics");
            Ran::Refused {
                name: "frob".into(),
                outcome: Err((-32602, "bad".into())),
                answer: "its own refusal".into(),
            }
        }
    }

    /// A task that panics is answered in the door's words for it, and whatever ran it
    /// lives on; one the door refuses is answered as it says once recorded.
    #[test]
    fn a_task_that_panics_or_is_refused_is_answered_in_the_doors_words() {
        let (_tmp, _, gw) = gateway();
        let ctx = ctx(PathStyle::Rooted, &crate::mcp::DOOR);
        let served = serve_wire(&Tasks, &gw, &ctx, None, true);
        assert_eq!(served.answer, "panicked");
        let served = serve_wire(&Tasks, &gw, &ctx, None, false);
        assert_eq!(served.answer, "its own refusal");
    }
}
