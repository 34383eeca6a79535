/**
 * One bench:stream path in a process of its own, driven by bench/stream.ts over the IPC
 * channel: it builds the path's connections (only those the path uses) and trajectories, runs
 * one warm-up, says `ready`, then runs one measured run per `run` message and answers with its
 * Round.
 *
 *   (forked) bench/stream/worker.ts <t1|raw|json> <nats url> <episodes> <tokens> <window> [replicas]
 */
import { Effect, Exit, Scope } from "effect"
import { type PathName, type Round, streamPath } from "./paths.ts"

export type ToWorker = { readonly run: string } | { readonly exit: true }
export type FromWorker =
  | {
      readonly ready: true
      readonly routingBytes: number
      readonly choices: number
      readonly maxTokens: number
    }
  | { readonly round: Round }
  | { readonly failed: string }

const PATHS: ReadonlyArray<PathName> = ["t1", "raw", "json"]

const send = (m: FromWorker) => process.send?.(m)

/** A failure's words: a BenchError carries them in `reason`, other errors in `message`. */
const describe = (e: unknown): string => {
  if (typeof e === "object" && e !== null && "reason" in e && typeof e.reason === "string")
    return e.reason
  return e instanceof Error && e.message !== "" ? e.message : String(e)
}

const main = async () => {
  const [path, url, episodes, tokens, window, replicas = "1"] = process.argv.slice(2)
  if (process.send === undefined)
    throw new Error("bench/stream/worker.ts runs forked by bench:stream")
  if (!PATHS.includes(path as PathName) || url === undefined)
    throw new Error(
      `usage: worker.ts <t1|raw|json> <nats url> <episodes> <tokens> <window> [replicas]`,
    )
  const scope = Effect.runSync(Scope.make())
  const built = await Effect.runPromise(
    Scope.provide(
      streamPath(
        path as PathName,
        {
          episodes: Number(episodes),
          tokens: Number(tokens),
          window: Number(window),
          replicas: Number(replicas),
        },
        url,
      ),
      scope,
    ),
  )
  const run = built.run
  await Effect.runPromise(run("warm"))
  send({
    ready: true,
    routingBytes: built.routingBytes,
    choices: built.choices,
    maxTokens: built.maxTokens,
  })
  // The bench process went away (killed, or finished without saying exit): so does this one.
  process.on("disconnect", () => process.exit(0))
  process.on("message", (m: ToWorker) => {
    if ("exit" in m) {
      void Effect.runPromise(Scope.close(scope, Exit.void)).finally(() => process.exit(0))
      return
    }
    Effect.runPromise(run(m.run)).then(
      (round) => send({ round }),
      (e: unknown) => send({ failed: describe(e) }),
    )
  })
}

main().catch((e: unknown) => {
  send({ failed: describe(e) })
  process.exit(1)
})
