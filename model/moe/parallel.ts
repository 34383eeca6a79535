/**
 * Data-parallel gradients over the sequences of a batch on worker threads, behind a synchronous
 * call: the calling thread posts the weights and the batch to each worker, computes sequences
 * itself, and blocks (Atomics.wait) until the workers have done the rest. Sequences are claimed
 * one at a time from a shared counter, so uneven lengths balance themselves. Every sequence's
 * gradient is computed whole on one thread, by the same code and kernels as single-threaded, and
 * the per-sequence gradients are summed in batch order on the calling thread: the result equals
 * the single-threaded one bit for bit.
 *
 * Workers live in a pool per thread count, created on first use, unref'd (they never keep a
 * process alive) and terminated by `closeGradientWorkers()`. They load the TypeScript sources
 * through tsx, as cli/bin/t1.js does (gradWorker.mjs).
 */
import { availableParallelism } from "node:os"
import { MessageChannel, type MessagePort, receiveMessageOnPort, Worker } from "node:worker_threads"
import type { Floats, Kernels } from "../kernels/kernels.ts"
import { referenceKernels } from "../kernels/reference.ts"
import { type KernelChoice, makeAutoKernels } from "../kernels/select.ts"
import { kvWidth, queryWidth, type TinyMoeConfig } from "./config.ts"
import { addArrays, type SupervisedSequence, sequenceGradients } from "./gradients.ts"
import type { TinyMoe } from "./model.ts"
import { type Params, type Precision, paramEntries, paramsFromArrays } from "./params.ts"

/**
 * `auto`: $T1_MODEL_THREADS when set, else every core (at most 4) when the batch is big enough
 * to repay the messages, else 1.
 */
export type Threads = number | "auto"

/** Below this many estimated multiply-adds per batch, `auto` stays on one thread. */
const AUTO_MIN_WORK = 2e8
/** A worker that finishes no sequence for this long is given up on. */
const STALL_MS = 10 * 60_000

export interface GradientJob {
  readonly id: number
  readonly config: TinyMoeConfig
  readonly precision: Precision
  readonly kernels: KernelChoice
  /** Parameters in paramEntries order. */
  readonly params: ReadonlyArray<Floats>
  readonly batch: ReadonlyArray<SupervisedSequence>
  readonly auxLossCoef: number
  /** Int32 [next sequence to claim, sequences finished, failed (0/1)]. */
  readonly counter: SharedArrayBuffer
}

export type GradientReply =
  | {
      readonly id: number
      readonly index: number
      readonly loss: number
      readonly auxLoss: number
      readonly grads: Floats[]
    }
  | { readonly id: number; readonly error: string }

let autoName: string | undefined
/** The kernel choice a worker rebuilds `kernels` from, or undefined when it cannot. */
export const kernelChoiceOf = (kernels: Kernels): KernelChoice | undefined => {
  if (kernels === referenceKernels) return "reference"
  if (kernels.name === "simd") return "simd"
  autoName ??= makeAutoKernels().name
  return kernels.name === autoName ? "auto" : undefined
}

/** Multiply-adds of a training pass (forward and backward, about 3× the forward). */
const estimatedWork = (c: TinyMoeConfig, batch: ReadonlyArray<SupervisedSequence>): number => {
  const attnWidth = 2 * queryWidth(c) + 2 * kvWidth(c)
  const perToken = c.nLayers * (attnWidth * c.dModel + 3 * c.topK * c.dModel * c.dFf)
  let work = 0
  for (const s of batch) {
    const T = s.ids.length
    work += 3 * (T * (perToken + c.dModel * c.vocabSize) + c.nLayers * T * T * queryWidth(c))
  }
  return work
}

/** How many threads a batch gets: explicit counts are honoured (up to the batch size). */
export const resolveThreads = (
  model: TinyMoe,
  batch: ReadonlyArray<SupervisedSequence>,
  threads: Threads = "auto",
): number => {
  if (batch.length < 2 || kernelChoiceOf(model.kernels) === undefined) return 1
  if (threads === "auto") {
    const fromEnv = process.env.T1_MODEL_THREADS
    if (fromEnv !== undefined && fromEnv !== "") {
      const n = Number(fromEnv)
      if (!Number.isInteger(n) || n < 1)
        throw new RangeError(`T1_MODEL_THREADS must be a positive integer, got '${fromEnv}'`)
      return Math.min(batch.length, n)
    }
    if (estimatedWork(model.config, batch) < AUTO_MIN_WORK) return 1
    return Math.min(batch.length, availableParallelism(), 4)
  }
  if (!Number.isInteger(threads) || threads < 1)
    throw new RangeError(`threads must be a positive integer or "auto", got ${threads}`)
  return Math.min(batch.length, threads)
}

/**
 * A typed-array view copied to its own buffer before it is posted (a view of a larger buffer
 * would send the whole buffer); other array-likes as they are.
 */
const compact = (xs: ArrayLike<number>): ArrayLike<number> =>
  ArrayBuffer.isView(xs) && "slice" in xs && typeof xs.slice === "function"
    ? (xs.slice() as ArrayLike<number>)
    : xs

interface PoolWorker {
  readonly worker: Worker
  readonly port: MessagePort
  alive: boolean
}

const pools = new Map<number, PoolWorker[]>()
let nextJob = 1

const spawn = (): PoolWorker => {
  const { port1, port2 } = new MessageChannel()
  const worker = new Worker(new URL("./gradWorker.mjs", import.meta.url), {
    workerData: { port: port2 },
    transferList: [port2],
  })
  const entry: PoolWorker = { worker, port: port1, alive: true }
  worker.on("exit", () => {
    entry.alive = false
  })
  worker.on("error", () => {
    entry.alive = false
  })
  worker.unref()
  port1.unref()
  return entry
}

/** `count` live workers (the calling thread is the count + 1st). */
const workers = (count: number): PoolWorker[] => {
  let pool = pools.get(count)
  if (pool === undefined) {
    pool = []
    pools.set(count, pool)
  }
  for (let i = 0; i < count; i++) {
    const w = pool[i]
    if (w === undefined || !w.alive) {
      if (w) void w.worker.terminate()
      pool[i] = spawn()
    }
  }
  return pool
}

/** Terminates every gradient worker (the next parallel call starts new ones). */
export const closeGradientWorkers = async (): Promise<void> => {
  const all = [...pools.values()].flat()
  pools.clear()
  await Promise.all(
    all.map(async (w) => {
      w.port.close()
      await w.worker.terminate()
    }),
  )
}

/** Live gradient workers, for tests. */
export const gradientWorkerCount = (): number =>
  [...pools.values()].flat().filter((w) => w.alive).length

/**
 * Loss, load-balancing loss and gradients of a batch on `threads` threads (this one included):
 * equal to summing sequenceGradients over the batch in order.
 */
export const parallelGradients = (
  model: TinyMoe,
  batch: ReadonlyArray<SupervisedSequence>,
  auxLossCoef: number,
  threads: number,
): { loss: number; auxLoss: number; grads: Params | undefined } => {
  const choice = kernelChoiceOf(model.kernels)
  if (choice === undefined) throw new Error(`kernels ${model.kernels.name} cannot run on workers`)
  const n = batch.length
  const counter = new SharedArrayBuffer(12)
  const ctr = new Int32Array(counter)
  const id = nextJob++
  const job: GradientJob = {
    id,
    config: model.config,
    precision: model.precision,
    kernels: choice,
    params: model.entries().map((e) => e.data),
    batch: batch.map((s) => ({
      ids: compact(s.ids),
      weights: compact(s.weights),
      ...(s.routing ? { routing: s.routing.slice() } : {}),
    })),
    auxLossCoef,
    counter,
  }
  const pool = workers(threads - 1)
  for (const w of pool) w.worker.postMessage(job)

  // Results are summed in batch order as soon as the next one is in (while the workers are
  // still busy), then dropped.
  const results: Array<{ loss: number; auxLoss: number; grads: Floats[] } | undefined> = new Array(
    n,
  )
  const errors: string[] = []
  let received = 0
  let next = 0
  let loss = 0
  let auxLoss = 0
  let total: Floats[] | undefined
  const absorb = () => {
    for (const w of pool) {
      for (
        let m = receiveMessageOnPort(w.port);
        m !== undefined;
        m = receiveMessageOnPort(w.port)
      ) {
        const reply = m.message as GradientReply
        if (reply.id !== id) continue
        if ("error" in reply) errors.push(reply.error)
        else {
          results[reply.index] = reply
          received++
        }
      }
    }
    for (let r = results[next]; r !== undefined && next < n; r = results[next]) {
      loss += r.loss
      if (auxLossCoef) auxLoss += r.auxLoss
      if (total) addArrays(total, r.grads)
      else total = r.grads
      results[next] = undefined
      next++
    }
  }
  for (let i = Atomics.add(ctr, 0, 1); i < n; i = Atomics.add(ctr, 0, 1)) {
    const r = sequenceGradients(model, batch[i] as SupervisedSequence, auxLossCoef)
    results[i] = {
      loss: r.loss,
      auxLoss: r.auxLoss,
      grads: paramEntries(model.config, r.grads).map((e) => e.data),
    }
    received++
    Atomics.add(ctr, 1, 1)
    absorb()
  }
  let progressAt = Date.now()
  while (next < n && errors.length === 0) {
    const finished = Atomics.load(ctr, 1)
    absorb()
    if (next >= n || errors.length > 0) break
    if (received >= finished) {
      // Nothing new in the ports: sleep until a worker finishes a sequence or fails.
      if (Atomics.load(ctr, 2) !== 0) {
        absorb()
        if (errors.length === 0) errors.push("a gradient worker failed without a message")
        break
      }
      if (Atomics.wait(ctr, 1, finished, 1000) === "timed-out") {
        if (Date.now() - progressAt > STALL_MS) {
          errors.push(`no gradient worker finished a sequence in ${STALL_MS / 1000} s`)
          break
        }
      } else progressAt = Date.now()
    }
  }
  if (errors.length > 0) throw new Error(`gradient worker failed: ${errors.join("; ")}`)
  return { loss, auxLoss, grads: total ? paramsFromArrays(model.config, total) : undefined }
}
