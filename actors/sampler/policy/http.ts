import { Duration, Effect } from "effect"
import { PolicyError } from "./backend.ts"
import { isRecord } from "./fields.ts"

export type Fetch = typeof globalThis.fetch

export interface JsonPost {
  /** Backend name, for PolicyError.backend and messages. */
  readonly backend: string
  readonly url: string
  /** POST (the default) sends `body` as JSON; GET sends none. */
  readonly method?: "POST" | "GET"
  readonly body?: unknown
  readonly headers?: Readonly<Record<string, string>>
  /** Wall-clock limit for the whole exchange (connect, generation, body); none when unset. */
  readonly timeoutMs?: number
  readonly fetch?: Fetch
}

/**
 * POSTs `body` as JSON (or GETs) and succeeds with the parsed JSON of a 2xx answer, `null` for a
 * 2xx with an empty body (vLLM's collective_rpc answers so when its methods return nothing). Never retries: every
 * failure is a PolicyError whose `retryable` tells the sampler whether trying the turn again can
 * help — transport failures, timeouts, 408, 429 and 5xx can; other statuses and answers that are
 * not JSON cannot. Interrupting the effect aborts the request.
 */
export const postJson = (post: JsonPost): Effect.Effect<unknown, PolicyError> => {
  const exchange = Effect.tryPromise({
    try: (signal) => send(post, signal),
    catch: (cause) => transportError(post, cause),
  }).pipe(Effect.flatMap((answer) => decodeAnswer(post, answer)))
  const limit = post.timeoutMs
  if (limit === undefined) return exchange
  return exchange.pipe(
    Effect.timeoutOrElse({
      duration: Duration.millis(limit),
      orElse: () =>
        Effect.fail(
          new PolicyError({
            backend: post.backend,
            message: `${post.backend}: ${verb(post)} ${post.url} timed out after ${limit} ms`,
            retryable: true,
          }),
        ),
    }),
  )
}

const verb = (post: JsonPost) => post.method ?? "POST"

interface Answer {
  readonly status: number
  readonly text: string
}

const send = async (post: JsonPost, signal: AbortSignal): Promise<Answer> => {
  const fetch = post.fetch ?? globalThis.fetch
  const response = await fetch(
    post.url,
    verb(post) === "GET"
      ? { method: "GET", headers: { accept: "application/json", ...post.headers }, signal }
      : {
          method: "POST",
          headers: {
            "content-type": "application/json",
            accept: "application/json",
            ...post.headers,
          },
          body: JSON.stringify(post.body ?? {}),
          signal,
        },
  )
  return { status: response.status, text: await response.text() }
}

const decodeAnswer = (post: JsonPost, answer: Answer): Effect.Effect<unknown, PolicyError> => {
  const { status, text } = answer
  if (status >= 200 && status < 300) {
    if (text.trim() === "") return Effect.succeed(null)
    try {
      return Effect.succeed(JSON.parse(text))
    } catch {
      return Effect.fail(
        new PolicyError({
          backend: post.backend,
          message: `${post.backend}: ${verb(post)} ${post.url} answered ${status} with a body that is not JSON: ${excerpt(text)}`,
          retryable: false,
        }),
      )
    }
  }
  return Effect.fail(
    new PolicyError({
      backend: post.backend,
      message: `${post.backend}: ${verb(post)} ${post.url} answered ${status}: ${errorMessage(text)}`,
      retryable: isTransientStatus(status),
      status,
    }),
  )
}

/** Overload, restart, gateway trouble: the same request may succeed later. */
export const isTransientStatus = (status: number): boolean =>
  status === 408 || status === 429 || status >= 500

/**
 * The server's own explanation from an error body. vLLM answers `{"error": {"message"}}` (older
 * releases `{"object": "error", "message"}`), SGLang `{"error": {"message"}}` or `{"message"}`,
 * FastAPI validation `{"detail": "..." | [{"loc", "msg"}]}`; anything else is quoted as text.
 */
export const errorMessage = (text: string): string => {
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    return excerpt(text)
  }
  if (!isRecord(body)) return excerpt(text)
  const error = body.error
  if (isRecord(error) && typeof error.message === "string") return error.message
  if (typeof error === "string") return error
  if (typeof body.message === "string") return body.message
  const detail = body.detail
  if (typeof detail === "string") return detail
  if (Array.isArray(detail)) {
    const parts = detail.map((item) => {
      if (!isRecord(item)) return JSON.stringify(item)
      const where = Array.isArray(item.loc) ? `${item.loc.join(".")}: ` : ""
      return `${where}${typeof item.msg === "string" ? item.msg : JSON.stringify(item)}`
    })
    if (parts.length > 0) return parts.join("; ")
  }
  return excerpt(text)
}

const excerpt = (text: string): string => {
  const flat = text.trim()
  if (flat === "") return "(empty body)"
  return flat.length > 300 ? `${flat.slice(0, 300)}…` : flat
}

/** Node's fetch hides the socket error under `cause` (an AggregateError when several addresses were tried). */
const errorCodes = (error: unknown, depth = 0): ReadonlyArray<string> => {
  if (!isRecord(error) || depth > 4) return []
  const own = typeof error.code === "string" ? [error.code] : []
  const nested = Array.isArray(error.errors)
    ? error.errors.flatMap((inner: unknown) => errorCodes(inner, depth + 1))
    : []
  return [...own, ...nested, ...errorCodes(error.cause, depth + 1)]
}

/** A URL or request that can never be sent is a configuration error; anything else on the wire may pass. */
const permanentCodes = new Set(["ERR_INVALID_URL", "ERR_INVALID_ARG_TYPE", "ERR_INVALID_ARG_VALUE"])

const transportError = (post: JsonPost, cause: unknown): PolicyError => {
  const codes = errorCodes(cause)
  const reason =
    codes[0] ?? (cause instanceof Error ? `${cause.name}: ${cause.message}` : String(cause))
  return new PolicyError({
    backend: post.backend,
    message: `${post.backend}: ${verb(post)} ${post.url} failed: ${reason}`,
    retryable: !codes.some((code) => permanentCodes.has(code)),
  })
}
