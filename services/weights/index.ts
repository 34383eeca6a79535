/**
 * Policy weights on the bus: a job's versions in the object store, each announced on
 * `<prefix>.weights.<job>` and as the job's latest in the weights bucket; what the learner
 * publishes and what samplers, the coordinator and other jobs (policy_ref) follow or load.
 */
export {
  NOTHING_PUBLISHED,
  type ResolvedPolicy,
  resolvePolicyRef,
} from "./policy-ref.ts"
export {
  fetchWeightBytes,
  fetchWeights,
  followWeights,
  latestAnnouncement,
  latestKey,
  publishWeightBytes,
  publishWeights,
  readVersion,
  versionAnnouncement,
  versionKey,
  WeightsUnavailable,
} from "./weights.ts"
