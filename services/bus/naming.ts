/** Every subject and bucket t1 uses, under one configurable prefix (DESIGN.md, "Subjects"). */
const streamPrefix = (prefix: string) => prefix.toUpperCase().replace(/[^A-Z0-9]/g, "_")

export const subjectsFor = (prefix = "t1") => ({
  prefix,
  /** JetStream work queue of episode work items. */
  episodes: `${prefix}.episodes`,
  /** JetStream stream of one job's trajectory chunks and episode ends. */
  trajectories: (job: string) => `${prefix}.traj.${job}`,
  sandboxCreate: `${prefix}.sandbox.create`,
  sandbox: (id: string, op: "exec" | "put" | "get" | "destroy" | "seal") =>
    `${prefix}.sandbox.${id}.${op}`,
  verify: `${prefix}.verify`,
  bufferTake: (job: string) => `${prefix}.buffer.${job}.take`,
  weights: (job: string) => `${prefix}.weights.${job}`,
  jobEvents: (job: string) => `${prefix}.jobs.${job}.events`,
  /** Every actor process answers Ping here with a Pong. */
  ping: `${prefix}.ping`,
  /** JetStream stream names (no dots allowed) for the work queue and the trajectories. */
  episodesStream: `${streamPrefix(prefix)}_EPISODES`,
  trajectoriesStream: `${streamPrefix(prefix)}_TRAJ`,
  /** Every job's trajectory subject, for the stream that stores them all. */
  allTrajectories: `${prefix}.traj.>`,
  jobsBucket: `${prefix}-jobs`,
  weightsBucket: `${prefix}-weights`,
})

export type Subjects = ReturnType<typeof subjectsFor>
