/**
 * A gradient worker thread: takes jobs from the parent (parallel.ts), claims sequences from the
 * job's shared counter, and replies with each sequence's loss and gradients (their buffers
 * transferred, not copied) on the port it was given.
 */
import { type MessagePort, parentPort, workerData } from "node:worker_threads"
import type { Kernels } from "../kernels/kernels.ts"
import { type KernelChoice, selectKernels } from "../kernels/select.ts"
import { sequenceGradients } from "./gradients.ts"
import { TinyMoe } from "./model.ts"
import type { GradientJob, GradientReply } from "./parallel.ts"
import { paramEntries, paramsFromArrays } from "./params.ts"

const port = (workerData as { port: MessagePort }).port
const kernels = new Map<KernelChoice, Kernels>()

const run = (job: GradientJob): void => {
  const ctr = new Int32Array(job.counter)
  try {
    let k = kernels.get(job.kernels)
    if (k === undefined) {
      k = selectKernels(job.kernels)
      kernels.set(job.kernels, k)
    }
    const model = TinyMoe.fromParams(
      job.config,
      paramsFromArrays(job.config, job.params),
      job.precision,
      k,
    )
    const n = job.batch.length
    for (let i = Atomics.add(ctr, 0, 1); i < n; i = Atomics.add(ctr, 0, 1)) {
      const r = sequenceGradients(
        model,
        job.batch[i] as GradientJob["batch"][number],
        job.auxLossCoef,
      )
      const grads = paramEntries(job.config, r.grads).map((e) => e.data)
      const reply: GradientReply = { id: job.id, index: i, loss: r.loss, auxLoss: r.auxLoss, grads }
      port.postMessage(
        reply,
        grads.map((g) => g.buffer as ArrayBuffer),
      )
      Atomics.add(ctr, 1, 1)
      Atomics.notify(ctr, 1)
    }
  } catch (e) {
    const reply: GradientReply = {
      id: job.id,
      error: e instanceof Error ? (e.stack ?? e.message) : String(e),
    }
    port.postMessage(reply)
    Atomics.store(ctr, 2, 1)
    Atomics.notify(ctr, 1)
  }
}

parentPort?.on("message", (job: GradientJob) => run(job))
