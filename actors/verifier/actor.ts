import { createHash } from "node:crypto"
import { appendFileSync } from "node:fs"
import { resolve, sep } from "node:path"
import { create } from "@bufbuild/protobuf"
import { Clock, Effect, Option } from "effect"
import {
  ErrorCode,
  type ErrorDetail,
  ErrorDetailSchema,
  type FilesRef,
  type VerifierResult,
  type VerifyRequest,
  VerifyRequestSchema,
} from "../../proto/index.ts"
import { protobufDecoder, runActor } from "../../services/actor/index.ts"
import { Bus, type BusShape, type Subjects } from "../../services/bus/index.ts"
import { Metrics, type MetricsShape } from "../../services/metrics/index.ts"
import { openArchive, packDirectory, type TestsArchive } from "../../services/tar/index.ts"
import { sandboxClient } from "../sandbox/index.ts"
import { clientSandboxLayer } from "./port.ts"
import { type VerifyOptions, verifyEpisode } from "./verify.ts"
import {
  encodeResultWithin,
  errorDetailOf,
  failedResult,
  resultFromOutcome,
  taskFromWire,
} from "./wire.ts"

export interface VerifierActorOptions {
  readonly subjects: Subjects
  /**
   * Root of the task store for FilesRef.dir: a test directory "fix-git/tests" of task set
   * "tb2" is `<taskRoot>/tb2/fix-git/tests`. Unset: requests must carry tests inline or in the
   * object store.
   */
  readonly taskRoot?: string
  /** Verifications at once (each mostly waits on its sandbox). Default 4. */
  readonly concurrency?: number
  readonly shutdownGraceMs?: number
  /** For tasks whose verifier_timeout_sec is 0. Default 600. */
  readonly defaultTimeoutSec?: number
  readonly verify?: Omit<VerifyOptions, "tests" | "command">
}

const SANDBOX_ID = /^[A-Za-z0-9_-]+$/
const SAFE_TOKEN = /^[A-Za-z0-9._-]+$/

const detail = (code: ErrorCode, message: string, fieldPath = "", retryable = false) =>
  create(ErrorDetailSchema, { code, message, fieldPath, retryable })

const verifierMetrics = (metrics: MetricsShape) => ({
  verifications: metrics.counter({
    name: "t1_verifier_verifications_total",
    help: "Verify requests answered, by result (resolved, unresolved, timeout, forged, unverifiable, infra, invalid)",
    labelNames: ["result"],
  }),
  unguarded: metrics.counter({
    name: "t1_verifier_unguarded_total",
    help: "Verifications run with the sandbox's own shell and Python (a driver that cannot seal, such as the local driver, or a sandbox without the toolchain): the agent could have forged them",
  }),
  forged: metrics.counter({
    name: "t1_verifier_forged_total",
    help: "Verifications whose test run the agent's code tampered with (a canary test reported wrong, a test file changed), scored 0, by task",
    labelNames: ["task_set", "task"],
  }),
  tests: metrics.counter({
    name: "t1_verifier_tests_total",
    help: "Test cases reported, by outcome",
    labelNames: ["outcome"],
  }),
  seconds: metrics.histogram({
    name: "t1_verifier_duration_seconds",
    help: "Time of one verification: copying the tests in, running them, reading results",
    buckets: [0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800],
  }),
})

/** The tests a request names, as an archive; failures say what was wrong with the request. */
const testsArchiveFor = (
  bus: BusShape,
  ref: FilesRef | undefined,
  taskSet: string,
  taskRoot: string | undefined,
): Effect.Effect<TestsArchive, ErrorDetail> => {
  const field = "task.test_files"
  const source = ref?.source
  switch (source?.case) {
    case "tar":
      return Effect.tryPromise({
        try: () => openArchive(source.value),
        catch: (e) => detail(ErrorCode.INVALID_ARGUMENT, `not a tar archive: ${e}`, `${field}.tar`),
      })
    case "dir": {
      if (taskRoot === undefined)
        return Effect.fail(
          detail(
            ErrorCode.FAILED_PRECONDITION,
            "this verifier has no task store (start it with --task-root)",
            `${field}.dir`,
          ),
        )
      const setRoot = resolve(taskRoot, taskSet)
      const dir = resolve(setRoot, source.value)
      if (!SAFE_TOKEN.test(taskSet) || !(dir === setRoot || dir.startsWith(setRoot + sep)))
        return Effect.fail(
          detail(
            ErrorCode.INVALID_ARGUMENT,
            `${source.value} of task set ${JSON.stringify(taskSet)} is outside the task store`,
            `${field}.dir`,
          ),
        )
      return Effect.tryPromise({
        try: () => packDirectory(dir),
        catch: (e) => detail(ErrorCode.NOT_FOUND, `tests at ${dir}: ${e}`, `${field}.dir`),
      })
    }
    case "object": {
      const { bucket, name, sha256 } = source.value
      return Effect.gen(function* () {
        const store = yield* bus.objectStore(bucket)
        return yield* store.get(name)
      }).pipe(
        Effect.mapError((e) => detail(ErrorCode.UNAVAILABLE, e.message, `${field}.object`, true)),
        Effect.flatMap((found) =>
          Option.match(found, {
            onNone: () =>
              Effect.fail(
                detail(
                  ErrorCode.NOT_FOUND,
                  `no object ${name} in ${bucket}`,
                  `${field}.object.name`,
                ),
              ),
            onSome: (bytes) =>
              sha256 !== "" && createHash("sha256").update(bytes).digest("hex") !== sha256
                ? Effect.fail(
                    detail(
                      ErrorCode.FAILED_PRECONDITION,
                      `object ${bucket}/${name} does not match its sha256`,
                      `${field}.object.sha256`,
                    ),
                  )
                : Effect.succeed(bytes),
          }),
        ),
        Effect.flatMap((bytes) =>
          Effect.tryPromise({
            try: () => openArchive(bytes),
            catch: (e) =>
              detail(ErrorCode.INVALID_ARGUMENT, `not a tar archive: ${e}`, `${field}.object`),
          }),
        ),
      )
    }
    default:
      return Effect.fail(detail(ErrorCode.INVALID_ARGUMENT, "no test files", field))
  }
}

/**
 * With T1_DOCKER_PROFILE set, one line per verification in that profile (as the sandbox host's
 * engine calls, actors/sandbox/docker/profile.ts), so a load run shows the verifier's share.
 */
const profileSpan = (op: string, start: number, id: string): void => {
  const file = process.env.T1_DOCKER_PROFILE
  if (file === undefined || file === "") return
  const ms = Math.round((performance.now() - start) * 10) / 10
  try {
    appendFileSync(file, `${JSON.stringify({ at: Math.round(Date.now() - ms), ms, op, id })}\n`)
  } catch {
    // A profile that cannot be written must not fail the verification it describes.
  }
}

/**
 * The verifier actor: answers VerifyRequest on `<prefix>.verify` (queue group `verifier`, so
 * replicas share the load) with a VerifierResult. The tests run in the episode's sandbox through
 * its sandbox host, over the bus. Every request gets an answer: a bad one an error, a failure of
 * the machinery `infra_failed` (retryable or not), never a reward of 0 that was not earned.
 */
export const runVerifier = (
  options: VerifierActorOptions,
): Effect.Effect<never, never, Bus | Metrics> =>
  Effect.gen(function* () {
    const bus = yield* Bus
    const m = verifierMetrics(yield* Metrics)
    const client = sandboxClient(bus, options.subjects)
    const defaultTimeoutSec = options.defaultTimeoutSec ?? 600

    const verify = (req: VerifyRequest): Effect.Effect<VerifierResult> =>
      Effect.gen(function* () {
        const started = yield* Clock.currentTimeMillis
        const began = performance.now()
        const fail = (error: ErrorDetail, result: string) =>
          Effect.map(Clock.currentTimeMillis, (now) => {
            m.verifications.inc({ result })
            return failedResult(error, now - started)
          })
        if (!SANDBOX_ID.test(req.sandboxId))
          return yield* fail(
            detail(ErrorCode.INVALID_ARGUMENT, "sandbox_id must be [A-Za-z0-9_-]+", "sandbox_id"),
            "invalid",
          )
        if (req.task === undefined)
          return yield* fail(detail(ErrorCode.INVALID_ARGUMENT, "no task", "task"), "invalid")
        const archive = yield* Effect.result(
          testsArchiveFor(bus, req.task.testFiles, req.task.taskSet, options.taskRoot),
        )
        if (archive._tag === "Failure")
          return yield* fail(archive.failure, archive.failure.retryable ? "infra" : "invalid")
        const { task, command } = taskFromWire(req.task, defaultTimeoutSec)
        const outcome = yield* Effect.result(
          verifyEpisode(task, {
            ...options.verify,
            tests: archive.success,
            ...(command === undefined ? {} : { command }),
          }).pipe(Effect.provide(clientSandboxLayer(client, req.sandboxId, bus.maxPayload))),
        )
        m.seconds.observe(((yield* Clock.currentTimeMillis) - started) / 1000)
        profileSpan("verifier: verify (after its queue)", began, req.sandboxId)
        if (outcome._tag === "Failure") {
          const e = outcome.failure
          yield* Effect.logWarning(
            `verifier: episode ${req.episodeId} (attempt ${req.attempt}) in ${req.sandboxId}: ${e.message}`,
          )
          return yield* fail(
            errorDetailOf(e),
            e._tag === "VerifierInfraError" ? "infra" : "invalid",
          )
        }
        const o = outcome.success
        for (const t of o.tests) m.tests.inc({ outcome: t.outcome })
        m.verifications.inc({
          result:
            o.kind === "forged"
              ? "forged"
              : o.kind === "unverifiable"
                ? "unverifiable"
                : o.timedOut
                  ? "timeout"
                  : o.resolved
                    ? "resolved"
                    : "unresolved",
        })
        if (!o.guarded) m.unguarded.inc()
        if (o.kind === "forged") {
          m.forged.inc({ task_set: req.task.taskSet, task: req.task.id })
          yield* Effect.logWarning(
            `verifier: episode ${req.episodeId} (attempt ${req.attempt}) of ${req.task.taskSet}/${req.task.id} is forged, scored 0: ${o.forgery.join("; ")}`,
          )
        }
        yield* Effect.logDebug(
          `verifier: episode ${req.episodeId}: ${o.passed}/${o.total} passed (${o.mode}) in ${o.durationMs} ms`,
        )
        return resultFromOutcome(o)
      })

    return yield* runActor(
      {
        name: "verifier",
        mailbox: { kind: "subscription", subject: options.subjects.verify, queue: "verifier" },
        decode: protobufDecoder(VerifyRequestSchema),
        handle: (req: VerifyRequest, delivery) =>
          verify(req).pipe(
            // Under max_payload less room for the reply's headers.
            Effect.map((result) => encodeResultWithin(result, bus.maxPayload - 4096)),
            Effect.flatMap(delivery.respond),
          ),
      },
      {
        concurrency: options.concurrency ?? 4,
        ...(options.shutdownGraceMs === undefined
          ? {}
          : { shutdownGraceMs: options.shutdownGraceMs }),
      },
    )
  })
