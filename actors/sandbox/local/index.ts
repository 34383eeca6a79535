export type { CgroupSupport } from "./cgroup.ts"
export { signalGroup, spawnShellProcess } from "./child-shell.ts"
export { type LocalIsolation, probeIsolation } from "./isolation.ts"
export {
  defaultSandboxesRoot,
  killLocalSandboxProcesses,
  type LocalDriver,
  LocalDriverLive,
  type LocalDriverOptions,
  makeLocalDriver,
  SANDBOX_ID_ENV,
} from "./local-driver.ts"
