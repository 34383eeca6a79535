/**
 * The smallest train job the system tests run end to end: one bundled training task, two
 * samples of one short turn each, batches of two trajectories. Tests name what they change.
 */
import { fileURLToPath } from "node:url"
import { JobKind, type LearnerConfig } from "../../proto/index.ts"

export const TRAIN_DIR = fileURLToPath(new URL("../../tasks/bundled/train", import.meta.url))

export const smallTrainSpec = (
  name: string,
  learner: Omit<Partial<LearnerConfig>, "$typeName">,
  o: { readonly taskIds?: ReadonlyArray<string>; readonly maxConcurrentEpisodes?: number } = {},
) => ({
  name,
  kind: JobKind.TRAIN,
  taskSet: TRAIN_DIR,
  taskIds: [...(o.taskIds ?? ["config-edit-easy-s1-000"])],
  samplesPerTask: 2,
  maxConcurrentEpisodes: o.maxConcurrentEpisodes ?? 2,
  sampling: { temperature: 1, topP: 1, maxTokens: 24 },
  limits: { maxTurns: 1, wallClockSec: 120 },
  learner: { batchTrajectories: 2, maxStaleness: 2, ...learner },
})
