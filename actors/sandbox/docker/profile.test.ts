import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import Dockerode from "dockerode"
import { afterAll, describe, expect, it } from "vitest"
import { connectDocker } from "./engine.ts"
import { PROFILE_ENV, profileEngineCalls, routeOf } from "./profile.ts"

const dir = mkdtempSync(join(tmpdir(), "t1-profile-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const lines = (file: string) =>
  readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as { op: string; ms: number; id: string })

describe("engine-call profile", () => {
  it("folds ids out of routes and keeps the container's", () => {
    const id = "a".repeat(64)
    expect(routeOf("POST", `/v1.41/containers/${id}/start?`)).toEqual({
      op: "POST /containers/:id/start",
      id,
    })
    expect(routeOf("GET", "/exec/0123456789abcdef/json")).toEqual({
      op: "GET /exec/:id/json",
      id: "",
    })
    expect(routeOf("POST", "/containers/create?name=x").op).toBe("POST /containers/create")
    expect(routeOf("GET", "/images/t1-base:latest/json").op).toBe("GET /images/:name/json")
  })

  it("logs every engine call of a client made with T1_DOCKER_PROFILE set, and none without", async () => {
    const file = join(dir, "calls.jsonl")
    process.env[PROFILE_ENV] = file
    try {
      await connectDocker().listContainers({ limit: 1 })
    } finally {
      delete process.env[PROFILE_ENV]
    }
    await connectDocker().listContainers({ limit: 1 })
    const logged = lines(file)
    expect(logged.map((l) => l.op)).toEqual(["GET /containers/json"])
    expect(logged[0]?.ms).toBeGreaterThanOrEqual(0)
    await profileEngineCalls(new Dockerode(), file).ping()
    expect(lines(file).map((l) => l.op)).toEqual(["GET /containers/json", "GET /_ping"])
  })
})
