// Checks one MCP Inspector CLI answer (JSON on stdin) against what hotseam mcp must say.
//
//   mcp-inspector --cli ... | node expect.mjs CHECK
//
// Exit 0 when it holds; else 1 with the reason and the answer on stderr.

const TOOLS = [
  "echo",
  "json_schema_2020_12_tool",
  "test_elicitation",
  "test_error_handling",
  "test_simple_text",
];

const checks = {
  // tools/list: every tool of the watched modules, sorted by name, each with a schema.
  "tools/list": (r) =>
    JSON.stringify(r.tools.map((t) => t.name)) === JSON.stringify(TOOLS) &&
    r.tools.every((t) => t.description && t.inputSchema?.type === "object"),
  // tools/call: the tool's output as text.
  "tools/call echo": (r) => r.isError === false && r.content[0].text === "hello",
  // A tool's failure keeps the seam's {name, code} (isError with structuredContent).
  "tools/call failing": (r) =>
    r.isError === true &&
    r.structuredContent?.name === "RuntimeError" &&
    r.structuredContent?.code === "INTERNAL",
  // The CLI advertises no elicitation: a question becomes an error the model can read.
  "tools/call asking, no elicitation": (r) =>
    r.isError === true &&
    r.structuredContent?.code === "NO_PROVIDER" &&
    r.content[0].text.includes("Ask the user in the conversation"),
};

const name = process.argv[2];
const check = checks[name];
if (!check) {
  console.error(`expect.mjs: no check named ${JSON.stringify(name)}`);
  process.exit(2);
}
let input = "";
for await (const chunk of process.stdin) input += chunk;
let answer;
try {
  answer = JSON.parse(input);
} catch {
  console.error(`not JSON: ${input.slice(0, 2000)}`);
  process.exit(1);
}
let held = false;
try {
  held = check(answer);
} catch (error) {
  console.error(String(error));
}
if (!held) console.error(JSON.stringify(answer, null, 2).slice(0, 4000));
process.exit(held ? 0 : 1);
