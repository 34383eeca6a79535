import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { dockerEngineAvailable } from "../../actors/sandbox/docker/index.ts"
import { useNatsServer } from "../support/nats-url.ts"
import { runLoad } from "./load.ts"

const docker = await Effect.runPromise(dockerEngineAvailable())
const nats = useNatsServer()

describe.skipIf(!docker)(
  "load (small): episodes through one sandbox host, watches on one gateway",
  () => {
    it("8 scripted episodes all end COMPLETED, 100 watches see every event, and nothing leaks", async () => {
      const { figures, problems } = await runLoad({
        episodes: 8,
        watches: 100,
        turns: 3,
        events: 5,
        natsUrl: nats.url,
      })
      expect(problems).toEqual([])
      expect(figures).toMatchObject({
        episodes_ended: 8,
        episodes_failed: 0,
        turns: 8 * 4,
        watch_streams: 100,
        leaks: { containers: 0, consumers: 0, watch_streams: 0, sandboxes: 0, handles_delta: 0 },
      })
      expect(figures.turn_exec_p99_ms).toBeGreaterThan(0)
      expect(figures.watch_fanout_p99_ms).toBeGreaterThan(0)
    }, 150_000)

    it("the same on the bwrap driver (--driver bwrap): its sandboxes are not containers, and none is left", async () => {
      const { figures, problems } = await runLoad({
        driver: "bwrap",
        episodes: 8,
        watches: 10,
        turns: 3,
        events: 2,
        natsUrl: nats.url,
      })
      expect(problems).toEqual([])
      expect(figures).toMatchObject({
        episodes_ended: 8,
        episodes_failed: 0,
        turns: 8 * 4,
        leaks: { containers: 0, consumers: 0, watch_streams: 0, sandboxes: 0, handles_delta: 0 },
      })
      expect(figures.episodes_per_s).toBeGreaterThan(0)
    }, 150_000)
  },
)
