#!/usr/bin/env python3
"""The guided tour behind scripts/demo.sh: usage `demo.py FSGATE_BIN DEMO_DIR`.

Serves a small workspace with the built-in default policy, sends an agent's requests one
at a time (each answer awaited, so every run tells the same story), then shows the audit
log, verifies it, tampers with a copy, and lists and restores a backup. Everything stays
in DEMO_DIR (which must be new or empty); nothing leaves the machine.
"""

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path


class Tour:
    def __init__(self, fsgate, demo):
        self.fsgate = fsgate
        self.demo = demo
        self.ws = demo / "workspace"
        self.state = demo / "state"
        self.env = dict(os.environ, XDG_STATE_HOME=str(self.state), COLUMNS="100")
        # fsgate's own default (warnings only), whatever the caller's shell sets.
        self.env.pop("RUST_LOG", None)
        self.next_id = 0

    def short(self, text):
        """Paths as the reader was told to read them: $WS and $DEMO."""
        return text.replace(str(self.ws), "$WS").replace(str(self.demo), "$DEMO")

    def heading(self, text):
        print(f"\n== {text} ==")

    def run(self, *args, note=""):
        """Runs `fsgate ARGS`, prints the command, its output and its exit code."""
        shown = " ".join(self.short(str(a)) for a in args)
        print(f"$ fsgate {shown}{note}")
        done = subprocess.run(
            [self.fsgate, *map(str, args)], env=self.env, capture_output=True, text=True
        )
        for line in (done.stdout + done.stderr).splitlines():
            print("  " + self.short(line))
        print(f"  (exit {done.returncode})")
        return done.returncode

    def make_workspace(self):
        (self.ws / "src").mkdir(parents=True)
        self.state.mkdir()
        (self.ws / "src/main.rs").write_text(
            'fn main() {\n    println!("hello from the workspace");\n}\n'
        )
        (self.ws / ".env").write_text("API_KEY=do-not-leak\n")


class Session:
    """One `fsgate serve` on stdio: a request goes out only once the last was answered."""

    def __init__(self, tour):
        self.tour = tour
        self.proc = subprocess.Popen(
            [tour.fsgate, "serve", "--workspace", str(tour.ws)],
            env=tour.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.stderr = []

    def announced(self):
        """Prints fsgate's start-up lines on stderr: where its log and backups are."""
        seen = 0
        while seen < 2:
            line = self.proc.stderr.readline()
            if not line:
                sys.exit("fsgate did not start:\n" + "".join(self.stderr))
            if line.startswith(("fsgate: audit log:", "fsgate: backups:")):
                seen += 1
                print("  " + self.tour.short(line.rstrip("\n")))
            else:
                self.stderr.append(line)
        threading.Thread(target=self.drain, daemon=True).start()

    def drain(self):
        for line in self.proc.stderr:
            self.stderr.append(line)

    def call(self, method, params):
        """Sends one request, prints it, waits for its answer and returns it."""
        self.tour.next_id += 1
        req = {"jsonrpc": "2.0", "id": self.tour.next_id, "method": method, "params": params}
        print(f"-> {method} {self.tour.short(json.dumps(params))}")
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            sys.exit("fsgate ended early:\n" + "".join(self.stderr))
        answer = json.loads(line)
        if answer.get("id") != req["id"]:
            sys.exit(f"answer to another request: {line}")
        return answer

    def refused(self, method, params):
        err = self.call(method, params).get("error", {})
        data = err.get("data", {})
        print(f"<- refused, code {err.get('code')}, rule {data.get('rule')}")
        print(f"   {self.tour.short(err.get('message', ''))}")

    def stop(self):
        self.proc.stdin.close()
        code = self.proc.wait()
        print(f"(stdin closed: fsgate writes its stop record and exits {code})")
        for line in self.stderr:
            print("  fsgate stderr: " + self.tour.short(line.rstrip("\n")))


def start(tour):
    tour.heading("1. Start the gateway (built-in default policy, JSON-RPC on stdio)")
    print("$ fsgate serve --workspace $WS")
    s = Session(tour)
    s.announced()
    res = s.call("initialize", {"protocolVersion": 1})["result"]
    meta = res["_meta"]["fsgate"]
    print(f"<- protocolVersion {res['protocolVersion']}, fs capabilities "
          f"{json.dumps(res['clientCapabilities']['fs'])}")
    print(f"   _meta.fsgate.auditLog: {tour.short(meta['auditLog'])}")
    print(f"   _meta.fsgate.sandbox: {meta['sandbox']['enforcement']}")
    return s


def work(tour, s):
    tour.heading("2. The agent reads, writes and lists (each answer awaited)")
    p = lambda rel, **kw: dict(sessionId="demo", path=str(tour.ws / rel), **kw)
    res = s.call("fs/read_text_file", p("src/main.rs", line=2, limit=1))["result"]
    print(f"<- {json.dumps(res)}")
    content = "- try fsgate\n"
    s.call("fs/write_text_file", p("notes/todo.md", content=content))
    size = (tour.ws / "notes/todo.md").stat().st_size
    print(f"<- null: done (ACP answers a write with null); notes/ was created and "
          f"notes/todo.md now holds {size} bytes")
    new_main = 'fn main() {\n    println!("rewritten by the agent");\n}\n'
    s.call("fs/write_text_file", p("src/main.rs", content=new_main))
    print("<- null: done; src/main.rs was replaced, and its previous content was "
          "backed up first")
    entries = s.call("_fsgate/ls", p("."))["result"]["entries"]
    names = [e["name"] + ("/" if e.get("type") == "directory" else "") for e in entries]
    print(f"<- entries: {' '.join(names)}   (.env exists but is never listed)")


def refusals(tour, s):
    tour.heading("3. Refusals name the rule that decided")
    s.refused("fs/read_text_file", dict(sessionId="demo", path=str(tour.ws / ".env")))
    s.refused("fs/read_text_file",
              dict(sessionId="demo", path=str(tour.ws) + "/../../etc/passwd"))
    s.stop()


def audit(tour):
    tour.heading("4. The audit log: one record per request, written before the answer")
    tour.run("audit", "show", "--workspace", tour.ws)
    tour.heading("5. The log is a hash chain: verify it")
    tour.run("audit", "verify", "--workspace", tour.ws)
    copy = tour.demo / "tampered-audit"
    logs = list(tour.state.glob("fsgate/*/audit"))
    shutil.copytree(logs[0], copy)
    log = copy / "audit.jsonl"
    data = bytearray(log.read_bytes())
    at = data.index(b'"notes/todo.md"') + len(b'"notes/todo.')
    data[at] = ord("M")
    log.write_bytes(bytes(data))
    line = data.count(b"\n", 0, at) + 1
    print(f"\nA copy of the log with one byte edited: in $DEMO/tampered-audit/audit.jsonl, "
          f"line {line}, \"notes/todo.md\" -> \"notes/todo.Md\"")
    tour.run("audit", "verify", copy, note="   (exit 1 = tampered)")


def backups(tour):
    tour.heading("6. Backups: the previous content of every changed file")
    tour.run("backup", "list", "--workspace", tour.ws)
    tour.run("backup", "restore", "--workspace", tour.ws, "src/main.rs")
    print("$WS/src/main.rs now:")
    for line in (tour.ws / "src/main.rs").read_text().splitlines():
        print("  " + line)
    tour.run("audit", "show", "--workspace", tour.ws, "--op", "restore",
             note="   (the restore is recorded too)")


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: demo.py FSGATE_BIN DEMO_DIR")
    demo = Path(sys.argv[2]).resolve()
    if demo.exists() and any(demo.iterdir()):
        sys.exit(f"{demo} is not empty: give a new directory")
    demo.mkdir(parents=True, exist_ok=True)
    tour = Tour(sys.argv[1], demo)
    tour.make_workspace()
    print(f"fsgate demo: a guided tour (fsgate below is {tour.fsgate}). Everything happens in")
    print(f"  DEMO={demo}")
    print("  WS=$DEMO/workspace            the agent's workspace (src/main.rs, .env)")
    print("  XDG_STATE_HOME=$DEMO/state    where fsgate keeps its audit log and backups")
    session = start(tour)
    work(tour, session)
    refusals(tour, session)
    audit(tour)
    backups(tour)
    tour.heading("Left behind")
    print(f"Everything is still in {demo}; look around, e.g.:")
    print(f"  XDG_STATE_HOME={tour.state} fsgate audit show --workspace {tour.ws}")
    print(f"  ls -R {tour.ws}")
    print(f"  rm -rf {demo}    # when done")


if __name__ == "__main__":
    main()
