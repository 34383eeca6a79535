import type { DescMessage, MessageShape } from "@bufbuild/protobuf"
import { Effect } from "effect"
import { diagnosticActor } from "../../../actors/diagnostic/index.ts"
import { sealOptionsFromWire, specFromWire } from "../../../actors/sandbox/wire.ts"
import { taskFromWire } from "../../../actors/verifier/wire.ts"
import {
  CreateSandboxRequestSchema,
  DestroySandboxRequestSchema,
  EpisodeWorkItemSchema,
  ExecRequestSchema,
  GetFilesRequestSchema,
  JobEventSchema,
  JobStatusSchema,
  PingSchema,
  PutFilesRequestSchema,
  ReadyTrajectorySchema,
  SandboxHostHeartbeatSchema,
  SealSandboxRequestSchema,
  TakeBatchRequestSchema,
  TrajectoryRecordSchema,
  VerifyRequestSchema,
  WeightsAnnouncementSchema,
} from "../../../proto/index.ts"
import { protobufDecoder } from "../../../services/actor/index.ts"
import { type FuzzTarget, judgeEffect } from "../harness.ts"
import { mutateProto, toHex } from "../mutate.ts"
import { protoInput } from "../proto-gen.ts"

/**
 * Every message a bus subject carries, through the decoder its consumer uses (the actor
 * runtime's protobufDecoder, which each actor's ActorSpec.decode is) and then the pure checks the
 * consumer runs on the decoded message before any I/O. Replies go through their clients in
 * bus-replies.ts, trajectory chunk streams through the assembler in trajectory.ts.
 */
interface Subject {
  readonly subject: string
  readonly schema: DescMessage
  readonly consumer: string
  readonly decode: (bytes: Uint8Array) => Effect.Effect<unknown, unknown>
}

const decodeThen =
  <Desc extends DescMessage, A, E>(
    schema: Desc,
    then: (message: MessageShape<Desc>) => Effect.Effect<A, E>,
  ) =>
  (bytes: Uint8Array) =>
    Effect.flatMap(protobufDecoder(schema)(bytes), then)

const SANDBOX_DEFAULTS = { image: "t1-base", workdir: "/app", ttlMs: 60_000 }

const SUBJECTS: ReadonlyArray<Subject> = [
  {
    subject: "t1.ping",
    schema: PingSchema,
    consumer: "diagnostic actor (ActorSpec.decode)",
    decode: diagnosticActor("t1.ping", "fuzz").decode,
  },
  {
    subject: "t1.episodes",
    schema: EpisodeWorkItemSchema,
    consumer: "sampler actor",
    decode: protobufDecoder(EpisodeWorkItemSchema),
  },
  {
    subject: "t1.verify",
    schema: VerifyRequestSchema,
    consumer: "verifier actor, then taskFromWire",
    decode: decodeThen(VerifyRequestSchema, (req) =>
      Effect.sync(() => (req.task === undefined ? undefined : taskFromWire(req.task, 600))),
    ),
  },
  {
    subject: "t1.sandbox.create",
    schema: CreateSandboxRequestSchema,
    consumer: "sandbox host, then specFromWire",
    decode: decodeThen(CreateSandboxRequestSchema, (req) => {
      const spec = specFromWire(req.spec, SANDBOX_DEFAULTS)
      return spec instanceof Error ? Effect.fail(spec) : Effect.succeed(spec)
    }),
  },
  {
    subject: "t1.sandbox.<id>.exec",
    schema: ExecRequestSchema,
    consumer: "sandbox host",
    decode: protobufDecoder(ExecRequestSchema),
  },
  {
    subject: "t1.sandbox.<id>.seal",
    schema: SealSandboxRequestSchema,
    consumer: "sandbox host, then sealOptionsFromWire",
    decode: decodeThen(SealSandboxRequestSchema, (req) => {
      const options = sealOptionsFromWire(req)
      return options instanceof Error ? Effect.fail(options) : Effect.succeed(options)
    }),
  },
  {
    subject: "t1.sandbox.<id>.put",
    schema: PutFilesRequestSchema,
    consumer: "sandbox host",
    decode: protobufDecoder(PutFilesRequestSchema),
  },
  {
    subject: "t1.sandbox.<id>.get",
    schema: GetFilesRequestSchema,
    consumer: "sandbox host",
    decode: protobufDecoder(GetFilesRequestSchema),
  },
  {
    subject: "t1.sandbox.<id>.destroy",
    schema: DestroySandboxRequestSchema,
    consumer: "sandbox host",
    decode: protobufDecoder(DestroySandboxRequestSchema),
  },
  {
    subject: "t1.sandbox.heartbeat",
    schema: SandboxHostHeartbeatSchema,
    consumer: "bench:sandbox",
    decode: protobufDecoder(SandboxHostHeartbeatSchema),
  },
  {
    subject: "t1.traj.<job>",
    schema: TrajectoryRecordSchema,
    consumer: "buffer ingest, coordinator",
    decode: protobufDecoder(TrajectoryRecordSchema),
  },
  {
    subject: "t1.ready.<job>",
    schema: ReadyTrajectorySchema,
    consumer: "buffer",
    decode: protobufDecoder(ReadyTrajectorySchema),
  },
  {
    subject: "t1.buffer.<job>.take",
    schema: TakeBatchRequestSchema,
    consumer: "buffer actor",
    decode: protobufDecoder(TakeBatchRequestSchema),
  },
  {
    subject: "t1.weights.<job>",
    schema: WeightsAnnouncementSchema,
    consumer: "coordinator",
    decode: protobufDecoder(WeightsAnnouncementSchema),
  },
  {
    subject: "t1.jobs.<job>.events",
    schema: JobEventSchema,
    consumer: "gateway WatchJob",
    decode: protobufDecoder(JobEventSchema),
  },
  {
    subject: "kv t1-jobs",
    schema: JobStatusSchema,
    consumer: "gateway, coordinator",
    decode: protobufDecoder(JobStatusSchema),
  },
]

const subjectTarget = (s: Subject): FuzzTarget => ({
  name: `bus ${s.subject}`,
  description: `${s.schema.typeName} bytes → ${s.consumer}`,
  make: (rng) => {
    const bytes = protoInput(rng, s.schema, mutateProto)
    return { input: () => toHex(bytes), run: () => judgeEffect(s.decode(bytes)) }
  },
})

export const busSubjectTargets: ReadonlyArray<FuzzTarget> = SUBJECTS.map(subjectTarget)
