/**
 * A strict RFC 8259 JSON reader that starts at an offset inside a longer text, stops at the end of
 * the value, and explains failures in words a model can act on, with the offset. Its messages do
 * not depend on the Node version (JSON.parse's do). Objects are Maps, so no key is special.
 */

export type JsonValue = null | boolean | number | string | JsonArray | JsonObject
export type JsonArray = ReadonlyArray<JsonValue>
export type JsonObject = ReadonlyMap<string, JsonValue>

export type JsonResult =
  | {
      readonly ok: true
      readonly value: JsonValue
      /** Offset just after the value. */
      readonly end: number
      /** Keys given twice in one object (the last value is kept), as field paths. */
      readonly duplicateKeys: ReadonlyArray<string>
    }
  | { readonly ok: false; readonly offset: number; readonly message: string }

/** Deeper nesting is refused rather than risking the stack. */
export const MAX_JSON_DEPTH = 256

class JsonError {
  constructor(
    readonly offset: number,
    readonly message: string,
  ) {}
}

const isDigit = (c: number) => c >= 0x30 && c <= 0x39
const isWhitespace = (c: number) => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d

/** A short, quoted view of the text at `offset`, for messages. */
const found = (text: string, offset: number): string => {
  if (offset >= text.length) return "the end of the reply"
  const c = text.codePointAt(offset) ?? 0
  if (c === 0x0a) return "a line break"
  if (c < 0x20) return `control character U+${c.toString(16).padStart(4, "0").toUpperCase()}`
  return JSON.stringify(String.fromCodePoint(c))
}

const isObject = (v: JsonValue): v is JsonObject => v instanceof Map
const isArray = (v: JsonValue): v is JsonArray => Array.isArray(v)

export const jsonTypeName = (v: JsonValue): string => {
  if (v === null) return "null"
  if (isArray(v)) return "an array"
  if (isObject(v)) return "an object"
  if (typeof v === "string") return "a string"
  if (typeof v === "number") return "a number"
  return v ? "true" : "false"
}

export const asObject = (v: JsonValue): JsonObject | undefined => (isObject(v) ? v : undefined)
export const asArray = (v: JsonValue): JsonArray | undefined => (isArray(v) ? v : undefined)

class Reader {
  i: number
  readonly duplicates: Array<string> = []

  constructor(
    readonly text: string,
    start: number,
  ) {
    this.i = start
  }

  fail(message: string, offset = this.i): never {
    throw new JsonError(offset, message)
  }

  code(): number {
    return this.i < this.text.length ? this.text.charCodeAt(this.i) : -1
  }

  skipWhitespace(): void {
    while (this.i < this.text.length && isWhitespace(this.text.charCodeAt(this.i))) this.i++
  }

  value(depth: number, path: string): JsonValue {
    this.skipWhitespace()
    const c = this.code()
    if (c === 0x7b) return this.object(depth + 1, path)
    if (c === 0x5b) return this.array(depth + 1, path)
    if (c === 0x22) return this.string()
    if (c === 0x2d || isDigit(c)) return this.number()
    for (const [word, v] of [
      ["true", true],
      ["false", false],
      ["null", null],
    ] as const) {
      if (this.text.startsWith(word, this.i)) {
        this.i += word.length
        return v
      }
    }
    if (c === 0x27) this.fail("strings must be in double quotes, not single quotes")
    if (c === 0x2f) this.fail("comments are not allowed in JSON")
    if (c === -1) this.fail("unexpected end of the reply; expected a value (the JSON is cut short)")
    return this.fail(`expected a value, found ${found(this.text, this.i)}`)
  }

  object(depth: number, path: string): JsonObject {
    if (depth > MAX_JSON_DEPTH) this.fail("the JSON is nested too deeply")
    this.i++ // {
    const out = new Map<string, JsonValue>()
    this.skipWhitespace()
    if (this.code() === 0x7d) {
      this.i++
      return out
    }
    for (;;) {
      this.skipWhitespace()
      const c = this.code()
      if (c === 0x7d) this.fail("trailing comma before '}'")
      if (c === -1)
        this.fail("unexpected end of the reply inside an object (the JSON is cut short)")
      if (c === 0x27) this.fail("keys must be in double quotes, not single quotes")
      if (c !== 0x22)
        this.fail(`expected a key in double quotes, found ${found(this.text, this.i)}`)
      const key = this.string()
      this.skipWhitespace()
      if (this.code() !== 0x3a) {
        this.fail(
          `expected ':' after the key ${JSON.stringify(key)}, found ${found(this.text, this.i)}`,
        )
      }
      this.i++
      const fieldPath = path === "" ? key : `${path}.${key}`
      const v = this.value(depth, fieldPath)
      if (out.has(key)) this.duplicates.push(fieldPath)
      out.set(key, v)
      this.skipWhitespace()
      const next = this.code()
      if (next === 0x2c) {
        this.i++
        continue
      }
      if (next === 0x7d) {
        this.i++
        return out
      }
      if (next === -1) {
        this.fail("unexpected end of the reply inside an object (the JSON is cut short)")
      }
      this.fail(
        `expected ',' or '}' after the value of ${JSON.stringify(key)}, found ${found(this.text, this.i)}`,
      )
    }
  }

  array(depth: number, path: string): JsonArray {
    if (depth > MAX_JSON_DEPTH) this.fail("the JSON is nested too deeply")
    this.i++ // [
    const out: Array<JsonValue> = []
    this.skipWhitespace()
    if (this.code() === 0x5d) {
      this.i++
      return out
    }
    for (;;) {
      this.skipWhitespace()
      if (this.code() === 0x5d) this.fail("trailing comma before ']'")
      out.push(this.value(depth, `${path}[${out.length}]`))
      this.skipWhitespace()
      const next = this.code()
      if (next === 0x2c) {
        this.i++
        continue
      }
      if (next === 0x5d) {
        this.i++
        return out
      }
      if (next === -1) {
        this.fail("unexpected end of the reply inside an array (the JSON is cut short)")
      }
      this.fail(`expected ',' or ']' in an array, found ${found(this.text, this.i)}`)
    }
  }

  string(): string {
    const start = this.i
    this.i++ // "
    let out = ""
    let run = this.i
    for (;;) {
      if (this.i >= this.text.length)
        this.fail("unterminated string (no closing double quote)", start)
      const c = this.text.charCodeAt(this.i)
      if (c === 0x22) {
        out += this.text.slice(run, this.i)
        this.i++
        return out
      }
      if (c < 0x20) {
        this.fail(
          c === 0x0a
            ? "raw line break inside a string; write it as \\n"
            : c === 0x09
              ? "raw tab inside a string; write it as \\t"
              : `raw control character U+${c.toString(16).padStart(4, "0").toUpperCase()} inside a string; escape it as \\u${c.toString(16).padStart(4, "0")}`,
        )
      }
      if (c !== 0x5c) {
        this.i++
        continue
      }
      out += this.text.slice(run, this.i)
      const e = this.text[this.i + 1]
      const simple: Record<string, string> = {
        '"': '"',
        "\\": "\\",
        "/": "/",
        b: "\b",
        f: "\f",
        n: "\n",
        r: "\r",
        t: "\t",
      }
      if (e !== undefined && simple[e] !== undefined) {
        out += simple[e]
        this.i += 2
      } else if (e === "u") {
        const hex = this.text.slice(this.i + 2, this.i + 6)
        if (!/^[0-9a-fA-F]{4}$/.test(hex)) {
          this.fail("invalid \\u escape; it takes exactly four hex digits")
        }
        out += String.fromCharCode(Number.parseInt(hex, 16))
        this.i += 6
      } else if (e === undefined) {
        this.fail("unterminated string (no closing double quote)", start)
      } else {
        this.fail(
          `invalid escape \\${e} in a string; valid escapes are \\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX`,
        )
      }
      run = this.i
    }
  }

  number(): number {
    const m = /-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y
    m.lastIndex = this.i
    const hit = m.exec(this.text)
    if (hit === null) this.fail(`invalid number, found ${found(this.text, this.i)}`)
    const end = this.i + hit[0].length
    const after = end < this.text.length ? this.text.charCodeAt(end) : -1
    if (isDigit(after) || after === 0x2e || after === 0x65 || after === 0x45) {
      this.fail("invalid number (leading zero, or a malformed fraction or exponent)")
    }
    this.i = end
    return Number(hit[0])
  }
}

/** Reads one JSON value starting at `start` (leading whitespace allowed); never throws. */
export const readJson = (text: string, start = 0): JsonResult => {
  const reader = new Reader(text, start)
  try {
    const value = reader.value(0, "")
    return { ok: true, value, end: reader.i, duplicateKeys: reader.duplicates }
  } catch (e) {
    if (e instanceof JsonError) return { ok: false, offset: e.offset, message: e.message }
    throw e
  }
}

/** 1-based line and column of `offset` in `text`. */
export const lineColumn = (text: string, offset: number): { line: number; column: number } => {
  let line = 1
  let lineStart = 0
  const end = Math.min(offset, text.length)
  for (let i = 0; i < end; i++) {
    if (text.charCodeAt(i) === 0x0a) {
      line++
      lineStart = i + 1
    }
  }
  return { line, column: end - lineStart + 1 }
}

/**
 * The end (exclusive) of the balanced `{…}` starting at `start`, aware of JSON strings; undefined
 * when it never closes.
 */
export const balancedEnd = (text: string, start: number): number | undefined => {
  let depth = 0
  let inString = false
  for (let i = start; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 0x5c) i++
      else if (c === 0x22) inString = false
      continue
    }
    if (c === 0x22) inString = true
    else if (c === 0x7b || c === 0x5b) depth++
    else if (c === 0x7d || c === 0x5d) {
      depth--
      if (depth === 0) return i + 1
      if (depth < 0) return undefined
    }
  }
  return undefined
}
