/**
 * vLLM's OpenAI-compatible `POST /v1/completions` with the context as token ids.
 *
 * Shapes as read in vllm-project/vllm `vllm/entrypoints/openai/completion/protocol.py` and
 * `serving.py`: the request takes `prompt: list[int]`, `max_tokens`, `temperature`, `top_p`,
 * `top_k`, `seed`, `stop_token_ids`, `logprobs`, `skip_special_tokens`,
 * `include_stop_str_in_output`, `return_tokens_as_token_ids` ("tokens are represented as strings
 * of the form 'token_id:{token_id}'"), `return_token_ids` (adds `choices[i].token_ids`) and
 * `routed_experts_prompt_start` ("skip the first N prompt tokens from returned routed-expert
 * data"); each choice has `logprobs: {tokens, token_logprobs, top_logprobs, text_offset}`,
 * `finish_reason` ("stop" | "length" | "abort"), `token_ids` and `routed_experts`: "base64-encoded
 * .npy bytes ... shape (num_tokens - 1, num_layers, num_experts_per_tok) dtype
 * uint8/uint16/int32", null unless the server runs with `--enable-return-routed-experts`.
 * Releases without that field have no documented way to return routing through this endpoint;
 * leave `routing` unset for them and the turn carries no routing.
 *
 * Log-probs: vLLM's default `--logprobs-mode raw_logprobs` reports log-probs of the logits before
 * temperature. Serve with `--logprobs-mode processed_logprobs` for the behaviour log-prob; vLLM
 * documents processed values as "after applying all processors, including temperature and
 * top_k/top_p", so they match GenerateResult's definition exactly when topP = 1 and topK is unset.
 */

import { Effect } from "effect"
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
  asTokenIds,
  child,
  ShapeError,
} from "./fields.ts"
import { postJson } from "./http.ts"
import { parseNpy } from "./npy.ts"
import { decodeBase64, type RoutingLayout, routingRows, rowsStart } from "./routing.ts"
import { type EngineOptions, engineUrl, lengthFinish } from "./turn.ts"
import { vllmReportedVersion } from "./weight-sync.ts"

export interface VllmOptions extends EngineOptions {
  /** The served model name (`--served-model-name`, or the model path). */
  readonly model: string
  /**
   * With an engine bridge: after every turn, `GET /weight_info` must report the turn's
   * `policyVersion` (the version the bridge loaded; vLLM's answers name no weights). Otherwise the
   * engine restarted on other weights: the turn fails (retryable, it is sampled again elsewhere
   * or after a reload) and `onMismatch` tells the bridge to load the replica again.
   */
  readonly confirmWeights?: { readonly onMismatch: (reported: bigint) => void }
}

const NAME = "vllm"

export const vllmBackend = (options: VllmOptions): PolicyBackendShape =>
  engineBackend(options, {
    name: NAME,
    path: "/v1/completions",
    body: (request, maxNewTokens, routingFrom) =>
      requestBody(options.model, request, maxNewTokens, routingFrom),
    read: (answer, request, routingFrom, policyVersion) =>
      readAnswer(answer, request, options, routingFrom, policyVersion),
    ...(options.confirmWeights === undefined
      ? {}
      : { confirm: confirmWeights(options, options.confirmWeights.onMismatch) }),
  })

/** The turn's weights are still the engine's: `GET /weight_info` reports the turn's version. */
const confirmWeights =
  (options: VllmOptions, onMismatch: (reported: bigint) => void) => (result: GenerateResult) =>
    Effect.gen(function* () {
      const url = engineUrl(options, "/weight_info")
      const answer = yield* postJson({
        backend: NAME,
        url,
        method: "GET",
        timeoutMs: 30_000,
        ...(options.headers ? { headers: options.headers } : {}),
        ...(options.fetch ? { fetch: options.fetch } : {}),
      })
      const reported = vllmReportedVersion(answer)
      if (reported === result.policyVersion) return
      onMismatch(reported)
      return yield* new PolicyError({
        backend: NAME,
        message: `${NAME}: GET ${url} reports weights v${reported} where v${result.policyVersion} was loaded (the engine restarted?); the turn is sampled again once the replica is reloaded`,
        retryable: true,
      })
    })

const requestBody = (
  model: string,
  request: GenerateRequest,
  maxNewTokens: number,
  routingFrom: number,
): Record<string, unknown> => {
  const { sampling } = request
  return {
    model,
    prompt: Array.from(request.ids),
    max_tokens: maxNewTokens,
    temperature: sampling.temperature,
    top_p: sampling.topP,
    top_k: sampling.topK ?? -1,
    // Explicit, so the model's generation_config.json defaults cannot change the policy.
    min_p: 0,
    repetition_penalty: 1,
    frequency_penalty: 0,
    presence_penalty: 0,
    ...(sampling.seed === undefined ? {} : { seed: sampling.seed }),
    stop_token_ids: [...sampling.stopTokenIds],
    n: 1,
    stream: false,
    echo: false,
    logprobs: 1,
    return_tokens_as_token_ids: true,
    return_token_ids: true,
    skip_special_tokens: false,
    include_stop_str_in_output: true,
    ...(routingFrom > 0 ? { routed_experts_prompt_start: routingFrom } : {}),
  }
}

const readAnswer = (
  answer: unknown,
  request: GenerateRequest,
  options: VllmOptions,
  routingFrom: number,
  policyVersion: bigint,
): GenerateResult => {
  const body = asRecord(answer, "")
  const choices = asArray(body.choices, "choices")
  if (choices.length !== 1)
    throw new ShapeError("choices", `expected 1 choice, got ${choices.length}`)
  const choice = asRecord(choices[0], "choices[0]")
  const finish = readFinish(choice.finish_reason)

  const logprobsPath = "choices[0].logprobs"
  const logprobsField = asRecord(choice.logprobs, logprobsPath)
  const fromLogprobs = readTokenStrings(logprobsField.tokens, child(logprobsPath, "tokens"))
  const tokens =
    choice.token_ids === undefined || choice.token_ids === null
      ? fromLogprobs
      : asTokenIds(choice.token_ids, "choices[0].token_ids")
  if (tokens !== fromLogprobs) {
    if (tokens.length !== fromLogprobs.length)
      throw new ShapeError(
        "choices[0].token_ids",
        `${tokens.length} ids but logprobs.tokens holds ${fromLogprobs.length}`,
      )
    tokens.forEach((id, i) => {
      if (fromLogprobs[i] !== id)
        throw new ShapeError(
          child(child(logprobsPath, "tokens"), i),
          `token ${fromLogprobs[i]} but token_ids[${i}] is ${id}`,
        )
    })
  }
  const logprobs = readLogprobs(
    logprobsField.token_logprobs,
    child(logprobsPath, "token_logprobs"),
    tokens.length,
  )

  const promptLength = request.ids.length
  if (body.usage !== undefined && body.usage !== null) {
    const usage = asRecord(body.usage, "usage")
    if (usage.prompt_tokens !== undefined) {
      const counted = asCount(usage.prompt_tokens, "usage.prompt_tokens")
      if (counted !== promptLength)
        throw new ShapeError(
          "usage.prompt_tokens",
          `the engine saw ${counted} prompt tokens, ${promptLength} were sent`,
        )
    }
  }

  const routing =
    options.routing === undefined
      ? undefined
      : readRouting(
          choice.routed_experts,
          options.routing,
          promptLength + tokens.length,
          routingFrom,
        )
  const finishReason: FinishReason =
    finish === "length" ? lengthFinish(promptLength, tokens.length, options.contextLength) : finish
  return {
    tokens,
    logprobs,
    ...(routing === undefined ? {} : { routing }),
    finishReason,
    policyVersion,
  }
}

const readFinish = (value: unknown): "stop_token" | "length" => {
  const path = "choices[0].finish_reason"
  const reason = asString(value, path)
  if (reason === "stop") return "stop_token"
  if (reason === "length") return "length"
  if (reason === "abort")
    throw new PolicyError({
      backend: NAME,
      message: `${NAME}: the engine aborted the request`,
      retryable: true,
    })
  throw new ShapeError(path, `expected "stop", "length" or "abort", got ${JSON.stringify(reason)}`)
}

/** `return_tokens_as_token_ids` renders each generated token as "token_id:<n>". */
const readTokenStrings = (value: unknown, path: string): Uint32Array => {
  const items = asArray(value, path)
  const ids = new Uint32Array(items.length)
  for (let i = 0; i < items.length; i++) {
    const text = asString(items[i], child(path, i))
    const match = /^token_id:(\d+)$/.exec(text)
    const id = match?.[1] === undefined ? Number.NaN : Number(match[1])
    if (!(Number.isInteger(id) && id <= 0xffff_ffff))
      throw new ShapeError(
        child(path, i),
        `expected "token_id:<n>" (is return_tokens_as_token_ids honoured?), got ${JSON.stringify(text.slice(0, 40))}`,
      )
    ids[i] = id
  }
  return ids
}

const readLogprobs = (value: unknown, path: string, count: number): Float32Array => {
  const items = asArray(value, path)
  if (items.length !== count)
    throw new ShapeError(path, `${items.length} entries for ${count} tokens`)
  const logprobs = new Float32Array(count)
  for (let i = 0; i < count; i++) logprobs[i] = asNumber(items[i], child(path, i))
  return logprobs
}

const readRouting = (
  value: unknown,
  layout: RoutingLayout,
  seqLen: number,
  requestedFrom: number,
): RoutingRows => {
  const path = "choices[0].routed_experts"
  if (value === undefined || value === null)
    throw new ShapeError(
      path,
      "missing; start vLLM with --enable-return-routed-experts or drop the routing option",
    )
  const array = parseNpy(decodeBase64(asString(value, path), path), path)
  const [positions, layers, topK] = array.shape
  if (
    array.shape.length !== 3 ||
    positions === undefined ||
    layers !== layout.layers ||
    topK !== layout.topK
  )
    throw new ShapeError(
      path,
      `expected shape (positions, ${layout.layers}, ${layout.topK}), got (${array.shape.join(", ")})`,
    )
  const start = rowsStart(positions, seqLen, requestedFrom, path)
  return routingRows(array.values, start, positions, layout, path)
}
