import * as grpc from "@grpc/grpc-js"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { JobKind, JobState } from "../../proto/index.ts"
import { useNatsServer } from "../../test/support/nats-url.ts"
import { Bus, NatsBusLive } from "../bus/index.ts"
import { appendJobEvent, jobEventsStream } from "../jobs/index.ts"
import { type GatewayHarness, gatewayHarness, rawClient } from "./gateway.fixture.ts"
import {
  HealthCheckRequestSchema,
  HealthCheckResponse_ServingStatus,
  HealthCheckResponseSchema,
} from "./gen/grpc/health/v1/health_pb.ts"

const nats = useNatsServer()

const spec = { name: "shared", kind: JobKind.ROLLOUT, taskSet: "bundled-train" }

/** Consumers the job event stream has now (watch readers must not be left behind). */
const consumerCount = (h: GatewayHarness) =>
  h.run(
    Effect.gen(function* () {
      const bus = yield* Bus
      const reply = yield* bus.request(
        `$JS.API.STREAM.INFO.${jobEventsStream(h.subjects)}`,
        new Uint8Array(0),
        { timeoutMs: 5_000 },
      )
      const info: { state?: { consumer_count?: number } } = JSON.parse(
        new TextDecoder().decode(reply.data),
      )
      return info.state?.consumer_count ?? -1
    }),
  )

describe("gateway (NATS)", () => {
  let h: GatewayHarness
  beforeAll(async () => {
    h = await gatewayHarness(NatsBusLive({ servers: nats.url, name: "t1-gateway-test" }))
  })
  afterAll(() => h.close())

  it("two gateways on one NATS serve the same jobs and events", async () => {
    const [a, b] = await Promise.all([h.start(), h.start()])
    if (a === undefined || b === undefined) throw new Error("no gateways")
    const onA = a.client()
    const onB = b.client()
    const { jobId } = await onA.submitJob({ spec })
    expect((await onB.getJob({ jobId })).status?.spec?.name).toBe("shared")
    expect((await onB.listJobs({})).jobs.map((j) => j.jobId)).toContain(jobId)

    const store = await h.store()
    await h.run(store.transition(jobId, JobState.RUNNING))
    const seen: bigint[] = []
    for await (const event of onB.watchJob({ jobId, fromSeq: 2n })) {
      seen.push(event.seq)
      if (event.seq === 2n) {
        await h.run(
          Bus.use((bus) =>
            appendJobEvent(bus, h.subjects, jobId, {
              event: { case: "episodeFinished", value: { episodeId: "e1", reward: 1 } },
            }),
          ),
        )
      }
      if (event.seq === 3n) await onA.cancelJob({ jobId, reason: "done" })
      if (event.seq === 3n) await h.run(store.transition(jobId, JobState.CANCELLED))
    }
    expect(seen).toEqual([2n, 3n, 4n])
    const final = await onA.getJob({ jobId })
    expect(final.status?.state).toBe(JobState.CANCELLED)
    expect(final.status?.lastEventSeq).toBe(4n)
    const cancelAgain = await onB.cancelJob({ jobId }).catch((e: { code: number }) => e)
    expect(cancelAgain).toMatchObject({ code: grpc.status.FAILED_PRECONDITION })
    // The watch's consumer was removed with it.
    expect(await consumerCount(h)).toBe(0)
  })

  it("health answers SERVING while NATS answers", async () => {
    const gw = await h.start()
    const raw = rawClient(gw.endpoint.address)
    const answer = await raw.unary(
      "/grpc.health.v1.Health/Check",
      HealthCheckRequestSchema,
      HealthCheckResponseSchema,
      { service: "t1.v1.JobService" },
    )
    raw.close()
    expect(answer.status).toBe(HealthCheckResponse_ServingStatus.SERVING)
  })

  it("shutdown ends a watch on NATS and leaves no consumer behind", async () => {
    const gw = await h.start()
    const client = gw.client()
    const { jobId } = await client.submitJob({ spec })
    const watching = (async () => {
      const seqs: bigint[] = []
      for await (const event of client.watchJob({ jobId })) seqs.push(event.seq)
      return seqs
    })().catch((e: { code: number }) => e)
    await new Promise((r) => setTimeout(r, 300))
    expect(await consumerCount(h)).toBe(1)
    await gw.stop()
    expect(await watching).toMatchObject({ code: grpc.status.UNAVAILABLE })
    expect(await consumerCount(h)).toBe(0)
  })

  it("1000 concurrent watches, half dropped by their clients mid-stream: the rest see every event, nothing is left behind", async () => {
    const gw = await h.start()
    const clients = Array.from({ length: 4 }, () => gw.client())
    const first = clients[0]
    if (first === undefined) throw new Error("no client")
    const { jobId } = await first.submitJob({ spec })
    const store = await h.store()
    const n = 1000
    let started = 0
    let dropped = 0
    const watchers = Array.from({ length: n }, (_, i) =>
      (async () => {
        const seqs: bigint[] = []
        const client = clients[i % clients.length] ?? first
        for await (const event of client.watchJob({ jobId })) {
          seqs.push(event.seq)
          if (seqs.length === 1) started++
          // Every other client walks away after the second event.
          if (i % 2 === 1 && event.seq >= 2n) {
            dropped++
            break
          }
        }
        return seqs
      })(),
    )
    const until = async (cond: () => boolean | Promise<boolean>, what: string) => {
      const end = Date.now() + 90_000
      while (!(await cond())) {
        if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
        await new Promise((r) => setTimeout(r, 100))
      }
    }
    const gauge = async () => {
      const text = await h.metrics.registry.metrics()
      return Number(/^t1_gateway_watch_streams (\d+)/m.exec(text)?.[1] ?? Number.NaN)
    }
    await until(() => started === n, "every watch to get its first event")
    expect(await gauge()).toBe(n)
    await h.run(store.transition(jobId, JobState.RUNNING))
    await until(() => dropped === n / 2, "half the clients to leave")
    await h.run(
      Bus.use((bus) =>
        appendJobEvent(bus, h.subjects, jobId, {
          event: { case: "episodeFinished", value: { episodeId: "e1", reward: 1 } },
        }),
      ),
    )
    await first.cancelJob({ jobId, reason: "load test" })
    await h.run(store.transition(jobId, JobState.CANCELLED))
    const results = await Promise.all(watchers)
    const last = (await first.getJob({ jobId })).status?.lastEventSeq ?? 0n
    const everything = Array.from({ length: Number(last) }, (_, i) => BigInt(i + 1))
    results.forEach((seqs, i) => {
      expect(seqs).toEqual(i % 2 === 1 ? [1n, 2n] : everything)
    })
    await until(async () => (await gauge()) === 0, "the watch gauge to return to 0")
    await until(async () => (await consumerCount(h)) === 0, "every watch consumer to be removed")
    for (const c of clients) c.close()
  }, 180_000)

  it("a cancelled job resubmitted: the same request id returns it as it is, a new one starts a new job", async () => {
    const gw = await h.start()
    const client = gw.client()
    const first = await client.submitJob({ spec, requestId: "resubmit-1" })
    await client.cancelJob({ jobId: first.jobId, reason: "changed my mind" })
    const again = await client.submitJob({ spec, requestId: "resubmit-1" })
    expect(again.jobId).toBe(first.jobId)
    expect(again.status?.state).toBe(JobState.CANCELLED)
    const fresh = await client.submitJob({ spec, requestId: "resubmit-2" })
    expect(fresh.jobId).not.toBe(first.jobId)
    expect(fresh.status?.state).toBe(JobState.PENDING)
  })
})
