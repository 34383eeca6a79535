import { cpSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { Effect, References } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { loadTask, type Task } from "../../../tasks/index.ts"
import { connectDocker } from "../docker/index.ts"
import { BASE_IMAGE } from "./index.ts"
import {
  type ResolvedTaskImage,
  type ResolveTaskImageError,
  resolveTaskImage,
  taskBuildNetwork,
} from "./task-image.ts"
import { BASE_IMAGE_TIMEOUT_MS, ensureTestBaseImage } from "./testing.ts"

const FIXTURES = resolve(dirname(fileURLToPath(import.meta.url)), "../../../tasks/fixtures")

describe("task image resolution (real engine, nothing pulled)", () => {
  const docker = connectDocker()
  const scratch = mkdtempSync(join(tmpdir(), "t1-task-image-"))
  const prebuiltRepo = `t1-test-prebuilt-${process.pid}`
  const prebuilt = `${prebuiltRepo}:latest`
  const built = new Set<string>()

  const quiet = <A, E>(effect: Effect.Effect<A, E>) =>
    effect.pipe(Effect.provideService(References.MinimumLogLevel, "Error"))

  const load = (dir: string): Promise<Task> =>
    Effect.runPromise(quiet(loadTask(dir, { cacheDir: join(scratch, "cache") })))

  /** A copy of a fixture, its task.toml or task.json replaced where given. */
  const copy = (fixture: string, name: string, config?: [string, string]): string => {
    const dir = join(scratch, name)
    cpSync(join(FIXTURES, fixture), dir, { recursive: true })
    if (config !== undefined) writeFileSync(join(dir, config[0]), config[1])
    return dir
  }

  const resolveImage = async (
    task: Task,
    aliases?: Record<string, string>,
    buildNetwork?: "none" | "default",
  ): Promise<ResolvedTaskImage | ResolveTaskImageError> => {
    const exit = await Effect.runPromiseExit(
      quiet(resolveTaskImage(task, { docker, aliases, buildNetwork })),
    )
    if (exit._tag === "Success") {
      if (exit.value.source === "built") built.add(exit.value.image)
      return exit.value
    }
    const failure = exit.cause.reasons.find((r) => r._tag === "Fail")
    if (failure?._tag !== "Fail") throw new Error(String(exit.cause))
    return failure.error
  }

  beforeAll(async () => {
    await ensureTestBaseImage()
    await docker.getImage(BASE_IMAGE).tag({ repo: prebuiltRepo, tag: "latest" })
  }, BASE_IMAGE_TIMEOUT_MS)

  afterAll(async () => {
    for (const image of [prebuilt, ...built])
      await docker
        .getImage(image)
        .remove({ force: true })
        .catch(() => undefined)
    rmSync(scratch, { recursive: true, force: true })
  })

  it("builds with the network the task allows, unless told otherwise", async () => {
    const task = await load(join(FIXTURES, "tb2/csv-column-sum"))
    expect(task.environment.allowInternet).toBe(false)
    const online: Task = { ...task, environment: { ...task.environment, allowInternet: true } }
    expect(taskBuildNetwork(task)).toBe("none")
    expect(taskBuildNetwork(online)).toBe("default")
    expect(taskBuildNetwork(task, "default")).toBe("default")
    expect(taskBuildNetwork(online, "none")).toBe("none")
  })

  it("lets a task that allows internet reach a mirror on the docker bridge while building", async () => {
    const bridge = await docker.getNetwork("bridge").inspect()
    const ipam = (bridge.IPAM?.Config ?? []) as Array<{ Gateway?: string; Subnet?: string }>
    const gateway =
      ipam.find((c) => (c.Gateway ?? "") !== "")?.Gateway ??
      `${/^(\d+\.\d+\.\d+)\./.exec(ipam[0]?.Subnet ?? "")?.[1] ?? "172.17.0"}.1`
    const server = createServer((_, response) => response.end("from the mirror\n"))
    await new Promise<void>((ok) => server.listen(0, gateway, ok))
    try {
      const { port } = server.address() as AddressInfo
      const dir = copy("tb2/csv-column-sum", "mirror-task")
      writeFileSync(
        join(dir, "environment", "Dockerfile"),
        `FROM python:3.13-slim\nWORKDIR /app\nRUN python3 -c "import urllib.request; urllib.request.urlopen('http://${gateway}:${port}/pkg', timeout=10).read()"\n`,
      )
      const toml = join(dir, "task.toml")
      const offline = await load(dir)
      const refused = await resolveImage(offline)
      expect(refused).toMatchObject({ _tag: "ImageBuildFailed", network: "none", line: 3 })
      writeFileSync(
        toml,
        '[verifier]\ntimeout_sec = 60.0\n[environment]\nallow_internet = true\nworkdir = "/app"\n',
      )
      const online = await load(dir)
      expect(online.environment.allowInternet).toBe(true)
      const overridden = await resolveImage(online, undefined, "none")
      expect(overridden).toMatchObject({ _tag: "ImageBuildFailed", network: "none" })
      const built = await resolveImage(online)
      if ("_tag" in built) throw new Error(built.message)
      expect(built.source).toBe("built")
    } finally {
      await new Promise<void>((ok) => server.close(() => ok()))
    }
  })

  it("uses a TB2 task's prebuilt image when the engine has it, without building", async () => {
    const dir = copy("tb2/csv-column-sum", "has-prebuilt")
    const toml = `version = "1.1"\n[environment]\ndocker_image = "${prebuilt}"\n`
    writeFileSync(join(dir, "task.toml"), toml)
    expect(await resolveImage(await load(dir))).toEqual({ image: prebuilt, source: "prebuilt" })
  })

  it("builds a TB2 environment offline when its prebuilt image is not on the engine", async () => {
    const task = await load(join(FIXTURES, "tb2/csv-column-sum"))
    const result = await resolveImage(task)
    if ("_tag" in result) throw new Error(result.message)
    expect(result.source).toBe("built")
    expect(result.image).toMatch(/^t1-task-csv-column-sum:[0-9a-f]{16}$/)
    const inspected = await docker.getImage(result.image).inspect()
    expect(inspected.Config.WorkingDir).toBe("/app")
    // FROM python:3.13-slim went to the base image: its layers are underneath.
    const base = await docker.getImage(BASE_IMAGE).inspect()
    expect(inspected.RootFS.Layers?.slice(0, base.RootFS.Layers?.length)).toEqual(
      base.RootFS.Layers,
    )
    // Resolving again finds the same image.
    expect(await resolveImage(task)).toEqual(result)
  })

  it("builds a TB1 environment from its compose build context, through the t-bench alias", async () => {
    const result = await resolveImage(await load(join(FIXTURES, "tb1/word-count")))
    expect(result).toMatchObject({
      source: "built",
      image: expect.stringMatching(/^t1-task-word-count:/),
    })
  })

  it("builds a compose context whose Dockerfile has another name, from a staged copy", async () => {
    const dir = copy("tb1/word-count", "named-dockerfile")
    cpSync(join(dir, "Dockerfile"), join(dir, "Dockerfile.client"))
    rmSync(join(dir, "Dockerfile"))
    writeFileSync(
      join(dir, "docker-compose.yaml"),
      "services:\n  client:\n    build:\n      context: .\n      dockerfile: Dockerfile.client\n",
    )
    const task = await load(dir)
    expect(task.environment.dockerfile).toBe("Dockerfile.client")
    const result = await resolveImage(task)
    if ("_tag" in result) throw new Error(result.message)
    expect(result).toMatchObject({
      source: "built",
      image: expect.stringMatching(/^t1-task-named-dockerfile:/),
    })
    const notes = await docker.getImage(result.image).inspect()
    expect(notes.Config.WorkingDir).toBe("/app")
  })

  it("runs a native task on the base image, or on what its image is aliased to", async () => {
    expect(await resolveImage(await load(join(FIXTURES, "native/grep-errors")))).toEqual({
      image: BASE_IMAGE,
      source: "base",
    })
    const dir = copy("native/grep-errors", "python-image", [
      "task.json",
      '{"split": "train", "image": "python:3.12-slim"}',
    ])
    const task = await load(dir)
    expect(await resolveImage(task)).toEqual({ image: BASE_IMAGE, source: "base" })
    expect(await resolveImage(task, { "python:*": prebuilt })).toEqual({
      image: prebuilt,
      source: "prebuilt",
    })
  })

  it("fails naming the task and the image when it is unknown and there is no Dockerfile", async () => {
    const dir = copy("tb2/csv-column-sum", "no-environment")
    rmSync(join(dir, "environment"), { recursive: true })
    const task = await load(dir)
    const error = await resolveImage(task)
    expect(error).toMatchObject({
      _tag: "TaskImageUnavailable",
      task: `${task.taskSet}/no-environment`,
      image: "ghcr.io/t1-fixtures/csv-column-sum:20250101",
    })
    expect("message" in error ? error.message : "").toBe(
      `task ${task.taskSet}/no-environment: image ghcr.io/t1-fixtures/csv-column-sum:20250101 is not on the engine (t1 never pulls), and the task has no Dockerfile to build it from: load it into the engine (docker load) or alias it to a local image`,
    )
    // The caller's aliases may stand in for a prebuilt image…
    expect(await resolveImage(task, { "ghcr.io/t1-fixtures/*": prebuilt })).toEqual({
      image: prebuilt,
      source: "prebuilt",
    })
    // …but the default ones do not: a TB image holds the task's environment, the base image not.
    const tbImage = copy("tb2/csv-column-sum", "t-bench-image", [
      "task.toml",
      '[environment]\ndocker_image = "ghcr.io/laude-institute/t-bench/python-3-13:20250620"\n',
    ])
    rmSync(join(tbImage, "environment"), { recursive: true })
    expect(await resolveImage(await load(tbImage))).toMatchObject({
      _tag: "TaskImageUnavailable",
      image: "ghcr.io/laude-institute/t-bench/python-3-13:20250620",
    })
    const native = await load(
      copy("native/grep-errors", "unknown-image", [
        "task.json",
        '{"split": "eval", "image": "node:20"}',
      ]),
    )
    expect(await resolveImage(native)).toMatchObject({
      _tag: "TaskImageUnavailable",
      image: "node:20",
    })
  })
})
