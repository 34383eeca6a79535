/**
 * The model's native tool calls (Hermes/Qwen style, as Qwen3's chat template lays them out):
 * the reply carries one or more `<tool_call>{"name": …, "arguments": {…}}</tool_call>` blocks.
 * Two tools: `bash` (run `command` in the sandbox's shell) and `finish` (the task is done).
 * The tools reach the model as the chat template describes tools (its `tools` variable: Qwen3
 * lists them in the system turn), and observations go back as `tool` messages (Qwen3 wraps them
 * in `<tool_response>`). Calls run in order; `finish` after `bash` calls runs them, then ends.
 */
import { solutionCommands } from "../../../tasks/solution/index.ts"
import type { ActionFormat, ParsedAction, ShellCommand } from "./format.ts"

/** The tools as JSON schema (OpenAI function style), for the template's `tools` variable. */
export const TOOL_CALL_TOOLS: ReadonlyArray<unknown> = [
  {
    type: "function",
    function: {
      name: "bash",
      description:
        "Run a bash command in the task's sandbox (a persistent shell; the working directory and variables carry over) and return its output and exit status.",
      parameters: {
        type: "object",
        properties: { command: { type: "string", description: "The command to run." } },
        required: ["command"],
      },
    },
  },
  {
    type: "function",
    function: {
      name: "finish",
      description: "Declare the task complete. Call it once the work is done and checked.",
      parameters: { type: "object", properties: {} },
    },
  },
]

/**
 * The system prompt's part: the tools and the call syntax reach the model through the chat
 * template (Qwen3 lists them with their JSON schema and the <tool_call> layout), so the prompt
 * names no template tokens (content is encoded as text; a tag here would not be the token).
 */
export const TOOL_CALL_PROMPT =
  "Act through the tools: call bash to run a command in the sandbox (one call per step; read its output before the next), and call finish when the task is complete and checked."

const CALL = /<tool_call>([\s\S]*?)<\/tool_call>/g

const malformed = (reason: string): ParsedAction => ({
  kind: "malformed",
  reason,
  feedback: `${reason}. Call a tool as <tool_call>{"name": "bash", "arguments": {"command": "..."}}</tool_call>, or {"name": "finish", "arguments": {}} when the task is complete.`,
})

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v)

export const parseToolCalls = (text: string): ParsedAction => {
  const bodies = [...text.matchAll(CALL)].map((m) => (m[1] ?? "").trim())
  if (bodies.length === 0) return malformed("Your reply called no tool")
  const commands: ShellCommand[] = []
  let finish = false
  for (const [i, body] of bodies.entries()) {
    let call: unknown
    try {
      call = JSON.parse(body)
    } catch {
      return malformed(`Tool call ${i + 1} is not JSON`)
    }
    if (!isRecord(call) || typeof call.name !== "string")
      return malformed(`Tool call ${i + 1} has no "name"`)
    let args: unknown = call.arguments ?? {}
    if (typeof args === "string") {
      try {
        args = JSON.parse(args)
      } catch {
        return malformed(`Tool call ${i + 1}: "arguments" is a string that is not JSON`)
      }
    }
    if (!isRecord(args)) return malformed(`Tool call ${i + 1}: "arguments" is not an object`)
    if (call.name === "finish") {
      finish = true
      continue
    }
    if (call.name !== "bash")
      return malformed(`Tool call ${i + 1} names an unknown tool "${call.name}"`)
    if (finish) return malformed("A bash call came after finish")
    if (typeof args.command !== "string" || args.command.trim() === "")
      return malformed(`Tool call ${i + 1}: bash needs a non-empty "command" string`)
    commands.push({ keystrokes: args.command })
  }
  if (commands.length === 0) return { kind: "complete" }
  return { kind: "commands", commands, taskComplete: finish }
}

const call = (name: string, args: Record<string, unknown>) =>
  `<tool_call>\n${JSON.stringify({ name, arguments: args })}\n</tool_call>`

export const renderToolCallSolution = (script: string): ReadonlyArray<string> => {
  const commands = solutionCommands(script)
  const finish = call("finish", {})
  if (commands.length === 0) return [finish]
  return commands.map((command, k) => {
    const turn = call("bash", { command })
    return k === commands.length - 1 ? `${turn}\n${finish}` : turn
  })
}

export const toolCall: ActionFormat = {
  name: "tool-call",
  systemPrompt: TOOL_CALL_PROMPT,
  parse: parseToolCalls,
  renderSolution: renderToolCallSolution,
  tools: TOOL_CALL_TOOLS,
  observationRole: "tool",
}
