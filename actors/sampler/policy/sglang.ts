/**
 * SGLang's native `POST /generate`, token ids in and out.
 *
 * Shapes as read in sgl-project/sglang:
 * - request: `python/sglang/srt/managers/io_struct.py` (GenerateReqInput: `input_ids`,
 *   `sampling_params`, `return_logprob`, `logprob_start_len` = -1 for output tokens only,
 *   `return_routed_experts`, `routed_experts_start_len` "response covers
 *   [routed_experts_start_len, seqlen - 1)") and `python/sglang/srt/sampling/sampling_params.py`
 *   (`max_new_tokens`, `stop_token_ids`, `temperature`, `top_p`, `top_k` (-1 = all),
 *   `sampling_seed`, `skip_special_tokens`, `no_stop_trim`), documented in
 *   `docs/basic_usage/sampling_params.md`;
 * - answer: `python/sglang/srt/managers/tokenizer_manager.py` (`{"text", "output_ids",
 *   "meta_info": {"id", "finish_reason", "prompt_tokens", "completion_tokens", "weight_version",
 *   "weight_versions", "output_token_logprobs": [(logprob, token_id, None), ...],
 *   "routed_experts"}}`), `python/sglang/srt/utils/weight_versions.py` (`weight_versions`: the
 *   runs of output tokens each weight version generated, `[{"version", "start", "end"}]`, in
 *   order; `weight_version` is the last run's, the newest) and
 *   `python/sglang/srt/managers/schedule_batch.py` (finish_reason `{"type": "stop", "matched"}`,
 *   `{"type": "length", "length"}`, `{"type": "abort", "message", "status_code"}`);
 * - routing: `python/sglang/srt/layers/moe/routed_experts_capturer.py` (rows of the first
 *   `seqlen - 1` positions, `[positions, num_hidden_layers, num_experts_per_tok]`, int32) and its
 *   wire helper (base64 of the raw little-endian array; `meta_info.routed_experts_dtype` names the
 *   dtype when it is not int32: "uint8" | "uint16").
 *
 * Log-probs: SGLang reports them after temperature and before top-p/top-k filtering, which is
 * the behaviour log-prob GenerateResult asks for.
 */

import {
  type FinishReason,
  type GenerateRequest,
  type GenerateResult,
  type PolicyBackendShape,
  PolicyError,
  type RoutingRows,
} from "./backend.ts"
import { engineBackend } from "./engine.ts"
import {
  asArray,
  asCount,
  asNumber,
  asRecord,
  asString,
  asTokenId,
  asTokenIds,
  child,
  ShapeError,
} from "./fields.ts"
import { isTransientStatus } from "./http.ts"
import {
  decodeBase64,
  type IntDtype,
  type RoutingLayout,
  readLittleEndian,
  routingRows,
  rowsStart,
} from "./routing.ts"
import { type EngineOptions, lengthFinish } from "./turn.ts"

export interface SglangOptions extends EngineOptions {
  /**
   * With an engine bridge: the version the bridge loaded into this replica (undefined before its
   * first load). An answer naming weights that are not a job version (the launch weights,
   * "default") after a load means the engine restarted: the turn fails (retryable, it is sampled
   * again elsewhere or after the reload) and `onMismatch` tells the bridge to load it again. An
   * answer without `weight_versions` is also held to the version loaded when the turn was sent,
   * so a turn the engine resumed on newer weights never carries only the newer number.
   */
  readonly confirmWeights?: {
    readonly loaded: () => bigint | undefined
    readonly onMismatch: (reported: string) => void
  }
}

const NAME = "sglang"

export const sglangBackend = (options: SglangOptions): PolicyBackendShape =>
  engineBackend(options, {
    name: NAME,
    path: "/generate",
    body: (request, maxNewTokens, routingFrom) =>
      requestBody(request, maxNewTokens, options.routing !== undefined, routingFrom),
    read: (answer, request, routingFrom, fallbackVersion) =>
      readAnswer(answer, request, options, routingFrom, fallbackVersion),
  })

const requestBody = (
  request: GenerateRequest,
  maxNewTokens: number,
  withRouting: boolean,
  routingFrom: number,
): Record<string, unknown> => {
  const { sampling } = request
  return {
    input_ids: Array.from(request.ids),
    sampling_params: {
      temperature: sampling.temperature,
      top_p: sampling.topP,
      top_k: sampling.topK ?? -1,
      // Explicit, so the server's --sampling-defaults (generation_config.json) cannot change the policy.
      min_p: 0,
      repetition_penalty: 1,
      frequency_penalty: 0,
      presence_penalty: 0,
      max_new_tokens: maxNewTokens,
      stop_token_ids: [...sampling.stopTokenIds],
      ...(sampling.seed === undefined ? {} : { sampling_seed: sampling.seed }),
      skip_special_tokens: false,
      no_stop_trim: true,
    },
    return_logprob: true,
    logprob_start_len: -1,
    ...(withRouting
      ? {
          return_routed_experts: true,
          ...(routingFrom > 0 ? { routed_experts_start_len: routingFrom } : {}),
        }
      : {}),
    stream: false,
  }
}

const readAnswer = (
  answer: unknown,
  request: GenerateRequest,
  options: SglangOptions,
  routingFrom: number,
  fallbackVersion: bigint,
): GenerateResult => {
  const body = asRecord(answer, "")
  const meta = asRecord(body.meta_info, "meta_info")
  const finishReason = readFinish(meta, request.ids.length, options.contextLength)

  const tokens = asTokenIds(body.output_ids, "output_ids")
  const logprobs = readLogprobs(meta, tokens)
  const promptLength = request.ids.length
  if (meta.prompt_tokens !== undefined) {
    const counted = asCount(meta.prompt_tokens, "meta_info.prompt_tokens")
    if (counted !== promptLength)
      throw new ShapeError(
        "meta_info.prompt_tokens",
        `the engine saw ${counted} prompt tokens, ${promptLength} were sent`,
      )
  }
  if (meta.completion_tokens !== undefined) {
    const counted = asCount(meta.completion_tokens, "meta_info.completion_tokens")
    if (counted !== tokens.length)
      throw new ShapeError(
        "meta_info.completion_tokens",
        `${counted} but output_ids holds ${tokens.length}`,
      )
  }

  const routing =
    options.routing === undefined
      ? undefined
      : readRouting(meta, options.routing, promptLength + tokens.length, routingFrom)
  const finish: FinishReason =
    finishReason === "length"
      ? lengthFinish(promptLength, tokens.length, options.contextLength)
      : finishReason
  return {
    tokens,
    logprobs,
    ...(routing === undefined ? {} : { routing }),
    finishReason: finish,
    policyVersion: turnVersion(meta, tokens.length, options, fallbackVersion),
  }
}

/**
 * The oldest weights that generated any token of the turn: a turn that was retracted by a pause
 * and resumed after a load has runs under two versions, and its tokens are only as fresh as the
 * oldest. Labels that are not integers are the launch weights (the fallback version), unless a
 * bridge has loaded a version since: then the engine restarted and the turn is refused.
 */
const turnVersion = (
  meta: Readonly<Record<string, unknown>>,
  generated: number,
  options: SglangOptions,
  fallbackVersion: bigint,
): bigint => {
  const spans =
    meta.weight_versions === undefined || meta.weight_versions === null
      ? undefined
      : readSpans(meta.weight_versions, generated)
  const labels =
    spans ??
    (meta.weight_version === undefined || meta.weight_version === null
      ? []
      : [String(meta.weight_version)])
  if (labels.length === 0) return fallbackVersion
  const check = options.confirmWeights
  const loaded = check?.loaded()
  let oldest: bigint | undefined
  for (const label of labels) {
    let v = engineVersion(label)
    if (v === undefined) {
      if (check !== undefined && loaded !== undefined) {
        // Only an engine that still holds other weights needs a reload; a turn whose last run
        // is a job version was caught by a reload that already happened.
        const newest = labels[labels.length - 1] as string
        if (engineVersion(newest) === undefined) check.onMismatch(newest)
        throw new PolicyError({
          backend: NAME,
          message: `${NAME}: the engine generated with weights ${JSON.stringify(label)} where v${loaded} was loaded (the engine restarted?); the turn is sampled again once the replica is reloaded`,
          retryable: true,
        })
      }
      v = fallbackVersion
    }
    if (oldest === undefined || v < oldest) oldest = v
  }
  const version = oldest ?? fallbackVersion
  // Without the per-token history, the version loaded when the turn was sent bounds it.
  if (spans === undefined && check !== undefined && fallbackVersion < version)
    return fallbackVersion
  return version
}

/** The versions of the runs that hold output tokens (the only run when there are none). */
const readSpans = (value: unknown, generated: number): ReadonlyArray<string> => {
  const path = "meta_info.weight_versions"
  const items = asArray(value, path)
  const labels: string[] = []
  let last: string | undefined
  let covered = 0
  items.forEach((item, i) => {
    const span = asRecord(item, child(path, i))
    const label = String(span.version)
    const start = asCount(span.start, child(child(path, i), "start"))
    const end = asCount(span.end, child(child(path, i), "end"))
    if (end < start || start !== covered)
      throw new ShapeError(child(path, i), `run [${start}, ${end}) does not follow [0, ${covered})`)
    covered = end
    last = label
    if (end > start) labels.push(label)
  })
  if (covered !== generated)
    throw new ShapeError(path, `the runs cover ${covered} tokens, output_ids holds ${generated}`)
  if (labels.length === 0 && last !== undefined) labels.push(last)
  return labels
}

/** "stop" or "length"; an aborted request fails the turn (retryable unless SGLang blamed the request). */
const readFinish = (
  meta: Readonly<Record<string, unknown>>,
  promptLength: number,
  contextLength: number,
): "stop_token" | "length" => {
  const path = "meta_info.finish_reason"
  const finish = asRecord(meta.finish_reason, path)
  const type = asString(finish.type, child(path, "type"))
  if (type === "stop") return "stop_token"
  if (type === "length") return "length"
  if (type === "abort") {
    const status = typeof finish.status_code === "number" ? finish.status_code : undefined
    const reason =
      typeof finish.message === "string" && finish.message !== ""
        ? finish.message
        : "no reason given"
    throw new PolicyError({
      backend: NAME,
      message: `${NAME}: the engine aborted the request${status === undefined ? "" : ` (${status})`}: ${reason} (context ${promptLength} of ${contextLength} tokens)`,
      retryable: status === undefined || isTransientStatus(status),
    })
  }
  throw new ShapeError(
    child(path, "type"),
    `expected "stop", "length" or "abort", got ${JSON.stringify(type)}`,
  )
}

/** `output_token_logprobs[i] = [logprob, token_id, text|null]`, one per output id and in step with it. */
const readLogprobs = (
  meta: Readonly<Record<string, unknown>>,
  tokens: Uint32Array,
): Float32Array => {
  const path = "meta_info.output_token_logprobs"
  const entries = asArray(meta.output_token_logprobs, path)
  if (entries.length !== tokens.length)
    throw new ShapeError(path, `${entries.length} entries for ${tokens.length} output_ids`)
  const logprobs = new Float32Array(entries.length)
  for (let i = 0; i < entries.length; i++) {
    const entryPath = child(path, i)
    const entry = asArray(entries[i], entryPath)
    logprobs[i] = asNumber(entry[0], child(entryPath, 0))
    const id = asTokenId(entry[1], child(entryPath, 1))
    if (id !== tokens[i])
      throw new ShapeError(child(entryPath, 1), `token ${id} but output_ids[${i}] is ${tokens[i]}`)
  }
  return logprobs
}

const WIRE_DTYPES: Readonly<Record<string, IntDtype>> = {
  int32: "int32",
  uint16: "uint16",
  uint8: "uint8",
}

const readRouting = (
  meta: Readonly<Record<string, unknown>>,
  layout: RoutingLayout,
  seqLen: number,
  requestedFrom: number,
): RoutingRows => {
  const path = "meta_info.routed_experts"
  if (meta.routed_experts === undefined || meta.routed_experts === null)
    throw new ShapeError(
      path,
      "missing; start SGLang with --enable-return-routed-experts or drop the routing option",
    )
  const dtypeName =
    meta.routed_experts_dtype === undefined || meta.routed_experts_dtype === null
      ? "int32"
      : asString(meta.routed_experts_dtype, "meta_info.routed_experts_dtype").trim().toLowerCase()
  const dtype = WIRE_DTYPES[dtypeName]
  if (dtype === undefined)
    throw new ShapeError(
      "meta_info.routed_experts_dtype",
      `unsupported dtype ${JSON.stringify(dtypeName)}`,
    )
  const ids = readLittleEndian(decodeBase64(asString(meta.routed_experts, path), path), dtype, path)
  const perPosition = layout.layers * layout.topK
  if (ids.length % perPosition !== 0)
    throw new ShapeError(
      path,
      `${ids.length} expert ids do not split into positions of ${layout.layers} layers × ${layout.topK} experts`,
    )
  const positions = ids.length / perPosition
  const start = rowsStart(positions, seqLen, requestedFrom, path)
  return routingRows(ids, start, positions, layout, path)
}

/** SGLang's `--weight-version` / update_weights version, when it is a plain integer. */
const engineVersion = (value: unknown): bigint | undefined => {
  if (typeof value === "number" && Number.isSafeInteger(value) && value >= 0) return BigInt(value)
  if (typeof value === "string" && /^\d+$/.test(value.trim())) return BigInt(value.trim())
  return undefined
}
