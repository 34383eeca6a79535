import type * as grpc from "@grpc/grpc-js"
import { Effect } from "effect"
import { PermissionDenied, Unauthenticated } from "./errors.ts"

/** admin may do everything; reader may only read (GetJob, ListJobs, WatchJob). */
export type Role = "admin" | "reader"

export interface TokenGrant {
  readonly role: Role
}

/** Bearer token → what it may do. An empty or absent map turns authentication off. */
export type Tokens = ReadonlyMap<string, TokenGrant>

export class TokensFileError extends Error {}

/**
 * Parses a tokens file: one `TOKEN ROLE` per line (role `admin` or `reader`), `#` comments and
 * blank lines ignored. Throws {@link TokensFileError} naming the line.
 */
export const parseTokens = (text: string, source = "tokens file"): Map<string, TokenGrant> => {
  const tokens = new Map<string, TokenGrant>()
  for (const [i, raw] of text.split(/\r?\n/).entries()) {
    const line = raw.replace(/#.*$/, "").trim()
    if (line === "") continue
    const fail = (reason: string) => new TokensFileError(`${source}:${i + 1}: ${reason}`)
    const [token, role, ...rest] = line.split(/\s+/)
    if (token === undefined || role === undefined || rest.length > 0) {
      throw fail("expected `TOKEN ROLE`")
    }
    if (role !== "admin" && role !== "reader") {
      throw fail(`role must be admin or reader, got ${JSON.stringify(role)}`)
    }
    if (!/^[\x21-\x7e]+$/.test(token)) throw fail("a token is printable ASCII")
    if (tokens.has(token)) throw fail("token listed twice")
    tokens.set(token, { role })
  }
  return tokens
}

const allows = (role: Role, required: Role): boolean => role === "admin" || required === "reader"

/**
 * Checks the call's `authorization: Bearer <token>` against the tokens; with no tokens every
 * call is allowed. UNAUTHENTICATED without a known token, PERMISSION_DENIED when its role is
 * too weak for `method`.
 */
export const authorize = (
  tokens: Tokens | undefined,
  metadata: grpc.Metadata,
  required: Role,
  method: string,
): Effect.Effect<void, Unauthenticated | PermissionDenied> =>
  Effect.suspend((): Effect.Effect<void, Unauthenticated | PermissionDenied> => {
    if (tokens === undefined || tokens.size === 0) return Effect.void
    const header = metadata.get("authorization")[0]
    if (typeof header !== "string") {
      return Effect.fail(
        new Unauthenticated({ reason: "missing authorization: Bearer <token> metadata" }),
      )
    }
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header)
    const grant = match?.[1] === undefined ? undefined : tokens.get(match[1])
    if (grant === undefined) {
      return Effect.fail(new Unauthenticated({ reason: "invalid bearer token" }))
    }
    return allows(grant.role, required)
      ? Effect.void
      : Effect.fail(new PermissionDenied({ method, role: grant.role }))
  })
