import { create } from "@bufbuild/protobuf"
import {
  ErrorCode,
  type ErrorDetail,
  ErrorDetailSchema,
  type SandboxSpec as SandboxSpecMessage,
  type SealSandboxRequest,
} from "../../proto/index.ts"
import { DEFAULT_PIDS_LIMIT, type SandboxSpec, type SealOptions } from "./driver.ts"
import { InvalidSandboxSpec, type SandboxError } from "./errors.ts"
import { pristinePathsProblem } from "./pristine.ts"

export interface SpecDefaults {
  readonly image: string
  readonly workdir: string
  readonly ttlMs: number
}

/** A wire spec as the driver's, with defaults filled in; bad values name their field. */
export const specFromWire = (
  wire: SandboxSpecMessage | undefined,
  defaults: SpecDefaults,
): SandboxSpec | InvalidSandboxSpec => {
  const limits = wire?.limits
  const cpus = limits?.cpus ?? 0
  if (!Number.isFinite(cpus) || cpus < 0 || cpus > 1024) {
    return new InvalidSandboxSpec({
      field: "spec.limits.cpus",
      reason: `must be 0..1024, got ${cpus}`,
    })
  }
  const memoryMb = limits?.memoryMb ?? 0
  if (memoryMb !== 0 && memoryMb < 6) {
    return new InvalidSandboxSpec({
      field: "spec.limits.memory_mb",
      reason: `must be 0 (default) or at least 6 MiB, got ${memoryMb}`,
    })
  }
  const workdir =
    wire?.workdir === undefined || wire.workdir === "" ? defaults.workdir : wire.workdir
  if (!workdir.startsWith("/") || workdir.includes("\0") || workdir.split("/").includes("..")) {
    return new InvalidSandboxSpec({
      field: "spec.workdir",
      reason: `must be an absolute path without '..', got ${JSON.stringify(workdir)}`,
    })
  }
  const image = wire?.image === undefined || wire.image === "" ? defaults.image : wire.image
  if (/\s/.test(image)) {
    return new InvalidSandboxSpec({
      field: "spec.image",
      reason: `not an image reference: ${JSON.stringify(image)}`,
    })
  }
  for (const key of Object.keys(wire?.env ?? {})) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) {
      return new InvalidSandboxSpec({
        field: `spec.env.${key}`,
        reason: "not a shell variable name",
      })
    }
  }
  return {
    image,
    cpus,
    memoryMb,
    pidsLimit: limits?.pids === undefined || limits.pids === 0 ? DEFAULT_PIDS_LIMIT : limits.pids,
    network: wire?.network ?? false,
    user: wire?.user ?? "",
    workdir,
    env: { ...(wire?.env ?? {}) },
    labels: { ...(wire?.labels ?? {}) },
    ttlMs:
      wire?.idleTtlSec === undefined || wire.idleTtlSec === 0
        ? defaults.ttlMs
        : wire.idleTtlSec * 1000,
  }
}

/** A seal's timeout when the request leaves it 0, and the most one may ask for. */
export const DEFAULT_SEAL_TIMEOUT_MS = 60_000
export const MAX_SEAL_TIMEOUT_MS = 10 * 60_000

/** A wire seal request as the driver's options; a bad pristine path names the field. */
export const sealOptionsFromWire = (req: SealSandboxRequest): SealOptions | InvalidSandboxSpec => {
  const problem = pristinePathsProblem(req.pristinePaths)
  if (problem !== undefined)
    return new InvalidSandboxSpec({ field: "pristine_paths", reason: problem.reason })
  return {
    pristinePaths: [...req.pristinePaths],
    timeoutMs: Math.min(req.timeoutMs || DEFAULT_SEAL_TIMEOUT_MS, MAX_SEAL_TIMEOUT_MS),
  }
}

const codeOf = (e: SandboxError): ErrorCode => {
  switch (e._tag) {
    case "InvalidSandboxSpec":
    case "InvalidCommand":
      return ErrorCode.INVALID_ARGUMENT
    case "ImageNotFound":
    case "SandboxNotFound":
      return ErrorCode.NOT_FOUND
    case "FileTransferError":
      return ErrorCode.FAILED_PRECONDITION
    case "EngineUnavailable":
    case "SandboxDied":
    case "SandboxInfraError":
      return ErrorCode.UNAVAILABLE
  }
}

/** Infra errors are retryable (another host, a fresh sandbox); task errors are the episode's. */
export const errorDetail = (e: SandboxError): ErrorDetail =>
  create(ErrorDetailSchema, {
    code: codeOf(e),
    message: e.message,
    retryable: e.errorClass === "infra",
    fieldPath: e._tag === "InvalidSandboxSpec" ? e.field : "",
  })
