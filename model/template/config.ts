import { ChatTemplateError } from "./errors.ts"

/**
 * What t1 reads of a Hugging Face `tokenizer_config.json`: the chat template, and the special
 * tokens the template and the sampler refer to by role (`bos_token`, `eos_token`, `pad_token`).
 */
export interface HfTokenizerConfig {
  /** The file, for messages. */
  readonly file: string
  /** Jinja source of the chat template (the `default` one where several are named). */
  readonly chatTemplate: string
  /** Other named templates (`tool_use`, …), when the file lists several. */
  readonly namedTemplates: ReadonlyMap<string, string>
  readonly bosToken: string | undefined
  readonly eosToken: string | undefined
  readonly padToken: string | undefined
  readonly unkToken: string | undefined
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json }

const isObject = (v: Json | undefined): v is { [key: string]: Json } =>
  typeof v === "object" && v !== null && !Array.isArray(v)

/** A special token as the file writes it: a string, or an AddedToken object with `content`. */
const tokenText = (file: string, key: string, v: Json | undefined): string | undefined => {
  if (v === undefined || v === null) return undefined
  if (typeof v === "string") return v
  if (isObject(v) && typeof v.content === "string") return v.content
  throw new ChatTemplateError(file, `${key} is neither a string nor an AddedToken with content`)
}

/**
 * Reads tokenizer_config.json text. A file without `chat_template` is refused: t1 lays out every
 * turn with the model's own template and has no guess that would match its training.
 */
export const parseTokenizerConfig = (text: string, file: string): HfTokenizerConfig => {
  let root: Json
  try {
    root = JSON.parse(text) as Json
  } catch (e) {
    throw new ChatTemplateError(file, `not JSON: ${e instanceof Error ? e.message : String(e)}`)
  }
  if (!isObject(root)) throw new ChatTemplateError(file, "not a JSON object")
  const source = root.chat_template
  const named = new Map<string, string>()
  let chatTemplate: string | undefined
  if (typeof source === "string") chatTemplate = source
  else if (Array.isArray(source)) {
    for (const entry of source) {
      if (!isObject(entry) || typeof entry.name !== "string" || typeof entry.template !== "string")
        throw new ChatTemplateError(file, "chat_template list entries need a name and a template")
      named.set(entry.name, entry.template)
    }
    chatTemplate = named.get("default")
    if (chatTemplate === undefined)
      throw new ChatTemplateError(
        file,
        `chat_template lists ${[...named.keys()].join(", ")} but no "default"`,
      )
  } else if (source !== undefined && source !== null)
    throw new ChatTemplateError(file, "chat_template is neither a string nor a list")
  if (chatTemplate === undefined || chatTemplate.trim() === "")
    throw new ChatTemplateError(
      file,
      "no chat_template: t1 renders every turn with the model's own template (add it to the file, as the model's repository ships it)",
    )
  return {
    file,
    chatTemplate,
    namedTemplates: named,
    bosToken: tokenText(file, "bos_token", root.bos_token),
    eosToken: tokenText(file, "eos_token", root.eos_token),
    padToken: tokenText(file, "pad_token", root.pad_token),
    unkToken: tokenText(file, "unk_token", root.unk_token),
  }
}
