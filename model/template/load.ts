import { readFileSync } from "node:fs"
import { join } from "node:path"
import { TokenizerFormatError } from "../tokenizer/errors.ts"
import { loadTokenizerJson } from "../tokenizer/huggingFace.ts"
import type { Tokenizer } from "../tokenizer/tokenizer.ts"
import { type HfTokenizerConfig, parseTokenizerConfig } from "./config.ts"
import { ChatTemplateError } from "./errors.ts"
import { JinjaChatTemplate } from "./jinja.ts"

/** A model's tokenizer directory as a Hugging Face repository ships it. */
export interface HfModelTokenizer {
  readonly dir: string
  readonly tokenizer: Tokenizer
  readonly config: HfTokenizerConfig
  readonly template: JinjaChatTemplate
  /** The end-of-sequence token's id (`eos_token`), which ends an assistant turn. */
  readonly eosId: number
}

const read = (file: string, what: (reason: string) => Error): string => {
  try {
    return readFileSync(file, "utf8")
  } catch (e) {
    throw what(e instanceof Error ? e.message : String(e))
  }
}

/**
 * Loads `tokenizer.json` and `tokenizer_config.json` from `dir` (a model repository or its
 * tokenizer files): t1's byte-level BPE over the model's vocabulary, merges, added tokens and
 * pre-tokenizer, and the model's chat template. Errors name the file: TokenizerFormatError for a
 * tokenizer.json t1 cannot reproduce, ChatTemplateError for a config without a usable template
 * or whose special tokens the tokenizer lacks.
 */
export const loadHfModelTokenizer = (dir: string): HfModelTokenizer => {
  const tokenizerFile = join(dir, "tokenizer.json")
  const configFile = join(dir, "tokenizer_config.json")
  let tokenizer: Tokenizer
  try {
    tokenizer = loadTokenizerJson(
      read(tokenizerFile, (r) => new TokenizerFormatError(`cannot read: ${r}`)),
    )
  } catch (e) {
    const message = e instanceof Error ? e.message : String(e)
    throw new TokenizerFormatError(`${tokenizerFile}: ${message}`)
  }
  const config = parseTokenizerConfig(
    read(configFile, (r) => new ChatTemplateError(configFile, `cannot read: ${r}`)),
    configFile,
  )
  const idOf = (key: string, token: string | undefined): number | undefined => {
    if (token === undefined) return undefined
    const id = tokenizer.spec.specialTokens.get(token) ?? tokenizer.spec.vocab.get(token)
    if (id === undefined)
      throw new ChatTemplateError(
        configFile,
        `${key} ${JSON.stringify(token)} is not in ${tokenizerFile}`,
      )
    return id
  }
  const eosId = idOf("eos_token", config.eosToken)
  if (eosId === undefined)
    throw new ChatTemplateError(configFile, "no eos_token: t1 needs the token that ends a turn")
  idOf("bos_token", config.bosToken)
  idOf("pad_token", config.padToken)
  return { dir, tokenizer, config, template: new JinjaChatTemplate(config), eosId }
}
