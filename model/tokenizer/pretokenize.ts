/**
 * Pre-tokenisation: split text into pieces that BPE never merges across. The default is GPT-2's
 * pattern (contractions, letter runs, digit runs, punctuation runs, whitespace runs), exactly as
 * the Hugging Face ByteLevel pre-tokenizer applies it with use_regex: true.
 */
export const GPT2_PATTERN =
  "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

/**
 * Compile a Hugging Face (Rust `fancy-regex` / Oniguruma flavoured) split pattern for JS. The one
 * construct real tokenizers use that Node 20 lacks is a scoped case-insensitive group `(?i:...)`
 * around ASCII contractions; it is rewritten as character classes (`'[sS]`).
 */
export function compileSplitPattern(source: string): RegExp {
  let js = source
  for (;;) {
    const start = js.indexOf("(?i:")
    if (start < 0) break
    const end = js.indexOf(")", start)
    if (end < 0) break
    const body = js
      .slice(start + 4, end)
      .replace(/[A-Za-z]/g, (c) => `[${c.toLowerCase()}${c.toUpperCase()}]`)
    js = `${js.slice(0, start)}(?:${body})${js.slice(end + 1)}`
  }
  return new RegExp(js, "gu")
}

/**
 * Pieces of `text` under `patterns` (global regexes) applied in order, each to the pieces of the
 * one before (HF Sequence of `Isolated` Splits); text a pattern skips is kept as pieces.
 */
export function splitText(text: string, patterns: ReadonlyArray<RegExp>): string[] {
  let pieces = text.length > 0 ? [text] : []
  for (const pattern of patterns) pieces = pieces.flatMap((piece) => splitOnce(piece, pattern))
  return pieces
}

function splitOnce(text: string, pattern: RegExp): string[] {
  const pieces: string[] = []
  let last = 0
  pattern.lastIndex = 0
  for (const m of text.matchAll(pattern)) {
    if (m[0].length === 0) continue
    if (m.index > last) pieces.push(text.slice(last, m.index))
    pieces.push(m[0])
    last = m.index + m[0].length
  }
  if (last < text.length) pieces.push(text.slice(last))
  return pieces
}

/** Length of the well-formed UTF-8 sequence at `i`, or 0 when the byte there starts none. */
function utf8SequenceLength(bytes: Uint8Array, i: number): number {
  if (i >= bytes.length) return 0
  const b0 = bytes[i] as number
  if (b0 < 0x80) return 1
  let n: number
  let lo = 0x80
  let hi = 0xbf
  if (b0 >= 0xc2 && b0 <= 0xdf) n = 2
  else if (b0 >= 0xe0 && b0 <= 0xef) {
    n = 3
    if (b0 === 0xe0) lo = 0xa0 // no overlongs
    if (b0 === 0xed) hi = 0x9f // no surrogates
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    n = 4
    if (b0 === 0xf0) lo = 0x90
    if (b0 === 0xf4) hi = 0x8f // nothing above U+10FFFF
  } else return 0
  if (i + n > bytes.length) return 0
  const b1 = bytes[i + 1] ?? 0
  if (b1 < lo || b1 > hi) return 0
  for (let k = 2; k < n; k++) {
    const b = bytes[i + k] ?? 0
    if (b < 0x80 || b > 0xbf) return 0
  }
  return n
}

const utf8Decoder = new TextDecoder("utf-8", { ignoreBOM: true })
const utf8Encoder = new TextEncoder()

/**
 * Pieces of raw bytes. Well-formed UTF-8 runs are split exactly as `splitText` splits the decoded
 * text (so valid input tokenises as if it were a string); each maximal run of bytes that is not
 * well-formed UTF-8 is one piece of its own. The pieces concatenate to the input.
 */
export function splitBytes(bytes: Uint8Array, patterns: ReadonlyArray<RegExp>): Uint8Array[] {
  const pieces: Uint8Array[] = []
  let i = 0
  while (i < bytes.length) {
    const validStart = i
    for (let n = utf8SequenceLength(bytes, i); n > 0; n = utf8SequenceLength(bytes, i)) i += n
    if (i > validStart) {
      const text = utf8Decoder.decode(bytes.subarray(validStart, i))
      for (const piece of splitText(text, patterns)) pieces.push(utf8Encoder.encode(piece))
    }
    const invalidStart = i
    while (i < bytes.length && utf8SequenceLength(bytes, i) === 0) i++
    if (i > invalidStart) pieces.push(bytes.slice(invalidStart, i))
  }
  return pieces
}
