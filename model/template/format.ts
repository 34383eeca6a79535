import { contentIds } from "../tokenizer/chat.ts"
import type {
  ChatFormat,
  ConversationOptions,
  EpisodeConversation,
} from "../tokenizer/chat-format.ts"
import type { Tokenizer } from "../tokenizer/tokenizer.ts"
import { TemplateConversation, type TemplateConversationOptions } from "./conversation.ts"
import type { HfModelTokenizer } from "./load.ts"

/**
 * A model's own tokenizer and chat template as the sampler's chat format: episodes are laid out
 * as the model was trained to read them, turn glue taken from the template's renderings, the
 * turn ending at the model's `eos_token`.
 */
export class HfChatFormat implements ChatFormat {
  readonly tokenizer: Tokenizer
  readonly name: string

  constructor(
    readonly model: HfModelTokenizer,
    private readonly options: TemplateConversationOptions = {},
  ) {
    this.tokenizer = model.tokenizer
    this.name = model.config.file
  }

  content(content: string | Uint8Array): Uint32Array {
    return contentIds(this.tokenizer, content)
  }

  conversation(options: ConversationOptions = {}): EpisodeConversation {
    return new TemplateConversation(
      this.model.template,
      this.tokenizer,
      [this.model.eosId],
      this.model.config.eosToken ?? "",
      { ...this.options, ...options },
    )
  }
}
