import fc from "fast-check"
import { describe, expect, it } from "vitest"
import type { ParsedAction } from "./format.ts"
import { DONE_TOKEN, parseShellBlock, renderShellBlockSolution, shellBlock } from "./shell-block.ts"

const run = (keystrokes: string, taskComplete = false): ParsedAction => ({
  kind: "commands",
  commands: [{ keystrokes }],
  taskComplete,
})

const malformedReason = (text: string): string => {
  const parsed = parseShellBlock(text)
  if (parsed.kind !== "malformed") throw new Error(`expected malformed, got ${parsed.kind}`)
  return parsed.reason
}

describe("shell-block parse: commands", () => {
  it("reads one ```bash block after prose", () => {
    expect(parseShellBlock("Let me look around.\n```bash\nls -la\n```")).toEqual(run("ls -la"))
  })

  it("accepts ```sh, ```shell, bare ``` and ~~~ fences, any case", () => {
    for (const open of ["```sh", "```shell", "```", "```BASH", "~~~bash", "````bash"]) {
      const close = open.replace(/[A-Za-z]+$/, "")
      expect(parseShellBlock(`${open}\npwd\n${close}`)).toEqual(run("pwd"))
    }
  })

  it("keeps a multi-line block as one command", () => {
    const text = '```bash\ncd /app\nfor f in *.py; do\n  python3 "$f"\ndone\n```'
    expect(parseShellBlock(text)).toEqual(run('cd /app\nfor f in *.py; do\n  python3 "$f"\ndone'))
  })

  it("keeps heredocs verbatim, including blank lines and indentation", () => {
    const script = "cat > x.py <<'EOF'\ndef f():\n    return 1\n\n\nprint(f())\nEOF"
    expect(parseShellBlock(`\`\`\`bash\n${script}\n\`\`\``)).toEqual(run(script))
  })

  it("turns CRLF and lone CR into LF", () => {
    expect(parseShellBlock("Run:\r\n```bash\r\necho a\r\necho b\r\n```\r\n")).toEqual(
      run("echo a\necho b"),
    )
    expect(parseShellBlock("```bash\recho a\r```")).toEqual(run("echo a"))
  })

  it("tolerates trailing spaces on fence lines and an info string after the language", () => {
    expect(parseShellBlock("```bash   \nls\n```   \n")).toEqual(run("ls"))
    expect(parseShellBlock("```bash title=list\nls\n```")).toEqual(run("ls"))
  })

  it("drops blank lines around the command but keeps inner trailing spaces", () => {
    expect(parseShellBlock("```bash\n\n\necho 'a  '  \n\n```")).toEqual(run("echo 'a  '  "))
  })

  it("ignores text after the block", () => {
    expect(
      parseShellBlock("```bash\nmake\n```\nThis builds the project; then I will test."),
    ).toEqual(run("make"))
  })

  it("removes the opening fence's indentation from the block", () => {
    expect(parseShellBlock("1. First:\n   ```bash\n   cd src\n     ls\n   ```")).toEqual(
      run("cd src\n  ls"),
    )
  })

  it("ignores blocks in other languages next to the command", () => {
    const text = "The file holds:\n```python\nprint(1)\n```\nRun it:\n```bash\npython3 x.py\n```"
    expect(parseShellBlock(text)).toEqual(run("python3 x.py"))
  })

  it("keeps a shorter fence inside a longer one as content", () => {
    const script = "cat > README.md <<'EOF'\n```bash\nls\n```\nEOF"
    expect(parseShellBlock(`\`\`\`\`bash\n${script}\n\`\`\`\``)).toEqual(run(script))
  })

  it("passes unicode through", () => {
    expect(parseShellBlock("Écrivons:\n```bash\necho 'héllo wörld 🌍 日本'\n```")).toEqual(
      run("echo 'héllo wörld 🌍 日本'"),
    )
  })
})

describe("shell-block parse: completion", () => {
  it("<|done|> alone completes", () => {
    expect(parseShellBlock(DONE_TOKEN)).toEqual({ kind: "complete" })
    expect(parseShellBlock("The tests pass now. <|done|>")).toEqual({ kind: "complete" })
    expect(parseShellBlock("<|done|>\r\n")).toEqual({ kind: "complete" })
  })

  it("<|done|> with a block runs the block, then completes", () => {
    expect(parseShellBlock("```bash\nrm -rf build\n```\n<|done|>")).toEqual(
      run("rm -rf build", true),
    )
    expect(parseShellBlock("<|done|> after this:\n```bash\nls\n```")).toEqual(run("ls", true))
  })

  it("<|done|> inside the block is removed from the command", () => {
    expect(parseShellBlock("```bash\nls\n<|done|>\n```")).toEqual(run("ls", true))
  })

  it("<|done|> with only a non-shell block completes", () => {
    expect(parseShellBlock("Result:\n```text\n42\n```\n<|done|>")).toEqual({ kind: "complete" })
  })
})

describe("shell-block parse: malformed", () => {
  it("no block and no completion", () => {
    const parsed = parseShellBlock("I think we should list the files.")
    expect(parsed).toEqual({
      kind: "malformed",
      reason: "no command block",
      feedback:
        "No command found. Reply with one ```bash block, or <|done|> when the task is complete.",
    })
    expect(malformedReason("")).toBe("no command block")
    expect(malformedReason("   \n  ")).toBe("no command block")
  })

  it("inline code is not a block", () => {
    expect(malformedReason("Run `ls -la` now.")).toBe("no command block")
    expect(malformedReason("```bash ls -la```")).toBe("no command block")
  })

  it("names a non-shell block in the feedback", () => {
    const parsed = parseShellBlock("```python\nprint(1)\n```")
    expect(parsed.kind).toBe("malformed")
    if (parsed.kind === "malformed") {
      expect(parsed.feedback).toContain("```python")
      expect(parsed.feedback).toContain("only ```bash blocks are run")
    }
  })

  it("two command blocks are ambiguous", () => {
    const parsed = parseShellBlock("```bash\nls\n```\nthen\n```bash\npwd\n```")
    expect(parsed.kind).toBe("malformed")
    if (parsed.kind === "malformed") {
      expect(parsed.reason).toBe("2 command blocks")
      expect(parsed.feedback).toContain("exactly one ```bash block")
    }
    expect(malformedReason("```bash\nls\n```\n```sh\npwd\n```\n<|done|>")).toBe("2 command blocks")
  })

  it("an unclosed fence", () => {
    const parsed = parseShellBlock("```bash\nls -la\n")
    expect(parsed.kind).toBe("malformed")
    if (parsed.kind === "malformed") {
      expect(parsed.reason).toBe("unclosed code fence")
      expect(parsed.feedback).toContain("was not closed")
    }
    expect(malformedReason("```bash\nls\n<|done|>")).toBe("unclosed code fence")
    expect(malformedReason("```bash\nls\n``")).toBe("unclosed code fence")
    expect(malformedReason("```bash\nls\n~~~")).toBe("unclosed code fence")
    expect(malformedReason("````bash\nls\n```")).toBe("unclosed code fence")
  })

  it("an empty block, even with <|done|>", () => {
    expect(malformedReason("```bash\n```")).toBe("empty command block")
    expect(malformedReason("```bash\n   \n\t\n```")).toBe("empty command block")
    expect(malformedReason("```bash\n```\n<|done|>")).toBe("empty command block")
  })

  it("feedback always says how to reply", () => {
    for (const text of ["", "```bash\n```", "```bash\nls", "```bash\na\n```\n```bash\nb\n```"]) {
      const parsed = parseShellBlock(text)
      expect(parsed.kind).toBe("malformed")
      if (parsed.kind === "malformed") expect(parsed.feedback).toContain("<|done|>")
    }
  })
})

describe("shell-block renderSolution", () => {
  const roundTrip = (script: string) => {
    const turns = renderShellBlockSolution(script)
    return turns.map((turn) => parseShellBlock(turn))
  }

  it("renders each statement as a turn and completes on the last", () => {
    const parsed = roundTrip("#!/bin/bash\nset -e\nmkdir -p out\ncd out\necho hi > a.txt\n")
    expect(parsed).toEqual([run("mkdir -p out"), run("cd out"), run("echo hi > a.txt", true)])
  })

  it("keeps heredocs, blocks and comments whole", () => {
    const script = [
      "# write the config",
      "cat > config.json <<'EOF'",
      '{"a": 1,',
      "",
      ' "b": 2}',
      "EOF",
      "if grep -q a config.json; then",
      "  echo found",
      "fi",
      "python3 - <<PY",
      "print('x')",
      "PY",
    ].join("\n")
    expect(roundTrip(script)).toEqual([
      run('# write the config\ncat > config.json <<\'EOF\'\n{"a": 1,\n\n "b": 2}\nEOF'),
      run("if grep -q a config.json; then\n  echo found\nfi"),
      run("python3 - <<PY\nprint('x')\nPY", true),
    ])
  })

  it("uses a longer fence when the script holds fences", () => {
    const script = "cat > README.md <<'EOF'\n# Demo\n```bash\nmake\n```\nEOF"
    const turns = renderShellBlockSolution(script)
    expect(turns[0]?.startsWith("````bash\n")).toBe(true)
    expect(turns.map(parseShellBlock)).toEqual([run(script, true)])
  })

  it("an empty script is a single <|done|>", () => {
    expect(renderShellBlockSolution("#!/bin/bash\n# nothing\n\n")).toEqual([DONE_TOKEN])
    expect(parseShellBlock(DONE_TOKEN)).toEqual({ kind: "complete" })
  })

  it("a script that exits runs whole from a file", () => {
    const script = "#!/bin/bash\necho hi\nexit 0\n"
    const parsed = roundTrip(script)
    expect(parsed).toHaveLength(1)
    const first = parsed[0]
    expect(first?.kind === "commands" && first.taskComplete).toBe(true)
    if (first?.kind === "commands") {
      expect(first.commands[0]?.keystrokes).toContain(script)
      expect(first.commands[0]?.keystrokes).toContain("bash /tmp/t1-solution.sh")
    }
  })
})

describe("shell-block properties", () => {
  const kinds = new Set(["commands", "complete", "malformed"])
  const fenceish = fc.constantFrom(
    "```",
    "```bash",
    "```sh",
    "~~~",
    "\n",
    "\r\n",
    "<|done|>",
    "`",
    " ",
    "ls",
    "EOF",
  )
  const texty = fc.oneof(
    fc.string(),
    fc
      .array(fc.oneof(fenceish, fc.string({ maxLength: 5 })), { maxLength: 30 })
      .map((p) => p.join("")),
  )

  it("parse never throws and returns one of the three kinds", () => {
    fc.assert(
      fc.property(texty, (text) => {
        const parsed = shellBlock.parse(text)
        expect(kinds.has(parsed.kind)).toBe(true)
        if (parsed.kind === "commands") {
          expect(parsed.commands).toHaveLength(1)
          expect(parsed.commands[0]?.keystrokes.trim()).not.toBe("")
          expect(parsed.commands[0]?.keystrokes).not.toContain("\r")
        }
        if (parsed.kind === "malformed") expect(parsed.feedback).not.toBe("")
      }),
      { numRuns: 500 },
    )
  })

  it("any non-blank command survives rendering in a block", () => {
    const line = fc
      .string({ maxLength: 20 })
      .filter((s) => !/[\r\n]/.test(s) && !s.includes("<|done|>"))
    fc.assert(
      fc.property(fc.array(line, { minLength: 1, maxLength: 6 }), (lines) => {
        const command = lines.join("\n").replace(/^(\s*\n)+|(\n\s*)+$/g, "")
        fc.pre(command.trim() !== "" && !/^\s*(`{3,}|~{3,})/m.test(command))
        expect(parseShellBlock(`Thinking.\n\`\`\`bash\n${command}\n\`\`\`\n`)).toEqual(run(command))
      }),
      { numRuns: 200 },
    )
  })
})
