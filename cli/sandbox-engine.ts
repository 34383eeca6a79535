import { Effect } from "effect"
import { buildBaseImage, dockerEngineAvailable } from "../actors/sandbox/index.ts"

/**
 * What `t1 up` and `t1 serve` need before their first sandbox: a Docker engine that answers (else
 * a failure saying how to start one, plus `hint`), and the base image, built when the engine
 * lacks it (instant when present).
 */
export const ensureSandboxEngine = (command: string, hint = "") =>
  Effect.gen(function* () {
    if (!(yield* dockerEngineAvailable())) {
      return yield* Effect.fail(
        new Error(
          `${command}: no Docker engine answers at ${process.env.DOCKER_HOST ?? "unix:///var/run/docker.sock"}. Start one (as root: \`dockerd &\`, or \`systemctl start docker\`), or point DOCKER_HOST at one${hint}`,
        ),
      )
    }
    const base = yield* buildBaseImage()
    yield* Effect.logInfo(
      `${command}: ${base.image} ${base.source === "engine" ? "present" : `ready (${base.source === "archive" ? "re-imported from the cache" : "built"} in ${Math.round(base.durationMs / 1000)} s)`}`,
    )
  })
