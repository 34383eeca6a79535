/**
 * A process whose only work is one sandbox (as a CLI's first): creates one on the bwrap driver,
 * runs `echo hi` and prints what it said. Nothing else holds the event loop, so a wait that no
 * handle keeps alive ends the process early, with nothing printed (first-start.test.ts).
 */
import { Effect, Logger } from "effect"
import { connectDocker } from "../docker/index.ts"
import { sandboxSpec } from "../driver.ts"
import { makeBwrapDriver } from "./index.ts"

Effect.runPromise(
  Effect.scoped(
    Effect.gen(function* () {
      const driver = yield* makeBwrapDriver({ docker: connectDocker() })
      const info = yield* driver.create(sandboxSpec({ cpus: 1, memoryMb: 512, ttlMs: 60_000 }))
      const r = yield* driver.exec(info.id, "echo hi", { timeoutMs: 10_000, maxOutputBytes: 100 })
      process.stdout.write(new TextDecoder().decode(r.output))
      yield* driver.destroy(info.id)
    }),
  ).pipe(Effect.provide(Logger.layer([]))),
).catch((e) => {
  process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n`)
  process.exitCode = 1
})
