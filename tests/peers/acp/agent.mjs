// A test agent built on the TypeScript ACP SDK (npm `@agentclientprotocol/sdk` 2.x,
// app-style API, protocol v1 which carries fs/*). The twin of agent.py: same command
// language, same reports; see agent.py's docstring for the commands.
//
// The SDK is loaded from FSGATE_ACP_SDK (the package directory), by default the one
// scripts/install-peers.sh puts in .peers/node; when neither is there, by its package
// name (so a copy of this script next to a node_modules runs like an installed agent).

import { spawnSync } from "node:child_process";
import { closeSync, existsSync, openSync, readFileSync } from "node:fs";
import { createConnection } from "node:net";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

async function loadSdk() {
  const beside = new URL("../../../.peers/node/node_modules/@agentclientprotocol/sdk", import.meta.url).pathname;
  const dir = process.env.FSGATE_ACP_SDK ?? (existsSync(beside) ? beside : null);
  if (dir === null) return await import("@agentclientprotocol/sdk");
  return await import(pathToFileURL(`${dir}/dist/v1/stable/acp.js`).href);
}

const acp = await loadSdk();
const { agent, methods, ndJsonStream, RequestError, PROTOCOL_VERSION } = acp;

function errorOf(e) {
  if (e instanceof RequestError || (e && typeof e.code === "number")) {
    return { code: e.code, message: e.message, data: e.data ?? null };
  }
  return { code: null, message: String(e), data: null };
}

function textArg(rest) {
  return rest.startsWith('"') ? JSON.parse(rest) : rest;
}

function split(rest) {
  const i = rest.indexOf(" ");
  return i < 0 ? [rest, ""] : [rest.slice(0, i), rest.slice(i + 1)];
}

// An OS error as the Python agent reports it: a positive errno (libuv's are negated).
function osOutcome(key, ok, e) {
  if (ok) return { [key]: true, errno: null };
  return { [key]: false, errno: typeof e?.errno === "number" ? Math.abs(e.errno) : null, code: e?.code ?? null, strerror: String(e?.message ?? e) };
}

function tryOs(key, action) {
  try {
    action();
    return osOutcome(key, true);
  } catch (e) {
    return osOutcome(key, false, e);
  }
}

// A stream connect (Unix path or TCP); settles on connect, error or a 5 s timeout.
function connect(options) {
  return new Promise((resolve) => {
    const sock = createConnection(options);
    const done = (ok, e) => {
      sock.destroy();
      resolve(osOutcome("connected", ok, e));
    };
    sock.setTimeout(5000, () => done(false, new Error("timed out")));
    sock.once("connect", () => done(true));
    sock.once("error", (e) => done(false, e));
  });
}

// sid and pgid are not in Node's API: fields 5 and 6 of /proc/self/stat.
function ppid() {
  const stat = readFileSync("/proc/self/stat", "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { ppid: process.ppid, pid: process.pid, sid: Number(fields[3]), pgid: Number(fields[2]) };
}

// Node cannot ioctl: a Python child on the same fds 0, 1, 2 (the same open files) does
// what agent.py's `tiocsti` does and prints the same JSON.
const TIOCSTI_PY = `
import fcntl, json, os, termios
def t(fd):
    try:
        fcntl.ioctl(fd, termios.TIOCSTI, b"#")
        return {"ok": True, "errno": None}
    except OSError as e:
        return {"ok": False, "errno": e.errno}
out = {str(fd): t(fd) for fd in (0, 1, 2)}
try:
    fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    out["tty"] = t(fd)
    os.close(fd)
except OSError as e:
    out["tty"] = {"ok": False, "errno": e.errno}
os.write(3, json.dumps(out).encode())
`;

function tiocsti() {
  const python = existsSync("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  const r = spawnSync(python, ["-c", TIOCSTI_PY], { stdio: ["inherit", "inherit", "inherit", "pipe"] });
  if (r.error || r.status !== 0) throw new Error(`tiocsti via ${python} failed: ${r.error ?? r.status}`);
  return { ...JSON.parse(r.output[3].toString()), via: python };
}

let caps = null;
let sessions = 0;

async function run(client, word, rest, sid) {
  switch (word) {
    case "caps":
      return caps;
    case "read": {
      const parts = rest.split(/\s+/);
      const params = { sessionId: sid, path: parts[0] };
      if (parts.length > 1 && parts[1] !== "-") params.line = Number(parts[1]);
      if (parts.length > 2) params.limit = Number(parts[2]);
      return await client.request(methods.client.fs.readTextFile, params);
    }
    case "write": {
      const [path, content] = split(rest);
      return (await client.request(methods.client.fs.writeTextFile, { sessionId: sid, path, content: textArg(content) })) ?? null;
    }
    case "ext": {
      // The TypeScript SDK sends extension names as given: add the leading `_`.
      const [name, json] = split(rest);
      const params = json ? JSON.parse(json) : {};
      params.sessionId ??= sid;
      return (await client.request(`_${name}`, params)) ?? null;
    }
    case "permission":
      return await client.request(methods.client.session.requestPermission, {
        sessionId: sid,
        toolCall: { toolCallId: "call-1", title: "test permission" },
        options: [
          { optionId: "allow", name: "Allow", kind: "allow_once" },
          { optionId: "reject", name: "Reject", kind: "reject_once" },
        ],
      });
    case "terminal":
      return await client.request(methods.client.terminal.create, { sessionId: sid, command: "echo", args: ["hi"] });
    case "open":
      try {
        return { opened: true, bytes: readFileSync(rest).length };
      } catch (e) {
        return { opened: false, errno: -e.errno, code: e.code, strerror: e.message };
      }
    case "env":
      return { set: Object.hasOwn(process.env, rest) };
    case "signal":
      return tryOs("ok", () => process.kill(Number(rest), 0));
    case "ppid":
      return ppid();
    case "unix":
      return await connect({ path: rest });
    case "tty":
      return tryOs("opened", () => closeSync(openSync("/dev/tty", "r+")));
    case "tcp": {
      const [host, port] = split(rest);
      return await connect({ host, port: Number(port) });
    }
    case "tiocsti":
      return tiocsti();
    case "parallel": {
      const [count, path] = split(rest);
      const reads = Array.from({ length: Number(count) }, () =>
        client.request(methods.client.fs.readTextFile, { sessionId: sid, path }),
      );
      return await Promise.all(reads);
    }
    case "exit":
      return { exiting: Number(rest) };
    default:
      throw new Error(`unknown command ${JSON.stringify(word)}`);
  }
}

const app = agent({ name: "fsgate-test-agent-ts" })
  .onRequest(methods.agent.initialize, async ({ params, client }) => {
    caps = params.clientCapabilities ?? null;
    const meta = { clientCapabilities: caps };
    const probe = process.env.FSGATE_PEER_INIT_PROBE;
    if (probe) {
      try {
        meta.probe = { ok: await client.request(methods.client.fs.readTextFile, { sessionId: "init-probe", path: probe }) };
      } catch (e) {
        meta.probe = { error: errorOf(e) };
      }
    }
    return { protocolVersion: PROTOCOL_VERSION, agentCapabilities: {}, _meta: meta };
  })
  .onRequest(methods.agent.session.new, async () => {
    sessions += 1;
    return { sessionId: `ts-session-${sessions}` };
  })
  .onRequest(methods.agent.session.prompt, async ({ params, client }) => {
    const text = params.prompt.map((b) => (b.type === "text" ? b.text : "")).join("\n");
    let sid = params.sessionId;
    for (const line of text.split("\n").map((l) => l.trim())) {
      if (!line) continue;
      const [word, rest] = split(line);
      if (word === "session") {
        sid = rest.trim();
        continue;
      }
      const report = { cmd: line };
      try {
        report.ok = await run(client, word, rest.trim(), sid);
      } catch (e) {
        report.error = errorOf(e);
      }
      await client.notify(methods.client.session.update, {
        sessionId: params.sessionId,
        update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: JSON.stringify(report) } },
      });
      if (word === "exit") {
        process.exit(Number(rest));
      }
    }
    return { stopReason: "end_turn" };
  });

const stream = ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));
const connection = app.connect(stream);
await connection.closed;
process.exit(0);
