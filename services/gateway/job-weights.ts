/**
 * JobService/FetchJobWeights: a job's published weights at any version it published, while it
 * runs and after it ended, streamed in chunks as TrainerService/FetchWeights streams them. The
 * bytes come from the weights object store, their digest checked against the announcement.
 */
import { create } from "@bufbuild/protobuf"
import * as grpc from "@grpc/grpc-js"
import { Effect } from "effect"
import { type FetchJobWeightsResponse, FetchJobWeightsResponseSchema } from "../../proto/index.ts"
import type { BusShape, Subjects } from "../bus/index.ts"
import type { JobStoreShape } from "../jobs/index.ts"
import { readVersion } from "../weights/index.ts"
import { StatusError } from "./status.ts"

/** Chunk size: well under gRPC's default 4 MiB receive limit. */
export const WEIGHTS_CHUNK_BYTES = 1 << 20

export const fetchJobWeights = (
  o: { readonly bus: BusShape; readonly subjects: Subjects; readonly store: JobStoreShape },
  jobId: string,
  version: bigint | undefined,
  write: (message: FetchJobWeightsResponse) => Effect.Effect<void>,
) =>
  Effect.gen(function* () {
    // NOT_FOUND for a job that does not exist, before looking for its weights.
    const status = yield* o.store.get(jobId)
    const found = yield* readVersion(o.bus, o.subjects, jobId, version).pipe(
      Effect.mapError((e) =>
        e._tag === "WeightsUnavailable"
          ? new StatusError({ code: grpc.status.DATA_LOSS, details: `job ${jobId}: ${e.message}` })
          : e,
      ),
    )
    if (found === undefined)
      return yield* new StatusError({
        code: grpc.status.NOT_FOUND,
        details:
          version === undefined
            ? `job ${jobId} has published no weights`
            : `job ${jobId} never published version ${version} (its latest is ${status.policyVersion})`,
      })
    const { announcement: a, bytes } = found
    for (let at = 0; at < bytes.length || at === 0; at += WEIGHTS_CHUNK_BYTES) {
      yield* write(
        create(FetchJobWeightsResponseSchema, {
          policyVersion: a.policyVersion,
          step: a.step,
          format: a.format || "safetensors",
          sizeBytes: BigInt(bytes.length),
          sha256: a.sha256,
          data: bytes.subarray(at, at + WEIGHTS_CHUNK_BYTES),
        }),
      )
      if (bytes.length === 0) break
    }
  })
