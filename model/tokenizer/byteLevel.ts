/**
 * GPT-2's bytes-to-unicode table: every byte maps to one printable code point, so a byte-level
 * token is a plain string in tokenizer.json. Printable Latin-1 bytes map to themselves; the other
 * 68 bytes (controls, space, 0x7f-0xa0, 0xad) map to U+0100.. in byte order ("Ġ" is the space).
 */
function buildByteToUnicode(): string[] {
  const printable: number[] = []
  for (let b = 0x21; b <= 0x7e; b++) printable.push(b)
  for (let b = 0xa1; b <= 0xac; b++) printable.push(b)
  for (let b = 0xae; b <= 0xff; b++) printable.push(b)
  const isPrintable = new Set(printable)
  const table: string[] = new Array<string>(256)
  let next = 0
  for (let b = 0; b < 256; b++) {
    table[b] = String.fromCodePoint(isPrintable.has(b) ? b : 256 + next++)
  }
  return table
}

export const BYTE_TO_UNICODE: readonly string[] = buildByteToUnicode()

export const UNICODE_TO_BYTE: ReadonlyMap<string, number> = new Map(
  BYTE_TO_UNICODE.map((ch, b) => [ch, b] as const),
)

/** Byte-level string of raw bytes (one code point per byte). */
export function bytesToByteLevel(bytes: Uint8Array): string {
  let s = ""
  for (const b of bytes) s += BYTE_TO_UNICODE[b]
  return s
}

/** Inverse of bytesToByteLevel; undefined when a code point is not in the byte alphabet. */
export function byteLevelToBytes(token: string): Uint8Array | undefined {
  const out: number[] = []
  for (const ch of token) {
    const b = UNICODE_TO_BYTE.get(ch)
    if (b === undefined) return undefined
    out.push(b)
  }
  return Uint8Array.from(out)
}
