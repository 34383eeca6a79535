import { Data } from "effect"

export class Unauthenticated extends Data.TaggedError("Unauthenticated")<{
  readonly reason: string
}> {
  override get message(): string {
    return this.reason
  }
}

export class PermissionDenied extends Data.TaggedError("PermissionDenied")<{
  readonly method: string
  readonly role: string
}> {
  override get message(): string {
    return `role ${this.role} may not call ${this.method}`
  }
}

/** The gateway could not start: bad TLS files, address in use… */
export class GatewayStartError extends Data.TaggedError("GatewayStartError")<{
  readonly reason: string
}> {
  override get message(): string {
    return `gateway: ${this.reason}`
  }
}
