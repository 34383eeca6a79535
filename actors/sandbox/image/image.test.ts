import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Exit, References } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  DEFAULT_ALIASES,
  findUnsupported,
  normalizeReference,
  parseDockerfile,
  resolveAlias,
  rewriteFrom,
} from "../../../tasks/load/dockerfile.ts"
import { connectDocker } from "../docker/index.ts"
import { BASE_IMAGE, baseImageHash, basePackages } from "./base.ts"
import { BUILD_OUTPUT_LINES, buildTaskImage, type TaskImageError } from "./index.ts"
import { keepOutput, networkHint, taskBuildOptions } from "./task.ts"
import { BASE_IMAGE_TIMEOUT_MS, ensureTestBaseImage } from "./testing.ts"

describe("Dockerfile FROM rewriting", () => {
  it("sends public base images to the local base image", () => {
    for (const from of [
      "python:3.13-slim",
      "python",
      "docker.io/library/python:3.11",
      "ubuntu:22.04",
      "debian:bookworm-slim",
      "ghcr.io/laude-institute/t-bench/python-3-13:20250620",
    ])
      expect({ from, to: resolveAlias(from) }).toEqual({ from, to: "t1-base:latest" })
    expect(resolveAlias("node:20")).toBeUndefined()
    expect(resolveAlias("pythonista:1")).toBeUndefined()
  })

  it("tries the caller's aliases before the defaults", () => {
    expect(resolveAlias("python:3.13", { "python:3.13": "my-py:1" })).toBe("my-py:1")
    expect(resolveAlias("python:3.12", { "python:3.13": "my-py:1" })).toBe("t1-base:latest")
    expect(resolveAlias("node:20", { "node:*": "t1-node:latest" })).toBe("t1-node:latest")
    expect(resolveAlias("ubuntu:22.04", {}, {})).toBeUndefined()
    expect(Object.keys(DEFAULT_ALIASES)).toContain("ghcr.io/laude-institute/t-bench/*")
  })

  it("normalizes references the way the engine reads them", () => {
    expect(normalizeReference("python")).toBe("python:latest")
    expect(normalizeReference("docker.io/library/ubuntu:22.04")).toBe("ubuntu:22.04")
    expect(normalizeReference("localhost:5000/x")).toBe("localhost:5000/x:latest")
    expect(normalizeReference("ghcr.io/a/b@sha256:00")).toBe("ghcr.io/a/b@sha256:00")
  })

  it("rewrites every FROM, keeping flags, stage names, stage references and line numbers", () => {
    const source = [
      "# syntax comment",
      "ARG BASE=python:3.12",
      "FROM --platform=linux/amd64 $BASE AS build",
      "RUN echo build",
      "FROM build AS test",
      "FROM ubuntu:22.04",
      "COPY --from=build /x /x",
      "FROM scratch",
      "FROM node:20",
    ].join("\n")
    const out = rewriteFrom(source)
    const lines = out.text.split("\n")
    expect(lines).toHaveLength(9)
    expect(lines[2]).toBe("FROM --platform=linux/amd64 t1-base:latest AS build")
    expect(lines[4]).toBe("FROM build AS test")
    expect(lines[5]).toBe("FROM t1-base:latest")
    expect(lines[7]).toBe("FROM scratch")
    expect(lines[8]).toBe("FROM node:20")
    expect(out.rewrites).toEqual([
      { line: 3, from: "$BASE", to: "t1-base:latest" },
      { line: 6, from: "ubuntu:22.04", to: "t1-base:latest" },
    ])
    expect(out.baseImages).toEqual([
      { line: 3, image: "t1-base:latest" },
      { line: 6, image: "t1-base:latest" },
      { line: 9, image: "node:20" },
    ])
  })

  it("keeps line numbers when a FROM spans continuation lines", () => {
    const out = rewriteFrom("FROM \\\n  python:3.13 \\\n  AS base\nRUN true\n")
    expect(out.text.split("\n").slice(0, 4)).toEqual([
      "FROM t1-base:latest AS base",
      "",
      "",
      "RUN true",
    ])
    expect(parseDockerfile(out.text).map((i) => [i.line, i.keyword])).toEqual([
      [1, "FROM"],
      [4, "RUN"],
    ])
  })

  it("parses continuations, comments and the escape directive with line numbers", () => {
    const parsed = parseDockerfile(
      ["FROM x", "", "RUN a \\", "  # a comment inside", "  && b", "COPY . /app"].join("\n"),
    )
    expect(parsed.map((i) => [i.line, i.keyword, i.args])).toEqual([
      [1, "FROM", "x"],
      [3, "RUN", "a && b"],
      [6, "COPY", ". /app"],
    ])
    const backtick = parseDockerfile("# escape=`\nFROM x\nRUN a `\n  b\n")
    expect(backtick.map((i) => i.args)).toEqual(["x", "a b"])
  })

  it("rejects ADD of a remote source and heredocs before building", () => {
    const add = findUnsupported(parseDockerfile("FROM x\nADD https://example.invalid/a.tgz /a\n"))
    expect(add).toMatchObject({ line: 2, text: "ADD https://example.invalid/a.tgz /a" })
    expect(add?.reason).toMatch(/network/)
    expect(
      findUnsupported(parseDockerfile("FROM x\nADD --chown=1 ./local.tgz /a\n")),
    ).toBeUndefined()
    expect(findUnsupported(parseDockerfile("FROM x\nRUN <<EOF\necho hi\nEOF\n"))?.line).toBe(2)
  })

  it("hashes the base recipe by its inputs, not their order", () => {
    const a = baseImageHash("bookworm", basePackages(["git", "make"]))
    expect(baseImageHash("bookworm", basePackages(["make", "git", "git"]))).toBe(a)
    expect(baseImageHash("trixie", basePackages(["git", "make"]))).not.toBe(a)
    expect(baseImageHash("bookworm", basePackages([]))).not.toBe(a)
  })
})

describe("task build network", () => {
  it("asks the engine for the RUN steps' network, none or default", () => {
    expect(taskBuildOptions("t1-task-x:1", "Dockerfile", "none", { a: "b" })).toEqual({
      t: "t1-task-x:1",
      dockerfile: "Dockerfile",
      networkmode: "none",
      rm: true,
      forcerm: true,
      labels: { a: "b" },
    })
    expect(taskBuildOptions("t1-task-x:1", "Dockerfile", "default", {}).networkmode).toBe("default")
  })

  it("hints at the missing network only when the build had none", () => {
    const run = { keyword: "RUN" as const }
    const out = ["E: Unable to locate package curl"]
    expect(networkHint("none", run, "RUN apt-get install -y curl", out)).toContain("no network")
    expect(networkHint("default", run, "RUN apt-get install -y curl", out)).toBe("")
    expect(networkHint("none", { keyword: "COPY" as const }, "COPY a b", out)).toBe("")
    expect(networkHint("none", run, "RUN make", ["make: *** no rule"])).toBe("")
  })

  it("keeps a step's last 20 lines, long lines cut", () => {
    const kept: string[] = []
    keepOutput(kept, Array.from({ length: 45 }, (_, i) => `line ${i + 1}`).join("\n"))
    keepOutput(kept, "x".repeat(2000))
    expect(kept).toHaveLength(BUILD_OUTPUT_LINES)
    expect(kept[0]).toBe("line 27")
    expect(kept.at(-1)?.length).toBeLessThan(510)
  })
})

describe("task images (real engine, offline)", () => {
  const docker = connectDocker()
  const root = mkdtempSync(join(tmpdir(), "t1-task-images-"))
  const built: string[] = []

  const taskDir = (name: string, files: Record<string, string>): string => {
    const dir = join(root, name)
    for (const [path, body] of Object.entries(files)) {
      mkdirSync(join(dir, path, ".."), { recursive: true })
      writeFileSync(join(dir, path), body)
    }
    return dir
  }

  const build = async (dir: string, network?: "none" | "default") => {
    const exit = await Effect.runPromiseExit(
      buildTaskImage(dir, { docker, network }).pipe(
        Effect.provideService(References.MinimumLogLevel, "Warn"),
      ),
    )
    if (Exit.isSuccess(exit)) {
      built.push(exit.value.image)
      return exit.value
    }
    const failure = exit.cause.reasons.find((r) => r._tag === "Fail")
    if (failure?._tag !== "Fail") throw new Error(String(exit.cause))
    return failure.error
  }

  const failed = (result: Awaited<ReturnType<typeof build>>): TaskImageError => {
    if (!("_tag" in result)) throw new Error(`expected a failure, built ${result.image}`)
    return result
  }

  beforeAll(async () => {
    await ensureTestBaseImage()
  }, BASE_IMAGE_TIMEOUT_MS)

  afterAll(async () => {
    for (const image of built)
      await docker
        .getImage(image)
        .remove({ force: true })
        .catch(() => undefined)
    rmSync(root, { recursive: true, force: true })
  })

  it("builds a Terminal-Bench style environment from the base image, then reuses it", async () => {
    const dir = taskDir("Hello_Task", {
      "environment/Dockerfile": [
        "FROM python:3.13-slim",
        "WORKDIR /app",
        "COPY greeting.txt /app/greeting.txt",
        "RUN python -c \"print(open('/app/greeting.txt').read().upper())\" > /app/shout.txt",
      ].join("\n"),
      "environment/greeting.txt": "hello\n",
      "tests/test_outputs.py": "def test_nothing():\n    pass\n",
    })
    const first = await build(dir)
    if ("_tag" in first) throw new Error(first.message)
    expect(first.image).toMatch(/^t1-task-hello_task:[0-9a-f]{16}$/)
    expect(first.cached).toBe(false)
    expect(first.rewrites).toEqual([{ line: 1, from: "python:3.13-slim", to: BASE_IMAGE }])
    const inspected = await docker.getImage(first.image).inspect()
    expect(inspected.Config.WorkingDir).toBe("/app")
    expect(inspected.Config.Labels?.["t1.task"]).toBe("hello_task")

    const again = await build(dir)
    expect(again).toMatchObject({ image: first.image, cached: true })

    // A change to the context is a new image.
    writeFileSync(join(dir, "environment/greeting.txt"), "hi\n")
    const changed = await build(dir)
    expect("_tag" in changed ? changed.message : changed.image).not.toBe(first.image)
  })

  it("fails a step that needs the network, naming the Dockerfile line and the build output", async () => {
    const dir = taskDir("needs-curl", {
      Dockerfile: [
        "FROM ubuntu:22.04",
        "RUN echo offline works",
        "RUN apt-get install -y curl",
      ].join("\n"),
    })
    const error = failed(await build(dir))
    expect(error._tag).toBe("ImageBuildFailed")
    if (error._tag !== "ImageBuildFailed") return
    expect(error.line).toBe(3)
    expect(error.step).toBe("RUN apt-get install -y curl")
    expect(error.message).toContain(`${join(dir, "Dockerfile")}:3`)
    expect(error.message).toContain("returned a non-zero code")
    expect(error.message).toContain("no network")
    expect(error.output).toMatch(/curl/)
  })

  it("builds with the engine's default network when asked, and without any by default", async () => {
    // A package mirror stand-in on the docker bridge's gateway address of this machine.
    const bridge = await docker.getNetwork("bridge").inspect()
    const ipam = (bridge.IPAM?.Config ?? []) as Array<{ Gateway?: string; Subnet?: string }>
    const gateway =
      ipam.find((c) => c.Gateway !== undefined && c.Gateway !== "")?.Gateway ??
      ipam
        .map((c) => /^(\d+\.\d+\.\d+)\.0\/\d+$/.exec(c.Subnet ?? "")?.[1])
        .find((prefix) => prefix !== undefined)
        ?.concat(".1") ??
      "172.17.0.1"
    let hits = 0
    const server: Server = createServer((_, response) => {
      hits++
      response.end("mirror says hi\n")
    })
    await new Promise<void>((ok) => server.listen(0, gateway, ok))
    try {
      const { port } = server.address() as AddressInfo
      const url = `http://${gateway}:${port}/x`
      const dir = taskDir("needs-mirror", {
        "environment/Dockerfile": [
          "FROM python:3.13-slim",
          "RUN echo preparing",
          "RUN for i in $(seq 1 40); do echo noise-$i; done; " +
            `python3 -c "import urllib.request; print(urllib.request.urlopen('${url}', timeout=10).read().decode())" > /fetched.txt`,
          "RUN cat /fetched.txt",
        ].join("\n"),
      })
      const offline = failed(await build(dir, "none"))
      expect(offline._tag).toBe("ImageBuildFailed")
      if (offline._tag !== "ImageBuildFailed") return
      expect(offline).toMatchObject({ line: 3, network: "none" })
      expect(offline.step).toContain("urllib.request.urlopen")
      expect(offline.output).toContain("Network is unreachable")
      expect(offline.output).not.toContain("noise-1\n")
      expect(offline.output.split("\n").length).toBeLessThanOrEqual(BUILD_OUTPUT_LINES)
      expect(offline.message).toContain(`${join(dir, "environment", "Dockerfile")}:3`)
      expect(offline.message).toContain("(network: none)")
      expect(offline.message).toContain("this build had no network")
      expect(offline.message).toContain("Network is unreachable")
      expect(hits).toBe(0)

      const online = await build(dir, "default")
      if ("_tag" in online) throw new Error(online.message)
      expect(online.cached).toBe(false)
      expect(hits).toBe(1)
      // The network does not change the recipe: the same context is the same image.
      expect(await build(dir, "none")).toMatchObject({ image: online.image, cached: true })
    } finally {
      await new Promise<void>((ok) => server.close(() => ok()))
    }
  })

  it("rejects ADD of a URL up front, and a FROM the engine lacks", async () => {
    const add = failed(
      await build(
        taskDir("add-url", {
          Dockerfile: "FROM python:3.13\nADD https://example.invalid/x.tgz /x\n",
        }),
      ),
    )
    expect(add).toMatchObject({ _tag: "UnsupportedStep", line: 2 })
    const unknown = failed(
      await build(taskDir("node-task", { Dockerfile: "FROM node:20\nRUN true\n" })),
    )
    expect(unknown).toMatchObject({ _tag: "UnsupportedStep", line: 1, step: "FROM node:20" })
    expect(unknown.message).toContain("cannot pull")
    const none = failed(await build(taskDir("empty-task", { "README.md": "no Dockerfile here" })))
    expect(none._tag).toBe("TaskContextInvalid")
  })
})
