import { posix } from "node:path"
import { create, toBinary } from "@bufbuild/protobuf"
import {
  ErrorCode,
  type ErrorDetail,
  ErrorDetailSchema,
  type Task as TaskMessage,
  TestOutcome as TestOutcomeEnum,
  VerifierPath as VerifierPathEnum,
  type VerifierResult,
  VerifierResultSchema,
} from "../../proto/index.ts"
import type { VerifierError } from "./errors.ts"
import {
  type TestOutcome,
  truncateUtf8,
  type VerifierOutcome,
  type VerifierPath,
} from "./outcome.ts"
import type { VerifiableTask } from "./verify.ts"

export const DEFAULT_TEST_DIR = "/tests"

/** A wire task as the verifier's, plus the command to run when it is not `bash <script>`. */
export interface WireTask {
  readonly task: VerifiableTask
  readonly command: string | undefined
}

const PYTEST_COMMAND = /^(python3?\s+-m\s+)?pytest(\s|$)/
const SCRIPT_COMMAND = /^(?:bash|sh)\s+(\S+)$/

/**
 * How the proto Task says to verify: no `test_command` or a pytest one → pytest on the test
 * files (with t1's own report); `bash <file>` of a file in the test directory → that script;
 * anything else is run as given, scored like a script.
 */
export const taskFromWire = (wire: TaskMessage, defaultTimeoutSec: number): WireTask => {
  const testDir = wire.testDir === "" ? DEFAULT_TEST_DIR : wire.testDir
  const command = wire.testCommand.trim()
  const scriptPath = SCRIPT_COMMAND.exec(command)?.[1]?.replace(/^["']|["']$/g, "")
  const script =
    scriptPath === undefined
      ? undefined
      : posix.isAbsolute(scriptPath)
        ? scriptPath.startsWith(`${testDir}/`)
          ? scriptPath.slice(testDir.length + 1)
          : undefined
        : scriptPath.replace(/^\.\//, "")
  const kind = command === "" || PYTEST_COMMAND.test(command) ? "pytest" : "script"
  return {
    task: {
      id: wire.id,
      environment: { allowInternet: wire.allowInternet, workdir: wire.workdir || "/" },
      verifier: {
        testsDir: "",
        testDir,
        kind,
        script: kind === "script" ? script : undefined,
        scriptPath: undefined,
        parser: undefined,
        timeoutSec: wire.verifierTimeoutSec > 0 ? wire.verifierTimeoutSec : defaultTimeoutSec,
        expectedTests: wire.expectedTestCount,
      },
    },
    command: kind === "script" && script === undefined ? command : undefined,
  }
}

const OUTCOME: Readonly<Record<TestOutcome, TestOutcomeEnum>> = {
  passed: TestOutcomeEnum.PASSED,
  failed: TestOutcomeEnum.FAILED,
  error: TestOutcomeEnum.ERROR,
  skipped: TestOutcomeEnum.SKIPPED,
}

const U32 = 0xffff_ffff
const u32 = (n: number) => Math.min(U32, Math.max(0, Math.round(n)))

/** Bounds on what an outcome's lists put in a reply (each entry is also cut to 4 KiB). */
const MAX_NOTES = 32
const MAX_MISSING = 64

const PATH: Readonly<Record<VerifierPath, VerifierPathEnum>> = {
  pytest: VerifierPathEnum.PYTEST,
  script: VerifierPathEnum.SCRIPT,
  "rewritten-script": VerifierPathEnum.REWRITTEN_SCRIPT,
}

/**
 * The wire form of an outcome. A scored outcome carries its counts; an unverifiable one (the
 * tests need packages the sandbox lacks) carries no score at all: unverifiable, the missing
 * packages, reward 0, no tests, and not infra_failed (a rerun would find the same packages
 * missing, so it is excluded, never retried). A forged one is a score of 0 (its outcome already
 * says passed 0, reward 0, not resolved) with its tests as reported and the evidence. All carry
 * the path taken and the notes.
 */
export const resultFromOutcome = (outcome: VerifierOutcome): VerifierResult => {
  const common = {
    infraFailed: false,
    durationMs: u32(outcome.durationMs),
    outputTail: outcome.outputTail,
    path: PATH[outcome.path],
    pathReason: truncateUtf8(outcome.pathReason),
    notes: outcome.notes.slice(0, MAX_NOTES).map((n) => truncateUtf8(n)),
    unguarded: !outcome.guarded,
  }
  if (outcome.kind === "unverifiable")
    return create(VerifierResultSchema, {
      ...common,
      unverifiable: true,
      missingPackages: outcome.missing.slice(0, MAX_MISSING).map((p) => truncateUtf8(p, 256)),
      error: create(ErrorDetailSchema, {
        code: ErrorCode.FAILED_PRECONDITION,
        message: unverifiableMessage(outcome.missing.slice(0, MAX_MISSING)),
        retryable: false,
      }),
    })
  return create(VerifierResultSchema, {
    ...common,
    ...(outcome.kind === "forged"
      ? {
          forged: true,
          forgeryEvidence: outcome.forgery.slice(0, MAX_NOTES).map((n) => truncateUtf8(n)),
        }
      : {}),
    tests: outcome.tests.map((t) => ({
      name: t.name,
      outcome: OUTCOME[t.outcome],
      durationMs: u32(t.durationMs),
      message: t.message,
    })),
    total: outcome.total,
    // A forged result never carries a score above 0, whatever its counts say.
    ...(outcome.kind === "forged"
      ? { passed: 0, reward: 0, resolved: false }
      : { passed: outcome.passed, reward: outcome.reward, resolved: outcome.resolved }),
  })
}

/** `the tests need packages the sandbox lacks: numpy, requests` (one line, for ErrorDetail). */
export const unverifiableMessage = (missing: ReadonlyArray<string>): string =>
  missing.length === 0
    ? "the tests need packages the sandbox lacks"
    : `the tests need packages the sandbox lacks: ${missing.join(", ")}`

/** Infra failures are retried (when retryable) or excluded; an invalid task never scores. */
export const errorDetailOf = (e: VerifierError): ErrorDetail =>
  e._tag === "VerifierInfraError"
    ? create(ErrorDetailSchema, {
        code: ErrorCode.UNAVAILABLE,
        message: e.message,
        retryable: e.retryable,
      })
    : create(ErrorDetailSchema, {
        code: ErrorCode.INVALID_ARGUMENT,
        message: e.message,
        fieldPath: e.field,
        retryable: false,
      })

/**
 * A verification that produced no score. `infra_failed` is set for invalid requests too: the
 * reward of such a result is not a score of the agent and must not be counted as 0.
 */
export const failedResult = (error: ErrorDetail, durationMs: number): VerifierResult =>
  create(VerifierResultSchema, { infraFailed: true, error, durationMs: u32(durationMs) })

/**
 * The result encoded within `maxBytes` (the bus max_payload): when many failing tests carry long
 * messages, messages are cut shorter, then the output tail, until it fits. Counts never change.
 */
export const encodeResultWithin = (result: VerifierResult, maxBytes: number): Uint8Array => {
  let encoded = toBinary(VerifierResultSchema, result)
  for (const messageBytes of [1024, 256, 0]) {
    if (encoded.byteLength <= maxBytes) return encoded
    const tests = result.tests.map((t) => ({
      ...t,
      message: truncateUtf8(t.message, messageBytes),
    }))
    const notes = shortNotes(result.notes, messageBytes)
    const forgeryEvidence = shortNotes(result.forgeryEvidence, messageBytes)
    encoded = toBinary(
      VerifierResultSchema,
      create(VerifierResultSchema, { ...result, tests, notes, forgeryEvidence }),
    )
  }
  if (encoded.byteLength <= maxBytes) return encoded
  const bare = create(VerifierResultSchema, {
    ...result,
    tests: result.tests.map((t) => ({ ...t, message: "" })),
    notes: shortNotes(result.notes, 0),
    forgeryEvidence: shortNotes(result.forgeryEvidence, 0),
    outputTail: new Uint8Array(0),
  })
  return toBinary(VerifierResultSchema, bare)
}

/** Notes cut to `bytes` each, but never below a readable sentence (256 bytes). */
const shortNotes = (notes: ReadonlyArray<string>, bytes: number): string[] =>
  notes.map((n) => truncateUtf8(n, Math.max(256, bytes)))
