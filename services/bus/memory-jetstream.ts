import type { ConsumerSpec, Headers, PublishAck, StreamSpec } from "./bus.ts"
import { subjectMatches } from "./subjects.ts"

export interface StoredMessage {
  readonly seq: number
  readonly subject: string
  readonly data: Uint8Array
  readonly headers: Headers
  readonly storedAt: number
}

export interface Delivery {
  readonly message: StoredMessage
  readonly deliveryCount: number
}

/** A pull client of a consumer; holds at most `capacity` un-acked deliveries. */
export interface Puller {
  readonly capacity: number
  readonly inFlight: Set<number>
  readonly push: (delivery: Delivery) => void
}

interface Pending {
  deliveryCount: number
  puller: Puller
  timer: NodeJS.Timeout
}

const DEFAULT_DUPLICATE_WINDOW_MS = 120_000

/** JetStream semantics in one process: stored log, dedup window, durable pull consumers. */
export class MemoryStream {
  readonly messages = new Map<number, StoredMessage>()
  readonly consumers = new Map<string, MemoryConsumer>()
  private lastSeq = 0
  private readonly seenIds = new Map<string, { seq: number; at: number }>()

  constructor(public spec: StreamSpec) {}

  accepts(subject: string): boolean {
    return this.spec.subjects.some((p) => subjectMatches(p, subject))
  }

  /** Stores one message at `now` (the publisher's Clock: the duplicate window and max age). */
  append(
    subject: string,
    data: Uint8Array,
    headers: Headers,
    now: number,
    msgId?: string,
  ): PublishAck {
    const window = this.spec.duplicateWindowMs ?? DEFAULT_DUPLICATE_WINDOW_MS
    for (const [id, seen] of this.seenIds) if (now - seen.at > window) this.seenIds.delete(id)
    if (msgId !== undefined) {
      const seen = this.seenIds.get(msgId)
      if (seen !== undefined) return { stream: this.spec.name, seq: seen.seq, duplicate: true }
    }
    this.expire(now)
    const seq = ++this.lastSeq
    const message: StoredMessage = { seq, subject, data, headers, storedAt: now }
    this.messages.set(seq, message)
    if (msgId !== undefined) this.seenIds.set(msgId, { seq, at: now })
    for (const consumer of this.consumers.values()) consumer.offer(message)
    return { stream: this.spec.name, seq, duplicate: false }
  }

  /** Work-queue retention: an acknowledged (or terminated) message leaves the stream. */
  settled(seq: number): void {
    if (this.spec.retention === "workqueue") this.messages.delete(seq)
  }

  private expire(now: number): void {
    const maxAge = this.spec.maxAgeMs
    if (maxAge === undefined || maxAge <= 0) return
    for (const [seq, m] of this.messages) {
      if (now - m.storedAt <= maxAge) break
      this.messages.delete(seq)
    }
  }

  close(): void {
    for (const consumer of this.consumers.values()) consumer.close()
  }
}

export class MemoryConsumer {
  private readonly ready: number[] = []
  private readonly pending = new Map<number, Pending>()
  private readonly pullers = new Set<Puller>()
  private readonly delayed = new Set<NodeJS.Timeout>()
  /** Delivery counts survive a nak so that maxDeliver bounds the attempts. */
  private readonly attempts = new Map<number, number>()

  constructor(
    public spec: ConsumerSpec,
    private readonly stream: MemoryStream,
  ) {
    for (const message of stream.messages.values()) this.offer(message)
  }

  offer(message: StoredMessage): void {
    if (this.spec.filterSubject !== undefined) {
      if (!subjectMatches(this.spec.filterSubject, message.subject)) return
    }
    this.ready.push(message.seq)
    this.pump()
  }

  attach(puller: Puller): () => void {
    this.pullers.add(puller)
    this.pump()
    return () => {
      // Like a NATS pull client that goes away: its deliveries wait out their ack wait.
      this.pullers.delete(puller)
    }
  }

  ack(seq: number): void {
    this.settle(seq)
  }

  term(seq: number): void {
    this.settle(seq)
  }

  nak(seq: number, delayMs: number): void {
    const p = this.release(seq)
    if (p === undefined) return
    if (delayMs <= 0) {
      this.requeue(seq)
      return
    }
    const timer = setTimeout(() => {
      this.delayed.delete(timer)
      this.requeue(seq)
    }, delayMs)
    timer.unref()
    this.delayed.add(timer)
  }

  working(seq: number): void {
    const p = this.pending.get(seq)
    if (p === undefined) return
    clearTimeout(p.timer)
    p.timer = this.ackTimer(seq)
  }

  close(): void {
    for (const p of this.pending.values()) clearTimeout(p.timer)
    for (const t of this.delayed) clearTimeout(t)
    this.pending.clear()
    this.delayed.clear()
    this.pullers.clear()
  }

  private settle(seq: number): void {
    if (this.release(seq) === undefined) return
    this.attempts.delete(seq)
    this.stream.settled(seq)
    this.pump()
  }

  private release(seq: number): Pending | undefined {
    const p = this.pending.get(seq)
    if (p === undefined) return undefined
    clearTimeout(p.timer)
    this.pending.delete(seq)
    p.puller.inFlight.delete(seq)
    return p
  }

  private requeue(seq: number): void {
    // maxDeliver <= 0 means unlimited, as in NATS (-1).
    if (this.spec.maxDeliver > 0 && (this.attempts.get(seq) ?? 0) >= this.spec.maxDeliver) return
    if (!this.stream.messages.has(seq)) return
    // Redeliveries go first, in sequence order, as NATS does.
    let i = 0
    while (i < this.ready.length && (this.ready[i] ?? 0) < seq) i++
    this.ready.splice(i, 0, seq)
    this.pump()
  }

  private ackTimer(seq: number): NodeJS.Timeout {
    const timer = setTimeout(() => {
      if (this.release(seq) !== undefined) this.requeue(seq)
    }, this.spec.ackWaitMs)
    timer.unref()
    return timer
  }

  private pump(): void {
    const maxAckPending = this.spec.maxAckPending ?? Number.POSITIVE_INFINITY
    while (this.ready.length > 0 && this.pending.size < maxAckPending) {
      const puller = [...this.pullers].find((p) => p.inFlight.size < p.capacity)
      if (puller === undefined) return
      const seq = this.ready.shift() as number
      const message = this.stream.messages.get(seq)
      if (message === undefined) continue
      const deliveryCount = (this.attempts.get(seq) ?? 0) + 1
      this.attempts.set(seq, deliveryCount)
      this.pending.set(seq, { deliveryCount, puller, timer: this.ackTimer(seq) })
      puller.inFlight.add(seq)
      // Rotate so that a pool of pullers shares the work round-robin.
      this.pullers.delete(puller)
      this.pullers.add(puller)
      puller.push({ message, deliveryCount })
    }
  }
}
