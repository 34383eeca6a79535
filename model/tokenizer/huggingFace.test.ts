import { readFileSync } from "node:fs"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { TokenizerFormatError } from "./errors.ts"
import { loadTokenizerJson, saveTokenizerJson, toTokenizerJson } from "./huggingFace.ts"
import { testTokenizer } from "./testCorpus.ts"

const fixture = readFileSync(
  new URL("./fixtures/gpt2-tiny.tokenizer.json", import.meta.url),
  "utf8",
)

describe("tokenizer.json", () => {
  it("load(save(t)) encodes and decodes identically", () => {
    const tok = testTokenizer()
    const loaded = loadTokenizerJson(saveTokenizerJson(tok))
    expect(loaded.vocabSize).toBe(tok.vocabSize)
    fc.assert(
      fc.property(fc.string({ unit: "grapheme", maxLength: 120 }), fc.boolean(), (s, allow) => {
        const text = `${s}<|end|>${s}`
        expect(loaded.encode(text, { allowSpecial: allow })).toEqual(
          tok.encode(text, { allowSpecial: allow }),
        )
      }),
    )
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 100 }), (b) => {
        expect(loaded.encodeBytes(b)).toEqual(tok.encodeBytes(b))
      }),
    )
  })

  it("saves the Hugging Face layout", () => {
    const json = toTokenizerJson(testTokenizer()) as Record<string, unknown>
    expect(json.pre_tokenizer).toMatchObject({ type: "ByteLevel", use_regex: true })
    expect(json.decoder).toMatchObject({ type: "ByteLevel" })
    expect(json.model).toMatchObject({ type: "BPE", byte_fallback: false })
    expect(json.added_tokens).toContainEqual(
      expect.objectContaining({ content: "<|end|>", special: true }),
    )
  })

  it("loads a hand-written GPT-2 style tokenizer.json with merges as strings", () => {
    const tok = loadTokenizerJson(fixture)
    // GPT-2's byte ids: "a"=64, "o"=78, "Ġ"=220; merges apply by rank, not longest match:
    // "hello" -> h e l l o -> he l l o -> he ll o (no merge "he ll")
    expect(Array.from(tok.encode("hello the a"))).toEqual([257, 260, 78, 258, 259])
    expect(Array.from(tok.encode("ell"))).toEqual([261])
    expect(Array.from(tok.encode("<|endoftext|>", { allowSpecial: true }))).toEqual([264])
    expect(tok.encode("<|endoftext|>")).not.toContain(264)
    expect(tok.decode([257, 260, 78, 258, 264])).toBe("hello the<|endoftext|>")
  })

  it("loads a Llama 3 / Qwen 2 style Split pre-tokenizer with (?i:) contractions", () => {
    const json = JSON.parse(fixture)
    json.pre_tokenizer = {
      type: "Sequence",
      pretokenizers: [
        {
          type: "Split",
          pattern: {
            Regex:
              "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
          },
          behavior: "Isolated",
          invert: false,
        },
        { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false },
      ],
    }
    json.normalizer = { type: "NFC" }
    const tok = loadTokenizerJson(json)
    expect(Array.from(tok.encode(" the"))).toEqual([258])
    for (const s of ["IT'S 123 the", "e\u0301 caf\u00e9"]) {
      expect(tok.decode(tok.encode(s))).toBe(s.normalize("NFC"))
    }
    const again = loadTokenizerJson(saveTokenizerJson(tok))
    expect(again.encode("Don'T 42 hello")).toEqual(tok.encode("Don'T 42 hello"))
  })

  it("refuses what it cannot reproduce", () => {
    const withModel = (patch: object) => {
      const json = JSON.parse(fixture)
      Object.assign(json.model, patch)
      return json
    }
    expect(() => loadTokenizerJson(withModel({ type: "WordPiece" }))).toThrow(TokenizerFormatError)
    expect(() => loadTokenizerJson(withModel({ byte_fallback: true }))).toThrow(
      TokenizerFormatError,
    )
    expect(() => loadTokenizerJson(withModel({ merges: ["Ġ zz"] }))).toThrow(TokenizerFormatError)
    const noByte = JSON.parse(fixture)
    delete noByte.model.vocab.Ā
    expect(() => loadTokenizerJson(noByte)).toThrow(TokenizerFormatError)
  })
})
