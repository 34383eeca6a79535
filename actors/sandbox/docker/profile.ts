import { EventEmitter } from "node:events"
import { appendFileSync } from "node:fs"
import type Dockerode from "dockerode"

/**
 * Engine-call profiling for load runs: with T1_DOCKER_PROFILE=FILE every request a client makes
 * to the engine is appended to FILE as one JSON line, `{"at":ms,"ms":took,"op":"POST
 * /containers/:id/start","id":"<container>"}`, so that where a sandbox's time goes under load is
 * measured rather than guessed (test/load/profile.ts sums it). `ms` runs until the engine's
 * answer arrives (for an attached exec: until its stream is handed over, not until it ends).
 */
export const PROFILE_ENV = "T1_DOCKER_PROFILE"

interface DialOptions {
  readonly path?: string
  readonly method?: string
}

type Dial = (options: DialOptions, callback?: (...args: ReadonlyArray<unknown>) => void) => unknown

const ID = /^[0-9a-f]{12,64}$/

/** The request's route with ids folded: "POST /containers/:id/start", and the id itself. */
export const routeOf = (method: string, path: string): { op: string; id: string } => {
  const bare = (path.split("?")[0] ?? "").replace(/^\/v[0-9.]+/, "")
  let id = ""
  const parts = bare.split("/").map((part, i, all) => {
    const prev = all[i - 1]
    if ((prev === "containers" || prev === "exec") && part !== "create" && part !== "json") {
      if (prev === "containers" && ID.test(part)) id = part
      return ":id"
    }
    if (prev === "images" && part !== "json" && part !== "create") return ":name"
    return part
  })
  return { op: `${method} ${parts.join("/")}`, id }
}

/**
 * Logs one span of this process's own work (`op`, from `start`, a performance.now() reading) to
 * the profile, when T1_DOCKER_PROFILE is set: e.g. a create's wait for admission.
 */
export const profileSpan = (op: string, start: number, id = ""): void => {
  const file = process.env[PROFILE_ENV]
  if (file === undefined || file === "") return
  const ms = Math.round((performance.now() - start) * 10) / 10
  try {
    appendFileSync(file, `${JSON.stringify({ at: Math.round(Date.now() - ms), ms, op, id })}\n`)
  } catch {
    // A profile that cannot be written must not fail the work it describes.
  }
}

/** Wraps the client's dial so that every request is logged to `file` (see PROFILE_ENV). */
export const profileEngineCalls = (docker: Dockerode, file: string): Dockerode => {
  const modem = docker.modem as unknown as { dial: Dial }
  const dial = modem.dial.bind(modem)
  modem.dial = (options, callback) => {
    if (typeof callback !== "function") return dial(options, callback)
    const at = Date.now()
    const start = performance.now()
    const { op, id } = routeOf(options.method ?? "GET", options.path ?? "")
    const log = (what: string) => {
      const line = { at, ms: Math.round((performance.now() - start) * 10) / 10, op: what, id }
      try {
        appendFileSync(file, `${JSON.stringify(line)}\n`)
      } catch {
        // A profile that cannot be written must not fail the call it describes.
      }
    }
    return dial(options, (...args) => {
      log(op)
      // An attached exec's stream: how long the command ran, up to its end.
      const stream = args[1]
      if (op === "POST /exec/:id/start" && stream instanceof EventEmitter)
        stream.once("end", () => log(`${op} (until the stream ends)`))
      callback(...args)
    })
  }
  return docker
}
