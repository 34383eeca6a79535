/**
 * Cuts a reference solution script into the commands of agent turns, for golden and oracle
 * transcripts.
 *
 * The agent's commands run one after another in one persistent, non-interactive bash (each is
 * `eval`ed with stdin from /dev/null; cwd, variables and functions carry over). Running a script's
 * top-level statements there one by one does what `bash solve.sh` does, with a few exceptions, so:
 *
 * - A leading shebang and a preamble of `set` option lines (`set -e`, `set -euo pipefail`, …) are
 *   dropped: errexit in the persistent shell would end the shell at the first failing command.
 *   On a solution that succeeds this changes nothing.
 * - Each top-level statement is a turn (comment lines go with the statement after them); more
 *   than MAX_SOLUTION_STEPS statements are merged into that many turns, in order.
 * - A script that does something that differs in a persistent shell — `exit`, `exec`, `trap`,
 *   another `set` of errexit/nounset or of the positional parameters, `$0`, `BASH_SOURCE`, and
 *   outside function bodies `return`, `shift`, `$1`…, `$@`, `$#` (all fine inside a subshell) —
 *   or that this lexer cannot follow (unbalanced quotes, blocks or heredocs, `<<` in arithmetic,
 *   a non-bash shebang), is run whole as one turn: written to /tmp/t1-solution.sh through a
 *   quoted heredoc and run with `bash`, as `t1 tasks check` runs it.
 *
 * The statements are found by the bash lexer in lexer.ts.
 */
import { statementBoundaries, Unsupported } from "./lexer.ts"

export const MAX_SOLUTION_STEPS = 16
export const SOLUTION_FILE = "/tmp/t1-solution.sh"

export type SolutionPlan =
  /** Turns' commands in order (may be empty: nothing to run). */
  | { readonly kind: "steps"; readonly steps: ReadonlyArray<string> }
  /** The whole script as one command, and why it was not cut. */
  | { readonly kind: "whole"; readonly command: string; readonly reason: string }

const isCommentOrBlank = (line: string) => /^\s*(#.*)?$/.test(line)

const trimBlankLines = (text: string): string => {
  const lines = text.split("\n")
  while (lines.length > 0 && (lines[0] ?? "").trim() === "") lines.shift()
  while (lines.length > 0 && (lines[lines.length - 1] ?? "").trim() === "") lines.pop()
  return lines.join("\n")
}

/** Removes the shebang and the leading `set` option lines; returns undefined for a non-bash shebang. */
const stripPreamble = (script: string): string | undefined => {
  const lines = script.split("\n")
  const first = lines[0] ?? ""
  if (first.startsWith("#!")) {
    if (!/\b(ba)?sh\b/.test(first)) return undefined
    lines[0] = ""
  }
  for (let k = 0; k < lines.length; k++) {
    const line = lines[k] ?? ""
    if (isCommentOrBlank(line)) continue
    if (
      /^\s*set(\s+([-+][A-Za-z]+|pipefail|errexit|nounset|xtrace|verbose|noclobber))+\s*(#.*)?$/.test(
        line,
      ) &&
      !/\s[-+]o\s*$/.test(line.replace(/#.*$/, ""))
    ) {
      lines[k] = ""
      continue
    }
    break
  }
  return lines.join("\n")
}

/** The command that writes the whole script to a file and runs it with bash. */
export const wholeScriptCommand = (script: string): string => {
  const body = script.endsWith("\n") ? script : `${script}\n`
  const lines = new Set(body.split("\n"))
  let delimiter = "T1_SOLUTION"
  for (let k = 2; lines.has(delimiter); k++) delimiter = `T1_SOLUTION_${k}`
  return `cat > ${SOLUTION_FILE} <<'${delimiter}'\n${body}${delimiter}\nbash ${SOLUTION_FILE}`
}

/** Plans the turns of a reference solution: its statements, or the whole script at once. */
export const planSolution = (script: string, maxSteps = MAX_SOLUTION_STEPS): SolutionPlan => {
  const normalized = script.replace(/\r\n/g, "\n")
  const whole = (reason: string): SolutionPlan => ({
    kind: "whole",
    command: wholeScriptCommand(normalized),
    reason,
  })
  const src = stripPreamble(normalized)
  if (src === undefined) return whole("the script is not a bash script (shebang)")
  let boundaries: Array<number>
  try {
    boundaries = statementBoundaries(src)
  } catch (e) {
    if (e instanceof Unsupported) return whole(e.reason)
    throw e
  }
  const steps: Array<string> = []
  let pendingComments = ""
  let from = 0
  for (const to of boundaries) {
    const piece = src.slice(from, to).replace(/\n$/, "")
    from = to
    if (piece.split("\n").every(isCommentOrBlank)) {
      pendingComments += `${piece}\n`
      continue
    }
    steps.push(trimBlankLines(pendingComments + piece))
    pendingComments = ""
  }
  if (steps.length > 0 && pendingComments.trim() !== "") {
    steps[steps.length - 1] = trimBlankLines(`${steps[steps.length - 1]}\n${pendingComments}`)
  }
  const limit = Math.max(1, maxSteps)
  if (steps.length <= limit) return { kind: "steps", steps }
  // Exactly `limit` turns, their sizes differing by at most one.
  const at = (k: number) => Math.floor((k * steps.length) / limit)
  const merged = Array.from({ length: limit }, (_, k) => steps.slice(at(k), at(k + 1)).join("\n"))
  return { kind: "steps", steps: merged }
}

/** The command of each turn, in order. */
export const solutionCommands = (script: string): ReadonlyArray<string> => {
  const plan = planSolution(script)
  return plan.kind === "steps" ? plan.steps : [plan.command]
}
