import { readFileSync } from "node:fs"
import { jetstreamManager } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import { Effect, Logger, Option, type Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  type BusError,
  type BusShape,
  makeNatsBus,
  type ReplicasExceedCluster,
  subjectsFor,
} from "../../services/bus/index.ts"
import { ensureSamplerStreams } from "../../services/episodes/index.ts"
import { makeJobStore } from "../../services/jobs/index.ts"
import { startTestNatsCluster, type TestNatsCluster } from "../support/nats-cluster.ts"
import { type NatsServerProcess, startNatsServer } from "../support/nats-server.ts"

/**
 * t1 on a three-node JetStream cluster (real nats-server processes on loopback): the replica
 * setting reaches every stream, KV bucket and object store, is checked against the cluster, raises
 * what an earlier R1 start left behind, and a client given every node's URL keeps working while
 * the node it is connected to dies.
 */

let cluster: TestNatsCluster
let single: NatsServerProcess

beforeAll(async () => {
  cluster = await startTestNatsCluster()
  single = await startNatsServer()
}, 60_000)

afterAll(async () => {
  await cluster?.close()
  await single?.stop()
})

const bytes = (s: string) => new TextEncoder().encode(s)

/** The server leading the JetStream meta group, from a node's monitoring port (/jsz). */
const metaLeader = async (c: TestNatsCluster): Promise<string> => {
  for (let i = 0; i < 100; i++) {
    for (const n of c.nodes) {
      const port = [
        ...readFileSync(n.logFile, "utf8").matchAll(/Starting http monitor on [\d.]+:(\d+)/g),
      ].at(-1)?.[1]
      if (port === undefined) continue
      const jsz = (await fetch(`http://127.0.0.1:${port}/jsz`)
        .then((r) => r.json())
        .catch(() => undefined)) as { meta_cluster?: { leader?: string } } | undefined
      const leader = jsz?.meta_cluster?.leader
      if (leader !== undefined && leader !== "") return leader
    }
    await new Promise((r) => setTimeout(r, 200))
  }
  throw new Error("no meta leader")
}

/** Runs `f` over a bus on `servers` with `replicas`; returns its result and the lines logged. */
const withBus = async <A, E>(
  servers: string,
  replicas: number,
  f: (bus: BusShape) => Effect.Effect<A, E | BusError, Scope.Scope>,
): Promise<{ result: A; logs: string[] }> => {
  const logs: string[] = []
  const capture = Logger.make<unknown, void>(({ message }) => {
    logs.push((Array.isArray(message) ? message : [message]).map(String).join(" "))
  })
  const result = await Effect.runPromise(
    Effect.scoped(
      Effect.flatMap(makeNatsBus({ servers, name: "t1-cluster-test", replicas }), f),
    ).pipe(Effect.provide(Logger.layer([capture]))),
  )
  return { result, logs }
}

/**
 * The replica count of each named stream, or of every stream of the account, read with a
 * connection of the test's. The account's listing leaves out streams whose peers are changing,
 * so named streams are asked one by one.
 */
const replicasByStream = async (
  servers: string,
  names?: ReadonlyArray<string>,
): Promise<Map<string, number>> => {
  const nc = await connect({ servers: servers.split(",") })
  try {
    const jsm = await jetstreamManager(nc)
    const out = new Map<string, number>()
    if (names === undefined) {
      for await (const si of jsm.streams.list()) out.set(si.config.name, si.config.num_replicas)
    } else {
      for (const name of names) out.set(name, (await jsm.streams.info(name)).config.num_replicas)
    }
    return out
  } finally {
    await nc.close()
  }
}

describe("--nats-replicas on a three-node cluster", () => {
  it("creates every stream, KV bucket and object store t1 uses with three copies", async () => {
    const subjects = subjectsFor("r3")
    await withBus(cluster.urls, 3, (bus) =>
      Effect.gen(function* () {
        // The real creators: the samplers' streams, the job store (KV and events), then the
        // buckets and object stores the other actors open through the same two bus calls.
        yield* ensureSamplerStreams(bus, subjects)
        yield* makeJobStore(bus, subjects)
        for (const bucket of [subjects.weightsBucket, "r3-coordinator", "r3-buffer"])
          yield* bus.kv(bucket)
        for (const store of [subjects.weightsBucket, "r3-trajectories", "r3-checkpoints"])
          yield* bus.objectStore(store)
      }),
    )
    const streams = await replicasByStream(cluster.urls)
    const ours = [...streams].filter(([name]) => /^(R3_|KV_r3-|OBJ_r3-)/.test(name))
    expect(ours.map(([name]) => name).sort()).toEqual([
      "KV_r3-buffer",
      "KV_r3-coordinator",
      "KV_r3-jobs",
      "KV_r3-weights",
      "OBJ_r3-checkpoints",
      "OBJ_r3-trajectories",
      "OBJ_r3-weights",
      "R3_EPISODES",
      "R3_JOB_EVENTS",
      "R3_TRAJ",
    ])
    for (const [name, replicas] of ours) expect({ name, replicas }).toEqual({ name, replicas: 3 })
  }, 60_000)

  it("raises an existing R1 stream, KV bucket and object store to R3 and logs each", async () => {
    const subjects = subjectsFor("up")
    const open = (bus: BusShape) =>
      Effect.gen(function* () {
        yield* ensureSamplerStreams(bus, subjects)
        yield* bus.kv("up-claims")
        yield* bus.objectStore("up-objects")
      })
    const names = ["UP_EPISODES", "UP_TRAJ", "KV_up-claims", "OBJ_up-objects"]
    await withBus(cluster.urls, 1, open)
    const before = await replicasByStream(cluster.urls, names)
    expect([...before.values()]).toEqual([1, 1, 1, 1])

    const { logs } = await withBus(cluster.urls, 3, open)
    const after = await replicasByStream(cluster.urls, names)
    for (const name of names) {
      expect({ name, replicas: after.get(name) }).toEqual({ name, replicas: 3 })
      expect(logs).toContainEqual(
        `nats: stream ${name} held 1 replica(s); updated to 3 (--nats-replicas)`,
      )
    }

    // A later process started without the setting leaves the three copies alone.
    const again = await withBus(cluster.urls, 1, open)
    expect([...(await replicasByStream(cluster.urls, names)).values()]).toEqual([3, 3, 3, 3])
    expect(again.logs.filter((l) => l.includes("replica"))).toEqual([])
  }, 60_000)

  it("reads replicated KV buckets through the stream leader, not a follower's direct get", async () => {
    // A direct get is answered by the replica nearest the reader, which may not have applied the
    // latest write yet: the e2e test's GetJob right after SubmitJob answered NOT_FOUND so.
    const { result } = await withBus(cluster.urls, 3, (bus) =>
      Effect.gen(function* () {
        const kv = yield* bus.kv("leader-read")
        const rev = yield* kv.put("k", bytes("v1"))
        yield* kv.update("k", bytes("v2"), rev)
        return yield* kv.get("k")
      }),
    )
    expect(Option.map(result, (e) => new TextDecoder().decode(e.value))).toEqual(Option.some("v2"))
    const nc = await connect({ servers: cluster.urls.split(",") })
    try {
      const si = await (await jetstreamManager(nc)).streams.info("KV_leader-read")
      expect(si.config.allow_direct).toBe(false)
    } finally {
      await nc.close()
    }
    // One copy has no follower to be behind: R1 buckets keep direct gets.
    await withBus(single.url, 1, (bus) => bus.kv("direct-r1"))
    const nc1 = await connect({ servers: single.url })
    try {
      const si = await (await jetstreamManager(nc1)).streams.info("KV_direct-r1")
      expect(si.config.allow_direct).toBe(true)
    } finally {
      await nc1.close()
    }
  }, 60_000)

  it("refuses more replicas than the cluster's servers at connect, naming what it saw", async () => {
    const exit = await Effect.runPromise(
      Effect.scoped(makeNatsBus({ servers: cluster.urls, name: "t1-r5", replicas: 5 })).pipe(
        Effect.flip,
      ),
    )
    expect(exit._tag).toBe("ReplicasExceedCluster")
    const e = exit as ReplicasExceedCluster
    expect(e.clusterSize).toBe(3)
    expect(e.message).toMatch(/--nats-replicas 5 exceeds the cluster: .* shows 3 server\(s\)/)
    expect(e.message).toContain("pass --nats-replicas 3 or fewer")
  }, 30_000)

  it("waits for a node that comes back while the bus connects, instead of refusing at once", async () => {
    const node = cluster.nodes[1]
    if (node === undefined) throw new Error("no second node")
    await node.stop()
    const back = new Promise((r) => setTimeout(r, 1_000)).then(() => node.start())
    // Only the stopped node's peers are given, so the client cannot land on the node itself.
    const others = cluster.nodes
      .filter((n) => n !== node)
      .map((n) => n.url)
      .join(",")
    const { logs } = await withBus(others, 3, (bus) => bus.kv("wait-bucket"))
    await back
    expect(logs.join("\n")).toMatch(
      /the cluster shows 2 server\(s\), --nats-replicas 3 asked; waiting up to 10 s/,
    )
    expect((await replicasByStream(cluster.urls, ["KV_wait-bucket"])).get("KV_wait-bucket")).toBe(3)
  }, 90_000)

  it("opens existing streams and buckets while the meta leader's node is killed and replaced", async () => {
    const spec = { name: "ELECT_X", subjects: ["elect.x"], retention: "limits" } as const
    await withBus(cluster.urls, 3, (bus) =>
      Effect.andThen(bus.ensureStream(spec), bus.kv("elect-kv")),
    )
    // The meta leader answers JetStream's API for the account: with it gone, requests go
    // unanswered (time out) until the other two have elected one.
    const leader = await metaLeader(cluster)
    const node = cluster.nodes.find((n) => n.name === leader)
    if (node === undefined) throw new Error(`no node named ${leader}`)
    const t0 = Date.now()
    const { result } = await withBus(cluster.urls, 3, (bus) =>
      Effect.gen(function* () {
        yield* Effect.promise(() => node.kill())
        yield* bus.ensureStream(spec)
        const kv = yield* bus.kv("elect-kv")
        yield* kv.put("k", bytes("v"))
        return Date.now() - t0
      }),
    ).finally(() => node.start())
    expect(result).toBeLessThan(30_000)
  }, 90_000)

  it("a stream the cluster cannot place while a node is down is refused, naming the stream", async () => {
    const node = cluster.nodes[2]
    if (node === undefined) throw new Error("no third node")
    const e = await withBus(cluster.urls, 3, (bus) =>
      Effect.gen(function* () {
        yield* Effect.promise(() => node.stop())
        return yield* bus
          .ensureStream({ name: "PLACE_X", subjects: ["place.x"], retention: "limits" })
          .pipe(Effect.flip)
      }),
    ).finally(() => node.start())
    expect(e.result._tag).toBe("ReplicasExceedCluster")
    expect(e.result.message).toMatch(/--nats-replicas 3 for stream PLACE_X exceeds the cluster/)
  }, 90_000)

  it("refuses more than one replica on a server without a cluster block", async () => {
    const e = await Effect.runPromise(
      Effect.scoped(makeNatsBus({ servers: single.url, name: "t1-r3", replicas: 3 })).pipe(
        Effect.flip,
      ),
    )
    expect(e._tag).toBe("ReplicasExceedCluster")
    expect(e.message).toMatch(/is not clustered/)
  }, 30_000)
})

describe("a client given every node's URL", () => {
  it("keeps publishing, reading and writing while each node in turn is killed and restarted", async () => {
    const subjects = subjectsFor("fo")
    let published = 0
    await withBus(cluster.urls, 3, (bus) =>
      Effect.gen(function* () {
        yield* ensureSamplerStreams(bus, subjects)
        const kv = yield* bus.kv("fo-state")
        const step = (label: string) =>
          Effect.gen(function* () {
            for (let i = 0; i < 5; i++) {
              yield* bus.jsPublish(subjects.episodes, bytes(`${label}-${i}`), {
                msgId: `${label}-${i}`,
              })
              published++
            }
            yield* kv.put("last", bytes(label))
            const read = yield* kv.get("last")
            expect(Option.map(read, (e) => new TextDecoder().decode(e.value))).toEqual(
              Option.some(label),
            )
          })
        yield* step("before")
        // The client is connected to one of the three: killing each in turn kills that one once.
        for (let n = 0; n < cluster.nodes.length; n++) {
          const node = cluster.nodes[n]
          if (node === undefined) continue
          yield* Effect.promise(() => node.kill())
          yield* step(`${node.name}-down`)
          yield* Effect.promise(() => node.start())
          yield* step(`${node.name}-back`)
        }
      }),
    )
    expect(published).toBe(35)
    const nc = await connect({ servers: cluster.urls.split(",") })
    try {
      const jsm = await jetstreamManager(nc)
      const info = await jsm.streams.info("FO_EPISODES")
      expect(info.state.messages).toBe(35)
      expect(info.config.num_replicas).toBe(3)
    } finally {
      await nc.close()
    }
  }, 180_000)
})
