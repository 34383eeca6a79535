// The public surface of the t1.v1 contract: every message schema, enum and service descriptor
// generated from proto/t1/v1. Import from here, never from proto/gen directly.
export * from "./gen/t1/v1/common_pb.ts"
export * from "./gen/t1/v1/episode_pb.ts"
export * from "./gen/t1/v1/job_pb.ts"
export * from "./gen/t1/v1/learner_pb.ts"
export * from "./gen/t1/v1/sandbox_pb.ts"
export * from "./gen/t1/v1/task_pb.ts"
export * from "./gen/t1/v1/trainer_pb.ts"
export * from "./gen/t1/v1/trajectory_pb.ts"
export * from "./gen/t1/v1/verifier_pb.ts"
