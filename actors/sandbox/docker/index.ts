export {
  DockerDriverLive,
  type DockerDriverOptions,
  dockerEngineAvailable,
  makeDockerDriver,
} from "./driver.ts"
export { connectDocker, describeEngine } from "./engine.ts"
export { type DockerShellOptions, dockerShell } from "./shell.ts"
export { CAPABILITIES, containerOptions, specProblem } from "./spec.ts"
