export {
  DEFAULT_ALIASES,
  type FromRewrite,
  findUnsupported,
  type ImageAliases,
  parseDockerfile,
  resolveAlias,
  rewriteFrom,
} from "../../../tasks/load/dockerfile.ts"
export {
  BASE_IMAGE,
  BASE_PACKAGES,
  type BaseImage,
  type BaseImageOptions,
  baseImageHash,
  buildBaseImage,
  defaultCacheDir,
} from "./base.ts"
export {
  BaseImageBuildFailed,
  ImageBuildFailed,
  type ImageError,
  TaskContextInvalid,
  UnsupportedStep,
} from "./errors.ts"
export {
  BUILD_NETWORKS,
  BUILD_OUTPUT_LINES,
  type BuildNetwork,
  buildTaskImage,
  type TaskImage,
  type TaskImageError,
  type TaskImageOptions,
  taskBuildOptions,
  taskImageName,
} from "./task.ts"
export {
  type ResolvedTaskImage,
  type ResolveTaskImageError,
  type ResolveTaskImageOptions,
  resolvedWireTask,
  resolveTaskImage,
  TaskImageUnavailable,
  taskBuildNetwork,
  wireTaskFor,
} from "./task-image.ts"
