import { create, type DescMessage } from "@bufbuild/protobuf"
import type { Effect } from "effect"
import { takeBatch } from "../../../actors/buffer/client.ts"
import { busPorts } from "../../../actors/sampler/bus-ports.ts"
import { sandboxClient } from "../../../actors/sandbox/client.ts"
import {
  BatchSchema,
  CreateSandboxResultSchema,
  DestroySandboxResultSchema,
  EpisodeWorkItemSchema,
  ExecResultSchema,
  GetFilesResultSchema,
  PutFilesResultSchema,
  SealSandboxResultSchema,
  VerifierResultSchema,
} from "../../../proto/index.ts"
import { ERROR_HEADER } from "../../../services/actor/index.ts"
import { type BusShape, subjectsFor } from "../../../services/bus/index.ts"
import { type FuzzTarget, judgeEffectAsync } from "../harness.ts"
import { FuzzBus } from "../memory-bus.ts"
import { mutateProto, toHex } from "../mutate.ts"
import { protoInput } from "../proto-gen.ts"
import type { Random } from "../random.ts"

/**
 * Replies, through the client functions that decode them: the sandbox client (each operation),
 * the sampler's verifier port and the learner's takeBatch (whose object-store references are
 * looked up in an empty in-memory store). Every reply is one that a broken or hostile responder
 * could send; the client must turn it into its typed error.
 */
const subjects = subjectsFor("fuzz")

interface Reply {
  readonly name: string
  readonly schema: DescMessage
  readonly call: (bus: BusShape) => Effect.Effect<unknown, unknown>
}

const REPLIES: ReadonlyArray<Reply> = [
  {
    name: "sandbox create",
    schema: CreateSandboxResultSchema,
    call: (bus) => sandboxClient(bus, subjects).create({ image: "t1-base" }, "req-1"),
  },
  {
    name: "sandbox exec",
    schema: ExecResultSchema,
    call: (bus) => sandboxClient(bus, subjects).exec("sb-1", "true"),
  },
  {
    name: "sandbox put",
    schema: PutFilesResultSchema,
    call: (bus) => sandboxClient(bus, subjects).put("sb-1", "/app", new Uint8Array(0)),
  },
  {
    name: "sandbox get",
    schema: GetFilesResultSchema,
    call: (bus) => sandboxClient(bus, subjects).get("sb-1", "/app"),
  },
  {
    name: "sandbox seal",
    schema: SealSandboxResultSchema,
    call: (bus) =>
      sandboxClient(bus, subjects).seal("sb-1", {
        pristinePaths: ["/usr/lib/python3*/dist-packages"],
        timeoutMs: 1000,
      }),
  },
  {
    name: "sandbox destroy",
    schema: DestroySandboxResultSchema,
    call: (bus) => sandboxClient(bus, subjects).destroy("sb-1"),
  },
  {
    name: "verify",
    schema: VerifierResultSchema,
    call: (bus) =>
      busPorts(bus, subjects, { jobId: "j", episodeId: "e", attempt: 1 }).verify(
        create(EpisodeWorkItemSchema, { jobId: "j", episodeId: "e" }),
        1,
        "sb-1",
      ),
  },
  {
    name: "buffer take",
    schema: BatchSchema,
    call: (bus) => takeBatch(bus, subjects, { jobId: "j" }),
  },
]

const fuzzBus = new FuzzBus()

const replyCase = (rng: Random, reply: Reply) => {
  const data = protoInput(rng, reply.schema, mutateProto)
  const headers: Record<string, string> = rng.bool(0.05) ? { [ERROR_HEADER]: rng.text(40) } : {}
  return {
    input: () => `${reply.name} ${JSON.stringify(headers)} ${toHex(data)}`,
    run: () => judgeEffectAsync(reply.call(fuzzBus.replying(data, headers))),
  }
}

export const busRepliesTarget: FuzzTarget = {
  name: "bus replies",
  description: `${REPLIES.map((r) => r.schema.typeName).join(", ")} replies → sandbox client, verifier port, takeBatch`,
  setup: fuzzBus.setup,
  teardown: fuzzBus.teardown,
  make: (rng) => replyCase(rng, rng.pick(REPLIES)),
}
