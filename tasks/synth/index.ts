export { TaskWriteFailed, UnknownFamily } from "./errors.ts"
export { FAMILIES, familyRegistry } from "./families/index.ts"
export { DIFFICULTIES, type Difficulty, type GeneratedTask, type TaskFamily } from "./family.ts"
export { makeRng, type Rng } from "./rng.ts"
export {
  difficultyFor,
  findFamily,
  generateTask,
  type SynthesizedTask,
  type SynthOptions,
  synthesize,
  taskId,
} from "./synthesize.ts"
export { TASK_IMAGE, TASK_WORKDIR, type TaskMeta, taskJson, writeTask } from "./write.ts"
