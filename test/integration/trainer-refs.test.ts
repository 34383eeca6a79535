/**
 * Large trajectories through the Trainer API: a trajectory larger than the bus's max_payload is
 * kept in the object store by the buffer, and TakeBatch hands it on as the buffer serves it, a
 * `trajectory_refs` entry, not inline (the answer stays within one message); FetchTrajectory
 * streams its bytes to the trainer that holds the lease. Driven twice over the real gateway:
 * by the PyTorch reference learner's own take-and-resolve (clients/python) and by the
 * TypeScript client. Refs outside the job's buffer are refused, and a confirmed batch's
 * objects are gone.
 */
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { episodeRecords } from "../../actors/buffer/buffer.contract.ts"
import { bufferNames, runBuffer } from "../../actors/buffer/index.ts"
import { encodeRecord, maxChunkTokens } from "../../actors/sampler/records.ts"
import { trainerService, trainerServiceClient } from "../../actors/trainer/index.ts"
import { JobKind, type Trajectory } from "../../proto/index.ts"
import { Bus, subjectsFor } from "../../services/bus/index.ts"
import { ensureSamplerStreams } from "../../services/episodes/index.ts"
import { jobServiceClient, serveGateway } from "../../services/gateway/index.ts"
import { grpcCode, runInProcess } from "../support/in-process.ts"
import { CLIENT_DIR, torchPython } from "../support/python.ts"

const TRAIN_DIR = fileURLToPath(new URL("../../tasks/bundled/train", import.meta.url))

const idsOf = (t: Trajectory | undefined): number[] =>
  t === undefined
    ? []
    : Array.from(new Uint32Array(Uint8Array.from(t.tokenIds).buffer, 0, t.tokenIds.length / 4))

/** Runs the reference learner's Python without blocking this process (it serves the gateway). */
const runPython = (args: ReadonlyArray<string>) =>
  new Promise<{ readonly status: number | null; readonly stdout: string; readonly stderr: string }>(
    (resolve) => {
      const child = spawn(torchPython as string, args, { cwd: CLIENT_DIR, timeout: 120_000 })
      let stdout = ""
      let stderr = ""
      child.stdout.on("data", (d) => {
        stdout += String(d)
      })
      child.stderr.on("data", (d) => {
        stderr += String(d)
      })
      child.on("close", (status) => resolve({ status, stdout, stderr }))
    },
  )

/** The reference learner's Trainer: claim, take one batch, resolve its refs; prints what it got. */
const PYTHON_TAKE = `
import json, sys
import grpc
from t1_trainer.contract import TrainerStub, message
from t1_trainer.learner import Trainer, loss_weights
stub = TrainerStub(grpc.insecure_channel(sys.argv[1], options=[("grpc.max_receive_message_length", -1)]))
trainer = Trainer(stub, sys.argv[2], "torch-refs", 30000)
trainer.renew()
while True:
    raw = stub.TakeBatch(message("t1.v1.TrainerServiceTakeBatchRequest")(
        job_id=sys.argv[2], lease_id=trainer.lease, max_trajectories=2, wait_ms=2000)).batch
    if len(raw.trajectories) + len(raw.trajectory_refs) >= 2:
        break
inline, refs = [t.episode_id for t in raw.trajectories], [r.name for r in raw.trajectory_refs]
batch = trainer.resolve(raw)
print(json.dumps({
    "batch": batch.batch_id, "inline": inline, "refs": refs,
    "episodes": [t.episode_id for t in batch.trajectories],
    "token_bytes": [len(t.token_ids) for t in batch.trajectories],
    "weights": loss_weights(batch), "left": len(batch.trajectory_refs),
}))
`

describe.skipIf(torchPython === undefined)("TrainerService: trajectories by reference", () => {
  it("TakeBatch serves a trajectory over max_payload as a ref; FetchTrajectory streams it to the lease holder", async () => {
    const subjects = subjectsFor(`trf${Math.random().toString(36).slice(2, 7)}`)
    const result = await runInProcess(
      subjects,
      Effect.gen(function* () {
        const bus = yield* Bus
        const gateway = yield* serveGateway({
          subjects,
          port: 0,
          services: [yield* trainerService({ subjects })],
        })
        const jobs = jobServiceClient(gateway.address)
        const trainer = trainerServiceClient(gateway.address)
        // No coordinator here: the job stays queued, its buffer is fed by hand below.
        const { jobId } = yield* Effect.promise(() =>
          jobs.submitJob({
            spec: {
              name: "refs",
              kind: JobKind.TRAIN,
              taskSet: TRAIN_DIR,
              taskIds: ["config-edit-easy-s1-000"],
              learner: { batchTrajectories: 2, ppoSteps: 1, external: true },
            },
          }),
        )
        yield* ensureSamplerStreams(bus, subjects)
        yield* Effect.forkScoped(runBuffer({ subjects, jobId, tickMs: 100 }))
        const records = (ids: ReadonlyArray<string>, tokens: number) =>
          ids.map((episodeId) =>
            episodeRecords(jobId, {
              episodeId,
              tokens,
              routing: false,
              chunkTokens: maxChunkTokens(bus.maxPayload, 0),
            }),
          )
        const bigTokens = Math.ceil(bus.maxPayload / 9) + 20_000
        const publish = (episodes: ReturnType<typeof records>) =>
          Effect.forEach(
            episodes.flatMap((e) => e.all),
            (r) =>
              bus.jsPublish(
                subjects.trajectories(jobId),
                encodeRecord(r.record),
                r.msgId === undefined ? {} : { msgId: r.msgId },
              ),
            { discard: true },
          )
        const [big1] = records(["big1"], bigTokens)
        yield* publish([...records(["small1"], 12), ...(big1 ? [big1] : [])])

        // The reference learner takes the first batch and resolves its ref.
        const py = yield* Effect.promise(() =>
          runPython(["-c", PYTHON_TAKE, gateway.address, jobId]),
        )
        const taken = JSON.parse(py.stdout.trim().split("\n").at(-1) ?? "{}") as {
          readonly batch: string
          readonly inline: string[]
          readonly refs: string[]
          readonly episodes: string[]
          readonly token_bytes: number[]
          readonly weights: number[]
          readonly left: number
        }

        // The TypeScript client: confirms that batch, takes the next.
        const [big2] = records(["big2"], bigTokens)
        yield* publish([...records(["small2"], 12), ...(big2 ? [big2] : [])])
        return yield* Effect.promise(async () => {
          const claim = await trainer.claimJob({ jobId, trainerId: "torch-refs" })
          const leaseId = claim.lease?.leaseId ?? ""
          let ack = taken.batch
          let batch = (await trainer.takeBatch({ jobId, leaseId, ackBatchId: ack, waitMs: 2000 }))
            .batch
          while (
            batch !== undefined &&
            batch.trajectories.length + batch.trajectoryRefs.length < 2
          ) {
            ack = ""
            batch = (await trainer.takeBatch({ jobId, leaseId, ackBatchId: ack, waitMs: 2000 }))
              .batch
          }
          if (batch === undefined) throw new Error("no batch")
          const ref = batch.trajectoryRefs[0]
          const fetched =
            ref === undefined ? undefined : await trainer.fetchTrajectory({ jobId, leaseId, ref })
          const resolved = await trainer.resolveBatch(jobId, leaseId, batch)
          const names = bufferNames(subjects, jobId)
          const refused = {
            otherBucket: await grpcCode(
              trainer.fetchTrajectory({
                jobId,
                leaseId,
                ref: { bucket: `${subjects.prefix}-weights`, name: ref?.name ?? "" },
              }),
            ),
            otherJob: await grpcCode(
              trainer.fetchTrajectory({
                jobId,
                leaseId,
                ref: { bucket: names.objectBucket, name: "other-job/big2" },
              }),
            ),
            missing: await grpcCode(
              trainer.fetchTrajectory({
                jobId,
                leaseId,
                ref: { bucket: names.objectBucket, name: names.objectName("never") },
              }),
            ),
            wrongLease: await grpcCode(
              trainer.fetchTrajectory({ jobId, leaseId: "not-the-lease", ref }),
            ),
            // big1's batch was confirmed by this take: its object is deleted.
            confirmed: await grpcCode(
              trainer.fetchTrajectory({
                jobId,
                leaseId,
                ref: { bucket: names.objectBucket, name: names.objectName("big1") },
              }),
            ),
          }
          trainer.close()
          jobs.close()
          return {
            py,
            taken,
            big1: big1?.ids,
            big2: big2?.ids,
            wire: {
              inline: batch.trajectories.map((t) => t.episodeId),
              refs: batch.trajectoryRefs.map((r) => r.name),
            },
            fetched,
            resolved: resolved.trajectories.map((t) => t.episodeId),
            weights: resolved.weights,
            refused,
            names,
          }
        })
      }),
    )
    expect(result.py.stderr).toBe("")
    expect(result.py.status).toBe(0)
    const { taken, names } = result
    // Python: one inline, one by reference, resolved in batch order with one weight each.
    expect(taken.inline).toEqual(["small1"])
    expect(taken.refs).toEqual([names.objectName("big1")])
    expect(taken.episodes).toEqual(["small1", "big1"])
    expect(taken.token_bytes).toEqual([12 * 4, (result.big1?.length ?? 0) * 4])
    expect(taken.weights).toEqual([1, 1])
    expect(taken.left).toBe(0)
    // TypeScript: the same shape on the wire, and the fetched bytes are the sampled ids.
    expect(result.wire).toEqual({ inline: ["small2"], refs: [names.objectName("big2")] })
    expect(result.fetched?.episodeId).toBe("big2")
    expect(idsOf(result.fetched)).toEqual(Array.from(result.big2 ?? []))
    expect(result.resolved).toEqual(["small2", "big2"])
    expect(result.weights).toEqual([1, 1])
    expect(result.refused).toEqual({
      otherBucket: "INVALID_ARGUMENT",
      otherJob: "INVALID_ARGUMENT",
      missing: "NOT_FOUND",
      wrongLease: "FAILED_PRECONDITION",
      confirmed: "NOT_FOUND",
    })
  }, 180_000)
})
