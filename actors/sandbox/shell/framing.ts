import { randomBytes } from "node:crypto"

/**
 * How a command travels to bash and how its end is found in the output stream.
 *
 * The command is sent as data, not code: every byte that is not plainly safe becomes `\xHH`
 * inside one ANSI-C `$'…'` word, which `eval` then parses. So an unbalanced quote or heredoc in
 * the agent's command is a syntax error of that command (a non-zero status) and can never leave
 * bash half-way through our framing. After the command, bash prints a trailer line
 * `\n__t1_<nonce> <status>\n`; the nonce is 128 random bits, fresh for each frame, and is
 * written into the command line in two halves so that no echo of the line itself (`set -v`,
 * `set -x`) contains it.
 */

const PREFIX = "__t1_"

/** Bytes that stand for themselves inside `$'…'`; everything else is written as `\xHH`. */
const LITERAL = new Uint8Array(256)
for (const c of "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-.,/:=+@%^")
  LITERAL[c.charCodeAt(0)] = 1
const HEX = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, "0"))

/** `bytes` as one bash ANSI-C quoted word whose value is exactly those bytes (no NUL allowed). */
export const quoteAnsiC = (bytes: Uint8Array): string => {
  const parts: string[] = ["$'"]
  for (const b of bytes) parts.push(LITERAL[b] === 1 ? String.fromCharCode(b) : `\\x${HEX[b]}`)
  parts.push("'")
  return parts.join("")
}

export interface Marker {
  /** What bash prints before the trailer's numbers: `\n__t1_<nonce> `. */
  readonly needle: Uint8Array
  /** A `printf` that prints the trailer with the given numbers (shell words) to fd `fd`. */
  readonly print: (values: ReadonlyArray<string>, fd?: number) => string
}

export const newMarker = (): Marker => {
  const nonce = randomBytes(16).toString("hex")
  const [a, b] = [nonce.slice(0, 16), nonce.slice(16)]
  return {
    needle: new TextEncoder().encode(`\n${PREFIX}${nonce} `),
    print: (values, fd) => {
      const format = `'\\n${PREFIX}%s%s${" %d".repeat(values.length)}\\n'`
      const redirect = fd === undefined ? "" : ` >&${fd}`
      return `\\builtin printf ${format} ${a} ${b} ${values.join(" ")}${redirect}`
    },
  }
}

/**
 * The first lines a fresh `bash --noprofile --norc` reads. It replaces itself (same pid, so the
 * same process group) with an interactive bash without job control or line editing: an
 * interactive bash abandons the whole command line on SIGINT, like Ctrl-C in a terminal, instead
 * of carrying on with the rest of a loop or list, and survives the signal itself.
 *
 * An interactive bash keeps a "terminal" fd (a dup of its stderr at startup) and, whenever a
 * foreground job dies of a signal (`yes | head`), restores the terminal's settings and complains
 * into the command's output if that fd is not a terminal. So it starts with stderr on a pty
 * master (/dev/ptmx: terminal settings work, nothing reads it), then moves stderr to /dev/null
 * (prompts, job notices). Each command's stdout and stderr go to a private copy of the output
 * pipe, so an agent's `exec >file` cannot swallow the trailers. The ready trailer carries bash's
 * pid (= its process group: it was started through setsid) and that fd.
 */
export const prologue = (ready: Marker): string => {
  const bash = `exec "$BASH" --noprofile --norc --noediting -i +m`
  return [
    `if { : 2<>/dev/ptmx; } 2>/dev/null; then ${bash} 2<>/dev/ptmx; else ${bash} 2>/dev/null; fi`,
    "exec 2>/dev/null; set +m +H +o history; unset HISTFILE MAILCHECK PROMPT_COMMAND; PS1= PS2= PS0=",
    `exec {__t1_fd}>&1; ${ready.print(['"$$"', '"$__t1_fd"'])}; unset __t1_fd`,
    "",
  ].join("\n")
}

/**
 * The two lines that run a command. The trailer is on its own line: a timeout's SIGINT abandons
 * the command's line, and bash then reads the trailer line and reports status 130.
 */
export const commandFrame = (command: Uint8Array, end: Marker, fd: number): string =>
  `\\builtin eval -- ${quoteAnsiC(command)} </dev/null >&${fd} 2>&${fd}\n${end.print(['"$?"'], fd)}\n`

/**
 * Written after a timeout's SIGINT: whatever state bash's input was left in (the command's line
 * abandoned, or even the trailer line cut short), this line gets a trailer out.
 */
export const interruptFrame = (sync: Marker, fd: number): string => `\n${sync.print(["130"], fd)}\n`

export interface FrameHandler {
  /** Bytes that are certainly not part of a trailer, in order. */
  readonly content: (bytes: Uint8Array) => void
  /** A trailer of needle `index` with its numbers; return true to stop scanning there. */
  readonly trailer: (index: number, values: ReadonlyArray<number>) => boolean
}

const NEWLINE = 0x0a
const MAX_TRAILER = 64

/**
 * Finds trailers in a byte stream fed in arbitrary pieces. Cost is one Buffer.indexOf per needle
 * and piece; held back between pieces is at most a needle's length (a possible needle start).
 */
export class FrameScanner {
  readonly #needles: ReadonlyArray<Buffer>
  readonly #longest: number
  #carry: Buffer = Buffer.alloc(0)
  /** Inside a trailer: which needle, and the bytes after it seen so far. */
  #open: { index: number; bytes: Buffer } | undefined

  constructor(needles: ReadonlyArray<Uint8Array>) {
    this.#needles = needles.map((n) => Buffer.from(n))
    this.#longest = Math.max(...needles.map((n) => n.length))
  }

  /**
   * Scans `chunk`. Returns undefined when it was all consumed, or — when a trailer handler asked
   * to stop — the bytes after that trailer, unexamined.
   */
  feed(chunk: Uint8Array, handler: FrameHandler): Uint8Array | undefined {
    const piece = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
    let data = this.#carry.length > 0 ? Buffer.concat([this.#carry, piece]) : piece
    this.#carry = Buffer.alloc(0)
    let pos = 0
    for (;;) {
      if (this.#open !== undefined) {
        const { index, bytes } = this.#open
        const nl = data.indexOf(NEWLINE, pos)
        const end = nl === -1 ? data.length : nl
        const body = Buffer.concat([bytes, data.subarray(pos, end)])
        if (!isTrailerBody(body)) {
          // Not ours after all (cannot happen with a secret nonce): give the bytes back as output.
          this.#open = undefined
          handler.content(this.#needles[index] as Buffer)
          data = Buffer.concat([body, data.subarray(end)])
          pos = 0
          continue
        }
        if (nl === -1) {
          this.#open = { index, bytes: body }
          return undefined
        }
        this.#open = undefined
        pos = nl + 1
        const values = body.toString("latin1").split(" ").filter(Boolean).map(Number)
        if (handler.trailer(index, values)) return data.subarray(pos)
        continue
      }
      let found = -1
      let index = -1
      for (let i = 0; i < this.#needles.length; i++) {
        const at = data.indexOf(this.#needles[i] as Buffer, pos)
        if (at !== -1 && (found === -1 || at < found)) [found, index] = [at, i]
      }
      if (found === -1) {
        // A needle cut by the piece's end starts at the last newline of the final needle-length.
        const windowStart = Math.max(pos, data.length - this.#longest + 1)
        const nl = data.lastIndexOf(NEWLINE, data.length - 1)
        const keepFrom = nl >= windowStart ? nl : data.length
        if (keepFrom > pos) handler.content(data.subarray(pos, keepFrom))
        this.#carry = Buffer.from(data.subarray(keepFrom))
        return undefined
      }
      if (found > pos) handler.content(data.subarray(pos, found))
      pos = found + (this.#needles[index] as Buffer).length
      this.#open = { index, bytes: Buffer.alloc(0) }
    }
  }

  /** Bytes held back as a possible trailer start; the scanner is empty afterwards. */
  drain(): Uint8Array {
    const held = this.#open
      ? Buffer.concat([this.#needles[this.#open.index] as Buffer, this.#open.bytes, this.#carry])
      : this.#carry
    this.#carry = Buffer.alloc(0)
    this.#open = undefined
    return held
  }
}

const isTrailerBody = (body: Buffer): boolean => {
  if (body.length > MAX_TRAILER) return false
  for (const b of body) if (!(b === 0x20 || b === 0x2d || (b >= 0x30 && b <= 0x39))) return false
  return true
}
