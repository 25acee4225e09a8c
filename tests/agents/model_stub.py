"""A scripted stand-in for a coding agent's model API, on loopback, with no key and no
network: the Anthropic Messages API (`POST /v1/messages`, streamed as SSE, and
`/v1/messages/count_tokens`) and the Gemini API (`/v1beta/models/M:streamGenerateContent`,
`:generateContent`, `:countTokens`). Python standard library only.

fsgate's agent tests (tests/agents/) start it, point the real agent at it
(`ANTHROPIC_BASE_URL`, `GOOGLE_GEMINI_BASE_URL`) and drive the agent's real tool loop:

- The test's prompt holds one step: a line `FSGATE-STEP {"want": [...]}`, where each
  entry of `want` is `{"tool": NAME, "args": {...}}` (one of the agent's built-in tools,
  by its exact name) or `{"mcp": NAME, "args": {...}}` (a tool of an MCP server, by the
  end of its name: `read_text_file` matches `mcp__fsgate__read_text_file` and
  `mcp_fsgate_read_text_file`; the `fsgate` server's first), best first.
- A request whose conversation ends with that prompt is answered with the call of the
  first entry the agent offers. If none is offered but the request names a deferred tool
  (`mcp__SERVER__NAME` in its text) and the agent offers `ToolSearch` (Claude Code), the
  fake first loads it with `ToolSearch` `select:mcp__SERVER__NAME`, then calls it.
- Once the call's result came back, the answer is a final text: `FSGATE-DONE`.
- Requests outside the tool loop (no tools offered: titles, classifiers, summaries,
  JSON-mode checks) get a short text and leave the script alone.

Every request is appended to the log (`--log FILE`, one JSON object a line): the API, the
path, the tools offered, what the fake answered (with the step it was answering, under
`answer.step`), the tool results it was sent, and the whole body as received, so a
test can assert what the model saw: that it never received a secret, which tools it was
offered, and that every step ended in a tool result.

Usage: model_stub.py --log FILE; prints `PORT N` on its first stdout line, then serves
until stdin closes or it is killed.
"""

from __future__ import annotations

import argparse
import http.server
import itertools
import json
import re
import sys
import threading
from typing import Any

STEP = "FSGATE-STEP "
DONE = "FSGATE-DONE"
MAX_BODY = 64 * 1024 * 1024

_ids = itertools.count(1)
_log_lock = threading.Lock()


def matches(want: dict[str, Any], offered: str) -> bool:
    """Whether the offered tool name is the wanted one: a built-in by its exact name, an
    MCP server's tool by the end of its name."""
    if "mcp" in want:
        return offered.startswith("mcp_") and (
            offered.endswith("__" + want["mcp"]) or offered.endswith("_" + want["mcp"]))
    return offered == want.get("tool")


def choose(wants: list[dict[str, Any]], offered: list[str]) -> tuple[str, dict] | None:
    """The first wanted call the agent offers, as (full tool name, args)."""
    for want in wants:
        # Prefer a tool of the gateway's server when several end the same way.
        names = sorted((o for o in offered if matches(want, o)), key=lambda o: "fsgate" not in o)
        if names:
            return names[0], want.get("args", {})
    return None


def deferred(wants: list[dict[str, Any]], body_text: str) -> str | None:
    """A deferred MCP tool named in the request text that matches a wanted tool."""
    for want in wants:
        if "mcp" not in want:
            continue
        pattern = r"mcp__[A-Za-z0-9_-]+?__" + re.escape(want["mcp"]) + r"\b"
        found = sorted(set(re.findall(pattern, body_text)), key=lambda n: "fsgate" not in n)
        if found:
            return found[0]
    return None


class Turn:
    """Where the conversation stands: the step asked for and the calls made since."""

    def __init__(self, step: list[dict[str, Any]] | None, calls: list[str]):
        self.step = step
        self.calls = calls


def plan(turn: Turn, offered: list[str], body_text: str) -> dict[str, Any]:
    """The answer to a tool-loop request: {"tool": NAME, "input": {...}} or {"text": ...}."""
    if turn.step is None:
        return {"text": "FSGATE-NO-STEP"}
    # The agent asks again only once the call's result is in: the step is done.
    if any(c != "ToolSearch" for c in turn.calls):
        return {"text": DONE}
    pick = choose(turn.step, offered)
    if pick is not None:
        return {"tool": pick[0], "input": pick[1]}
    name = deferred(turn.step, body_text)
    if name is not None and "ToolSearch" in offered and "ToolSearch" not in turn.calls:
        return {"tool": "ToolSearch", "input": {"query": "select:" + name, "max_results": 5}}
    names = [w.get("mcp") or w.get("tool") or "?" for w in turn.step]
    return {"text": "FSGATE-NO-TOOL " + ",".join(names)}


def parse_step(text: str) -> list[dict[str, Any]] | None:
    for line in text.splitlines():
        if line.startswith(STEP):
            try:
                return json.loads(line[len(STEP):])["want"]
            except (ValueError, KeyError, TypeError):
                return None
    return None


# ---- Anthropic Messages API ----


def anthropic_texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text"]


def anthropic_turn(body: dict[str, Any]) -> Turn:
    """The step of the last user prompt, and the tool calls and results after it."""
    messages = body.get("messages") or []
    start, step = None, None
    for i, m in enumerate(messages):
        if m.get("role") == "user":
            s = next((p for p in map(parse_step, anthropic_texts(m.get("content"))) if p), None)
            if s is not None:
                start, step = i, s
    calls = []
    if start is not None:
        for m in messages[start + 1:]:
            for b in m.get("content") or []:
                if isinstance(b, dict) and b.get("type") == "tool_use":
                    calls.append(b.get("name", ""))
    return Turn(step, calls)


def anthropic_received(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool results in the request, with the text the model is shown."""
    out = []
    for m in body.get("messages") or []:
        for b in m.get("content") or []:
            if isinstance(b, dict) and b.get("type") == "tool_result":
                out.append({"id": b.get("tool_use_id"), "isError": bool(b.get("is_error")),
                            "text": json.dumps(b.get("content"))})
    return out


def sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def anthropic_message(answer: dict[str, Any], model: str) -> tuple[dict[str, Any], str]:
    if "tool" in answer:
        block = {"type": "tool_use", "id": f"toolu_fsgate_{next(_ids)}",
                 "name": answer["tool"], "input": answer["input"]}
        stop = "tool_use"
    else:
        block = {"type": "text", "text": answer["text"]}
        stop = "end_turn"
    msg = {"id": f"msg_fsgate_{next(_ids)}", "type": "message", "role": "assistant",
           "model": model, "content": [block], "stop_reason": stop, "stop_sequence": None,
           "usage": {"input_tokens": 10, "output_tokens": 5,
                     "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}
    return msg, stop


def anthropic_stream(msg: dict[str, Any], stop: str) -> bytes:
    block = msg["content"][0]
    start = dict(msg, content=[], stop_reason=None)
    out = [sse("message_start", {"type": "message_start", "message": start})]
    if block["type"] == "tool_use":
        out.append(sse("content_block_start", {"type": "content_block_start", "index": 0,
                        "content_block": dict(block, input={})}))
        out.append(sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                        "delta": {"type": "input_json_delta",
                                  "partial_json": json.dumps(block["input"])}}))
    else:
        out.append(sse("content_block_start", {"type": "content_block_start", "index": 0,
                        "content_block": {"type": "text", "text": ""}}))
        out.append(sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                        "delta": {"type": "text_delta", "text": block["text"]}}))
    out.append(sse("content_block_stop", {"type": "content_block_stop", "index": 0}))
    out.append(sse("message_delta", {"type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 5}}))
    out.append(sse("message_stop", {"type": "message_stop"}))
    return b"".join(out)


# ---- Gemini API ----


def gemini_offered(body: dict[str, Any]) -> list[str]:
    return [d.get("name", "") for t in body.get("tools") or []
            for d in (t.get("functionDeclarations") or t.get("function_declarations") or [])]


def gemini_turn(body: dict[str, Any]) -> Turn:
    contents = body.get("contents") or []
    start, step = None, None
    for i, c in enumerate(contents):
        if c.get("role") == "user":
            texts = [p.get("text", "") for p in c.get("parts") or [] if "text" in p]
            s = next((p for p in map(parse_step, texts) if p), None)
            if s is not None:
                start, step = i, s
    calls = []
    if start is not None:
        for c in contents[start + 1:]:
            for p in c.get("parts") or []:
                if "functionCall" in p:
                    calls.append(p["functionCall"].get("name", ""))
    return Turn(step, calls)


def gemini_received(body: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for c in body.get("contents") or []:
        for p in c.get("parts") or []:
            if "functionResponse" in p:
                r = p["functionResponse"]
                resp = r.get("response") or {}
                out.append({"id": r.get("id"), "name": r.get("name"),
                            "isError": "error" in resp, "text": json.dumps(resp)})
    return out


def gemini_response(answer: dict[str, Any], model: str) -> dict[str, Any]:
    if "tool" in answer:
        part = {"functionCall": {"name": answer["tool"], "args": answer["input"]}}
    else:
        part = {"text": answer["text"]}
    return {"candidates": [{"content": {"role": "model", "parts": [part]},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5,
                              "totalTokenCount": 15},
            "modelVersion": model}


def gemini_side_text(body: dict[str, Any]) -> str:
    """A text for a request outside the tool loop; JSON when JSON was asked for."""
    cfg = body.get("generationConfig") or {}
    if cfg.get("responseMimeType") == "application/json" or cfg.get("responseJsonSchema") \
            or cfg.get("responseSchema"):
        return json.dumps({"next_speaker": "user", "reasoning": "fake",
                           "model_choice": "flash", "complexity_score": 1})
    return "ok"


# ---- HTTP ----


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    log_path = ""

    def log_message(self, fmt: str, *args: Any) -> None:  # quiet: stderr is the agent's
        pass

    def do_GET(self) -> None:  # model lists and the like: nothing to offer
        self.reply_json(404, {"error": {"code": 404, "message": "not served by the fake"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self.reply_json(413, {"error": {"message": "too large"}})
            return
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        path = self.path.split("?")[0]
        if path.endswith("/v1/messages/count_tokens"):
            self.log_request_body("anthropic", "count", raw, [], None, [])
            self.reply_json(200, {"input_tokens": 100})
        elif path.endswith("/v1/messages"):
            self.anthropic(body, raw)
        elif ":countTokens" in path:
            self.log_request_body("gemini", "count", raw, [], None, [])
            self.reply_json(200, {"totalTokens": 100})
        elif ":streamGenerateContent" in path or ":generateContent" in path:
            self.gemini(body, raw, path)
        else:
            self.log_request_body("other", "unknown", raw, [], None, [])
            self.reply_json(404, {"error": {"code": 404, "message": "not served by the fake"}})

    def anthropic(self, body: dict[str, Any], raw: bytes) -> None:
        offered = [t.get("name", "") for t in body.get("tools") or []]
        model = body.get("model", "claude-fake")
        if not offered:
            answer = {"text": "ok"}
            kind = "side"
        else:
            turn = anthropic_turn(body)
            answer = plan(turn, offered, raw.decode("utf-8", "replace"))
            answer["step"] = turn.step
            kind = "main"
        self.log_request_body("anthropic", kind, raw, offered, answer, anthropic_received(body))
        msg, stop = anthropic_message(answer, model)
        if body.get("stream"):
            self.reply_bytes(200, "text/event-stream", anthropic_stream(msg, stop))
        else:
            self.reply_json(200, msg)

    def gemini(self, body: dict[str, Any], raw: bytes, path: str) -> None:
        offered = gemini_offered(body)
        model = path.rsplit("/", 1)[-1].split(":")[0]
        if not offered:
            answer = {"text": gemini_side_text(body)}
            kind = "side"
        else:
            turn = gemini_turn(body)
            answer = plan(turn, offered, raw.decode("utf-8", "replace"))
            answer["step"] = turn.step
            kind = "main"
        self.log_request_body("gemini", kind, raw, offered, answer, gemini_received(body))
        resp = gemini_response(answer, model)
        if ":streamGenerateContent" in path:
            data = f"data: {json.dumps(resp)}\r\n\r\n".encode()
            self.reply_bytes(200, "text/event-stream", data)
        else:
            self.reply_json(200, resp)

    def log_request_body(self, api: str, kind: str, raw: bytes, offered: list[str],
                         answer: dict[str, Any] | None, received: list[dict[str, Any]]) -> None:
        entry = {"api": api, "path": self.path, "kind": kind, "tools": offered,
                 "answer": answer, "received": received,
                 "body": raw.decode("utf-8", "replace")}
        with _log_lock, open(self.log_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")

    def reply_json(self, status: int, value: Any) -> None:
        self.reply_bytes(status, "application/json", json.dumps(value).encode())

    def reply_bytes(self, status: int, ctype: str, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    args = ap.parse_args()
    Handler.log_path = args.log
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(f"PORT {server.server_address[1]}", flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    # Ends with its test: stdin closes when the test drops it.
    sys.stdin.read()
    server.shutdown()


if __name__ == "__main__":
    main()
