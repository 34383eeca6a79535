import type { Effect } from "effect"
import type { BusMessage, WorkItem } from "../bus/index.ts"
import type { MalformedMessage } from "./errors.ts"

/** Where an actor's messages come from. */
export type Mailbox =
  /** Core subscription: events and request/reply; queue group to share load between replicas. */
  | { readonly kind: "subscription"; readonly subject: string; readonly queue?: string }
  /** A durable JetStream pull consumer with work-queue semantics. */
  | {
      readonly kind: "work-queue"
      readonly stream: string
      readonly durable: string
      /** Send working() this often while a handler runs; set below the consumer's ack wait. */
      readonly heartbeatMs?: number
    }

export interface Delivery {
  readonly envelope: BusMessage
  /** Set for work-queue deliveries. */
  readonly item: WorkItem | undefined
  /** Answer a request (no-op when the message is not a request). */
  readonly respond: (data: Uint8Array) => Effect.Effect<void>
}

/**
 * An actor: a mailbox, a decoder and a handler. The runtime owns everything else: bounded
 * concurrency, ack/nak, heartbeats, malformed-message accounting, supervision and shutdown.
 */
export interface ActorSpec<M, E, R> {
  readonly name: string
  readonly mailbox: Mailbox
  readonly decode: (bytes: Uint8Array) => Effect.Effect<M, MalformedMessage>
  readonly handle: (message: M, delivery: Delivery) => Effect.Effect<void, E, R>
}

export interface RunOptions {
  /** Messages handled at once; default 1. */
  readonly concurrency?: number
  /** On shutdown, how long in-flight handlers may run before they are interrupted (and nak'd). */
  readonly shutdownGraceMs?: number
  /** First restart delay of a failed mailbox; doubles up to maxRestartDelayMs. */
  readonly restartDelayMs?: number
  readonly maxRestartDelayMs?: number
  /** Delay of the first redelivery of a failed work item; doubles per attempt. */
  readonly retryDelayMs?: number
  readonly maxRetryDelayMs?: number
  /** Log start and shutdown at Debug instead of Info (for many short-lived actors). */
  readonly quiet?: boolean
}
