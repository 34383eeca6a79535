/**
 * terminus-json: the Terminus-2 format of Terminal-Bench's reference agent. The model replies with
 * `{"analysis": str, "plan": str, "commands": [{"keystrokes": str, "duration": num}],
 * "task_complete": bool}`.
 *
 * Decisions:
 * - The JSON may be wrapped in ```json fences or have prose before or after: the first top-level
 *   `{…}` that parses is used (preferring one with a Terminus field), read with a strict,
 *   string-aware JSON reader. Text around it is a warning, as in Terminus.
 * - analysis and plan may be missing; task_complete defaults to false; duration defaults to 1.0
 *   seconds and must be a non-negative finite number; keystrokes are sent literally (they usually
 *   end with "\n"). A keystrokes string that is exactly a tmux key name (C-c, C-d, ^C, Escape,
 *   Enter, Tab, Up, …), optionally followed by "\n", becomes that key's bytes: C-c → "\u0003".
 * - Completion: task_complete true → the commands of that reply still run, then the episode
 *   completes; with no commands it is `complete`. (Real Terminus asks for a confirmation turn
 *   first; we do not.)
 * - commands may be empty when the task is not complete (Terminus: "wait without taking action"),
 *   but must be present.
 * - Errors (JSON syntax with line and column, wrong types by field path such as
 *   `commands[1].duration: expected a number, got a string`, a missing commands or keystrokes)
 *   make the reply malformed; all of them are listed in the feedback with the expected shape.
 *   Unknown fields and duplicate keys are warnings.
 */

import { solutionCommands } from "../../../tasks/solution/index.ts"
import type { ActionFormat, ParsedAction, ShellCommand } from "./format.ts"
import {
  asArray,
  asObject,
  balancedEnd,
  type JsonObject,
  type JsonValue,
  jsonTypeName,
  lineColumn,
  readJson,
} from "./json.ts"

export const DEFAULT_DURATION_SEC = 1.0
/**
 * The duration given to each turn of a rendered reference solution: Terminus's advised ceiling,
 * so a sampler that waits at most `duration` gives each step time to finish.
 */
export const SOLUTION_DURATION_SEC = 60

const ROOT_FIELDS = new Set(["analysis", "plan", "commands", "task_complete"])
const COMMAND_FIELDS = new Set(["keystrokes", "duration"])
/** A candidate `{` further than this many is not tried (bounds the work on junk replies). */
const MAX_CANDIDATES = 32

const SHAPE = `{"analysis": "<what you see>", "plan": "<what you will do>", "commands": [{"keystrokes": "ls -la\\n", "duration": 0.1}], "task_complete": false}`

export const TERMINUS_JSON_PROMPT = `## How to act

Reply with one JSON object and nothing else:

{
  "analysis": "What the terminal output shows: what is done, what is left.",
  "plan": "What you will do next and why.",
  "commands": [
    {"keystrokes": "ls -la\\n", "duration": 0.1},
    {"keystrokes": "cd project\\n", "duration": 0.1}
  ],
  "task_complete": false
}

- "commands": the keystrokes to send, in order. Each "keystrokes" string is sent exactly as written: end a command with a newline (\\n) to run it. For Ctrl+C send "C-c" (and "C-d" for Ctrl+D) as the whole keystrokes string.
- "duration": seconds to wait for the command's output before the next one (default 1.0): about 0.1 for quick commands like cd or ls, longer for builds, downloads and tests, never more than 60. You can always wait more by sending {"keystrokes": "", "duration": 10}.
- "commands" may be empty to only wait.
- "task_complete": true when the task is done; the commands of that reply still run, then the task ends.
- The JSON must be valid: escape quotes, backslashes and newlines inside strings (\\", \\\\, \\n).`

/** tmux key names that Terminus models send as a whole keystrokes string. */
const NAMED_KEYS: Record<string, string> = {
  Enter: "\n",
  Escape: "\u001b",
  Tab: "\t",
  Space: " ",
  BSpace: "\u007f",
  Up: "\u001b[A",
  Down: "\u001b[B",
  Right: "\u001b[C",
  Left: "\u001b[D",
  Home: "\u001b[H",
  End: "\u001b[F",
}

/** The bytes of a tmux key name (`C-c`, `^D`, `Escape`), or undefined. */
export const tmuxKey = (name: string): string | undefined => {
  const named = NAMED_KEYS[name]
  if (named !== undefined) return named
  const ctrl = /^(?:C-|\^)([A-Za-z@[\\\]^_])$/.exec(name)?.[1]
  if (ctrl === undefined) return undefined
  return String.fromCharCode(ctrl.toUpperCase().charCodeAt(0) & 0x1f)
}

/** Keystrokes as they are sent: a whole-string key name (maybe with a trailing \n) becomes its bytes. */
export const translateKeystrokes = (keystrokes: string): string => {
  const newline = keystrokes.endsWith("\n")
  const key = tmuxKey(newline ? keystrokes.slice(0, -1) : keystrokes)
  if (key === undefined) return keystrokes
  return newline ? `${key}\n` : key
}

interface Found {
  readonly value: JsonObject
  readonly start: number
  readonly end: number
  readonly duplicateKeys: ReadonlyArray<string>
}

type Extracted =
  | { readonly kind: "found"; readonly found: Found }
  | { readonly kind: "error"; readonly reason: string }

const looksLikeTerminus = (text: string) =>
  /"(commands|keystrokes|task_complete|analysis|plan)"/.test(text)
const hasTerminusField = (o: JsonObject) => [...ROOT_FIELDS].some((f) => o.has(f))

/** The reply's JSON object: the first that parses, preferring one with a Terminus field. */
const extract = (text: string): Extracted => {
  let firstObject: Found | undefined
  let firstError: { readonly reason: string; readonly offset: number } | undefined
  let terminusError: string | undefined
  let from = 0
  for (let tried = 0; tried < MAX_CANDIDATES; tried++) {
    const start = text.indexOf("{", from)
    if (start < 0) break
    const result = readJson(text, start)
    const object = result.ok ? asObject(result.value) : undefined
    if (result.ok && object !== undefined) {
      const found = { value: object, start, end: result.end, duplicateKeys: result.duplicateKeys }
      if (hasTerminusField(object)) return { kind: "found", found }
      firstObject ??= found
      from = result.end
      continue
    }
    if (result.ok) {
      from = result.end
      continue
    }
    {
      const { line, column } = lineColumn(text, result.offset)
      const error = `invalid JSON at line ${line}, column ${column}: ${result.message}`
      firstError ??= { reason: error, offset: start }
      const end = balancedEnd(text, start)
      if (terminusError === undefined && looksLikeTerminus(text.slice(start, end ?? text.length))) {
        terminusError = error
      }
      from = end ?? start + 1
    }
  }
  if (terminusError !== undefined) return { kind: "error", reason: terminusError }
  // A syntax error before any object is likelier the reply than an object nested in it.
  if (
    firstError !== undefined &&
    (firstObject === undefined || firstError.offset < firstObject.start)
  ) {
    return { kind: "error", reason: firstError.reason }
  }
  if (firstObject !== undefined) return { kind: "found", found: firstObject }
  return { kind: "error", reason: "no JSON object found in the reply" }
}

/** Text around the object that is more than whitespace and ``` fences. */
const isExtra = (text: string) => text.replace(/```[A-Za-z]*/g, "").trim() !== ""

const malformed = (errors: ReadonlyArray<string>): ParsedAction => {
  const list = errors.map((e) => `- ${e}`).join("\n")
  return {
    kind: "malformed",
    reason: errors[0] ?? "malformed reply",
    feedback: `Your previous reply could not be used, so no command was run:\n${list}\n\nReply with one valid JSON object of this shape ("analysis" and "plan" are optional; "commands" may be empty only when "task_complete" is true or you want to wait):\n${SHAPE}`,
  }
}

const got = (v: JsonValue): string => {
  if (typeof v !== "string" && typeof v !== "number") return `got ${jsonTypeName(v)}`
  const shown = JSON.stringify(v)
  return `got ${jsonTypeName(v)} (${shown.length > 40 ? `${shown.slice(0, 37)}...` : shown})`
}

export const parseTerminusJson = (text: string): ParsedAction => {
  const extracted = extract(text)
  if (extracted.kind === "error") return malformed([extracted.reason])
  const { value: root, start, end, duplicateKeys } = extracted.found
  const errors: Array<string> = []
  const warnings: Array<string> = []
  if (isExtra(text.slice(0, start))) warnings.push("extra text before the JSON object was ignored")
  if (isExtra(text.slice(end))) warnings.push("extra text after the JSON object was ignored")
  for (const key of duplicateKeys)
    warnings.push(`${key}: given more than once; the last value was used`)
  for (const key of root.keys()) {
    if (!ROOT_FIELDS.has(key)) warnings.push(`${JSON.stringify(key)}: unknown field, ignored`)
  }

  const optionalString = (field: "analysis" | "plan"): string | undefined => {
    const v = root.get(field)
    if (v === undefined || typeof v === "string") return v
    errors.push(`${field}: expected a string, ${got(v)}`)
    return undefined
  }
  const analysis = optionalString("analysis")
  const plan = optionalString("plan")

  const complete = root.get("task_complete")
  const taskComplete = complete === true

  const commands: Array<ShellCommand> = []
  const rawCommands = root.get("commands")
  if (rawCommands === undefined) {
    if (!taskComplete) {
      errors.push('commands: missing; it is required unless "task_complete" is true')
    }
  } else {
    const list = asArray(rawCommands)
    if (list === undefined) errors.push(`commands: expected an array, ${got(rawCommands)}`)
    list?.forEach((item, k) => {
      const at = `commands[${k}]`
      const command = asObject(item)
      if (command === undefined) {
        errors.push(`${at}: expected an object with "keystrokes" and "duration", ${got(item)}`)
        return
      }
      for (const key of command.keys()) {
        if (!COMMAND_FIELDS.has(key)) warnings.push(`${at}.${key}: unknown field, ignored`)
      }
      const keystrokes = command.get("keystrokes")
      const duration = command.get("duration")
      let ok = true
      if (keystrokes === undefined) {
        errors.push(`${at}.keystrokes: missing`)
        ok = false
      } else if (typeof keystrokes !== "string") {
        errors.push(`${at}.keystrokes: expected a string, ${got(keystrokes)}`)
        ok = false
      }
      if (duration !== undefined) {
        if (typeof duration !== "number") {
          errors.push(`${at}.duration: expected a number, ${got(duration)}`)
          ok = false
        } else if (!Number.isFinite(duration) || duration < 0) {
          errors.push(`${at}.duration: expected a non-negative number of seconds, got ${duration}`)
          ok = false
        }
      }
      if (ok && typeof keystrokes === "string") {
        commands.push({
          keystrokes: translateKeystrokes(keystrokes),
          durationSec: typeof duration === "number" ? duration : DEFAULT_DURATION_SEC,
        })
      }
    })
  }

  if (complete !== undefined && typeof complete !== "boolean") {
    errors.push(`task_complete: expected true or false, ${got(complete)}`)
  }
  if (errors.length > 0) return malformed(errors)
  const extras = warnings.length > 0 ? { warnings } : {}
  if (taskComplete && commands.length === 0) return { kind: "complete", ...extras }
  return {
    kind: "commands",
    commands,
    taskComplete,
    ...(analysis !== undefined ? { analysis } : {}),
    ...(plan !== undefined ? { plan } : {}),
    ...extras,
  }
}

export const renderTerminusSolution = (script: string): ReadonlyArray<string> => {
  const commands = solutionCommands(script)
  if (commands.length === 0) {
    return [
      JSON.stringify(
        {
          analysis: "The reference solution has nothing to run.",
          plan: "Mark the task complete.",
          commands: [],
          task_complete: true,
        },
        null,
        2,
      ),
    ]
  }
  return commands.map((command, k) => {
    const last = k === commands.length - 1
    return JSON.stringify(
      {
        analysis:
          k === 0
            ? "Starting the reference solution."
            : `Step ${k} of ${commands.length} of the reference solution has run.`,
        plan: last
          ? `Run the final step (${k + 1} of ${commands.length}), then the task is complete.`
          : `Run step ${k + 1} of ${commands.length}.`,
        commands: [{ keystrokes: `${command}\n`, duration: SOLUTION_DURATION_SEC }],
        task_complete: last,
      },
      null,
      2,
    )
  })
}

export const terminusJson: ActionFormat = {
  name: "terminus-json",
  systemPrompt: TERMINUS_JSON_PROMPT,
  parse: parseTerminusJson,
  renderSolution: renderTerminusSolution,
}
