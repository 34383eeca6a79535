import { Cause, Effect, Exit, Result, Schedule, Scope, Semaphore, Stream } from "effect"
import {
  Bus,
  BusClosed,
  type BusMessage,
  type BusShape,
  subjectFamily,
  type WorkItem,
} from "../bus/index.ts"
import { busMetrics } from "../bus/instrumented.ts"
import { Metrics } from "../metrics/index.ts"
import type { ActorSpec, Delivery, Mailbox, RunOptions } from "./actor.ts"
import type { MalformedMessage } from "./errors.ts"
import { actorMetrics } from "./metrics.ts"

interface Incoming {
  readonly envelope: BusMessage
  readonly item: WorkItem | undefined
}

/** Header on the reply to a request that could not be handled, so the requester fails fast. */
export const ERROR_HEADER = "t1-error"

/**
 * The mailbox as a stream; `ready` runs once messages can reach it: for a subject, after the
 * server has the subscription (a request sent before that finds no responders), for a work
 * queue when consuming starts (its durable consumer holds what arrives before).
 * After a restart it runs again, as the mailbox comes back.
 */
const mailboxStream = (
  bus: BusShape,
  mailbox: Mailbox,
  concurrency: number,
  ready: Effect.Effect<void>,
) =>
  mailbox.kind === "work-queue"
    ? Stream.unwrap(
        Effect.as(
          ready,
          bus
            .consume(mailbox.stream, mailbox.durable, { maxInFlight: concurrency })
            .pipe(Stream.map((item): Incoming => ({ envelope: item, item }))),
        ),
      )
    : Stream.unwrap(
        bus
          .subscribe(mailbox.subject, mailbox.queue === undefined ? {} : { queue: mailbox.queue })
          .pipe(
            Effect.tap(() => ready),
            Effect.map(Stream.map((envelope): Incoming => ({ envelope, item: undefined }))),
          ),
      )

const describeMailbox = (mailbox: Mailbox) =>
  mailbox.kind === "work-queue" ? `${mailbox.stream}/${mailbox.durable}` : mailbox.subject

/**
 * Runs an actor until interrupted. Shutdown (interruption, e.g. SIGTERM through runMain) stops
 * taking work, lets in-flight handlers finish within the grace period, and interrupts the rest,
 * whose work items are nak'd for another replica; the bus layer drains the connection after.
 */
export const runActor = <M, E, R>(
  spec: ActorSpec<M, E, R>,
  options: RunOptions = {},
): Effect.Effect<never, never, R | Bus | Metrics> =>
  Effect.scoped(
    Effect.gen(function* () {
      const bus = yield* Bus
      const metrics = yield* Metrics
      const am = actorMetrics(metrics)
      const bm = busMetrics(metrics)
      const actor = spec.name
      const concurrency = Math.max(1, options.concurrency ?? 1)
      const retryDelayMs = options.retryDelayMs ?? 1000
      const maxRetryDelayMs = options.maxRetryDelayMs ?? 60_000
      const permits = yield* Semaphore.make(concurrency)
      const handlers = yield* Scope.make()
      const loggedKinds = new Set<string>()
      // Short-lived actors (one per sandbox) would flood the log at Info.
      const lifecycleLog = options.quiet === true ? Effect.logDebug : Effect.logInfo

      const malformed = (envelope: BusMessage, item: WorkItem | undefined, e: MalformedMessage) =>
        Effect.gen(function* () {
          const family = subjectFamily(envelope.subject)
          bm.decodeFailures.inc({ subject: family, kind: e.kind })
          am.messages.inc({ actor, outcome: "malformed" })
          // A poison message never decodes: redelivering it would only repeat the failure.
          if (item !== undefined) yield* Effect.ignore(item.term("malformed"))
          if (envelope.reply !== undefined) {
            yield* Effect.ignore(
              bus.respond(envelope, new Uint8Array(0), { [ERROR_HEADER]: e.message }),
            )
          }
          const key = `${family}/${e.kind}`
          if (loggedKinds.has(key)) return
          loggedKinds.add(key)
          yield* Effect.logWarning(
            `${actor}: dropped a malformed message on ${envelope.subject}: ${e.message} (later ones of this kind are only counted in t1_bus_decode_failures_total)`,
          )
        })

      const withHeartbeat = <A, E2, R2>(
        effect: Effect.Effect<A, E2, R2>,
        item: WorkItem | undefined,
      ) => {
        const every = spec.mailbox.kind === "work-queue" ? spec.mailbox.heartbeatMs : undefined
        if (item === undefined || every === undefined) return effect
        return Effect.scoped(
          Effect.andThen(
            Effect.forkScoped(
              Effect.repeat(Effect.ignore(item.working), Schedule.spaced(`${every} millis`)),
            ),
            effect,
          ),
        )
      }

      const handleOne = ({ envelope, item }: Incoming): Effect.Effect<void, never, R> =>
        Effect.gen(function* () {
          const decoded = yield* Effect.result(spec.decode(envelope.data))
          if (Result.isFailure(decoded)) return yield* malformed(envelope, item, decoded.failure)
          const delivery: Delivery = {
            envelope,
            item,
            respond: (data) => Effect.ignore(bus.respond(envelope, data)),
          }
          am.inFlight.inc({ actor })
          const end = am.seconds.startTimer({ actor })
          const exit = yield* Effect.exit(
            withHeartbeat(spec.handle(decoded.success, delivery), item),
          )
          end()
          am.inFlight.dec({ actor })
          if (Exit.isSuccess(exit)) {
            am.messages.inc({ actor, outcome: "ok" })
            if (item !== undefined) yield* Effect.ignore(item.ack)
            return
          }
          am.messages.inc({ actor, outcome: "failed" })
          if (item === undefined) {
            yield* Effect.logWarning(
              `${actor}: handler failed on ${envelope.subject}`,
              Cause.pretty(exit.cause),
            )
            // A requester would otherwise wait out its whole timeout.
            if (envelope.reply !== undefined) {
              const reason = Cause.squash(exit.cause)
              yield* Effect.ignore(
                bus.respond(envelope, new Uint8Array(0), {
                  [ERROR_HEADER]: reason instanceof Error ? reason.message : String(reason),
                }),
              )
            }
            return
          }
          const delay = Math.min(maxRetryDelayMs, retryDelayMs * 2 ** (item.deliveryCount - 1))
          yield* Effect.logWarning(
            `${actor}: handler failed on delivery ${item.deliveryCount} of ${envelope.subject} #${item.streamSeq}; redelivering in ${delay} ms`,
            Cause.pretty(exit.cause),
          )
          yield* Effect.ignore(item.nak(delay))
        }).pipe(
          Effect.onInterrupt(() =>
            Effect.gen(function* () {
              am.messages.inc({ actor, outcome: "interrupted" })
              if (item !== undefined) yield* Effect.ignore(item.nak(0))
            }),
          ),
        )

      const dispatch = (incoming: Incoming) =>
        Effect.uninterruptibleMask((restore) =>
          restore(permits.take(1)).pipe(
            Effect.onInterrupt(() =>
              incoming.item === undefined ? Effect.void : Effect.ignore(incoming.item.nak(0)),
            ),
            Effect.andThen(
              Effect.forkIn(
                handleOne(incoming).pipe(Effect.ensuring(permits.release(1))),
                handlers,
              ),
            ),
          ),
        )

      // Logged when the mailbox is live: scripts and tests wait for this line before sending. A
      // work queue's start cannot tell a missing stream from a live one (the first pull does),
      // so it is said once, not before each restart of a mailbox still waiting for its stream.
      let announced = false
      const ready = Effect.suspend(() => {
        if (announced && spec.mailbox.kind === "work-queue") return Effect.void
        announced = true
        return lifecycleLog(
          `${actor}: taking messages from ${describeMailbox(spec.mailbox)} (concurrency ${concurrency})`,
        )
      })
      const mailboxRun = Stream.runForEach(
        mailboxStream(bus, spec.mailbox, concurrency, ready),
        dispatch,
      ).pipe(
        // A mailbox that ends by itself (subscription closed under us) is a failure to restart.
        Effect.andThen(
          Effect.fail(new BusClosed({ operation: `mailbox ${describeMailbox(spec.mailbox)}` })),
        ),
      )

      const restartDelay = Schedule.min([
        Schedule.exponential(`${options.restartDelayMs ?? 200} millis`),
        Schedule.spaced(`${options.maxRestartDelayMs ?? 30_000} millis`),
      ]).pipe(Schedule.jittered)

      yield* Effect.addFinalizer(() =>
        Effect.gen(function* () {
          const grace = options.shutdownGraceMs ?? 30_000
          yield* lifecycleLog(
            `${actor}: stopped taking work; waiting up to ${grace} ms for in-flight messages`,
          )
          const drained = yield* Effect.timeoutOption(
            permits.withPermits(concurrency)(Effect.void),
            `${grace} millis`,
          )
          if (drained._tag === "None") {
            yield* Effect.logWarning(
              `${actor}: grace period over; interrupting in-flight handlers (their work is nak'd)`,
            )
          }
          yield* Scope.close(handlers, Exit.void)
        }),
      )

      return yield* mailboxRun.pipe(
        Effect.tapError((e) =>
          Effect.sync(() => am.restarts.inc({ actor })).pipe(
            Effect.andThen(
              Effect.logWarning(`${actor}: mailbox failed (${e.message}); restarting with backoff`),
            ),
          ),
        ),
        Effect.retry(restartDelay),
        Effect.orDie,
      )
    }),
  )
