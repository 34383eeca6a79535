import type { ChatMessage, ChatRole, ChatTemplate } from "../../model/index.ts"

/** An assistant turn as sampled: its ids, log-probs and whether `<|end|>` was sampled. */
export interface SampledTurn {
  readonly ids: number[]
  readonly logprobs: number[]
  readonly endLogprob: number | undefined
}

/**
 * Rebuilds the conversation of a TITO trajectory as messages (what a text-based trainer keeps):
 * generated runs (loss mask 1) are assistant messages; in the rest, role headers open a message
 * and `<|end|>` closes it. Observation content cannot contain special ids (it is encoded with
 * special tokens off), so the parse is unambiguous.
 */
export const messagesOf = (
  template: ChatTemplate,
  ids: Uint32Array,
  mask: Uint8Array,
  logprobs: Float32Array,
): { messages: ChatMessage[]; turns: SampledTurn[] } => {
  const roles = new Map<number, ChatRole>(
    (["system", "user", "tool"] as const).map((r) => [template.header(r)[0] as number, r]),
  )
  const end = template.endOfTurn[0] as number
  const messages: ChatMessage[] = []
  const turns: SampledTurn[] = []
  let open: { role: ChatRole; ids: number[] } | undefined
  let i = 0
  while (i < ids.length) {
    if (mask[i] === 1) {
      const run: number[] = []
      const lps: number[] = []
      while (i < ids.length && mask[i] === 1) {
        run.push(ids[i] as number)
        lps.push(logprobs[i] as number)
        i++
      }
      const ended = run.at(-1) === end
      const content = ended ? run.slice(0, -1) : run
      turns.push({
        ids: content,
        logprobs: ended ? lps.slice(0, -1) : lps,
        endLogprob: ended ? lps.at(-1) : undefined,
      })
      messages.push({ role: "assistant", content: template.tokenizer.decode(content) })
      continue
    }
    const id = ids[i] as number
    const role = roles.get(id)
    if (role) open = { role, ids: [] }
    else if (id === end && open) {
      const bytes = template.tokenizer.decodeBytes(open.ids)
      messages.push({
        role: open.role,
        content: open.role === "tool" ? bytes : new TextDecoder().decode(bytes),
      })
      open = undefined
    } else if (open) open.ids.push(id)
    i++
  }
  return { messages, turns }
}
