/**
 * What an external trainer publishes (one safetensors file, or a Hugging Face checkpoint
 * directory), checked against the job's model and turned into the one file t1 stores and
 * announces. The checks are the model layer's (names, shapes, float dtypes, finite values, the
 * config.json of a directory); any refusal is INVALID_ARGUMENT naming the file and tensor.
 */
import { readdir, stat } from "node:fs/promises"
import { join } from "node:path"
import * as grpc from "@grpc/grpc-js"
import { Effect } from "effect"
import {
  decodeWeights,
  encodeWeights,
  readHfCheckpoint,
  type TinyMoeConfig,
  WEIGHTS_FORMAT,
} from "../../model/index.ts"
import { StatusError } from "../../services/gateway/index.ts"

export interface Published {
  readonly jobId: string
  readonly version: bigint
  readonly step: bigint
}

export interface CheckedWeights {
  /** The bytes to store and announce. */
  readonly bytes: Uint8Array
  /** False when the trainer's own file is stored byte for byte. */
  readonly reencoded: boolean
}

const invalid = (details: string) =>
  new StatusError({ code: grpc.status.INVALID_ARGUMENT, details })

const messageOf = (e: unknown) => (e instanceof Error ? e.message : String(e))

/** Stored as t1's weights file: F32, the version and step in its header. */
const reencode = (model: Parameters<typeof encodeWeights>[0], p: Published): CheckedWeights => ({
  bytes: encodeWeights(model, "F32", {
    version: p.version,
    extra: { job: p.jobId, step: p.step.toString() },
  }),
  reencoded: true,
})

/**
 * One safetensors file: t1's own weights file, or a plain Hugging Face `model.safetensors` of the
 * job's model. A t1 file of this model whose header names no other version is kept as it is (its
 * digest is the announcement's); anything else is re-encoded.
 */
export const checkWeightsFile = (
  bytes: Uint8Array,
  expected: TinyMoeConfig,
  p: Published,
  path?: string,
): Effect.Effect<CheckedWeights, StatusError> =>
  Effect.try({
    try: () => {
      const decoded = decodeWeights(bytes, "f32", undefined, {
        config: expected,
        ...(path === undefined ? {} : { path }),
      })
      const t1File =
        decoded.metadata.t1 === WEIGHTS_FORMAT &&
        decoded.metadata.config !== undefined &&
        (decoded.version === undefined || decoded.version === p.version)
      return t1File ? { bytes, reencoded: false } : reencode(decoded.model, p)
    },
    catch: (e) => invalid(`weights: ${messageOf(e)}`),
  })

/** A Hugging Face checkpoint directory (index + shards, or one model.safetensors; config.json). */
export const checkWeightsDir = (
  dir: string,
  expected: TinyMoeConfig,
  p: Published,
): Effect.Effect<CheckedWeights, StatusError> =>
  Effect.try({
    try: () => reencode(readHfCheckpoint(dir, { expected }).model, p),
    catch: (e) => invalid(`weights: ${messageOf(e)}`),
  })

/** Whether a reference names a directory (else a file), refusing what is neither. */
export const refKind = (
  path: string,
  maxBytes: number,
): Effect.Effect<"file" | "directory", StatusError> =>
  Effect.tryPromise({
    try: async () => {
      const info = await stat(path)
      if (info.isDirectory()) {
        // The checkpoint is read whole: its weights files count against the same bound.
        let total = 0
        for (const name of await readdir(path, { recursive: true }))
          if (name.endsWith(".safetensors")) total += (await stat(join(path, name))).size
        if (total > maxBytes)
          throw new Error(`its safetensors files hold ${total} bytes, at most ${maxBytes}`)
        return "directory" as const
      }
      if (!info.isFile()) throw new Error("neither a file nor a directory")
      if (info.size > maxBytes) throw new Error(`${info.size} bytes, at most ${maxBytes}`)
      return "file" as const
    },
    catch: (e) => invalid(`path ${path}: ${messageOf(e)}`),
  })
