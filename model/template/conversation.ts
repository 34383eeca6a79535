import type { ChatMessage } from "../tokenizer/chat.ts"
import { contentIds } from "../tokenizer/chat.ts"
import type { EpisodeConversation } from "../tokenizer/chat-format.ts"
import { concatIds, sameIds } from "../tokenizer/ids.ts"
import type { Tokenizer } from "../tokenizer/tokenizer.ts"
import { ChatTemplateError } from "./errors.ts"
import type { JinjaChatTemplate, TemplateMessage } from "./jinja.ts"

/**
 * Stands for a message's content while the template renders, so the text around it (the
 * template's own, special tokens included) and the content (encoded with special tokens off) are
 * tokenised separately. Private-use code points: no template treats them specially.
 */
const marker = (n: number) => `\u{F8FF}t1-content-${n}\u{F8FF}`

const utf8 = new TextDecoder("utf-8", { fatal: true })
const lossy = new TextDecoder("utf-8")

const textOf = (bytes: Uint8Array): string => {
  try {
    return utf8.decode(bytes)
  } catch {
    return lossy.decode(bytes)
  }
}

export interface TemplateConversationOptions {
  /** The role observations take: "tool" for native tool calls, "user" otherwise (default). */
  readonly observationRole?: "tool" | "user"
  /** Tool definitions the template describes (its `tools` variable), in every rendering. */
  readonly tools?: ReadonlyArray<unknown>
}

/** A content span: where a message's content lies in the episode, and its ids there. */
interface Span {
  readonly message: ChatMessage
  readonly ids: Uint32Array
}

/**
 * One episode's conversation on a model's own chat template. The glue between turns is the
 * difference between renderings of the conversation with and without the new message: the
 * template decides where end-of-turn tokens, `<think>` blocks and tool-response wrappers go.
 * What the policy sampled stays verbatim; where the template would render the history other
 * than it was sampled (a turn that stopped on a stop string instead of the end-of-turn token,
 * Qwen3 re-laying `<think>` blocks, DeepSeek-V3 rewriting tool-output openers), the episode keeps
 * its ids and the place is counted as drift.
 */
export class TemplateConversation implements EpisodeConversation {
  private readonly history: TemplateMessage[] = []
  private readonly spans: Span[] = []
  /** The template's text of the conversation so far, as the episode's ids continue from it. */
  private rendered = ""
  private readonly observationRole: "tool" | "user"
  /** The last assistant turn's text as the episode holds it: content, then its closing. */
  private turnEnd = ""
  /** Whether the template renders the last assistant turn, as the last message, as sampled. */
  private lastTurnAsHeld = true
  /** Boundaries where the sampled ids did not end as the template closes a turn. */
  repairedBoundaries = 0
  /** Places where the template re-renders history other than the episode holds it. */
  rerendered = 0

  constructor(
    private readonly template: JinjaChatTemplate,
    private readonly tokenizer: Tokenizer,
    readonly stopIds: ReadonlyArray<number>,
    /** The text of the token that ends a turn (eos_token). */
    private readonly endText: string,
    options: TemplateConversationOptions = {},
  ) {
    this.observationRole = options.observationRole ?? "user"
    this.tools = options.tools
  }

  private readonly tools: ReadonlyArray<unknown> | undefined

  /** The template's text of `messages`, with the episode's tools. */
  private render(messages: ReadonlyArray<TemplateMessage>, addGenerationPrompt = false): string {
    return this.template.render(messages, {
      addGenerationPrompt,
      ...(this.tools === undefined ? {} : { tools: this.tools }),
    })
  }

  private get file(): string {
    return this.template.config.file
  }

  /** Template text (special tokens parsed as the template means them). */
  private glue(text: string): Uint32Array {
    return this.tokenizer.encode(text, { allowSpecial: true })
  }

  /** `text` cut at the markers 0..n-1, which must each appear once, in order. */
  private cut(text: string, n: number, what: string): string[] {
    const pieces: string[] = []
    let rest = text
    for (let i = 0; i < n; i++) {
      const m = marker(i)
      const at = rest.indexOf(m)
      if (at < 0 || rest.indexOf(m, at + m.length) >= 0)
        throw new ChatTemplateError(
          this.file,
          `the chat template does not render ${what} verbatim (exactly once), so t1 cannot place its tokens`,
        )
      pieces.push(rest.slice(0, at))
      rest = rest.slice(at + m.length)
    }
    pieces.push(rest)
    return pieces
  }

  prompt(system: string, user: string): Uint32Array {
    const marked = this.render(
      [
        { role: "system", content: marker(0) },
        { role: "user", content: marker(1) },
      ],
      true,
    )
    const [before = "", between = "", after = ""] = this.cut(marked, 2, "a system or user message")
    const systemIds = contentIds(this.tokenizer, system)
    const userIds = contentIds(this.tokenizer, user)
    this.history.push({ role: "system", content: system }, { role: "user", content: user })
    this.spans.push(
      { message: { role: "system", content: system }, ids: systemIds },
      { message: { role: "user", content: user }, ids: userIds },
    )
    this.rendered = this.render(this.history, true)
    const ids = concatIds([
      this.glue(before),
      systemIds,
      this.glue(between),
      userIds,
      this.glue(after),
    ])
    // Encoded in pieces, the prompt can differ from the rendered text encoded whole where content
    // meets template text (".\n\n" is one pre-token whole, two in pieces): drift, counted once.
    if (!sameIds(ids, this.glue(this.rendered))) this.rerendered++
    return ids
  }

  closeAssistant(
    _start: number,
    sampled: Uint32Array,
  ): { glue: Uint32Array; content: Uint32Array } {
    const last = sampled[sampled.length - 1]
    const stopped = last !== undefined && this.stopIds.includes(last)
    const content = stopped ? sampled.subarray(0, sampled.length - 1) : sampled
    const text = textOf(this.tokenizer.decodeBytes(content))
    this.spans.push({ message: { role: "assistant", content: text }, ids: content.slice() })
    this.history.push({ role: "assistant", content: text })
    const closed = this.render(this.history)
    const sampledText = this.rendered + text
    let closing: string
    this.lastTurnAsHeld = closed.startsWith(sampledText)
    if (this.lastTurnAsHeld) closing = closed.slice(sampledText.length)
    else {
      // The template lays this turn out other than it was sampled (Qwen3 adds an empty <think>
      // block to a last turn without one): the episode keeps the sampled ids and closes the turn
      // as the template ends it. Counted as drift only if the finished conversation still
      // renders it so (observation() and driftEvents() check the history as it stands).
      const at = text === "" ? -1 : closed.lastIndexOf(text)
      const end = closed.lastIndexOf(this.endText)
      closing = at >= 0 ? closed.slice(at + text.length) : end >= 0 ? closed.slice(end) : ""
    }
    this.turnEnd = text + closing
    let glue = this.glue(closing)
    if (stopped && glue[0] === last) glue = glue.subarray(1)
    else if (glue.length > 0) this.repairedBoundaries++
    return { glue, content }
  }

  observation(_start: number, content: Uint32Array, raw: Uint8Array): Uint32Array {
    const role = this.observationRole
    const marked = this.render([...this.history, { role, content: marker(0) }], true)
    const markerAt = marked.indexOf(marker(0))
    if (markerAt < 0) this.cut(marked, 1, `a ${role} message`) // throws: the content is not there
    // The new turn starts where the previous one ends as the episode holds it (content and
    // closing); where the template now ends that turn otherwise, after its end-of-turn text.
    const anchor = this.turnEnd === "" ? -1 : marked.lastIndexOf(this.turnEnd, markerAt)
    let tail: string
    if (anchor >= 0) tail = marked.slice(anchor + this.turnEnd.length)
    else {
      this.rerendered++
      const end = markerAt < 0 ? -1 : marked.lastIndexOf(this.endText, markerAt)
      if (end < 0)
        throw new ChatTemplateError(
          this.file,
          `cannot tell where the template's ${role} message starts: no ${JSON.stringify(this.endText)} before it`,
        )
      tail = marked.slice(end)
      const held = this.turnEnd.slice(Math.max(0, this.turnEnd.lastIndexOf(this.endText)))
      if (held !== "" && tail.startsWith(held)) tail = tail.slice(held.length)
    }
    const [before = "", after = ""] = this.cut(tail, 1, `a ${role} message`)
    const text = textOf(raw)
    this.spans.push({
      message: { role: role === "user" ? "user" : "tool", content: raw },
      ids: content.slice(),
    })
    this.history.push({ role, content: text })
    this.rendered = this.render(this.history, true)
    return concatIds([this.glue(before), content, this.glue(after)])
  }

  driftEvents(): number {
    let drift = this.repairedBoundaries + this.rerendered
    // The last turn, when the conversation ends on one: does the template render it as held?
    const last = this.history[this.history.length - 1]
    if (last?.role === "assistant" && !this.lastTurnAsHeld) drift++
    // Each message as a text-based trainer would tokenise it: the rendered text, with the
    // tokenizer's added tokens parsed (HF's encode matches them in any text).
    for (const s of this.spans) {
      const c = s.message.content
      const text = typeof c === "string" ? c : textOf(c)
      if (!sameIds(this.glue(text), s.ids)) drift++
    }
    return drift
  }

  messages(): ChatMessage[] {
    return this.spans.map((s) => s.message)
  }
}
