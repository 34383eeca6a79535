import { create, type MessageInitShape } from "@bufbuild/protobuf"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { CHAT_SPECIAL_TOKENS, ChatTemplate, trainTokenizer } from "../../model/index.ts"
import {
  type EpisodeEnd,
  EpisodePurpose,
  EpisodeWorkItemSchema,
  ExecResultSchema,
  type LimitsSchema,
  type SamplingParamsSchema,
  TerminationReason,
  VerifierResultSchema,
} from "../../proto/index.ts"
import { shellBlock } from "./actions/index.ts"
import { EpisodePorts, type EpisodePortsShape, runEpisode } from "./episode.ts"
import { type GenerateRequest, PolicyBackend, type PolicyBackendShape } from "./policy/backend.ts"
import { scriptedPolicy } from "./policy/scripted.ts"

/**
 * The work item's Limits and SamplingParams (JobSpec.limits and JobSpec.sampling, copied into
 * every work item by the coordinator) change what an episode does: one test per field.
 */
const tokenizer = trainTokenizer(["```bash\nls -la\n```\n<|done|> output line"], {
  vocabSize: 300,
  specialTokens: [...CHAT_SPECIAL_TOKENS, "<|done|>"],
})

interface Run {
  readonly end: EpisodeEnd
  readonly execs: ReadonlyArray<{ readonly timeoutMs: number; readonly maxOutputBytes: number }>
  readonly requests: ReadonlyArray<GenerateRequest>
}

/** An agent that never says it is done, on a sandbox whose every command prints `output`. */
const run = async (
  limits: MessageInitShape<typeof LimitsSchema>,
  sampling: MessageInitShape<typeof SamplingParamsSchema> = { temperature: 1, maxTokens: 64 },
  o: {
    readonly output?: string
    readonly execDelayMs?: number
    readonly replies?: ReadonlyArray<string>
  } = {},
): Promise<Run> => {
  const execs: Array<{ timeoutMs: number; maxOutputBytes: number }> = []
  const requests: GenerateRequest[] = []
  const scripted = scriptedPolicy(tokenizer, () => o.replies ?? ["```bash\nls -la\n```"])
  const ports: EpisodePortsShape = {
    createSandbox: () => Effect.succeed("sb-1"),
    exec: (_, __, options) =>
      Effect.gen(function* () {
        execs.push(options)
        if (o.execDelayMs) yield* Effect.sleep(o.execDelayMs)
        return create(ExecResultSchema, {
          output: new TextEncoder().encode(o.output ?? "ok\n"),
          exitCode: 0,
        })
      }),
    putFiles: () => Effect.void,
    destroySandbox: () => Effect.void,
    verify: () => Effect.succeed(create(VerifierResultSchema, { passed: 0, total: 1, reward: 0 })),
    template: new ChatTemplate(tokenizer),
    format: shellBlock,
    publish: () => Effect.succeed(1),
    publishEnd: () => Effect.void,
  }
  const item = create(EpisodeWorkItemSchema, {
    jobId: "job-limits",
    episodeId: "ep-1",
    taskRef: { taskSet: "set", taskId: "t" },
    task: { id: "t", taskSet: "set", instruction: "List the files." },
    sampling,
    limits,
    purpose: EpisodePurpose.TRAIN,
    groupId: "g",
    groupSize: 1,
    admittedUnixMs: BigInt(Date.now()),
  })
  const policy: PolicyBackendShape = {
    ...scripted,
    generate: (request) => {
      requests.push(request)
      return scripted.generate(request)
    },
  }
  const end = await Effect.runPromise(
    runEpisode(item, 0).pipe(
      Effect.provideService(EpisodePorts, ports),
      Effect.provideService(PolicyBackend, policy),
    ),
  )
  return { end, execs, requests }
}

describe("an episode honours its work item's limits", () => {
  it("max_turns: the agent gets exactly that many turns", async () => {
    for (const maxTurns of [2, 5]) {
      const r = await run({ maxTurns })
      expect(r.end.termination).toBe(TerminationReason.MAX_TURNS)
      expect(r.requests).toHaveLength(maxTurns)
      expect(r.execs).toHaveLength(maxTurns)
    }
  })

  it("max_tokens: the context budget ends the episode before the turns run out", async () => {
    const roomy = await run({ maxTurns: 6, maxTokens: 4096 })
    expect(roomy.end.termination).toBe(TerminationReason.MAX_TURNS)
    // Room for the prompt and about one turn: the budget, not the turns, ends it.
    const prompt = roomy.requests[0]?.ids.length ?? 0
    const tight = await run({ maxTurns: 6, maxTokens: prompt + 40 })
    expect(tight.end.termination).toBe(TerminationReason.MAX_TOKENS)
    expect(tight.requests.length).toBeLessThan(6)
    expect(tight.end.totalTokens).toBeLessThan(roomy.end.totalTokens)
  })

  it("wall_clock_sec: slow commands end the episode on the clock", async () => {
    const slow = { execDelayMs: 400 }
    const long = await run({ maxTurns: 4, wallClockSec: 60 }, undefined, slow)
    expect(long.end.termination).toBe(TerminationReason.MAX_TURNS)
    const short = await run({ maxTurns: 4, wallClockSec: 1 }, undefined, slow)
    expect(short.end.termination).toBe(TerminationReason.WALL_CLOCK)
    expect(short.execs.length).toBeLessThan(4)
    // The clock also caps each command's timeout.
    for (const e of short.execs) expect(e.timeoutMs).toBeLessThanOrEqual(1000)
  })

  it("command_timeout_ms: each command runs with that timeout", async () => {
    const r = await run({ maxTurns: 2, commandTimeoutMs: 1234 })
    expect(r.execs.map((e) => e.timeoutMs)).toEqual([1234, 1234])
  })

  it("observation_max_bytes: the sandbox returns at most 4× it, the agent reads at most it", async () => {
    const output = `${"x".repeat(5000)}\n`
    const small = await run({ maxTurns: 2, observationMaxBytes: 300 }, undefined, { output })
    const large = await run({ maxTurns: 2, observationMaxBytes: 3000 }, undefined, { output })
    expect(small.execs[0]?.maxOutputBytes).toBe(1200)
    expect(large.execs[0]?.maxOutputBytes).toBe(12000)
    // The second turn's context holds the first observation: bounded by the limit.
    const context = (r: Run) => (r.requests[1]?.ids.length ?? 0) - (r.requests[0]?.ids.length ?? 0)
    expect(context(small)).toBeLessThan(context(large))
  })

  it("observation_max_tokens: an observation is cut to that many tokens", async () => {
    const output = `${"output line\n".repeat(600)}`
    const context = async (observationMaxTokens: number) => {
      const r = await run(
        { maxTurns: 2, observationMaxTokens, observationMaxBytes: 8192 },
        undefined,
        {
          output,
        },
      )
      return (r.requests[1]?.ids.length ?? 0) - (r.requests[0]?.ids.length ?? 0)
    }
    // 4 tokens: shorter than the omission marker, which then gives way to the cap.
    const [tiny, few, many] = [await context(4), await context(16), await context(256)]
    expect(few - tiny).toBe(12)
    expect(few).toBeLessThan(many)
    // What the turn adds beyond the observation (the reply and the turn markers) is the same.
    expect(many - few).toBeGreaterThanOrEqual(256 - 16 - 8)
  })

  it("blind_observations: the commands run, the policy reads nothing they printed", async () => {
    // A malformed first reply, then a command: the third call's context holds both observations.
    const replies = ["I will look around first.", "```bash\nls -la\n```"]
    const seen = async (blindObservations: boolean) => {
      const r = await run({ maxTurns: 3, blindObservations }, undefined, {
        output: "secret-output\n",
        replies,
      })
      expect(r.execs).toHaveLength(2)
      return tokenizer.decode(r.requests[2]?.ids ?? new Uint32Array(0))
    }
    const sighted = await seen(false)
    expect(sighted).toContain("secret-output")
    expect(sighted).toContain("[exit code 0]")
    const blind = await seen(true)
    expect(blind).not.toContain("secret-output")
    expect(blind).not.toContain("[exit code")
    // The feedback on the malformed reply is about the reply, not the sandbox: it stays.
    expect(blind).toContain("No command found.")
    expect(blind.length).toBeLessThan(sighted.length)
  })
})

describe("an episode samples with its work item's sampling parameters", () => {
  it("temperature, top_p, top_k, max_tokens, stop_token_ids and seed reach the policy", async () => {
    const r = await run(
      { maxTurns: 2 },
      { temperature: 0.6, topP: 0.9, topK: 7, maxTokens: 5, stopTokenIds: [3, 4], seed: 11n },
    )
    const first = r.requests[0]?.sampling
    expect(first).toMatchObject({ temperature: 0.6, topP: 0.9, topK: 7, maxTokens: 5, seed: 11 })
    expect(first?.stopTokenIds).toEqual(expect.arrayContaining([3, 4]))
    // Each turn draws with the next seed.
    expect(r.requests[1]?.sampling.seed).toBe(12)
    const plain = await run({ maxTurns: 1 }, { temperature: 1, maxTokens: 64 })
    expect(plain.requests[0]?.sampling.topK).toBeUndefined()
    expect(plain.requests[0]?.sampling.topP).toBe(1)
  })
})
