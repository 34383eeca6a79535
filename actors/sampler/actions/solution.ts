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
 * The lexer knows quotes ('…', "…", $'…'), backslashes, comments, heredocs (<<, <<-, quoted
 * delimiters), $( ), ` `, ${ }, ( ), { }, if/fi, case/esac (patterns and ;; ;& ;;&),
 * for/while/until/select…done, function definitions, and lines continued by \, |, && or ||.
 */

export const MAX_SOLUTION_STEPS = 16
export const SOLUTION_FILE = "/tmp/t1-solution.sh"

export type SolutionPlan =
  /** Turns' commands in order (may be empty: nothing to run). */
  | { readonly kind: "steps"; readonly steps: ReadonlyArray<string> }
  /** The whole script as one command, and why it was not cut. */
  | { readonly kind: "whole"; readonly command: string; readonly reason: string }

type Frame =
  | { readonly kind: "param" | "dquote" | "backtick" }
  /** fn: the body of a function, where $1…, shift and return are the function's own. */
  | { readonly kind: "paren" | "brace"; readonly fn?: boolean }
  | { readonly kind: "block"; readonly closer: "fi" | "done" }
  | { readonly kind: "case"; state: "subject" | "pattern" | "body" }

interface Heredoc {
  readonly delimiter: string
  readonly stripTabs: boolean
  readonly quoted: boolean
}

/** Characters that end a word. */
const META = new Set([" ", "\t", "\n", ";", "&", "|", "<", ">", "(", ")"])
/** Characters that can be part of a bare (unquoted, unexpanded) word. */
const isBare = (c: string) => !META.has(c) && !"'\"`$\\".includes(c)

const POSITIONAL_IN_TEXT = /\$\{?(?:[0-9@*#]|BASH_SOURCE)/g
const SAFE_SET_OPTIONS = new Set(["pipefail", "xtrace", "verbose"])
/** Builtins that act on the shell itself (harmless in a subshell)… */
const SHELL_ALTERING = new Set(["exit", "return", "shift", "exec", "trap", "set", "logout"])
/** …of which these act on the function when in one. */
const FUNCTION_LOCAL = new Set(["return", "shift"])

class Unsupported {
  constructor(readonly reason: string) {}
}

/** Where top-level statements end, or why the script cannot be cut. */
const statementBoundaries = (src: string): Array<number> => {
  const n = src.length
  const stack: Array<Frame> = []
  const heredocs: Array<Heredoc> = []
  const boundaries: Array<number> = []
  let i = 0
  let cmdPos = true
  let wordStart = true
  let continued = false
  let pendingFunction = false

  const lineOf = (at: number) => src.slice(0, at).split("\n").length
  const unsupported = (what: string, at = i): never => {
    throw new Unsupported(`${what} at line ${lineOf(at)}`)
  }
  const top = () => stack[stack.length - 1]
  const inSubshell = () => stack.some((f) => f.kind === "paren" || f.kind === "backtick")
  const inFunction = () => stack.some((f) => (f.kind === "paren" || f.kind === "brace") && f.fn)
  const positional = (name: string) => {
    if (name === "0") unsupported("use of $0")
    if (!inFunction()) unsupported("use of the positional parameters")
  }

  const skipSingleQuoted = () => {
    const close = src.indexOf("'", i + 1)
    if (close < 0) unsupported("an unclosed single quote")
    i = close + 1
  }
  const skipAnsiC = () => {
    // at $'
    let j = i + 2
    while (j < n && src[j] !== "'") j += src[j] === "\\" ? 2 : 1
    if (j >= n) unsupported("an unclosed $'…' string")
    i = j + 1
  }

  /** At `$` outside single quotes. */
  const dollar = () => {
    const next = src[i + 1]
    if (next === "'") return skipAnsiC()
    if (next === "(") {
      stack.push({ kind: "paren" })
      i += 2
      cmdPos = true
      wordStart = true
      return
    }
    if (next === "{") {
      const inner = src[i + 2] ?? ""
      if (/[0-9@*]/.test(inner) || src.startsWith("#}", i + 2)) positional(inner)
      if (src.startsWith("BASH_SOURCE", i + 2)) unsupported("use of BASH_SOURCE")
      stack.push({ kind: "param" })
      i += 2
      return
    }
    if (next !== undefined && /[0-9@*#]/.test(next)) positional(next)
    if (src.startsWith("BASH_SOURCE", i + 1)) unsupported("use of BASH_SOURCE")
    i += 1
  }

  const readHeredocWord = (stripTabs: boolean) => {
    while (src[i] === " " || src[i] === "\t") i++
    let delimiter = ""
    let quoted = false
    while (i < n) {
      const c = src[i] ?? ""
      if (META.has(c)) break
      if (c === "'") {
        const close = src.indexOf("'", i + 1)
        if (close < 0) unsupported("an unclosed quote in a heredoc delimiter")
        delimiter += src.slice(i + 1, close)
        quoted = true
        i = close + 1
      } else if (c === '"') {
        let j = i + 1
        while (j < n && src[j] !== '"') {
          if (src[j] === "\\") j++
          delimiter += src[j] ?? ""
          j++
        }
        if (j >= n) unsupported("an unclosed quote in a heredoc delimiter")
        quoted = true
        i = j + 1
      } else if (c === "\\") {
        delimiter += src[i + 1] ?? ""
        quoted = true
        i += 2
      } else {
        delimiter += c
        i++
      }
    }
    if (delimiter === "") unsupported("a heredoc without a delimiter")
    heredocs.push({ delimiter, stripTabs, quoted })
  }

  /** At the start of the line after the one that named the heredocs: skips their bodies. */
  const heredocBodies = () => {
    for (const doc of heredocs.splice(0)) {
      const bodyStart = i
      for (;;) {
        if (i >= n) unsupported(`a heredoc never closed by ${doc.delimiter}`, bodyStart)
        const nl = src.indexOf("\n", i)
        const lineEnd = nl < 0 ? n : nl
        const line = src.slice(i, lineEnd)
        const candidate = doc.stripTabs ? line.replace(/^\t+/, "") : line
        if (candidate === doc.delimiter) {
          if (!doc.quoted) {
            for (const [used] of src.slice(bodyStart, i).matchAll(POSITIONAL_IN_TEXT)) {
              // In a function $1… are its arguments; $0 and BASH_SOURCE name the script anyway.
              if (!inFunction() || /^\$\{?(0|B)/.test(used)) {
                unsupported("use of the positional parameters in a heredoc", bodyStart)
              }
            }
          }
          i = nl < 0 ? n : nl + 1
          break
        }
        i = nl < 0 ? n : nl + 1
      }
    }
  }

  /** `set` in the persistent shell: fine for pipefail, xtrace and turning options off. */
  const checkSet = (argsFrom: number) => {
    const end = src.slice(argsFrom).search(/[;&|\n]/)
    const words = src
      .slice(argsFrom, end < 0 ? n : argsFrom + end)
      .trim()
      .split(/\s+/)
      .filter((a) => a !== "")
    const comment = words.findIndex((a) => a.startsWith("#"))
    const args = comment < 0 ? words : words.slice(0, comment)
    for (let k = 0; k < args.length; k++) {
      const a = args[k] ?? ""
      if (a === "-o" || a === "+o") {
        const name = args[++k] ?? ""
        if (a === "-o" && !SAFE_SET_OPTIONS.has(name)) unsupported(`set -o ${name}`)
      } else if (/^\+[A-Za-z]+$/.test(a) || /^-[xv]+$/.test(a)) {
        // harmless
      } else {
        unsupported(`set ${a}`)
      }
    }
  }

  const keyword = (word: string): boolean => {
    const frame = top()
    switch (word) {
      case "if":
        stack.push({ kind: "block", closer: "fi" })
        cmdPos = true
        return true
      case "while":
      case "until":
        stack.push({ kind: "block", closer: "done" })
        cmdPos = true
        return true
      case "for":
      case "select":
        stack.push({ kind: "block", closer: "done" })
        cmdPos = false
        return true
      case "then":
      case "else":
      case "elif":
      case "do":
      case "!":
      case "time":
      case "coproc":
        cmdPos = true
        return true
      case "fi":
      case "done":
        if (frame?.kind !== "block" || frame.closer !== word) unsupported(`an unmatched ${word}`)
        stack.pop()
        cmdPos = false
        return true
      case "case":
        stack.push({ kind: "case", state: "subject" })
        cmdPos = false
        return true
      case "esac":
        if (frame?.kind !== "case") unsupported("an unmatched esac")
        stack.pop()
        cmdPos = false
        return true
      case "function":
        pendingFunction = true
        cmdPos = false
        return true
      case "{":
        stack.push({ kind: "brace", fn: pendingFunction })
        pendingFunction = false
        cmdPos = true
        return true
      case "}":
        if (frame?.kind !== "brace") unsupported("an unmatched }")
        stack.pop()
        cmdPos = false
        return true
      default:
        return false
    }
  }

  const word = () => {
    let j = i
    while (j < n && isBare(src[j] ?? "")) j++
    const bare = src.slice(i, j)
    const delimited = j >= n || META.has(src[j] ?? "")
    const frame = top()
    if (frame?.kind === "case" && frame.state !== "body") {
      if (frame.state === "subject" && bare === "in" && delimited) frame.state = "pattern"
      else if (frame.state === "pattern" && bare === "esac" && delimited) {
        stack.pop()
        cmdPos = false
      }
      i = Math.max(j, i + 1)
      wordStart = false
      return
    }
    if (cmdPos && delimited && bare !== "" && keyword(bare)) {
      i = j
      wordStart = false
      continued = false
      return
    }
    if (cmdPos && delimited && SHELL_ALTERING.has(bare) && !inSubshell()) {
      if (bare === "set") checkSet(j)
      else if (!(FUNCTION_LOCAL.has(bare) && inFunction())) unsupported(bare)
    }
    continued = false
    // An assignment keeps the command position: `X=1 cmd`.
    if (!/^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=/.test(bare)) cmdPos = false
    // `function name {`: the body's { comes where a command would.
    if (pendingFunction) cmdPos = true
    i = Math.max(j, i + 1)
    wordStart = false
  }

  try {
    while (i < n) {
      const c = src[i] ?? ""
      const frame = top()

      if (frame?.kind === "dquote" || frame?.kind === "param") {
        if (c === "\\") i += 2
        else if (c === "$") dollar()
        else if (c === "`") {
          stack.push({ kind: "backtick" })
          cmdPos = true
          wordStart = true
          i++
        } else if (frame.kind === "dquote" && c === '"') {
          stack.pop()
          i++
        } else if (frame.kind === "param" && c === "}") {
          stack.pop()
          i++
        } else if (frame.kind === "param" && c === '"') {
          stack.push({ kind: "dquote" })
          i++
        } else if (frame.kind === "param" && c === "'") skipSingleQuoted()
        else i++
        continue
      }

      const casePattern = frame?.kind === "case" && frame.state === "pattern" ? frame : undefined
      switch (c) {
        case "\n":
          i++
          if (heredocs.length > 0) heredocBodies()
          // A continued line (…|, …&&) stays continued across blank lines and comments.
          if (stack.length === 0 && !continued && !pendingFunction) boundaries.push(i)
          cmdPos = true
          wordStart = true
          continue
        case " ":
        case "\t":
          i++
          wordStart = true
          continue
        case "#":
          if (wordStart) {
            const nl = src.indexOf("\n", i)
            i = nl < 0 ? n : nl
            continue
          }
          break
        case "\\":
          if (src[i + 1] === "\n") {
            i += 2
            continue
          }
          i += 2
          cmdPos = false
          continued = false
          wordStart = false
          continue
        case "'":
          skipSingleQuoted()
          cmdPos = false
          continued = false
          wordStart = false
          continue
        case '"':
          stack.push({ kind: "dquote" })
          i++
          cmdPos = false
          continued = false
          wordStart = false
          continue
        case "$":
          cmdPos = false
          continued = false
          wordStart = false
          dollar()
          continue
        case "`":
          if (frame?.kind === "backtick") {
            stack.pop()
            cmdPos = false
          } else {
            stack.push({ kind: "backtick" })
            cmdPos = true
          }
          i++
          continued = false
          wordStart = frame?.kind !== "backtick"
          continue
        case "(":
          continued = false
          wordStart = true
          if (casePattern !== undefined) {
            i++
            continue
          }
          if (src[i - 1] !== "=") {
            // (`x=()` is an empty array, not a function)
            let j = i + 1
            while (src[j] === " " || src[j] === "\t") j++
            if (src[j] === ")") {
              // name() — a function definition; its body follows, maybe on the next line.
              i = j + 1
              pendingFunction = true
              cmdPos = true
              continue
            }
          }
          stack.push({ kind: "paren", fn: pendingFunction })
          pendingFunction = false
          i++
          cmdPos = true
          continue
        case ")":
          wordStart = true
          continued = false
          if (casePattern !== undefined) {
            casePattern.state = "body"
            cmdPos = true
            i++
            continue
          }
          if (frame?.kind !== "paren") unsupported("an unmatched )")
          stack.pop()
          cmdPos = false
          i++
          continue
        case ";": {
          const caseEnd = src.startsWith(";;", i) || src.startsWith(";&", i)
          i += src.startsWith(";;&", i) ? 3 : caseEnd ? 2 : 1
          if (caseEnd && frame?.kind === "case") frame.state = "pattern"
          cmdPos = true
          wordStart = true
          continued = false
          continue
        }
        case "&":
          wordStart = true
          if (src.startsWith("&&", i)) {
            i += 2
            cmdPos = true
            continued = true
          } else if (src[i + 1] === ">") {
            i += src.startsWith("&>>", i) ? 3 : 2
            continued = false
          } else {
            i++
            cmdPos = true
            continued = false
          }
          continue
        case "|":
          wordStart = true
          i += src.startsWith("||", i) || src.startsWith("|&", i) ? 2 : 1
          if (casePattern === undefined) {
            cmdPos = true
            continued = true
          }
          continue
        case "<":
          wordStart = true
          continued = false
          if (src.startsWith("<<<", i)) i += 3
          else if (src.startsWith("<<", i)) {
            i += 2
            const stripTabs = src[i] === "-"
            if (stripTabs) i++
            readHeredocWord(stripTabs)
          } else if (src[i + 1] === "(") {
            stack.push({ kind: "paren" })
            i += 2
            cmdPos = true
          } else i++
          continue
        case ">":
          wordStart = true
          continued = false
          if (src[i + 1] === "(") {
            stack.push({ kind: "paren" })
            i += 2
            cmdPos = true
          } else i++
          continue
        default:
          break
      }
      if (wordStart) word()
      else {
        i++
        continued = false
      }
    }
    if (heredocs.length > 0) unsupported(`a heredoc never closed by ${heredocs[0]?.delimiter}`, n)
    const open = top()
    if (open !== undefined) unsupported(`an unclosed ${describe(open)}`, n)
    if (continued || pendingFunction) unsupported("a command continued past the end", n)
  } catch (e) {
    if (e instanceof Unsupported) throw e
    throw new Unsupported(`a lexer error: ${String(e)}`)
  }
  if (boundaries[boundaries.length - 1] !== n) boundaries.push(n)
  return boundaries
}

const describe = (frame: Frame): string => {
  switch (frame.kind) {
    case "paren":
      return "("
    case "brace":
      return "{"
    case "param":
      return "${"
    case "dquote":
      return 'double quote (")'
    case "backtick":
      return "backquote (`)"
    case "block":
      return `block (missing ${frame.closer})`
    case "case":
      return "case (missing esac)"
  }
}

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
