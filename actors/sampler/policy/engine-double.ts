/**
 * Local HTTP doubles of inference engines for tests. The SGLang double lives in sglang-double.ts;
 * `vllmDouble` serves vLLM's `/v1/completions` with token prompts and its reload-from-disk
 * sequence (`/pause`, `/collective_rpc` `reload_weights`, `/update_weight_version`,
 * `GET /weight_info`, `/resume`); a request that arrives while it is paused waits for `/resume`.
 * What they generate is the test's script; every context and answer is recorded. Not used by
 * production code.
 */
import { existsSync } from "node:fs"
import { join } from "node:path"
import { Changes, type DoubleTurn, type GenerateCall, scriptedCall } from "./double-turn.ts"
import { BadRequest, expectField, type Received, type Reply } from "./test-server.ts"

export type { DoubleTurn, GenerateCall, VersionSpan } from "./double-turn.ts"
export { type SglangDouble, type SglangDoubleOptions, sglangDouble } from "./sglang-double.ts"

export interface VllmDouble {
  readonly handler: (request: Received) => Promise<Reply>
  /** Every /v1/completions answered, oldest first. */
  readonly calls: ReadonlyArray<GenerateCall>
  /** The weights the engine holds: the last checkpoint reloaded ("initial" before any). */
  weights: string
  /** What `GET /weight_info` reports (`null` until a version is set, as after a start). */
  weightVersion: string | null
  /**
   * Refit calls and generations as they were answered: "pause <mode>", "reload <path>",
   * "version <v>", "resume", "refused …", "hang …", "generate <weights>".
   */
  readonly log: string[]
  readonly refits: ReadonlyArray<string>
  /** Reloads to fail (HTTP 500, as a worker exception surfaces) before one loads. */
  failUpdates: number
  /** Reloads to leave unanswered (the bridge's call times out). */
  hangUpdates: number
  paused: boolean
  /** The engine restarted: its initial weights, no version, not paused. */
  restart(): void
}

export const vllmDouble = (
  model: string,
  turn: (inputIds: ReadonlyArray<number>) => DoubleTurn,
): VllmDouble => {
  const calls: GenerateCall[] = []
  const changes = new Changes()
  const refit = (request: Received): Reply | undefined => {
    const body = (request.body ?? {}) as Record<string, unknown>
    const [path, query = ""] = request.path.split("?")
    if (request.method === "GET" && path === "/weight_info")
      return { status: 200, body: { weight_version: double.weightVersion } }
    if (request.method !== "POST") return undefined
    switch (path) {
      case "/pause":
        double.paused = true
        double.log.push(`pause ${new URLSearchParams(query).get("mode") ?? "abort"}`)
        return { status: 200, body: { status: "paused" } }
      case "/resume":
        double.paused = false
        changes.notify()
        double.log.push("resume")
        return { status: 200, body: { status: "resumed" } }
      case "/update_weight_version": {
        if (typeof body.new_version !== "string")
          return {
            status: 422,
            body: { detail: [{ loc: ["body", "new_version"], msg: "Field required" }] },
          }
        double.weightVersion = body.new_version
        double.log.push(`version ${body.new_version}`)
        return { status: 200, body: { success: true, new_version: body.new_version } }
      }
      case "/collective_rpc": {
        if (body.method !== "reload_weights")
          return { status: 500, body: { error: `unknown method ${String(body.method)}` } }
        const kwargs = (body.kwargs ?? {}) as Record<string, unknown>
        const dir = String(kwargs.weights_path ?? "")
        if (kwargs.is_checkpoint_format !== true)
          return {
            status: 400,
            body: { detail: "the double reloads checkpoint-format weights only" },
          }
        if (double.hangUpdates > 0) {
          double.hangUpdates--
          double.log.push(`hang ${dir}`)
          return "hang"
        }
        if (double.failUpdates > 0) {
          double.failUpdates--
          double.log.push(`refused ${dir}`)
          return { status: 500, body: { error: "RuntimeError: CUDA out of memory" } }
        }
        if (
          !existsSync(join(dir, "config.json")) ||
          !existsSync(join(dir, "model.safetensors.index.json"))
        ) {
          double.log.push(`refused ${dir}`)
          return { status: 500, body: { error: `FileNotFoundError: no safetensors in ${dir}` } }
        }
        double.weights = dir
        double.log.push(`reload ${dir}`)
        // collective_rpc answers an empty 200 when every worker's method returned nothing.
        return { status: 200, body: "" }
      }
      default:
        return undefined
    }
  }
  const double: VllmDouble = {
    calls,
    weights: "initial",
    weightVersion: null,
    log: [],
    get refits() {
      return double.log.filter((l) => !l.startsWith("generate "))
    },
    failUpdates: 0,
    hangUpdates: 0,
    paused: false,
    restart() {
      double.weights = "initial"
      double.weightVersion = null
      double.paused = false
      changes.notify()
    },
    handler: async (request) => {
      const answered = refit(request)
      if (answered !== undefined) return answered
      if (request.method !== "POST" || request.path !== "/v1/completions")
        return { status: 404, body: { detail: "Not Found" } }
      // A paused vLLM holds new requests until /resume.
      await changes.until(() => !double.paused)
      try {
        const body = request.body as Record<string, unknown>
        expectField(body, "model", model)
        const ids = body.prompt
        if (!Array.isArray(ids) || !ids.every(Number.isInteger))
          throw new BadRequest("prompt must be token ids")
        expectField(body, "logprobs", 1)
        expectField(body, "return_tokens_as_token_ids", true)
        expectField(body, "skip_special_tokens", false)
        const maxNew = body.max_tokens
        if (typeof maxNew !== "number") throw new BadRequest("max_tokens must be a number")
        const call = scriptedCall(
          turn,
          ids as number[],
          maxNew,
          (body.stop_token_ids as number[] | undefined) ?? [],
        )
        const { outputIds, logprobs, last, finish } = call
        const stopped = finish === "stop"
        double.log.push(`generate ${double.weights}`)
        calls.push({ inputIds: call.inputIds, outputIds, logprobs, finish })
        return {
          status: 200,
          body: {
            id: `cmpl-${calls.length}`,
            object: "text_completion",
            model,
            choices: [
              {
                index: 0,
                text: "",
                logprobs: {
                  text_offset: outputIds.map((_, i) => i),
                  token_logprobs: logprobs,
                  tokens: outputIds.map((t) => `token_id:${t}`),
                  top_logprobs: outputIds.map((t, i) => ({ [`token_id:${t}`]: logprobs[i] })),
                },
                finish_reason: stopped ? "stop" : "length",
                stop_reason: stopped ? last : null,
                token_ids: outputIds,
                routed_experts: null,
              },
            ],
            usage: {
              prompt_tokens: ids.length,
              completion_tokens: outputIds.length,
              total_tokens: ids.length + outputIds.length,
            },
          },
        }
      } catch (error) {
        if (error instanceof BadRequest)
          return { status: 400, body: { error: { message: error.message } } }
        throw error
      }
    },
  }
  return double
}
