export {
  type BwrapDriver,
  BwrapDriverLive,
  type BwrapDriverOptions,
  DEFAULT_BWRAP,
  DEFAULT_HOST_UID,
  defaultBwrapRoot,
  killBwrapSandboxProcesses,
  makeBwrapDriver,
} from "./driver.ts"
export { type BwrapSupport, BwrapUnsupported, probeBwrap } from "./probe.ts"
export { defaultBwrapCache } from "./rootfs.ts"
