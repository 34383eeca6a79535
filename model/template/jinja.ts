import { Template } from "@huggingface/jinja"
import type { HfTokenizerConfig } from "./config.ts"
import { ChatTemplateError } from "./errors.ts"

/** A tool call as chat templates read it (OpenAI style; `arguments` is JSON text). */
export interface TemplateToolCall {
  readonly type: "function"
  readonly function: { readonly name: string; readonly arguments: string }
}

/** A message as chat templates read it. */
export interface TemplateMessage {
  readonly role: "system" | "user" | "assistant" | "tool"
  /** null: an assistant turn that only calls tools (templates differ in what they accept). */
  readonly content: string | null
  readonly tool_calls?: ReadonlyArray<TemplateToolCall>
}

export interface TemplateRenderOptions {
  /** End with the header the model continues from (`add_generation_prompt`). */
  readonly addGenerationPrompt?: boolean
  /** Tool definitions (JSON schema objects), for templates that describe them in the prompt. */
  readonly tools?: ReadonlyArray<unknown>
  /** Further template variables (`enable_thinking`, …), passed only when set. */
  readonly variables?: Readonly<Record<string, unknown>>
}

const reason = (e: unknown): string => (e instanceof Error ? e.message : String(e))

/**
 * A model's own chat template (Jinja, as shipped in its tokenizer_config.json), rendered by
 * @huggingface/jinja — a Jinja implementation made for chat templates, with the settings
 * transformers' apply_chat_template uses (trim_blocks, lstrip_blocks, `raise_exception`,
 * `tojson`). Parsed once; a template that does not parse or raises is a ChatTemplateError naming
 * the file.
 */
export class JinjaChatTemplate {
  private readonly template: Template

  constructor(readonly config: HfTokenizerConfig) {
    try {
      this.template = new Template(config.chatTemplate)
    } catch (e) {
      throw new ChatTemplateError(config.file, `chat_template does not parse: ${reason(e)}`)
    }
  }

  /** The conversation as the template lays it out, as text (special tokens spelled out). */
  render(messages: ReadonlyArray<TemplateMessage>, options: TemplateRenderOptions = {}): string {
    const c = this.config
    try {
      return this.template.render({
        messages,
        tools: options.tools ?? null,
        documents: null,
        add_generation_prompt: options.addGenerationPrompt === true,
        ...(c.bosToken === undefined ? {} : { bos_token: c.bosToken }),
        ...(c.eosToken === undefined ? {} : { eos_token: c.eosToken }),
        ...(c.padToken === undefined ? {} : { pad_token: c.padToken }),
        ...(c.unkToken === undefined ? {} : { unk_token: c.unkToken }),
        ...options.variables,
      })
    } catch (e) {
      throw new ChatTemplateError(c.file, `chat_template raised: ${reason(e)}`)
    }
  }
}
