/**
 * An external trainer's hold on a job's learner role: the same lease the TypeScript learner pool
 * takes (KV `<prefix>-learner-leases`, key `<job>`), owned as `external/<trainer>/<lease>`. The
 * gateway keeps nothing in memory: every call reads the lease, so any gateway serves any trainer,
 * and a lease that is not renewed (ClaimJob again) lapses for the next trainer.
 */
import { randomUUID } from "node:crypto"
import * as grpc from "@grpc/grpc-js"
import { Clock, Effect, Option } from "effect"
import type { BusError, KvBucket } from "../../services/bus/index.ts"
import { StatusError } from "../../services/gateway/index.ts"
import { readLease, tryAcquireLease } from "../coordinator/index.ts"

const PREFIX = "external/"

/** The lease owner of an external trainer's lease. */
const ownerOf = (trainerId: string, leaseId: string) => `${PREFIX}${trainerId}/${leaseId}`

const parseOwner = (
  owner: string,
): { readonly trainerId: string; readonly leaseId: string } | undefined => {
  if (!owner.startsWith(PREFIX)) return undefined
  const rest = owner.slice(PREFIX.length)
  const cut = rest.lastIndexOf("/")
  return cut <= 0 ? undefined : { trainerId: rest.slice(0, cut), leaseId: rest.slice(cut + 1) }
}

const describeHolder = (owner: string): string => {
  const external = parseOwner(owner)
  return external === undefined
    ? `t1's learner pool (${owner})`
    : `external trainer ${JSON.stringify(external.trainerId)}`
}

export interface HeldLease {
  readonly leaseId: string
  readonly trainerId: string
  readonly expiresAtMs: number
}

/**
 * Takes the job's learner lease for `trainerId`, or renews the one it holds (same lease id). A
 * lease another holder keeps alive is FAILED_PRECONDITION, naming the holder and its expiry.
 */
export const claimLease = (
  kv: KvBucket,
  jobId: string,
  trainerId: string,
  ttlMs: number,
): Effect.Effect<HeldLease, StatusError | BusError> =>
  Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    const current = yield* readLease(kv, jobId)
    const live = current !== undefined && current.expiresAtMs > now ? current : undefined
    const mine = live === undefined ? undefined : parseOwner(live.owner)
    if (live !== undefined && mine?.trainerId !== trainerId)
      return yield* new StatusError({
        code: grpc.status.FAILED_PRECONDITION,
        details: `job ${jobId}: its learner lease is held by ${describeHolder(live.owner)} until ${new Date(live.expiresAtMs).toISOString()}; claim it again after that`,
      })
    const leaseId = mine?.leaseId ?? randomUUID()
    const taken = yield* tryAcquireLease(kv, jobId, ownerOf(trainerId, leaseId), ttlMs)
    if (Option.isNone(taken))
      return yield* new StatusError({
        code: grpc.status.FAILED_PRECONDITION,
        details: `job ${jobId}: another holder took its learner lease meanwhile`,
      })
    return { leaseId, trainerId, expiresAtMs: now + ttlMs }
  })

/** The job's lease is `leaseId`'s and has not lapsed; FAILED_PRECONDITION otherwise. */
export const checkLease = (
  kv: KvBucket,
  jobId: string,
  leaseId: string,
): Effect.Effect<HeldLease, StatusError | BusError> =>
  Effect.gen(function* () {
    if (leaseId === "")
      return yield* new StatusError({
        code: grpc.status.INVALID_ARGUMENT,
        details: "lease_id: required (ClaimJob's TrainerLease.lease_id)",
      })
    const now = yield* Clock.currentTimeMillis
    const current = yield* readLease(kv, jobId)
    const held = current === undefined ? undefined : parseOwner(current.owner)
    if (current === undefined || held?.leaseId !== leaseId || current.expiresAtMs <= now)
      return yield* new StatusError({
        code: grpc.status.FAILED_PRECONDITION,
        details:
          current === undefined || current.expiresAtMs <= now
            ? `job ${jobId}: lease ${leaseId} has lapsed (not renewed in time); ClaimJob again`
            : `job ${jobId}: lease ${leaseId} is not the job's lease (now held by ${describeHolder(current.owner)}); ClaimJob again`,
      })
    return { leaseId, trainerId: held.trainerId, expiresAtMs: current.expiresAtMs }
  })
