/** What a finished load run must not leave behind, each read from its owner. */
import { readdir, rm } from "node:fs/promises"
import type Dockerode from "dockerode"
import { Effect } from "effect"
import { killBwrapSandboxProcesses } from "../../actors/sandbox/index.ts"
import { Bus } from "../../services/bus/index.ts"
import { jobEventsStream } from "../../services/jobs/index.ts"
import type { LoadRuntime } from "./runtime.ts"

/** Containers (running or not) labelled with the sandbox host's owner. */
export const ownedContainers = async (docker: Dockerode, owner: string): Promise<number> =>
  (await docker.listContainers({ all: true, filters: { label: [`t1.owner=${owner}`] } })).length

/** Removes every container labelled with the owner; returns how many there were. */
export const removeOwnedContainers = async (docker: Dockerode, owner: string): Promise<number> => {
  const left = await docker.listContainers({ all: true, filters: { label: [`t1.owner=${owner}`] } })
  await Promise.all(
    left.map((c) =>
      docker
        .getContainer(c.Id)
        .remove({ force: true })
        .catch(() => undefined),
    ),
  )
  return left.length
}

/** Bwrap sandboxes whose directories are still under the run's sandbox root. */
export const ownedBwrapSandboxes = async (root: string): Promise<ReadonlyArray<string>> =>
  (await readdir(root).catch(() => [])).filter((entry) => entry.startsWith("bwrap-"))

/** Kills what is left of the run's bwrap sandboxes and removes their root; how many there were. */
export const removeBwrapSandboxes = async (root: string): Promise<number> => {
  const left = await ownedBwrapSandboxes(root)
  for (const id of left) await killBwrapSandboxProcesses(id, root).catch(() => undefined)
  await rm(root, { recursive: true, force: true })
  return left.length
}

const jsApi = (runtime: LoadRuntime, api: string) =>
  runtime.run(
    Effect.gen(function* () {
      const bus = yield* Bus
      const reply = yield* bus.request(`$JS.API.${api}`, new Uint8Array(0), { timeoutMs: 5_000 })
      const parsed: unknown = JSON.parse(new TextDecoder().decode(reply.data))
      return parsed
    }),
  )

/** Consumers on the job event stream (every WatchJob holds one while it is open). */
export const jobEventConsumers = async (runtime: LoadRuntime): Promise<number> => {
  const info = (await jsApi(runtime, `STREAM.INFO.${jobEventsStream(runtime.subjects)}`)) as {
    readonly state?: { readonly consumer_count?: number }
  }
  return info.state?.consumer_count ?? Number.NaN
}

/** Deletes the run's streams and job bucket, so a shared NATS server keeps nothing of it. */
export const deleteRunStreams = async (runtime: LoadRuntime): Promise<void> => {
  const s = runtime.subjects
  for (const stream of [
    s.episodesStream,
    s.trajectoriesStream,
    jobEventsStream(s),
    `KV_${s.jobsBucket}`,
  ])
    await jsApi(runtime, `STREAM.DELETE.${stream}`).catch(() => undefined)
}
