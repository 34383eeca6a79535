export {
  Bus,
  type BusMessage,
  type BusShape,
  type ConsumerSpec,
  type Headers,
  type KvBucket,
  type KvEntry,
  type ObjectInfo,
  type ObjectStore,
  type PublishAck,
  type RequestOptions,
  type StreamSpec,
  type SubscribeOptions,
  type WorkItem,
} from "./bus.ts"
export {
  assembleBlobs,
  type Blob,
  BlobAssembler,
  CHUNK_ENVELOPE_BYTES,
  CorruptChunk,
  publishBlob,
  splitBlob,
} from "./chunks.ts"
export {
  BusClosed,
  type BusError,
  BusUnavailable,
  DecodeError,
  InvalidSubject,
  JetStreamError,
  KvConflict,
  NoResponders,
  PayloadTooLarge,
  ReplicasExceedCluster,
  RequestTimeout,
} from "./errors.ts"
export { busMetrics, instrumentBus, withBusMetrics } from "./instrumented.ts"
export { MemoryBusLive, type MemoryBusOptions, makeMemoryBus } from "./memory.ts"
export { type Subjects, subjectsFor } from "./naming.ts"
export { makeNatsBus, NatsBusLive } from "./nats.ts"
export type { NatsConnectOptions } from "./nats-connect.ts"
export { MAX_REPLICAS as MAX_NATS_REPLICAS } from "./nats-replicas.ts"
export { subjectFamily, subjectMatches } from "./subjects.ts"
