/**
 * External trainers: t1.v1.TrainerService (claim a job's learner role, take batches, publish
 * weights, report steps), added to the gateway by `t1 gateway` and `t1 serve`.
 */

export { type PublishStream, type TrainerServiceClient, trainerServiceClient } from "./client.ts"
export { type TrainerServiceOptions, trainerService } from "./service.ts"
