/**
 * A Docker engine that fails every container create, for fault tests: an HTTP server on a unix
 * socket in front of the real engine that forwards every request (ping, image inspect, list,
 * remove) except `POST /containers/create`, which it answers 500 "no space left on device" as
 * an engine whose disk is full does. Point a sandbox host's DOCKER_HOST at `dockerHost`.
 */

import { mkdtempSync, rmSync } from "node:fs"
import { createServer, request } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"

export interface FailingEngine {
  readonly dockerHost: string
  /** Creates refused so far. */
  readonly refused: () => number
  close(): Promise<void>
}

const upstreamSocket = () => {
  const host = process.env.DOCKER_HOST ?? "unix:///var/run/docker.sock"
  if (!host.startsWith("unix://"))
    throw new Error(`failing engine: DOCKER_HOST ${host} is not a unix socket`)
  return host.slice("unix://".length)
}

export const startFailingEngine = async (): Promise<FailingEngine> => {
  const upstream = upstreamSocket()
  const dir = mkdtempSync(join(tmpdir(), "t1-failing-engine-"))
  const socketPath = join(dir, "docker.sock")
  let refused = 0
  const server = createServer((req, res) => {
    if (req.method === "POST" && /\/containers\/create(\?|$)/.test(req.url ?? "")) {
      refused++
      req.resume()
      res.writeHead(500, { "content-type": "application/json" })
      res.end(JSON.stringify({ message: "no space left on device" }))
      return
    }
    const forward = request(
      { socketPath: upstream, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers)
        answer.pipe(res)
      },
    )
    forward.on("error", (e) => {
      res.writeHead(502, { "content-type": "application/json" })
      res.end(JSON.stringify({ message: `failing engine: upstream: ${e.message}` }))
    })
    req.pipe(forward)
  })
  await new Promise<void>((resolve) => server.listen(socketPath, resolve))
  return {
    dockerHost: `unix://${socketPath}`,
    refused: () => refused,
    close: async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()))
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
