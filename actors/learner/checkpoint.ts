import { Clock, Data, Effect, Option } from "effect"
import {
  AdamW,
  type AdamWState,
  decodeAdamWState,
  decodeWeights,
  encodeAdamWState,
  encodeWeights,
  type Kernels,
} from "../../model/index.ts"
import type { BusError, BusShape } from "../../services/bus/index.ts"
import { CRITIC_PARAMS, type LearnerConfig, Trainer } from "./trainer.ts"

/** What a learner needs to continue after a crash, besides the weights and optimiser moments. */
export interface CheckpointManifest {
  readonly step: number
  /** SFT updates done before RL (absent in checkpoints older than the SFT phase of jobs). */
  readonly sftSteps?: number
  readonly version: string
  /** The last batch taken from the buffer and trained on (acked with the next take). */
  readonly lastBatchId: string
  readonly savedUnixMs: number
}

const names = (job: string) => ({
  weights: `${job}/weights.safetensors`,
  optimizer: `${job}/optimizer.safetensors`,
  critic: `${job}/critic-optimizer.safetensors`,
  manifest: `${job}/manifest.json`,
})

/**
 * Saves weights, both optimisers and the manifest into the object store bucket. The manifest is
 * written last and names the step, so a crash mid-save leaves the previous checkpoint usable:
 * on load, tensors whose step disagrees with the manifest are a torn save and refused.
 */
export const saveCheckpoint = (
  bus: BusShape,
  bucket: string,
  job: string,
  trainer: Trainer,
  version: bigint,
  lastBatchId: string,
): Effect.Effect<CheckpointManifest, BusError> =>
  Effect.gen(function* () {
    const store = yield* bus.objectStore(bucket)
    const n = names(job)
    const step = String(trainer.step)
    yield* store.put(n.weights, encodeWeights(trainer.model, "F32", { version, extra: { step } }))
    yield* store.put(n.optimizer, encodeAdamWState(trainer.optimizer.state()))
    yield* store.put(n.critic, encodeAdamWState(trainer.criticOptimizer.state()))
    const manifest: CheckpointManifest = {
      step: trainer.step,
      sftSteps: trainer.sftStepsDone,
      version: version.toString(),
      lastBatchId,
      savedUnixMs: yield* Clock.currentTimeMillis,
    }
    yield* store.put(n.manifest, new TextEncoder().encode(JSON.stringify(manifest)))
    return manifest
  })

export interface Restored {
  readonly trainer: Trainer
  readonly version: bigint
  readonly lastBatchId: string
}

/** The latest checkpoint of a job, or undefined when it has none. */
/** A stored checkpoint that cannot be read back (missing part, undecodable bytes, torn write). */
export class CheckpointCorrupt extends Data.TaggedError("CheckpointCorrupt")<{
  readonly job: string
  readonly reason: string
}> {
  override get message(): string {
    return `checkpoint of ${this.job}: ${this.reason}`
  }
}

export const loadCheckpoint = (
  bus: BusShape,
  bucket: string,
  job: string,
  config: LearnerConfig,
  kernels?: Kernels,
): Effect.Effect<Restored | undefined, BusError | CheckpointCorrupt> =>
  Effect.gen(function* () {
    const store = yield* bus.objectStore(bucket)
    const n = names(job)
    const manifestBytes = yield* store.get(n.manifest)
    if (Option.isNone(manifestBytes)) return undefined
    const corrupt = (reason: string) => new CheckpointCorrupt({ job, reason })
    const decoding = <A>(what: string, f: () => A) =>
      Effect.try({
        try: f,
        catch: (e) => corrupt(`${what}: ${e instanceof Error ? e.message : String(e)}`),
      })
    const manifest = yield* decoding(
      "manifest",
      () => JSON.parse(new TextDecoder().decode(manifestBytes.value)) as CheckpointManifest,
    )
    const get = (name: string) =>
      store
        .get(name)
        .pipe(
          Effect.flatMap((o) =>
            Option.isSome(o) ? Effect.succeed(o.value) : Effect.fail(corrupt(`${name} is missing`)),
          ),
        )
    const weightBytes = yield* get(n.weights)
    const decoded = yield* decoding("weights", () => decodeWeights(weightBytes, "f32", kernels))
    if (decoded.metadata.step !== String(manifest.step))
      return yield* corrupt(
        `torn: weights at step ${decoded.metadata.step}, manifest at ${manifest.step}`,
      )
    const model = decoded.model
    const params = model.entries().map((e) => ({ name: e.name, data: e.data, decay: e.decay }))
    const actorParams = params.filter((p) => !CRITIC_PARAMS.has(p.name))
    // Checkpoints from before the actor and critic had optimisers of their own hold the value
    // head's moments in the actor's state too: those are left out (the critic's state has them).
    const actorState = (state: AdamWState): AdamWState => {
      const names = new Set(actorParams.flatMap((p) => [`m.${p.name}`, `v.${p.name}`]))
      return {
        step: state.step,
        tensors: new Map([...state.tensors].filter(([k]) => names.has(k))),
      }
    }
    const optimizerBytes = yield* get(n.optimizer)
    const criticBytes = yield* get(n.critic)
    // The trainer clips the global gradient norm itself: the optimisers do not.
    const optimizer = AdamW.restore(
      { lr: config.lr, weightDecay: config.weightDecay },
      actorParams,
      actorState(yield* decoding("optimizer", () => decodeAdamWState(optimizerBytes))),
    )
    const critic = AdamW.restore(
      { lr: config.criticLr, weightDecay: 0 },
      params.filter((p) => CRITIC_PARAMS.has(p.name)).map((p) => ({ ...p, decay: false })),
      yield* decoding("critic optimizer", () => decodeAdamWState(criticBytes)),
    )
    const trainer = new Trainer(model, config, optimizer, critic)
    trainer.step = manifest.step
    trainer.sftStepsDone = manifest.sftSteps ?? 0
    return { trainer, version: BigInt(manifest.version), lastBatchId: manifest.lastBatchId }
  })
