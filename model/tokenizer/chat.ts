import type { ChatFormat, EpisodeConversation } from "./chat-format.ts"
import { Conversation } from "./conversation.ts"
import type { Tokenizer } from "./tokenizer.ts"

/**
 * The policy's chat template. Every turn is laid out as
 *
 *   <|role|> content <|end|> "\n"
 *
 * and a generation prompt is a bare `<|assistant|>` header. The sampler stops on `<|end|>`, so
 * a sampled assistant turn is `content <|end|>`; the "\n" separator after it is template glue the
 * model never produced. A TITO builder keeps the sampled ids verbatim (loss mask 1), appends the
 * separator, observation turns and the next header with loss mask 0, and counts a boundary as
 * drift when the rendered ids there differ from what the sampler emitted (e.g. a stop without
 * `<|end|>`). Content is encoded with special tokens off: no message can forge template tokens.
 */
export type ChatRole = "system" | "user" | "assistant" | "tool"

export interface ChatMessage {
  readonly role: ChatRole
  /** Text, or raw bytes (tool output that may not be UTF-8), encoded exactly. */
  readonly content: string | Uint8Array
}

/** header = `<|role|>`; content = the message; end = `<|end|>`; separator = "\n" after it. */
export type ChatSegmentKind = "header" | "content" | "end" | "separator"

export interface ChatSegment {
  /** Index of the message; messages.length for the generation prompt header. */
  readonly message: number
  readonly role: ChatRole
  readonly kind: ChatSegmentKind
  /** Offset of the first id in RenderedChat.ids. */
  readonly start: number
  readonly ids: Uint32Array
}

export interface RenderedChat {
  readonly ids: Uint32Array
  readonly segments: readonly ChatSegment[]
}

export interface RenderOptions {
  /** Append an `<|assistant|>` header for the policy to continue from. Default false. */
  readonly addGenerationPrompt?: boolean
}

const ROLE_TOKENS: Readonly<Record<ChatRole, string>> = {
  system: "<|system|>",
  user: "<|user|>",
  assistant: "<|assistant|>",
  tool: "<|tool|>",
}

/**
 * Message content as ids: text encoded with special tokens off (no message can forge template
 * tokens), raw bytes (tool output that may not be UTF-8) exactly.
 */
export const contentIds = (tokenizer: Tokenizer, content: string | Uint8Array): Uint32Array =>
  typeof content === "string" ? tokenizer.encode(content) : tokenizer.encodeBytes(content)

/** Template ids resolved once against a tokenizer; throws UnknownTokenError if one is missing. */
export class ChatTemplate implements ChatFormat {
  readonly name = "t1 bundled chat template"
  readonly endOfTurn: Uint32Array
  readonly separator: Uint32Array
  readonly padId: number
  private readonly headers: Readonly<Record<ChatRole, Uint32Array>>

  constructor(readonly tokenizer: Tokenizer) {
    const id = (s: string): Uint32Array => Uint32Array.of(tokenizer.specialId(s))
    this.headers = {
      system: id(ROLE_TOKENS.system),
      user: id(ROLE_TOKENS.user),
      assistant: id(ROLE_TOKENS.assistant),
      tool: id(ROLE_TOKENS.tool),
    }
    this.endOfTurn = id("<|end|>")
    this.padId = tokenizer.specialId("<|pad|>")
    this.separator = tokenizer.encode("\n")
  }

  /** Observations are always tool turns in this layout, and tools are described in the prompt. */
  conversation(): EpisodeConversation {
    return new Conversation(this)
  }

  header(role: ChatRole): Uint32Array {
    return this.headers[role]
  }

  content(content: string | Uint8Array): Uint32Array {
    return contentIds(this.tokenizer, content)
  }

  render(messages: readonly ChatMessage[], options: RenderOptions = {}): RenderedChat {
    const segments: ChatSegment[] = []
    let length = 0
    const add = (message: number, role: ChatRole, kind: ChatSegmentKind, ids: Uint32Array) => {
      segments.push({ message, role, kind, start: length, ids })
      length += ids.length
    }
    messages.forEach((m, i) => {
      add(i, m.role, "header", this.header(m.role))
      add(i, m.role, "content", this.content(m.content))
      add(i, m.role, "end", this.endOfTurn)
      add(i, m.role, "separator", this.separator)
    })
    if (options.addGenerationPrompt === true) {
      add(messages.length, "assistant", "header", this.header("assistant"))
    }
    const ids = new Uint32Array(length)
    for (const s of segments) ids.set(s.ids, s.start)
    return { ids, segments }
  }
}

/** Render messages with the chat template (see ChatTemplate for the layout). */
export function renderChat(
  tokenizer: Tokenizer,
  messages: readonly ChatMessage[],
  options: RenderOptions = {},
): RenderedChat {
  return new ChatTemplate(tokenizer).render(messages, options)
}
