import type { Random } from "./random.ts"

/**
 * Mutations of text: lines dropped, repeated, swapped or cut; characters inserted (quotes,
 * brackets, controls, non-ASCII); numbers pushed to extremes; the text truncated.
 */

const SNIPPETS = [
  '"',
  "'",
  "[",
  "]]",
  "{",
  "}",
  ":",
  " = ",
  "- ",
  "\t",
  "\\",
  "\\u",
  "${",
  "<<",
  "&a",
  "*a",
  "!!binary ",
  "---\n",
  "\u0000",
  "\r",
  "\ufeff",
  "```",
  "\n",
  "# ",
]

type TextMutation = (rng: Random, text: string) => string

const lines = (text: string) => text.split("\n")

const TEXT_MUTATIONS: ReadonlyArray<TextMutation> = [
  (rng, t) => {
    const ls = lines(t)
    ls.splice(rng.int(ls.length), 1)
    return ls.join("\n")
  },
  (rng, t) => {
    const ls = lines(t)
    const at = rng.int(ls.length)
    ls.splice(at, 0, ls[at] ?? "")
    return ls.join("\n")
  },
  (rng, t) => {
    const ls = lines(t)
    const a = rng.int(ls.length)
    const b = rng.int(ls.length)
    ;[ls[a], ls[b]] = [ls[b] ?? "", ls[a] ?? ""]
    return ls.join("\n")
  },
  (rng, t) => t.slice(0, rng.int(t.length + 1)),
  (rng, t) => {
    const at = rng.int(t.length + 1)
    const insert = rng.bool(0.6) ? rng.pick(SNIPPETS) : rng.text(12)
    return t.slice(0, at) + insert + t.slice(at)
  },
  (rng, t) => {
    const at = rng.int(t.length + 1)
    return t.slice(0, at) + t.slice(at + rng.range(1, 12))
  },
  // a number to an extreme
  (rng, t) =>
    t.replace(/\d+(\.\d+)?/, () =>
      rng.pick(["-1", "0", "1e309", "99999999999999999999", "0.0000001", "NaN", "-0", "1_000"]),
    ),
]

export const mutateText = (rng: Random, text: string): string => {
  let out = text
  for (let n = rng.range(1, 3); n > 0; n--) out = rng.pick(TEXT_MUTATIONS)(rng, out)
  return out
}

/** UTF-8 bytes of `text` with an ill-formed sequence somewhere (a lone 0xff, a cut 3-byte char). */
export const invalidUtf8 = (rng: Random, text: string): Uint8Array => {
  const bytes = new TextEncoder().encode(text)
  const at = rng.int(bytes.length + 1)
  const bad = rng.pick([[0xff], [0xc3], [0xe2, 0x82], [0xed, 0xa0, 0x80], [0xc0, 0xaf], [0xf8]])
  const out = new Uint8Array(bytes.length + bad.length)
  out.set(bytes.subarray(0, at))
  out.set(bad, at)
  out.set(bytes.subarray(at), at + bad.length)
  return out
}
