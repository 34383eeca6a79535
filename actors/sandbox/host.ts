import { randomUUID } from "node:crypto"
import { create, type DescMessage, type MessageShape, toBinary } from "@bufbuild/protobuf"
import { Clock, Deferred, Effect, Fiber, Schedule } from "effect"
import {
  type CreateSandboxRequest,
  CreateSandboxRequestSchema,
  CreateSandboxResultSchema,
  DestroySandboxRequestSchema,
  DestroySandboxResultSchema,
  ExecRequestSchema,
  ExecResultSchema,
  GetFilesRequestSchema,
  GetFilesResultSchema,
  PutFilesRequestSchema,
  PutFilesResultSchema,
  SandboxHostHeartbeatSchema,
  SealSandboxRequestSchema,
  SealSandboxResultSchema,
} from "../../proto/index.ts"
import { MalformedMessage, protobufDecoder, runActor } from "../../services/actor/index.ts"
import {
  type BreakerOptions,
  breakerMetrics,
  CircuitBreaker,
  DEFAULT_BREAKER_OPTIONS,
} from "../../services/breaker/index.ts"
import { Bus, type BusMessage, type Subjects } from "../../services/bus/index.ts"
import { Metrics } from "../../services/metrics/index.ts"
import {
  type ExecResult,
  SandboxDriver,
  type SandboxDriverShape,
  type SandboxInfo,
} from "./driver.ts"
import { EngineUnavailable, InvalidCommand, type SandboxError } from "./errors.ts"
import { sandboxMetrics } from "./metrics.ts"
import { reapOnce, startReaper } from "./reaper.ts"
import { makeSandboxPool, type PoolOptions } from "./warm-pool.ts"
import { errorDetail, type SpecDefaults, sealOptionsFromWire, specFromWire } from "./wire.ts"

export interface SandboxHostOptions {
  readonly subjects: Subjects
  /** Must equal the driver's owner label: the reaper treats what it owns at start-up as orphans. */
  readonly owner: string
  readonly defaults: SpecDefaults & {
    readonly execTimeoutMs: number
    readonly maxOutputBytes: number
    readonly maxGetBytes: number
  }
  readonly pool: PoolOptions
  readonly reapIntervalMs: number
  readonly heartbeatMs: number
  /** Requests a sandbox's subjects serve at once (execs are serialised by its shell anyway). */
  readonly perSandboxConcurrency: number
  /**
   * The host's circuit breaker: after this many consecutive infra failures of creates it leaves
   * the `sandbox` queue group for the cool-down (the other hosts take the work), then takes
   * creates again and closes on the first success or leaves again on the first failure.
   */
  readonly breaker?: BreakerOptions
}

/** The `component` label of a sandbox host's breaker in t1_breaker_state. */
const BREAKER_COMPONENT = "sandbox_host"

/** How long a destroyed sandbox's subjects keep answering (with "not found") before going. */
const UNSERVE_GRACE = "2 seconds"

interface Leased {
  readonly info: SandboxInfo
  readonly idleTtlMs: number
  lastUsed: number
  /** Requests being handled: a sandbox running a long command is not idle. */
  inFlight: number
}

// probe: answered empty, so a host can tell that a new sandbox's subscription is live.
const OPS = ["exec", "put", "get", "destroy", "seal", "probe"] as const
type Op = (typeof OPS)[number]

/** The operation is the subject's last token. */
const opOf = (subject: string): Op | undefined => {
  const last = subject.slice(subject.lastIndexOf(".") + 1)
  return OPS.find((op) => op === last)
}

const encode = <Desc extends DescMessage>(schema: Desc, init: Parameters<typeof create<Desc>>[1]) =>
  toBinary(schema, create(schema, init) as MessageShape<Desc>)

/**
 * The sandbox actor: creates sandboxes on `<prefix>.sandbox.create` (queue group `sandbox`, so
 * hosts share the load) and serves each one on `<prefix>.sandbox.<id>.{exec,put,get,destroy,seal}`.
 */
export const runSandboxHost = (
  options: SandboxHostOptions,
): Effect.Effect<never, never, Bus | Metrics | SandboxDriver> =>
  Effect.scoped(
    Effect.gen(function* () {
      const bus = yield* Bus
      const driver = yield* SandboxDriver
      const metrics = yield* Metrics
      const m = sandboxMetrics(metrics)
      const breaker = new CircuitBreaker(options.breaker ?? DEFAULT_BREAKER_OPTIONS)
      const bm = breakerMetrics(metrics)
      bm.set(BREAKER_COMPONENT, options.owner, "closed")
      /** Completed when the breaker opens: the create subscription stops taking work. */
      let tripped = yield* Deferred.make<void>()
      const leased = new Map<string, Leased>()
      const byRequest = new Map<string, string>()
      /** Creates in progress by request_id: a retry waits for the first one's answer. */
      const creating = new Map<string, Deferred.Deferred<Uint8Array>>()
      const scope = yield* Effect.scope

      const countError = (e: SandboxError) =>
        Effect.sync(() => m.errors.inc({ class: e.errorClass, error: e._tag }))

      /** A command for the session's shell, or (argv set) a process of its own outside it. */
      const execRequested = (
        id: string,
        command: string,
        argv: ReadonlyArray<string>,
        execOptions: { readonly timeoutMs: number; readonly maxOutputBytes: number },
      ): Effect.Effect<ExecResult, SandboxError> => {
        if (argv.length === 0)
          return command.includes("\0")
            ? Effect.fail(new InvalidCommand({ reason: "contains a NUL byte" }))
            : driver.exec(id, command, execOptions)
        if (command !== "")
          return Effect.fail(
            new InvalidCommand({ reason: "give either command or argv, not both" }),
          )
        if (argv.some((a) => a.includes("\0")))
          return Effect.fail(new InvalidCommand({ reason: "an argument contains a NUL byte" }))
        if (driver.execArgv === undefined)
          return Effect.fail(
            new InvalidCommand({
              reason: `the ${driver.kind} driver runs commands only in the sandbox's shell (argv is not supported)`,
            }),
          )
        return driver.execArgv(id, argv, execOptions)
      }

      /** Serving fibers of every sandbox this host created, warm or leased. */
      const servers = new Map<string, Fiber.Fiber<never>>()

      const release = (id: string) =>
        Effect.gen(function* () {
          const entry = leased.get(id)
          leased.delete(id)
          for (const [req, sid] of byRequest) if (sid === id) byRequest.delete(req)
          yield* Effect.ignore(driver.destroy(id))
          const server = servers.get(id)
          servers.delete(id)
          // Requests already on their way still get an answer (the driver's SandboxNotFound);
          // unsubscribing at once would drop them and leave their senders waiting out a timeout.
          if (server !== undefined) {
            yield* Fiber.interrupt(server).pipe(Effect.delay(UNSERVE_GRACE), Effect.forkIn(scope))
          }
          return entry !== undefined
        })

      const serveSandbox = (id: string) =>
        runActor(
          {
            name: "sandbox",
            mailbox: {
              kind: "subscription",
              subject: `${options.subjects.prefix}.sandbox.${id}.*`,
            },
            decode: (bytes) => Effect.succeed(bytes),
            handle: (bytes, delivery) =>
              handleOp(id, opOf(delivery.envelope.subject), bytes, delivery.envelope).pipe(
                Effect.flatMap(delivery.respond),
              ),
          },
          { concurrency: options.perSandboxConcurrency, quiet: true },
        )

      const decodeOr = <Desc extends DescMessage>(schema: Desc, bytes: Uint8Array) =>
        protobufDecoder(schema)(bytes)

      const handleOp = (
        id: string,
        op: Op | undefined,
        bytes: Uint8Array,
        envelope: BusMessage,
      ): Effect.Effect<Uint8Array, MalformedMessage> =>
        Effect.scoped(
          Effect.gen(function* () {
            const entry = leased.get(id)
            if (entry !== undefined) {
              entry.lastUsed = yield* Clock.currentTimeMillis
              entry.inFlight++
            }
            yield* Effect.addFinalizer(() =>
              Effect.map(Clock.currentTimeMillis, (now) => {
                if (entry === undefined) return
                entry.inFlight--
                entry.lastUsed = now
              }),
            )
            switch (op) {
              case "exec": {
                const req = yield* decodeOr(ExecRequestSchema, bytes)
                const started = yield* Clock.currentTimeMillis
                const command = req.command
                const execOptions = {
                  timeoutMs: req.timeoutMs || options.defaults.execTimeoutMs,
                  // The reply must fit one bus message, whatever the request asked for.
                  maxOutputBytes: Math.min(
                    req.maxOutputBytes || options.defaults.maxOutputBytes,
                    bus.maxPayload - 4096,
                  ),
                }
                const result = yield* execRequested(id, command, req.argv, execOptions).pipe(
                  Effect.tapError(countError),
                  Effect.result,
                )
                m.execSeconds.observe(((yield* Clock.currentTimeMillis) - started) / 1000)
                if (result._tag === "Failure") {
                  return encode(ExecResultSchema, {
                    exitCode: -1,
                    error: errorDetail(result.failure),
                    durationMs: (yield* Clock.currentTimeMillis) - started,
                  })
                }
                const r = result.success
                if (r.timedOut) m.timeouts.inc()
                if (r.truncated) m.truncations.inc()
                if (r.sessionRestarted) m.sessionRestarts.inc()
                return encode(ExecResultSchema, {
                  output: r.output,
                  exitCode: r.timedOut ? -1 : r.exitCode,
                  timedOut: r.timedOut,
                  truncated: r.truncated,
                  sessionRestarted: r.sessionRestarted,
                  durationMs: r.durationMs,
                  outputTotalBytes: BigInt(r.totalBytes),
                })
              }
              case "put": {
                const req = yield* decodeOr(PutFilesRequestSchema, bytes)
                const r = yield* driver
                  .put(id, req.path, req.tar)
                  .pipe(Effect.tapError(countError), Effect.result)
                return encode(
                  PutFilesResultSchema,
                  r._tag === "Failure" ? { error: errorDetail(r.failure) } : {},
                )
              }
              case "get": {
                const req = yield* decodeOr(GetFilesRequestSchema, bytes)
                const r = yield* driver
                  .get(id, req.path)
                  .pipe(Effect.tapError(countError), Effect.result)
                if (r._tag === "Failure")
                  return encode(GetFilesResultSchema, { error: errorDetail(r.failure) })
                const limit = Math.min(
                  Number(req.maxBytes) || options.defaults.maxGetBytes,
                  bus.maxPayload - 1024,
                )
                if (r.success.byteLength > limit) {
                  return encode(GetFilesResultSchema, {
                    error: {
                      code: 5,
                      message: `archive of ${req.path} is ${r.success.byteLength} bytes, over the limit of ${limit}`,
                      retryable: false,
                    },
                  })
                }
                return encode(GetFilesResultSchema, { tar: r.success })
              }
              case "seal": {
                const req = yield* decodeOr(SealSandboxRequestSchema, bytes)
                const sealOptions = sealOptionsFromWire(req)
                if (sealOptions instanceof Error) {
                  yield* countError(sealOptions)
                  return encode(SealSandboxResultSchema, { error: errorDetail(sealOptions) })
                }
                if (driver.seal === undefined)
                  return encode(SealSandboxResultSchema, { unsupported: true })
                const r = yield* driver
                  .seal(id, sealOptions)
                  .pipe(Effect.tapError(countError), Effect.result)
                if (r._tag === "Failure")
                  return encode(SealSandboxResultSchema, { error: errorDetail(r.failure) })
                return encode(SealSandboxResultSchema, {
                  ...r.success,
                  restored: [...r.success.restored],
                  removed: [...r.success.removed],
                })
              }
              case "probe":
                return new Uint8Array(0)
              case "destroy": {
                yield* decodeOr(DestroySandboxRequestSchema, bytes)
                const existed = yield* release(id)
                return encode(DestroySandboxResultSchema, { existed })
              }
              case undefined:
                return yield* new MalformedMessage({
                  kind: "subject",
                  reason: `no sandbox operation named by ${envelope.subject}`,
                })
            }
          }),
        )

      const createOne = (bytes: Uint8Array, respond: (b: Uint8Array) => Effect.Effect<void>) =>
        Effect.gen(function* () {
          const req = yield* decodeOr(CreateSandboxRequestSchema, bytes)
          const known = req.requestId === "" ? undefined : byRequest.get(req.requestId)
          if (known !== undefined && leased.has(known)) {
            return yield* respond(
              encode(CreateSandboxResultSchema, { sandboxId: known, driver: driver.kind }),
            )
          }
          const pending = req.requestId === "" ? undefined : creating.get(req.requestId)
          if (pending !== undefined) return yield* respond(yield* Deferred.await(pending))
          const answer = yield* Deferred.make<Uint8Array>()
          if (req.requestId !== "") creating.set(req.requestId, answer)
          const reply = yield* createFor(req.requestId, req.spec).pipe(
            Effect.ensuring(Effect.sync(() => creating.delete(req.requestId))),
          )
          yield* Deferred.succeed(answer, reply)
          yield* respond(reply)
        })

      const breakerFailure = Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const probing = breaker.state(now) === "half_open"
        if (!breaker.failure(now)) return
        bm.opened(BREAKER_COMPONENT, options.owner)
        yield* Effect.logWarning(
          `sandbox host ${options.owner}: circuit breaker open ${probing ? "again: the first create after the cool-down failed" : `after ${breaker.options.failures} infra failures of creates in a row`}; taking no creates for ${breaker.options.cooldownMs} ms`,
        )
        yield* Deferred.succeed(tripped, undefined)
      })

      const createFor = (requestId: string, wire: CreateSandboxRequest["spec"]) =>
        Effect.gen(function* () {
          const started = yield* Clock.currentTimeMillis
          const spec = specFromWire(wire, options.defaults)
          if (spec instanceof Error) {
            yield* countError(spec)
            return encode(CreateSandboxResultSchema, { error: errorDetail(spec) })
          }
          const lease = yield* pool.acquire(spec).pipe(Effect.tapError(countError), Effect.result)
          if (lease._tag === "Failure") {
            if (lease.failure.errorClass === "infra" && !(lease.failure instanceof BreakerOpen))
              yield* breakerFailure
            return encode(CreateSandboxResultSchema, { error: errorDetail(lease.failure) })
          }
          if (breaker.success()) bm.set(BREAKER_COMPONENT, options.owner, "closed")
          const id = lease.success.info.id
          leased.set(id, {
            info: lease.success.info,
            idleTtlMs: spec.ttlMs,
            lastUsed: yield* Clock.currentTimeMillis,
            inFlight: 0,
          })
          if (requestId !== "") byRequest.set(requestId, id)
          return encode(CreateSandboxResultSchema, {
            sandboxId: id,
            driver: driver.kind,
            durationMs: (yield* Clock.currentTimeMillis) - started,
          })
        })

      const waitUntilServed = (id: string) =>
        bus
          .request(`${options.subjects.prefix}.sandbox.${id}.probe`, new Uint8Array(0), {
            timeoutMs: 200,
          })
          .pipe(
            Effect.retry(Schedule.spaced("5 millis").pipe(Schedule.upTo({ times: 400 }))),
            Effect.ignore,
          )

      // Each sandbox's subjects are served from its creation, so a warm lease is only a reply.
      const startServing = (info: SandboxInfo) =>
        Effect.gen(function* () {
          const server = serveSandbox(info.id).pipe(
            Effect.provideService(Bus, bus),
            Effect.provideService(Metrics, metrics),
          )
          servers.set(info.id, yield* Effect.forkIn(server, scope))
          yield* waitUntilServed(info.id)
        })
      const reaper = {
        owner: options.owner,
        intervalMs: options.reapIntervalMs,
        inUse: () => new Set([...leased.keys(), ...pool.warmIds()]),
        onReaped: (_info: SandboxInfo, reason: "orphan" | "expired") => m.reaped.inc({ reason }),
      }
      // Orphans first: once the pool starts creating, its half-made sandboxes carry our owner too.
      yield* reapOnce(driver, { ...reaper, inUse: () => new Set<string>() }, true)
      const pool = yield* makeSandboxPool(driver, options.pool, {
        onCreated: (source, ms) => m.createSeconds.observe({ source }, ms / 1000),
        prepare: startServing,
        // Creates taken before the breaker opened still wait for a start slot; once open, they
        // are answered "unavailable" (the client retries elsewhere) instead of reaching the engine.
        admit: () =>
          Effect.flatMap(Clock.currentTimeMillis, (now) =>
            breaker.state(now) === "open"
              ? Effect.fail(new BreakerOpen(options.owner))
              : Effect.void,
          ),
      })
      yield* startReaper(driver, reaper, { startup: false })

      // Idle sandboxes go: a client that vanished must not pin a container forever.
      yield* Effect.forkScoped(
        Effect.repeat(
          Effect.gen(function* () {
            const now = yield* Clock.currentTimeMillis
            for (const [id, e] of leased) {
              if (e.inFlight === 0 && now - e.lastUsed > e.idleTtlMs) {
                yield* release(id)
                m.reaped.inc({ reason: "idle" })
              }
            }
          }),
          Schedule.spaced("5 seconds"),
        ),
      )

      yield* Effect.forkScoped(
        Effect.repeat(
          Effect.gen(function* () {
            const warm = [...pool.warmCounts().values()].reduce((a, b) => a + b, 0)
            m.sandboxes.set({ state: "warm" }, warm)
            m.sandboxes.set({ state: "starting" }, pool.startingCount())
            m.sandboxes.set({ state: "leased" }, leased.size)
            yield* Effect.ignore(
              bus.publish(
                `${options.subjects.prefix}.sandbox.heartbeat`,
                encode(SandboxHostHeartbeatSchema, {
                  owner: options.owner,
                  driver: driver.kind,
                  sandboxIds: [...leased.keys()],
                  warm,
                  starting: pool.startingCount(),
                  sentUnixMs: BigInt(yield* Clock.currentTimeMillis),
                }),
              ),
            )
          }),
          Schedule.spaced(`${options.heartbeatMs} millis`),
        ),
      )

      // Shutting down: nobody can reach this host's shells any more, so its sandboxes go too.
      yield* Effect.addFinalizer(() =>
        Effect.forEach([...leased.keys()], (id) => Effect.ignore(driver.destroy(id)), {
          concurrency: 8,
          discard: true,
        }),
      )

      const takeCreates = runActor(
        {
          name: "sandbox-create",
          mailbox: {
            kind: "subscription",
            subject: options.subjects.sandboxCreate,
            queue: "sandbox",
          },
          decode: (bytes) => Effect.succeed(bytes),
          handle: (bytes, delivery) => createOne(bytes, delivery.respond),
        },
        { concurrency: options.pool.maxStarting * 2 },
      )
      // Take creates until the breaker opens (interrupting the actor unsubscribes and lets the
      // creates in flight answer), sit out the cool-down, then take them again half-open.
      return yield* Effect.forever(
        Effect.gen(function* () {
          yield* Effect.raceFirst(takeCreates, Deferred.await(tripped))
          tripped = yield* Deferred.make<void>()
          const now = yield* Clock.currentTimeMillis
          yield* Effect.sleep(Math.max(0, (breaker.reopensAtMs() ?? now) - now))
          bm.set(BREAKER_COMPONENT, options.owner, "half_open")
          yield* Effect.logInfo(
            `sandbox host ${options.owner}: circuit breaker half-open; taking creates again`,
          )
        }),
      )
    }),
  )

/** A create refused at its start slot because this host's breaker is open (never an engine call). */
class BreakerOpen extends EngineUnavailable {
  constructor(owner: string) {
    super({
      engine: owner,
      reason: "this sandbox host's circuit breaker is open; try another host",
    })
  }
}

export const newOwnerId = (): string => `sandbox-${randomUUID().slice(0, 8)}`
export type { SandboxDriverShape }
