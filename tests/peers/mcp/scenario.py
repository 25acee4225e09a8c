"""One end-to-end session against `fsgate serve --transport mcp`, shared by the MCP
Python SDK 2.x and 1.x drivers (client_v2.py, client_v1.py).

The Rust test (tests/mcp_peers.rs) builds the workspace from fixture.json first, runs a
driver, and afterwards checks the files on disk and the audit log. The
driver calls every tool, asserts on each result, and prints one JSON summary line.

A driver supplies two coroutines: list_tools() -> [tool dicts in wire (camelCase) form]
and call(name, args) -> result dict in wire form, raising ProtocolError for a JSON-RPC
error response (as opposed to a tool result with isError).
"""

import base64
import json
import os

# Text files of the workspace, created by the Rust test before the driver runs (plus the
# binary img/pixel.png, img/fake.png (not a PNG inside), and outside.txt in the directory outside the workspace).
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixture.json"), encoding="utf-8") as _f:
    FIXTURE = json.load(_f)

EXPECTED_TOOLS = {
    # the contract's
    "read_text_file", "write_text_file", "edit_file", "ls", "glob", "grep", "stat",
    "mkdir", "rm", "rename",
    # the reference filesystem server's (read_text_file and edit_file shared)
    "read_file", "read_media_file", "read_multiple_files", "write_file",
    "create_directory", "list_directory", "list_directory_with_sizes", "directory_tree",
    "move_file", "search_files", "get_file_info", "list_allowed_directories",
}


class ProtocolError(Exception):
    """A JSON-RPC error response (not a tool result)."""

    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code


class Checks:
    def __init__(self):
        self.n = 0

    def __call__(self, cond, what):
        self.n += 1
        if not cond:
            raise AssertionError(what)


def texts(res):
    return "\n".join(c.get("text", "") for c in res.get("content", []) if c.get("type") == "text")


async def run(list_tools, call, root, outside):
    check = Checks()
    W = lambda rel: os.path.join(root, rel)

    async def ok(name, args):
        res = await call(name, args)
        check(not res.get("isError"), f"{name} {args}: unexpected isError: {texts(res)[:300]}")
        return res

    async def refused(name, args, *needles):
        res = await call(name, args)
        msg = texts(res)
        check(res.get("isError") is True, f"{name} {args}: expected isError, got {msg[:300]!r}")
        check("\n" not in msg.strip(), f"{name}: refusal must be one line: {msg!r}")
        for n in needles:
            check(n in msg, f"{name} {args}: {n!r} not in {msg!r}")
        return msg

    # -- tools/list -------------------------------------------------------------------
    tools = await list_tools()
    names = {t["name"] for t in tools}
    check(names == EXPECTED_TOOLS, f"tool names: missing {EXPECTED_TOOLS - names}, extra {names - EXPECTED_TOOLS}")
    for t in tools:
        check(len(t.get("description") or "") > 60, f"{t['name']}: description too short")
        check(t["inputSchema"].get("type") == "object", f"{t['name']}: inputSchema not an object")
        if t["name"] != "list_allowed_directories":
            check("null" not in json.dumps(t["inputSchema"]), f"{t['name']}: nullable schema")
        check(t.get("annotations", {}).get("openWorldHint") is False, f"{t['name']}: openWorldHint")
    by_name = {t["name"]: t for t in tools}
    for n in ("ls", "stat", "glob", "grep"):
        check("outputSchema" in by_name[n], f"{n}: no outputSchema")
    check(by_name["read_text_file"]["inputSchema"]["required"] == ["path"], "read_text_file required")
    props = by_name["read_text_file"]["inputSchema"]["properties"]
    check({"path", "line", "limit", "head", "tail"} <= set(props), f"read_text_file props {props}")
    props = by_name["edit_file"]["inputSchema"]["properties"]
    check({"path", "oldText", "newText", "edits", "dryRun"} <= set(props), f"edit_file props {props}")
    check(by_name["read_text_file"]["annotations"].get("readOnlyHint") is True, "read_text_file readOnlyHint")
    check(by_name["rm"]["annotations"].get("destructiveHint") is True, "rm destructiveHint")

    # -- reads ------------------------------------------------------------------------
    notes = FIXTURE["notes.txt"]
    for p in (W("notes.txt"), "notes.txt", "./docs/../notes.txt"):
        check(texts(await ok("read_text_file", {"path": p})) == notes, f"read {p}")
    check(texts(await ok("read_text_file", {"path": "notes.txt", "line": 2, "limit": 2})) == "line2\nline3\n", "window")
    check(texts(await ok("read_text_file", {"path": "notes.txt", "head": 2})) == "line1\nline2", "head")
    check(texts(await ok("read_text_file", {"path": "notes.txt", "tail": 2})) == "line4\nline5\n", "tail")
    await refused("read_text_file", {"path": "notes.txt", "head": 1, "tail": 1}, "head or tail")
    check(texts(await ok("read_file", {"path": "notes.txt", "head": 1})) == "line1", "read_file head")
    await refused("read_text_file", {}, "invalid arguments", "path")
    await refused("read_text_file", {"path": "missing.txt"}, "not found")

    # -- writes and edits ---------------------------------------------------------------
    await ok("write_text_file", {"path": "out/new.txt", "content": "créé\n"})
    check(texts(await ok("read_text_file", {"path": "out/new.txt"})) == "créé\n", "write readback")
    await ok("write_file", {"path": W("out/w2.txt"), "content": "two"})
    await ok("edit_file", {"path": "out/new.txt", "oldText": "créé", "newText": "edited"})
    check(texts(await ok("read_text_file", {"path": "out/new.txt"})) == "edited\n", "contract edit")
    await refused("edit_file", {"path": "out/new.txt", "oldText": "absent", "newText": "x"}, "occurs 0 times")

    res = await ok("edit_file", {"path": "docs/guide.md", "dryRun": True,
                                 "edits": [{"oldText": "TODO: write", "newText": "Written."}]})
    diff = texts(res)
    check(diff.startswith("```diff\n") and "-TODO: write\n+Written.\n" in diff, f"dry-run diff {diff!r}")
    check(f"--- {W('docs/guide.md')}\toriginal" in diff, f"diff header {diff!r}")
    check(texts(await ok("read_text_file", {"path": "docs/guide.md"})) == FIXTURE["docs/guide.md"], "dry run wrote")
    # whitespace-flexible line match keeps the file's indentation
    res = await ok("edit_file", {"path": "src/main.rs", "edits": [
        {"oldText": 'println!("hi");', "newText": 'println!("hello");'},
        # not an exact substring (trailing blanks): matched line by line, indentation kept
        {"oldText": 'println!("hello");  ', "newText": "let x = 1;"},
    ]})
    check("+    let x = 1;" in texts(res), f"edit diff {texts(res)!r}")
    check(texts(await ok("read_text_file", {"path": "src/main.rs"})) == "fn main() {\n    let x = 1;\n}\n",
          "edits applied")
    await refused("edit_file", {"path": "src/main.rs", "edits": [{"oldText": "nowhere", "newText": "x"}]},
                  "not found")
    await refused("edit_file", {"path": "src/main.rs", "edits": [{"oldText": "a", "newText": "b"}],
                                "oldText": "a", "newText": "b"}, "not both")

    # -- listings ---------------------------------------------------------------------
    res = await ok("ls", {"path": "src"})
    entries = res["structuredContent"]["entries"]
    check([e["name"] for e in entries] == ["lib.rs", "main.rs"], f"ls {entries}")
    check(all(e["path"] == W("src/" + e["name"]) for e in entries), f"ls paths absolute {entries}")
    check(json.loads(texts(res)) == res["structuredContent"], "ls text is the structured JSON")
    res = await ok("glob", {"pattern": "**/*.rs"})
    check(sorted(res["structuredContent"]["matches"]) == [W("src/lib.rs"), W("src/main.rs")], f"glob {res}")
    res = await ok("grep", {"pattern": r"fn \w+", "path": "src"})
    hits = {(m["path"], m["lineNumber"]) for m in res["structuredContent"]["matches"]}
    check(hits == {(W("src/lib.rs"), 1), (W("src/main.rs"), 1)}, f"grep {hits}")
    res = await ok("stat", {"path": "notes.txt"})
    st = res["structuredContent"]["stat"]
    check(st["size"] == len(notes) and st["type"] == "file" and st["path"] == W("notes.txt"), f"stat {st}")
    listing = texts(await ok("list_directory", {"path": "."}))
    check("[DIR] src" in listing and "[FILE] notes.txt" in listing, f"list_directory {listing!r}")
    check(".env" not in listing, "list_directory must hide .env")
    sized = texts(await ok("list_directory_with_sizes", {"path": ".", "sortBy": "size"}))
    check("Total:" in sized and "Combined size:" in sized and ".env" not in sized, f"sizes {sized!r}")
    tree = json.loads(texts(await ok("directory_tree", {"path": ".", "excludePatterns": ["node_modules"]})))
    top = {n["name"]: n for n in tree}
    check("src" in top and "node_modules" not in top and ".env" not in top, f"tree {sorted(top)}")
    check({c["name"] for c in top["src"]["children"]} == {"lib.rs", "main.rs"}, f"tree src {top['src']}")
    found = texts(await ok("search_files", {"path": ".", "pattern": "**/*.rs"})).splitlines()
    check(sorted(found) == [W("src/lib.rs"), W("src/main.rs")], f"search_files {found}")
    none = texts(await ok("search_files", {"path": root, "pattern": "**/*.rs", "excludePatterns": ["src"]}))
    check(none == "No matches found", f"search_files exclude {none!r}")
    info = texts(await ok("get_file_info", {"path": W("notes.txt")}))
    check(f"size: {len(notes)}" in info and "isFile: true" in info, f"get_file_info {info!r}")
    allowed = texts(await ok("list_allowed_directories", {}))
    check(root in allowed, f"list_allowed_directories {allowed!r}")

    # -- media and multiple reads -------------------------------------------------------
    res = await ok("read_media_file", {"path": "img/dot.svg"})
    block = res["content"][0]
    check(block["type"] == "image" and block["mimeType"] == "image/svg+xml", f"media {block}")
    check(base64.b64decode(block["data"]).decode() == FIXTURE["img/dot.svg"], "media bytes")
    # The default policy reads images whose content matches their extension, nothing else binary.
    res = await ok("read_media_file", {"path": "img/pixel.png"})
    block = res["content"][0]
    check(block["type"] == "image" and block["mimeType"] == "image/png", f"png {block}")
    check(base64.b64decode(block["data"]).startswith(b"\x89PNG"), "png bytes")
    await refused("read_media_file", {"path": "img/fake.png"}, "limits.binary")
    multi = texts(await ok("read_multiple_files", {"paths": ["notes.txt", ".env", W("docs/guide.md")]}))
    check(f"{W('notes.txt')}:\n{notes}" in multi, f"multi notes {multi!r}")
    check(f"{W('.env')}: Error - refused" in multi and "sekrit" not in multi, f"multi .env {multi!r}")
    check(multi.count("\n---\n") == 2, "multi separators")

    # -- directories, moves, deletes ----------------------------------------------------
    await ok("mkdir", {"path": "made/deep", "recursive": True})
    await refused("mkdir", {"path": "nothere/x"}, "not found")
    for _ in range(2):
        await ok("create_directory", {"path": W("made2/x")})
    await ok("rm", {"path": "out/w2.txt"})
    await refused("rm", {"path": "made"}, "not empty")
    await ok("rename", {"oldPath": "docs/guide.md", "newPath": "docs/guide2.md"})
    await ok("move_file", {"source": W("docs/guide2.md"), "destination": "moved.md"})
    await refused("move_file", {"source": "moved.md", "destination": "notes.txt"}, "already exists")

    # -- refusals: secrets, outside paths, escapes --------------------------------------
    await refused("read_text_file", {"path": ".env"}, "rule ", ".env")
    await refused("write_text_file", {"path": ".env", "content": "x"}, "rule ")
    await refused("read_text_file", {"path": os.path.join(outside, "outside.txt")}, "workspace-boundary")
    await refused("read_text_file", {"path": "../" + os.path.basename(outside) + "/outside.txt"},
                  "workspace-boundary")
    await refused("read_text_file", {"path": "/etc/passwd"}, "workspace-boundary")
    await refused("write_text_file", {"path": "../escape.txt", "content": "x"}, "workspace-boundary")
    await refused("ls", {"path": ".."}, "workspace-boundary")
    await refused("glob", {"pattern": "../**"}, "workspace-boundary")
    await refused("search_files", {"path": "/etc", "pattern": "passwd"}, "workspace-boundary")
    await refused("directory_tree", {"path": ".hg"}, "rule ")
    await refused("move_file", {"source": "notes.txt", "destination": os.path.join(outside, "x.txt")},
                  "workspace-boundary")
    await refused("rm", {"path": "."}, "workspace root")

    # -- protocol errors stay JSON-RPC errors -------------------------------------------
    try:
        await call("no_such_tool", {})
        check(False, "unknown tool must be a JSON-RPC error")
    except ProtocolError as e:
        check(e.code == -32602, f"unknown tool code {e.code}")

    return {"checks": check.n, "tools": sorted(names)}
