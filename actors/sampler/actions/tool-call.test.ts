import { describe, expect, it } from "vitest"
import { parseToolCalls, renderToolCallSolution } from "./tool-call.ts"

const call = (name: string, args: unknown) =>
  `<tool_call>\n${JSON.stringify({ name, arguments: args })}\n</tool_call>`

describe("tool-call action format", () => {
  it("runs bash calls in order; finish after them completes the task", () => {
    expect(parseToolCalls(`I'll look.\n${call("bash", { command: "ls -la" })}`)).toEqual({
      kind: "commands",
      commands: [{ keystrokes: "ls -la" }],
      taskComplete: false,
    })
    const both = parseToolCalls(
      `${call("bash", { command: "make" })}\n${call("bash", { command: "make test" })}\n${call("finish", {})}`,
    )
    expect(both).toEqual({
      kind: "commands",
      commands: [{ keystrokes: "make" }, { keystrokes: "make test" }],
      taskComplete: true,
    })
    expect(parseToolCalls(call("finish", {}))).toEqual({ kind: "complete" })
  })

  it("reads arguments given as JSON text, as OpenAI-style clients send them", () => {
    const text = `<tool_call>{"name": "bash", "arguments": "{\\"command\\": \\"pwd\\"}"}</tool_call>`
    expect(parseToolCalls(text)).toMatchObject({
      kind: "commands",
      commands: [{ keystrokes: "pwd" }],
    })
  })

  it("answers malformed calls with feedback instead of running anything", () => {
    for (const [text, reason] of [
      ["just text", /called no tool/],
      ["<tool_call>{not json}</tool_call>", /not JSON/],
      [call("python", { code: "1" }), /unknown tool "python"/],
      [call("bash", {}), /non-empty "command"/],
      [`${call("finish", {})}${call("bash", { command: "ls" })}`, /after finish/],
    ] as const) {
      const parsed = parseToolCalls(text)
      expect(parsed.kind).toBe("malformed")
      if (parsed.kind === "malformed") {
        expect(parsed.reason).toMatch(reason)
        expect(parsed.feedback).toContain("<tool_call>")
      }
    }
  })

  it("renders a reference solution as bash calls, the last one followed by finish", () => {
    const turns = renderToolCallSolution("cd /app\necho done > out.txt\n")
    expect(turns.length).toBeGreaterThan(0)
    const parsed = turns.map(parseToolCalls)
    expect(parsed.at(-1)).toMatchObject({ kind: "commands", taskComplete: true })
    for (const p of parsed.slice(0, -1))
      expect(p).toMatchObject({ kind: "commands", taskComplete: false })
  })
})
