import { Context, type Effect, type Option, type Scope, type Stream } from "effect"
import type {
  BusClosed,
  BusError,
  JetStreamError,
  KvConflict,
  NoResponders,
  PayloadTooLarge,
  RequestTimeout,
} from "./errors.ts"

export type Headers = Readonly<Record<string, string>>

export interface BusMessage {
  readonly subject: string
  readonly data: Uint8Array
  readonly headers: Headers
  /** Reply inbox when the sender awaits an answer (see Bus.respond). */
  readonly reply: string | undefined
}

/** A message taken from a JetStream work queue; it stays owed until acked or termed. */
export interface WorkItem extends BusMessage {
  readonly stream: string
  readonly streamSeq: number
  /** 1 on first delivery; >1 on a redelivery. */
  readonly deliveryCount: number
  readonly ack: Effect.Effect<void, BusError>
  /** Give it back; redelivered after delayMs (immediately when absent). */
  readonly nak: (delayMs?: number) => Effect.Effect<void, BusError>
  /** Still working on it: restarts the ack-wait clock. */
  readonly working: Effect.Effect<void, BusError>
  /** Never redeliver (poison message). */
  readonly term: (reason?: string) => Effect.Effect<void, BusError>
}

export interface StreamSpec {
  readonly name: string
  readonly subjects: ReadonlyArray<string>
  /** workqueue: a message is removed when acked; limits: kept until age/size limits. */
  readonly retention: "workqueue" | "limits"
  readonly storage?: "file" | "memory"
  readonly maxAgeMs?: number
  /** Window in which a repeated Nats-Msg-Id is dropped; default 2 minutes. */
  readonly duplicateWindowMs?: number
}

export interface ConsumerSpec {
  readonly stream: string
  readonly durable: string
  readonly filterSubject?: string
  /** Redelivered when not acked (nor marked working) within this time. */
  readonly ackWaitMs: number
  /** Delivery attempts before the server gives up on a message. */
  readonly maxDeliver: number
  readonly maxAckPending?: number
}

export interface PublishAck {
  readonly stream: string
  readonly seq: number
  /** True when the Nats-Msg-Id was seen inside the duplicate window: nothing was stored. */
  readonly duplicate: boolean
}

export interface KvEntry {
  readonly key: string
  readonly value: Uint8Array
  readonly revision: number
  readonly operation: "put" | "delete"
}

export interface KvBucket {
  readonly name: string
  readonly get: (key: string) => Effect.Effect<Option.Option<KvEntry>, BusError>
  /** Returns the new revision. */
  readonly put: (key: string, value: Uint8Array) => Effect.Effect<number, BusError>
  /** Put only when the key does not exist yet. */
  readonly create: (key: string, value: Uint8Array) => Effect.Effect<number, BusError | KvConflict>
  /** Compare-and-set on the key's revision. */
  readonly update: (
    key: string,
    value: Uint8Array,
    revision: number,
  ) => Effect.Effect<number, BusError | KvConflict>
  readonly delete: (key: string) => Effect.Effect<void, BusError>
  readonly keys: Effect.Effect<ReadonlyArray<string>, BusError>
  /**
   * Current values of the matching keys (wildcards `*` and `>`), then every change.
   * The watch is registered before the effect returns.
   */
  readonly watch: (
    key?: string,
  ) => Effect.Effect<Stream.Stream<KvEntry, BusError>, BusError, Scope.Scope>
}

export interface ObjectInfo {
  readonly name: string
  readonly size: number
}

export interface ObjectStore {
  readonly name: string
  readonly put: (name: string, data: Uint8Array) => Effect.Effect<ObjectInfo, BusError>
  readonly get: (name: string) => Effect.Effect<Option.Option<Uint8Array>, BusError>
  readonly delete: (name: string) => Effect.Effect<void, BusError>
}

export interface SubscribeOptions {
  /** Queue group: each message goes to one member of the group. */
  readonly queue?: string
}

export interface RequestOptions {
  readonly timeoutMs: number
  readonly headers?: Headers
}

export interface BusShape {
  /** Largest message (payload plus headers) the bus accepts, in bytes. */
  readonly maxPayload: number
  readonly publish: (
    subject: string,
    data: Uint8Array,
    headers?: Headers,
  ) => Effect.Effect<void, PayloadTooLarge | BusClosed | BusError>
  /** The subscription is live on the server before the effect returns; closed with the scope. */
  readonly subscribe: (
    subject: string,
    options?: SubscribeOptions,
  ) => Effect.Effect<Stream.Stream<BusMessage, BusError>, BusError, Scope.Scope>
  readonly request: (
    subject: string,
    data: Uint8Array,
    options: RequestOptions,
  ) => Effect.Effect<BusMessage, PayloadTooLarge | RequestTimeout | NoResponders | BusError>
  /** Answer a request received through subscribe. */
  readonly respond: (
    message: BusMessage,
    data: Uint8Array,
    headers?: Headers,
  ) => Effect.Effect<void, PayloadTooLarge | BusError>
  readonly ensureStream: (spec: StreamSpec) => Effect.Effect<void, JetStreamError | BusError>
  /** Stored in the stream bound to the subject; msgId (Nats-Msg-Id) deduplicates retries. */
  readonly jsPublish: (
    subject: string,
    data: Uint8Array,
    options?: { readonly msgId?: string; readonly headers?: Headers },
  ) => Effect.Effect<PublishAck, PayloadTooLarge | JetStreamError | BusError>
  readonly ensureConsumer: (spec: ConsumerSpec) => Effect.Effect<void, JetStreamError | BusError>
  /**
   * Pull from a durable consumer; at most `maxInFlight` items are held un-acked by this puller.
   * Pulling stops when the stream's consumer is interrupted; un-acked items are redelivered.
   */
  readonly consume: (
    stream: string,
    durable: string,
    options?: { readonly maxInFlight?: number },
  ) => Stream.Stream<WorkItem, BusError>
  readonly kv: (
    bucket: string,
    options?: { readonly history?: number },
  ) => Effect.Effect<KvBucket, BusError>
  readonly objectStore: (bucket: string) => Effect.Effect<ObjectStore, BusError>
}

export class Bus extends Context.Service<Bus, BusShape>()("t1/Bus") {}
