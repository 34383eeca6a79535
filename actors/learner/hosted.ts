import { readFileSync } from "node:fs"
import { Effect } from "effect"
import { loadBundledTokenizer } from "../../model/bundled/bundled.ts"
import { ChatTemplate, decodeWeights, loadTokenizerJson, TinyMoe } from "../../model/index.ts"
import {
  ActorConfigError,
  type FlagValues,
  flagInt,
  flagText,
  type HostedActor,
} from "../hosted.ts"
import { jobOf, POOL_FLAGS, poolOptions } from "../pool/index.ts"
import {
  ACTION_FORMAT_NAMES,
  ACTION_FORMATS,
  type ActionFormat,
  isActionFormatName,
} from "../sampler/index.ts"
import { runLearner } from "./actor.ts"
import { runLearnerPool } from "./job-pool.ts"
import { type AdvantageMode, DEFAULT_LEARNER_CONFIG, type LearnerConfig } from "./trainer.ts"
import { policyVocabularyFlag } from "./vocab-check.ts"

const ADVANTAGE_MODES: ReadonlyArray<AdvantageMode> = ["critic", "group", "group+critic"]

const number = (
  flags: FlagValues,
  name: string,
  env: string,
  fallback: number,
  check: (x: number) => boolean,
  what: string,
) => {
  const raw = flagText(flags, name, env)
  if (raw === undefined) return fallback
  const x = Number(raw)
  if (!Number.isFinite(x) || !check(x))
    throw new ActorConfigError(`--${name} must be ${what}, got ${JSON.stringify(raw)}`)
  return x
}

/** Learner-only pool flags (the buffer's pool takes the shared ones alone). */
const LEARNER_POOL_FLAGS = ["batch-wait-ms", "format", "default-policy-ref", "model-dir"] as const

/** The golden transcripts' action format: the samplers' (same flag, same variable). */
const goldenFormat = (flags: FlagValues): ActionFormat => {
  const name = flagText(flags, "format", "T1_ACTION_FORMAT") ?? "shell-block"
  if (!isActionFormatName(name))
    throw new ActorConfigError(
      `--format must be ${ACTION_FORMAT_NAMES.join(", ")}, got ${JSON.stringify(name)}`,
    )
  return ACTION_FORMATS[name]
}

const defaultPolicyRef = (flags: FlagValues) => {
  const ref = flagText(flags, "default-policy-ref", "T1_DEFAULT_POLICY_REF")
  return ref === undefined ? {} : { defaultPolicyRef: ref }
}

export const learnerFlagsHelp = `Without --job the learner is a pool member: it claims train jobs from the job store (one
learner per job, lease in KV <prefix>-learner-leases) and takes its hyperparameters, starting weights
(policy_ref) and step budget from each job's spec; the per-job flags below then do not apply.
  --max-jobs N                 pool mode: jobs trained at once by this process (T1_MAX_JOBS; default 1)
  --lease-ttl-ms MS            pool mode: a job's lease lapses this long after the last heartbeat (default 15000)
  --checkpoint-every N         updates between checkpoints (default 10; also in pool mode)
  --batch-wait-ms MS           pool mode: how long an update waits for a full batch before it trains
                               on what the buffer has (T1_BATCH_WAIT_MS; default 2000)
  --format NAME                pool mode: action format of the SFT golden transcripts, the samplers'
                               own (T1_ACTION_FORMAT, as the sampler reads it; default shell-block)
  --model-dir DIR              pool mode: the samplers' engine model (T1_MODEL_DIR, as the sampler
                               reads it): a train job whose model vocabulary is smaller than this
                               model's (config.json vocab_size, else tokenizer.json) is refused
                               (FAILED, naming both) instead of training on none of its trajectories
  --default-policy-ref REF     pool mode: the starting weights of a job without policy_ref (a
                               policy_ref; T1_DEFAULT_POLICY_REF; default tinymoe:init)
With --job:
  --job ID                     train this job (T1_JOB)
  --weights FILE               starting weights when the job has no checkpoint (e.g. t1 train sft output); default: initialised from --seed
  --seed N                     initialisation seed without --weights (default 0)
  --batch-size N               trajectories per update (default 16)
  --max-staleness N            η: drop trajectories admitted more than N versions ago (default 2)
  --lr X                       actor learning rate (default ${DEFAULT_LEARNER_CONFIG.lr})
  --critic-lr X                critic (value head) learning rate (default: --lr)
  --critic-warmup-steps N      first N updates train only the critic (default ${DEFAULT_LEARNER_CONFIG.criticWarmupSteps})
  --ppo-epochs N               passes over each batch (default ${DEFAULT_LEARNER_CONFIG.ppoEpochs})
  --minibatches N              optimiser steps per pass (default ${DEFAULT_LEARNER_CONFIG.minibatches})
  --advantage-mode MODE        critic, group (RLOO) or group+critic (default ${DEFAULT_LEARNER_CONFIG.advantageMode})
  --normalize-advantages on|off  whiten advantages over the batch (default on)
  --publish-every N            publish weights every N updates (default 1)
  --actor-lambda X             GAE λ of the policy (default ${DEFAULT_LEARNER_CONFIG.actorLambda})
  --critic-lambda X            GAE λ of the critic's targets (default ${DEFAULT_LEARNER_CONFIG.criticLambda})
  --tis-threshold X            truncated importance sampling cap; 0 disables (default ${DEFAULT_LEARNER_CONFIG.tisThreshold})
  --temperature X              the samplers' temperature (default 1)
  --r3 on|off                  replay the sampler's routing (default on)
  --tito on|off                train on the sampled ids (default on); off re-tokenises the conversation text (ablation)
  --tokenizer FILE             tokenizer.json for --tito off (default: the bundled one)
  --max-steps N                stop after N updates (default: run forever)`

export const learnerActor: HostedActor = {
  summary:
    "PPO actor-critic on batches from the buffer (R3, TITO, TIS), publishes weights, checkpoints and resumes",
  flags: Object.fromEntries(
    [
      "job",
      "weights",
      "seed",
      "batch-size",
      "max-staleness",
      "lr",
      "critic-lr",
      "critic-warmup-steps",
      "ppo-epochs",
      "minibatches",
      "advantage-mode",
      "normalize-advantages",
      "publish-every",
      "actor-lambda",
      "critic-lambda",
      "tis-threshold",
      "temperature",
      "r3",
      "tito",
      "tokenizer",
      "checkpoint-every",
      "max-steps",
      ...Object.keys(POOL_FLAGS),
      ...LEARNER_POOL_FLAGS,
    ].map((f) => [f, { type: "string" as const }]),
  ),
  flagsHelp: learnerFlagsHelp,
  run: ({ subjects }, flags) => {
    const jobId = jobOf(flags)
    if (jobId === undefined)
      return runLearnerPool({
        subjects,
        ...poolOptions(flags, 1),
        checkpointEvery: flagInt(flags, "checkpoint-every", "T1_CHECKPOINT_EVERY", 10, 1),
        batchWaitMs: flagInt(flags, "batch-wait-ms", "T1_BATCH_WAIT_MS", 2000, 0),
        format: goldenFormat(flags),
        ...policyVocabularyFlag(flags),
        ...defaultPolicyRef(flags),
      }).pipe(Effect.mapError((e) => ({ message: e.message })))
    const r3 = flagText(flags, "r3", "T1_R3") ?? "on"
    if (r3 !== "on" && r3 !== "off")
      throw new ActorConfigError(`--r3 must be on or off, got ${JSON.stringify(r3)}`)
    const tito = flagText(flags, "tito", "T1_TITO") ?? "on"
    if (tito !== "on" && tito !== "off")
      throw new ActorConfigError(`--tito must be on or off, got ${JSON.stringify(tito)}`)
    const tis = number(
      flags,
      "tis-threshold",
      "T1_TIS_THRESHOLD",
      DEFAULT_LEARNER_CONFIG.tisThreshold ?? 2,
      (x) => x >= 0,
      "a number ≥ 0",
    )
    const advantageMode = flagText(flags, "advantage-mode", "T1_ADVANTAGE_MODE") ?? "critic"
    if (!(ADVANTAGE_MODES as ReadonlyArray<string>).includes(advantageMode))
      throw new ActorConfigError(
        `--advantage-mode must be critic, group or group+critic, got ${JSON.stringify(advantageMode)}`,
      )
    const normalize = flagText(flags, "normalize-advantages", "T1_NORMALIZE_ADVANTAGES") ?? "on"
    if (normalize !== "on" && normalize !== "off")
      throw new ActorConfigError(
        `--normalize-advantages must be on or off, got ${JSON.stringify(normalize)}`,
      )
    const lr = number(
      flags,
      "lr",
      "T1_LR",
      DEFAULT_LEARNER_CONFIG.lr,
      (x) => x > 0 && x < 1,
      "in (0, 1)",
    )
    const config: LearnerConfig = {
      ...DEFAULT_LEARNER_CONFIG,
      lr,
      criticLr: number(flags, "critic-lr", "T1_CRITIC_LR", lr, (x) => x > 0 && x < 1, "in (0, 1)"),
      criticWarmupSteps: flagInt(
        flags,
        "critic-warmup-steps",
        "T1_CRITIC_WARMUP_STEPS",
        DEFAULT_LEARNER_CONFIG.criticWarmupSteps,
      ),
      ppoEpochs: flagInt(flags, "ppo-epochs", "T1_PPO_EPOCHS", DEFAULT_LEARNER_CONFIG.ppoEpochs, 1),
      minibatches: flagInt(
        flags,
        "minibatches",
        "T1_MINIBATCHES",
        DEFAULT_LEARNER_CONFIG.minibatches,
        1,
      ),
      advantageMode: advantageMode as AdvantageMode,
      normalizeAdvantages: normalize === "on",
      publishEverySteps: flagInt(flags, "publish-every", "T1_PUBLISH_EVERY", 1, 1),
      criticLambda: number(
        flags,
        "critic-lambda",
        "T1_CRITIC_LAMBDA",
        DEFAULT_LEARNER_CONFIG.criticLambda,
        (x) => x >= 0 && x <= 1,
        "in [0, 1]",
      ),
      actorLambda: number(
        flags,
        "actor-lambda",
        "T1_ACTOR_LAMBDA",
        DEFAULT_LEARNER_CONFIG.actorLambda,
        (x) => x >= 0 && x <= 1,
        "in [0, 1]",
      ),
      tisThreshold: tis === 0 ? undefined : tis,
      temperature: number(flags, "temperature", "T1_TEMPERATURE", 1, (x) => x > 0, "> 0"),
      replayRouting: r3 === "on",
      tito: tito === "on",
    }
    const tokenizerPath = flagText(flags, "tokenizer", "T1_TOKENIZER")
    const template =
      tito === "off"
        ? new ChatTemplate(
            tokenizerPath
              ? loadTokenizerJson(readFileSync(tokenizerPath, "utf8"))
              : loadBundledTokenizer(),
          )
        : undefined
    const weights = flagText(flags, "weights", "T1_WEIGHTS")
    let initial: TinyMoe
    try {
      initial = weights
        ? decodeWeights(readFileSync(weights)).model
        : TinyMoe.create({
            config: { vocabSize: loadBundledTokenizer().vocabSize },
            seed: flagInt(flags, "seed", "T1_SEED", 0),
          })
    } catch (e) {
      throw new ActorConfigError(
        `--weights ${weights}: ${e instanceof Error ? e.message : String(e)}`,
      )
    }
    const maxSteps = flagText(flags, "max-steps", "T1_MAX_STEPS")
    return runLearner({
      subjects,
      jobId,
      config,
      initial,
      ...(template ? { template } : {}),
      batchSize: flagInt(flags, "batch-size", "T1_BATCH_SIZE", 16, 1),
      maxStaleness: flagInt(flags, "max-staleness", "T1_MAX_STALENESS", 2),
      checkpointEvery: flagInt(flags, "checkpoint-every", "T1_CHECKPOINT_EVERY", 10, 1),
      ...(maxSteps ? { maxSteps: flagInt(flags, "max-steps", "T1_MAX_STEPS", 0, 1) } : {}),
    }).pipe(
      Effect.flatMap(() => Effect.never),
      Effect.mapError((e) => ({ message: e instanceof Error ? e.message : String(e) })),
    )
  },
}
