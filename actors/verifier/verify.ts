import { randomBytes } from "node:crypto"
import { posix } from "node:path"
import { Clock, Effect } from "effect"
import {
  overlayFiles,
  packDirectory,
  singleFileTar,
  type TestsArchive,
} from "../../services/tar/index.ts"
import type { TaskEnvironment, TaskVerifier } from "../../tasks/task.ts"
import { appendCanaries, type Canaries, canaryEvidence, isCanary, makeCanaries } from "./canary.ts"
import { InvalidVerifierTask, type VerifierError, VerifierInfraError } from "./errors.ts"
import { guard } from "./guard.ts"
import { parseJunitXml } from "./junit.ts"
import {
  MAX_OUTPUT_TAIL_BYTES,
  OUTCOME_RANK,
  type Score,
  scoreTests,
  type TestCaseResult,
  truncateUtf8,
  type VerifierMode,
  type VerifierOutcome,
  type VerifierPath,
} from "./outcome.ts"
import { type ShellResult, VerifierSandbox, type VerifierSandboxShape } from "./port.ts"
import { blamePristine } from "./pristine.ts"
import { probePackages } from "./probe.ts"
import { parseRewardJson, parseRewardText, type RewardFile } from "./reward-files.ts"
import { NO_MAXFAIL, PYTEST_MAIN, planTestScript, type Requirement } from "./rewrite.ts"
import {
  type FileRead,
  readSandboxFile,
  readSandboxFiles,
  runBookkeeping,
  runScript,
  shellQuote,
} from "./shell.ts"
import { parsePytestSummary } from "./summary.ts"
import { checkTripwire, fingerprints } from "./tripwire.ts"

/** What the verifier needs of a task; a loaded `Task` is one. */
export interface VerifiableTask {
  readonly id: string
  readonly environment: Pick<TaskEnvironment, "allowInternet" | "workdir">
  /** `testsDir` may be "" when the tests come as an archive (VerifyOptions.tests). */
  readonly verifier: TaskVerifier
}

export interface VerifyOptions {
  /** The tests as an archive (from a request or the object store) instead of verifier.testsDir. */
  readonly tests?: TestsArchive
  /** A script task's command, instead of `bash <testDir>/<script>`. */
  readonly command?: string
  /** Where script verifiers write reward.txt, reward.json or ctrf.json. */
  readonly logsDir?: string
  /** The interpreter that runs pytest in the sandbox. */
  readonly python?: string
  /** Reports and reward files larger than this are not read. */
  readonly maxReportBytes?: number
  /** Output of the test command kept (head and tail); the report file is what counts. */
  readonly maxOutputBytes?: number
}

export const DEFAULT_LOGS_DIR = "/logs/verifier"
export const DEFAULT_MAX_REPORT_BYTES = 8 * 1024 * 1024
const DEFAULT_MAX_OUTPUT_BYTES = 256 * 1024

/** Paths the verifier empties and refills must not be these, nor hold the workdir. */
const SYSTEM_DIRS = new Set(
  ["/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32"]
    .concat(["/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var"])
    .concat(["/logs"]),
)

const isWithin = (path: string, dir: string) =>
  path === dir || path.startsWith(dir === "/" ? "/" : `${dir}/`)

const checkDir = (field: string, path: string, workdir: string) =>
  Effect.suspend(() => {
    const fail = (reason: string) => Effect.fail(new InvalidVerifierTask({ field, reason }))
    if (!posix.isAbsolute(path) || /[\0\n\r]/.test(path))
      return fail(`must be an absolute path, got ${JSON.stringify(path)}`)
    const normal = posix.normalize(path).replace(/(.)\/+$/, "$1")
    if (SYSTEM_DIRS.has(normal)) return fail(`${normal} is a system directory`)
    if (isWithin(workdir, normal)) return fail(`${normal} holds the workdir ${workdir}`)
    return Effect.succeed(normal)
  })

/** Where one verification keeps its files: the run's own, so the agent cannot pre-write them. */
interface Places {
  readonly testDir: string
  readonly logsDir: string
  readonly workdir: string
  readonly nonce: string
  /** Fresh and private (mode 700), made just before the run: the report goes here. */
  readonly scratch: string
}

/**
 * Verifies a finished episode: copies a fresh copy of the task's tests into the sandbox, runs
 * them within the task's verifier timeout, and scores the per-test results (reward = tests
 * passed). A verifier stopped at its timeout is a task outcome (`timedOut`); a failure of the
 * machinery is a VerifierInfraError, never a reward of 0.
 */
export const verifyEpisode = (
  task: VerifiableTask,
  options: VerifyOptions = {},
): Effect.Effect<VerifierOutcome, VerifierError, VerifierSandbox> =>
  Effect.gen(function* () {
    const given = yield* VerifierSandbox
    const started = yield* Clock.currentTimeMillis
    const v = task.verifier
    const workdir = posix.normalize(task.environment.workdir || "/")
    if (!(v.timeoutSec > 0))
      return yield* new InvalidVerifierTask({
        field: "verifier.timeoutSec",
        reason: `must be > 0, got ${v.timeoutSec}`,
      })
    const nonce = randomBytes(8).toString("hex")
    const places: Places = {
      testDir: yield* checkDir("verifier.testDir", v.testDir, workdir),
      logsDir: yield* checkDir("logsDir", options.logsDir ?? DEFAULT_LOGS_DIR, workdir),
      workdir,
      nonce,
      scratch: `/tmp/t1-verify-${nonce}`,
    }
    const archive = options.tests ?? (yield* packTests(v))
    const guarded = yield* guard(given, { workdir })
    const elapsed = Effect.map(Clock.currentTimeMillis, (now) => now - started)
    if (guarded.unverifiable !== undefined)
      return unverifiableOutcome({
        path: v.kind === "pytest" ? "pytest" : "script",
        pathReason: `nothing ran: ${guarded.unverifiable}`,
        expectedTests: v.expectedTests,
        guarded: true,
        notes: [guarded.unverifiable],
        durationMs: yield* elapsed,
      })
    const sandbox = guarded.sandbox
    const python = options.python ?? guarded.python ?? "python3"
    const canaries = yield* canariesFor(archive)
    const plan = yield* planRun(sandbox, task, archive, places, python, options, canaries.canaries)
    const notes: string[] = [...guarded.notes, ...plan.notes]
    if (plan.kind === "script")
      notes.push(
        "the test script ran as written: no canary tests ran beside it, so only the tripwire on the test files can tell a forged result",
      )
    else if (plan.kind !== "unverifiable" && canaries.note !== undefined) notes.push(canaries.note)
    const described = { path: plan.path, pathReason: plan.reason }

    if (plan.kind === "unverifiable") {
      return unverifiableOutcome({
        ...described,
        missing: plan.missing.map((r) => r.spec),
        expectedTests: v.expectedTests,
        guarded: guarded.guarded,
        notes,
        durationMs: yield* elapsed,
      })
    }

    // The verifier's own files (the rewritten script, the canaries) go over the task's.
    const own = new Map<string, Uint8Array>()
    if (plan.kind === "rewritten") own.set(plan.script, new TextEncoder().encode(plan.text))
    const canary =
      plan.kind === "script"
        ? undefined
        : plan.kind === "pytest" && canaries.canaries !== undefined
          ? yield* appendToTaskTests(archive, canaries.canaries, canaries.pattern)
          : canaries.canaries
    if (canary !== undefined) {
      own.set(canary.file, new TextEncoder().encode(canary.text))
      for (const a of canary.appended) own.set(a.path, new TextEncoder().encode(a.text))
    }
    const expected = yield* Effect.promise(() =>
      fingerprints(
        archive.tar,
        [...own].map(([path, bytes]) => ({ path, bytes })),
      ),
    )
    yield* prepare(sandbox, places)
    yield* upload(
      sandbox,
      own.size === 0
        ? archive.tar
        : yield* Effect.promise(() =>
            overlayFiles(
              archive.tar,
              [...own].map(([path, bytes]) => ({ path, bytes })),
              0o600,
            ),
          ),
      places,
    )
    const run = yield* runTests(sandbox, task, plan, places, python, options)
    if (run.timedOut)
      notes.push(`the tests were stopped at the verifier timeout of ${v.timeoutSec} s`)
    else if (run.sessionRestarted)
      notes.push("the test command's shell died under it (a test killed it); results as reported")

    const maxReportBytes = options.maxReportBytes ?? DEFAULT_MAX_REPORT_BYTES
    const found =
      plan.kind === "script"
        ? yield* collectScript(sandbox, places, run, maxReportBytes, v.expectedTests)
        : yield* collectPytest(sandbox, plan, places, run, maxReportBytes, canary)
    notes.push(...found.notes)
    // Output is what code inside pytest can print: with the guard on, only the report counts.
    if (guarded.guarded && plan.kind !== "script" && found.mode === "pytest-summary")
      return unverifiableOutcome({
        ...described,
        expectedTests: v.expectedTests,
        guarded: guarded.guarded,
        notes: [
          ...notes,
          "pytest wrote no report, and a guarded verification does not take results from the test command's output",
        ],
        durationMs: yield* elapsed,
        run,
      })
    const ownTests =
      canary === undefined ? found.tests : found.tests.filter((t) => !isCanary(canary, t.name))
    // Nothing ran to completion: each test pytest can collect here counts as one not passed,
    // so that a run that died early scores 0/<tests> rather than 0/1.
    const failedEarly =
      found.score === undefined &&
      (found.nothingReported || found.mode === "exit-code") &&
      !(ownTests.length === 1 && ownTests[0]?.outcome === "passed")
    const collected =
      failedEarly && [...archive.files].some((f) => f.endsWith(".py"))
        ? (yield* collectTestIds(
            sandbox,
            places,
            python,
            configOf(archive, places.testDir),
          )).filter((name) => canary === undefined || !isCanary(canary, name))
        : []
    const tests =
      collected.length > 0
        ? collected.map((name) => ({
            name,
            outcome: "error" as const,
            durationMs: 0,
            message: `did not run: ${ownTests[0]?.message.slice(0, 1024) || "the test command ended before reporting results"}`,
          }))
        : ownTests
    if (collected.length > 0)
      notes.push(
        `no per-test results: the ${collected.length} tests pytest collects here count as not passed`,
      )
    const score =
      found.score ??
      scoreTests(tests, {
        expectedTests: v.expectedTests,
        apply: run.timedOut || found.nothingReported || failedEarly,
      })
    notes.push(...blamePristine(tests, guarded.pristineFiles))
    const tripwire = yield* checkTripwire(sandbox, places.testDir, expected, places.scratch)
    if (tripwire.kind === "unchecked")
      notes.push(`the test files were not checked for changes after the run: ${tripwire.reason}`)
    const forgery = [...found.forgery, ...(tripwire.kind === "checked" ? tripwire.evidence : [])]
    // Leaving the scratch directory behind is harmless; the sandbox is destroyed after this.
    if (!tripwire.removed)
      yield* Effect.ignore(runBookkeeping(sandbox, "cleaning up", `rm -rf -- ${places.scratch}`))
    return {
      kind: forgery.length > 0 ? "forged" : "scored",
      missing: [],
      forgery,
      guarded: guarded.guarded,
      ...described,
      tests,
      ...score,
      // Forging earns nothing: the episode is scored, at 0.
      ...(forgery.length > 0 ? { passed: 0, reward: 0, resolved: false } : {}),
      timedOut: run.timedOut,
      mode: found.mode,
      notes,
      durationMs: yield* elapsed,
      exitCode: run.timedOut ? -1 : run.exitCode,
      outputTail: run.output.subarray(Math.max(0, run.output.byteLength - MAX_OUTPUT_TAIL_BYTES)),
    } satisfies VerifierOutcome
  })

/** No score exists (the tests cannot run, or ran with nothing trustworthy to read): reward 0, excluded. */
const unverifiableOutcome = (o: {
  readonly path: VerifierPath
  readonly pathReason: string
  readonly missing?: ReadonlyArray<string>
  readonly expectedTests: number
  readonly guarded: boolean
  readonly notes: ReadonlyArray<string>
  readonly durationMs: number
  /** The test command, when it ran. */
  readonly run?: ShellResult
}): VerifierOutcome => ({
  kind: "unverifiable",
  missing: o.missing ?? [],
  forgery: [],
  guarded: o.guarded,
  path: o.path,
  pathReason: o.pathReason,
  tests: [],
  passed: 0,
  total: o.expectedTests,
  reward: 0,
  resolved: false,
  timedOut: o.run?.timedOut ?? false,
  mode: "none",
  notes: o.notes,
  durationMs: o.durationMs,
  exitCode: o.run === undefined || o.run.timedOut ? -1 : o.run.exitCode,
  outputTail:
    o.run === undefined
      ? new Uint8Array(0)
      : o.run.output.subarray(Math.max(0, o.run.output.byteLength - MAX_OUTPUT_TAIL_BYTES)),
})

const packTests = (v: TaskVerifier): Effect.Effect<TestsArchive, InvalidVerifierTask> => {
  const invalid = (reason: string) =>
    new InvalidVerifierTask({ field: "verifier.testsDir", reason })
  if (v.testsDir === "") return Effect.fail(invalid("no tests directory and no tests archive"))
  const extra =
    v.kind === "script" && v.script !== undefined && v.scriptPath !== undefined
      ? { name: v.script, path: v.scriptPath }
      : undefined
  return Effect.tryPromise({
    try: () => packDirectory(v.testsDir, extra),
    catch: (e) => invalid(e instanceof Error ? e.message : String(e)),
  })
}

/** What runs, and why (`reason`, reported as the outcome's pathReason). */
type Plan =
  | {
      readonly kind: "pytest"
      readonly path: VerifierPath
      readonly reason: string
      readonly targets: ReadonlyArray<string>
      /** The ini file the tests bring, or /dev/null: never one the agent left above them. */
      readonly config: string
      readonly notes: ReadonlyArray<string>
    }
  | {
      readonly kind: "rewritten"
      readonly path: VerifierPath
      readonly reason: string
      /** The script's name in the test directory, where the rewritten text replaces it. */
      readonly script: string
      readonly text: string
      /** Reports written by the script's pytest calls, in order. */
      readonly reports: ReadonlyArray<string>
      /** Per call (report): the canary file was added to it, so its report must show it. */
      readonly canaryCalls: ReadonlyArray<boolean>
      readonly notes: ReadonlyArray<string>
    }
  | {
      readonly kind: "script"
      readonly path: VerifierPath
      readonly reason: string
      readonly command: string
      readonly notes: ReadonlyArray<string>
    }
  | {
      readonly kind: "unverifiable"
      readonly path: VerifierPath
      readonly reason: string
      readonly missing: ReadonlyArray<Requirement>
      readonly notes: ReadonlyArray<string>
    }

const CONFIG_FILES = ["pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg"]

/** The ini file the tests bring, or /dev/null. */
const configOf = (archive: TestsArchive, testDir: string): string => {
  const configFile = CONFIG_FILES.find((name) => archive.files.has(name))
  return configFile === undefined ? "/dev/null" : `${testDir}/${configFile}`
}

/**
 * Fresh canaries for this run, named as the task's ini file says test files are (python_files),
 * or none (with why) when it renames test functions (python_functions) or names test files in a
 * way t1 cannot follow: pytest's own discovery must find the canary file like any other.
 */
const canariesFor = (
  archive: TestsArchive,
): Effect.Effect<{
  readonly canaries: Canaries | undefined
  readonly note: string | undefined
  /** How the task names its test files (python_files), one `*`. */
  readonly pattern: string
}> =>
  Effect.gen(function* () {
    const configFile = CONFIG_FILES.find((name) => archive.files.has(name))
    const text =
      configFile === undefined
        ? ""
        : decode((yield* Effect.promise(() => archive.read(configFile))) ?? new Uint8Array(0))
    if (configFile !== undefined && /^\s*python_functions\s*=/m.test(text))
      return {
        canaries: undefined,
        note: `no canary tests ran: ${configFile} sets python_functions; only the tripwire on the test files can tell a forged result`,
        pattern: "",
      }
    const taken = new Set([...archive.files].map((f) => posix.basename(f)))
    const files = /^\s*python_files\s*=(.*)$/m.exec(text)?.[1]
    if (files === undefined)
      return { canaries: makeCanaries(taken), note: undefined, pattern: "test_*.py" }
    // `check_*.py`, `*_check.py`: one wildcard in a plain file name (ini words or TOML strings).
    const pattern = files.match(/[\w.-]*\*[\w.-]*\.py\b/)?.[0]
    if (pattern === undefined)
      return {
        canaries: undefined,
        note: `no canary tests ran: ${configFile} names test files in a way t1 does not follow (python_files =${files}); only the tripwire on the test files can tell a forged result`,
        pattern: "",
      }
    return { canaries: makeCanaries(taken, pattern), note: undefined, pattern }
  })

/** Test files larger than this get no appended canaries (they are read and re-sent whole). */
const MAX_APPEND_BYTES = 1024 * 1024

/**
 * `canaries` plus a must-pass and a must-fail test appended to each of the task's test files
 * pytest collects (named as `pattern`, `test_*.py` by default, which pytest also reads as
 * `*_test.py`), UTF-8 and not over MAX_APPEND_BYTES.
 */
const appendToTaskTests = (archive: TestsArchive, canaries: Canaries, pattern: string) =>
  Effect.gen(function* () {
    const patterns = pattern === "test_*.py" ? ["test_*.py", "*_test.py"] : [pattern]
    const matches = (file: string) =>
      patterns.some((p) => {
        const [head = "", tail = ""] = p.split("*")
        const base = posix.basename(file)
        return (
          base.length > head.length + tail.length && base.startsWith(head) && base.endsWith(tail)
        )
      })
    const files: { path: string; text: string }[] = []
    for (const path of [...archive.files].sort()) {
      if (!matches(path) || path === canaries.file) continue
      const bytes = yield* Effect.promise(() => archive.read(path))
      if (bytes === undefined || bytes.byteLength > MAX_APPEND_BYTES) continue
      const text = new TextDecoder("utf-8", { fatal: false }).decode(bytes)
      if (text.includes("\uFFFD")) continue
      files.push({ path, text })
    }
    return appendCanaries(canaries, files)
  })

/**
 * Decides what runs. A script that bootstraps its test runner over the network is rewritten to
 * run the sandbox's pytest when the sandbox has pytest and whatever else the script installs
 * (else, when something is missing, the verification is unverifiable); the decision rests on
 * what the script does and what the sandbox has, never on the task's network declaration.
 */
const planRun = (
  sandbox: VerifierSandboxShape,
  task: VerifiableTask,
  archive: TestsArchive,
  places: Places,
  python: string,
  options: VerifyOptions,
  canaries: Canaries | undefined,
): Effect.Effect<Plan, InvalidVerifierTask | VerifierInfraError> =>
  Effect.gen(function* () {
    const { testDir } = places
    const config = configOf(archive, testDir)
    const v = task.verifier
    if (v.kind === "pytest")
      return {
        kind: "pytest",
        path: "pytest",
        reason: "a pytest task: t1 runs pytest on its test files",
        // The canary file lies there, named as the task names test files: discovery finds it.
        targets: [testDir],
        config,
        notes: [],
      }
    if (options.command !== undefined)
      return {
        kind: "script",
        path: "script",
        reason: "the task gives its test command",
        command: options.command,
        notes: [],
      }
    const script = v.script === undefined ? "" : posix.normalize(v.script)
    if (script === "" || script.startsWith("..") || posix.isAbsolute(script))
      return yield* new InvalidVerifierTask({
        field: "verifier.script",
        reason: `must name a file inside the test directory, got ${JSON.stringify(v.script)}`,
      })
    const body = yield* Effect.promise(() => archive.read(script))
    if (body === undefined)
      return yield* new InvalidVerifierTask({
        field: "verifier.script",
        reason: `${script} is not among the test files`,
      })
    const asWritten = (reason: string, notes: ReadonlyArray<string> = []): Plan => ({
      kind: "script",
      path: "script",
      reason,
      command: `bash ${shellQuote(`${testDir}/${script}`)}`,
      notes,
    })
    const texts = new Map<string, string>()
    for (const file of archive.files)
      if (/(^|\/)[^/]*(requirements|constraints)[^/]*\.(txt|in)$/.test(file)) {
        const bytes = yield* Effect.promise(() => archive.read(file))
        if (bytes !== undefined) texts.set(file, decode(bytes))
      }
    const planned = planTestScript(decode(body), {
      testDir,
      readTestFile: (path) => texts.get(path),
    })
    if (planned.kind === "as-is") return asWritten(`${script}: ${planned.reason}`)

    const have = yield* probePackages(sandbox, python, planned.requirements)
    const removed = `removed: ${planned.removed.join("; ")}`
    if (!have.pytest) {
      if (task.environment.allowInternet)
        return asWritten(
          `${script} installs its test runner over the network and the sandbox's ${python} has no pytest; the task allows internet, so it ran as written`,
        )
      return {
        kind: "unverifiable",
        path: "rewritten-script",
        reason: `${script} installs its test runner over the network, which this sandbox does not have, and the sandbox's ${python} has no pytest`,
        missing: [{ kind: "python", name: "pytest", spec: "pytest" }, ...have.missing],
        notes: [],
      }
    }
    if (have.missing.length > 0)
      return {
        kind: "unverifiable",
        path: "rewritten-script",
        reason: `${script} installs packages the tests need over the network and the sandbox lacks ${have.missing.map((r) => r.spec).join(", ")}: no score can be given here`,
        missing: have.missing,
        notes: [removed, ...planned.notes],
      }
    const reports = Array.from(
      { length: planned.calls },
      (_, i) => `${places.scratch}/report-${i}.xml`,
    )
    return {
      kind: "rewritten",
      path: "rewritten-script",
      reason: `${script} installs its test runner over the network; the sandbox has pytest${planned.requirements.length > 0 ? ` and ${planned.requirements.map((r) => r.spec).join(", ")}` : ""}, so t1 ran ${script} with that bootstrap removed and its pytest call${planned.calls > 1 ? "s" : ""} run by the sandbox's pytest`,
      script,
      text: planned.render({
        python,
        report: (i) => reports[i] ?? "/dev/null",
        config,
        ...(canaries === undefined ? {} : { extraTest: `${testDir}/${canaries.file}` }),
      }),
      reports,
      canaryCalls: planned.runsExtra.map((runs) => runs && canaries !== undefined),
      notes: [
        removed,
        ...planned.notes,
        ...(canaries !== undefined && planned.runsExtra.some((runs) => !runs)
          ? [
              `canary tests ran beside ${planned.runsExtra.filter((runs) => runs).length} of ${planned.calls} pytest calls (the others name no test paths, or select tests by -k, -m or --deselect)`,
            ]
          : []),
      ],
    }
  })

const prepare = (sandbox: VerifierSandboxShape, places: Places) =>
  Effect.gen(function* () {
    const { testDir, logsDir, scratch } = places
    // A directory that is a mount point (the local driver's private /tests) cannot be removed:
    // rm then fails after emptying it, which is as good, as long as it is a real directory and
    // not a link the agent left there. One rm and two mkdirs: each process costs milliseconds.
    const q = shellQuote
    const gone = (dir: string) =>
      `{ [ ! -L ${q(dir)} ] && { [ ! -e ${q(dir)} ] || [ -d ${q(dir)} ]; }; }`
    const made = yield* runBookkeeping(
      sandbox,
      "preparing the sandbox",
      `{ rm -rf -- ${q(testDir)} ${q(logsDir)} ${q(scratch)}; true; } && ${gone(testDir)} && ${gone(logsDir)} && [ ! -e ${q(scratch)} ] && mkdir -p -- ${q(testDir)} ${q(logsDir)} && mkdir -m 700 -- ${q(scratch)} && echo t1-prepared`,
    )
    if (made.exitCode !== 0 || !made.text.includes("t1-prepared"))
      return yield* new VerifierInfraError({
        stage: "preparing the sandbox",
        reason: `could not empty ${testDir} and ${logsDir}: ${made.text.slice(-500).trim()}`,
        retryable: false,
      })
  })

/** Pieces of a staged upload are at most this big (before the put request's own limit). */
const MAX_PIECE_BYTES = 16 * 1024 * 1024

/**
 * Unpacks the tests at testDir: in one put when the sandbox takes it there; else in pieces
 * through a staging directory the sandbox can put into, joined by the sandbox's tar (the bus
 * caps a message at max_payload; the local driver puts only under the workdir).
 */
const upload = (sandbox: VerifierSandboxShape, tar: Uint8Array, places: Places) =>
  Effect.gen(function* () {
    const stage = "copying the tests in"
    const infra = (reason: string, retryable: boolean) =>
      new VerifierInfraError({ stage, reason, retryable })
    if (tar.byteLength <= sandbox.maxPutBytes) {
      const direct = yield* Effect.result(sandbox.put(places.testDir, tar))
      if (direct._tag === "Success") return
      if (direct.failure.infra) return yield* infra(direct.failure.reason, true)
    }
    const pieceBytes = Math.max(
      64 * 1024,
      Math.min(MAX_PIECE_BYTES, sandbox.maxPutBytes - 64 * 1024),
    )
    const pieces: Uint8Array[] = []
    for (let at = 0; at < tar.byteLength; at += pieceBytes)
      pieces.push(tar.subarray(at, at + pieceBytes))
    const pieceTar = (i: number) =>
      Effect.promise(() =>
        singleFileTar(`part-${String(i).padStart(6, "0")}`, pieces[i] ?? new Uint8Array(0)),
      )
    const stagings = [
      `${places.scratch}/upload`,
      posix.join(places.workdir, `.t1-verify-${places.nonce}`),
    ]
    let staging: string | undefined
    let refusal = ""
    for (const candidate of stagings) {
      const first = yield* Effect.result(sandbox.put(candidate, yield* pieceTar(0)))
      if (first._tag === "Success") {
        staging = candidate
        break
      }
      if (first.failure.infra) return yield* infra(first.failure.reason, true)
      refusal = first.failure.reason
    }
    if (staging === undefined) return yield* infra(`no place to stage the tests: ${refusal}`, false)
    for (let i = 1; i < pieces.length; i++) {
      yield* sandbox
        .put(staging, yield* pieceTar(i))
        .pipe(Effect.mapError((e) => infra(e.reason, e.infra)))
    }
    const s = shellQuote(staging)
    const joined = yield* runBookkeeping(
      sandbox,
      stage,
      `cat ${s}/part-* | tar -x -f - --no-same-owner -C ${shellQuote(places.testDir)}; status=$?; rm -rf -- ${s}; exit $status`,
    )
    if (joined.exitCode !== 0)
      return yield* infra(`unpacking the tests failed: ${joined.text.slice(-500).trim()}`, false)
  })

const runTests = (
  sandbox: VerifierSandboxShape,
  task: VerifiableTask,
  plan: Exclude<Plan, { kind: "unverifiable" }>,
  places: Places,
  python: string,
  options: VerifyOptions,
): Effect.Effect<ShellResult, VerifierInfraError> => {
  const { testDir, workdir } = places
  const cd = `cd -- ${shellQuote(workdir)} 2>/dev/null || cd /`
  const testDirVar = `export TEST_DIR=${shellQuote(testDir)}`
  const command =
    plan.kind === "pytest"
      ? [
          shellQuote(python),
          // Not `-m pytest`: that puts the workdir first on sys.path, where a pytest.py the
          // agent left would stand in for pytest and write its own report. The workdir stays
          // importable for the tests, after the installed packages.
          `-c ${shellQuote(PYTEST_MAIN)}`,
          ...plan.targets.map(shellQuote),
          `-rA -p no:cacheprovider --continue-on-collection-errors ${NO_MAXFAIL}`,
          `--junitxml=${shellQuote(reportPath(places))} -o junit_family=xunit1`,
          `--rootdir=${shellQuote(testDir)} --confcutdir=${shellQuote(testDir)}`,
          `-c ${shellQuote(plan.config)}`,
        ].join(" ")
      : plan.kind === "rewritten"
        ? `${testDirVar}; bash ${shellQuote(`${testDir}/${plan.script}`)}`
        : `${testDirVar}; ${plan.command}`
  return runScript(sandbox, `${cd}; ${command}`, {
    timeoutMs: task.verifier.timeoutSec * 1000,
    maxOutputBytes: options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES,
  }).pipe(
    Effect.mapError(
      (e) =>
        new VerifierInfraError({
          stage: "running the tests",
          reason: e.message,
          retryable: e.infra,
        }),
    ),
  )
}

/**
 * The ids of the tests pytest collects in the test directory (offline, confined to it), for a
 * run that ended before reporting any; empty when pytest is not there or collects nothing.
 */
const collectTestIds = (
  sandbox: VerifierSandboxShape,
  places: Places,
  python: string,
  config: string,
): Effect.Effect<ReadonlyArray<string>> => {
  const { testDir } = places
  const command = [
    `cd -- ${shellQuote(testDir)} &&`,
    shellQuote(python),
    `-c ${shellQuote(PYTEST_MAIN)}`,
    "--collect-only -q -p no:cacheprovider --continue-on-collection-errors",
    `--rootdir=${shellQuote(testDir)} --confcutdir=${shellQuote(testDir)} -c ${shellQuote(config)}`,
    shellQuote(testDir),
  ].join(" ")
  return runBookkeeping(sandbox, "collecting the test ids", command, 1024 * 1024).pipe(
    Effect.map((r) =>
      r.text
        .split("\n")
        .map((line) => line.trim())
        .filter((line) => /^[^\s]+\.py::\S/.test(line)),
    ),
    Effect.map((ids) => [...new Set(ids)]),
    Effect.orElseSucceed((): ReadonlyArray<string> => []),
  )
}

const reportPath = (places: Places) => `${places.scratch}/report.xml`

interface Found {
  readonly tests: ReadonlyArray<TestCaseResult>
  readonly mode: VerifierMode
  readonly notes: ReadonlyArray<string>
  /** No source reported any test: the total falls back to the expected number of tests. */
  readonly nothingReported: boolean
  /** Set when a reward file gave a number rather than per-test results. */
  readonly score?: Score
  /** Why the reports cannot be trusted (canaries reported wrong), one sentence each. */
  readonly forgery: ReadonlyArray<string>
}

const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes)

const describeRead = (what: string, read: FileRead): string => {
  switch (read.kind) {
    case "missing":
      return `${what} was not written`
    case "too-large":
      return `${what} is ${read.size} bytes, over the limit; not read`
    case "unreadable":
      return `${what} could not be read back: ${read.reason}`
    case "read":
      return `${what} is not a valid report`
  }
}

/** A stand-in test when nothing reported any: the run itself, as an error, with its output. */
const runAsError = (name: string, run: ShellResult): TestCaseResult => ({
  name,
  outcome: "error",
  durationMs: 0,
  message: truncateUtf8(decode(run.output.subarray(Math.max(0, run.output.byteLength - 4096)))),
})

const collectPytest = (
  sandbox: VerifierSandboxShape,
  plan: Extract<Plan, { kind: "pytest" | "rewritten" }>,
  places: Places,
  run: ShellResult,
  maxReportBytes: number,
  canaries: Canaries | undefined,
): Effect.Effect<Found, VerifierInfraError> =>
  Effect.gen(function* () {
    const paths = plan.kind === "pytest" ? [reportPath(places)] : plan.reports
    const byName = new Map<string, TestCaseResult>()
    const problems: string[] = []
    const forgery: string[] = []
    let reported = 0
    for (const [i, path] of paths.entries()) {
      const read = yield* readSandboxFile(sandbox, path, maxReportBytes)
      const report = read.kind === "read" ? parseJunitXml(decode(read.bytes)) : undefined
      if (report === undefined) {
        problems.push(describeRead(`pytest's report ${posix.basename(path)}`, read))
        continue
      }
      reported++
      // Each report on its own: a forged call must not hide behind an honest one's canaries.
      if (canaries !== undefined && (plan.kind === "pytest" || plan.canaryCalls[i] === true))
        forgery.push(
          ...canaryEvidence(
            canaries,
            report,
            report.length > 0 && !run.timedOut,
            `in pytest's report ${posix.basename(path)}`,
          ),
        )
      for (const t of report) {
        const known = byName.get(t.name)
        if (known === undefined || OUTCOME_RANK[t.outcome] > OUTCOME_RANK[known.outcome])
          byName.set(t.name, t)
      }
    }
    const exit = `(exit ${run.exitCode})`
    if (reported > 0) {
      const tests = [...byName.values()]
      const own = canaries === undefined ? tests : tests.filter((t) => !isCanary(canaries, t.name))
      const notes = [
        ...(problems.length > 0 ? [`${problems.join("; ")} ${exit}`] : []),
        ...(own.length === 0 ? [`pytest collected no tests ${exit}`] : []),
      ]
      return { tests, mode: "pytest", notes, nothingReported: own.length === 0, forgery }
    }
    const why = `${problems.join("; ")} ${exit}`
    const summary = parsePytestSummary(decode(run.output))
    if (summary !== undefined && summary.length > 0) {
      // t1's own pytest call prints the -rA summary; a rewritten script's calls may not, so
      // there only a canary reported the wrong way tells.
      const ranBeside = plan.kind === "pytest" || plan.canaryCalls.some((c) => c)
      if (canaries !== undefined && ranBeside)
        forgery.push(
          ...canaryEvidence(
            canaries,
            summary,
            plan.kind === "pytest" && !run.timedOut,
            "in pytest's summary",
          ),
        )
      return {
        tests: summary,
        mode: "pytest-summary",
        notes: [`${why}; per-test results from the -rA summary in its output`],
        nothingReported: false,
        forgery,
      }
    }
    return {
      tests: [runAsError("pytest", run)],
      mode: "pytest",
      notes: [`${why} and its output has no test summary: pytest did not run the tests`],
      nothingReported: true,
      forgery,
    }
  })

const collectScript = (
  sandbox: VerifierSandboxShape,
  places: Places,
  run: ShellResult,
  maxReportBytes: number,
  expectedTests: number,
): Effect.Effect<Found, VerifierInfraError> =>
  Effect.gen(function* () {
    // One exec for the three places a script reports to (most are missing).
    const [ctrfRead, jsonRead, txtRead] = yield* readSandboxFiles(sandbox, [
      { path: `${places.logsDir}/ctrf.json`, maxBytes: maxReportBytes },
      { path: `${places.logsDir}/reward.json`, maxBytes: maxReportBytes },
      { path: `${places.logsDir}/reward.txt`, maxBytes: 64 * 1024 },
    ])
    const jsonFile = (name: string, r: FileRead) => ({
      name,
      file: r.kind === "read" ? parseRewardJson(decode(r.bytes)) : undefined,
      read: r,
    })
    const ctrf = jsonFile("ctrf.json", ctrfRead as FileRead)
    const json = jsonFile("reward.json", jsonRead as FileRead)
    const txt = {
      name: "reward.txt",
      file: txtRead?.kind === "read" ? parseRewardText(decode(txtRead.bytes)) : undefined,
      read: txtRead as FileRead,
    }
    const notes: string[] = []
    for (const f of [ctrf, json, txt])
      if (f.read.kind !== "missing" && f.file === undefined)
        notes.push(`ignored ${places.logsDir}/${f.name}: ${describeRead(f.name, f.read)}`)

    const perTest = [ctrf, json].find(
      (f): f is typeof f & { file: Extract<RewardFile, { kind: "tests" }> } =>
        f.file?.kind === "tests",
    )
    if (perTest !== undefined)
      return {
        tests: perTest.file.tests,
        mode: "reward-file",
        notes: [...notes, `per-test results from ${places.logsDir}/${perTest.name}`],
        nothingReported: perTest.file.tests.length === 0,
        forgery: [],
      }
    const scalar = [json, txt].find(
      (f): f is typeof f & { file: Extract<RewardFile, { kind: "scalar" }> } =>
        f.file?.kind === "scalar",
    )
    const summary = parsePytestSummary(decode(run.output))
    if (summary !== undefined && summary.length > 0) {
      // A scalar reward file (Terminal-Bench 2 writes 1 iff pytest passed) says less than the
      // per-test summary beside it: the dense reward counts tests.
      if (scalar !== undefined)
        notes.push(
          `${places.logsDir}/${scalar.name} says ${scalar.file.reward}; the per-test summary in the output was used instead`,
        )
      return { tests: summary, mode: "pytest-summary", notes, nothingReported: false, forgery: [] }
    }
    if (scalar !== undefined)
      return {
        tests: [],
        mode: "reward-file",
        notes: [...notes, `reward from ${places.logsDir}/${scalar.name}`],
        nothingReported: false,
        score: scalarScore(scalar.file.reward, expectedTests),
        forgery: [],
      }
    const passed = !run.timedOut && run.exitCode === 0
    return {
      tests: [
        passed
          ? { name: "test script", outcome: "passed", durationMs: 0, message: "" }
          : runAsError("test script", run),
      ],
      mode: "exit-code",
      notes: [
        ...notes,
        `no reward file and no test summary: scored by the script's exit status (${run.timedOut ? "stopped" : run.exitCode})`,
      ],
      nothingReported: false,
      forgery: [],
    }
  })

/**
 * A number from a reward file. Terminal-Bench 2 writes the fraction of success in [0, 1]
 * (1 iff every test passed), so such a value is scaled to the expected number of tests to stay
 * on the dense scale; a larger value is taken as the count of passing tests itself.
 */
export const scalarScore = (value: number, expectedTests: number): Score => {
  if (value <= 1) {
    const total = Math.max(1, expectedTests)
    const passed = Math.round(value * total)
    return { passed, total, reward: passed, resolved: value >= 1 }
  }
  const total = Math.max(expectedTests, Math.ceil(value))
  const passed = Math.floor(value)
  return { passed, total, reward: value, resolved: passed >= total }
}
