/**
 * The episode half of the load test: N episodes of a scripted policy at once, through the
 * in-process sampler (`runSampler`, concurrency N) against one sandbox host and one verifier
 * process over NATS. Work items go onto the episodes work queue as the coordinator would put them;
 * the end records are followed on the trajectory stream as the buffer would read them.
 */
import { readdirSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { create, fromBinary, toBinary } from "@bufbuild/protobuf"
import { Cause, Effect, Exit, Fiber, Stream } from "effect"
import { shellBlock } from "../../actors/sampler/actions/index.ts"
import { runSampler } from "../../actors/sampler/actor.ts"
import { scriptedPolicy } from "../../actors/sampler/policy/scripted.ts"
import { resolvedWireTask } from "../../actors/sandbox/image/index.ts"
import { DONE_TOKEN, loadBundledTokenizer } from "../../model/bundled/bundled.ts"
import { ChatTemplate } from "../../model/index.ts"
import {
  type EpisodeEnd,
  EpisodePurpose,
  type EpisodeWorkItem,
  EpisodeWorkItemSchema,
  type Task,
  TerminationReason,
  TrajectoryRecordSchema,
} from "../../proto/index.ts"
import { Bus } from "../../services/bus/index.ts"
import { ensureSamplerStreams } from "../../services/episodes/index.ts"
import { loadTask } from "../../tasks/index.ts"
import type { LoadRuntime } from "./runtime.ts"
import type { Teardown } from "./teardown.ts"

const TRAIN_DIR = fileURLToPath(new URL("../../tasks/bundled/train", import.meta.url))
/** Episodes cycle through this many bundled training tasks. */
const TASKS = 4
/** Durable consumer of the job's trajectory subject that reads the end records. */
const FOLLOWER = "load-ends"

/** What the scripted agent types, one command per turn, in turn. */
const COMMANDS = [
  "ls -la",
  "cat /etc/os-release",
  "echo turn $((RANDOM % 100)) in $PWD",
  "ls -R . | head -n 20",
  "cat /proc/loadavg /proc/uptime",
]

/** `turns` shell blocks, then the completion token: every episode ends COMPLETED at turn turns+1. */
const loadScript = (turns: number): ReadonlyArray<string> => [
  ...Array.from(
    { length: turns },
    (_, i) => `\`\`\`bash\n${COMMANDS[i % COMMANDS.length] as string}\n\`\`\``,
  ),
  DONE_TOKEN,
]

const bundledTasks = (count: number): Promise<ReadonlyArray<Task>> =>
  Effect.runPromise(
    Effect.forEach(
      readdirSync(TRAIN_DIR, { withFileTypes: true })
        .filter((d) => d.isDirectory())
        .map((d) => d.name)
        .sort()
        .slice(0, count),
      (name) => Effect.flatMap(loadTask(join(TRAIN_DIR, name)), resolvedWireTask),
    ),
  )

const workItem = (jobId: string, index: number, task: Task, turns: number): EpisodeWorkItem =>
  create(EpisodeWorkItemSchema, {
    jobId,
    episodeId: `ep-${String(index).padStart(4, "0")}`,
    attempt: 0,
    taskRef: { taskSet: task.taskSet, taskId: task.id },
    task,
    sampling: { temperature: 1, topP: 1, maxTokens: 256, seed: BigInt(index) },
    limits: {
      maxTurns: turns + 1,
      maxTokens: 32_768,
      wallClockSec: 480,
      commandTimeoutMs: 10_000,
      observationMaxBytes: 2048,
      observationMaxTokens: 256,
    },
    purpose: EpisodePurpose.ROLLOUT,
    groupId: `${jobId}-g${index}`,
    groupSize: 1,
    admittedUnixMs: BigInt(Date.now()),
  })

const TERMINATION = Object.fromEntries(
  Object.entries(TerminationReason).map(([k, v]) => [v, k.toLowerCase()]),
) as Record<number, string>

/** Why an end record is not the clean COMPLETED run the script leads to, or undefined. */
const problemOf = (end: EpisodeEnd, turns: number): string | undefined => {
  const what = `episode ${end.episodeId} (attempt ${end.attempt})`
  if (end.infraFailed) return `${what}: infra failure: ${end.error?.message ?? "?"}`
  if (end.termination !== TerminationReason.COMPLETED)
    return `${what}: ended ${TERMINATION[end.termination]} after ${end.turns} turns: ${end.error?.message ?? ""}`
  if (end.turns !== turns + 1) return `${what}: ${end.turns} turns, expected ${turns + 1}`
  return undefined
}

export interface EpisodePhaseOptions {
  readonly runtime: LoadRuntime
  readonly teardown: Teardown
  readonly episodes: number
  /** Command turns per episode (the completion turn comes on top). */
  readonly turns: number
  readonly timeoutMs: number
  readonly log: (line: string) => void
}

export interface EpisodePhaseResult {
  /** The first end record of each episode, in arrival order. */
  readonly ends: ReadonlyArray<EpisodeEnd>
  /** Episodes that did not end, or ended other than COMPLETED after every scripted turn. */
  readonly failed: number
  readonly problems: ReadonlyArray<string>
  /** From the first work item published to the last end record received. */
  readonly seconds: number
  readonly turns: number
  readonly turnExecMs: ReadonlyArray<number>
}

export const runEpisodePhase = async (
  options: EpisodePhaseOptions,
): Promise<EpisodePhaseResult> => {
  const { runtime, episodes: n, turns } = options
  const subjects = runtime.subjects
  const jobId = `load-${Date.now().toString(36)}`
  const tasks = await bundledTasks(TASKS)
  const tokenizer = loadBundledTokenizer()
  const script = loadScript(turns)
  const items = Array.from({ length: n }, (_, i) =>
    workItem(jobId, i, tasks[i % tasks.length] as Task, turns),
  )

  await runtime.run(
    Effect.gen(function* () {
      const bus = yield* Bus
      yield* ensureSamplerStreams(bus, subjects)
      yield* bus.ensureConsumer({
        stream: subjects.trajectoriesStream,
        durable: FOLLOWER,
        filterSubject: subjects.trajectories(jobId),
        ackWaitMs: 30_000,
        maxDeliver: 5,
      })
    }),
  )

  const ends = new Map<string, EpisodeEnd>()
  let allEnded: () => void = () => {}
  const ended = new Promise<void>((resolve) => {
    allEnded = resolve
  })
  const follower = runtime.fork(
    Effect.gen(function* () {
      const bus = yield* Bus
      yield* bus.consume(subjects.trajectoriesStream, FOLLOWER, { maxInFlight: 512 }).pipe(
        Stream.runForEach((item) =>
          Effect.gen(function* () {
            yield* item.ack
            const record = fromBinary(TrajectoryRecordSchema, item.data).record
            if (record.case !== "end" || ends.has(record.value.episodeId)) return
            ends.set(record.value.episodeId, record.value)
            if (ends.size === n) allEnded()
          }),
        ),
      )
    }),
  )
  options.teardown.add("end-record follower", () => runtime.run(Fiber.interrupt(follower)))

  const sampler = runtime.fork(
    runSampler({
      subjects,
      policy: scriptedPolicy(tokenizer, () => script),
      template: new ChatTemplate(tokenizer),
      format: shellBlock,
      concurrency: n,
      shutdownGraceMs: 5_000,
    }),
  )
  options.teardown.add("in-process sampler", () => runtime.run(Fiber.interrupt(sampler)))
  /** Resolves with a problem when the fiber stops (it should run until interrupted). */
  const stopped = (name: string, fiber: Fiber.Fiber<unknown, unknown>) =>
    runtime
      .run(Fiber.await(fiber))
      .then(
        (exit) =>
          `${name} stopped: ${Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "without an error"}`,
      )

  const started = performance.now()
  await runtime.run(
    Effect.gen(function* () {
      const bus = yield* Bus
      yield* Effect.forEach(
        items,
        (item) =>
          bus.jsPublish(subjects.episodes, toBinary(EpisodeWorkItemSchema, item), {
            msgId: `${item.jobId}:${item.episodeId}:0`,
          }),
        { concurrency: 16, discard: true },
      )
    }),
  )
  options.log(`published ${n} work items (${tasks.length} tasks, ${turns}+1 turns each)`)
  const progress = setInterval(() => options.log(`  ${ends.size}/${n} episodes ended`), 10_000)
  let timer: NodeJS.Timeout | undefined
  // Undefined when every episode ended; else why the phase stopped waiting.
  const cut = await Promise.race([
    ended.then(() => undefined),
    stopped("sampler", sampler),
    stopped("end-record follower", follower),
    new Promise<string>((resolve) => {
      timer = setTimeout(
        () => resolve(`only ${ends.size} of ${n} episodes ended in ${options.timeoutMs} ms`),
        options.timeoutMs,
      )
    }),
  ])
  clearInterval(progress)
  clearTimeout(timer)
  const seconds = (performance.now() - started) / 1000
  await runtime.run(Fiber.interrupt(sampler))
  await runtime.run(Fiber.interrupt(follower))

  const all = [...ends.values()]
  const failed = all.flatMap((end) => problemOf(end, turns) ?? [])
  return {
    ends: all,
    failed: n - all.length + failed.length,
    problems: [...(cut === undefined ? [] : [cut]), ...failed],
    seconds,
    turns: all.reduce((sum, end) => sum + end.turns, 0),
    turnExecMs: runtime.turnExecSeconds.map((s) => s * 1000),
  }
}
