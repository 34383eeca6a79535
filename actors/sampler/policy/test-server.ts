/** A JSON HTTP server on 127.0.0.1 for the engine adapter tests; not used by production code. */
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"

export interface Received {
  readonly method: string
  readonly path: string
  readonly headers: Readonly<Record<string, string | string[] | undefined>>
  readonly body: unknown
}

/** What the server does with one request: answer (a string body is sent as is) or never answer. */
export type Reply = { readonly status: number; readonly body: unknown } | "hang"

/** A handler answers now or later (an engine double that generates or loads over time). */
export type Handler = (request: Received) => Reply | Promise<Reply>

export interface TestServer {
  readonly url: string
  /** Every request so far, oldest first. */
  readonly received: ReadonlyArray<Received>
  /** The JSON object body of request `index`; throws when there is none. */
  sent(index: number): Readonly<Record<string, unknown>>
  /** Replaces the handler; clears `received`. */
  reset(handler: Handler): void
  close(): Promise<void>
}

export const startTestServer = async (handler: Handler): Promise<TestServer> => {
  let handle = handler
  const received: Received[] = []
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8")
      let body: unknown
      try {
        body = text === "" ? undefined : JSON.parse(text)
      } catch {
        body = text
      }
      const request: Received = {
        method: req.method ?? "",
        path: req.url ?? "",
        headers: req.headers,
        body,
      }
      received.push(request)
      const answer = (reply: Reply) => {
        if (reply === "hang" || res.writableEnded || res.destroyed) return
        const payload = typeof reply.body === "string" ? reply.body : JSON.stringify(reply.body)
        res.writeHead(reply.status, { "content-type": "application/json" })
        res.end(payload)
      }
      Promise.resolve()
        .then(() => handle(request))
        .then(answer, (error: unknown) =>
          answer({ status: 500, body: { error: { message: String(error) } } }),
        )
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    sent(index) {
      const body = received[index]?.body
      if (typeof body !== "object" || body === null || Array.isArray(body))
        throw new Error(`request ${index} has no JSON object body`)
      return body as Readonly<Record<string, unknown>>
    },
    reset(next) {
      handle = next
      received.length = 0
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

/** A port that was just open on 127.0.0.1 and is now closed, so connecting to it is refused. */
export const closedPort = async (): Promise<number> => {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

/**
 * A deterministic fake continuation: each next token is the previous one plus 1, until a stop
 * id (kept) or the budget. Token i has log-prob -(i + 1) / 8, exact in float32.
 */
export const countUp = (
  ids: ReadonlyArray<number>,
  maxNew: number,
  stopIds: ReadonlyArray<number>,
): {
  readonly tokens: number[]
  readonly logprobs: number[]
  readonly stopped: number | undefined
} => {
  const tokens: number[] = []
  let last = ids[ids.length - 1] ?? 0
  while (tokens.length < maxNew) {
    last += 1
    tokens.push(last)
    if (stopIds.includes(last)) break
  }
  const stop = tokens[tokens.length - 1]
  return {
    tokens,
    logprobs: tokens.map((_, i) => -(i + 1) / 8),
    stopped: stop !== undefined && stopIds.includes(stop) ? stop : undefined,
  }
}

/** The fake engine's routing: expert of (position, layer, slot), row-major, below numExperts. */
export const fakeExperts = (
  fromPosition: number,
  toPosition: number,
  layers: number,
  topK: number,
  numExperts: number,
): number[] => {
  const ids: number[] = []
  for (let p = fromPosition; p < toPosition; p++)
    for (let l = 0; l < layers; l++)
      for (let k = 0; k < topK; k++) ids.push((p * 7 + l * 3 + k * 5) % numExperts)
  return ids
}

/** Checks a request field; a mismatch becomes the 400 the fake engine answers with. */
export class BadRequest extends Error {}

export const expectField = (
  body: Readonly<Record<string, unknown>>,
  key: string,
  expected: unknown,
): void => {
  const actual = JSON.stringify(body[key])
  if (actual !== JSON.stringify(expected))
    throw new BadRequest(`field ${key}: expected ${JSON.stringify(expected)}, got ${actual}`)
}
