import { readFileSync } from "node:fs"
import { Effect, Layer } from "effect"
import { loadBundledTokenizer } from "../../model/bundled/bundled.ts"
import {
  type ChatFormat,
  ChatTemplate,
  decodeWeights,
  HfChatFormat,
  loadHfModelTokenizer,
  loadTokenizerJson,
  type MoeGeometry,
  readModelGeometry,
  TinyMoe,
  type Tokenizer,
} from "../../model/index.ts"
import { type KernelChoice, selectKernels } from "../../model/kernels/select.ts"
import { breakerMetrics } from "../../services/breaker/index.ts"
import { Bus, type BusShape } from "../../services/bus/index.ts"
import { jobStoreFor } from "../../services/jobs/index.ts"
import { Metrics, type MetricsShape } from "../../services/metrics/index.ts"
import { followWeights } from "../../services/weights/index.ts"
import { breakerFlags, breakerFlagsHelp, breakerOptionsOf } from "../breaker-flags.ts"
import {
  ActorConfigError,
  type FlagValues,
  flagInt,
  flagText,
  type HostedActor,
} from "../hosted.ts"
import { ACTION_FORMATS, type ActionFormatName, isActionFormatName } from "./actions/index.ts"
import { runSampler, type SamplerOptions } from "./actor.ts"
import { Rotation, runEngineBridge } from "./engine-bridge.ts"
import { PolicyBackend, type PolicyBackendShape } from "./policy/backend.ts"
import { embeddedPolicy } from "./policy/embedded.ts"
import { jobPolicies } from "./policy/job-policies.ts"
import { type Replica, replicatedBackend } from "./policy/replicas.ts"
import type { RoutingLayout } from "./policy/routing.ts"
import { sglangBackend } from "./policy/sglang.ts"
import { vllmBackend } from "./policy/vllm.ts"
import { sglangWeightSync, vllmWeightSync } from "./policy/weight-sync.ts"
import { trainBinding } from "./train-binding.ts"

export const samplerFlagsHelp = `With the embedded TinyMoE and neither --weights nor --job, each job samples with its own
weights: a train job's latest published version (followed as its learner announces new ones),
an eval or rollout job's policy_ref (tinymoe:init, tinymoe:seed:N, job:<id>, or an object in
the weights bucket). Policies idle for 10 minutes are dropped.
  --policy NAME                tinymoe (embedded, default), sglang or vllm (T1_POLICY)
  --weights FILE               one TinyMoE for every job (safetensors written by t1) (T1_WEIGHTS)
  --seed N                     with --job and no --weights: initialisation seed (default 0)
  --kernels NAME               TinyMoE kernels: auto (gpu.js where measured faster), reference, webasm, cpu (T1_KERNELS; default auto)
  --tokenizer FILE             tokenizer.json (Hugging Face format) laid out by the bundled chat template; default: the bundled tokenizer (T1_TOKENIZER)
  --model-dir DIR              with an engine: the model's tokenizer directory (tokenizer.json, tokenizer_config.json as its repository ships them); episodes are laid out by the model's own chat template and end turns at its eos_token (T1_MODEL_DIR)
  --format NAME                action format: shell-block (default for tinymoe), shell-block-short (the same actions, a ~25-token prompt), terminus-json (default for engines) or tool-call (the model's native tool calls: bash and finish tools through the chat template, observations as tool turns) (T1_ACTION_FORMAT)
  --engine-url URL[,URL...]    SGLang or vLLM server root, e.g. http://127.0.0.1:30000; several replicas of the same model comma-separated (an episode stays on one, new ones round-robin, each with a circuit breaker) (T1_ENGINE_URL)
  --engine-model NAME          vLLM served model name (T1_ENGINE_MODEL)
  --context-length N           the engine's context length, or TinyMoE's per-episode context (default 4096)
  --routing L,K,E|off          routed experts to request (R3): decoder layers, top-k, experts; default with --model-dir: its config.json's MoE geometry (dense layers' rows dropped); off: none (T1_ENGINE_ROUTING)
  --job ID                     take this job's episodes only (its own queue; other jobs' stay for other samplers), with a TinyMoE following its weight announcements, or with an engine, the job whose policy the replicas serve (T1_JOB)
  --checkpoint-dir DIR         with --policy sglang or vllm: the engine bridge writes each published version as a Hugging Face checkpoint under DIR/<job>/v<version>/ (a path every replica reads) and loads it into every replica (SGLang: pause, update_weights_from_disk, continue; vLLM, served with VLLM_SERVER_DEV_MODE=1: drain, pause, collective_rpc reload_weights, update_weight_version, resume); a replica is out of rotation while it loads and after a failed load, until a retry succeeds. With --job the replicas follow that job; without it, the first train job whose episode arrives, one at a time: another train job submitted while it runs is failed with FAILED_PRECONDITION (the replicas hold one policy), and the next one after it ends is followed (T1_CHECKPOINT_DIR)
${breakerFlagsHelp("an engine replica (its turns go to the others)")}`

const KERNELS = new Set(["auto", "reference", "webasm", "cpu"])

const tokenizerFrom = (flags: FlagValues): Tokenizer => {
  const path = flagText(flags, "tokenizer", "T1_TOKENIZER")
  if (!path) return loadBundledTokenizer()
  try {
    return loadTokenizerJson(readFileSync(path, "utf8"))
  } catch (e) {
    throw new ActorConfigError(`--tokenizer ${path}: ${e instanceof Error ? e.message : String(e)}`)
  }
}

/**
 * The chat format episodes are laid out in: the engine model's own tokenizer and chat template
 * (--model-dir, a Hugging Face tokenizer directory), else the bundled template over --tokenizer
 * or the bundled tokenizer (TinyMoE's).
 */
export const chatFormatFrom = (flags: FlagValues, policyName: string): ChatFormat => {
  const dir = flagText(flags, "model-dir", "T1_MODEL_DIR")
  if (dir === undefined) return new ChatTemplate(tokenizerFrom(flags))
  if (policyName === "tinymoe")
    throw new ActorConfigError(
      "--model-dir is the engine model's tokenizer (--policy sglang or vllm); the embedded TinyMoE reads the bundled one",
    )
  if (flagText(flags, "tokenizer", "T1_TOKENIZER") !== undefined)
    throw new ActorConfigError(
      "--model-dir and --tokenizer both name a tokenizer: --model-dir DIR reads DIR/tokenizer.json and DIR/tokenizer_config.json",
    )
  try {
    const chat = new HfChatFormat(loadHfModelTokenizer(dir))
    // Lay out a short conversation now: a template that raises, or that does not render content
    // verbatim, is refused at start-up rather than in the first episode.
    const probe = chat.conversation()
    probe.prompt("t1 start-up check", "list the files")
    probe.closeAssistant(0, chat.content("ls"))
    probe.observation(0, chat.content("README.md\n"), new TextEncoder().encode("README.md\n"))
    return chat
  } catch (e) {
    throw new ActorConfigError(`--model-dir ${dir}: ${e instanceof Error ? e.message : String(e)}`)
  }
}

/**
 * The routing shape requested from the engine (R3): --routing LAYERS,TOP_K,EXPERTS, or `off`;
 * by default the MoE geometry of --model-dir's config.json (a dense model, or no config.json:
 * no routing). Both given: they must agree, LAYERS counting the decoder layers or the MoE ones.
 */
export const routingLayout = (flags: FlagValues): RoutingLayout | undefined => {
  const raw = flagText(flags, "routing", "T1_ENGINE_ROUTING")
  if (raw === "off") return undefined
  const dir = flagText(flags, "model-dir", "T1_MODEL_DIR")
  let geometry: MoeGeometry | undefined
  if (dir !== undefined) {
    try {
      geometry = readModelGeometry(dir)
    } catch (e) {
      throw new ActorConfigError(
        `--model-dir ${dir}: ${e instanceof Error ? e.message : String(e)}`,
      )
    }
  }
  const fromModel = (g: MoeGeometry): RoutingLayout => ({
    layers: g.hiddenLayers,
    topK: g.topK,
    numExperts: g.numExperts,
    ...(g.moeLayers.length < g.hiddenLayers ? { moeLayers: g.moeLayers } : {}),
  })
  if (!raw) return geometry === undefined ? undefined : fromModel(geometry)
  const parts = raw.split(",").map(Number)
  if (parts.length !== 3 || parts.some((n) => !Number.isInteger(n) || n < 1)) {
    throw new ActorConfigError(
      `--routing must be LAYERS,TOP_K,EXPERTS (positive integers) or off, got ${JSON.stringify(raw)}`,
    )
  }
  const [layers = 1, topK = 1, numExperts = 1] = parts
  if (geometry === undefined) return { layers, topK, numExperts }
  const g = geometry
  if (
    (layers !== g.hiddenLayers && layers !== g.moeLayers.length) ||
    topK !== g.topK ||
    numExperts !== g.numExperts
  )
    throw new ActorConfigError(
      `--routing ${raw} does not match the model's geometry in ${dir}/config.json: ${g.hiddenLayers} decoder layers (${g.moeLayers.length} MoE), top-${g.topK} of ${g.numExperts} experts`,
    )
  return fromModel(g)
}

/** `t1 actor sampler`: runs episodes from the work queue with the configured policy. */
export const samplerActor: HostedActor = {
  summary:
    "runs episodes from <prefix>.episodes: policy turns, shell actions in sandboxes, verification, trajectories streamed (TITO, R3)",
  flags: {
    policy: { type: "string" },
    weights: { type: "string" },
    seed: { type: "string" },
    kernels: { type: "string" },
    tokenizer: { type: "string" },
    "model-dir": { type: "string" },
    format: { type: "string" },
    "engine-url": { type: "string" },
    "engine-model": { type: "string" },
    "context-length": { type: "string" },
    routing: { type: "string" },
    job: { type: "string" },
    "checkpoint-dir": { type: "string" },
    ...breakerFlags,
  },
  flagsHelp: samplerFlagsHelp,
  run: ({ subjects, concurrency, shutdownGraceMs }, flags) => {
    const policyName = flagText(flags, "policy", "T1_POLICY") ?? "tinymoe"
    if (!["tinymoe", "sglang", "vllm"].includes(policyName)) {
      throw new ActorConfigError(
        `--policy must be tinymoe, sglang or vllm, got ${JSON.stringify(policyName)}`,
      )
    }
    const formatName =
      flagText(flags, "format", "T1_ACTION_FORMAT") ??
      (policyName === "tinymoe" ? "shell-block" : "terminus-json")
    if (!isActionFormatName(formatName))
      throw new ActorConfigError(
        `--format must be ${Object.keys(ACTION_FORMATS).join(", ")}, got ${JSON.stringify(formatName)}`,
      )
    const format = ACTION_FORMATS[formatName as ActionFormatName]
    const template = chatFormatFrom(flags, policyName)
    const tokenizer = template.tokenizer
    const contextLength = flagInt(flags, "context-length", "T1_CONTEXT_LENGTH", 4096, 16)
    const breaker = breakerOptionsOf(flags)
    const breakerSet = Object.keys(breakerFlags).find((f) => flags[f] !== undefined)
    if (breakerSet !== undefined && policyName === "tinymoe")
      throw new ActorConfigError(
        `--${breakerSet} applies to engine replicas (--policy sglang or vllm); the embedded TinyMoE has none`,
      )
    const engineUrls = (flagText(flags, "engine-url", "T1_ENGINE_URL") ?? "")
      .split(",")
      .map((u) => u.trim())
      .filter((u) => u !== "")
    const checkpointDir = flagText(flags, "checkpoint-dir", "T1_CHECKPOINT_DIR")
    const job = flagText(flags, "job", "T1_JOB")
    if (checkpointDir !== undefined && policyName === "tinymoe")
      throw new ActorConfigError(
        "--checkpoint-dir applies to engine replicas (--policy sglang or vllm); the embedded TinyMoE follows the job's weights itself",
      )
    // Replicas loading new weights (or whose load failed) take no turns.
    const rotation = new Rotation()
    const engine = (metrics: MetricsShape): PolicyBackendShape => {
      const urls = engineUrls
      if (urls.length === 0)
        throw new ActorConfigError(`--engine-url is required with --policy ${policyName}`)
      const routing = routingLayout(flags)
      const model = flagText(flags, "engine-model", "T1_ENGINE_MODEL")
      if (policyName === "vllm" && !model)
        throw new ActorConfigError("--engine-model is required with --policy vllm")
      const bridged = checkpointDir !== undefined
      const replica = (baseUrl: string): Replica => ({
        name: baseUrl,
        backend:
          policyName === "sglang"
            ? sglangBackend({
                baseUrl,
                contextLength,
                ...(routing ? { routing } : {}),
                // A turn answered from launch weights after a load: the engine restarted.
                ...(bridged
                  ? {
                      policyVersion: () => rotation.versions.get(baseUrl) ?? 0n,
                      confirmWeights: {
                        loaded: () => rotation.versions.get(baseUrl),
                        onMismatch: () => rotation.stale(baseUrl),
                      },
                    }
                  : {}),
              })
            : vllmBackend({
                baseUrl,
                model: model ?? "",
                contextLength,
                ...(routing ? { routing } : {}),
                // vLLM's answers name no weights: a turn carries the version the bridge loaded
                // into its replica, confirmed by the engine after the turn.
                ...(bridged
                  ? {
                      policyVersion: () => rotation.versions.get(baseUrl) ?? 0n,
                      confirmWeights: { onMismatch: () => rotation.stale(baseUrl) },
                    }
                  : {}),
              }),
      })
      return replicatedBackend(urls.map(replica), {
        breaker,
        metrics: breakerMetrics(metrics),
        ...(bridged ? { inRotation: rotation.isIn, turns: rotation } : {}),
      })
    }
    const kernelsName = flagText(flags, "kernels", "T1_KERNELS") ?? "auto"
    if (!KERNELS.has(kernelsName))
      throw new ActorConfigError(
        `--kernels must be auto, reference, webasm or cpu, got ${JSON.stringify(kernelsName)}`,
      )
    const weightsPath = flagText(flags, "weights", "T1_WEIGHTS")
    const seed = flagInt(flags, "seed", "T1_SEED", 0)
    const tinymoe = () => {
      const kernels = selectKernels(kernelsName as KernelChoice)
      if (weightsPath) {
        let bytes: Uint8Array
        try {
          bytes = readFileSync(weightsPath)
        } catch (e) {
          throw new ActorConfigError(
            `--weights ${weightsPath}: ${e instanceof Error ? e.message : String(e)}`,
          )
        }
        const decoded = decodeWeights(bytes, "f32", kernels)
        return { model: decoded.model, version: decoded.version ?? 0n }
      }
      return {
        model: TinyMoe.create({ config: { vocabSize: tokenizer.vocabSize }, seed, kernels }),
        version: 0n,
      }
    }
    // One policy for every episode (fixed weights, a followed job, or engine replicas), scoped to
    // the actor's life; without weights or a job, the embedded TinyMoE is built per job instead.
    const policyLayer = Layer.effect(
      PolicyBackend,
      Effect.gen(function* () {
        if (policyName !== "tinymoe") {
          const backend = engine(yield* Metrics)
          if (checkpointDir !== undefined && job !== undefined)
            yield* Effect.forkScoped(bridge(yield* Bus, checkpointDir, job))
          return backend
        }
        const { model, version } = tinymoe()
        if (model.config.vocabSize < tokenizer.vocabSize) {
          throw new ActorConfigError(
            `the weights' vocabulary (${model.config.vocabSize}) is smaller than the tokenizer's (${tokenizer.vocabSize})`,
          )
        }
        const embedded = yield* embeddedPolicy(model, version, { contextLength })
        if (job)
          yield* followWeights(
            yield* Bus,
            subjects,
            job,
            embedded,
            selectKernels(kernelsName as KernelChoice),
          )
        return embedded
      }),
    )
    const bridge = (bus: BusShape, dir: string, followed: string) =>
      runEngineBridge({
        bus,
        subjects,
        job: followed,
        checkpointDir: dir,
        replicas: engineUrls.map((baseUrl) =>
          policyName === "sglang" ? sglangWeightSync({ baseUrl }) : vllmWeightSync({ baseUrl }),
        ),
        rotation,
      })
    // Without --job, the replicas follow one train job at a time (train-binding.ts).
    const binding = Effect.gen(function* () {
      if (policyName === "tinymoe" || checkpointDir === undefined || job !== undefined)
        return undefined
      const bus = yield* Bus
      const store = yield* jobStoreFor(bus, subjects)
      return yield* trainBinding({
        store,
        replicas: engineUrls,
        follow: (followed) =>
          Effect.andThen(
            // The versions loaded for the previous job say nothing about this one's.
            Effect.sync(() => rotation.versions.clear()),
            bridge(bus, checkpointDir, followed),
          ),
      })
    })
    const sampler = (policy: SamplerOptions["policy"]) =>
      Effect.flatMap(binding, (bound) =>
        runSampler({
          subjects,
          policy,
          template,
          format,
          concurrency,
          shutdownGraceMs,
          // A sampler given a job takes that job's episodes only (its own queue).
          ...(job === undefined ? {} : { job }),
          ...(bound === undefined ? {} : { admit: bound.admit }),
        }),
      )
    return Effect.scoped(
      Effect.gen(function* () {
        if (policyName === "tinymoe" && !weightsPath && !job) {
          const policies = yield* jobPolicies({
            bus: yield* Bus,
            subjects,
            vocabSize: tokenizer.vocabSize,
            contextLength,
            kernels: selectKernels(kernelsName as KernelChoice),
          })
          return yield* sampler(policies.forItem)
        }
        return yield* Effect.gen(function* () {
          return yield* sampler(yield* PolicyBackend)
        }).pipe(Effect.provide(policyLayer))
      }),
    ).pipe(Effect.mapError((e) => ({ message: e instanceof Error ? e.message : String(e) })))
  },
}
