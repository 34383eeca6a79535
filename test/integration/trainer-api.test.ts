/**
 * The Trainer API as an external trainer drives it: a train job with learner.external, the whole
 * system in one process (in-memory bus, local sandboxes, t1's learner pool running beside it),
 * and a trainer written against TrainerService over gRPC. It claims the job, fetches the
 * starting weights, takes batches, publishes new weights and reports steps; the samplers follow
 * the versions it publishes and the coordinator ends the job at its step budget. Along the way:
 * the last version goes by reference (PublishWeightsRef, a file on shared storage), and once the
 * job has ended its final weights and an old version are read through JobService and `t1 weights
 * fetch`; a job t1's learner pool holds cannot be claimed, a second trainer cannot take a live
 * lease but takes a lapsed one and resumes from the last published version, stale acks, malformed
 * weights (streamed or by reference) and versions that go back are refused, and nothing is
 * announced for them.
 */
import { createHash } from "node:crypto"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { type TrainerServiceClient, trainerServiceClient } from "../../actors/trainer/index.ts"
import { weightsCommand } from "../../cli/commands/weights.ts"
import { startUpSystem } from "../../cli/up/system.ts"
import { loadBundledTokenizer } from "../../model/bundled/bundled.ts"
import {
  decodeSafetensors,
  decodeWeights,
  encodeSafetensors,
  encodeWeights,
  readHfCheckpoint,
  type TinyMoe,
} from "../../model/index.ts"
import { type Batch, JobState } from "../../proto/index.ts"
import { subjectsFor } from "../../services/bus/index.ts"
import { type JobServiceClient, jobServiceClient } from "../../services/gateway/index.ts"
import { Metrics } from "../../services/metrics/index.ts"
import { grpcCode, runInProcess } from "../support/in-process.ts"
import { smallTrainSpec } from "../support/train-spec.ts"

/** A training step as far as this test's trainer goes: every weight nudged. */
const nudge = (model: TinyMoe, by: number) => {
  for (const entry of model.entries())
    for (let i = 0; i < entry.data.length; i += 7) entry.data[i] = (entry.data[i] ?? 0) + by
}

const spec = (external: boolean) =>
  smallTrainSpec(external ? "external trainer" : "t1 learner", { ppoSteps: 3, external })

describe("TrainerService: an external trainer trains a t1 job", () => {
  it("claim, fetch, take, publish, report for 3 updates; leases, resume, stale acks and malformed weights", async () => {
    const subjects = subjectsFor(`trn${Math.random().toString(36).slice(2, 7)}`)
    const tokenizer = loadBundledTokenizer()
    const result = await runInProcess(
      subjects,
      Effect.gen(function* () {
        const gateway = yield* startUpSystem(subjects, {
          concurrency: 2,
          driver: "local",
          contextLength: 1024,
          tokenizer,
        })
        const jobs: JobServiceClient = jobServiceClient(gateway.address)
        const trainer: TrainerServiceClient = trainerServiceClient(gateway.address)
        const registry = (yield* Metrics).registry
        return yield* Effect.promise(async () => {
          // t1's learner pool holds (or will hold) this one: not claimable.
          const own = await jobs.submitJob({ spec: spec(false) })
          const refusedOwn = await grpcCode(
            trainer.claimJob({ jobId: own.jobId, trainerId: "torch-a" }),
          )
          await jobs.cancelJob({ jobId: own.jobId })

          const { jobId } = await jobs.submitJob({ spec: spec(true) })
          const claim = await trainer.claimJob({ jobId, trainerId: "torch-a", leaseTtlMs: 1500 })
          const lease = claim.lease?.leaseId ?? ""
          const renewed = await trainer.claimJob({
            jobId,
            trainerId: "torch-a",
            leaseTtlMs: 1500,
          })
          const refusedOther = await grpcCode(
            trainer.claimJob({ jobId, trainerId: "torch-b", leaseTtlMs: 1500 }),
          )
          const start = await trainer.fetchWeights({ jobId, leaseId: lease })
          let model = decodeWeights(start.bytes).model
          let version = start.head.policyVersion
          const trained: string[][] = []
          const checkpoints = mkdtempSync(join(tmpdir(), "t1-trainer-ref-"))
          const byRef: Array<{
            version: bigint | undefined
            sha256: string | undefined
            expected: string
          }> = []
          const batches: Batch[] = []
          const v1Sha = { value: "" }

          const take = async (leaseId: string, ack: string) => {
            for (;;) {
              await trainer.claimJob({
                jobId,
                trainerId: leaseId === lease ? "torch-a" : "torch-b",
                leaseTtlMs: 1500,
              })
              const { batch } = await trainer.takeBatch({
                jobId,
                leaseId,
                ackBatchId: ack,
                waitMs: 500,
              })
              if (batch !== undefined && batch.trajectories.length > 0) return batch
              ack = ""
            }
          }
          const step = async (
            leaseId: string,
            ack: string,
            n: number,
            via: "stream" | "ref" = "stream",
          ) => {
            const batch = await take(leaseId, ack)
            batches.push(batch)
            nudge(model, 1e-3)
            version += 1n
            const episodeIds = batch.trajectories.map((t) => t.episodeId)
            trained.push(episodeIds)
            // Held by the gateway until the version it makes is published, then recorded.
            await trainer.reportStep({
              jobId,
              leaseId,
              report: {
                step: BigInt(n),
                policyVersion: version,
                batchId: batch.batchId,
                episodeIds,
                trajectories: batch.trajectories.length,
              },
            })
            const header = {
              jobId,
              leaseId,
              policyVersion: version,
              step: BigInt(n),
              batchIds: [batch.batchId],
            }
            const bytes = encodeWeights(model, "F32", { version })
            if (via === "stream") {
              const { announcement } = await trainer.publishWeights(header, bytes)
              if (n === 1) v1Sha.value = announcement?.sha256 ?? ""
            } else {
              // A checkpoint the trainer wrote to storage the gateway reads.
              const path = join(checkpoints, `v${version}.safetensors`)
              writeFileSync(path, bytes)
              const { announcement } = await trainer.publishWeightsRef({
                ...header,
                format: "safetensors",
                path,
              })
              byRef.push({
                version: announcement?.policyVersion,
                sha256: announcement?.sha256,
                expected: createHash("sha256").update(bytes).digest("hex"),
              })
            }
            return batch.batchId
          }

          // Update 1 by torch-a.
          const b1 = await step(lease, "", 1)

          // Bad input: nothing of it is announced.
          const before = (await trainer.claimJob({ jobId, trainerId: "torch-a", leaseTtlMs: 1500 }))
            .policyVersion
          const stale = await grpcCode(
            trainer.takeBatch({ jobId, leaseId: lease, ackBatchId: "not-a-batch", waitMs: 0 }),
          )
          const header = { jobId, leaseId: lease, policyVersion: version + 1n, step: 2n }
          const good = encodeWeights(model, "F32", { version: version + 1n })
          // The model's Hugging Face tensors, with one added or one reshaped.
          const tensorsOf = () => decodeSafetensors(good).tensors
          const metadata = decodeWeights(good).metadata
          const extra = tensorsOf()
          extra.set("model.layers.9.mystery", {
            dtype: "F32",
            shape: [2],
            data: Float32Array.of(1, 2),
          })
          const unknownName = await grpcCode(
            trainer.publishWeights(header, encodeSafetensors(extra, metadata)),
          )
          const reshaped = tensorsOf()
          const name = "model.embed_tokens.weight"
          const first = reshaped.get(name)
          if (first === undefined || !(first.data instanceof Float32Array))
            throw new Error("no embedding")
          const rows = (first.shape[0] ?? 1) - 1
          const rest = first.shape.slice(1).reduce((a, b) => a * b, 1)
          reshaped.set(name, {
            dtype: "F32",
            shape: [rows, ...first.shape.slice(1)],
            data: first.data.slice(0, rows * rest),
          })
          const wrongShape = await grpcCode(
            trainer.publishWeights(header, encodeSafetensors(reshaped, metadata)),
          )
          const undecodable = await grpcCode(trainer.publishWeights(header, good.subarray(0, 100)))
          const truncated = await (async () => {
            const s = trainer.openPublish()
            s.send({
              part: {
                case: "header",
                value: { ...header, format: "safetensors", sizeBytes: BigInt(good.length) },
              },
            })
            s.send({ part: { case: "data", value: good.subarray(0, good.length >> 1) } })
            return grpcCode(s.end())
          })()
          const cancelled = trainer.openPublish()
          cancelled.send({
            part: {
              case: "header",
              value: { ...header, format: "safetensors", sizeBytes: BigInt(good.length) },
            },
          })
          cancelled.send({ part: { case: "data", value: good.subarray(0, 1000) } })
          cancelled.cancel()
          const oldVersion = await grpcCode(
            trainer.publishWeights({ ...header, policyVersion: version }, good),
          )
          // By reference: a relative path, a missing file, a folder, a file that is not
          // weights, an old version.
          const ref = { ...header, format: "safetensors" }
          const cut = join(checkpoints, "cut.safetensors")
          writeFileSync(cut, good.subarray(0, good.length >> 1))
          const whole = join(checkpoints, "whole.safetensors")
          writeFileSync(whole, good)
          const badRefs = {
            relative: await grpcCode(
              trainer.publishWeightsRef({ ...ref, path: "checkpoints/v2.safetensors" }),
            ),
            missing: await grpcCode(
              trainer.publishWeightsRef({ ...ref, path: join(checkpoints, "none") }),
            ),
            folder: await grpcCode(trainer.publishWeightsRef({ ...ref, path: checkpoints })),
            truncated: await grpcCode(trainer.publishWeightsRef({ ...ref, path: cut })),
            format: await grpcCode(
              trainer.publishWeightsRef({ ...ref, format: "pickle", path: whole }),
            ),
            oldVersion: await grpcCode(
              trainer.publishWeightsRef({ ...ref, policyVersion: version, path: whole }),
            ),
          }
          const after = (await trainer.claimJob({ jobId, trainerId: "torch-a", leaseTtlMs: 1500 }))
            .policyVersion

          // torch-a takes a batch and reports its step 2, then dies (stops renewing) before
          // publishing: the report is held, never recorded.
          const orphan = await take(lease, b1)
          await trainer.reportStep({
            jobId,
            leaseId: lease,
            report: {
              step: 2n,
              policyVersion: version + 1n,
              batchId: orphan.batchId,
              episodeIds: orphan.trajectories.map((t) => t.episodeId),
              trajectories: orphan.trajectories.length,
            },
          })
          // torch-b takes the lapsed lease and resumes.
          await new Promise((r) => setTimeout(r, 1700))
          const claimB = await trainer.claimJob({ jobId, trainerId: "torch-b", leaseTtlMs: 1500 })
          const leaseB = claimB.lease?.leaseId ?? ""
          const oldLease = await grpcCode(
            trainer.takeBatch({ jobId, leaseId: lease, ackBatchId: "", waitMs: 0 }),
          )
          const resumed = await trainer.fetchWeights({ jobId, leaseId: leaseB })
          model = decodeWeights(resumed.bytes).model
          version = resumed.head.policyVersion
          // b1 was trained by a published version: the gateway confirms it, no ack needed.
          const b2 = await step(leaseB, "", 2)
          await step(leaseB, b2, 3, "ref")

          const events = []
          for await (const e of jobs.watchJob({ jobId })) events.push(e)
          const { status } = await jobs.getJob({ jobId })
          // The job has ended: its final weights and an old version stay readable.
          const final = await jobs.fetchJobWeights({ jobId })
          const firstVersion = await jobs.fetchJobWeights({ jobId, policyVersion: 1n })
          const finalDir = join(checkpoints, "final")
          const cli = await Effect.runPromiseExit(
            weightsCommand(["fetch", jobId, "--out", finalDir, "--gateway", gateway.address], {
              out: () => undefined,
              err: () => undefined,
            }) as Effect.Effect<void, unknown>,
          )
          trainer.close()
          jobs.close()
          return {
            jobId,
            metrics: await registry.metrics(),
            refusedOwn,
            lease,
            renewedLease: renewed.lease?.leaseId,
            refusedOther,
            startVersion: start.head.policyVersion,
            b1,
            before,
            after,
            stale,
            unknownName,
            wrongShape,
            undecodable,
            truncated,
            oldVersion,
            badRefs,
            byRef,
            v1Sha: v1Sha.value,
            claimB,
            leaseB,
            oldLease,
            resumedVersion: resumed.head.policyVersion,
            orphanEpisodes: orphan.trajectories.map((t) => t.episodeId),
            trained,
            batches,
            status,
            final,
            firstVersion,
            finalModel: model,
            cliOk: cli._tag === "Success",
            finalDir,
            steps: events.flatMap((e) => (e.event.case === "learnerStep" ? [e.event.value] : [])),
          }
        })
      }),
    )
    expect(result.refusedOwn).toBe("FAILED_PRECONDITION")
    expect(result.renewedLease).toBe(result.lease)
    expect(result.refusedOther).toBe("FAILED_PRECONDITION")
    expect(result.startVersion).toBe(0n)
    // Refused, every one; the job's version did not move.
    expect({
      stale: result.stale,
      unknownName: result.unknownName,
      wrongShape: result.wrongShape,
      undecodable: result.undecodable,
      truncated: result.truncated,
      oldVersion: result.oldVersion,
    }).toEqual({
      stale: "FAILED_PRECONDITION",
      unknownName: "INVALID_ARGUMENT",
      wrongShape: "INVALID_ARGUMENT",
      undecodable: "INVALID_ARGUMENT",
      truncated: "INVALID_ARGUMENT",
      oldVersion: "FAILED_PRECONDITION",
    })
    expect(result.badRefs).toEqual({
      relative: "INVALID_ARGUMENT",
      missing: "INVALID_ARGUMENT",
      folder: "INVALID_ARGUMENT",
      truncated: "INVALID_ARGUMENT",
      format: "INVALID_ARGUMENT",
      oldVersion: "FAILED_PRECONDITION",
    })
    expect(result.after).toBe(result.before)
    // Step 3 was published by reference: announced as v3 with the file's digest.
    expect(result.byRef).toEqual([
      { version: 3n, sha256: result.byRef[0]?.expected, expected: result.byRef[0]?.expected },
    ])
    // The second trainer resumes from the last published version, with a new lease.
    expect(result.leaseB).not.toBe(result.lease)
    expect(result.claimB.policyVersion).toBe(1n)
    expect(result.claimB.step).toBe(1n)
    expect(result.oldLease).toBe("FAILED_PRECONDITION")
    expect(result.resumedVersion).toBe(1n)
    // Nothing trained twice; the job ended at its budget with the trainer's three steps.
    const all = result.trained.flat()
    expect(new Set(all).size).toBe(all.length)
    expect(result.status?.state).toBe(JobState.SUCCEEDED)
    expect(result.steps.map((s) => Number(s.step))).toEqual([1, 2, 3])
    expect(result.metrics).toContain(`t1_trainer_steps_total{job="${result.jobId}"} 3`)
    expect(result.metrics).toContain(`t1_trainer_weights_published_total{job="${result.jobId}"} 3`)
    expect(result.metrics).toContain(`t1_trainer_policy_version{job="${result.jobId}"} 3`)
    // Step 2 as torch-b trained and published it, not torch-a's held report.
    expect(result.steps[1]?.episodeIds).toEqual(result.trained[1])
    expect(result.steps[1]?.episodeIds).not.toEqual(result.orphanEpisodes)
    // After the job ended: the final version (v3, step 3) and v1 through JobService, and the
    // final weights as a Hugging Face checkpoint directory through the CLI.
    expect([result.final.head.policyVersion, result.final.head.step]).toEqual([3n, 3n])
    expect(result.final.head.sha256).toBe(result.byRef[0]?.expected)
    expect(result.firstVersion.head.policyVersion).toBe(1n)
    expect(result.firstVersion.head.sha256).toBe(result.v1Sha)
    expect(result.cliOk).toBe(true)
    const exported = readHfCheckpoint(result.finalDir)
    expect(
      exported.model
        .entries()
        .every((e, k) => e.data.every((v, i) => v === result.finalModel.entries()[k]?.data[i])),
    ).toBe(true)
    // The samplers switched to the published versions: later batches were sampled on them.
    const sampledOn = result.batches.flatMap((b) => b.trajectories.map((t) => t.policyVersionEnd))
    expect(sampledOn.some((v) => v >= 1n)).toBe(true)
  }, 240_000)
})
