import { execFile } from "node:child_process"
import { chmodSync, cpSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { connectDocker } from "../actors/sandbox/docker/index.ts"
import { BASE_IMAGE_TIMEOUT_MS, ensureTestBaseImage } from "../actors/sandbox/image/testing.ts"
import type { VerifierOutcome } from "../actors/verifier/index.ts"
import {
  type CheckRow,
  checkExitCode,
  formatDetails,
  formatTable,
  imageFailureRow,
  judge,
  lastLines,
  type RunResult,
  rowJson,
  type SolveRun,
  scoreCell,
} from "./task-check.ts"

const outcome = (overrides: Partial<VerifierOutcome> = {}): VerifierOutcome => ({
  kind: "scored",
  missing: [],
  forgery: [],
  guarded: true,
  path: "pytest",
  pathReason: "a pytest task",
  tests: [
    { name: "test_outputs.py::test_a", outcome: "passed", durationMs: 1, message: "" },
    { name: "test_outputs.py::test_b", outcome: "passed", durationMs: 1, message: "" },
  ],
  passed: 2,
  total: 2,
  reward: 2,
  resolved: true,
  timedOut: false,
  mode: "pytest",
  notes: [],
  durationMs: 10,
  exitCode: 0,
  outputTail: new Uint8Array(0),
  ...overrides,
})

const verified = (
  o: VerifierOutcome,
  extra: { readonly solve?: SolveRun; readonly sandbox?: string } = {},
): RunResult => ({
  kind: "verified",
  outcome: o,
  ...extra,
})

const failing = outcome({
  tests: [
    { name: "test_outputs.py::test_a", outcome: "passed", durationMs: 1, message: "" },
    {
      name: "test_outputs.py::test_b",
      outcome: "failed",
      durationMs: 1,
      message: "AssertionError: 41 != 42\nmore",
    },
    { name: "test_outputs.py::test_c", outcome: "error", durationMs: 1, message: "" },
  ],
  passed: 1,
  total: 3,
  reward: 1,
  resolved: false,
  exitCode: 1,
  notes: ["the report was cut"],
  path: "rewritten-script",
  pathReason: "test.sh installs pytest with uv; the sandbox's pytest ran instead",
  outputTail: new TextEncoder().encode(
    `${Array.from({ length: 30 }, (_, i) => `out ${i + 1}`).join("\n")}\n`,
  ),
})
const nothing = outcome({
  tests: [{ name: "test_outputs.py::test_a", outcome: "failed", durationMs: 1, message: "" }],
  passed: 0,
  total: 2,
  reward: 0,
  resolved: false,
  exitCode: 1,
})
const unverifiable = outcome({
  kind: "unverifiable",
  missing: ["numpy", "pandas"],
  tests: [],
  passed: 0,
  total: 0,
  reward: 0,
  resolved: false,
})

const row = (reference: RunResult, noop: RunResult): CheckRow => {
  const { status, problems } = judge(reference, noop)
  return {
    task: "t",
    image: "img",
    reference,
    noop,
    seconds: 1.25,
    status,
    ok: status === "ok",
    problems,
  }
}

describe("tasks check report", () => {
  it("judges a task ok only when the reference resolves and the no-op does not", () => {
    expect(judge(verified(outcome()), verified(nothing))).toEqual({ status: "ok", problems: [] })
    const notResolved = judge(
      verified(failing, { solve: { exitCode: 2, timedOut: false, outputTail: "boom" } }),
      verified(nothing),
    )
    expect(notResolved.status).toBe("failed")
    expect(notResolved.problems).toEqual([
      "the reference solution passes 1/3 tests; the solution exited 2",
    ])
    const noopResolves = judge(verified(outcome()), verified(outcome()))
    expect(noopResolves.status).toBe("failed")
    expect(noopResolves.problems[0]).toMatch(/a no-op agent resolves the task \(2\/2\)/)
    const error = judge({ kind: "error", error: "sandbox: engine gone\nmore" }, verified(nothing))
    expect(error).toEqual({ status: "failed", problems: ["reference run: sandbox: engine gone"] })
  })

  it("makes an unverifiable run its own result, and a real failure wins over it", () => {
    const u = judge(verified(unverifiable), verified(unverifiable))
    expect(u.status).toBe("unverifiable")
    expect(u.problems[0]).toContain("(missing: numpy, pandas)")
    expect(judge(verified(unverifiable), verified(outcome())).status).toBe("failed")
    expect(scoreCell(verified(unverifiable))).toBe("unverifiable (missing: numpy, pandas)")
    expect(scoreCell(verified(failing))).toBe("1/3")
    expect(scoreCell(verified(outcome({ timedOut: true })))).toBe("2/2 (timed out)")
    expect(scoreCell({ kind: "error", error: "image: x\ny" })).toBe("error: image: x")
  })

  it("shows a forged run as FORGED, never ok, with its evidence; the check fails", () => {
    const evidence =
      "canary test_rows_0a1b2c.py::test_keys_3d4e5f must fail but passed in pytest's report report.xml"
    const forged = outcome({
      kind: "forged",
      forgery: [evidence],
      passed: 0,
      reward: 0,
      resolved: false,
    })
    // A reference solution that forges its way through, beside an honest no-op.
    const r = row(verified(forged), verified(nothing))
    expect([r.status, r.ok, r.problems]).toEqual([
      "forged",
      false,
      [`reference run FORGED: ${evidence}`],
    ])
    expect(scoreCell(verified(forged))).toBe("FORGED 0/2")
    expect(judge(verified(outcome()), verified(forged)).problems).toEqual([
      `no-op run FORGED: ${evidence}`,
    ])
    expect(checkExitCode([row(verified(outcome()), verified(nothing)), r])).toBe(1)
    const table = formatTable([r])
    expect(table).toMatch(/FORGED 0\/2 .* FORGED$/m)
    expect(table).not.toMatch(/ ok$/m)
    const details = formatDetails([r])
    expect(details).toContain("--- t: FORGED")
    expect(details).toContain("result: FORGED, scored 0 of 2")
    expect(details).toContain(`forgery evidence:\n      - ${evidence}`)
    expect(rowJson(r)).toMatchObject({
      status: "forged",
      reference: { kind: "forged", forgery: [evidence] },
    })
  })

  it("exits 1 on any failure, else 3 on any unverifiable task, else 0", () => {
    const ok = row(verified(outcome()), verified(nothing))
    const bad = row(verified(failing), verified(nothing))
    const u = row(verified(unverifiable), verified(unverifiable))
    expect(checkExitCode([ok])).toBe(0)
    expect(checkExitCode([])).toBe(0)
    expect(checkExitCode([ok, u])).toBe(3)
    expect(checkExitCode([u, bad, ok])).toBe(1)
    expect(checkExitCode([imageFailureRow("x", "building failed")])).toBe(1)
  })

  it("cuts table cells to one line of 60 characters, and prints everything below", () => {
    const long = `building t1-task-x:1 (network: none) failed at /t/environment/Dockerfile:3: RUN apt-get install -y curl: exit 100\n--- output of the step (last lines) ---\nE: Unable to locate package curl`
    const rows = [
      imageFailureRow("broken", long),
      row(verified(failing), verified(nothing)),
      row(verified(unverifiable), verified(unverifiable)),
      row(verified(outcome()), verified(nothing)),
    ]
    const table = formatTable(rows)
    for (const line of table.split("\n")) expect(line.length).toBeLessThan(200)
    expect(table).toContain("UNVERIFIABLE")
    expect(table).toContain("FAIL")
    expect(table).not.toContain("Unable to locate")
    const details = formatDetails(rows)
    // The full image error, with the step's output.
    expect(details).toContain("/t/environment/Dockerfile:3: RUN apt-get install -y curl")
    expect(details).toContain("E: Unable to locate package curl")
    // Tests not passed, notes, path and the verifier output's last 20 lines.
    expect(details).toContain("test_outputs.py::test_b (failed): AssertionError: 41 != 42")
    expect(details).toContain("test_outputs.py::test_c (error)")
    expect(details).not.toContain("test_outputs.py::test_a (")
    expect(details).toContain("- the report was cut")
    expect(details).toContain(
      "path: rewritten-script: test.sh installs pytest with uv; the sandbox's pytest ran instead",
    )
    expect(details).toContain("| out 30")
    expect(details).toContain("| out 11")
    expect(details).not.toContain("| out 10\n")
    expect(details).toContain("unverifiable (missing: numpy, pandas)")
    // Tasks that are ok have no details.
    expect(details.match(/^--- /gm)).toHaveLength(3)
  })

  it("writes one JSON object per task", () => {
    const json = rowJson(
      row(
        verified(failing, { solve: { exitCode: 1, timedOut: false, outputTail: "x" } }),
        verified(nothing),
      ),
    )
    expect(JSON.parse(JSON.stringify(json))).toMatchObject({
      task: "t",
      ok: false,
      status: "failed",
      seconds: 1.3,
      problems: ["the reference solution passes 1/3 tests; the solution exited 1"],
      reference: {
        passed: 1,
        total: 3,
        kind: "scored",
        missing: [],
        path: "rewritten-script",
        pathReason: "test.sh installs pytest with uv; the sandbox's pytest ran instead",
        mode: "pytest",
        failingTests: ["test_outputs.py::test_b", "test_outputs.py::test_c"],
        notes: ["the report was cut"],
        solve: { exitCode: 1, timedOut: false },
      },
      noop: { passed: 0, total: 2 },
    })
    expect(rowJson(imageFailureRow("x", "no Dockerfile"))).toMatchObject({
      reference: { error: "image: no Dockerfile" },
      noop: { error: "not run: no image" },
      problems: ["image: no Dockerfile"],
    })
    expect(lastLines("a\nb\nc\n\n", 2)).toBe("b\nc")
  })
})

const BIN = fileURLToPath(new URL("./bin/t1.js", import.meta.url))
const FIXTURES = fileURLToPath(new URL("../tasks/fixtures", import.meta.url))

const t1 = (args: ReadonlyArray<string>) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { timeout: 120_000, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) =>
        resolve({ code: error === null ? 0 : Number(error.code ?? 1), stdout, stderr }),
    )
  })

describe("t1 tasks check (real engine)", () => {
  const docker = connectDocker()
  const scratch = mkdtempSync(join(tmpdir(), "t1-tasks-check-"))
  const kept: string[] = []

  /** A copy of the csv-column-sum fixture with some files replaced. */
  const task = (name: string, files: Record<string, string>): string => {
    const dir = join(scratch, name)
    cpSync(join(FIXTURES, "tb2", "csv-column-sum"), dir, { recursive: true })
    for (const [path, body] of Object.entries(files)) {
      writeFileSync(join(dir, path), body)
      if (path.endsWith(".sh")) chmodSync(join(dir, path), 0o755)
    }
    return dir
  }

  beforeAll(async () => {
    await ensureTestBaseImage()
  }, BASE_IMAGE_TIMEOUT_MS)

  afterAll(async () => {
    for (const id of kept)
      await docker
        .getContainer(id)
        .remove({ force: true })
        .catch(() => undefined)
    const images = await docker.listImages({ filters: { label: ["t1.task"] } })
    for (const image of images)
      for (const tag of image.RepoTags ?? [])
        if (tag.startsWith("t1-task-") && tag.includes(`-${process.pid}:`))
          await docker
            .getImage(tag)
            .remove({ force: true })
            .catch(() => undefined)
    rmSync(scratch, { recursive: true, force: true })
  })

  it("runs solve.sh from the workdir with the whole solution folder, and reports failures in full", async () => {
    const pid = process.pid
    const helper = task(`helper-folder-${pid}`, {
      // Relative paths: the solution runs in /app; helper.sh only exists if the folder went in.
      "solution/solve.sh": "#!/bin/bash\nset -e\nbash /solution/helper.sh > total.txt\n",
      "solution/helper.sh": `#!/bin/bash\npython3 -c "import csv; print(f'{sum(float(r[\\"amount\\"]) for r in csv.DictReader(open(\\"sales.csv\\"))):.2f}')"\n`,
    })
    const broken = task(`broken-build-${pid}`, {
      "environment/Dockerfile": [
        "FROM python:3.13-slim",
        "WORKDIR /app",
        "RUN for i in $(seq 1 30); do echo build-line-$i; done; exit 3",
      ].join("\n"),
    })
    const wrong = task(`wrong-total-${pid}`, {
      "solution/solve.sh":
        "#!/bin/bash\necho 'partial output'\necho 1.00 > /app/total.txt\nexit 4\n",
    })
    const r = await t1([
      "tasks",
      "check",
      helper,
      broken,
      wrong,
      "--driver",
      "docker",
      "--json",
      "--concurrency",
      "3",
    ])
    expect(r.code).toBe(1)
    const lines = r.stdout.trim().split("\n")
    expect(lines).toHaveLength(3)
    const byTask = new Map(
      lines.map((l) => {
        const o = JSON.parse(l) as { task: string } & Record<string, unknown>
        return [o.task, o]
      }),
    )
    expect(byTask.get(`helper-folder-${pid}`)).toMatchObject({
      ok: true,
      status: "ok",
      reference: { passed: 2, total: 2, solve: { exitCode: 0 } },
      noop: { passed: 0 },
    })
    const b = byTask.get(`broken-build-${pid}`)
    expect(b).toMatchObject({ ok: false, status: "failed", noop: { error: "not run: no image" } })
    const w = byTask.get(`wrong-total-${pid}`)
    expect(w).toMatchObject({
      ok: false,
      reference: { passed: 1, total: 2, solve: { exitCode: 4 } },
      problems: ["the reference solution passes 1/2 tests; the solution exited 4"],
    })
    // The table and the details go to stderr with --json, in full.
    expect(r.stderr).toMatch(/task\s+reference\s+no-op\s+seconds\s+result/)
    expect(r.stderr).toContain(`${join(broken, "environment", "Dockerfile")}:3`)
    expect(r.stderr).toContain("(network: none)")
    expect(r.stderr).toContain("build-line-30")
    expect(r.stderr).not.toContain("build-line-10\n")
    expect(r.stderr).toContain("test_total_is_the_sum_of_amounts (failed)")
    expect(r.stderr).toContain("partial output")
    expect(r.stderr).toContain("verifier output (last 20 lines)")
    expect(r.stderr).toContain("2 task(s) failed the check")
  }, 120_000)

  it("exits 3 when the only trouble is a task whose tests cannot run here", async () => {
    const r = await t1([
      "tasks",
      "check",
      join(FIXTURES, "unverifiable", "matrix-trace"),
      join(FIXTURES, "tb2", "csv-column-sum"),
      "--driver",
      "docker",
      "--json",
    ])
    expect(r.code).toBe(3)
    const rows = r.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { task: string; status: string; reference: object })
    expect(rows.find((o) => o.task === "matrix-trace")).toMatchObject({
      status: "unverifiable",
      ok: false,
      reference: { kind: "unverifiable", missing: ["numpy==2.3.2"] },
    })
    expect(rows.find((o) => o.task === "csv-column-sum")).toMatchObject({ status: "ok" })
    expect(r.stderr).toMatch(/matrix-trace\s+unverifiable \(missing: numpy==2\.3\.2\)/)
    expect(r.stderr).toContain("cannot be verified here (exit 3): matrix-trace")
  }, 120_000)

  it("checks base-image tasks on the bwrap driver", async () => {
    const bundled = fileURLToPath(
      new URL("../tasks/bundled/train/word-frequency-easy-s1-000", import.meta.url),
    )
    const r = await t1([
      "tasks",
      "check",
      bundled,
      join(FIXTURES, "tb2", "csv-column-sum"),
      "--driver",
      "bwrap",
      "--json",
    ])
    expect(r.code, r.stderr).toBe(0)
    const rows = r.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { task: string; status: string })
    expect(rows.map((o) => o.status)).toEqual(["ok", "ok"])
  }, 180_000)

  it("keeps the sandboxes with --keep and says how to get in", async () => {
    const dir = task(`kept-${process.pid}`, {})
    const r = await t1(["tasks", "check", dir, "--driver", "docker", "--keep"])
    expect(r.code).toBe(0)
    const ids = [...r.stderr.matchAll(/docker exec -it ([0-9a-f]{12}) bash/g)].map(
      (m) => m[1] ?? "",
    )
    expect(ids).toHaveLength(2)
    kept.push(...ids)
    expect(r.stderr).toContain("docker rm -f")
    const inspected = await docker.getContainer(ids[0] ?? "").inspect()
    expect(inspected.State.Running).toBe(true)
    const expires = Number(inspected.Config.Labels?.["t1.expires-at"])
    expect(expires - Date.now()).toBeGreaterThan(24 * 3600_000)
  }, 120_000)
})
