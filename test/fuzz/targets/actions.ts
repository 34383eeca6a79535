import {
  ACTION_FORMATS,
  type ActionFormat,
  type ParsedAction,
} from "../../../actors/sampler/actions/index.ts"
import { ACCEPTED, crash, type FuzzTarget, judge, REJECTED, type Verdict } from "../harness.ts"
import { type Doc, mutateDoc } from "../mutate-json.ts"
import { mutateText } from "../mutate-text.ts"
import type { Random } from "../random.ts"

/**
 * Model replies through each action format's parser: reference-solution turns the format itself
 * renders, Terminus-style JSON objects, both mutated; random text; pathological shapes (deep
 * nesting, long fence runs). parse must never throw and must return a well-formed ParsedAction —
 * commands, complete, or malformed with a reason and feedback (the typed parse error).
 */
const SCRIPT_LINES = [
  "cd /app",
  "ls -la",
  "cat > out.txt <<'EOF'\nhello\nEOF",
  'for f in *.csv; do wc -l "$f"; done',
  "python3 -c 'print(1)'",
  "echo \"a\" | sed 's/a/b/' > x",
  "if [ -f x ]; then\n  cat x\nfi",
  "```",
  "exit 0",
  "printf '%s\\n' \"$HOME\"",
  "tmux send-keys C-c",
  "<|done|>",
]

const script = (rng: Random): string =>
  Array.from({ length: rng.range(0, 6) }, () =>
    rng.bool(0.8) ? rng.pick(SCRIPT_LINES) : rng.text(30),
  ).join("\n")

const terminusObject = (rng: Random): Doc => ({
  analysis: rng.text(40),
  plan: rng.text(40),
  commands: Array.from({ length: rng.int(4) }, () => ({
    keystrokes: rng.bool(0.7)
      ? `${rng.pick(SCRIPT_LINES)}\n`
      : rng.pick(["C-c", "C-d", "Enter", "\u0003", rng.text(10)]),
    duration: rng.pick([0.1, 1, 5, 0, 60]),
  })),
  task_complete: rng.bool(0.2),
})

const pathological = (rng: Random): string => {
  const n = rng.pick([1000, 20_000, 100_000])
  return rng.pick([
    () => "[".repeat(n),
    () => '{"a":'.repeat(n / 5),
    () => "`".repeat(n),
    () => "```bash\n".repeat(n / 8),
    () => `{"commands": [${'{"keystrokes": "ls\\n"},'.repeat(n / 25)}{}]}`,
    () => '"\\u'.repeat(n / 3),
    () => "<|done|>".repeat(n / 8),
    () => `${"\\".repeat(n)}"`,
  ])()
}

const reply = (rng: Random, format: ActionFormat): string => {
  const roll = rng.int(10)
  if (roll < 3) {
    const turns = format.renderSolution(script(rng))
    const turn = rng.pick(turns)
    return rng.bool(0.3) ? turn : mutateText(rng, turn)
  }
  if (roll < 6) {
    const doc = rng.bool(0.5) ? mutateDoc(rng, terminusObject(rng)) : terminusObject(rng)
    const json = JSON.stringify(doc, null, rng.pick([0, 2]))
    const framed = rng.bool(0.3) ? `${rng.text(20)}\n${json}\n${rng.text(20)}` : json
    return rng.bool(0.4) ? mutateText(rng, framed) : framed
  }
  if (roll < 9) return rng.text(200)
  return pathological(rng)
}

const isStringList = (v: unknown): boolean =>
  v === undefined || (Array.isArray(v) && v.every((w) => typeof w === "string"))

/** A parsed action checked against the ParsedAction contract. */
const verdictOf = (a: ParsedAction): Verdict => {
  switch (a.kind) {
    case "commands": {
      const bad = a.commands.find(
        (c) =>
          typeof c.keystrokes !== "string" ||
          (c.durationSec !== undefined && !(Number.isFinite(c.durationSec) && c.durationSec >= 0)),
      )
      if (bad !== undefined) return crash(`invalid command ${JSON.stringify(bad)}`)
      if (typeof a.taskComplete !== "boolean" || !isStringList(a.warnings))
        return crash("invalid commands action")
      return ACCEPTED
    }
    case "complete":
      return isStringList(a.warnings) ? ACCEPTED : crash("invalid warnings")
    case "malformed":
      return a.reason !== "" && a.feedback !== ""
        ? REJECTED
        : crash("malformed without reason or feedback")
  }
  return crash(`unknown kind ${JSON.stringify(a)}`)
}

const actionTarget = (format: ActionFormat): FuzzTarget => ({
  name: `action ${format.name}`,
  description: `model replies (rendered turns, JSON objects, mutated, random) → ${format.name} parse`,
  make: (rng) => {
    const text = reply(rng, format)
    return {
      input: () => Buffer.from(text).toString("hex"),
      run: () => judge(() => verdictOf(format.parse(text))),
    }
  },
})

/** The reference-solution renderer reads task scripts (solve.sh) of any shape: it must not throw. */
const renderTarget = (format: ActionFormat): FuzzTarget => ({
  name: `render ${format.name}`,
  description: `solution scripts (mutated, random) → ${format.name} renderSolution, each turn parsed back`,
  make: (rng) => {
    const text = rng.bool(0.7) ? mutateText(rng, script(rng)) : rng.text(300)
    return {
      input: () => Buffer.from(text).toString("hex"),
      run: () =>
        judge(() => {
          for (const turn of format.renderSolution(text)) {
            const verdict = verdictOf(format.parse(turn))
            if (verdict.kind !== "accepted")
              return crash(`a rendered turn does not parse back: ${JSON.stringify(turn)}`)
          }
          return ACCEPTED
        }),
    }
  },
})

export const actionTargets: ReadonlyArray<FuzzTarget> = Object.values(ACTION_FORMATS).flatMap(
  (f) => [actionTarget(f), renderTarget(f)],
)
