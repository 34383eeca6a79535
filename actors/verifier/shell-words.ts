/**
 * Just enough of the POSIX shell grammar to rewrite a test script line by line without changing
 * what the lines we keep mean: words (with their quoting kept verbatim), control operators,
 * comments, backslash continuations and here-documents. It never evaluates anything; a word whose
 * meaning depends on evaluation (command substitution, backticks) is marked `dynamic`, and a line
 * that feeds a here-document carries its body verbatim.
 */

export interface Word {
  readonly kind: "word"
  /** The word exactly as written, quotes and escapes included. */
  readonly raw: string
  /** The word with quotes and escapes removed (variables left as written). */
  readonly text: string
  /** Holds `$(…)`, `<(…)` or backticks: what it stands for is only known when run. */
  readonly dynamic: boolean
}

export interface Operator {
  readonly kind: "op"
  /** `&&`, `||`, `;`, `;;`, `&`, `|`, `|&`, `(` or `)`. */
  readonly raw: string
}

export type Token = Word | Operator

/** One logical line: what runs up to an unquoted newline, continuations joined. */
export interface LogicalLine {
  readonly tokens: ReadonlyArray<Token>
  /** Offsets of the line in the script: from its first character to its newline (included). */
  readonly start: number
  readonly end: number
  /** The line opens here-documents (their bodies lie within start..end, after the newline). */
  readonly heredoc: boolean
}

export class ShellSyntaxError extends Error {}

const OPERATORS = ["&&", "||", ";;", "|&", ";", "&", "|", "(", ")"]
const BLANK = /[ \t]/
/** A redirection operator that takes the next word as its target, e.g. `>`, `2>>`, `<<`. */
export const REDIRECTION = /^(\d*|&)(>>?|<<<?-?|<>?|>&|<&|>\|)$/
/** A complete redirection, operator and target in one word: `2>&1`, `>out.log`. */
export const ATTACHED_REDIRECTION = /^(\d*|&)(>>?|<>?|>&|<&|>\|)\S/

/** Reads `$(…)` or `<(…)` starting at the `(`: returns the index after the matching `)`. */
const skipParens = (s: string, open: number): number => {
  let depth = 0
  for (let i = open; i < s.length; i++) {
    const c = s[i]
    if (c === "\\") i++
    else if (c === "'") {
      const close = s.indexOf("'", i + 1)
      if (close < 0) throw new ShellSyntaxError("unterminated single quote")
      i = close
    } else if (c === '"') i = skipDouble(s, i)
    else if (c === "(") depth++
    else if (c === ")") {
      depth--
      if (depth === 0) return i + 1
    }
  }
  throw new ShellSyntaxError("unterminated $(")
}

/** Index of the closing `"` of the double-quoted string opened at `open`. */
const skipDouble = (s: string, open: number): number => {
  for (let i = open + 1; i < s.length; i++) {
    const c = s[i]
    if (c === "\\") i++
    else if (c === '"') return i
    else if (c === "$" && s[i + 1] === "(") i = skipParens(s, i + 1) - 1
    else if (c === "`") {
      const close = s.indexOf("`", i + 1)
      if (close < 0) throw new ShellSyntaxError("unterminated backtick")
      i = close
    }
  }
  throw new ShellSyntaxError("unterminated double quote")
}

/**
 * The script's logical lines. Throws ShellSyntaxError on what it cannot read (an unterminated
 * quote, a here-document without its end), so the caller runs the script as written instead.
 */
export const logicalLines = (script: string): ReadonlyArray<LogicalLine> => {
  const s = script.replace(/\r\n/g, "\n")
  const lines: LogicalLine[] = []
  let tokens: Token[] = []
  let start = 0
  let heredocs: Array<{ readonly delimiter: string; readonly stripTabs: boolean }> = []
  let i = 0
  const endLine = (end: number, heredoc: boolean) => {
    if (tokens.length > 0 || heredoc) lines.push({ tokens, start, end, heredoc })
    tokens = []
    start = end
  }
  while (i < s.length) {
    const c = s[i] ?? ""
    if (c === "\n") {
      i++
      const opened = heredocs.length > 0
      for (const doc of heredocs) {
        // The body runs to a line that is exactly the delimiter (tabs stripped for <<-).
        for (;;) {
          if (i >= s.length) throw new ShellSyntaxError(`here-document ${doc.delimiter} not ended`)
          const eol = s.indexOf("\n", i)
          const line = s.slice(i, eol < 0 ? s.length : eol)
          i = eol < 0 ? s.length : eol + 1
          if ((doc.stripTabs ? line.replace(/^\t+/, "") : line) === doc.delimiter) break
        }
      }
      heredocs = []
      endLine(i, opened)
      continue
    }
    if (BLANK.test(c)) {
      i++
      continue
    }
    if (c === "\\" && s[i + 1] === "\n") {
      i += 2
      continue
    }
    if (c === "#") {
      // A comment runs to the end of the line; the newline itself ends the logical line.
      const eol = s.indexOf("\n", i)
      i = eol < 0 ? s.length : eol
      continue
    }
    // `&>file` redirects both streams: a word, not the `&` operator.
    const op = s.startsWith("&>", i) ? undefined : OPERATORS.find((o) => s.startsWith(o, i))
    if (op !== undefined) {
      tokens.push({ kind: "op", raw: op })
      i += op.length
      continue
    }
    // A word: runs to an unquoted blank, newline or operator character.
    const from = i
    let text = ""
    let dynamic = false
    while (i < s.length) {
      const ch = s[i] ?? ""
      if (ch === "\n" || BLANK.test(ch)) break
      if (ch === "\\") {
        if (s[i + 1] === "\n") {
          i += 2
          continue
        }
        text += s[i + 1] ?? ""
        i += 2
        continue
      }
      if (ch === "'") {
        const close = s.indexOf("'", i + 1)
        if (close < 0) throw new ShellSyntaxError("unterminated single quote")
        text += s.slice(i + 1, close)
        i = close + 1
        continue
      }
      if (ch === '"') {
        const close = skipDouble(s, i)
        const inner = s.slice(i + 1, close)
        if (/\$\(|`/.test(inner)) dynamic = true
        text += inner.replace(/\\([$`"\\\n])/g, "$1")
        i = close + 1
        continue
      }
      if ((ch === "$" || ch === "<" || ch === ">") && s[i + 1] === "(") {
        const close = skipParens(s, i + 1)
        text += s.slice(i, close)
        dynamic = true
        i = close
        continue
      }
      if (ch === "`") {
        const close = s.indexOf("`", i + 1)
        if (close < 0) throw new ShellSyntaxError("unterminated backtick")
        text += s.slice(i, close + 1)
        dynamic = true
        i = close + 1
        continue
      }
      if (ch === "$" && s[i + 1] === "{") {
        const close = s.indexOf("}", i + 2)
        if (close < 0) throw new ShellSyntaxError("unterminated ${")
        text += s.slice(i, close + 1)
        i = close + 1
        continue
      }
      const last = s[i - 1] ?? ""
      // `2>&1`, `<&3`, `>|`: the & and | belong to the redirection.
      const inRedirection =
        (ch === "&" && (last === ">" || last === "<" || (i === from && s[i + 1] === ">"))) ||
        (ch === "|" && last === ">")
      if (";&|()".includes(ch) && !inRedirection) break
      text += ch
      i++
    }
    if (i === from) throw new ShellSyntaxError(`cannot read ${JSON.stringify(s.slice(i, i + 20))}`)
    const raw = s.slice(from, i)
    const previous = tokens.at(-1)
    if (previous?.kind === "word" && /^(\d*)<<-?$/.test(previous.text)) {
      // The word after << names the here-document's delimiter (quoted: its body is literal).
      heredocs.push({ delimiter: text, stripTabs: previous.text.endsWith("-") })
    } else {
      const attached = /^(\d*)<<(-?)(.+)$/.exec(raw)
      if (attached !== null && !raw.startsWith("<<<"))
        heredocs.push({
          delimiter: (attached[3] ?? "").replace(/^(["'])(.*)\1$/, "$2"),
          stripTabs: attached[2] === "-",
        })
    }
    tokens.push({ kind: "word", raw, text, dynamic })
  }
  if (heredocs.length > 0) throw new ShellSyntaxError("here-document not ended")
  endLine(s.length, false)
  return lines
}

/** Words that open or continue compound commands rather than naming a command. */
export const RESERVED = new Set([
  "if",
  "then",
  "else",
  "elif",
  "fi",
  "do",
  "done",
  "while",
  "until",
  "!",
  "{",
  "}",
  "time",
])

/** A simple command: the words between two control operators, and where they sit in the line. */
export interface SimpleCommand {
  /** Index of its first token in the line. */
  readonly from: number
  /** Index after its last token. */
  readonly to: number
  readonly words: ReadonlyArray<Word>
}

/** The line's simple commands, in order. */
export const simpleCommands = (line: LogicalLine): ReadonlyArray<SimpleCommand> => {
  const out: SimpleCommand[] = []
  let from = 0
  let words: Word[] = []
  line.tokens.forEach((t, index) => {
    if (t.kind === "op") {
      if (words.length > 0) out.push({ from, to: index, words })
      words = []
      from = index + 1
    } else words.push(t)
  })
  if (words.length > 0) out.push({ from, to: line.tokens.length, words })
  return out
}
