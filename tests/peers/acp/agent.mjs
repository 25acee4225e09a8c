// A test agent built on the TypeScript ACP SDK (npm `@agentclientprotocol/sdk` 2.x,
// app-style API, protocol v1 which carries fs/*). The twin of agent.py: same command
// language, same reports; see agent.py's docstring for the commands.
//
// The SDK is loaded from FSGATE_ACP_SDK (the package directory), by default the one
// scripts/install-peers.sh puts in .peers/node.

import { readFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const sdkDir =
  process.env.FSGATE_ACP_SDK ??
  new URL("../../../.peers/node/node_modules/@agentclientprotocol/sdk", import.meta.url).pathname;
const acp = await import(pathToFileURL(`${sdkDir}/dist/v1/stable/acp.js`).href);
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
