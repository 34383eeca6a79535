export {
  ensureToolchain,
  TOOLCHAIN_BASH,
  TOOLCHAIN_BIN,
  TOOLCHAIN_PYTHON,
  TOOLCHAIN_ROOT,
  TOOLCHAIN_TIMEOUT,
  ToolchainUnavailable,
  toolchainMount,
  toolchainVolume,
} from "./toolchain.ts"
