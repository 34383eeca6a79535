import { readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { loadHfModelTokenizer } from "../template/load.ts"
import { type ChatMessage, ChatTemplate } from "../tokenizer/index.ts"
import {
  BUNDLED_DIR,
  BUNDLED_GENERATION_CONFIG,
  BUNDLED_TOKENIZER_CONFIG,
  bundledTokenizerConfigs,
  loadBundledTokenizer,
} from "./bundled.ts"

type Message = ChatMessage & { readonly content: string }

const conversations: ReadonlyArray<ReadonlyArray<Message>> = [
  [
    { role: "system", content: "You operate a shell." },
    { role: "user", content: "Create hello.txt with the word hi." },
  ],
  [
    { role: "system", content: "sys" },
    { role: "user", content: "task <|end|> not a token" },
    { role: "assistant", content: "```sh\necho hi > hello.txt\n```" },
    { role: "tool", content: "exit 0\n" },
  ],
]

describe("the bundled model directory's tokenizer files", () => {
  it("are the ones bundledTokenizerConfigs writes for tokenizer.json (npm run model:bundle)", () => {
    const { tokenizerConfig, generationConfig } = bundledTokenizerConfigs(loadBundledTokenizer())
    const read = (path: string) => JSON.parse(readFileSync(path, "utf8")) as unknown
    expect(read(BUNDLED_TOKENIZER_CONFIG)).toEqual(JSON.parse(tokenizerConfig))
    expect(read(BUNDLED_GENERATION_CONFIG)).toEqual(JSON.parse(generationConfig))
  })

  it("carry a Jinja chat template that renders exactly what t1's own template lays out", () => {
    const hf = loadHfModelTokenizer(BUNDLED_DIR)
    const native = new ChatTemplate(loadBundledTokenizer())
    expect(hf.eosId).toBe(native.endOfTurn[0])
    for (const messages of conversations) {
      for (const addGenerationPrompt of [false, true]) {
        const text = hf.template.render(messages, { addGenerationPrompt })
        const ids = native.render(messages, { addGenerationPrompt }).ids
        // Rendered text spells out the template's tokens; content that only looks like one
        // (`<|end|>` in a message) differs in ids, so compare the template's own turns.
        if (messages.some((m) => m.content.includes("<|"))) {
          expect(text).toContain("<|tool|>exit 0\n<|end|>\n")
          continue
        }
        expect(Array.from(hf.tokenizer.encode(text, { allowSpecial: true }))).toEqual(
          Array.from(ids),
        )
      }
    }
  })
})
