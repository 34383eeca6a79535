import { Data } from "effect"

/** The bus could not be reached (at start, after the connect retries ran out). */
export class BusUnavailable extends Data.TaggedError("BusUnavailable")<{
  readonly servers: string
  readonly reason: string
}> {
  override get message(): string {
    return `NATS at ${this.servers} is unreachable: ${this.reason}`
  }
}

/** Rejected before sending: NATS would close the connection on an over-limit message. */
export class PayloadTooLarge extends Data.TaggedError("PayloadTooLarge")<{
  readonly subject: string
  readonly bytes: number
  readonly maxPayload: number
}> {
  override get message(): string {
    return `message for ${this.subject} is ${this.bytes} bytes, over the bus max_payload of ${this.maxPayload} bytes (stream it in chunks)`
  }
}

export class RequestTimeout extends Data.TaggedError("RequestTimeout")<{
  readonly subject: string
  readonly timeoutMs: number
}> {
  override get message(): string {
    return `no reply on ${this.subject} within ${this.timeoutMs} ms`
  }
}

export class NoResponders extends Data.TaggedError("NoResponders")<{ readonly subject: string }> {
  override get message(): string {
    return `no responders are subscribed to ${this.subject}`
  }
}

export class BusClosed extends Data.TaggedError("BusClosed")<{ readonly operation: string }> {
  override get message(): string {
    return `bus is closed (during ${this.operation})`
  }
}

/** A JetStream, KV or object-store operation failed on the server or in the client. */
export class JetStreamError extends Data.TaggedError("JetStreamError")<{
  readonly operation: string
  readonly reason: string
}> {
  override get message(): string {
    return `${this.operation} failed: ${this.reason}`
  }
}

/** A compare-and-set on a KV key lost: the key exists, or its revision moved on. */
export class KvConflict extends Data.TaggedError("KvConflict")<{
  readonly bucket: string
  readonly key: string
  readonly expectedRevision: number
}> {
  override get message(): string {
    return `kv ${this.bucket}/${this.key}: revision is not ${this.expectedRevision}`
  }
}

/** A payload that does not decode as the message the subject carries. */
export class DecodeError extends Data.TaggedError("DecodeError")<{
  readonly subject: string
  readonly schema: string
  readonly reason: string
}> {
  override get message(): string {
    return `undecodable ${this.schema} on ${this.subject}: ${this.reason}`
  }
}

/**
 * More replicas asked (`--nats-replicas`) than the NATS deployment has servers: a single server
 * holds one copy of a stream, a cluster at most one per server. `stream` names the stream whose
 * creation the server refused, when it was a creation and not the check at connect.
 */
export class ReplicasExceedCluster extends Data.TaggedError("ReplicasExceedCluster")<{
  readonly replicas: number
  /** Servers the cluster shows (1 for a server without a cluster block). */
  readonly clusterSize: number
  readonly servers: ReadonlyArray<string>
  readonly stream?: string
}> {
  override get message(): string {
    const where =
      this.clusterSize === 1 && this.servers.length <= 1
        ? `the NATS server at ${this.servers.join(", ") || "?"} is not clustered (one copy of each stream at most)`
        : `the NATS cluster shows ${this.clusterSize} server(s) (${this.servers.join(", ")})`
    const what = this.stream === undefined ? "" : ` for stream ${this.stream}`
    return `--nats-replicas ${this.replicas}${what} exceeds the cluster: ${where}; pass --nats-replicas ${this.clusterSize} or fewer, or start t1 once every node is up`
  }
}

export type BusError =
  | BusUnavailable
  | PayloadTooLarge
  | RequestTimeout
  | NoResponders
  | BusClosed
  | JetStreamError
  | KvConflict
  | InvalidSubject
  | ReplicasExceedCluster

export const reasonOf = (cause: unknown): string =>
  cause instanceof Error ? cause.message : typeof cause === "string" ? cause : String(cause)

export class InvalidSubject extends Data.TaggedError("InvalidSubject")<{
  readonly subject: string
  readonly reason: string
}> {
  override get message(): string {
    return `invalid subject ${JSON.stringify(this.subject)}: ${this.reason}`
  }
}
