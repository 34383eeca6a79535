import {
  create,
  type DescMessage,
  fromBinary,
  type MessageInitShape,
  type MessageShape,
  toBinary,
} from "@bufbuild/protobuf"
import { Data, Effect } from "effect"
import {
  CreateSandboxRequestSchema,
  CreateSandboxResultSchema,
  DestroySandboxRequestSchema,
  DestroySandboxResultSchema,
  ErrorCode,
  type ErrorDetail,
  ExecRequestSchema,
  type ExecResult,
  ExecResultSchema,
  GetFilesRequestSchema,
  GetFilesResultSchema,
  PutFilesRequestSchema,
  PutFilesResultSchema,
  type SandboxSpec,
  SealSandboxRequestSchema,
  SealSandboxResultSchema,
} from "../../proto/index.ts"
import { ERROR_HEADER } from "../../services/actor/index.ts"
import type { BusError, BusShape, Subjects } from "../../services/bus/index.ts"
import type { SealOptions, SealReport } from "./driver.ts"
import { SandboxNotFound } from "./errors.ts"

/** The host answered with an error: `retryable` means infra (another sandbox may work). */
export class SandboxRequestFailed extends Data.TaggedError("SandboxRequestFailed")<{
  readonly operation: string
  readonly detail: ErrorDetail
}> {
  get retryable(): boolean {
    return this.detail.retryable
  }
  override get message(): string {
    return `sandbox ${this.operation}: ${this.detail.message}`
  }
}

/** The reply did not decode: a host of another version, or a bug. */
export class SandboxProtocolError extends Data.TaggedError("SandboxProtocolError")<{
  readonly operation: string
  readonly reason: string
}> {
  override get message(): string {
    return `sandbox ${this.operation}: undecodable reply: ${this.reason}`
  }
}

export type SandboxClientError =
  | BusError
  | SandboxRequestFailed
  | SandboxNotFound
  | SandboxProtocolError

/** How long a request may wait beyond the command's own timeout (queueing, transfer). */
const SLACK_MS = 10_000

/** Talks to sandbox hosts over the bus, as a sampler does. */
export const sandboxClient = (bus: BusShape, subjects: Subjects) => {
  const call = <Req extends DescMessage, Res extends DescMessage>(
    operation: string,
    subject: string,
    reqSchema: Req,
    init: MessageInitShape<Req>,
    resSchema: Res,
    timeoutMs: number,
    sandboxId?: string,
  ): Effect.Effect<MessageShape<Res>, SandboxClientError> =>
    bus.request(subject, toBinary(reqSchema, create(reqSchema, init)), { timeoutMs }).pipe(
      // Nobody serves a sandbox's subjects once it is gone (destroyed, reaped, host dead).
      Effect.catchTag(
        "NoResponders",
        (e): Effect.Effect<never, SandboxClientError> =>
          Effect.fail(sandboxId === undefined ? e : new SandboxNotFound({ id: sandboxId })),
      ),
      Effect.flatMap((reply) =>
        Effect.try({
          try: () => {
            // The host could not handle the request at all (undecodable, unknown operation).
            const refused = reply.headers[ERROR_HEADER]
            if (refused !== undefined) throw new Error(refused)
            return fromBinary(resSchema, reply.data)
          },
          catch: (cause) => new SandboxProtocolError({ operation, reason: String(cause) }),
        }),
      ),
      Effect.flatMap((res): Effect.Effect<MessageShape<Res>, SandboxClientError> => {
        const error = (res as { error?: ErrorDetail }).error
        if (error === undefined) return Effect.succeed(res)
        if (sandboxId !== undefined && error.code === ErrorCode.NOT_FOUND) {
          return Effect.fail(new SandboxNotFound({ id: sandboxId }))
        }
        return Effect.fail(new SandboxRequestFailed({ operation, detail: error }))
      }),
    )

  /** One command for the session's shell, or one process of its own (argv). */
  const execRequest = (
    sandboxId: string,
    what: { readonly command: string } | { readonly argv: Array<string> },
    options: { readonly timeoutMs?: number; readonly maxOutputBytes?: number },
  ): Effect.Effect<ExecResult, SandboxClientError> =>
    call(
      "exec",
      subjects.sandbox(sandboxId, "exec"),
      ExecRequestSchema,
      {
        sandboxId,
        ...what,
        timeoutMs: options.timeoutMs ?? 0,
        maxOutputBytes: options.maxOutputBytes ?? 0,
      },
      ExecResultSchema,
      (options.timeoutMs ?? 60_000) + SLACK_MS,
      sandboxId,
    )

  return {
    create: (
      spec: MessageInitShape<typeof import("../../proto/index.ts").SandboxSpecSchema> | SandboxSpec,
      requestId = "",
      timeoutMs = 120_000,
    ) =>
      call(
        "create",
        subjects.sandboxCreate,
        CreateSandboxRequestSchema,
        { spec, requestId },
        CreateSandboxResultSchema,
        timeoutMs,
      ),
    exec: (
      sandboxId: string,
      command: string,
      options: { readonly timeoutMs?: number; readonly maxOutputBytes?: number } = {},
    ): Effect.Effect<ExecResult, SandboxClientError> =>
      execRequest(sandboxId, { command }, options),
    /** `argv` as a process of its own, outside the session's shell (see ExecRequest.argv). */
    execArgv: (
      sandboxId: string,
      argv: ReadonlyArray<string>,
      options: { readonly timeoutMs?: number; readonly maxOutputBytes?: number } = {},
    ): Effect.Effect<ExecResult, SandboxClientError> =>
      execRequest(sandboxId, { argv: [...argv] }, options),
    /**
     * Seals the sandbox for verification (SandboxDriverShape.seal); undefined when the host's
     * driver cannot seal (the local driver).
     */
    seal: (
      sandboxId: string,
      options: SealOptions,
    ): Effect.Effect<SealReport | undefined, SandboxClientError> =>
      call(
        "seal",
        subjects.sandbox(sandboxId, "seal"),
        SealSandboxRequestSchema,
        { sandboxId, pristinePaths: [...options.pristinePaths], timeoutMs: options.timeoutMs },
        SealSandboxResultSchema,
        options.timeoutMs + SLACK_MS,
        sandboxId,
      ).pipe(
        Effect.map((r): SealReport | undefined =>
          r.unsupported
            ? undefined
            : {
                toolchain: r.toolchain,
                stopped: r.stopped,
                restored: r.restored,
                restoredCount: r.restoredCount,
                removed: r.removed,
                removedCount: r.removedCount,
                durationMs: r.durationMs,
              },
        ),
      ),
    put: (sandboxId: string, path: string, tar: Uint8Array) =>
      call(
        "put",
        subjects.sandbox(sandboxId, "put"),
        PutFilesRequestSchema,
        { sandboxId, path, tar },
        PutFilesResultSchema,
        60_000,
        sandboxId,
      ),
    get: (sandboxId: string, path: string) =>
      call(
        "get",
        subjects.sandbox(sandboxId, "get"),
        GetFilesRequestSchema,
        { sandboxId, path },
        GetFilesResultSchema,
        60_000,
        sandboxId,
      ).pipe(Effect.map((r) => r.tar)),
    destroy: (sandboxId: string) =>
      call(
        "destroy",
        subjects.sandbox(sandboxId, "destroy"),
        DestroySandboxRequestSchema,
        { sandboxId },
        DestroySandboxResultSchema,
        30_000,
        sandboxId,
      ).pipe(
        Effect.map((r) => r.existed),
        Effect.catchTag("SandboxNotFound", () => Effect.succeed(false)),
      ),
  }
}

export type SandboxClient = ReturnType<typeof sandboxClient>
