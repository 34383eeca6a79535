/**
 * deploy/nats/nats-server.conf on a real nats-server: every role connects with its own user (the
 * CLI's --nats-user/--nats-password options, through the repo's NATS connection helper), does its
 * job with the actors' own code, and is refused what it has no business doing. The server's log
 * is the witness: the allowed phase must leave no permission violation in it, and every refusal
 * must be one.
 */
import { randomBytes } from "node:crypto"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { create, fromBinary, toBinary } from "@bufbuild/protobuf"
import { Effect, Exit, Fiber, Option, Schedule, Scope, Stream } from "effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { takeBatch } from "../../actors/buffer/client.ts"
import { runBuffer } from "../../actors/buffer/index.ts"
import { coordinatorBucket, coordinatorDurable } from "../../actors/coordinator/index.ts"
import { tryAcquireLease } from "../../actors/coordinator/lease.ts"
import { diagnosticActor } from "../../actors/diagnostic/index.ts"
import { loadCheckpoint, saveCheckpoint } from "../../actors/learner/checkpoint.ts"
import { DEFAULT_LEARNER_CONFIG, Trainer } from "../../actors/learner/trainer.ts"
import { shellBlock } from "../../actors/sampler/actions/index.ts"
import { runSampler } from "../../actors/sampler/actor.ts"
import { scriptedPolicy } from "../../actors/sampler/policy/scripted.ts"
import {
  chunkMsgId,
  chunkRecord,
  encodeRecord,
  endMsgId,
  endRecord,
} from "../../actors/sampler/records.ts"
import { TrajectoryBuilder } from "../../actors/sampler/tito.ts"
import { sandboxClient } from "../../actors/sandbox/client.ts"
import { runSandboxHost } from "../../actors/sandbox/host.ts"
import { LocalDriverLive } from "../../actors/sandbox/local/index.ts"
import { runVerifier } from "../../actors/verifier/actor.ts"
import { natsOptionsFrom } from "../../cli/bus-flags.ts"
import { loadBundledTokenizer } from "../../model/bundled/bundled.ts"
import { ChatTemplate, generateBatch, Rng, Sequence, TinyMoe } from "../../model/index.ts"
import {
  EpisodeEndSchema,
  EpisodeWorkItemSchema,
  JobAdmittedSchema,
  JobSpecSchema,
  JobState,
  PingSchema,
  PongSchema,
  type TrajectoryRecord,
  TrajectoryRecordSchema,
} from "../../proto/index.ts"
import { runActor } from "../../services/actor/index.ts"
import { Bus, type BusShape, makeNatsBus, subjectsFor } from "../../services/bus/index.ts"
import { ensureSamplerStreams } from "../../services/episodes/index.ts"
import { makeJobStore } from "../../services/jobs/index.ts"
import { Metrics, type MetricsShape, makeMetrics } from "../../services/metrics/index.ts"
import { packDirectory } from "../../services/tar/index.ts"
import { followWeights, publishWeights, readVersion } from "../../services/weights/index.ts"
import { type NatsServerProcess, startNatsServer } from "../support/nats-server.ts"

const CONF = fileURLToPath(new URL("../../deploy/nats/nats-server.conf", import.meta.url))
const ROLES = [
  "admin",
  "gateway",
  "coordinator",
  "sampler",
  "sandbox",
  "verifier",
  "buffer",
  "learner",
] as const
type Role = (typeof ROLES)[number]

/** The configuration is written for the default prefix. */
const subjects = subjectsFor("t1")
/** The learner's checkpoint bucket (`<prefix>-checkpoints`). */
const CHECKPOINTS = "t1-checkpoints"
const passwordEnv = (role: Role) => `T1_NATS_${role.toUpperCase()}_PASSWORD`
/**
 * nats-server parses a variable's value as configuration: a password starting with a letter and
 * made of letters and digits is read as it is; anything else goes in double quotes inside the
 * variable (the admin's, with a space, '#', ';' and braces, shows the quoting works).
 */
const passwords = Object.fromEntries(
  ROLES.map((role) => [
    role,
    role === "admin"
      ? `p${randomBytes(12).toString("hex")} #;{x}`
      : `p${randomBytes(16).toString("hex")}`,
  ]),
) as Record<Role, string>
const passwordValue = (role: Role) => (role === "admin" ? `"${passwords[role]}"` : passwords[role])

const scratch = mkdtempSync(join(tmpdir(), "t1-nats-permissions-"))
const logFile = join(scratch, "nats-server.log")
let server: NatsServerProcess
let scope: Scope.Closeable
const buses = new Map<Role, BusShape>()
const metrics = new Map<Role, MetricsShape>()
const fibers: Fiber.Fiber<unknown, unknown>[] = []

/** Options as `t1 actor <role> --nats URL --nats-user <role> --nats-password …` builds them. */
const optionsFor = (user: string, password: string) =>
  natsOptionsFrom(
    {
      nats: server.url,
      "nats-user": user,
      "nats-password": password,
      "nats-connect-attempts": "1",
    },
    "nats-permissions test",
    `t1-${user}`,
  )

const busOf = (role: Role): BusShape => {
  const bus = buses.get(role)
  if (bus === undefined) throw new Error(`no connection for ${role}`)
  return bus
}

/** `effect` run with `role`'s connection as the Bus (and a metrics registry of its own). */
const as = <A, E>(role: Role, effect: Effect.Effect<A, E, Bus | Metrics>) =>
  effect.pipe(
    Effect.provideService(Bus, busOf(role)),
    Effect.provideService(Metrics, metrics.get(role) ?? makeMetrics({ defaultMetrics: false })),
  )

const run = <A, E>(role: Role, effect: Effect.Effect<A, E, Bus | Metrics>) =>
  Effect.runPromise(as(role, effect))

/** Starts an actor in the background for the rest of the file. */
const start = <E>(role: Role, actor: Effect.Effect<unknown, E, Bus | Metrics>) => {
  fibers.push(Effect.runFork(as(role, actor)))
}

const violations = (): string[] =>
  readFileSync(logFile, "utf8")
    .split("\n")
    .filter((line) => /Violation/.test(line))

beforeAll(async () => {
  for (const role of ROLES) process.env[passwordEnv(role)] = passwordValue(role)
  try {
    server = await startNatsServer({ args: ["-c", CONF, "-l", logFile] })
  } finally {
    for (const role of ROLES) delete process.env[passwordEnv(role)]
  }
  scope = await Effect.runPromise(Scope.make())
  for (const role of ROLES) {
    metrics.set(role, makeMetrics({ defaultMetrics: false }))
    buses.set(
      role,
      await Effect.runPromise(Scope.provide(scope)(makeNatsBus(optionsFor(role, passwords[role])))),
    )
  }
})

afterAll(async () => {
  await Effect.runPromise(
    Effect.forEach(fibers, (f) => Fiber.interrupt(f), { concurrency: "unbounded" }),
  )
  if (scope !== undefined) await Effect.runPromise(Scope.close(scope, Exit.void))
  await server?.stop()
  rmSync(scratch, { recursive: true, force: true })
})

// ---------------------------------------------------------------------------------------------
// Fixtures

const WORK_TESTS = `from pathlib import Path

def test_first():
    assert Path("out1.txt").read_text().strip() == "1"

def test_second():
    assert Path("out2.txt").read_text().strip() == "2"
`

const TINY = {
  vocabSize: 8,
  dModel: 16,
  nLayers: 1,
  nHeads: 2,
  nExperts: 4,
  topK: 2,
  dFf: 16,
  maxSeqLen: 16,
}

/** One-token episodes sampled from `model` on the job's trajectory subject, as a sampler streams them. */
const publishEpisodes = (bus: BusShape, job: string, model: TinyMoe, n: number) =>
  Effect.gen(function* () {
    const rng = new Rng(7)
    for (let e = 0; e < n; e++) {
      const sequence = new Sequence(model)
      sequence.append([1, 2])
      const [g] = generateBatch(model, [
        {
          sequence,
          params: { temperature: 1, topP: 1, maxTokens: 1, stopTokenIds: new Set() },
          rng,
        },
      ])
      const token = g?.tokens[0] as number
      const b = new TrajectoryBuilder(0n)
      b.startTurn()
      b.appendContext([1, 2])
      b.appendGenerated([token], [g?.logprobs[0] as number], 0n)
      b.addRouting({ start: 0, rows: sequence.routing(), layers: 1, topK: 2, numExperts: 4 })
      const span = b.takeSpan(true)
      const who = { jobId: job, episodeId: `ep-${e}`, attempt: 0 }
      if (span)
        yield* bus.jsPublish(
          subjects.trajectories(job),
          encodeRecord(chunkRecord(who, 0, span, Date.now())),
          {
            msgId: chunkMsgId(who, 0),
          },
        )
      const end = create(EpisodeEndSchema, {
        ...who,
        totalChunks: 1,
        totalTokens: 3,
        reward: e % 2,
        resolved: e % 2 === 1,
        groupId: `g-${e}`,
      })
      yield* bus.jsPublish(subjects.trajectories(job), encodeRecord(endRecord(end)), {
        msgId: endMsgId(who),
      })
    }
  })

// ---------------------------------------------------------------------------------------------

describe("NATS roles (deploy/nats/nats-server.conf)", () => {
  it("refuses connections without a user or with a wrong password", async () => {
    const connect = (options: ReturnType<typeof optionsFor>) =>
      Effect.runPromise(Effect.exit(Effect.scoped(makeNatsBus(options))))
    const anonymous = await connect({ servers: server.url, connectAttempts: 1 })
    const wrong = await connect(optionsFor("sampler", passwords.gateway))
    const unknown = await connect(optionsFor("intruder", passwords.admin))
    for (const exit of [anonymous, wrong, unknown]) {
      expect(Exit.isFailure(exit)).toBe(true)
      expect(String(exit)).toMatch(/Authorization Violation|authentication/i)
    }
  })

  describe("each role does its job with the actors' own code, without a single violation", () => {
    const evalJob = "job-eval"
    const trainJob = "job-train"
    /** Log lines before the test: each test must add no violation of its own. */
    let before = 0
    beforeEach(() => {
      before = violations().length
    })
    /** Asynchronous follow-ups (acks, ordered consumers' info requests) land in the log first. */
    const noNewViolations = async () => {
      await new Promise((resolve) => setTimeout(resolve, 300))
      expect(violations().slice(before)).toEqual([])
    }

    it("every role answers `t1 ping` (Pong through allow_responses), the admin asks", async () => {
      for (const role of ROLES.filter((r) => r !== "admin")) {
        const fiber = Effect.runFork(as(role, runActor(diagnosticActor(subjects.ping, role))))
        try {
          const nonce = randomBytes(8).toString("hex")
          const reply = await Effect.runPromise(
            busOf("admin")
              .request(subjects.ping, toBinary(PingSchema, create(PingSchema, { nonce })), {
                timeoutMs: 5000,
              })
              .pipe(
                Effect.retry({
                  while: (e) => e._tag === "NoResponders" || e._tag === "RequestTimeout",
                  schedule: Schedule.spaced("20 millis"),
                  times: 100,
                }),
              ),
          )
          expect(fromBinary(PongSchema, reply.data)).toMatchObject({ nonce, actor: role })
        } finally {
          await Effect.runPromise(Fiber.interrupt(fiber))
        }
      }
      await noNewViolations()
    })

    it("gateway: the job store (KV t1-jobs, job events, WatchJob readers)", async () => {
      const events = await run(
        "gateway",
        Effect.gen(function* () {
          const store = yield* makeJobStore(yield* Bus, subjects)
          const { status } = yield* store.create(
            create(JobSpecSchema, { name: "permissions", taskSet: "security" }),
            { requestId: "permissions-1" },
          )
          yield* store.get(status.jobId)
          yield* store.list({})
          yield* store.transition(status.jobId, JobState.RUNNING)
          yield* store.cancel(status.jobId, "done with the check")
          return yield* store.watch(status.jobId).pipe(Stream.take(2), Stream.runCollect)
        }),
      )
      expect(events.length).toBe(2)
      await noNewViolations()
    })

    it("coordinator: work queue, trajectory stream, jobs, leases, weights (read)", async () => {
      await run(
        "coordinator",
        Effect.gen(function* () {
          const bus = yield* Bus
          yield* ensureSamplerStreams(bus, subjects)
          const store = yield* makeJobStore(bus, subjects)
          const jobs = yield* store.list({})
          const listed = jobs.jobs[0]
          if (listed === undefined) return yield* Effect.die("the gateway's job is not listed")
          const first = Option.getOrThrow(yield* store.getStored(listed.jobId))
          yield* store.compareAndSet(first.jobId, first.status, first.revision)
          yield* store.appendEvent(first.jobId, {
            event: { case: "admitted", value: create(JobAdmittedSchema, {}) },
          })
          yield* Effect.scoped(Effect.flatMap(store.storedChanges, (s) => Stream.runHead(s)))
          const leases = yield* bus.kv(coordinatorBucket(subjects))
          const lease = yield* tryAcquireLease(leases, first.jobId, "coordinator-1", 15_000)
          if (Option.isNone(lease)) return yield* Effect.die("no lease")
          yield* lease.value.heartbeat
          yield* lease.value.release
          yield* lease.value.remove
          const weights = yield* bus.kv(subjects.weightsBucket)
          yield* weights.get(`${trainJob}.latest`)
          yield* Effect.scoped(weights.watch(`${trainJob}.latest`))
          yield* bus.ensureConsumer({
            stream: subjects.trajectoriesStream,
            durable: coordinatorDurable(evalJob),
            filterSubject: subjects.trajectories(evalJob),
            ackWaitMs: 30_000,
            maxDeliver: -1,
          })
        }),
      )
      await noNewViolations()
    })

    it("sampler, sandbox host and verifier: one episode, the coordinator reads its end", async () => {
      // The verifier runs the tests in a local-driver sandbox: paths outside /app are this host's.
      const testDir = join(scratch, "verify", "tests")
      const logsDir = join(scratch, "verify", "logs")
      const testsSrc = join(scratch, "tests-src")
      mkdirSync(testsSrc, { recursive: true })
      writeFileSync(join(testsSrc, "test_work.py"), WORK_TESTS)
      // An operator uploads the tests; the verifier reads them from the object store.
      await run(
        "admin",
        Effect.gen(function* () {
          const store = yield* (yield* Bus).objectStore("t1-tests")
          yield* store.put(
            "permissions.tar",
            (yield* Effect.promise(() => packDirectory(testsSrc))).tar,
          )
        }),
      )
      const owner = `permissions-${randomBytes(3).toString("hex")}`
      start(
        "sandbox",
        runSandboxHost({
          subjects,
          owner,
          defaults: {
            image: "local",
            workdir: "/app",
            ttlMs: 60_000,
            execTimeoutMs: 10_000,
            maxOutputBytes: 64 * 1024,
            maxGetBytes: 1 << 20,
          },
          pool: { warm: [], maxStarting: 2, createPerSecond: 50, createBurst: 4 },
          reapIntervalMs: 60_000,
          heartbeatMs: 500,
          perSandboxConcurrency: 2,
        }).pipe(Effect.provide(LocalDriverLive({ owner, interruptGraceMs: 1000 }))),
      )
      start("verifier", runVerifier({ subjects, concurrency: 1, verify: { logsDir } }))
      const tokenizer = loadBundledTokenizer()
      const template = new ChatTemplate(tokenizer)
      const turns = shellBlock.renderSolution("echo 1 > out1.txt\n")
      const policy = scriptedPolicy(tokenizer, () => turns)
      start(
        "sampler",
        runSampler({ subjects, policy, template, format: shellBlock, concurrency: 1 }),
      )
      const item = create(EpisodeWorkItemSchema, {
        jobId: evalJob,
        episodeId: "ep-1",
        task: {
          id: "permissions",
          taskSet: "security",
          dockerImage: "local",
          workdir: "/app",
          verifierTimeoutSec: 60,
          testDir,
          expectedTestCount: 2,
          testFiles: {
            source: { case: "object", value: { bucket: "t1-tests", name: "permissions.tar" } },
          },
        },
        sampling: { temperature: 1, topP: 1, maxTokens: 256 },
        limits: { maxTurns: 4, maxTokens: 8192, commandTimeoutMs: 10_000 },
        admittedUnixMs: BigInt(Date.now()),
      })
      const end = await run(
        "coordinator",
        Effect.gen(function* () {
          const bus = yield* Bus
          yield* bus.jsPublish(subjects.episodes, toBinary(EpisodeWorkItemSchema, item), {
            msgId: `${evalJob}:ep-1:0`,
          })
          const records = bus.consume(subjects.trajectoriesStream, coordinatorDurable(evalJob), {
            maxInFlight: 64,
          })
          const found = yield* records.pipe(
            Stream.mapEffect((w) =>
              Effect.as(w.ack, fromBinary(TrajectoryRecordSchema, w.data) as TrajectoryRecord),
            ),
            Stream.filter((r) => r.record.case === "end"),
            Stream.runHead,
            Effect.timeout("60 seconds"),
          )
          return Option.getOrUndefined(found)
        }),
      )
      // The sampler acks its work item once the end record is stored.
      const pending = async () => {
        const reply = await Effect.runPromise(
          busOf("admin").request(
            `$JS.API.CONSUMER.INFO.${subjects.episodesStream}.sampler`,
            new Uint8Array(0),
            { timeoutMs: 2000 },
          ),
        )
        const info = JSON.parse(new TextDecoder().decode(reply.data)) as {
          readonly num_ack_pending?: number
          readonly num_pending?: number
        }
        return (info.num_ack_pending ?? 0) + (info.num_pending ?? 0)
      }
      const acked = Date.now() + 10_000
      while ((await pending()) > 0 && Date.now() < acked)
        await new Promise((r) => setTimeout(r, 50))
      expect(await pending()).toBe(0)
      expect(end?.record.case).toBe("end")
      if (end?.record.case !== "end") return
      expect(end.record.value.infraFailed).toBe(false)
      expect([end.record.value.testsPassed, end.record.value.testsTotal]).toEqual([1, 2])
      // The sandbox is served on its own subjects; the client destroys what the sampler left.
      await noNewViolations()
    }, 90_000)

    it("buffer, learner, sampler: trajectories to batches, weights and checkpoints back", async () => {
      const initial = TinyMoe.create({ config: TINY, seed: 4 })
      start("buffer", runBuffer({ subjects, jobId: trainJob }))
      const seen: bigint[] = []
      const follower = {
        version: 0n,
        setWeights: (_m: TinyMoe, v: bigint) => {
          follower.version = v
          seen.push(v)
        },
      }
      // A sampler streams episodes and follows the job's weights (subscription, KV, objects).
      const following = await Effect.runPromise(Scope.make())
      await run(
        "sampler",
        Effect.gen(function* () {
          const bus = yield* Bus
          yield* ensureSamplerStreams(bus, subjects)
          yield* publishEpisodes(bus, trainJob, initial, 8)
          yield* Scope.provide(following)(followWeights(bus, subjects, trainJob, follower))
        }),
      )
      // The learner's own steps around an update (runLearner's loop without the training).
      const learner = busOf("learner")
      const config = { ...DEFAULT_LEARNER_CONFIG, lr: 1e-2, criticWarmupSteps: 1 }
      const { batch, restored, again } = await run(
        "learner",
        Effect.gen(function* () {
          // As runLearner does: the buffer may not serve its subject yet.
          const batch = yield* takeBatch(learner, subjects, {
            jobId: trainJob,
            maxTrajectories: 4,
            maxStaleness: 4,
            waitMs: 5_000,
          }).pipe(
            Effect.retry({
              while: (e) => e._tag === "NoResponders",
              schedule: Schedule.spaced("50 millis"),
              times: 200,
            }),
          )
          yield* publishWeights(learner, subjects, trainJob, initial, 1n, 1n)
          const trainer = new Trainer(initial, config)
          // Twice: the second save replaces (purges) the first one's objects.
          yield* saveCheckpoint(learner, CHECKPOINTS, trainJob, trainer, 1n, "")
          yield* saveCheckpoint(learner, CHECKPOINTS, trainJob, trainer, 1n, batch.batchId)
          const restored = yield* loadCheckpoint(learner, CHECKPOINTS, trainJob, config)
          const again = yield* takeBatch(learner, subjects, {
            jobId: trainJob,
            maxTrajectories: 4,
            maxStaleness: 4,
            waitMs: 100,
            ackBatchId: batch.batchId,
          })
          return { batch, restored, again }
        }),
      )
      // Trajectories too large for a message: the buffer stores them, the learner reads them.
      const big = randomBytes(300 * 1024)
      await run(
        "buffer",
        Effect.gen(function* () {
          const store = yield* (yield* Bus).objectStore("t1-trajectories")
          yield* store.put(`${trainJob}/big`, big)
          yield* store.put(`${trainJob}/big`, big)
          yield* store.put(`${trainJob}/gone`, big)
          yield* store.delete(`${trainJob}/gone`)
        }),
      )
      const fetched = await run(
        "learner",
        Effect.flatMap(busOf("learner").objectStore("t1-trajectories"), (store) =>
          store.get(`${trainJob}/big`),
        ),
      )
      expect(Option.map(fetched, (b) => Buffer.from(b).equals(big))).toEqual(Option.some(true))
      expect(batch.trajectories.length).toBe(4)
      expect(restored?.lastBatchId).toBe(batch.batchId)
      expect(again.jobId).toBe(trainJob)
      const until = Date.now() + 10_000
      while (follower.version < 1n && Date.now() < until)
        await new Promise((r) => setTimeout(r, 50))
      expect(seen).toEqual([1n])
      await Effect.runPromise(Scope.close(following, Exit.void))
      // The coordinator reads the latest announcement (KV, read only).
      const latest = await run(
        "coordinator",
        Effect.gen(function* () {
          const kv = yield* (yield* Bus).kv(subjects.weightsBucket)
          return yield* kv.get(`${trainJob}.latest`)
        }),
      )
      expect(Option.isSome(latest)).toBe(true)
      // The gateway serves FetchJobWeights: the announcement and bytes of any version (read only).
      const served = await run("gateway", readVersion(busOf("gateway"), subjects, trainJob, 1n))
      expect(served?.announcement.policyVersion).toBe(1n)
      expect(served?.bytes.length).toBeGreaterThan(0)
      await noNewViolations()
    }, 60_000)
  })

  describe("each role is refused what it has no business doing", () => {
    const payload = new Uint8Array([1])
    interface Refusal {
      readonly role: Role
      readonly what: string
      /** The subject the server's log names. */
      readonly subject: string
      readonly attempt: (bus: BusShape) => Effect.Effect<unknown, unknown>
    }
    /** A publish a role may not make: answered at once with the server's permissions error. */
    const publishes = (role: Role, subject: string): Refusal => ({
      role,
      what: `publish ${subject}`,
      subject,
      attempt: (bus: BusShape) => bus.request(subject, payload, { timeoutMs: 2000 }),
    })
    const jsPublishes = (role: Role, subject: string): Refusal => ({
      role,
      what: `store in JetStream on ${subject}`,
      subject,
      attempt: (bus: BusShape) => bus.jsPublish(subject, payload),
    })
    const subscribes = (role: Role, subject: string): Refusal => ({
      role,
      what: `subscribe to ${subject}`,
      subject,
      attempt: (bus: BusShape) =>
        Effect.scoped(
          Effect.flatMap(bus.subscribe(subject), (s) => Stream.runHead(s)).pipe(
            Effect.timeout("3 seconds"),
          ),
        ),
    })
    const opensBucket = (role: Role, bucket: string, stream: string): Refusal => ({
      role,
      what: `open the KV bucket ${bucket}`,
      subject: stream,
      attempt: (bus: BusShape) => bus.kv(bucket),
    })
    const cases = [
      // sampler: no job events, weights, work items or job records; no impersonating services
      jsPublishes("sampler", subjects.jobEvents("job-x")),
      publishes("sampler", subjects.weights("job-x")),
      jsPublishes("sampler", subjects.episodes),
      publishes("sampler", "$KV.t1-jobs.job-x"),
      subscribes("sampler", subjects.verify),
      subscribes("sampler", subjects.sandboxCreate),
      // verifier: no job records, no creating or destroying sandboxes, no trajectories
      opensBucket("verifier", subjects.jobsBucket, "$JS.API.STREAM.INFO.KV_t1-jobs"),
      publishes("verifier", subjects.sandboxCreate),
      publishes("verifier", subjects.sandbox("abc", "destroy")),
      jsPublishes("verifier", subjects.trajectories("job-x")),
      subscribes("verifier", "t1.sandbox.abc.exec"),
      // gateway: no work items, no sandboxes, no weights
      jsPublishes("gateway", subjects.episodes),
      publishes("gateway", subjects.sandboxCreate),
      publishes("gateway", subjects.weights("job-x")),
      subscribes("gateway", subjects.allTrajectories),
      // sandbox host: no JetStream at all, no verifier, no trajectories
      opensBucket("sandbox", subjects.jobsBucket, "$JS.API.INFO"),
      publishes("sandbox", subjects.verify),
      jsPublishes("sandbox", subjects.trajectories("job-x")),
      subscribes("sandbox", subjects.verify),
      // buffer: no weights, no work items, no job records
      publishes("buffer", subjects.weights("job-x")),
      jsPublishes("buffer", subjects.episodes),
      opensBucket("buffer", subjects.jobsBucket, "$JS.API.STREAM.INFO.KV_t1-jobs"),
      // learner: no work items, job events, sandboxes or trajectories
      jsPublishes("learner", subjects.episodes),
      jsPublishes("learner", subjects.jobEvents("job-x")),
      publishes("learner", subjects.sandbox("abc", "exec")),
      jsPublishes("learner", subjects.trajectories("job-x")),
      // coordinator: no weights announcements, no sandboxes, no trajectories of its own
      publishes("coordinator", subjects.weights("job-x")),
      publishes("coordinator", "$KV.t1-weights.job-x.latest"),
      publishes("coordinator", subjects.sandboxCreate),
      jsPublishes("coordinator", subjects.trajectories("job-x")),
      // replies: each role reads only its own inbox (_INBOX_<role>), not another's or NATS's default
      subscribes("sampler", "_INBOX_verifier.>"),
      subscribes("sampler", "_INBOX_sandbox.>"),
      subscribes("verifier", "_INBOX_sampler.>"),
      subscribes("gateway", "_INBOX_coordinator.>"),
      subscribes("learner", "_INBOX.>"),
      subscribes("sandbox", ">"),
      // nobody but the admin deletes streams or purges the work queue
      publishes("coordinator", `$JS.API.STREAM.DELETE.${subjects.episodesStream}`),
      publishes("sampler", `$JS.API.STREAM.PURGE.${subjects.episodesStream}`),
      publishes("buffer", `$JS.API.STREAM.DELETE.${subjects.trajectoriesStream}`),
    ]

    it.each(cases.map((c) => [c.role, c.what, c] as const))("%s may not %s", async (role, _, c) => {
      const error = await Effect.runPromise(Effect.flip(c.attempt(busOf(role))))
      expect(String((error as { reason?: string }).reason ?? error)).toMatch(
        /Permissions Violation/,
      )
      const user = `User "${role}"`
      // The server writes its log on its own schedule: the refusal may reach us first.
      // A role without JetStream is refused at whichever JetStream API call its client makes
      // first ($JS.API.INFO, or the stream's INFO when the client skipped that check).
      const subject = c.subject === "$JS.API.INFO" ? '"$JS.API.' : `"${c.subject}"`
      const logged = () => violations().some((l) => l.includes(user) && l.includes(subject))
      for (let i = 0; i < 50 && !logged(); i++) await new Promise((r) => setTimeout(r, 100))
      expect(logged()).toBe(true)
    })

    it("a sampler cannot announce weights with the learner's code", async () => {
      const error = await Effect.runPromise(
        Effect.flip(
          publishWeights(
            busOf("sampler"),
            subjects,
            "job-x",
            TinyMoe.create({ config: TINY, seed: 1 }),
            99n,
            0n,
          ),
        ),
      )
      expect(String(error)).toMatch(
        /Permissions Violation for Publish to "(\$O\.t1-weights\.|\$JS\.API\.STREAM\.PURGE\.OBJ_t1-weights")/,
      )
    })

    it("a verifier cannot create a sandbox with the sampler's client", async () => {
      const error = await Effect.runPromise(
        Effect.flip(sandboxClient(busOf("verifier"), subjects).create({ workdir: "/app" })),
      )
      expect(String(error)).toMatch(/Permissions Violation for Publish to "t1\.sandbox\.create"/)
    })
  })
})
