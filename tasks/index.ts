export {
  defaultTaskCacheDir,
  detectTaskFormat,
  findTaskDirs,
  type LoadTaskOptions,
  loadTask,
  loadTasks,
  loadTasksSettled,
  type SettledTasks,
  TaskLoadError,
  TaskLoadErrors,
} from "./load/index.ts"
export type {
  Task,
  TaskEnvironment,
  TaskFormat,
  TaskSplit,
  TaskVerifier,
} from "./task.ts"
