import Dockerode from "dockerode"
import { EngineUnavailable, SandboxInfraError } from "../errors.ts"
import { PROFILE_ENV, profileEngineCalls } from "./profile.ts"

/**
 * A client for the engine at DOCKER_HOST, else the local socket (/var/run/docker.sock); the
 * options, when given, say where instead (socketPath, or host + port + protocol). With
 * T1_DOCKER_PROFILE set, every engine call is logged (profile.ts).
 */
export const connectDocker = (options?: Dockerode.DockerOptions): Dockerode => {
  const docker = new Dockerode(options)
  const profile = process.env[PROFILE_ENV]
  return profile === undefined || profile === "" ? docker : profileEngineCalls(docker, profile)
}

/** A property of something the engine or a library handed back, whatever its type. */
const field = (value: unknown, name: string): unknown =>
  typeof value === "object" && value !== null && name in value
    ? (value as Record<string, unknown>)[name]
    : undefined

/** Where the client points, for messages: "unix:///var/run/docker.sock", "tcp://host:2375". */
export const describeEngine = (docker: Dockerode): string => {
  const socketPath = field(docker.modem, "socketPath")
  const host = field(docker.modem, "host")
  if (typeof socketPath === "string") return `unix://${socketPath}`
  if (typeof host === "string") {
    const protocol = field(docker.modem, "protocol")
    const port = field(docker.modem, "port")
    return `${typeof protocol === "string" ? protocol : "http"}://${host}${port === undefined ? "" : `:${String(port)}`}`
  }
  return "docker"
}

/**
 * Whether the engine runs on this machine: a unix socket (the default when neither is set), or
 * TCP to a loopback address. Its bridges are then this machine's interfaces.
 */
export const engineIsLocal = (docker: Dockerode): boolean => {
  const host = field(docker.modem, "host")
  if (typeof field(docker.modem, "socketPath") === "string" || typeof host !== "string") return true
  return host === "localhost" || host === "::1" || host.startsWith("127.")
}

/** The HTTP status the engine answered with, when it answered at all. */
export const statusCode = (error: unknown): number | undefined => {
  const code = field(error, "statusCode")
  return typeof code === "number" ? code : undefined
}

/** The engine's own words ("No such container: …"), else the error's message. */
export const reasonOf = (error: unknown): string => {
  const json = field(error, "json")
  const fromJson = field(json, "message")
  if (typeof fromJson === "string" && fromJson !== "") return fromJson
  const reason = field(error, "reason")
  const message = error instanceof Error ? error.message : String(error)
  return typeof reason === "string" && !message.includes(reason) ? `${reason}: ${message}` : message
}

const UNREACHABLE = new Set([
  "ECONNREFUSED",
  "ENOENT",
  "EACCES",
  "EPERM",
  "ENOTFOUND",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ETIMEDOUT",
  "ECONNRESET",
  "EPIPE",
])

/** No answer from the engine at all: the socket is missing, refused, or the connection broke. */
export const isUnreachable = (error: unknown): boolean => {
  const code = field(error, "code")
  return statusCode(error) === undefined && typeof code === "string" && UNREACHABLE.has(code)
}

/** Maps an engine failure that no caller handles more precisely. */
export const engineFailure = (
  docker: Dockerode,
  operation: string,
  error: unknown,
): EngineUnavailable | SandboxInfraError =>
  isUnreachable(error)
    ? new EngineUnavailable({ engine: describeEngine(docker), reason: reasonOf(error) })
    : new SandboxInfraError({ operation, reason: reasonOf(error) })

/** Reads a whole stream into one buffer. */
export const readAll = (stream: NodeJS.ReadableStream): Promise<Buffer> =>
  new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    stream.on("data", (chunk: Buffer | string) =>
      chunks.push(typeof chunk === "string" ? Buffer.from(chunk) : chunk),
    )
    stream.once("error", reject)
    stream.once("end", () => resolve(Buffer.concat(chunks)))
  })
