import { create, fromBinary, toBinary } from "@bufbuild/protobuf"
import { crc32 } from "@node-rs/crc32"
import { Array as Arr, Data, Effect, Stream } from "effect"
import { type BlobChunk, BlobChunkSchema } from "../../proto/index.ts"
import type { BusMessage, BusShape } from "./bus.ts"
import type { BusError } from "./errors.ts"

/** Room left in every message for BlobChunk's own fields (ids, offsets, CRC, headers). */
export const CHUNK_ENVELOPE_BYTES = 1024

export class CorruptChunk extends Data.TaggedError("CorruptChunk")<{
  readonly blobId: string
  readonly seq: number
  readonly reason: string
}> {
  override get message(): string {
    return `blob ${this.blobId} chunk ${this.seq}: ${this.reason}`
  }
}

export interface Blob {
  readonly blobId: string
  readonly messageType: string
  readonly data: Uint8Array
}

const DATA_FIELD_TAG = 0x32 // field 6, wire type 2 (length-delimited)

const varintLength = (n: number): number => {
  let len = 1
  for (let v = n; v >= 0x80; v = Math.floor(v / 128)) len++
  return len
}

const writeVarint = (out: Uint8Array, at: number, n: number): number => {
  let v = n
  let i = at
  while (v >= 0x80) {
    out[i++] = (v & 0x7f) | 0x80
    v = Math.floor(v / 128)
  }
  out[i++] = v
  return i
}

/**
 * One BlobChunk on the wire, byte-identical to toBinary's output, with the data copied once:
 * toBinary would grow a buffer by doubling up to twice the chunk, then copy it again.
 */
const encodeChunk = (chunk: Omit<BlobChunk, "$typeName" | "$unknown">): Uint8Array => {
  const head = toBinary(
    BlobChunkSchema,
    create(BlobChunkSchema, {
      blobId: chunk.blobId,
      seq: chunk.seq,
      total: chunk.total,
      totalBytes: chunk.totalBytes,
      crc32: chunk.crc32,
    }),
  )
  const tail = toBinary(
    BlobChunkSchema,
    create(BlobChunkSchema, { offset: chunk.offset, messageType: chunk.messageType }),
  )
  const n = chunk.data.byteLength
  const dataField = n === 0 ? 0 : 1 + varintLength(n) + n
  const out = new Uint8Array(head.byteLength + dataField + tail.byteLength)
  out.set(head, 0)
  let at = head.byteLength
  if (n > 0) {
    out[at++] = DATA_FIELD_TAG
    at = writeVarint(out, at, n)
    out.set(chunk.data, at)
    at += n
  }
  out.set(tail, at)
  return out
}

/** Encoded BlobChunk messages, in order, each at most maxMessageBytes long. */
export const splitBlob = (
  blob: Uint8Array,
  options: {
    readonly blobId: string
    readonly maxMessageBytes: number
    readonly messageType?: string
  },
): Uint8Array[] => {
  const room = options.maxMessageBytes - CHUNK_ENVELOPE_BYTES - options.blobId.length
  if (room <= 0) {
    throw new RangeError(`maxMessageBytes ${options.maxMessageBytes} leaves no room for data`)
  }
  const total = Math.max(1, Math.ceil(blob.byteLength / room))
  const out: Uint8Array[] = []
  for (let seq = 0; seq < total; seq++) {
    const offset = seq * room
    const data = blob.subarray(offset, Math.min(blob.byteLength, offset + room))
    out.push(
      encodeChunk({
        blobId: options.blobId,
        seq,
        total,
        totalBytes: BigInt(blob.byteLength),
        crc32: crc32(data),
        data,
        offset: BigInt(offset),
        messageType: options.messageType ?? "",
      }),
    )
  }
  return out
}

interface Partial {
  readonly total: number
  readonly totalBytes: number
  readonly messageType: string
  readonly buffer: Uint8Array
  readonly have: Set<number>
  /** The assembler's chunk count when this blob last got one: recency without a clock. */
  touched: number
}

/**
 * Reassembles blobs from chunks that may arrive out of order or twice. Memory is bounded:
 * at most maxPending incomplete blobs are held (the least recently touched is dropped).
 */
export class BlobAssembler {
  private readonly pending = new Map<string, Partial>()
  private chunksSeen = 0
  dropped = 0

  constructor(
    private readonly options: { readonly maxPending?: number; readonly maxBlobBytes?: number } = {},
  ) {}

  /** Returns the finished blob when this chunk completes it, else undefined. */
  add(encoded: Uint8Array): Blob | undefined {
    let chunk: BlobChunk
    try {
      chunk = fromBinary(BlobChunkSchema, encoded)
    } catch (cause) {
      throw new CorruptChunk({ blobId: "?", seq: -1, reason: `undecodable: ${String(cause)}` })
    }
    const { blobId, seq } = chunk
    const fail = (reason: string) => new CorruptChunk({ blobId, seq, reason })
    if (crc32(chunk.data) !== chunk.crc32) throw fail("CRC-32 mismatch")
    const totalBytes = Number(chunk.totalBytes)
    const offset = Number(chunk.offset)
    if (chunk.total < 1 || seq >= chunk.total) throw fail(`seq outside 0..${chunk.total - 1}`)
    if (totalBytes > (this.options.maxBlobBytes ?? 1 << 30)) throw fail("blob too large")
    if (offset + chunk.data.byteLength > totalBytes) throw fail("data beyond total_bytes")
    if (chunk.total === 1) {
      if (chunk.data.byteLength !== totalBytes) throw fail("single chunk shorter than blob")
      return { blobId, messageType: chunk.messageType, data: chunk.data }
    }
    let p = this.pending.get(blobId)
    if (p === undefined) {
      p = {
        total: chunk.total,
        totalBytes,
        messageType: chunk.messageType,
        buffer: new Uint8Array(totalBytes),
        have: new Set(),
        touched: 0,
      }
      this.pending.set(blobId, p)
      this.evict()
    } else if (p.total !== chunk.total || p.totalBytes !== totalBytes) {
      throw fail("total or total_bytes differ from earlier chunks")
    }
    p.touched = ++this.chunksSeen
    if (!p.have.has(seq)) {
      p.buffer.set(chunk.data, offset)
      p.have.add(seq)
    }
    if (p.have.size < p.total) return undefined
    this.pending.delete(blobId)
    return { blobId, messageType: p.messageType, data: p.buffer }
  }

  get pendingCount(): number {
    return this.pending.size
  }

  private evict(): void {
    const max = this.options.maxPending ?? 64
    while (this.pending.size > max) {
      const oldest = [...this.pending.entries()].sort((a, b) => a[1].touched - b[1].touched)[0]
      if (oldest === undefined) return
      this.pending.delete(oldest[0])
      this.dropped++
    }
  }
}

/** Publishes a blob of any size as ordered, checksummed chunks that each fit max_payload. */
export const publishBlob = (
  bus: BusShape,
  subject: string,
  blob: Uint8Array,
  options: { readonly blobId: string; readonly messageType?: string },
): Effect.Effect<number, BusError> =>
  Effect.suspend(() => {
    const chunks = splitBlob(blob, { ...options, maxMessageBytes: bus.maxPayload })
    return Effect.as(
      Effect.forEach(chunks, (c) => bus.publish(subject, c), { discard: true }),
      chunks.length,
    )
  })

const addChunk = (assembler: BlobAssembler, data: Uint8Array): Blob | undefined => {
  try {
    return assembler.add(data)
  } catch (e) {
    throw e instanceof CorruptChunk
      ? e
      : new CorruptChunk({ blobId: "?", seq: -1, reason: String(e) })
  }
}

/** Turns a subscription carrying chunks into a stream of whole blobs. */
export const assembleBlobs = <E>(
  messages: Stream.Stream<BusMessage, E>,
  assembler: BlobAssembler = new BlobAssembler(),
): Stream.Stream<Blob, E | CorruptChunk> =>
  messages.pipe(
    // Whole arrays at a time: per-element effects cost more than the CRC at these sizes.
    Stream.mapArrayEffect((batch) =>
      Effect.try({
        try: () => Arr.map(batch, (m) => addChunk(assembler, m.data)),
        catch: (e) => e as CorruptChunk,
      }),
    ),
    Stream.filter((b): b is Blob => b !== undefined),
  )
