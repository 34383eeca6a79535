/**
 * The watch half of the load test: one job submitted through the gateway's gRPC API, W WatchJob
 * streams open on it at once (spread over a few client connections, as many CLI users would be),
 * and events appended to the job's log the way the coordinator appends them. Each event's fan-out
 * latency is the time from starting its append to its arrival at a watcher, for every watcher.
 */
import { randomUUID } from "node:crypto"
import { JobKind, JobState } from "../../proto/index.ts"
import { Bus } from "../../services/bus/index.ts"
import { type JobServiceClient, jobServiceClient } from "../../services/gateway/client.ts"
import { makeJobStore } from "../../services/jobs/index.ts"
import type { LoadRuntime } from "./runtime.ts"
import type { Teardown } from "./teardown.ts"

const EVENT_PREFIX = "fanout-"

export interface WatchPhaseOptions {
  readonly runtime: LoadRuntime
  readonly teardown: Teardown
  /** The gateway's `host:port`. */
  readonly address: string
  readonly watches: number
  /** Events appended while every watch is open, one at a time. */
  readonly events: number
  /** gRPC connections the watches are spread over. */
  readonly connections: number
  /** The gateway's t1_gateway_watch_streams now. */
  readonly openStreams: () => Promise<number>
  readonly timeoutMs: number
  readonly log: (line: string) => void
}

export interface WatchPhaseResult {
  /** t1_gateway_watch_streams once every watch had its first event. */
  readonly openStreams: number
  /** One sample per event and watcher, ms. */
  readonly fanoutMs: ReadonlyArray<number>
  readonly problems: ReadonlyArray<string>
  readonly seconds: number
}

/**
 * Resolves when `done()` holds, checked whenever `poke` is called; rejects after timeoutMs. The
 * timer does not keep the process alive, and a rejection nobody awaits (the phase failed before)
 * is not an unhandled one.
 */
const condition = (what: string, done: () => boolean, timeoutMs: number) => {
  let poke: () => void = () => {}
  const promise = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`timed out after ${timeoutMs} ms: ${what}`)),
      timeoutMs,
    )
    timer.unref()
    poke = () => {
      if (!done()) return
      clearTimeout(timer)
      resolve()
    }
  })
  promise.catch(() => {})
  poke()
  return { promise, poke }
}

export const runWatchPhase = async (options: WatchPhaseOptions): Promise<WatchPhaseResult> => {
  const { runtime, watches: n, events } = options
  const clients: JobServiceClient[] = Array.from({ length: options.connections }, () =>
    jobServiceClient(options.address, { timeoutMs: 30_000 }),
  )
  const closeClients = () => {
    for (const client of clients) client.close()
  }
  options.teardown.add("gRPC clients", closeClients)
  const first = clients[0] as JobServiceClient
  const { jobId } = await first.submitJob({
    spec: { name: "load-watch", kind: JobKind.ROLLOUT, taskSet: "bundled-train" },
    requestId: `load-watch-${randomUUID()}`,
  })
  const store = await runtime.run(Bus.use((bus) => makeJobStore(bus, runtime.subjects)))

  const problems: string[] = []
  const sentAt: number[] = []
  const received: number[] = []
  const fanoutMs: number[] = []
  let started = 0
  let pending: { readonly k: number; readonly poke: () => void } | undefined
  const allStarted = condition(
    `${n} watches to get their first event`,
    () => started === n,
    options.timeoutMs,
  )

  const watch = async (i: number): Promise<ReadonlyArray<bigint>> => {
    const seqs: bigint[] = []
    const client = clients[i % clients.length] as JobServiceClient
    try {
      for await (const event of client.watchJob({ jobId })) {
        const at = performance.now()
        seqs.push(event.seq)
        if (seqs.length === 1) {
          started++
          allStarted.poke()
        }
        if (event.event.case === "episodeFinished") {
          const k = Number(event.event.value.episodeId.slice(EVENT_PREFIX.length))
          fanoutMs.push(at - (sentAt[k] as number))
          received[k] = (received[k] ?? 0) + 1
          if (pending?.k === k) pending.poke()
        }
      }
    } catch (e) {
      problems.push(`watch ${i}: ${e instanceof Error ? e.message : String(e)}`)
    }
    return seqs
  }

  const began = performance.now()
  const watchers = Array.from({ length: n }, (_, i) => watch(i))
  await allStarted.promise
  const openStreams = await options.openStreams()
  options.log(`${n} watches open (gateway reports ${openStreams} streams)`)

  await runtime.run(store.transition(jobId, JobState.RUNNING))
  for (let k = 0; k < events; k++) {
    const arrived = condition(
      `event ${k} to reach all ${n} watches`,
      () => received[k] === n,
      options.timeoutMs,
    )
    pending = { k, poke: arrived.poke }
    sentAt[k] = performance.now()
    await runtime.run(
      store.appendEvent(jobId, {
        event: {
          case: "episodeFinished",
          value: { episodeId: `${EVENT_PREFIX}${k}`, reward: 1 },
        },
      }),
    )
    arrived.poke()
    await arrived.promise
  }
  // Ended as the coordinator ends a running job: the terminal event closes every watch.
  await runtime.run(store.transition(jobId, JobState.CANCELLED))

  const everyWatchEnded = Promise.all(watchers)
  let timer: NodeJS.Timeout | undefined
  const seqs = await Promise.race([
    everyWatchEnded,
    new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`watches did not end in ${options.timeoutMs} ms after the cancel`)),
        options.timeoutMs,
      )
    }),
  ]).finally(() => clearTimeout(timer))
  const seconds = (performance.now() - began) / 1000

  const last = (await first.getJob({ jobId })).status?.lastEventSeq ?? 0n
  const gapped = seqs.filter(
    (s) => s.length !== Number(last) || s.some((seq, i) => seq !== BigInt(i + 1)),
  ).length
  if (gapped > 0)
    problems.push(`${gapped} of ${n} watches did not see every event 1..${last} exactly once`)
  closeClients()
  return { openStreams, fanoutMs, problems, seconds }
}
