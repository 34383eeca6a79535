import { Effect } from "effect"
import { connectDocker, describeEngine, dockerEngineAvailable } from "../docker/index.ts"
import { type BaseImage, buildBaseImage } from "./base.ts"

/**
 * For integration tests: fails with a clear message when no Docker engine answers, else makes
 * sure t1-base:latest exists — a few milliseconds when it does, about a minute the first time.
 */
export const ensureTestBaseImage = async (): Promise<BaseImage> => {
  const docker = connectDocker()
  if (!(await Effect.runPromise(dockerEngineAvailable(docker))))
    throw new Error(
      `no Docker engine answers at ${describeEngine(docker)}: start dockerd (as .ci/run does) or set DOCKER_HOST`,
    )
  return Effect.runPromise(buildBaseImage({ docker }))
}

/** Long enough for a cold base image build. */
export const BASE_IMAGE_TIMEOUT_MS = 10 * 60_000
