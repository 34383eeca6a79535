import { describe, expect, it } from "vitest"
import { JobKind } from "../../proto/index.ts"
import { grownBy, heapCensus, heapCounts } from "../../test/support/heap.ts"
import { useNatsServer } from "../../test/support/nats-url.ts"
import { NatsBusLive } from "../bus/index.ts"
import { type JobServiceClient, jobServiceClient } from "./client.ts"
import { gatewayHarness } from "./gateway.fixture.ts"

const nats = useNatsServer()
const WATCHES = 1000

/**
 * The gateway's memory after watch streams close, found with heap snapshots rather than RSS:
 * a round of WATCHES concurrent WatchJob streams on one job (each reads its first event and
 * closes, as a client that stops watching does), then a full collection and a snapshot counted
 * by constructor and closure name. Anything a watch leaves behind shows up as a name that grew
 * by about one per watch; and further rounds must not grow the heap round after round.
 */
describe("gateway memory after WatchJob streams close (NATS)", () => {
  it("1000 closed watches leave nothing per watch on the heap, and further rounds of 1000 do not grow it", async () => {
    const h = await gatewayHarness(NatsBusLive({ servers: nats.url, name: "t1-gateway-memory" }))
    try {
      const g = await h.start()
      const { jobId } = await g.client().submitJob({
        spec: { name: "memory", kind: JobKind.ROLLOUT, taskSet: "bundled-train" },
      })
      const openStreams = async () => {
        const text = await h.metrics.registry.metrics()
        return Number(/^t1_gateway_watch_streams (\d+)/m.exec(text)?.[1] ?? Number.NaN)
      }
      // Each round on fresh connections, closed after it, as CLI users come and go (a heap
      // snapshot stalls this process for seconds, which can cost an idle connection its life).
      const round = async () => {
        const clients = Array.from({ length: 4 }, () => jobServiceClient(g.endpoint.address))
        let firstEvents = 0
        await Promise.all(
          Array.from({ length: WATCHES }, async (_, i) => {
            const client = clients[i % clients.length] as JobServiceClient
            for await (const event of client.watchJob({ jobId, fromSeq: 1n })) {
              if (event.seq === 1n) firstEvents++
              break
            }
          }),
        )
        for (const c of clients) c.close()
        expect(firstEvents).toBe(WATCHES)
        const until = Date.now() + 30_000
        while ((await openStreams()) !== 0 && Date.now() < until)
          await new Promise((r) => setTimeout(r, 50))
        expect(await openStreams()).toBe(0)
      }
      // The live data on the heap after a full collection, without compiled code: the JIT keeps
      // optimising the same functions for a while (a few hundred KB a round here), which is
      // bounded by the program, not by how many watches came and went.
      const liveData = async () => {
        let bytes = 0
        for (const [name, c] of await heapCensus()) if (name !== "code") bytes += c.bytes
        return bytes
      }
      // The first round pays for what is made once (code, caches, connection buffers); later
      // rounds must reuse what the one before freed. A leak grows every round by the same
      // amount, while what V8 keeps back (a page after a collection, feedback) grows one round
      // and not the next: so the growth that counts is the smaller of two round-to-round ones.
      const rounds: number[] = []
      const rss: number[] = []
      for (let i = 0; i < 4; i++) {
        await round()
        rounds.push(await liveData())
        rss.push(process.memoryUsage().rss)
      }
      const mib = (n: number) => `${(n / 2 ** 20).toFixed(2)} MiB`
      console.log(
        `after rounds 1-4 of ${WATCHES} watches: live heap data ${rounds.map(mib).join(", ")}; RSS ${rss.map(mib).join(", ")}`,
      )
      const steadyGrowth = (xs: ReadonlyArray<number>) => {
        const [, second = 0, third = 0, fourth = 0] = xs
        return Math.min(third - second, fourth - third)
      }
      expect(steadyGrowth(rounds)).toBeLessThan(WATCHES * 512)
      // The process's memory (what RSS counts) is reused too, not grown a round at a time.
      expect(steadyGrowth(rss)).toBeLessThan(WATCHES * 4096)
      // And nothing is kept per watch: counted by constructor and closure over one more round,
      // no name grows by half a watch's worth.
      const before = await heapCounts()
      await round()
      const after = await heapCounts()
      const grown = grownBy(before, after, WATCHES / 2)
      expect(grown).toEqual([])
    } finally {
      await h.close()
    }
  }, 180_000)
})
