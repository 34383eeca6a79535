/**
 * A bash lexer that finds where a script's top-level statements end, and refuses (Unsupported)
 * what would run differently statement by statement in one persistent shell, or what it cannot
 * follow. It knows quotes ('…', "…", $'…'), backslashes, comments, heredocs (<<, <<-, quoted
 * delimiters), $( ), ` `, ${ }, ( ), { }, if/fi, case/esac (patterns and ;; ;& ;;&),
 * for/while/until/select…done, function definitions, and lines continued by \, |, && or ||.
 *
 * One pass over the text: {@link BashLexer.boundaries} reads a character at a time; inside a
 * double-quoted string or a `${…}` the character goes to {@link BashLexer.quoted}, elsewhere to
 * the step its character class names (newline, quote, paren, operator, redirection, word).
 */

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
const ASSIGNMENT = /^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=/

/** Why a script cannot be cut into statements. */
export class Unsupported {
  constructor(readonly reason: string) {}
}

const describeFrame = (frame: Frame): string => {
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

/** Where top-level statements end (offsets just past each), or Unsupported with the reason. */
export const statementBoundaries = (src: string): Array<number> => {
  try {
    return new BashLexer(src).boundaries()
  } catch (e) {
    if (e instanceof Unsupported) throw e
    throw new Unsupported(`a lexer error: ${String(e)}`)
  }
}

class BashLexer {
  private readonly n: number
  private readonly stack: Array<Frame> = []
  private readonly heredocs: Array<Heredoc> = []
  private readonly found: Array<number> = []
  private i = 0
  /** The next word is in command position (a keyword or a builtin there means something). */
  private cmdPos = true
  /** The next character starts a word (so `#` starts a comment). */
  private wordStart = true
  /** The line ends in |, && or ||: the statement goes on. */
  private continued = false
  /** `name()` or `function name` was read: its body comes next. */
  private pendingFunction = false

  constructor(private readonly src: string) {
    this.n = src.length
  }

  boundaries(): Array<number> {
    const { src, n } = this
    while (this.i < n) {
      const c = src[this.i] ?? ""
      const frame = this.top()
      if (frame?.kind === "dquote" || frame?.kind === "param") this.quoted(c, frame.kind)
      else if (!this.step(c, frame)) {
        if (this.wordStart) this.word()
        else {
          this.i++
          this.continued = false
        }
      }
    }
    this.checkClosed()
    if (this.found[this.found.length - 1] !== n) this.found.push(n)
    return this.found
  }

  // ---- state ----

  private top(): Frame | undefined {
    return this.stack[this.stack.length - 1]
  }
  private inSubshell(): boolean {
    return this.stack.some((f) => f.kind === "paren" || f.kind === "backtick")
  }
  private inFunction(): boolean {
    return this.stack.some((f) => (f.kind === "paren" || f.kind === "brace") && f.fn === true)
  }
  private lineOf(at: number): number {
    return this.src.slice(0, at).split("\n").length
  }
  private unsupported(what: string, at = this.i): never {
    throw new Unsupported(`${what} at line ${this.lineOf(at)}`)
  }
  /** After a token that is part of a word's text (quote, expansion, escaped character). */
  private inWord(): void {
    this.cmdPos = false
    this.continued = false
    this.wordStart = false
  }
  /** After a token that starts a new command (`;`, `&&`, `(`, `$(`). */
  private commandStarts(): void {
    this.cmdPos = true
    this.wordStart = true
  }

  /** At the end of the text: nothing may be left open. */
  private checkClosed(): void {
    const { n } = this
    if (this.heredocs.length > 0)
      this.unsupported(`a heredoc never closed by ${this.heredocs[0]?.delimiter}`, n)
    const open = this.top()
    if (open !== undefined) this.unsupported(`an unclosed ${describeFrame(open)}`, n)
    if (this.continued || this.pendingFunction)
      this.unsupported("a command continued past the end", n)
  }

  // ---- inside "…" and ${…} ----

  private quoted(c: string, kind: "dquote" | "param"): void {
    if (c === "\\") this.i += 2
    else if (c === "$") this.dollar()
    else if (c === "`") {
      this.stack.push({ kind: "backtick" })
      this.commandStarts()
      this.i++
    } else if (kind === "dquote" && c === '"') {
      this.stack.pop()
      this.i++
    } else if (kind === "param" && c === "}") {
      this.stack.pop()
      this.i++
    } else if (kind === "param" && c === '"') {
      this.stack.push({ kind: "dquote" })
      this.i++
    } else if (kind === "param" && c === "'") this.skipSingleQuoted()
    else this.i++
  }

  // ---- elsewhere: one step per character class; false when the character is a word's ----

  private step(c: string, frame: Frame | undefined): boolean {
    switch (c) {
      case "\n":
        this.newline()
        return true
      case " ":
      case "\t":
        this.i++
        this.wordStart = true
        return true
      case "#":
        if (!this.wordStart) return false
        this.comment()
        return true
      case "\\":
        this.backslash()
        return true
      case "'":
        this.skipSingleQuoted()
        this.inWord()
        return true
      case '"':
        this.stack.push({ kind: "dquote" })
        this.i++
        this.inWord()
        return true
      case "$":
        this.inWord()
        this.dollar()
        return true
      case "`":
        this.backtick(frame)
        return true
      case "(":
        this.openParen(frame)
        return true
      case ")":
        this.closeParen(frame)
        return true
      case ";":
        this.semicolon(frame)
        return true
      case "&":
        this.ampersand()
        return true
      case "|":
        this.pipe(frame)
        return true
      case "<":
        this.inputRedirection()
        return true
      case ">":
        this.outputRedirection()
        return true
      default:
        return false
    }
  }

  private newline(): void {
    this.i++
    if (this.heredocs.length > 0) this.heredocBodies()
    // A continued line (…|, …&&) stays continued across blank lines and comments.
    if (this.stack.length === 0 && !this.continued && !this.pendingFunction) this.found.push(this.i)
    this.commandStarts()
  }

  private comment(): void {
    const nl = this.src.indexOf("\n", this.i)
    this.i = nl < 0 ? this.n : nl
  }

  private backslash(): void {
    if (this.src[this.i + 1] === "\n") {
      this.i += 2
      return
    }
    this.i += 2
    this.inWord()
  }

  private skipSingleQuoted(): void {
    const close = this.src.indexOf("'", this.i + 1)
    if (close < 0) this.unsupported("an unclosed single quote")
    this.i = close + 1
  }

  private backtick(frame: Frame | undefined): void {
    const closing = frame?.kind === "backtick"
    if (closing) {
      this.stack.pop()
      this.cmdPos = false
    } else {
      this.stack.push({ kind: "backtick" })
      this.cmdPos = true
    }
    this.i++
    this.continued = false
    this.wordStart = !closing
  }

  /** `(`: a case pattern's, a function definition's `name()`, or a subshell. */
  private openParen(frame: Frame | undefined): void {
    const { src } = this
    this.continued = false
    this.wordStart = true
    if (frame?.kind === "case" && frame.state === "pattern") {
      this.i++
      return
    }
    // (`x=()` is an empty array, not a function)
    if (src[this.i - 1] !== "=") {
      let j = this.i + 1
      while (src[j] === " " || src[j] === "\t") j++
      if (src[j] === ")") {
        // name() — a function definition; its body follows, maybe on the next line.
        this.i = j + 1
        this.pendingFunction = true
        this.cmdPos = true
        return
      }
    }
    this.stack.push({ kind: "paren", fn: this.pendingFunction })
    this.pendingFunction = false
    this.i++
    this.cmdPos = true
  }

  /** `)`: the end of a case pattern or of a subshell. */
  private closeParen(frame: Frame | undefined): void {
    this.wordStart = true
    this.continued = false
    if (frame?.kind === "case" && frame.state === "pattern") {
      frame.state = "body"
      this.cmdPos = true
      this.i++
      return
    }
    if (frame?.kind !== "paren") this.unsupported("an unmatched )")
    this.stack.pop()
    this.cmdPos = false
    this.i++
  }

  /** `;`, or a case item's end `;;`, `;&`, `;;&`. */
  private semicolon(frame: Frame | undefined): void {
    const { src, i } = this
    const caseEnd = src.startsWith(";;", i) || src.startsWith(";&", i)
    this.i += src.startsWith(";;&", i) ? 3 : caseEnd ? 2 : 1
    if (caseEnd && frame?.kind === "case") frame.state = "pattern"
    this.commandStarts()
    this.continued = false
  }

  /** `&&` (continues the statement), `&>`/`&>>` (a redirection) or `&` (background). */
  private ampersand(): void {
    const { src, i } = this
    this.wordStart = true
    if (src.startsWith("&&", i)) {
      this.i += 2
      this.cmdPos = true
      this.continued = true
    } else if (src[i + 1] === ">") {
      this.i += src.startsWith("&>>", i) ? 3 : 2
      this.continued = false
    } else {
      this.i++
      this.cmdPos = true
      this.continued = false
    }
  }

  /** `|`, `||`, `|&`: continue the statement; in a case pattern, separate alternatives. */
  private pipe(frame: Frame | undefined): void {
    const { src, i } = this
    this.wordStart = true
    this.i += src.startsWith("||", i) || src.startsWith("|&", i) ? 2 : 1
    if (!(frame?.kind === "case" && frame.state === "pattern")) {
      this.cmdPos = true
      this.continued = true
    }
  }

  /** `<<<`, a heredoc `<<`/`<<-`, a process substitution `<(`, or `<`. */
  private inputRedirection(): void {
    const { src, i } = this
    this.wordStart = true
    this.continued = false
    if (src.startsWith("<<<", i)) this.i += 3
    else if (src.startsWith("<<", i)) {
      this.i += 2
      const stripTabs = src[this.i] === "-"
      if (stripTabs) this.i++
      this.readHeredocWord(stripTabs)
    } else if (src[i + 1] === "(") {
      this.stack.push({ kind: "paren" })
      this.i += 2
      this.cmdPos = true
    } else this.i++
  }

  /** A process substitution `>(`, or `>`. */
  private outputRedirection(): void {
    this.wordStart = true
    this.continued = false
    if (this.src[this.i + 1] === "(") {
      this.stack.push({ kind: "paren" })
      this.i += 2
      this.cmdPos = true
    } else this.i++
  }

  // ---- expansions ----

  private positional(name: string): void {
    if (name === "0") this.unsupported("use of $0")
    if (!this.inFunction()) this.unsupported("use of the positional parameters")
  }

  private skipAnsiC(): void {
    // at $'
    const { src, n } = this
    let j = this.i + 2
    while (j < n && src[j] !== "'") j += src[j] === "\\" ? 2 : 1
    if (j >= n) this.unsupported("an unclosed $'…' string")
    this.i = j + 1
  }

  /** At `$` outside single quotes: $'…', $( ), ${ }, or a parameter. */
  private dollar(): void {
    const { src, i } = this
    const next = src[i + 1]
    if (next === "'") {
      this.skipAnsiC()
      return
    }
    if (next === "(") {
      this.stack.push({ kind: "paren" })
      this.i += 2
      this.commandStarts()
      return
    }
    if (next === "{") {
      const inner = src[i + 2] ?? ""
      if (/[0-9@*]/.test(inner) || src.startsWith("#}", i + 2)) this.positional(inner)
      if (src.startsWith("BASH_SOURCE", i + 2)) this.unsupported("use of BASH_SOURCE")
      this.stack.push({ kind: "param" })
      this.i += 2
      return
    }
    if (next !== undefined && /[0-9@*#]/.test(next)) this.positional(next)
    if (src.startsWith("BASH_SOURCE", i + 1)) this.unsupported("use of BASH_SOURCE")
    this.i += 1
  }

  // ---- heredocs ----

  private readHeredocWord(stripTabs: boolean): void {
    const { src, n } = this
    while (src[this.i] === " " || src[this.i] === "\t") this.i++
    let delimiter = ""
    let quoted = false
    while (this.i < n) {
      const c = src[this.i] ?? ""
      if (META.has(c)) break
      if (c === "'") {
        const close = src.indexOf("'", this.i + 1)
        if (close < 0) this.unsupported("an unclosed quote in a heredoc delimiter")
        delimiter += src.slice(this.i + 1, close)
        quoted = true
        this.i = close + 1
      } else if (c === '"') {
        let j = this.i + 1
        while (j < n && src[j] !== '"') {
          if (src[j] === "\\") j++
          delimiter += src[j] ?? ""
          j++
        }
        if (j >= n) this.unsupported("an unclosed quote in a heredoc delimiter")
        quoted = true
        this.i = j + 1
      } else if (c === "\\") {
        delimiter += src[this.i + 1] ?? ""
        quoted = true
        this.i += 2
      } else {
        delimiter += c
        this.i++
      }
    }
    if (delimiter === "") this.unsupported("a heredoc without a delimiter")
    this.heredocs.push({ delimiter, stripTabs, quoted })
  }

  /** At the start of the line after the one that named the heredocs: skips their bodies. */
  private heredocBodies(): void {
    const { src, n } = this
    for (const doc of this.heredocs.splice(0)) {
      const bodyStart = this.i
      for (;;) {
        if (this.i >= n) this.unsupported(`a heredoc never closed by ${doc.delimiter}`, bodyStart)
        const nl = src.indexOf("\n", this.i)
        const lineEnd = nl < 0 ? n : nl
        const line = src.slice(this.i, lineEnd)
        const candidate = doc.stripTabs ? line.replace(/^\t+/, "") : line
        const next = nl < 0 ? n : nl + 1
        if (candidate === doc.delimiter) {
          if (!doc.quoted) this.checkHeredocText(src.slice(bodyStart, this.i), bodyStart)
          this.i = next
          break
        }
        this.i = next
      }
    }
  }

  /** An unquoted heredoc expands $1…: fine inside a function, not at the top. */
  private checkHeredocText(body: string, at: number): void {
    for (const [used] of body.matchAll(POSITIONAL_IN_TEXT)) {
      // In a function $1… are its arguments; $0 and BASH_SOURCE name the script anyway.
      if (!this.inFunction() || /^\$\{?(0|B)/.test(used))
        this.unsupported("use of the positional parameters in a heredoc", at)
    }
  }

  // ---- words ----

  /** `set` in the persistent shell: fine for pipefail, xtrace and turning options off. */
  private checkSet(argsFrom: number): void {
    const { src, n } = this
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
        if (a === "-o" && !SAFE_SET_OPTIONS.has(name)) this.unsupported(`set -o ${name}`)
      } else if (!(/^\+[A-Za-z]+$/.test(a) || /^-[xv]+$/.test(a))) {
        this.unsupported(`set ${a}`)
      }
    }
  }

  /** A reserved word in command position: opens or closes a block, or keeps command position. */
  private keyword(word: string): boolean {
    const frame = this.top()
    switch (word) {
      case "if":
        this.stack.push({ kind: "block", closer: "fi" })
        this.cmdPos = true
        return true
      case "while":
      case "until":
        this.stack.push({ kind: "block", closer: "done" })
        this.cmdPos = true
        return true
      case "for":
      case "select":
        this.stack.push({ kind: "block", closer: "done" })
        this.cmdPos = false
        return true
      case "then":
      case "else":
      case "elif":
      case "do":
      case "!":
      case "time":
      case "coproc":
        this.cmdPos = true
        return true
      case "fi":
      case "done":
        if (frame?.kind !== "block" || frame.closer !== word)
          this.unsupported(`an unmatched ${word}`)
        this.stack.pop()
        this.cmdPos = false
        return true
      case "case":
        this.stack.push({ kind: "case", state: "subject" })
        this.cmdPos = false
        return true
      case "esac":
        if (frame?.kind !== "case") this.unsupported("an unmatched esac")
        this.stack.pop()
        this.cmdPos = false
        return true
      case "function":
        this.pendingFunction = true
        this.cmdPos = false
        return true
      case "{":
        this.stack.push({ kind: "brace", fn: this.pendingFunction })
        this.pendingFunction = false
        this.cmdPos = true
        return true
      case "}":
        if (frame?.kind !== "brace") this.unsupported("an unmatched }")
        this.stack.pop()
        this.cmdPos = false
        return true
      default:
        return false
    }
  }

  /** A case's subject and patterns: only `in` and `esac` mean anything there. */
  private caseWord(frame: Extract<Frame, { kind: "case" }>, bare: string, delimited: boolean) {
    if (frame.state === "subject" && bare === "in" && delimited) frame.state = "pattern"
    else if (frame.state === "pattern" && bare === "esac" && delimited) {
      this.stack.pop()
      this.cmdPos = false
    }
  }

  private word(): void {
    const { src, n } = this
    let j = this.i
    while (j < n && isBare(src[j] ?? "")) j++
    const bare = src.slice(this.i, j)
    const delimited = j >= n || META.has(src[j] ?? "")
    const frame = this.top()
    const next = Math.max(j, this.i + 1)
    if (frame?.kind === "case" && frame.state !== "body") {
      this.caseWord(frame, bare, delimited)
      this.i = next
      this.wordStart = false
      return
    }
    if (this.cmdPos && delimited && bare !== "" && this.keyword(bare)) {
      this.i = j
      this.wordStart = false
      this.continued = false
      return
    }
    if (this.cmdPos && delimited && SHELL_ALTERING.has(bare) && !this.inSubshell()) {
      if (bare === "set") this.checkSet(j)
      else if (!(FUNCTION_LOCAL.has(bare) && this.inFunction())) this.unsupported(bare)
    }
    this.continued = false
    // An assignment keeps the command position: `X=1 cmd`.
    if (!ASSIGNMENT.test(bare)) this.cmdPos = false
    // `function name {`: the body's { comes where a command would.
    if (this.pendingFunction) this.cmdPos = true
    this.i = next
    this.wordStart = false
  }
}
