"""A scripted stand-in for a coding agent's model API, on loopback, with no key and no
network: the Anthropic Messages API (`POST /v1/messages`, streamed as SSE, and
`/v1/messages/count_tokens`), the Gemini API (`/v1beta/models/M:streamGenerateContent`,
`:generateContent`, `:countTokens`) and the OpenAI Responses API (`POST /v1/responses`,
streamed as SSE, as Codex reads it). Python standard library only.

fsgate's agent tests (tests/agents/) start it, point the real agent at it
(`ANTHROPIC_BASE_URL`, `GOOGLE_GEMINI_BASE_URL`, a Codex model provider's `base_url`)
and drive the agent's real tool loop:

- The test's prompt holds one step: a line `FSGATE-STEP {"want": [...]}`, where each
  entry of `want` is `{"tool": NAME, "args": {...}}` (one of the agent's built-in tools,
  by its exact name), `{"mcp": NAME, "args": {...}}` (a tool of an MCP server, by the
  end of its name: `read_text_file` matches `mcp__fsgate__read_text_file` and
  `mcp_fsgate_read_text_file`; the `fsgate` server's first), `{"shell": COMMAND}` (the
  agent's own shell tool, whichever it offers, with the arguments that tool takes) or
  `{"patch": TEXT}` (Codex's `apply_patch`), best first. A line
  `FSGATE-STEP {"steps": [[...], [...]]}` holds several steps, taken one after the
  other in one turn: the n-th call of the turn answers the n-th step.
- A request whose conversation ends with that prompt is answered with the call of the
  first entry the agent offers. If none is offered but the request names a deferred tool
  (`mcp__SERVER__NAME` in its text) and the agent offers `ToolSearch` (Claude Code), the
  fake first loads it with `ToolSearch` `select:mcp__SERVER__NAME`, then calls it.
- Once the last step's result came back, the answer is a final text: `FSGATE-DONE`.
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


# An agent's own shell tool, by name, best first, and the arguments it takes.
SHELLS: list[tuple[str, Any]] = [
    ("exec_command", lambda c: {"cmd": c}),             # Codex (unified exec)
    ("shell_command", lambda c: {"command": c}),        # Codex
    ("shell", lambda c: {"command": ["bash", "-lc", c]}),  # Codex (older)
    ("local_shell", lambda c: {"command": ["bash", "-lc", c]}),  # Codex, a local_shell_call
    ("run_shell_command", lambda c: {"command": c}),    # Gemini CLI
    ("Bash", lambda c: {"command": c}),                 # Claude Code
]


def special(want: dict[str, Any], offered: list[str]) -> tuple[str, dict] | None:
    """A `shell` or `patch` want as the call of the tool the agent offers for it."""
    if "shell" in want:
        for name, args in SHELLS:
            if name in offered:
                return name, args(want["shell"])
    if "patch" in want and "apply_patch" in offered:
        return "apply_patch", {"input": want["patch"]}
    return None


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
        if "shell" in want or "patch" in want:
            pick = special(want, offered)
            if pick is not None:
                return pick
            continue
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
    """Where the conversation stands: the steps asked for, the calls made since, and
    the step now due (the first one not yet answered by a call; the last once all are)."""

    def __init__(self, steps: list[list[dict[str, Any]]] | None, calls: list[str]):
        self.steps = steps
        self.calls = calls
        self.done = len([c for c in calls if c != "ToolSearch"])
        self.step = None if not steps else steps[min(self.done, len(steps) - 1)]


def plan(turn: Turn, offered: list[str], body_text: str) -> dict[str, Any]:
    """The answer to a tool-loop request: {"tool": NAME, "input": {...}} or {"text": ...}."""
    if turn.steps is None or turn.step is None:
        return {"text": "FSGATE-NO-STEP"}
    # The agent asks again only once a call's result is in: that step is done.
    if turn.done >= len(turn.steps):
        return {"text": DONE}
    pick = choose(turn.step, offered)
    if pick is not None:
        return {"tool": pick[0], "input": pick[1]}
    name = deferred(turn.step, body_text)
    if name is not None and "ToolSearch" in offered and "ToolSearch" not in turn.calls:
        return {"tool": "ToolSearch", "input": {"query": "select:" + name, "max_results": 5}}
    names = [w.get("mcp") or w.get("tool") or ("shell" if "shell" in w else "patch")
             for w in turn.step]
    return {"text": "FSGATE-NO-TOOL " + ",".join(names)}


def parse_step(text: str) -> list[list[dict[str, Any]]] | None:
    """The steps of a prompt: `{"want": [...]}` is one, `{"steps": [[...], ...]}` several."""
    for line in text.splitlines():
        at = line.find(STEP)
        if at < 0:
            continue
        try:
            value = json.loads(line[at + len(STEP):])
        except ValueError:
            return None
        if isinstance(value, dict) and isinstance(value.get("want"), list):
            return [value["want"]]
        if isinstance(value, dict) and isinstance(value.get("steps"), list):
            return value["steps"]
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
                           "model_choice": "flash", "complexity_score": 1,
                           "complexity_reasoning": "fake"})
    return "ok"


# ---- OpenAI Responses API (as Codex uses it) ----


def openai_tools(body: dict[str, Any]) -> dict[str, str]:
    """The tools offered, by name, with their type (`function`, `custom`, `local_shell`)."""
    out = {}
    for t in body.get("tools") or []:
        kind = t.get("type", "")
        name = "local_shell" if kind == "local_shell" else t.get("name", "")
        if name:
            out[name] = kind
    return out


CALL_ITEMS = ("function_call", "custom_tool_call", "local_shell_call")


def openai_texts(item: dict[str, Any]) -> list[str]:
    content = item.get("content")
    if isinstance(content, str):
        return [content]
    return [c.get("text", "") for c in content or [] if isinstance(c, dict)]


def openai_turn(body: dict[str, Any]) -> Turn:
    items = body.get("input") or []
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    start, steps = None, None
    for i, it in enumerate(items):
        if it.get("type", "message") == "message" and it.get("role") == "user":
            s = next((p for p in map(parse_step, openai_texts(it)) if p), None)
            if s is not None:
                start, steps = i, s
    calls = []
    if start is not None:
        for it in items[start + 1:]:
            if it.get("type") in CALL_ITEMS:
                calls.append(it.get("name") or "local_shell")
    return Turn(steps, calls)


def openai_received(body: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    items = body.get("input") or []
    for it in items if isinstance(items, list) else []:
        if str(it.get("type", "")).endswith("_output"):
            output = it.get("output")
            text = output if isinstance(output, str) else json.dumps(output)
            out.append({"id": it.get("call_id"), "type": it.get("type"), "text": text})
    return out


def openai_item(answer: dict[str, Any], tools: dict[str, str]) -> dict[str, Any]:
    n = next(_ids)
    if "tool" not in answer:
        return {"type": "message", "id": f"msg_fsgate_{n}", "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": answer["text"], "annotations": []}]}
    name, args, call = answer["tool"], answer["input"], f"call_fsgate_{n}"
    kind = tools.get(name, "function")
    if kind == "local_shell":
        return {"type": "local_shell_call", "id": f"lsh_fsgate_{n}", "call_id": call,
                "status": "completed",
                "action": {"type": "exec", "command": args["command"], "env": {}}}
    if kind == "custom":
        return {"type": "custom_tool_call", "id": f"ctc_fsgate_{n}", "call_id": call,
                "name": name, "input": args.get("input", ""), "status": "completed"}
    return {"type": "function_call", "id": f"fc_fsgate_{n}", "call_id": call, "name": name,
            "arguments": json.dumps(args), "status": "completed"}


def openai_stream(item: dict[str, Any], model: str) -> bytes:
    rid = f"resp_fsgate_{next(_ids)}"
    usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": 15}
    head = {"id": rid, "object": "response", "model": model, "status": "in_progress",
            "output": []}
    out = [sse("response.created", {"type": "response.created", "response": head}),
           sse("response.output_item.added", {"type": "response.output_item.added",
               "output_index": 0, "item": item}),
           sse("response.output_item.done", {"type": "response.output_item.done",
               "output_index": 0, "item": item}),
           sse("response.completed", {"type": "response.completed",
               "response": dict(head, status="completed", output=[item], usage=usage)})]
    return b"".join(out)


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
        elif path.endswith("/v1/responses"):
            self.openai(body, raw)
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

    def openai(self, body: dict[str, Any], raw: bytes) -> None:
        tools = openai_tools(body)
        offered = list(tools)
        if not offered:
            answer = {"text": "ok"}
            kind = "side"
        else:
            turn = openai_turn(body)
            answer = plan(turn, offered, raw.decode("utf-8", "replace"))
            answer["step"] = turn.step
            kind = "main"
        self.log_request_body("openai", kind, raw, offered, answer, openai_received(body))
        stream = openai_stream(openai_item(answer, tools), body.get("model", "gpt-fake"))
        self.reply_bytes(200, "text/event-stream", stream)

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
