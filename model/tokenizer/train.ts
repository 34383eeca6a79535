import { MAX_VOCAB, pairKey, pairOf } from "./bpe.ts"
import { BYTE_TO_UNICODE } from "./byteLevel.ts"
import { TokenizerTrainingError } from "./errors.ts"
import { PairMinHeap } from "./heap.ts"
import { compileSplitPattern, GPT2_PATTERN, splitText } from "./pretokenize.ts"
import { Tokenizer } from "./tokenizer.ts"

/** The chat template's special tokens, in id order after the learned vocabulary. */
export const CHAT_SPECIAL_TOKENS = [
  "<|system|>",
  "<|user|>",
  "<|assistant|>",
  "<|tool|>",
  "<|end|>",
  "<|pad|>",
] as const

export interface TrainOptions {
  /** Total ids: 256 bytes + learned merges + special tokens. An upper bound (see minFrequency). */
  readonly vocabSize: number
  /** Added tokens, given the last ids. Defaults to CHAT_SPECIAL_TOKENS. */
  readonly specialTokens?: readonly string[]
  /** Stop merging when the most frequent pair occurs fewer times than this. Default 2. */
  readonly minFrequency?: number
  /** Split regex (HF flavour). Default GPT-2's. */
  readonly pattern?: string
}

const utf8Encoder = new TextEncoder()

/**
 * Learn a GPT-2 style byte-level BPE. Ids 0..255 are the bytes (in byte order), then one id per
 * merge, then the special tokens. Each step merges the most frequent adjacent pair, ties broken
 * by the smaller (left id, right id), so training is deterministic. Pair counts are updated
 * incrementally: a merge only revisits the words that contain its pair.
 */
export function trainTokenizer(corpus: Iterable<string>, options: TrainOptions): Tokenizer {
  const specials = [...(options.specialTokens ?? CHAT_SPECIAL_TOKENS)]
  const minFrequency = Math.max(1, options.minFrequency ?? 2)
  const patternSource = options.pattern ?? GPT2_PATTERN
  const numMerges = options.vocabSize - 256 - specials.length
  if (numMerges < 0 || options.vocabSize > MAX_VOCAB) {
    throw new TokenizerTrainingError(
      `vocabSize ${options.vocabSize} must hold 256 bytes + ${specials.length} special tokens and be below ${MAX_VOCAB}`,
    )
  }
  if (new Set(specials).size !== specials.length) {
    throw new TokenizerTrainingError("special tokens must be distinct")
  }

  // 1. Pre-tokenise and count distinct pieces ("words").
  const pattern = compileSplitPattern(patternSource)
  const pieceCounts = new Map<string, number>()
  for (const text of corpus) {
    for (const piece of splitText(text, [pattern])) {
      pieceCounts.set(piece, (pieceCounts.get(piece) ?? 0) + 1)
    }
  }
  const words: number[][] = []
  const counts: number[] = []
  for (const [piece, count] of pieceCounts) {
    words.push(Array.from(utf8Encoder.encode(piece)))
    counts.push(count)
  }

  // 2. Initial pair counts and, per pair, the words that (may) contain it.
  const pairCounts = new Map<number, number>()
  const pairWords = new Map<number, Set<number>>()
  const noteWord = (key: number, w: number): void => {
    let set = pairWords.get(key)
    if (set === undefined) {
      set = new Set()
      pairWords.set(key, set)
    }
    set.add(w)
  }
  words.forEach((word, w) => {
    const c = counts[w] as number
    for (let i = 0; i + 1 < word.length; i++) {
      const key = pairKey(word[i] as number, word[i + 1] as number)
      pairCounts.set(key, (pairCounts.get(key) ?? 0) + c)
      noteWord(key, w)
    }
  })
  // max-heap on count via negation; stale entries are skipped lazily when popped
  const heap = new PairMinHeap()
  for (const [key, c] of pairCounts) heap.push(-c, key)

  // 3. Merge.
  const tokens: string[] = BYTE_TO_UNICODE.slice()
  const tokenIds = new Map<string, number>(tokens.map((t, id) => [t, id]))
  const reserved = new Set(specials)
  const forbidden = new Set<number>()
  const merges: Array<[string, string]> = []
  while (merges.length < numMerges) {
    const top = heap.pop()
    if (top === undefined) break
    const [negCount, key] = top
    const current = pairCounts.get(key) ?? 0
    if (current !== -negCount) {
      if (current > 0) heap.push(-current, key)
      continue
    }
    if (current < minFrequency) break
    const [a, b] = pairOf(key)
    const merged = (tokens[a] as string) + (tokens[b] as string)
    // a learned token must never spell a special token, or tokenizer.json would hold it twice
    if (reserved.has(merged)) {
      forbidden.add(key)
      pairCounts.delete(key)
      continue
    }
    let id = tokenIds.get(merged)
    if (id === undefined) {
      id = tokens.length
      tokens.push(merged)
      tokenIds.set(merged, id)
    }
    merges.push([tokens[a] as string, tokens[b] as string])

    const delta = new Map<number, number>()
    for (const w of pairWords.get(key) ?? []) {
      const word = words[w] as number[]
      const out: number[] = []
      for (let i = 0; i < word.length; ) {
        if (i + 1 < word.length && word[i] === a && word[i + 1] === b) {
          out.push(id)
          i += 2
        } else out.push(word[i++] as number)
      }
      if (out.length === word.length) continue // stale membership: pair no longer in the word
      const c = counts[w] as number
      for (let i = 0; i + 1 < word.length; i++) {
        const k = pairKey(word[i] as number, word[i + 1] as number)
        delta.set(k, (delta.get(k) ?? 0) - c)
      }
      for (let i = 0; i + 1 < out.length; i++) {
        const k = pairKey(out[i] as number, out[i + 1] as number)
        delta.set(k, (delta.get(k) ?? 0) + c)
        noteWord(k, w)
      }
      words[w] = out
    }
    pairWords.delete(key)
    for (const [k, d] of delta) {
      if (d === 0 || forbidden.has(k)) continue
      const next = (pairCounts.get(k) ?? 0) + d
      if (next > 0) pairCounts.set(k, next)
      else pairCounts.delete(k)
      if (d > 0) heap.push(-next, k)
    }
  }
  if (tokens.length > 256 + numMerges) {
    throw new TokenizerTrainingError("internal: more tokens than merges") // invariant, not input
  }

  const vocab = new Map(tokenIds)
  const specialTokens = new Map<string, number>()
  specials.forEach((s, i) => {
    specialTokens.set(s, tokens.length + i)
  })
  return new Tokenizer({
    vocab,
    merges,
    specialTokens,
    patterns: [patternSource],
    addPrefixSpace: false,
    normalizer: null,
    ignoreMerges: false,
  })
}
