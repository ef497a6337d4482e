// hotseam acp against a client written on the official ACP TypeScript SDK
// (@agentclientprotocol/sdk, pinned in package.json). Each scenario spawns
// `hotseam acp` (HOTSEAM, default .venv/bin/hotseam), talks to it through the SDK's
// ClientApp, and prints one PASS/FAIL line. Exit code: the number of failed scenarios
// (capped at 1). INTEROP_TRANSCRIPT=DIR writes each scenario's JSON-RPC messages there.
//
//   node interop/client.mjs [SCENARIO...]

import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const HOTSEAM = process.env.HOTSEAM ?? ".venv/bin/hotseam";
const TRANSCRIPTS = process.env.INTEROP_TRANSCRIPT;
const WAIT_MS = Number(process.env.INTEROP_WAIT_MS ?? 20000);

const FORM = { elicitation: { form: {} } };
const NONE = {};
const EMPTY = { elicitation: {} };

class Failure extends Error {}

function check(condition, message) {
  if (!condition) throw new Failure(message);
}

function within(promise, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Failure(`timed out waiting for ${what}`)), WAIT_MS);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** `within`, for a promise awaited later: its failure while a scenario awaits something
 * else first is that scenario's, not an unhandled rejection that ends the suite. */
function later(promise, what) {
  const bounded = within(promise, what);
  bounded.catch(() => {});
  return bounded;
}

/** A queue of requests from the agent, each answered by the scenario. */
class Inbox {
  constructor() {
    this.items = [];
    this.waiters = [];
  }
  put(item) {
    const waiter = this.waiters.shift();
    if (waiter) waiter(item);
    else this.items.push(item);
  }
  next(method) {
    const item = this.items.shift();
    const got = item ? Promise.resolve(item) : new Promise((resolve) => this.waiters.push(resolve));
    return within(got, method).then((request) => {
      check(request.method === method, `expected ${method}, got ${request.method}`);
      return request;
    });
  }
}

/** One `hotseam acp` process and an SDK client connected to it.
 *
 * `permission: false` leaves session/request_permission unhandled: the SDK then answers
 * it with -32601, as a client that only chats does. */
async function session(name, capabilities, args, body, { permission = true } = {}) {
  const child = spawn(HOTSEAM, ["acp", "--log-level", "debug", ...args], {
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (chunk) => (stderr += chunk));
  const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));

  const transcript = [];
  const base = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const stream = {
    readable: base.readable.pipeThrough(
      new TransformStream({
        transform(message, controller) {
          transcript.push({ from: "agent", message });
          controller.enqueue(message);
        },
      }),
    ),
    writable: new WritableStream({
      async write(message) {
        transcript.push({ from: "client", message });
        const writer = base.writable.getWriter();
        try {
          await writer.write(message);
        } finally {
          writer.releaseLock();
        }
      },
      async close() {
        await base.writable.close();
      },
    }),
  };

  const inbox = new Inbox();
  const chunks = [];
  const queue = (method) => async ({ params, signal }) =>
    new Promise((resolve, reject) => inbox.put({ method, params, signal, resolve, reject }));
  let app = acp
    .client({ name: "hotseam-interop" })
    .onRequest(acp.methods.client.elicitation.create, queue("elicitation/create"));
  if (permission) {
    app = app.onRequest(
      acp.methods.client.session.requestPermission,
      queue("session/request_permission"),
    );
  }
  app = app.onNotification(acp.methods.client.session.update, ({ params }) => {
      const update = params.update;
      if (update.sessionUpdate === "agent_message_chunk" && update.content.type === "text") {
        chunks.push(update.content.text);
      }
    });

  try {
    await app.connectWith(stream, async (ctx) => {
      const init = await within(
        ctx.request(acp.methods.agent.initialize, {
          protocolVersion: acp.PROTOCOL_VERSION,
          clientCapabilities: capabilities,
          clientInfo: { name: "hotseam-interop", version: "1.0.0" },
        }),
        "initialize",
      );
      check(init.protocolVersion === 1, `protocolVersion ${init.protocolVersion}`);
      const { sessionId } = await within(
        ctx.request(acp.methods.agent.session.new, { cwd: process.cwd(), mcpServers: [] }),
        "session/new",
      );
      const said = () => chunks.join("");
      const prompt = (text, options) =>
        ctx.request(
          acp.methods.agent.session.prompt,
          { sessionId, prompt: [{ type: "text", text }] },
          options,
        );
      await body({ ctx, sessionId, inbox, said, prompt, stderr: () => stderr, init });
    });
  } finally {
    child.stdin.end();
    const code = await within(exited, "the agent to exit");
    if (TRANSCRIPTS) {
      mkdirSync(TRANSCRIPTS, { recursive: true });
      const lines = transcript.map((entry) => JSON.stringify(entry)).join("\n");
      writeFileSync(join(TRANSCRIPTS, `${name}.jsonl`), lines + "\n");
    }
    check(code === 0, `hotseam acp exited ${code}; its last log lines:\n${stderr.trim().split("\n").slice(-6).join("\n")}`);
  }
  return stderr;
}

function logs(stderr, event) {
  return stderr
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line))
    .filter((line) => line.event === event);
}

const accept = (content) => ({ action: "accept", content });
const selected = (optionId) => ({ outcome: { outcome: "selected", optionId } });

/** A provider module that relays each question to the ACP provider one context up. */
const RELAY = (generation) => `from hotseam.interaction import USER_INTERACTION


class Relay:
    generation = ${generation}

    def __init__(self, acp):
        self.acp = acp

    async def ask(self, request):
        return await self.acp.ask(request)


def setup(scope):
    scope.provide(USER_INTERACTION, Relay(scope.context.parent.lookup(USER_INTERACTION)))
`;

/** Whether `promise` rejects with a JSON-RPC error; returns that error. */
async function rejection(promise, what) {
  try {
    await within(promise, what);
  } catch (error) {
    if (error instanceof acp.RequestError) return error;
    throw error;
  }
  throw new Failure(`${what} succeeded; an error was expected`);
}

/** Answer the demo agent's two questions as forms; return what it said. */
async function demoByForm(h, first, second) {
  const turn = within(h.prompt("fix the bug"), "the prompt");
  const approach = await h.inbox.next("elicitation/create");
  approach.resolve(first);
  if (second !== undefined) (await h.inbox.next("elicitation/create")).resolve(second);
  const response = await turn;
  return { stopReason: response.stopReason, said: h.said(), approach };
}

const scenarios = {
  async "initialize with form: accept"() {
    await session("form-accept", FORM, [], async (h) => {
      const { stopReason, said, approach } = await demoByForm(
        h,
        accept({ answer: "balanced" }),
        accept({ answer: "keep it small" }),
      );
      check(stopReason === "end_turn", stopReason);
      check(said.includes("Approach: balanced\nNotes: keep it small\n"), said);
      const schema = approach.params.requestedSchema;
      check(schema.type === "object", "requestedSchema.type");
      check(JSON.stringify(schema.required) === '["answer"]', "required");
      check(approach.params.sessionId === h.sessionId, "sessionId");
      check(typeof approach.params.toolCallId === "string", "toolCallId");
    });
  },

  async "form: decline"() {
    await session("form-decline", FORM, [], async (h) => {
      const { said } = await demoByForm(h, { action: "decline" });
      check(said.includes("Approach: no answer (ASK_DECLINED"), said);
    });
  },

  async "form: cancel"() {
    await session("form-cancel", FORM, [], async (h) => {
      const { said } = await demoByForm(h, { action: "cancel" });
      check(said.includes("Approach: no answer (ASK_CANCELLED"), said);
    });
  },

  async "form: JSON-RPC error"() {
    await session("form-error", FORM, [], async (h) => {
      const turn = within(h.prompt("go"), "the prompt");
      const request = await h.inbox.next("elicitation/create");
      request.reject(new acp.RequestError(-32603, "Internal error", { why: "test" }));
      const { stopReason } = await turn;
      check(stopReason === "end_turn", stopReason);
      check(h.said().includes("PROVIDER_FAILED"), h.said());
      check(h.said().includes("-32603"), h.said());
    });
  },

  async "form: empty answer asked again, then cancelled"() {
    await session("form-empty", FORM, [], async (h) => {
      const turn = within(h.prompt("go"), "the prompt");
      const messages = [];
      for (let i = 0; i < 3; i++) {
        const request = await h.inbox.next("elicitation/create");
        messages.push(request.params.message);
        request.resolve(accept({}));
      }
      await turn;
      check(h.said().includes("Approach: no answer (ASK_CANCELLED"), h.said());
      check(messages[0] === "How should I approach this?", messages[0]);
      check(messages[1].startsWith("That answer was empty"), messages[1]);
      check(messages[2] === messages[1], "the same note twice");
    });
  },

  async "three questions in one form: an array field for the multi-select"() {
    await session("form-three-questions", FORM, ["--agent", "interop/agents.py:three_questions"], async (h) => {
      const turn = within(h.prompt("plan it"), "the prompt");
      const form = await h.inbox.next("elicitation/create");
      const schema = form.params.requestedSchema;
      check(JSON.stringify(Object.keys(schema.properties)) ===
        '["q1","q1_custom","q2","q2_custom","q3"]', Object.keys(schema.properties).join(","));
      const features = schema.properties.q2;
      check(features.type === "array", `q2 type ${features.type}`);
      check(features.minItems === 1 && features.maxItems === 4, JSON.stringify(features));
      const consts = features.items.anyOf.map((option) => option.const).join(",");
      check(consts === "Auth,Billing,Search,_other", consts);
      check(schema.properties.q1.oneOf.length === 3, "q1 oneOf");
      check(JSON.stringify(schema.required) === '["q1","q2","q3"]', JSON.stringify(schema.required));
      check(form.params.message.startsWith("Please answer these 3 questions:"), form.params.message);
      form.resolve(accept({ q1: "SQLite", q2: ["Search", "Auth"], q2_custom: "", q3: "Ship it" }));
      const { stopReason } = await turn;
      check(stopReason === "end_turn", stopReason);
      check(h.said() === "q1: SQLite\nq2: Auth, Search\nq3: Ship it\n", JSON.stringify(h.said()));
    });
  },

  async "three questions without form: one permission request after the other"() {
    await session("none-three-questions", NONE, ["--agent", "interop/agents.py:three_questions"], async (h) => {
      const turn = within(h.prompt("plan it"), "the prompt");
      const database = await h.inbox.next("session/request_permission");
      check(database.params.toolCall.title === "Storage: Which database?", database.params.toolCall.title);
      database.resolve(selected("Postgres"));
      const features = await h.inbox.next("session/request_permission");
      const text = features.params.toolCall.content[0].content.text;
      check(text.includes("this client can take one here"), text);
      features.resolve(selected("Search"));
      await turn; // the free-form question waits in the chat
      check(h.said().includes("**Notes**: Anything else?"), h.said());
      const before = h.said().length;
      await within(h.prompt("Ship it"), "the answering prompt");
      const said = h.said().slice(before);
      check(said === "q1: Postgres\nq2: Search\nq3: Ship it\n", JSON.stringify(said));
    });
  },

  async "form advertised, but -32601: fallbacks with one warning"() {
    const stderr = await session("form-refused", FORM, [], async (h) => {
      const turn = within(h.prompt("go"), "the prompt");
      (await h.inbox.next("elicitation/create")).reject(
        acp.RequestError.methodNotFound("elicitation/create"),
      );
      const permission = await h.inbox.next("session/request_permission");
      permission.resolve({ outcome: { outcome: "selected", optionId: "quick" } });
      const { stopReason } = await turn;
      check(stopReason === "end_turn", stopReason);
      check(h.said().includes("Approach: quick\n"), h.said());
      check(h.said().includes("**Notes**: Anything I should keep in mind?"), h.said());
    });
    check(logs(stderr, "acp.form_elicitation_refused").length === 1, "one warning");
  },

  async "initialize without elicitation: permission and conversation fallbacks"() {
    await session("none-fallbacks", NONE, [], async (h) => {
      const turn = within(h.prompt("fix the bug"), "the prompt");
      const permission = await h.inbox.next("session/request_permission");
      const options = permission.params.options.map((o) => `${o.optionId}:${o.kind}`);
      check(
        options.join(",") === "quick:allow_once,balanced:allow_once,thorough:allow_once",
        options.join(","),
      );
      const text = permission.params.toolCall.content[0].content.text;
      check(text.includes("- **Quick fix**: The smallest change that works\n- **Balanced**"), text);
      check(text.includes("write your own"), text);
      permission.resolve({ outcome: { outcome: "selected", optionId: "thorough" } });
      const first = await turn;
      check(first.stopReason === "end_turn", first.stopReason);
      check(h.said().includes("**Notes**: Anything I should keep in mind?"), h.said());
      const before = h.said().length;
      const second = await within(h.prompt("keep it small"), "the answering prompt");
      check(second.stopReason === "end_turn", second.stopReason);
      check(h.said().slice(before) === "Notes: keep it small\n", h.said().slice(before));
    });
  },

  async "initialize with elicitation {}: the same fallbacks"() {
    await session("empty-capability", EMPTY, [], async (h) => {
      const turn = within(h.prompt("go"), "the prompt");
      const permission = await h.inbox.next("session/request_permission");
      permission.resolve({ outcome: { outcome: "cancelled" } });
      await turn;
      check(h.said().includes("Approach: no answer (ASK_CANCELLED"), h.said());
    });
  },

  async "conversation: session/cancel while the question waits"() {
    await session("conversation-cancel", NONE, [], async (h) => {
      const turn = within(h.prompt("go"), "the prompt");
      (await h.inbox.next("session/request_permission")).resolve({
        outcome: { outcome: "selected", optionId: "quick" },
      });
      await turn;
      await h.ctx.notify(acp.methods.agent.session.cancel, { sessionId: h.sessionId });
      const before = h.said().length;
      const next = within(h.prompt("hello again"), "the next prompt");
      (await h.inbox.next("session/request_permission")).resolve({
        outcome: { outcome: "cancelled" },
      });
      await next;
      const after = h.said().slice(before);
      check(after.includes("You asked: hello again"), after);
    });
  },

  async "session/cancel mid-question"() {
    const stderr = await session("session-cancel", FORM, [], async (h) => {
      const turn = within(h.prompt("go"), "the prompt");
      const request = await h.inbox.next("elicitation/create");
      const withdrawn = new Promise((resolve) => request.signal.addEventListener("abort", resolve));
      await h.ctx.notify(acp.methods.agent.session.cancel, { sessionId: h.sessionId });
      await within(withdrawn, "$/cancel_request for the elicitation");
      request.reject(request.signal.reason); // the SDK's -32800
      const { stopReason } = await turn;
      check(stopReason === "cancelled", stopReason);
    });
    check(logs(stderr, "acp.late_response_ignored").length === 0, "no late answer");
    check(logs(stderr, "acp.cancel_acknowledged").length === 1, "one acknowledgement");
  },

  async "the SDK's $/cancel_request for a prompt"() {
    await session("cancel-request-prompt", FORM, [], async (h) => {
      const controller = new AbortController();
      const turn = within(h.prompt("go", { cancellationSignal: controller.signal }), "the prompt");
      const request = await h.inbox.next("elicitation/create");
      const withdrawn = new Promise((resolve) => request.signal.addEventListener("abort", resolve));
      controller.abort();
      await within(withdrawn, "$/cancel_request for the elicitation");
      request.reject(request.signal.reason);
      const { stopReason } = await turn;
      check(stopReason === "cancelled", stopReason);
    });
  },

  async "late answers after an agent-side abort"() {
    const stderr = await session("late-answer", FORM, ["--agent", "interop/agents.py:abort_agent"], async (h) => {
      const turn = within(h.prompt("go"), "the prompt");
      const first = await h.inbox.next("elicitation/create");
      const second = await h.inbox.next("elicitation/create");
      const [early, late] = first.params.message === "First?" ? [first, second] : [second, first];
      const withdrawn = new Promise((resolve) => early.signal.addEventListener("abort", resolve));
      late.resolve(accept({ answer: "two" }));
      await within(withdrawn, "$/cancel_request for the first question");
      early.resolve(accept({ answer: "one, too late" })); // a human's late answer
      const { stopReason } = await turn;
      check(stopReason === "end_turn", stopReason);
      check(h.said().includes("first: ASK_ABORTED; second: two"), h.said());
      // A second run acknowledges the cancel the way the spec says: not a late answer.
      const again = within(h.prompt("again"), "the second prompt");
      const a = await h.inbox.next("elicitation/create");
      const b = await h.inbox.next("elicitation/create");
      const [early2, late2] = a.params.message === "First?" ? [a, b] : [b, a];
      const withdrawn2 = new Promise((resolve) => early2.signal.addEventListener("abort", resolve));
      late2.resolve(accept({ answer: "three" }));
      await within(withdrawn2, "$/cancel_request again");
      early2.resolve({ action: "cancel" });
      await again;
    });
    const late = logs(stderr, "acp.late_response_ignored");
    check(late.length === 1 && late[0].level === "warning", JSON.stringify(late));
    const acks = logs(stderr, "acp.cancel_acknowledged");
    check(acks.length === 1 && acks[0].level === "debug", JSON.stringify(acks));
  },

  async "-32601 to session/request_permission: questions with options in the chat"() {
    const stderr = await session(
      "permission-refused",
      NONE,
      [],
      async (h) => {
        const first = await within(h.prompt("fix the bug"), "the prompt");
        check(first.stopReason === "end_turn", first.stopReason);
        check(h.said().includes("2. **Balanced (Recommended)**"), h.said());
        let before = h.said().length;
        await within(h.prompt("2"), "the answering prompt");
        const answered = h.said().slice(before);
        check(answered.startsWith("Approach: balanced\n"), answered);
        check(answered.includes("**Notes**: Anything I should keep in mind?"), answered);
        before = h.said().length;
        await within(h.prompt("keep it small"), "the second answering prompt");
        check(h.said().slice(before) === "Notes: keep it small\n", h.said().slice(before));
      },
      { permission: false },
    );
    const refused = logs(stderr, "acp.permission_request_refused");
    check(refused.length === 1 && refused[0].level === "warning", JSON.stringify(refused));
  },

  async "a reload while a permission prompt is open: the withdrawn prompt's answer counts"() {
    const providers = mkdtempSync(join(tmpdir(), "hotseam-interop-"));
    const module = join(providers, "relay.py");
    writeFileSync(module, RELAY(1));
    try {
      const stderr = await session("reload-reask", NONE, ["--watch", providers], async (h) => {
        const turn = later(h.prompt("fix the bug"), "the prompt");
        // Like Toad, the client leaves a withdrawn prompt on screen: it never rejects it.
        const old = await h.inbox.next("session/request_permission");
        writeFileSync(module, RELAY(2));
        const reasked = await h.inbox.next("session/request_permission");
        check(old.signal.aborted, "the old prompt was withdrawn ($/cancel_request)");
        const withdrawn = new Promise((resolve) => reasked.signal.addEventListener("abort", resolve));
        old.resolve(selected("thorough")); // the human answers the prompt still on screen
        await within(withdrawn, "$/cancel_request for the question asked again");
        const { stopReason } = await turn;
        check(stopReason === "end_turn", stopReason);
        check(h.said().includes("Approach: thorough\n"), h.said());
        reasked.resolve(selected("quick")); // and then the other one: dropped
        await within(h.ctx.request(acp.methods.agent.session.close, { sessionId: h.sessionId }), "close");
      });
      check(logs(stderr, "acp.late_answer_delivered").length === 1, "delivered once");
      check(logs(stderr, "acp.answer_dropped").length === 1, "the second answer dropped");
      check(logs(stderr, "acp.late_response_ignored").length === 0, "nothing ignored");
    } finally {
      rmSync(providers, { recursive: true, force: true });
    }
  },

  async "errors name the request: an oversized prompt, an unknown session"() {
    await session("errors-with-ids", NONE, ["--max-line-bytes", "100000"], async (h) => {
      const big = await rejection(h.prompt("x".repeat(200000)), "an oversized prompt");
      check(big.code === -32600, `code ${big.code}`);
      check(String(big.data?.details).includes("more than the limit of 100000 bytes"), big.message);
      const unknown = await rejection(
        h.ctx.request(acp.methods.agent.session.prompt, {
          sessionId: "sess_unknown",
          prompt: [{ type: "text", text: "hi" }],
        }),
        "a prompt to an unknown session",
      );
      check(unknown.code === -32002, `code ${unknown.code}`);
      check(unknown.data?.sessionId === "sess_unknown", JSON.stringify(unknown.data));
      // The same code for session/close, which the SDK takes as closed already.
      await within(
        h.ctx.request(acp.methods.agent.session.close, { sessionId: "sess_unknown" }),
        "closing an unknown session",
      );
      const turn = later(h.prompt("still serving?"), "a prompt after them");
      (await h.inbox.next("session/request_permission")).resolve({ outcome: { outcome: "cancelled" } });
      const { stopReason } = await turn;
      check(stopReason === "end_turn", stopReason);
    });
  },

  async "session/close releases the session"() {
    await session("session-close", NONE, [], async (h) => {
      check(h.init.agentCapabilities.sessionCapabilities?.close !== undefined, "close advertised");
      const turn = within(h.prompt("go"), "the prompt");
      (await h.inbox.next("session/request_permission")).resolve({
        outcome: { outcome: "selected", optionId: "quick" },
      });
      await turn; // the Notes question now waits in the conversation
      await within(h.ctx.request(acp.methods.agent.session.close, { sessionId: h.sessionId }), "close");
      let refused = false;
      try {
        await within(h.prompt("answer?"), "a prompt to a closed session");
      } catch (error) {
        refused = error instanceof acp.RequestError;
      }
      check(refused, "a prompt to a closed session is an error");
      // Closing again is idempotent for the SDK (-32002 resolves).
      await within(h.ctx.request(acp.methods.agent.session.close, { sessionId: h.sessionId }), "close again");
    });
  },
};

const wanted = process.argv.slice(2);
let failed = 0;
let ran = 0;
for (const [name, run] of Object.entries(scenarios)) {
  if (wanted.length && !wanted.some((w) => name.includes(w))) continue;
  ran += 1;
  const started = Date.now();
  try {
    await run();
    console.log(`PASS  ${name}  (${Date.now() - started} ms)`);
  } catch (error) {
    failed += 1;
    console.log(`FAIL  ${name}: ${error instanceof Failure ? error.message : error?.stack ?? error}`);
  }
}
console.log(`${failed || !ran ? "FAILED" : "OK"}: ${ran - failed} passed, ${failed} failed`);
process.exit(failed || !ran ? 1 : 0);
