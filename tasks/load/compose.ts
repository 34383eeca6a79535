/**
 * What t1 takes from a Terminal-Bench 1 docker-compose.yaml: the agent's service (`client`, else
 * `main`, else the only one) — its image, its build context and Dockerfile, and the limits,
 * network and working directory it sets. Other services (databases and the like) have no place in
 * a single sandbox; they are logged and ignored.
 */
import { join, resolve } from "node:path"
import { Effect } from "effect"
import type { TaskLoadError } from "./errors.ts"
import { ConfigTable } from "./fields.ts"
import { parseYaml, pathKind, readUtf8 } from "./text.ts"

export interface ComposeService {
  readonly name: string
  /** A literal image name; undefined when absent or only a variable Terminal-Bench fills in. */
  readonly image: string | undefined
  /** Absolute build context and the Dockerfile relative to it, when the service builds. */
  readonly build: { readonly context: string; readonly dockerfile: string } | undefined
  readonly allowInternet: boolean | undefined
  readonly cpus: number | undefined
  readonly memoryMb: number | undefined
  readonly workdir: string | undefined
}

/**
 * `${NAME:-default}` and `${NAME-default}` become their defaults; any other variable makes the
 * value unknowable here (Terminal-Bench sets them per run), so the result is undefined.
 */
export const substituteDefaults = (value: string): string | undefined => {
  const replaced = value.replace(/\$\{[A-Za-z_][A-Za-z0-9_]*:?-([^}]*)\}/g, "$1")
  return /\$\{?[A-Za-z_]/.test(replaced) ? undefined : replaced
}

const literal = (table: ConfigTable, key: string) =>
  Effect.map(table.string(key), (value) =>
    value === undefined ? undefined : substituteDefaults(value),
  )

/** A value only Terminal-Bench can fill in (`${CPUS}`): unknown here, so left to the defaults. */
const isVariable = (table: ConfigTable, key: string): boolean => {
  const value = table.values[key]
  return typeof value === "string" && substituteDefaults(value) === undefined
}

/** A number, or a string holding one: Compose writes cpus both ways. */
const cpusOf = (table: ConfigTable, key: string) =>
  isVariable(table, key)
    ? Effect.succeed(undefined)
    : table.read(key, 'a positive number (or a string like "1.5")', (value) => {
        const n = typeof value === "number" || typeof value === "string" ? Number(value) : 0
        return Number.isFinite(n) && n > 0 ? n : undefined
      })

const memoryOf = (table: ConfigTable, key: string) =>
  isVariable(table, key) ? Effect.succeed(undefined) : table.sizeMb(key, "bytes")

export const readCompose = (
  file: string,
  taskDir: string,
): Effect.Effect<ComposeService, TaskLoadError> =>
  Effect.gen(function* () {
    const compose = yield* ConfigTable.root(
      file,
      "yaml",
      yield* parseYaml(file, yield* readUtf8(file)),
    )
    const services = yield* compose.required(
      "services",
      "a mapping of services",
      compose.table("services"),
    )
    const names = Object.keys(services.values)
    const name =
      names.find((n) => n === "client") ??
      names.find((n) => n === "main") ??
      (names.length === 1 ? names[0] : undefined)
    if (name === undefined)
      return yield* services.error(
        "client",
        `a "client" service for the agent (services: ${names.join(", ") || "none"})`,
        "nothing",
      )
    const others = names.filter((n) => n !== name)
    if (others.length > 0)
      yield* Effect.logWarning(
        `${file}: services ${others.join(", ")} are ignored: a t1 sandbox runs the "${name}" service alone`,
      )
    const service = yield* services.required(name, "a mapping", services.table(name))

    let build: ComposeService["build"]
    if (typeof service.values.build === "string") {
      const context = substituteDefaults(service.values.build)
      if (context !== undefined)
        build = { context: resolve(taskDir, context), dockerfile: "Dockerfile" }
    } else if (service.has("build")) {
      const spec = yield* service.required(
        "build",
        "a build context (a path or a mapping)",
        service.table("build"),
      )
      const context = (yield* literal(spec, "context")) ?? "."
      const dockerfile = (yield* literal(spec, "dockerfile")) ?? "Dockerfile"
      build = { context: resolve(taskDir, context), dockerfile }
    }
    if (build !== undefined && (yield* pathKind(join(build.context, build.dockerfile))) !== "file")
      return yield* service.error(
        "build",
        `a Dockerfile at ${join(build.context, build.dockerfile)}`,
        "nothing there",
      )

    const deploy = yield* service.section("deploy")
    const limits = yield* (yield* deploy.section("resources")).section("limits")
    const networkMode = yield* literal(service, "network_mode")
    const workdir = yield* service.absolutePath("working_dir")
    return {
      name,
      image: yield* literal(service, "image"),
      build,
      allowInternet: networkMode === undefined ? undefined : networkMode !== "none",
      cpus: (yield* cpusOf(limits, "cpus")) ?? (yield* cpusOf(service, "cpus")),
      memoryMb: (yield* memoryOf(limits, "memory")) ?? (yield* memoryOf(service, "mem_limit")),
      workdir,
    }
  })
