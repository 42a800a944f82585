// A LangGraph ReAct agent (createReactAgent over @langchain/openai) whose
// model asks for two tools at once; LangGraph's ToolNode runs them
// concurrently, each as a child process (date, ls -la), and their output
// goes into the next prompt. The last line reads the clock and draws a
// random number after all of it.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { ChatOpenAI } from "@langchain/openai";
import { tool } from "@langchain/core/tools";
import { createReactAgent } from "@langchain/langgraph/prebuilt";
import { z } from "zod";

const run = promisify(execFile);
const date = tool(async () => (await run("date")).stdout.trim(), {
  name: "date", description: "the current date and time", schema: z.object({}),
});
const ls = tool(async () => (await run("ls", ["-la", "--full-time"])).stdout, {
  name: "ls", description: "list the working directory", schema: z.object({}),
});
const llm = new ChatOpenAI({
  model: "m", apiKey: "sk-test", maxRetries: 0,
  configuration: { baseURL: process.env.LLM_BASE },
});
const agent = createReactAgent({ llm, tools: [date, ls] });
const out = await agent.invoke({ messages: [{ role: "user", content: "what time is it, and what is here?" }] });
for (const m of out.messages) {
  const calls = (m.tool_calls ?? []).map((c) => c.name).join(",");
  console.log(`${m.getType()} ${calls} ${JSON.stringify(m.content)}`);
}
console.log(`t=${Date.now()} r=${Math.random().toFixed(6)}`);
