import { create } from "@bufbuild/protobuf"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { EpisodeEndSchema, ObjectRefSchema, TrajectorySchema } from "../../proto/index.ts"
import type { WorkItem } from "../../services/bus/index.ts"
import { REF_ENTRY_BYTES } from "./names.ts"
import { type Cut, type ReadyEntry, ReadyPool } from "./ready-pool.ts"

const acks: number[] = []
const work = (seq: number): WorkItem => ({
  subject: "t.ready.j",
  data: new Uint8Array(0),
  headers: {},
  reply: undefined,
  stream: "T_READY",
  streamSeq: seq,
  deliveryCount: 1,
  ack: Effect.sync(() => void acks.push(seq)),
  nak: () => Effect.void,
  working: Effect.void,
  term: () => Effect.void,
})

let nextSeq = 0
const entry = (
  o: {
    episode?: string
    group?: string
    index?: number
    reward?: number
    tokens?: number
    bytes?: number
    admitted?: bigint
    ref?: boolean
    arrivedMs?: number
  } = {},
): ReadyEntry => {
  const seq = ++nextSeq
  const end = create(EpisodeEndSchema, {
    episodeId: o.episode ?? `e${seq}`,
    groupId: o.group ?? "",
    sampleIndex: o.index ?? 0,
    reward: o.reward ?? 1,
    totalTokens: o.tokens ?? 10,
    admittedPolicyVersion: o.admitted ?? 0n,
  })
  return {
    seq,
    work: work(seq),
    end,
    tokens: o.tokens ?? 10,
    arrivedMs: o.arrivedMs ?? 0,
    trajectory: o.ref ? undefined : create(TrajectorySchema, { episodeId: end.episodeId, end }),
    inlineBytes: o.ref ? 0 : (o.bytes ?? 100),
    ref: o.ref ? create(ObjectRefSchema, { bucket: "b", name: end.episodeId }) : undefined,
  }
}

const cut = (o: Partial<Cut> = {}): Cut => ({
  maxTrajectories: 10,
  maxTokens: 0,
  policyVersion: 0n,
  maxStaleness: 0,
  wholeGroups: false,
  dropZeroVariance: false,
  groupSize: 0,
  budgetBytes: 10_000,
  ...o,
})

const pool = (options: Partial<ConstructorParameters<typeof ReadyPool>[0]> = {}) =>
  new ReadyPool({ stalePolicy: "drop", staleDecay: 0.5, groupTimeoutMs: 1000, ...options })

const episodes = (step: { selected: ReadonlyArray<{ entry: ReadyEntry }> }) =>
  step.selected.map((s) => s.entry.end.episodeId)

describe("ready pool: cutting batches", () => {
  it("serves in arrival order and stops at the first trajectory over a bound", () => {
    const p = pool()
    p.add(entry({ episode: "a", tokens: 10 }))
    p.add(entry({ episode: "b", tokens: 30 }))
    p.add(entry({ episode: "c", tokens: 5 }))
    const s = p.step(cut({ maxTokens: 35 }), 0)
    expect(episodes(s)).toEqual(["a"])
    expect(s.full).toBe(true)
  })

  it("stops when the reply would exceed its byte budget, and references stored trajectories", () => {
    const p = pool()
    p.add(entry({ episode: "a", bytes: 600 }))
    p.add(entry({ episode: "big", ref: true }))
    p.add(entry({ episode: "b", bytes: 600 }))
    const s = p.step(cut({ budgetBytes: 700 + REF_ENTRY_BYTES }), 0)
    expect(s.selected.map((x) => [x.entry.end.episodeId, x.asRef])).toEqual([
      ["a", false],
      ["big", true],
    ])
    expect(s.full).toBe(true)
  })

  it("serves a trajectory larger than max_tokens alone rather than never", () => {
    const p = pool()
    p.add(entry({ episode: "huge", tokens: 100 }))
    p.add(entry({ episode: "small", tokens: 5 }))
    const s = p.step(cut({ maxTokens: 50 }), 0)
    expect(episodes(s)).toEqual(["huge"])
    expect(s.full).toBe(true)
  })

  it("a group too large for the reply is served alone, its overflow by reference", () => {
    const p = pool()
    for (const i of [0, 1, 2]) p.add(entry({ episode: `g${i}`, group: "g", index: i, bytes: 400 }))
    const s = p.step(cut({ wholeGroups: true, groupSize: 3, budgetBytes: 900 }), 0)
    expect(s.selected.map((x) => x.asRef)).toEqual([false, false, true])
  })

  it("serves an incomplete group once it has had no new member for the group timeout", () => {
    const p = pool({ groupTimeoutMs: 1000 })
    p.add(entry({ group: "g", index: 0, arrivedMs: 0, reward: 1 }))
    p.add(entry({ group: "g", index: 1, arrivedMs: 500, reward: 2 }))
    const whole = cut({ wholeGroups: true, groupSize: 4 })
    expect(p.step(whole, 1400).selected).toEqual([])
    expect(p.step(whole, 1500).selected.length).toBe(2)
  })

  it("weights stale trajectories decay^(s − η) when down-weighting, drops them otherwise", () => {
    const down = pool({ stalePolicy: "downweight", staleDecay: 0.5 })
    down.add(entry({ episode: "s3", admitted: 7n }))
    down.add(entry({ episode: "s0", admitted: 10n }))
    const s = down.step(cut({ policyVersion: 10n, maxStaleness: 1 }), 0)
    expect(s.selected.map((x) => [x.entry.end.episodeId, x.staleness, x.weight])).toEqual([
      ["s3", 3, 0.25],
      ["s0", 0, 1],
    ])
    const drop = pool()
    drop.add(entry({ episode: "s3", admitted: 7n }))
    const d = drop.step(cut({ policyVersion: 10n, maxStaleness: 1 }), 0)
    expect(d.dropped.map((x) => x.reason)).toEqual(["stale"])
    expect(drop.size).toBe(0)
  })

  it("takes a selection out; a confirmed batch leaves, an overdue one comes back first", () => {
    const p = pool()
    const [a, b, c] = [entry({ episode: "a" }), entry({ episode: "b" }), entry({ episode: "c" })]
    for (const e of [a, b, c]) p.add(e)
    const s1 = p.step(cut({ maxTrajectories: 1 }), 0)
    p.take(s1.selected, "b1", 100)
    const s2 = p.step(cut({ maxTrajectories: 1 }), 0)
    p.take(s2.selected, "b2", 100)
    expect(p.size).toBe(1)
    expect(p.unconfirmed).toBe(2)
    expect(p.confirm("b2")?.map((e) => e.end.episodeId)).toEqual(["b"])
    expect(p.overdue(99)).toEqual([])
    expect(p.overdue(100)).toEqual(["b1"])
    p.putBack("b1")
    expect(episodes(p.step(cut(), 0))).toEqual(["a", "c"])
    // A redelivery of a message held only refreshes its handle.
    p.add({ ...a, work: work(a.seq) })
    expect(p.size).toBe(2)
  })
})
