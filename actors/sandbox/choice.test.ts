import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Cause, Effect, Exit, Option } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Bus, makeMemoryBus, subjectsFor } from "../../services/bus/index.ts"
import { Metrics, makeMetrics } from "../../services/metrics/index.ts"
import { loadTasks } from "../../tasks/index.ts"
import { writeLadder } from "../../tasks/ladder/index.ts"
import { startSandboxAndVerifier } from "../local.ts"
import { baseImageDriver, isBaseImage, LOCAL_DRIVER_WARNING, makeChosenDriver } from "./choice.ts"
import { connectDocker } from "./docker/index.ts"
import { type ExecOptions, sandboxSpec } from "./driver.ts"
import { BASE_IMAGE, wireTaskFor } from "./image/index.ts"
import { BASE_IMAGE_TIMEOUT_MS, ensureTestBaseImage } from "./image/testing.ts"
import { creationPacing } from "./index.ts"

/** The base image's files under another name: a task with an image of its own. */
const OWN_REPO = "t1-choice-test-own"
const OWN_IMAGE = `${OWN_REPO}:latest`
const root = "/tmp/t1-choice-test"
const quick: ExecOptions = { timeoutMs: 20_000, maxOutputBytes: 4096 }
const text = (b: Uint8Array) => new TextDecoder().decode(b)
const DOCKER_ID = /^[0-9a-f]{64}$/

beforeAll(async () => {
  await ensureTestBaseImage()
  await connectDocker().getImage(BASE_IMAGE).tag({ repo: OWN_REPO, tag: "latest" })
}, BASE_IMAGE_TIMEOUT_MS)

afterAll(async () => {
  await connectDocker()
    .getImage(OWN_IMAGE)
    .remove()
    .catch(() => undefined)
})

/** Makes the chosen driver, creates a sandbox per image and runs `echo` in it; what was said. */
const run = (
  choice: Parameters<typeof makeChosenDriver>[0],
  images: ReadonlyArray<string>,
  bwrap?: string,
) => {
  const said: string[] = []
  return Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const driver = yield* makeChosenDriver(choice, {
          owner: `t1-choice-${process.pid}`,
          root,
          interruptGraceMs: 500,
          ...(bwrap === undefined ? {} : { bwrap }),
          say: (line) => Effect.sync(() => said.push(line)),
        })
        const made = yield* Effect.forEach(images, (image) =>
          Effect.gen(function* () {
            const { id } = yield* driver.create(sandboxSpec({ image, ttlMs: 60_000 }))
            const out = text((yield* driver.exec(id, "echo hi", quick)).output)
            yield* driver.destroy(id)
            return { id, out }
          }),
        )
        return { kind: driver.kind, made, said }
      }),
    ),
  )
}

describe("sandbox driver choice", () => {
  it("a bwrap host paces creates for this machine, any host that may reach an engine for Docker", () => {
    expect(creationPacing("bwrap")).toEqual({ maxStarting: 16, createPerSecond: 100 })
    for (const d of ["auto", "docker", "local"] as const)
      expect(creationPacing(d)).toEqual({ maxStarting: 4, createPerSecond: 10 })
  })

  it("base images are t1-base under any tag", () => {
    expect(isBaseImage(BASE_IMAGE)).toBe(true)
    expect(isBaseImage("t1-base:a76cbc24ab0c6123")).toBe(true)
    expect(isBaseImage(OWN_IMAGE)).toBe(false)
    expect(isBaseImage("t1-base-like:latest")).toBe(false)
  })

  it("the ladder's tasks resolve to the base image under auto, so auto runs them on bwrap", async () => {
    const dir = mkdtempSync(join(tmpdir(), "t1-choice-ladder-"))
    try {
      const wired = await Effect.runPromise(
        Effect.gen(function* () {
          const written = yield* writeLadder(dir, { seed: 0, trainPerFamily: 2, evalPerFamily: 1 })
          const tasks = yield* loadTasks([written.dirs.train])
          return yield* Effect.forEach(tasks.slice(0, 3), wireTaskFor("auto"))
        }),
      )
      expect(wired.length).toBe(3)
      for (const w of wired) expect(isBaseImage(w.dockerImage)).toBe(true)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 60_000)

  it("auto runs base-image tasks on bwrap here and a task with its own image on docker, saying nothing", async () => {
    const r = await run("auto", [BASE_IMAGE, OWN_IMAGE])
    expect(r.kind).toBe("bwrap")
    expect(r.made[0]?.id).toMatch(/^bwrap-/)
    expect(r.made[1]?.id).toMatch(DOCKER_ID)
    expect(r.made.map((m) => m.out)).toEqual(["hi\n", "hi\n"])
    expect(r.said).toEqual([])
  }, 120_000)

  it("auto where bwrap cannot run falls back to docker for every task and says why once", async () => {
    const r = await run("auto", [BASE_IMAGE, BASE_IMAGE], "/nonexistent/bwrap")
    expect(r.kind).toBe("docker")
    for (const m of r.made) expect(m.id).toMatch(DOCKER_ID)
    expect(r.said).toHaveLength(1)
    expect(r.said[0]).toMatch(/auto runs every task on docker: bwrap cannot run here/)
    expect(r.said[0]).toContain("no executable /nonexistent/bwrap")
    expect(r.said[0]).toContain("apt-get install bubblewrap")
  }, 120_000)

  it("reports name what auto resolved to, as the driver it made: bwrap here, docker without bwrap", async () => {
    const here = await Effect.runPromise(baseImageDriver("auto"))
    expect(here).toBe((await run("auto", [])).kind)
    expect(here).toBe("bwrap")
    expect(await Effect.runPromise(baseImageDriver("auto", "/nonexistent/bwrap"))).toBe("docker")
    for (const choice of ["bwrap", "docker", "local"] as const)
      expect(await Effect.runPromise(baseImageDriver(choice, "/nonexistent/bwrap"))).toBe(choice)
  }, 120_000)

  it("--driver bwrap where bwrap cannot run fails at start with the reason and the fix", async () => {
    const exit = await Effect.runPromiseExit(
      Effect.scoped(makeChosenDriver("bwrap", { owner: "x", root, bwrap: "/nonexistent/bwrap" })),
    )
    const error = Exit.isFailure(exit) ? Cause.findErrorOption(exit.cause) : Option.none()
    expect(Option.isSome(error) && error.value.message).toMatch(
      /bwrap is not installed.*fix: install the package bubblewrap/,
    )
  })

  it("startSandboxAndVerifier (t1 up, exp:learn) fails before serving when T1_BWRAP is missing", async () => {
    const saved = process.env.T1_BWRAP
    process.env.T1_BWRAP = "/nonexistent/bwrap"
    try {
      const exit = await Effect.runPromiseExit(
        Effect.scoped(
          Effect.gen(function* () {
            const bus = yield* makeMemoryBus()
            yield* startSandboxAndVerifier(subjectsFor("choicetest"), { driver: "bwrap" }).pipe(
              Effect.provideService(Bus, bus),
              Effect.provideService(Metrics, makeMetrics({ defaultMetrics: false })),
            )
          }),
        ),
      )
      const error = Exit.isFailure(exit) ? Cause.findErrorOption(exit.cause) : Option.none()
      expect(Option.isSome(error) && error.value.message).toMatch(
        /sandbox engine bwrap is unavailable: bwrap is not installed/,
      )
    } finally {
      if (saved === undefined) delete process.env.T1_BWRAP
      else process.env.T1_BWRAP = saved
    }
  })

  it("local says once that it is not a security boundary", async () => {
    const r = await run("local", [BASE_IMAGE])
    expect(r.kind).toBe("local")
    expect(r.made[0]?.out).toBe("hi\n")
    expect(r.said).toEqual([LOCAL_DRIVER_WARNING])
    expect(LOCAL_DRIVER_WARNING).toContain("not a security boundary")
  }, 60_000)
})
