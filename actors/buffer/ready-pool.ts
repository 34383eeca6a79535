import { Deferred, Effect } from "effect"
import type { EpisodeEnd, ObjectRef, Trajectory } from "../../proto/index.ts"
import type { WorkItem } from "../../services/bus/index.ts"
import { ENTRY_FRAMING_BYTES, REF_ENTRY_BYTES } from "./names.ts"

/** A stored trajectory held by the serving side: one un-acked message of the READY stream. */
export interface ReadyEntry {
  /** READY stream sequence. */
  readonly seq: number
  /** The newest delivery of the message (a redelivery replaces it). */
  work: WorkItem
  readonly end: EpisodeEnd
  readonly tokens: number
  readonly arrivedMs: number
  /** The trajectory when it travels inline; undefined when it is in the object store. */
  readonly trajectory: Trajectory | undefined
  /** Encoded size of the inline trajectory; 0 for one in the object store. */
  readonly inlineBytes: number
  /** Where the trajectory is in the object store (stored so, or spilled there when served). */
  ref: ObjectRef | undefined
}

export type StalePolicy = "drop" | "downweight"

export interface PoolOptions {
  /** Too-stale trajectories are dropped, or served with weight decay^(staleness − η). */
  readonly stalePolicy: StalePolicy
  readonly staleDecay: number
  /** A group with no new member for this long is served as it is (its missing members are lost). */
  readonly groupTimeoutMs: number
}

/** A take request with its defaults resolved. */
export interface Cut {
  readonly maxTrajectories: number
  /** 0: no token bound. */
  readonly maxTokens: number
  readonly policyVersion: bigint
  /** η */
  readonly maxStaleness: number
  readonly wholeGroups: boolean
  readonly dropZeroVariance: boolean
  /** k; 0 when unknown (groups are then whole only by timeout). */
  readonly groupSize: number
  /** Bytes the batch's entries may take in the reply. */
  readonly budgetBytes: number
}

export interface Selected {
  readonly entry: ReadyEntry
  readonly staleness: number
  readonly weight: number
  /** Served as an object-store reference (stored so, or too large for the reply's room). */
  readonly asRef: boolean
}

export interface Dropped {
  readonly entry: ReadyEntry
  readonly reason: "stale" | "zero_variance"
}

export interface Step {
  /** Removed from the pool for good by this step (ack them). */
  readonly dropped: ReadonlyArray<Dropped>
  readonly selected: ReadonlyArray<Selected>
  readonly tokens: number
  /** A bound stopped the selection: waiting longer would not make the batch larger. */
  readonly full: boolean
}

interface Outstanding {
  readonly entries: ReadonlyArray<ReadyEntry>
  readonly deadlineMs: number
}

export const stalenessOf = (end: EpisodeEnd, policyVersion: bigint): number =>
  policyVersion > end.admittedPolicyVersion ? Number(policyVersion - end.admittedPolicyVersion) : 0

const inlineCost = (e: ReadyEntry) =>
  e.trajectory === undefined ? REF_ENTRY_BYTES : e.inlineBytes + ENTRY_FRAMING_BYTES

/**
 * The serving side's state: trajectories ready to serve (in arrival order) and batches served
 * but not yet confirmed. Every method is synchronous, so a step and the take that follows it
 * cannot interleave with another request.
 */
export class ReadyPool {
  private entries = new Map<number, ReadyEntry>()
  /** Every READY message held, ready or in an unconfirmed batch, by stream sequence. */
  private readonly held = new Map<number, ReadyEntry>()
  private readonly outstanding = new Map<string, Outstanding>()
  private readyBytes = 0
  private signal = Deferred.makeUnsafe<void>()

  constructor(private readonly options: PoolOptions) {}

  get size(): number {
    return this.entries.size
  }

  get bytes(): number {
    return this.readyBytes
  }

  get unconfirmed(): number {
    return this.held.size - this.entries.size
  }

  /** Every message held, for heartbeats. */
  heldItems(): WorkItem[] {
    return [...this.held.values()].map((e) => e.work)
  }

  /** Completes when the pool changes next (a new trajectory, a batch back from timeout). */
  get changed(): Effect.Effect<void> {
    return Deferred.await(this.signal)
  }

  private notify(): void {
    Deferred.doneUnsafe(this.signal, Effect.void)
    this.signal = Deferred.makeUnsafe<void>()
  }

  /** Adds a delivered READY message; a redelivery of one held only refreshes its handle. */
  add(entry: ReadyEntry): void {
    const known = this.held.get(entry.seq)
    if (known !== undefined) {
      known.work = entry.work
      return
    }
    this.held.set(entry.seq, entry)
    this.entries.set(entry.seq, entry)
    this.readyBytes += entry.inlineBytes
    this.notify()
  }

  private remove(e: ReadyEntry): void {
    if (this.entries.delete(e.seq)) this.readyBytes -= e.inlineBytes
  }

  /**
   * Drops what can never be served to this request (too stale; whole groups of equal rewards
   * when asked) and selects the next batch, without taking it.
   */
  step(cut: Cut, nowMs: number): Step {
    const dropped: Dropped[] = []
    const weights = new Map<number, { staleness: number; weight: number }>()
    for (const e of [...this.entries.values()]) {
      const staleness = stalenessOf(e.end, cut.policyVersion)
      const over = staleness - cut.maxStaleness
      if (over > 0 && this.options.stalePolicy === "drop") {
        this.remove(e)
        this.held.delete(e.seq)
        dropped.push({ entry: e, reason: "stale" })
        continue
      }
      weights.set(e.seq, {
        staleness,
        weight: over > 0 ? this.options.staleDecay ** over : 1,
      })
    }

    let units: ReadyEntry[][]
    if (cut.wholeGroups) {
      const groups = new Map<string, ReadyEntry[]>()
      for (const e of this.entries.values()) {
        const id = e.end.groupId === "" ? `\u0000${e.seq}` : e.end.groupId
        const g = groups.get(id)
        if (g === undefined) groups.set(id, [e])
        else g.push(e)
      }
      units = []
      for (const g of groups.values()) {
        const complete =
          (cut.groupSize > 0 && new Set(g.map((e) => e.end.sampleIndex)).size >= cut.groupSize) ||
          nowMs - Math.max(...g.map((e) => e.arrivedMs)) >= this.options.groupTimeoutMs
        if (!complete) continue
        const first = g[0]
        if (cut.dropZeroVariance && first && g.every((e) => e.end.reward === first.end.reward)) {
          for (const e of g) {
            this.remove(e)
            this.held.delete(e.seq)
            dropped.push({ entry: e, reason: "zero_variance" })
          }
          continue
        }
        units.push(g)
      }
    } else units = [...this.entries.values()].map((e) => [e])

    const selected: Selected[] = []
    let tokens = 0
    let bytes = 0
    let full = false
    const pick = (e: ReadyEntry, asRef: boolean) => {
      const w = weights.get(e.seq) ?? { staleness: 0, weight: 1 }
      selected.push({ entry: e, staleness: w.staleness, weight: w.weight, asRef })
      tokens += e.tokens
      bytes += asRef ? REF_ENTRY_BYTES : inlineCost(e)
    }
    for (const unit of units) {
      const uTokens = unit.reduce((n, e) => n + e.tokens, 0)
      const uBytes = unit.reduce((n, e) => n + inlineCost(e), 0)
      const fits =
        selected.length + unit.length <= cut.maxTrajectories &&
        (cut.maxTokens === 0 || tokens + uTokens <= cut.maxTokens) &&
        bytes + uBytes <= cut.budgetBytes
      if (fits) {
        for (const e of unit) pick(e, e.trajectory === undefined)
        continue
      }
      full = true
      if (selected.length === 0) {
        // Alone over a bound: served anyway, or it would block the buffer for good. What does
        // not fit the reply goes by reference (spilled to the object store).
        for (const e of unit) {
          const inline = e.trajectory !== undefined && bytes + inlineCost(e) <= cut.budgetBytes
          pick(e, !inline)
        }
      }
      break
    }
    if (selected.length >= cut.maxTrajectories || (cut.maxTokens > 0 && tokens >= cut.maxTokens))
      full = true
    return { dropped, selected, tokens, full }
  }

  /** Takes a step's selection out of the pool into an unconfirmed batch (none when empty id). */
  take(selected: ReadonlyArray<Selected>, batchId: string, deadlineMs: number): void {
    for (const s of selected) this.remove(s.entry)
    if (selected.length > 0)
      this.outstanding.set(batchId, { entries: selected.map((s) => s.entry), deadlineMs })
  }

  /** The learner confirmed a batch: its entries leave for good (ack them). */
  confirm(batchId: string): ReadonlyArray<ReadyEntry> | undefined {
    const o = this.outstanding.get(batchId)
    if (o === undefined) return undefined
    this.outstanding.delete(batchId)
    for (const e of o.entries) this.held.delete(e.seq)
    return o.entries
  }

  /** A batch could not be sent, or timed out: its entries are ready again, first in line. */
  putBack(batchId: string): void {
    const o = this.outstanding.get(batchId)
    if (o === undefined) return
    this.outstanding.delete(batchId)
    this.requeue(o.entries)
  }

  /** Unconfirmed batches past their deadline (to put back: they are served again). */
  overdue(nowMs: number): string[] {
    return [...this.outstanding].filter(([, o]) => o.deadlineMs <= nowMs).map(([id]) => id)
  }

  private requeue(entries: ReadonlyArray<ReadyEntry>): void {
    const rest = this.entries
    this.entries = new Map(entries.map((e) => [e.seq, e]))
    for (const [seq, e] of rest) this.entries.set(seq, e)
    for (const e of entries) this.readyBytes += e.inlineBytes
    this.notify()
  }
}
