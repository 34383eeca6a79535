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

/**
 * The TITO ablation: a trajectory as a text-based trainer would rebuild it — the conversation
 * re-rendered from its text and re-tokenised. Assistant content and `<|end|>` are the trained
 * tokens. Where a message re-tokenises to the sampled ids, the sampler's log-probs still apply;
 * elsewhere the behaviour log-prob is unknown (`behaviourKnown` 0) and the learner uses its own.
 * No routing survives (positions moved), so R3 cannot apply.
 */
export const retokenizedSequence = (
  template: ChatTemplate,
  s: { readonly ids: Uint32Array; readonly lossMask: Uint8Array; readonly logprobs: Float32Array },
): {
  ids: Uint32Array
  lossMask: Uint8Array
  logprobs: Float32Array
  behaviourKnown: Uint8Array
} => {
  const { messages, turns } = messagesOf(template, s.ids, s.lossMask, s.logprobs)
  const rendered = template.render(messages)
  const n = rendered.ids.length
  const lossMask = new Uint8Array(n)
  const logprobs = new Float32Array(n)
  const behaviourKnown = new Uint8Array(n)
  let k = 0
  for (const seg of rendered.segments) {
    if (seg.role !== "assistant" || seg.message >= messages.length) continue
    const turn = turns[k]
    if (!turn) break
    if (seg.kind === "content") {
      lossMask.fill(1, seg.start, seg.start + seg.ids.length)
      const same = seg.ids.length === turn.ids.length && seg.ids.every((v, j) => v === turn.ids[j])
      if (same) {
        behaviourKnown.fill(1, seg.start, seg.start + seg.ids.length)
        logprobs.set(turn.logprobs, seg.start)
      }
    } else if (seg.kind === "end") {
      lossMask[seg.start] = 1
      if (turn.endLogprob !== undefined) {
        behaviourKnown[seg.start] = 1
        logprobs[seg.start] = turn.endLogprob
      }
      k++
    }
  }
  const last = lossMask.lastIndexOf(1)
  return {
    ids: rendered.ids.subarray(0, last + 1),
    lossMask: lossMask.subarray(0, last + 1),
    logprobs: logprobs.subarray(0, last + 1),
    behaviourKnown: behaviourKnown.subarray(0, last + 1),
  }
}
