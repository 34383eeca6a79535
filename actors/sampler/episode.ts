import { create } from "@bufbuild/protobuf"
import { Clock, Context, Data, Effect, Schedule } from "effect"
import type { ChatFormat, EpisodeConversation } from "../../model/index.ts"
import {
  type EpisodeEnd,
  EpisodeEndSchema,
  type EpisodeWorkItem,
  ErrorCode,
  type ExecResult,
  type SandboxSpec,
  SandboxSpecSchema,
  type Task,
  TerminationReason,
  type VerifierResult,
} from "../../proto/index.ts"
import { type EpisodeLimits, episodeLimitsOf } from "../../services/jobs/index.ts"
import { concatBytes } from "../../services/packed/index.ts"
import { packFiles } from "../../services/tar/index.ts"
import type { ActionFormat, ShellCommand } from "./actions/format.ts"
import { formatObservation, malformedObservation } from "./actions/observation.ts"
import {
  type GenerateResult,
  PolicyBackend,
  type PolicyBackendShape,
  type PolicyError,
} from "./policy/backend.ts"
import { TrajectoryBuilder } from "./tito.ts"

/**
 * What an episode needs from the outside world besides its policy: sandboxes, the verifier, the
 * trajectory stream (the actor wires these to the bus), and the agent's chat template and
 * action format.
 */
export interface EpisodePortsShape {
  readonly createSandbox: (
    spec: SandboxSpec,
    requestId: string,
  ) => Effect.Effect<string, EpisodeInfraError>
  readonly exec: (
    sandboxId: string,
    command: string,
    options: { readonly timeoutMs: number; readonly maxOutputBytes: number },
  ) => Effect.Effect<ExecResult, EpisodeInfraError | CommandRejected>
  readonly putFiles: (
    sandboxId: string,
    path: string,
    tar: Uint8Array,
  ) => Effect.Effect<void, EpisodeInfraError>
  readonly destroySandbox: (sandboxId: string) => Effect.Effect<void>
  readonly verify: (
    item: EpisodeWorkItem,
    attempt: number,
    sandboxId: string,
  ) => Effect.Effect<VerifierResult, EpisodeInfraError>
  readonly template: ChatFormat
  readonly format: ActionFormat
  /** Publishes the span's chunk(s) durably, in order; fails only when the bus does. */
  readonly publish: (
    builder: TrajectoryBuilder,
    final: boolean,
  ) => Effect.Effect<number, EpisodeInfraError>
  readonly publishEnd: (end: EpisodeEnd) => Effect.Effect<void, EpisodeInfraError>
  /** Called after every turn: heartbeats, metrics. */
  readonly onTurn?: (turn: TurnReport) => Effect.Effect<void>
}

/** The episode's ports as a service: `runEpisode` reads them, with its PolicyBackend, from its context. */
export class EpisodePorts extends Context.Service<EpisodePorts, EpisodePortsShape>()(
  "t1/EpisodePorts",
) {}

/** The ports and the policy of one episode, as the turn loop uses them. */
type Wired = EpisodePortsShape & { readonly policy: PolicyBackendShape }

export interface TurnReport {
  readonly turn: number
  readonly generatedTokens: number
  readonly generationMs: number
  readonly execMs: number
  readonly contextTokens: number
  readonly policyVersion: bigint
}

/** The harness failed (sandbox, engine, bus): the episode is reported as infra-failed, never as reward 0. */
export class EpisodeInfraError extends Data.TaggedError("EpisodeInfraError")<{
  readonly stage: string
  readonly message: string
}> {}

/** The sandbox refused the command itself (e.g. a NUL byte): the agent is told, the episode goes on. */
export class CommandRejected extends Data.TaggedError("CommandRejected")<{
  readonly message: string
}> {}

const SYSTEM_PROMPT =
  "You are an agent operating a Linux shell to complete a task. Each command you send runs in the same persistent bash session; you then see its output."

/** The system prompt of every episode: the agent's role, then the action format's instructions. */
export const episodeSystemPrompt = (format: ActionFormat): string =>
  `${SYSTEM_PROMPT}\n\n${format.systemPrompt}`

const CTRL_C = String.fromCharCode(3)
const SETUP_DIR = "/tmp/t1-setup"
const SETUP_IN_WORKDIR = ".t1-setup"
const MAX_CONSECUTIVE_MALFORMED = 5
const encoder = new TextEncoder()

/** Setup scripts up to this size run inline (well under one argument's 128 KiB). */
const MAX_INLINE_SETUP_BYTES = 32 * 1024

/**
 * The command that runs a setup script given inline, as `bash -c` in the episode's shell: no
 * upload (a process in the sandbox, and on docker a helper process of the engine, per episode)
 * and no file of it left for the agent to read. Undefined for a script too large for one
 * argument or holding a NUL byte (which no argument can): those are uploaded.
 */
export const inlineSetup = (script: string): string | undefined =>
  encoder.encode(script).byteLength > MAX_INLINE_SETUP_BYTES || script.includes("\0")
    ? undefined
    : `bash -c '${script.replaceAll("'", "'\\''")}' setup.sh`

/**
 * Puts the setup script where it runs from and returns the command that runs it: SETUP_DIR, or,
 * when the sandbox refuses files there (the local driver transfers only under the workdir), a
 * hidden folder in the workdir that the command removes before the agent's first turn.
 */
const stageSetup = (
  ports: EpisodePortsShape,
  sandboxId: string,
  task: Task,
  tar: Uint8Array,
): Effect.Effect<string, EpisodeInfraError> =>
  ports.putFiles(sandboxId, SETUP_DIR, tar).pipe(
    Effect.as(`bash ${SETUP_DIR}/setup.sh`),
    Effect.catch((outside) => {
      const dir = `${task.workdir || "/app"}/${SETUP_IN_WORKDIR}`
      return ports.putFiles(sandboxId, dir, tar).pipe(
        Effect.as(`(bash ${dir}/setup.sh; __t1_rc=$?; rm -rf ${dir}; exit $__t1_rc)`),
        Effect.catch(() => Effect.fail(outside)),
      )
    }),
  )

export const sandboxSpecFor = (task: Task, item: EpisodeWorkItem, attempt: number): SandboxSpec =>
  create(SandboxSpecSchema, {
    image: task.dockerImage,
    ...(task.resources ? { limits: task.resources } : {}),
    network: task.allowInternet,
    workdir: task.workdir || "/app",
    labels: { "t1.job": item.jobId, "t1.episode": `${item.episodeId}:${attempt}` },
  })

/** Whether an exec failure is the harness's (retry elsewhere) or the agent's command. */
const commandLine = (c: ShellCommand): string | undefined => {
  const k = c.keystrokes
  // A lone Ctrl-C: the session already interrupts commands at their timeout.
  const bare = k.endsWith("\n") ? k.slice(0, -1) : k
  if (bare.length > 0 && [...bare].every((ch) => ch === CTRL_C)) return undefined
  return k.endsWith("\n") ? k.slice(0, -1) : k
}

/** Caps observation ids at `max`, keeping head and tail around a marker (the marker counts). */
const capTokens = (
  ids: Uint32Array,
  max: number,
  template: ChatFormat,
): { ids: Uint32Array; cut: boolean } => {
  if (ids.length <= max) return { ids, cut: false }
  const marker = template.content(`\n[... ${ids.length - max} tokens omitted ...]\n`)
  // A cap shorter than the marker: the head alone, so the cap still holds.
  if (marker.length >= max) return { ids: ids.slice(0, max), cut: true }
  const keep = Math.max(0, max - marker.length)
  const head = Math.ceil(keep / 2)
  const tail = keep - head
  const out = new Uint32Array(head + marker.length + tail)
  out.set(ids.subarray(0, head))
  out.set(marker, head)
  out.set(ids.subarray(ids.length - tail), head + marker.length)
  return { ids: out, cut: true }
}

interface Progress {
  turns: number
  termination: TerminationReason
  error: { code: ErrorCode; message: string } | undefined
  truncatedObservations: number
  generationMs: number
  execMs: number
  sandboxMs: number
  verifyMs: number
  verifier: VerifierResult | undefined
}

/**
 * Runs one episode: sandbox, prompt, the turn loop (generate, parse, execute, observe) until the
 * agent completes or a limit is reached, verification, and the trajectory streamed as it grows.
 * Returns the end record after it was published. Infra failures end the episode with
 * INFRA_FAILURE (published like any end, so the coordinator can retry it as a new attempt). An
 * unverifiable verification (the tests need packages the sandbox lacks) ends it `unverifiable`:
 * no reward or tests, an error naming the packages, not retryable. A forged one (the agent's
 * code tampered with the test run) ends it scored at reward 0 and `forged`.
 */
export const runEpisode = (
  item: EpisodeWorkItem,
  attempt: number,
): Effect.Effect<EpisodeEnd, EpisodeInfraError, EpisodePorts | PolicyBackend> =>
  Effect.gen(function* () {
    const ports: Wired = { ...(yield* EpisodePorts), policy: yield* PolicyBackend }
    const started = yield* Clock.currentTimeMillis
    const task = item.task
    if (!task)
      return yield* new EpisodeInfraError({
        stage: "work item",
        message: "work item carries no task",
      })
    const limits = episodeLimitsOf(item)
    // The action format says which tools the template describes and how observations return.
    const conversation = ports.template.conversation(ports.format)
    const builder = new TrajectoryBuilder(item.admittedPolicyVersion)
    const progress: Progress = {
      turns: 0,
      termination: TerminationReason.UNSPECIFIED,
      error: undefined,
      truncatedObservations: 0,
      generationMs: 0,
      execMs: 0,
      sandboxMs: 0,
      verifyMs: 0,
      verifier: undefined,
    }
    const sessionId = `${item.jobId}:${item.episodeId}:${attempt}`

    const body = Effect.gen(function* () {
      const sandboxStarted = yield* Clock.currentTimeMillis
      const sandboxId = yield* ports.createSandbox(sandboxSpecFor(task, item, attempt), sessionId)
      progress.sandboxMs = (yield* Clock.currentTimeMillis) - sandboxStarted
      return yield* Effect.ensuring(
        Effect.gen(function* () {
          if (task.setupScript !== "") {
            const script =
              inlineSetup(task.setupScript) ??
              (yield* stageSetup(ports, sandboxId, task, yield* packSetup(task.setupScript)))
            const setup = yield* ports
              .exec(sandboxId, script, {
                timeoutMs: 120_000,
                maxOutputBytes: 4096,
              })
              .pipe(
                Effect.catchTag("CommandRejected", (e) =>
                  Effect.fail(new EpisodeInfraError({ stage: "setup", message: e.message })),
                ),
              )
            if (setup.exitCode !== 0) {
              return yield* new EpisodeInfraError({
                stage: "setup",
                message: `setup script exited ${setup.exitCode}: ${new TextDecoder().decode(setup.output).slice(-300)}`,
              })
            }
          }
          yield* turnLoop(
            ports,
            item,
            limits,
            conversation,
            builder,
            progress,
            sandboxId,
            sessionId,
            // The agent's wall clock starts when its sandbox is ready: time spent waiting for a
            // sandbox (a host restarting, a full pool) is the system's, not the agent's.
            yield* Clock.currentTimeMillis,
          )
          const verifyStarted = yield* Clock.currentTimeMillis
          const result = yield* ports.verify(item, attempt, sandboxId)
          progress.verifyMs = (yield* Clock.currentTimeMillis) - verifyStarted
          if (result.infraFailed) {
            return yield* new EpisodeInfraError({
              stage: "verify",
              message: result.error?.message ?? "verifier infra failure",
            })
          }
          progress.verifier = result
        }),
        ports.destroySandbox(sandboxId),
      )
    })
    const infra = yield* body.pipe(
      Effect.as(undefined),
      Effect.catchTag("EpisodeInfraError", (e) => Effect.succeed(e)),
      Effect.ensuring(ports.policy.release(sessionId)),
    )
    if (infra) {
      progress.termination = TerminationReason.INFRA_FAILURE
      progress.error = { code: ErrorCode.UNAVAILABLE, message: `${infra.stage}: ${infra.message}` }
    }
    const chunks = yield* ports.publish(builder, true)
    const verified = progress.verifier
    // No score exists for an unverifiable episode (its tests need packages the sandbox lacks):
    // like an infra failure its reward and tests are left empty, but it is not retried, since
    // a rerun would find the same packages missing.
    const unverifiable = !infra && verified?.unverifiable === true
    if (unverifiable) progress.error = unverifiableError(verified, progress.error)
    const v = infra || unverifiable ? undefined : verified
    // Forging earns nothing, whatever counts a forged reply carries.
    const forged = v?.forged === true
    const end = create(EpisodeEndSchema, {
      jobId: item.jobId,
      episodeId: item.episodeId,
      attempt,
      totalChunks: chunks,
      totalTokens: builder.length,
      reward: forged ? 0 : (v?.reward ?? 0),
      resolved: forged ? false : (v?.resolved ?? false),
      tests: v?.tests ?? [],
      turns: progress.turns,
      termination: progress.termination,
      timings: {
        queueMs: Math.max(0, Math.min(0xffffffff, started - Number(item.admittedUnixMs))),
        sandboxMs: progress.sandboxMs,
        generationMs: progress.generationMs,
        execMs: progress.execMs,
        verifyMs: progress.verifyMs,
        totalMs: (yield* Clock.currentTimeMillis) - started,
      },
      driftEvents: conversation.driftEvents(),
      infraFailed: infra !== undefined,
      unverifiable,
      missingPackages: unverifiable ? [...(verified?.missingPackages ?? [])] : [],
      // A forged verification is a score (reward 0); the flag says why.
      forged,
      ...(progress.error
        ? {
            error: {
              code: progress.error.code,
              message: progress.error.message,
              retryable: infra !== undefined,
            },
          }
        : {}),
      policyVersionStart: builder.versionRange.start,
      policyVersionEnd: builder.versionRange.end,
      generatedTokens: builder.generatedTokens,
      truncatedObservations: progress.truncatedObservations,
      ...(item.taskRef
        ? { task: item.taskRef }
        : { task: { taskSet: task.taskSet, taskId: task.id } }),
      groupId: item.groupId,
      sampleIndex: item.sampleIndex,
      admittedPolicyVersion: item.admittedPolicyVersion,
      testsPassed: forged ? 0 : (v?.passed ?? 0),
      testsTotal: v?.total ?? 0,
      finishedUnixMs: BigInt(yield* Clock.currentTimeMillis),
    })
    yield* ports.publishEnd(end)
    return end
  })

/**
 * The end record's error of an unverifiable episode: the verifier's own message (which names the
 * missing packages), not retryable; an agent error of the same episode is kept in it.
 */
const unverifiableError = (
  result: VerifierResult | undefined,
  agent: Progress["error"],
): NonNullable<Progress["error"]> => {
  const missing = result?.missingPackages ?? []
  const why =
    result?.error?.message ||
    `the tests need packages the sandbox lacks${missing.length === 0 ? "" : `: ${missing.join(", ")}`}`
  return {
    code: ErrorCode.FAILED_PRECONDITION,
    message: `unverifiable: ${why}${agent === undefined ? "" : ` (the agent: ${agent.message})`}`,
  }
}

const packSetup = (script: string) =>
  Effect.tryPromise({
    try: () => packFiles({ "setup.sh": script }, 0o755),
    catch: (e) =>
      new EpisodeInfraError({ stage: "setup", message: `packing the setup script: ${String(e)}` }),
  })

const generateWithRetry = (
  policy: PolicyBackendShape,
  request: Parameters<PolicyBackendShape["generate"]>[0],
) =>
  policy.generate(request).pipe(
    Effect.retry({
      while: (e: PolicyError) => e.retryable,
      schedule: Schedule.exponential("200 millis").pipe(Schedule.jittered),
      times: 3,
    }),
    Effect.mapError(
      (e) => new EpisodeInfraError({ stage: "generate", message: `${e.backend}: ${e.message}` }),
    ),
  )

const turnLoop = (
  ports: Wired,
  item: EpisodeWorkItem,
  limits: EpisodeLimits,
  conversation: EpisodeConversation,
  builder: TrajectoryBuilder,
  progress: Progress,
  sandboxId: string,
  sessionId: string,
  started: number,
) =>
  Effect.gen(function* () {
    const task = item.task as Task
    const system = episodeSystemPrompt(ports.format)
    builder.startTurn()
    builder.appendContext(conversation.prompt(system, task.instruction))
    const sampling = item.sampling
    const stopIds = [...conversation.stopIds, ...(sampling?.stopTokenIds ?? [])]
    let malformedInARow = 0
    let seed = sampling?.seed
    const finish = (reason: TerminationReason) => {
      progress.termination = reason
    }
    for (let turn = 0; ; turn++) {
      if (turn >= limits.maxTurns) return finish(TerminationReason.MAX_TURNS)
      const left = limits.wallClockMs - ((yield* Clock.currentTimeMillis) - started)
      if (left <= 0) return finish(TerminationReason.WALL_CLOCK)
      const room = Math.min(limits.maxTokens, ports.policy.contextLength) - builder.length - 1
      if (room < 1) return finish(TerminationReason.MAX_TOKENS)
      const genStarted = yield* Clock.currentTimeMillis
      const result: GenerateResult = yield* generateWithRetry(ports.policy, {
        sessionId,
        ids: builder.context(),
        sampling: {
          temperature: sampling?.temperature ?? 1,
          topP: sampling?.topP && sampling.topP > 0 ? sampling.topP : 1,
          ...(sampling?.topK ? { topK: sampling.topK } : {}),
          maxTokens: Math.min(limits.turnMaxTokens, room),
          stopTokenIds: stopIds,
          ...(seed !== undefined ? { seed: Number(seed % 4294967296n) } : {}),
        },
        timeoutMs: Math.max(1000, left),
      })
      if (seed !== undefined) seed += 1n
      const generationMs = (yield* Clock.currentTimeMillis) - genStarted
      progress.generationMs += generationMs
      progress.turns = turn + 1
      const generatedAt = builder.length
      builder.appendGenerated(result.tokens, result.logprobs, result.policyVersion)
      builder.addRouting(result.routing)
      const { glue, content } = conversation.closeAssistant(generatedAt, result.tokens)
      const action = ports.format.parse(ports.template.tokenizer.decode(content))
      const turnEnds = (execMs: number) =>
        ports.onTurn
          ? ports.onTurn({
              turn,
              generatedTokens: result.tokens.length,
              generationMs,
              execMs,
              contextTokens: builder.length,
              policyVersion: result.policyVersion,
            })
          : Effect.void
      if (result.finishReason === "context_full") {
        builder.appendContext(glue)
        yield* turnEnds(0)
        return finish(TerminationReason.MAX_TOKENS)
      }
      let observation: Uint8Array
      let complete = false
      let execMs = 0
      if (action.kind === "malformed") {
        malformedInARow++
        if (malformedInARow >= MAX_CONSECUTIVE_MALFORMED) {
          builder.appendContext(glue)
          yield* turnEnds(0)
          progress.error = {
            code: ErrorCode.INVALID_ARGUMENT,
            message: `${malformedInARow} unparsable actions in a row: ${action.reason}`,
          }
          return finish(TerminationReason.AGENT_ERROR)
        }
        observation = malformedObservation(action.feedback)
      } else {
        malformedInARow = 0
        complete = action.kind === "complete" || action.taskComplete
        const commands = action.kind === "commands" ? action.commands : []
        const parts: Uint8Array[] = []
        const execStarted = yield* Clock.currentTimeMillis
        for (const command of commands) {
          const line = commandLine(command)
          if (line === undefined) {
            parts.push(encoder.encode("[interrupt: no command was running]\n"))
            continue
          }
          const remaining = limits.wallClockMs - ((yield* Clock.currentTimeMillis) - started)
          if (remaining <= 0) break
          const exec = yield* ports
            .exec(sandboxId, line, {
              timeoutMs: Math.max(1, Math.min(limits.commandTimeoutMs, remaining)),
              maxOutputBytes: limits.observationMaxBytes * 4,
            })
            .pipe(Effect.catchTag("CommandRejected", (e) => Effect.succeed(e)))
          if (exec instanceof CommandRejected) {
            parts.push(encoder.encode(`[command rejected: ${exec.message}]\n`))
            continue
          }
          const formatted = formatObservation(
            {
              output: exec.output,
              exitCode: exec.timedOut ? undefined : exec.exitCode,
              timedOut: exec.timedOut,
              ...(exec.truncated
                ? { truncatedBytes: Number(exec.outputTotalBytes) - exec.output.length }
                : {}),
            },
            {
              maxBytes: Math.max(
                256,
                Math.floor(limits.observationMaxBytes / Math.max(1, commands.length)),
              ),
            },
          )
          if (formatted.truncated || exec.truncated) progress.truncatedObservations++
          parts.push(formatted.bytes)
        }
        execMs = (yield* Clock.currentTimeMillis) - execStarted
        progress.execMs += execMs
        // Blind (an evaluation control): the commands ran and changed the sandbox, but the
        // policy reads nothing of what they printed. Feedback on a malformed reply (above) stays:
        // it is about the reply, not the sandbox, and without it a blind episode would also lose
        // the format's correction.
        observation = limits.blindObservations ? new Uint8Array(0) : concatBytes(parts)
      }
      if (complete) {
        builder.appendContext(glue)
        yield* turnEnds(execMs)
        return finish(TerminationReason.COMPLETED)
      }
      // The last allowed turn: its commands ran (the verifier sees their effect), but no policy
      // will read the observation, so it is not appended.
      if (turn + 1 >= limits.maxTurns) {
        builder.appendContext(glue)
        yield* turnEnds(execMs)
        return finish(TerminationReason.MAX_TURNS)
      }
      const encoded = ports.template.content(observation)
      const capped = capTokens(encoded, limits.observationMaxTokens, ports.template)
      if (capped.cut) progress.truncatedObservations++
      const observationStart = builder.length + glue.length
      const turnIds = conversation.observation(observationStart, capped.ids, observation)
      if (builder.length + glue.length + turnIds.length >= limits.maxTokens) {
        builder.appendContext(glue)
        yield* turnEnds(execMs)
        return finish(TerminationReason.MAX_TOKENS)
      }
      builder.appendContext(glue)
      builder.startTurn()
      builder.appendContext(turnIds)
      yield* ports.publish(builder, false)
      yield* turnEnds(execMs)
    }
  })
