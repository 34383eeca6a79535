import { Effect, Exit } from "effect"
import { describe, expect, it } from "vitest"
import {
  ACTION_FORMAT_NAMES,
  ACTION_FORMATS,
  actionFormat,
  isActionFormatName,
  shellBlock,
  shellBlockShort,
  terminusJson,
  UnknownActionFormat,
} from "./index.ts"

describe("actionFormat", () => {
  it("finds each format by its name", async () => {
    expect(await Effect.runPromise(actionFormat("shell-block"))).toBe(shellBlock)
    expect(await Effect.runPromise(actionFormat("terminus-json"))).toBe(terminusJson)
    for (const name of ACTION_FORMAT_NAMES) expect(ACTION_FORMATS[name].name).toBe(name)
  })

  it("shell-block-short acts as shell-block under a prompt of a few words", () => {
    const text = "ok\n```bash\nls -la\n```\n<|done|>"
    expect(shellBlockShort.parse(text)).toEqual(shellBlock.parse(text))
    expect(shellBlockShort.renderSolution("cd /app\nls\n")).toEqual(
      shellBlock.renderSolution("cd /app\nls\n"),
    )
    expect(shellBlockShort.systemPrompt.length).toBeLessThan(shellBlock.systemPrompt.length / 5)
    expect(shellBlockShort.systemPrompt).toContain("<|done|>")
  })

  it("fails with UnknownActionFormat naming the valid choices", async () => {
    const exit = await Effect.runPromiseExit(actionFormat("xml"))
    expect(Exit.isFailure(exit)).toBe(true)
    const error = await Effect.runPromise(Effect.flip(actionFormat("xml")))
    expect(error).toBeInstanceOf(UnknownActionFormat)
    expect(error._tag).toBe("UnknownActionFormat")
    expect(error.valid).toEqual(["shell-block", "shell-block-short", "terminus-json", "tool-call"])
    expect(error.message).toBe(
      'unknown action format "xml"; valid: shell-block, shell-block-short, terminus-json, tool-call',
    )
  })

  it("does not take inherited keys for names", () => {
    expect(isActionFormatName("toString")).toBe(false)
    expect(isActionFormatName("__proto__")).toBe(false)
  })

  it("every format has a system prompt that shows how to finish", () => {
    expect(shellBlock.systemPrompt).toContain("<|done|>")
    expect(shellBlock.systemPrompt).toContain("```bash")
    expect(terminusJson.systemPrompt).toContain('"task_complete"')
    expect(terminusJson.systemPrompt).toContain("C-c")
  })
})
