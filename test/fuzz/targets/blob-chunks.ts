import { create, fromBinary, ScalarType, toBinary } from "@bufbuild/protobuf"
import { crc32 } from "@node-rs/crc32"
import { type BlobChunk, BlobChunkSchema } from "../../../proto/index.ts"
import { BlobAssembler, CHUNK_ENVELOPE_BYTES, splitBlob } from "../../../services/bus/chunks.ts"
import {
  ACCEPTED,
  crash,
  type FuzzTarget,
  REJECTED,
  type Verdict,
  verdictOfThrow,
} from "../harness.ts"
import { mutateProto, toHex } from "../mutate.ts"
import { randomScalar } from "../proto-gen.ts"
import type { Random } from "../random.ts"

/**
 * Chunked blobs as a subscriber sees them: the chunks of one or two blobs, reordered, repeated,
 * missing, some with a field changed and the CRC recomputed (so the change gets past the
 * checksum), some with bytes mutated; all fed to one BlobAssembler.
 */

/** One chunk with one field changed and a CRC that matches its (possibly new) data. */
const forge = (rng: Random, encoded: Uint8Array): Uint8Array => {
  let forged: BlobChunk
  try {
    forged = create(BlobChunkSchema, fromBinary(BlobChunkSchema, encoded))
  } catch {
    return mutateProto(rng, encoded) // an earlier mutation broke it already
  }
  switch (rng.int(5)) {
    case 0:
      forged.seq = rng.bool() ? forged.seq + 1 : (randomScalar(rng, ScalarType.UINT32) as number)
      break
    case 1:
      forged.total = rng.bool()
        ? forged.total + rng.pick([-1, 1])
        : (randomScalar(rng, ScalarType.UINT32) as number)
      break
    case 2:
      forged.totalBytes = rng.bool()
        ? forged.totalBytes + BigInt(rng.pick([-1, 1, 7]))
        : BigInt.asUintN(64, randomScalar(rng, ScalarType.UINT64) as bigint) %
          BigInt(rng.pick([2 ** 20, 2 ** 64]))
      break
    case 3:
      forged.offset = rng.bool()
        ? forged.offset + BigInt(rng.pick([-1, 1, 100]))
        : (randomScalar(rng, ScalarType.UINT64) as bigint)
      break
    default:
      forged.data = rng.bytes(rng.size(64))
  }
  if (forged.totalBytes < 0n) forged.totalBytes = 0n
  if (forged.offset < 0n) forged.offset = 0n
  forged.crc32 = crc32(forged.data)
  return toBinary(BlobChunkSchema, forged)
}

const chunks = (rng: Random): Uint8Array[] => {
  const out: Uint8Array[] = []
  for (let b = rng.range(1, 2); b > 0; b--) {
    const blobId = rng.bool(0.9) ? `blob-${b}` : rng.text(8, true)
    const room = rng.range(1, 40)
    out.push(
      ...splitBlob(rng.bytes(rng.size(160)), {
        blobId,
        maxMessageBytes: CHUNK_ENVELOPE_BYTES + blobId.length + room,
        messageType: rng.pick(["", "t1.v1.Batch"]),
      }),
    )
  }
  const mutations = rng.int(4)
  for (let i = 0; i < mutations && out.length > 0; i++) {
    const at = rng.int(out.length)
    const c = out[at] ?? new Uint8Array(0)
    switch (rng.int(5)) {
      case 0:
        out.splice(at, 1)
        break
      case 1:
        out.splice(rng.int(out.length + 1), 0, c)
        break
      case 2:
        out[at] = forge(rng, c)
        break
      case 3:
        out[at] = mutateProto(rng, c)
        break
      default:
        out.push(rng.bytes(rng.size(64)))
    }
  }
  // Reordered: chunks may arrive in any order.
  for (let i = out.length - 1; i > 0 && rng.bool(0.5); i--) {
    const j = rng.int(i + 1)
    ;[out[i], out[j]] = [out[j] ?? new Uint8Array(0), out[i] ?? new Uint8Array(0)]
  }
  return out
}

const feed = (messages: ReadonlyArray<Uint8Array>): Verdict => {
  const assembler = new BlobAssembler()
  let rejected = false
  for (const m of messages) {
    try {
      assembler.add(m)
    } catch (e) {
      const verdict = verdictOfThrow(e)
      if (verdict.kind === "crash") return crash(`${verdict.reason} (message ${toHex(m)})`)
      rejected = true
    }
  }
  return rejected ? REJECTED : ACCEPTED
}

export const blobChunksTarget: FuzzTarget = {
  name: "blob chunks",
  description:
    "BlobChunk streams (reordered, repeated, missing, forged with valid CRC) → BlobAssembler (services/bus/chunks)",
  make: (rng) => {
    const messages = chunks(rng)
    return { input: () => messages.map(toHex).join(" "), run: () => feed(messages) }
  },
}
