import { fromBinary, toBinary } from "@bufbuild/protobuf"
import { Effect, Stream } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { BlobChunkSchema } from "../../proto/index.ts"
import { Bus } from "./bus.ts"
import { assembleBlobs, BlobAssembler, CorruptChunk, publishBlob, splitBlob } from "./chunks.ts"
import { MemoryBusLive } from "./memory.ts"

const shuffle = <A>(xs: A[], seed: number): A[] => {
  const out = [...xs]
  let s = seed
  for (let i = out.length - 1; i > 0; i--) {
    s = (s * 1103515245 + 12345) & 0x7fffffff
    const j = s % (i + 1)
    ;[out[i], out[j]] = [out[j] as A, out[i] as A]
  }
  return out
}

describe("blob chunks", () => {
  it("every chunk fits the message limit and the blob reassembles in any order, despite repeats", () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 20_000 }),
        fc.integer({ min: 1100, max: 6000 }),
        fc.integer(),
        (blob, maxMessageBytes, seed) => {
          const chunks = splitBlob(blob, { blobId: "b", maxMessageBytes })
          for (const c of chunks) expect(c.byteLength).toBeLessThanOrEqual(maxMessageBytes)
          const assembler = new BlobAssembler()
          const arrivals = shuffle([...chunks, ...chunks.slice(0, 2)], seed)
          const done = arrivals.map((c) => assembler.add(c)).filter((b) => b !== undefined)
          expect(done.length).toBeGreaterThanOrEqual(1)
          expect(Buffer.compare(done[0]?.data ?? new Uint8Array(), blob)).toBe(0)
        },
      ),
      { numRuns: 200 },
    )
  })

  it("encodes each chunk byte for byte as protobuf-es would", () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 5000 }),
        fc.integer({ min: 1100, max: 3000 }),
        fc.string(),
        (blob, maxMessageBytes, messageType) => {
          for (const c of splitBlob(blob, { blobId: "id-1", maxMessageBytes, messageType })) {
            expect(
              Buffer.compare(toBinary(BlobChunkSchema, fromBinary(BlobChunkSchema, c)), c),
            ).toBe(0)
          }
        },
      ),
      { numRuns: 200 },
    )
  })

  it("rejects a corrupted chunk with CorruptChunk, never a wrong blob", () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 1, maxLength: 5000 }),
        fc.nat(),
        fc.integer({ min: 1, max: 255 }),
        (blob, at, flip) => {
          const [first] = splitBlob(blob, { blobId: "b", maxMessageBytes: 1_000_000 })
          const chunk = fromBinary(BlobChunkSchema, first as Uint8Array)
          const data = chunk.data.slice()
          const i = at % data.length
          data[i] = (data[i] as number) ^ flip
          const bad = toBinary(BlobChunkSchema, { ...chunk, data })
          expect(() => new BlobAssembler().add(bad)).toThrow(CorruptChunk)
        },
      ),
      { numRuns: 200 },
    )
  })

  it("rejects truncated and garbage input with CorruptChunk", () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 3000 }), fc.nat(), (blob, cut) => {
        const [whole] = splitBlob(blob, { blobId: "b", maxMessageBytes: 1_000_000 })
        const truncated = (whole as Uint8Array).subarray(0, cut % (whole as Uint8Array).length)
        let result: unknown
        try {
          result = new BlobAssembler().add(truncated)
        } catch (e) {
          expect(e).toBeInstanceOf(CorruptChunk)
          return
        }
        // A cut that happens to leave a decodable message must not yield the original blob.
        expect(
          result === undefined || (result as { data: Uint8Array }).data.length !== blob.length,
        ).toBe(true)
      }),
    )
  })

  it("bounds memory: the least recently touched incomplete blob is dropped", () => {
    const assembler = new BlobAssembler({ maxPending: 2 })
    for (const id of ["a", "b", "c"]) {
      const [first] = splitBlob(new Uint8Array(5000), { blobId: id, maxMessageBytes: 2000 })
      assembler.add(first as Uint8Array)
    }
    expect(assembler.pendingCount).toBe(2)
    expect(assembler.dropped).toBe(1)
  })

  it("streams a blob larger than max_payload over the bus", async () => {
    const blob = new Uint8Array(3 * 1024 * 1024 + 5).map((_, i) => i % 251)
    const got = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const bus = yield* Bus
          const sub = yield* bus.subscribe("t1.blobs")
          const sent = yield* publishBlob(bus, "t1.blobs", blob, {
            blobId: "w1",
            messageType: "t1.v1.Batch",
          })
          const [back] = yield* Stream.runCollect(Stream.take(assembleBlobs(sub), 1))
          return { sent, back }
        }),
      ).pipe(Effect.provide(MemoryBusLive())),
    )
    expect(got.sent).toBe(4)
    expect(got.back?.messageType).toBe("t1.v1.Batch")
    expect(Buffer.compare(got.back?.data ?? new Uint8Array(), blob)).toBe(0)
  })
})
