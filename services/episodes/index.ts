/**
 * The episode work queue (`<prefix>.episodes`) and the trajectory stream every actor shares:
 * their JetStream settings and the samplers' durable consumer, defined once.
 */
export {
  EPISODE_ACK_WAIT_MS,
  EPISODE_MAX_DELIVER,
  ensureJobEpisodes,
  ensureSamplerStreams,
  jobEpisodesSubject,
  jobSamplerDurable,
  SAMPLER_DURABLE,
} from "./streams.ts"
