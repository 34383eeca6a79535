import type { FuzzTarget } from "../harness.ts"
import { actionTargets } from "./actions.ts"
import { blobChunksTarget } from "./blob-chunks.ts"
import { busRepliesTarget } from "./bus-replies.ts"
import { busSubjectTargets } from "./bus-subjects.ts"
import { collectTarget } from "./collect.ts"
import { jobFileTarget } from "./job-file.ts"
import { jobSpecTarget } from "./job-spec.ts"
import { learnerBatchTarget } from "./learner-batch.ts"
import { moeWeightsTarget } from "./moe-weights.ts"
import { packedTarget } from "./packed.ts"
import { safetensorsTarget } from "./safetensors.ts"
import { taskLoaderTarget } from "./task-loader.ts"
import { testsArchiveTarget } from "./tests-archive.ts"
import { trajectoryTarget } from "./trajectory.ts"
import { weightsAnnouncementTarget } from "./weights-announcement.ts"

/** Every fuzz target, in the order the table lists them. */
export const TARGETS: ReadonlyArray<FuzzTarget> = [
  ...busSubjectTargets,
  busRepliesTarget,
  trajectoryTarget,
  collectTarget,
  learnerBatchTarget,
  blobChunksTarget,
  packedTarget,
  safetensorsTarget,
  moeWeightsTarget,
  weightsAnnouncementTarget,
  taskLoaderTarget,
  testsArchiveTarget,
  ...actionTargets,
  jobSpecTarget,
  jobFileTarget,
]
