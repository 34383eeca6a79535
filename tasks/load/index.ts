export { defaultTaskCacheDir, type LoadTaskOptions } from "./context.ts"
export { TaskLoadError, TaskLoadErrors } from "./errors.ts"
export { type KeystrokeScript, keystrokesToBash } from "./keystrokes.ts"
export {
  detectTaskFormat,
  findTaskDirs,
  loadTask,
  loadTasks,
  loadTasksSettled,
  type SettledTasks,
  TASK_CONFIG_FILES,
} from "./load.ts"
export { NATIVE_FIELDS } from "./native.ts"
export { TB2_SCHEMA_VERSIONS } from "./tb2.ts"
