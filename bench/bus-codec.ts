/**
 * Where the t1 Bus spends CPU per message, without a network: the pieces of splitBlob (CRC-32,
 * protobuf encode) and of BlobAssembler.add (protobuf decode, CRC-32), timed separately.
 *
 *   npx tsx bench/bus-codec.ts [--size BYTES] [--iterations N]
 */
import { randomFillSync } from "node:crypto"
import { performance } from "node:perf_hooks"
import { parseArgs } from "node:util"
import { crc32 } from "node:zlib"
import { create, fromBinary, toBinary } from "@bufbuild/protobuf"
import { BlobChunkSchema } from "../proto/index.ts"
import { BlobAssembler, splitBlob } from "../services/bus/index.ts"

const { values } = parseArgs({
  strict: true,
  options: { size: { type: "string" }, iterations: { type: "string" } },
})
const size = Number(values.size ?? 256 * 1024)
const iterations = Number(values.iterations ?? 500)
if (
  !Number.isSafeInteger(size) ||
  size < 1 ||
  !Number.isSafeInteger(iterations) ||
  iterations < 1
) {
  process.stderr.write("usage: npx tsx bench/bus-codec.ts [--size BYTES] [--iterations N]\n")
  process.exit(2)
}

/**
 * The encoder proposed for splitBlob: protobuf-es encodes only the small fields; the data field
 * (6) is placed between them by hand into one exact-size, non-zeroed buffer. Fields 1-5, then 6,
 * then 7-8 is protobuf-es's own order, so the bytes equal toBinary's (checked below).
 */
const encodeChunkOneCopy = (f: {
  blobId: string
  seq: number
  total: number
  totalBytes: bigint
  crc32: number
  data: Uint8Array
  offset: bigint
  messageType: string
}): Uint8Array => {
  const head = toBinary(
    BlobChunkSchema,
    create(BlobChunkSchema, {
      blobId: f.blobId,
      seq: f.seq,
      total: f.total,
      totalBytes: f.totalBytes,
      crc32: f.crc32,
    }),
  )
  const tail = toBinary(
    BlobChunkSchema,
    create(BlobChunkSchema, { offset: f.offset, messageType: f.messageType }),
  )
  const len: number[] = []
  if (f.data.byteLength > 0) {
    len.push(0x32) // field 6, wire type 2
    let n = f.data.byteLength
    while (n > 0x7f) {
      len.push((n & 0x7f) | 0x80)
      n >>>= 7
    }
    len.push(n)
  }
  const out = Buffer.allocUnsafe(head.byteLength + len.length + f.data.byteLength + tail.byteLength)
  out.set(head, 0)
  out.set(len, head.byteLength)
  out.set(f.data, head.byteLength + len.length)
  out.set(tail, head.byteLength + len.length + f.data.byteLength)
  return out
}

const payload = new Uint8Array(size)
randomFillSync(payload)
const maxMessageBytes = 1024 * 1024
const encoded = splitBlob(payload, { blobId: "b-0", maxMessageBytes })[0] ?? new Uint8Array()
let sink = 0

const fieldsOf = (i: number) => ({
  blobId: `b-${i}`,
  seq: 0,
  total: 1,
  totalBytes: BigInt(size),
  crc32: crc32(payload),
  data: payload,
  offset: 0n,
  messageType: "",
})
const same = (a: Uint8Array, b: Uint8Array) => Buffer.compare(a, b) === 0
if (!same(encodeChunkOneCopy(fieldsOf(0)), encoded)) {
  throw new Error("one-copy encoder differs from toBinary")
}

/** Best of 5 batches: the least-disturbed estimate on a shared machine. */
const time = (name: string, f: (i: number) => void): void => {
  for (let i = 0; i < Math.min(200, iterations); i++) f(i) // warm-up
  let best = Number.POSITIVE_INFINITY
  for (let batch = 0; batch < 5; batch++) {
    const t0 = performance.now()
    for (let i = 0; i < iterations; i++) f(i)
    best = Math.min(best, ((performance.now() - t0) * 1000) / iterations)
  }
  const mbs = size / best // bytes per µs = MB/s
  process.stdout.write(
    `${name.padEnd(44)} ${best.toFixed(1).padStart(8)} µs/msg ${mbs.toFixed(0).padStart(7)} MB/s\n`,
  )
}

process.stdout.write(`${size} B payload, ${iterations} iterations\n`)
time("copy (new Uint8Array + set) [reference]", () => {
  const b = new Uint8Array(size)
  b.set(payload)
  sink += b[0] ?? 0
})
time("Uint8Array.slice [reference]", () => {
  sink += payload.slice()[0] ?? 0
})
time("crc32 (node:zlib)", () => {
  sink += crc32(payload)
})
time("create + toBinary (BlobChunk, no crc)", (i) => {
  const m = create(BlobChunkSchema, {
    blobId: `b-${i}`,
    seq: 0,
    total: 1,
    totalBytes: BigInt(size),
    crc32: 0,
    data: payload,
    offset: 0n,
    messageType: "",
  })
  sink += toBinary(BlobChunkSchema, m).byteLength
})
time("splitBlob (crc32 + encode)", (i) => {
  sink += splitBlob(payload, { blobId: `b-${i}`, maxMessageBytes })[0]?.byteLength ?? 0
})
time("proposed: crc32 + one-copy encode", (i) => {
  sink += encodeChunkOneCopy(fieldsOf(i)).byteLength
})
time("fromBinary (BlobChunk)", () => {
  sink += fromBinary(BlobChunkSchema, encoded).data.byteLength
})
const assembler = new BlobAssembler()
time("BlobAssembler.add (decode + crc32 verify)", () => {
  sink += assembler.add(encoded)?.data.byteLength ?? 0
})
time("split + add (t1 codec, both sides)", (i) => {
  for (const c of splitBlob(payload, { blobId: `b-${i}`, maxMessageBytes })) {
    sink += assembler.add(c)?.data.byteLength ?? 0
  }
})
time("proposed split + add (both sides)", (i) => {
  sink += assembler.add(encodeChunkOneCopy(fieldsOf(i)))?.data.byteLength ?? 0
})
process.stdout.write(`(sink ${sink % 10})\n`)
