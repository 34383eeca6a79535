import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Exit, References } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { connectDocker } from "../docker/index.ts"
import { BASE_IMAGE, baseImageHash, basePackages } from "./base.ts"
import {
  DEFAULT_ALIASES,
  findUnsupported,
  normalizeReference,
  parseDockerfile,
  resolveAlias,
  rewriteFrom,
} from "./dockerfile.ts"
import { buildTaskImage, type TaskImageError } from "./index.ts"
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

  const build = async (dir: string) => {
    const exit = await Effect.runPromiseExit(
      buildTaskImage(dir, { docker }).pipe(
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
