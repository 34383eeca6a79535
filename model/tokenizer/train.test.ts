import { describe, expect, it } from "vitest"
import { TokenizerTrainingError } from "./errors.ts"
import { saveTokenizerJson } from "./huggingFace.ts"
import { terminalCorpus } from "./testCorpus.ts"
import { CHAT_SPECIAL_TOKENS, trainTokenizer } from "./train.ts"

describe("trainTokenizer", () => {
  it("learns frequent words as single tokens", () => {
    const tok = trainTokenizer(terminalCorpus(), { vocabSize: 600 })
    expect(tok.encode(" user")).toHaveLength(1)
    expect(tok.encode("hello")).toHaveLength(1)
    expect(tok.vocabSize).toBeLessThanOrEqual(600)
  })

  it("gives the special tokens the last ids", () => {
    const tok = trainTokenizer(terminalCorpus(), { vocabSize: 400 })
    expect(tok.vocabSize).toBe(400)
    CHAT_SPECIAL_TOKENS.forEach((s, i) => {
      expect(tok.specialId(s)).toBe(400 - CHAT_SPECIAL_TOKENS.length + i)
    })
  })

  it("is deterministic", () => {
    const a = trainTokenizer(terminalCorpus(), { vocabSize: 500 })
    const b = trainTokenizer([...terminalCorpus()], { vocabSize: 500 })
    expect(saveTokenizerJson(a)).toBe(saveTokenizerJson(b))
  })

  it("never learns a token that spells a special token", () => {
    // a pattern that keeps "<|end|>" in one piece, and a corpus full of it
    const corpus = Array.from({ length: 200 }, (_, i) => `x<|end|> ${i} <|end|>`)
    const tok = trainTokenizer(corpus, { vocabSize: 400, pattern: "\\S+|\\s+" })
    expect(tok.spec.vocab.has("<|end|>")).toBe(false)
    for (const id of tok.encode("<|end|>")) expect(tok.isSpecial(id)).toBe(false)
    expect(tok.encode("<|end|>", { allowSpecial: true })).toEqual(
      Uint32Array.of(tok.specialId("<|end|>")),
    )
  })

  it("stops early when no pair is frequent enough", () => {
    const tok = trainTokenizer(["abc"], { vocabSize: 1000 })
    expect(tok.spec.merges).toHaveLength(0)
    expect(tok.vocabSize).toBe(256 + CHAT_SPECIAL_TOKENS.length)
  })

  it("rejects a vocabulary too small for bytes and special tokens", () => {
    expect(() => trainTokenizer(["a"], { vocabSize: 260 })).toThrow(TokenizerTrainingError)
  })

  it("trains a 4k vocabulary on ~1 MB in seconds", () => {
    const corpus = terminalCorpus(1_000) // about 0.5 MB; distinct numbers keep it from collapsing
    const bytes = corpus.reduce((n, s) => n + Buffer.byteLength(s), 0)
    const started = performance.now()
    const tok = trainTokenizer(corpus, { vocabSize: 4096 })
    const seconds = (performance.now() - started) / 1000
    expect(bytes).toBeGreaterThan(400_000)
    expect(tok.vocabSize).toBeGreaterThan(1000)
    expect(seconds).toBeLessThan(10)
  })
})
