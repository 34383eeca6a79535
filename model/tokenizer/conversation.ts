import type { ChatMessage, ChatTemplate } from "./chat.ts"
import type { EpisodeConversation } from "./chat-format.ts"
import { sameIds } from "./ids.ts"

/** Where one message's content lies in the trajectory, and what it was. */
interface MessageSpan {
  readonly message: ChatMessage
  readonly start: number
  readonly ids: Uint32Array
}

const utf8 = new TextDecoder("utf-8", { fatal: true })

/**
 * The episode's conversation as the bundled chat template lays it out, built incrementally
 * against a fixed base (each turn's glue is rendered on its own, never by re-rendering the
 * history), plus the bookkeeping to measure drift: how the ids would differ had the whole
 * conversation been rendered from text afterwards, as a text-based trainer would.
 */
export class Conversation implements EpisodeConversation {
  private readonly spans: MessageSpan[] = []
  /** Boundaries where the sampled ids did not end as the template expects, repaired with glue. */
  repairedBoundaries = 0

  constructor(readonly template: ChatTemplate) {}

  get endOfTurnId(): number {
    return this.template.endOfTurn[0] as number
  }

  get stopIds(): ReadonlyArray<number> {
    return [this.endOfTurnId]
  }

  /** System and user turns plus the first assistant header. */
  prompt(system: string, user: string): Uint32Array {
    const rendered = this.template.render(
      [
        { role: "system", content: system },
        { role: "user", content: user },
      ],
      { addGenerationPrompt: true },
    )
    for (const s of rendered.segments) {
      if (s.kind !== "content") continue
      this.spans.push({
        message: { role: s.role, content: s.role === "system" ? system : user },
        start: s.start,
        ids: s.ids,
      })
    }
    return rendered.ids
  }

  /**
   * Records a sampled assistant turn starting at `start` and returns the glue that closes it:
   * the separator after `<|end|>`, or `<|end|>` plus separator when generation stopped without
   * it (a repaired boundary).
   */
  closeAssistant(start: number, sampled: Uint32Array): { glue: Uint32Array; content: Uint32Array } {
    const end = this.endOfTurnId
    const stopped = sampled.length > 0 && sampled[sampled.length - 1] === end
    const content = stopped ? sampled.subarray(0, sampled.length - 1) : sampled
    const bytes = this.template.tokenizer.decodeBytes(content)
    let text: string | Uint8Array = bytes
    try {
      text = utf8.decode(bytes)
    } catch {
      // Not UTF-8: the message keeps the raw bytes.
    }
    this.spans.push({ message: { role: "assistant", content: text }, start, ids: content.slice() })
    if (stopped) return { glue: this.template.separator, content }
    this.repairedBoundaries++
    const glue = new Uint32Array(this.template.endOfTurn.length + this.template.separator.length)
    glue.set(this.template.endOfTurn)
    glue.set(this.template.separator, this.template.endOfTurn.length)
    return { glue, content }
  }

  /** A tool turn with the observation (already capped) and the next assistant header. */
  observation(start: number, content: Uint32Array, raw: Uint8Array): Uint32Array {
    const header = this.template.header("tool")
    const next = this.template.header("assistant")
    const t = this.template
    const ids = new Uint32Array(
      header.length + content.length + t.endOfTurn.length + t.separator.length + next.length,
    )
    let o = 0
    for (const part of [header, content, t.endOfTurn, t.separator, next]) {
      ids.set(part, o)
      o += part.length
    }
    this.spans.push({
      message: { role: "tool", content: raw },
      start: start + header.length,
      ids: content.slice(),
    })
    return ids
  }

  /**
   * Drift events: boundaries repaired while sampling, plus every message whose ids differ when
   * the whole conversation is rendered from its text (re-tokenisation, or an observation cut
   * at the token level). The trajectory keeps the sampled ids, so none of this reaches the loss.
   */
  driftEvents(): number {
    let drift = this.repairedBoundaries
    for (const span of this.spans)
      if (!sameIds(this.template.content(span.message.content), span.ids)) drift++
    return drift
  }

  /** The conversation as messages (for re-rendering, e.g. the no-TITO ablation). */
  messages(): ChatMessage[] {
    return this.spans.map((s) => s.message)
  }
}
