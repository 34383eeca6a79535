import { create, fromBinary, toBinary } from "@bufbuild/protobuf"
import { Effect, Layer, Schedule } from "effect"
import {
  type EpisodeWorkItem,
  ErrorCode,
  type VerifierResult,
  VerifierResultSchema,
  VerifyRequestSchema,
} from "../../proto/index.ts"
import { Bus, type BusShape, type Subjects } from "../../services/bus/index.ts"
import { sandboxClient } from "../sandbox/index.ts"
import { SEAL_TIMEOUT_MS } from "../verifier/index.ts"
import {
  CommandRejected,
  EpisodeInfraError,
  EpisodePorts,
  type EpisodePortsShape,
} from "./episode.ts"
import {
  encodeRecord,
  endMsgId,
  endRecord,
  maxChunkTokens,
  publishChunk,
  splitSpan,
} from "./records.ts"
import type { TrajectoryBuilder } from "./tito.ts"

const describe = (e: { readonly message?: string; readonly _tag?: string }) =>
  e.message || e._tag || String(e)

/** Sandbox, verifier and trajectory-stream ports over the bus, for one episode attempt. */
export const busPorts = (
  bus: BusShape,
  subjects: Subjects,
  who: { readonly jobId: string; readonly episodeId: string; readonly attempt: number },
): Pick<
  EpisodePortsShape,
  "createSandbox" | "exec" | "putFiles" | "destroySandbox" | "verify" | "publish" | "publishEnd"
> => {
  const client = sandboxClient(bus, subjects)
  let seq = 0
  const stream = subjects.trajectories(who.jobId)
  const publishRecord = (bytes: Uint8Array, msgId: string) =>
    bus.jsPublish(stream, bytes, { msgId }).pipe(
      // A publish whose ack was lost is retried under the same Nats-Msg-Id and stored once.
      Effect.retry({ schedule: Schedule.exponential("100 millis"), times: 5 }),
      Effect.mapError((e) => new EpisodeInfraError({ stage: "publish", message: describe(e) })),
    )
  return {
    createSandbox: (spec, requestId) =>
      client.create(spec, requestId).pipe(
        // A host may be starting or full; the request id makes retries idempotent.
        Effect.retry({
          while: (e) =>
            e._tag === "NoResponders" ||
            e._tag === "RequestTimeout" ||
            (e._tag === "SandboxRequestFailed" && e.retryable),
          schedule: Schedule.exponential("250 millis").pipe(Schedule.jittered),
          times: 6,
        }),
        Effect.map((r) => r.sandboxId),
        Effect.mapError(
          (e) => new EpisodeInfraError({ stage: "sandbox create", message: describe(e) }),
        ),
      ),
    exec: (sandboxId, command, options) =>
      client
        .exec(sandboxId, command, options)
        .pipe(
          Effect.mapError((e) =>
            e._tag === "SandboxRequestFailed" &&
            !e.retryable &&
            e.detail.code === ErrorCode.INVALID_ARGUMENT
              ? new CommandRejected({ message: e.detail.message })
              : new EpisodeInfraError({ stage: "exec", message: describe(e) }),
          ),
        ),
    putFiles: (sandboxId, path, tar) =>
      client.put(sandboxId, path, tar).pipe(
        Effect.asVoid,
        Effect.mapError((e) => new EpisodeInfraError({ stage: "put files", message: describe(e) })),
      ),
    destroySandbox: (sandboxId) => Effect.ignore(client.destroy(sandboxId)),
    verify: (
      item: EpisodeWorkItem,
      attempt: number,
      sandboxId: string,
    ): Effect.Effect<VerifierResult, EpisodeInfraError> => {
      const request = toBinary(
        VerifyRequestSchema,
        create(VerifyRequestSchema, {
          jobId: item.jobId,
          episodeId: item.episodeId,
          sandboxId,
          attempt,
          ...(item.task ? { task: item.task } : {}),
        }),
      )
      // The verifier's budget: sealing the sandbox, then the tests' own timeout; a minute more
      // for copying files in and reports out.
      const timeoutMs =
        SEAL_TIMEOUT_MS + ((item.task?.verifierTimeoutSec ?? 0) || 600) * 1000 + 60_000
      return bus.request(subjects.verify, request, { timeoutMs }).pipe(
        Effect.retry({
          while: (e) => e._tag === "NoResponders",
          schedule: Schedule.spaced("500 millis"),
          times: 20,
        }),
        Effect.flatMap((reply) =>
          Effect.try({
            try: () => fromBinary(VerifierResultSchema, reply.data),
            catch: (e) =>
              new EpisodeInfraError({
                stage: "verify",
                message: `undecodable verifier reply: ${String(e)}`,
              }),
          }),
        ),
        Effect.mapError((e) =>
          e instanceof EpisodeInfraError
            ? e
            : new EpisodeInfraError({ stage: "verify", message: describe(e) }),
        ),
      )
    },
    publish: (builder: TrajectoryBuilder, final: boolean) =>
      Effect.gen(function* () {
        const span = builder.takeSpan(final)
        if (span) {
          const r = span.routing
          const routingBytes = r ? r.layers * r.topK * (r.rows instanceof Uint16Array ? 2 : 1) : 0
          for (const piece of splitSpan(span, maxChunkTokens(bus.maxPayload, routingBytes))) {
            yield* publishChunk(who, seq, piece, bus.maxPayload, publishRecord)
            seq++
          }
        }
        return seq
      }),
    publishEnd: (end) =>
      publishRecord(encodeRecord(endRecord(end)), endMsgId(who)).pipe(Effect.asVoid),
  }
}

/**
 * The ports of one episode attempt over the layer's Bus, with the agent's chat template, action
 * format and per-turn report.
 */
export const busPortsLayer = (
  subjects: Subjects,
  who: { readonly jobId: string; readonly episodeId: string; readonly attempt: number },
  agent: Pick<EpisodePortsShape, "template" | "format" | "onTurn">,
): Layer.Layer<EpisodePorts, never, Bus> =>
  Layer.effect(
    EpisodePorts,
    Effect.gen(function* () {
      return { ...busPorts(yield* Bus, subjects, who), ...agent }
    }),
  )
