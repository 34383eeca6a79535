import fc from "fast-check"
import { describe, expect, it } from "vitest"
import type { ParsedAction } from "./format.ts"
import { balancedEnd } from "./json.ts"
import {
  DEFAULT_DURATION_SEC,
  parseTerminusJson,
  renderTerminusSolution,
  SOLUTION_DURATION_SEC,
  terminusJson,
  tmuxKey,
  translateKeystrokes,
} from "./terminus-json.ts"

const reply = (fields: Record<string, unknown>) => JSON.stringify(fields)

const malformed = (text: string): { reason: string; feedback: string } => {
  const parsed = parseTerminusJson(text)
  if (parsed.kind !== "malformed")
    throw new Error(`expected malformed, got ${JSON.stringify(parsed)}`)
  return parsed
}

const commandsOf = (parsed: ParsedAction) => {
  if (parsed.kind !== "commands")
    throw new Error(`expected commands, got ${JSON.stringify(parsed)}`)
  return parsed
}

describe("terminus-json parse: valid replies", () => {
  it("reads a full reply", () => {
    const text = reply({
      analysis: "Empty directory.",
      plan: "List, then build.",
      commands: [
        { keystrokes: "ls -la\n", duration: 0.1 },
        { keystrokes: "make\n", duration: 30 },
      ],
      task_complete: false,
    })
    expect(parseTerminusJson(text)).toEqual({
      kind: "commands",
      commands: [
        { keystrokes: "ls -la\n", durationSec: 0.1 },
        { keystrokes: "make\n", durationSec: 30 },
      ],
      taskComplete: false,
      analysis: "Empty directory.",
      plan: "List, then build.",
    })
  })

  it("defaults duration to 1.0 and task_complete to false; analysis and plan are optional", () => {
    expect(parseTerminusJson('{"commands": [{"keystrokes": "pwd\\n"}]}')).toEqual({
      kind: "commands",
      commands: [{ keystrokes: "pwd\n", durationSec: DEFAULT_DURATION_SEC }],
      taskComplete: false,
    })
  })

  it("accepts pretty-printed JSON with CRLF line ends", () => {
    const text =
      '{\r\n  "analysis": "a",\r\n  "commands": [\r\n    {"keystrokes": "ls\\n", "duration": 0.5}\r\n  ]\r\n}\r\n'
    expect(commandsOf(parseTerminusJson(text)).commands).toEqual([
      { keystrokes: "ls\n", durationSec: 0.5 },
    ])
  })

  it("keeps keystrokes literal: multi-line, heredocs, escapes, unicode", () => {
    const keystrokes = "cat > a.py <<'EOF'\nprint(\"héllo 🌍\\t\")\nEOF\n"
    const parsed = commandsOf(parseTerminusJson(reply({ commands: [{ keystrokes, duration: 1 }] })))
    expect(parsed.commands[0]?.keystrokes).toBe(keystrokes)
    const escaped =
      '{"commands": [{"keystrokes": "echo \\u00e9\\ud83c\\udf0d \\"q\\" \\\\ \\/\\n"}]}'
    expect(commandsOf(parseTerminusJson(escaped)).commands[0]?.keystrokes).toBe(
      'echo é🌍 "q" \\ /\n',
    )
  })

  it("accepts an empty commands list (wait) when not complete", () => {
    expect(
      parseTerminusJson('{"analysis": "waiting", "commands": [], "task_complete": false}'),
    ).toEqual({
      kind: "commands",
      commands: [],
      taskComplete: false,
      analysis: "waiting",
    })
  })

  it("accepts durations of zero and in exponent form", () => {
    const parsed = parseTerminusJson(
      '{"commands": [{"keystrokes": "", "duration": 0}, {"keystrokes": "x", "duration": 1.5e1}]}',
    )
    expect(commandsOf(parsed).commands.map((c) => c.durationSec)).toEqual([0, 15])
  })
})

describe("terminus-json parse: completion", () => {
  it("task_complete with no commands completes", () => {
    expect(
      parseTerminusJson('{"analysis": "done", "plan": "", "commands": [], "task_complete": true}'),
    ).toEqual({
      kind: "complete",
    })
    expect(parseTerminusJson('{"task_complete": true}')).toEqual({ kind: "complete" })
  })

  it("task_complete with commands runs them, then completes", () => {
    const parsed = commandsOf(
      parseTerminusJson(
        reply({ commands: [{ keystrokes: "rm -f tmp\n", duration: 0.1 }], task_complete: true }),
      ),
    )
    expect(parsed.taskComplete).toBe(true)
    expect(parsed.commands).toEqual([{ keystrokes: "rm -f tmp\n", durationSec: 0.1 }])
  })

  it("task_complete false needs commands", () => {
    const { reason, feedback } = malformed('{"analysis": "a", "task_complete": false}')
    expect(reason).toContain("commands: missing")
    expect(feedback).toContain('"task_complete"')
    expect(malformed('{"analysis": "a"}').reason).toContain("commands: missing")
  })
})

describe("terminus-json parse: wrapping", () => {
  const body = '{"analysis": "a", "commands": [{"keystrokes": "ls\\n", "duration": 0.1}]}'

  it("extracts JSON from ```json fences without warnings", () => {
    const parsed = commandsOf(parseTerminusJson(`\`\`\`json\n${body}\n\`\`\``))
    expect(parsed.commands).toEqual([{ keystrokes: "ls\n", durationSec: 0.1 }])
    expect(parsed.warnings).toBeUndefined()
  })

  it("extracts JSON from prose and warns about the extra text", () => {
    const parsed = commandsOf(
      parseTerminusJson(`Sure! Here is my answer:\n${body}\nHope this helps.`),
    )
    expect(parsed.commands).toHaveLength(1)
    expect(parsed.warnings).toEqual([
      "extra text before the JSON object was ignored",
      "extra text after the JSON object was ignored",
    ])
  })

  it("skips braces in prose before the object", () => {
    const parsed = commandsOf(parseTerminusJson(`Use \${HOME} and {a, b} then:\n${body}`))
    expect(parsed.commands).toHaveLength(1)
  })

  it("skips a non-Terminus JSON object that comes first", () => {
    const parsed = commandsOf(parseTerminusJson(`I will write {"x": 1} to c.json.\n${body}`))
    expect(parsed.analysis).toBe("a")
  })

  it("is string-aware: braces inside strings do not end the object", () => {
    const text = reply({ analysis: "}{", commands: [{ keystrokes: "awk '{print $1}' f\n" }] })
    expect(commandsOf(parseTerminusJson(`x ${text} y`)).commands[0]?.keystrokes).toBe(
      "awk '{print $1}' f\n",
    )
  })

  it("uses the first of several objects and warns about the rest", () => {
    const parsed = commandsOf(parseTerminusJson(`${body}\n${body.replace("ls", "pwd")}`))
    expect(parsed.commands[0]?.keystrokes).toBe("ls\n")
    expect(parsed.warnings).toContain("extra text after the JSON object was ignored")
  })
})

describe("terminus-json parse: keys", () => {
  it("C-c alone means Ctrl-C", () => {
    const parsed = parseTerminusJson('{"commands": [{"keystrokes": "C-c", "duration": 0.1}]}')
    expect(commandsOf(parsed).commands).toEqual([{ keystrokes: "\u0003", durationSec: 0.1 }])
  })

  it("translates tmux key names only when they are the whole keystrokes", () => {
    expect(translateKeystrokes("C-c")).toBe("\u0003")
    expect(translateKeystrokes("C-d")).toBe("\u0004")
    expect(translateKeystrokes("C-C")).toBe("\u0003")
    expect(translateKeystrokes("^C")).toBe("\u0003")
    expect(translateKeystrokes("C-c\n")).toBe("\u0003\n")
    expect(translateKeystrokes("C-z")).toBe("\u001a")
    expect(translateKeystrokes("C-[")).toBe("\u001b")
    expect(translateKeystrokes("Escape")).toBe("\u001b")
    expect(translateKeystrokes("Enter")).toBe("\n")
    expect(translateKeystrokes("Up")).toBe("\u001b[A")
    expect(translateKeystrokes("echo C-c\n")).toBe("echo C-c\n")
    expect(translateKeystrokes("C-cc")).toBe("C-cc")
    expect(translateKeystrokes("enter")).toBe("enter")
    expect(tmuxKey("C-1")).toBeUndefined()
  })
})

describe("terminus-json parse: malformed", () => {
  it("no JSON at all", () => {
    const { reason, feedback } = malformed("I will list the files with ls.")
    expect(reason).toBe("no JSON object found in the reply")
    expect(feedback).toContain('"keystrokes"')
    expect(feedback).toContain("no command was run")
    expect(malformed("").reason).toBe("no JSON object found in the reply")
  })

  it("invalid JSON names the line and column", () => {
    const text =
      '{\n  "analysis": "a",\n  "commands": [\n    {"keystrokes": "ls\\n" "duration": 1}\n  ]\n}'
    const { reason } = malformed(text)
    expect(reason).toBe(
      'invalid JSON at line 4, column 27: expected \',\' or \'}\' after the value of "keystrokes", found "\\""',
    )
  })

  it("explains the common JSON mistakes", () => {
    const cases: Array<[string, string]> = [
      ['{"commands": [{"keystrokes": "ls\n"}]}', "raw line break inside a string; write it as \\n"],
      ['{"commands": [{"keystrokes": "a\tb"}]}', "raw tab inside a string"],
      ["{'commands': []}", "keys must be in double quotes"],
      ['{"commands": [{"keystrokes": \'ls\'}]}', "strings must be in double quotes"],
      ['{"commands": [],}', "trailing comma before '}'"],
      ['{"commands": [{"keystrokes": "ls"},]}', "trailing comma before ']'"],
      ['{"commands": [{"keystrokes": "ls", "duration": .5}]}', "expected a value"],
      ['{"commands": [{"keystrokes": "ls", "duration": 01}]}', "invalid number"],
      ['{"commands": [{"keystrokes": "\\x41"}]}', "invalid escape \\x"],
      ['{"commands": [{"keystrokes": "\\u12"}]}', "invalid \\u escape"],
      ['{"commands": [ // list\n]}', "comments are not allowed"],
      ['{"commands": [{"keystrokes": "ls', "unterminated string"],
      ['{"analysis": "a", "commands": [', "cut short"],
      ['{"commands" []}', "expected ':' after the key"],
    ]
    for (const [text, expected] of cases) {
      expect({ text, reason: malformed(text).reason }).toEqual({
        text,
        reason: expect.stringContaining(expected),
      })
    }
  })

  it("wrong types name the field path", () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [
        { commands: [{ keystrokes: "a" }, { keystrokes: "b", duration: "2" }] },
        'commands[1].duration: expected a number, got a string ("2")',
      ],
      [
        { commands: [{ keystrokes: 5 }] },
        "commands[0].keystrokes: expected a string, got a number (5)",
      ],
      [{ commands: [{ duration: 1 }] }, "commands[0].keystrokes: missing"],
      [
        { commands: ["ls"] },
        'commands[0]: expected an object with "keystrokes" and "duration", got a string ("ls")',
      ],
      [{ commands: "ls" }, 'commands: expected an array, got a string ("ls")'],
      [{ commands: {} }, "commands: expected an array, got an object"],
      [
        { commands: [], task_complete: "true" },
        'task_complete: expected true or false, got a string ("true")',
      ],
      [{ commands: [], analysis: 3 }, "analysis: expected a string, got a number (3)"],
      [{ commands: [], plan: null }, "plan: expected a string, got null"],
      [
        { commands: [{ keystrokes: "a", duration: -1 }] },
        "commands[0].duration: expected a non-negative number of seconds, got -1",
      ],
    ]
    for (const [fields, expected] of cases) expect(malformed(reply(fields)).reason).toBe(expected)
  })

  it("lists every error in the feedback with the expected shape", () => {
    const { feedback } = malformed(
      reply({ analysis: 1, commands: [{ keystrokes: 1 }, { keystrokes: "x", duration: true }] }),
    )
    expect(feedback).toContain("- analysis: expected a string, got a number (1)")
    expect(feedback).toContain("- commands[0].keystrokes: expected a string")
    expect(feedback).toContain("- commands[1].duration: expected a number, got true")
    expect(feedback).toContain('{"analysis": "<what you see>"')
  })

  it("reports the Terminus-looking object's error over stray braces", () => {
    const { reason } = malformed('Note {x}.\n{"commands": [{"keystrokes": "ls\n"}]}')
    expect(reason).toContain("raw line break")
  })

  it("refuses absurd nesting without overflowing", () => {
    expect(malformed(`{"commands": ${"[".repeat(100_000)}`).reason).toContain("nested too deeply")
  })
})

describe("terminus-json parse: warnings", () => {
  it("unknown fields are warnings, not errors", () => {
    const parsed = parseTerminusJson(
      reply({
        thought: "x",
        commands: [{ keystrokes: "ls\n", duration: 1, wait: true }],
        is_task_complete: false,
      }),
    )
    expect(commandsOf(parsed).warnings).toEqual([
      '"thought": unknown field, ignored',
      '"is_task_complete": unknown field, ignored',
      "commands[0].wait: unknown field, ignored",
    ])
  })

  it("duplicate keys keep the last value, with a warning", () => {
    const parsed = commandsOf(
      parseTerminusJson(
        '{"commands": [{"keystrokes": "a\\n", "keystrokes": "b\\n"}], "plan": "p"}',
      ),
    )
    expect(parsed.commands[0]?.keystrokes).toBe("b\n")
    expect(parsed.warnings).toEqual([
      "commands[0].keystrokes: given more than once; the last value was used",
    ])
  })

  it("a complete reply can carry warnings", () => {
    expect(parseTerminusJson('Done!\n{"task_complete": true}')).toEqual({
      kind: "complete",
      warnings: ["extra text before the JSON object was ignored"],
    })
  })

  it("a __proto__ key is just an unknown field", () => {
    const parsed = commandsOf(parseTerminusJson('{"__proto__": {"x": 1}, "commands": []}'))
    expect(parsed.warnings).toEqual(['"__proto__": unknown field, ignored'])
  })
})

describe("terminus-json renderSolution", () => {
  const scripts = [
    "#!/usr/bin/env bash\nset -euo pipefail\nmkdir -p backup\ntar -czf backup/p.tar.gz project\n",
    "cat > /app/fix.py <<'EOF'\nimport sys\n\nprint(\"done\", sys.argv)\nEOF\npython3 /app/fix.py\n",
    'for f in *.log; do\n  gzip "$f"\ndone\nls | sort > list.txt\n',
    "echo only\n",
    "cd /app || exit 1\nmake\n",
  ]

  it("parses back to the planned commands, completing on the last turn", () => {
    for (const script of scripts) {
      const turns = renderTerminusSolution(script)
      const parsed = turns.map(parseTerminusJson)
      parsed.forEach((p, k) => {
        const c = commandsOf(p)
        expect(c.taskComplete).toBe(k === turns.length - 1)
        expect(c.warnings).toBeUndefined()
        expect(c.commands).toHaveLength(1)
        expect(c.commands[0]?.durationSec).toBe(SOLUTION_DURATION_SEC)
        expect(c.commands[0]?.keystrokes.endsWith("\n")).toBe(true)
      })
    }
    const first = renderTerminusSolution(scripts[1] ?? "").map(parseTerminusJson)
    expect(first.map((p) => commandsOf(p).commands[0]?.keystrokes)).toEqual([
      "cat > /app/fix.py <<'EOF'\nimport sys\n\nprint(\"done\", sys.argv)\nEOF\n",
      "python3 /app/fix.py\n",
    ])
  })

  it("an empty script completes at once", () => {
    expect(renderTerminusSolution("").map(parseTerminusJson)).toEqual([{ kind: "complete" }])
  })
})

describe("terminus-json properties", () => {
  const kinds = new Set(["commands", "complete", "malformed"])
  const jsonish = fc.oneof(
    fc.string(),
    fc.json(),
    fc
      .array(
        fc.oneof(
          fc.constantFrom(
            '{"commands": [',
            '{"keystrokes": "',
            '"duration": ',
            '"task_complete": true',
            "}",
            "]",
            "{",
            "[",
            '"',
            "\\",
            ",",
            ":",
            "\n",
            "C-c",
            "```json",
          ),
          fc.json({ maxDepth: 2 }),
          fc.string({ maxLength: 4 }),
        ),
        { maxLength: 25 },
      )
      .map((parts) => parts.join("")),
  )

  it("parse never throws and returns one of the three kinds", () => {
    fc.assert(
      fc.property(jsonish, (text) => {
        const parsed = terminusJson.parse(text)
        expect(kinds.has(parsed.kind)).toBe(true)
        if (parsed.kind === "malformed") expect(parsed.feedback).toContain(parsed.reason)
      }),
      { numRuns: 1000 },
    )
  })

  it("agrees with JSON.parse on what is valid JSON", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.json(),
          fc.dictionary(fc.string(), fc.jsonValue()).map((o) => JSON.stringify(o, null, 2)),
          fc.string().map((s) => `{${s}}`),
        ),
        (text) => {
          let valid = true
          try {
            JSON.parse(text)
          } catch {
            valid = false
          }
          const parsed = terminusJson.parse(text)
          const syntax = parsed.kind === "malformed" && parsed.reason.startsWith("invalid JSON")
          // A valid JSON object is never a syntax error; one balanced object that is not JSON always is.
          if (valid && text.trimStart().startsWith("{")) expect(syntax).toBe(false)
          else if (text.startsWith("{") && balancedEnd(text, 0) === text.length) {
            expect(syntax).toBe(true)
          }
        },
      ),
      { numRuns: 500 },
    )
  })

  it("any generated valid reply parses to its commands", () => {
    const command = fc.record({
      keystrokes: fc.string().filter((s) => translateKeystrokes(s) === s),
      duration: fc.double({ min: 0, max: 60, noNaN: true }),
    })
    fc.assert(
      fc.property(
        fc.record({
          analysis: fc.string(),
          plan: fc.string(),
          commands: fc.array(command, { minLength: 1, maxLength: 4 }),
          task_complete: fc.boolean(),
        }),
        fc.string().filter((s) => !s.includes("{")),
        (fields, prose) => {
          const parsed = commandsOf(parseTerminusJson(`${prose}${JSON.stringify(fields, null, 1)}`))
          expect(parsed.commands).toEqual(
            fields.commands.map((c) => ({ keystrokes: c.keystrokes, durationSec: c.duration })),
          )
          expect(parsed.taskComplete).toBe(fields.task_complete)
          expect(parsed.analysis).toBe(fields.analysis)
        },
      ),
      { numRuns: 300 },
    )
  })
})
