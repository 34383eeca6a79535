import { create, toBinary } from "@bufbuild/protobuf"
import * as grpc from "@grpc/grpc-js"
import { Cause, Data, Option } from "effect"
import { ErrorCode, ErrorDetailSchema } from "../../proto/index.ts"

/** Trailer naming the first offending field of an INVALID_ARGUMENT answer (one value per field). */
export const FIELD_PATH_TRAILER = "t1-field-path"
/** Trailer carrying a protobuf-encoded t1.v1.ErrorDetail with every failed answer. */
export const ERROR_DETAIL_TRAILER = "t1-error-detail-bin"

/** A failure that is already a gRPC status (unknown health service, bad reflection call…). */
export class StatusError extends Data.TaggedError("StatusError")<{
  readonly code: grpc.status
  readonly details: string
}> {
  override get message(): string {
    return this.details
  }
}

export interface GrpcFailure {
  readonly code: grpc.status
  readonly details: string
  readonly metadata: grpc.Metadata
  /** A bug or an unexpected failure: worth an error log. */
  readonly internal: boolean
}

const ERROR_CODES: Partial<Record<grpc.status, ErrorCode>> = {
  [grpc.status.INVALID_ARGUMENT]: ErrorCode.INVALID_ARGUMENT,
  [grpc.status.NOT_FOUND]: ErrorCode.NOT_FOUND,
  [grpc.status.ALREADY_EXISTS]: ErrorCode.ALREADY_EXISTS,
  [grpc.status.FAILED_PRECONDITION]: ErrorCode.FAILED_PRECONDITION,
  [grpc.status.RESOURCE_EXHAUSTED]: ErrorCode.RESOURCE_EXHAUSTED,
  [grpc.status.DEADLINE_EXCEEDED]: ErrorCode.DEADLINE_EXCEEDED,
  [grpc.status.UNAVAILABLE]: ErrorCode.UNAVAILABLE,
  [grpc.status.ABORTED]: ErrorCode.UNAVAILABLE,
  [grpc.status.CANCELLED]: ErrorCode.CANCELLED,
  [grpc.status.PERMISSION_DENIED]: ErrorCode.PERMISSION_DENIED,
  [grpc.status.UNAUTHENTICATED]: ErrorCode.PERMISSION_DENIED,
  [grpc.status.INTERNAL]: ErrorCode.INTERNAL,
}

const RETRYABLE = new Set([grpc.status.UNAVAILABLE, grpc.status.ABORTED])

const failure = (
  code: grpc.status,
  details: string,
  fieldPaths: ReadonlyArray<string> = [],
): GrpcFailure => {
  const metadata = new grpc.Metadata()
  for (const path of fieldPaths) metadata.add(FIELD_PATH_TRAILER, path)
  const detail = create(ErrorDetailSchema, {
    code: ERROR_CODES[code] ?? ErrorCode.INTERNAL,
    message: details,
    fieldPath: fieldPaths[0] ?? "",
    retryable: RETRYABLE.has(code),
  })
  metadata.set(ERROR_DETAIL_TRAILER, Buffer.from(toBinary(ErrorDetailSchema, detail)))
  return { code, details, metadata, internal: code === grpc.status.INTERNAL }
}

const tagOf = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && "_tag" in error && typeof error._tag === "string"
    ? error._tag
    : undefined

const messageOf = (error: unknown): string =>
  error instanceof Error ? error.message : typeof error === "string" ? error : String(error)

/** The gRPC status for a typed failure of a handler (gateway, store and bus errors). */
export const failureOf = (error: unknown): GrpcFailure => {
  const message = messageOf(error)
  switch (tagOf(error)) {
    case "InvalidArgument": {
      const violations =
        typeof error === "object" && error !== null && "violations" in error
          ? (error.violations as ReadonlyArray<{ readonly fieldPath: string }>)
          : []
      return failure(
        grpc.status.INVALID_ARGUMENT,
        message,
        violations.map((v) => v.fieldPath),
      )
    }
    case "StatusError":
      return error instanceof StatusError
        ? failure(error.code, error.details)
        : failure(grpc.status.INTERNAL, message)
    case "JobNotFound":
      return failure(grpc.status.NOT_FOUND, message)
    case "JobAlreadyExists":
      return failure(grpc.status.ALREADY_EXISTS, message)
    case "JobTerminal":
      return failure(grpc.status.FAILED_PRECONDITION, message)
    case "JobContended":
      return failure(grpc.status.ABORTED, message)
    case "Unauthenticated":
      return failure(grpc.status.UNAUTHENTICATED, message)
    case "PermissionDenied":
      return failure(grpc.status.PERMISSION_DENIED, message)
    case "PayloadTooLarge":
      return failure(grpc.status.RESOURCE_EXHAUSTED, message)
    case "BusUnavailable":
    case "BusClosed":
    case "RequestTimeout":
    case "NoResponders":
    case "JetStreamError":
    case "KvConflict":
      return failure(grpc.status.UNAVAILABLE, `job store unavailable: ${message}`)
    default:
      return failure(grpc.status.INTERNAL, message)
  }
}

/** The gRPC status for how a handler's effect ended (interruption: the gateway is stopping). */
export const failureOfCause = (cause: Cause.Cause<unknown>): GrpcFailure => {
  if (Cause.hasInterruptsOnly(cause)) {
    return failure(grpc.status.UNAVAILABLE, "the gateway is shutting down; call again")
  }
  const error = Cause.findErrorOption(cause)
  if (Option.isSome(error)) return failureOf(error.value)
  return failure(grpc.status.INTERNAL, `internal error: ${messageOf(Cause.squash(cause))}`)
}
