import { describe, expect, it } from "vitest"
import { JobKind } from "../../proto/index.ts"
import { grownBy, heapCounts } from "../../test/support/heap.ts"
import { useNatsServer } from "../../test/support/nats-url.ts"
import { NatsBusLive } from "../bus/index.ts"
import type { JobServiceClient } from "./client.ts"
import { gatewayHarness } from "./gateway.fixture.ts"

const nats = useNatsServer()
const WATCHES = 1000

/**
 * The gateway's memory after watch streams close, found with heap snapshots rather than RSS:
 * a round of WATCHES concurrent WatchJob streams on one job (each reads its first event and
 * closes, as a client that stops watching does), then a full collection and a snapshot counted
 * by constructor and closure name. Anything a watch leaves behind shows up as a name that grew
 * by about one per watch; and a further round must not grow the heap.
 */
describe("gateway memory after WatchJob streams close (NATS)", () => {
  it("1000 closed watches leave nothing per watch on the heap, and another 1000 do not grow it", async () => {
    const h = await gatewayHarness(NatsBusLive({ servers: nats.url, name: "t1-gateway-memory" }))
    try {
      const g = await h.start()
      const clients: JobServiceClient[] = Array.from({ length: 4 }, () => g.client())
      const first = clients[0] as JobServiceClient
      const { jobId } = await first.submitJob({
        spec: { name: "memory", kind: JobKind.ROLLOUT, taskSet: "bundled-train" },
      })
      const openStreams = async () => {
        const text = await h.metrics.registry.metrics()
        return Number(/^t1_gateway_watch_streams (\d+)/m.exec(text)?.[1] ?? Number.NaN)
      }
      const round = async () => {
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
        expect(firstEvents).toBe(WATCHES)
        const until = Date.now() + 30_000
        while ((await openStreams()) !== 0 && Date.now() < until)
          await new Promise((r) => setTimeout(r, 50))
        expect(await openStreams()).toBe(0)
      }
      // The first round pays for what is made once (code, caches, connection buffers).
      await round()
      const before = await heapCounts()
      const heapBefore = process.memoryUsage().heapUsed
      await round()
      const after = await heapCounts()
      const heapAfter = process.memoryUsage().heapUsed
      // Nothing kept per watch: no constructor or closure grew by half a watch's worth.
      expect(grownBy(before, after, WATCHES / 2)).toEqual([])
      await round()
      await heapCounts()
      const heapThird = process.memoryUsage().heapUsed
      console.log(
        `heap used after rounds 2 and 3 of ${WATCHES} watches: ${(heapAfter / 2 ** 20).toFixed(1)} and ${(heapThird / 2 ** 20).toFixed(1)} MiB (after round 1: ${(heapBefore / 2 ** 20).toFixed(1)} MiB)`,
      )
      // Another round reuses what the last one freed: the heap does not grow by a watch's worth.
      expect(heapThird - heapBefore).toBeLessThan(WATCHES * 1024)
    } finally {
      await h.close()
    }
  }, 180_000)
})
