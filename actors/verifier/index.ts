import { type FlagValues, flagInt, flagText, type HostedActor } from "../hosted.ts"
import { runVerifier } from "./actor.ts"

export { openArchive, packDirectory, type TestsArchive } from "../../services/tar/index.ts"
export { runVerifier, type VerifierActorOptions } from "./actor.ts"
export {
  InvalidVerifierTask,
  SandboxCallFailed,
  type VerifierError,
  VerifierInfraError,
} from "./errors.ts"
export { SEAL_TIMEOUT_MS } from "./guard.ts"
export { parseJunitXml } from "./junit.ts"
export type {
  TestCaseResult,
  TestOutcome,
  VerifierMode,
  VerifierOutcome,
  VerifierOutcomeKind,
  VerifierPath,
} from "./outcome.ts"
export {
  clientSandbox,
  clientSandboxLayer,
  driverSandbox,
  driverSandboxLayer,
  type ShellResult,
  VerifierSandbox,
  type VerifierSandboxShape,
} from "./port.ts"
export { parseRewardJson, parseRewardText } from "./reward-files.ts"
export { planTestScript, type Requirement, type ScriptPlan } from "./rewrite.ts"
export { parsePytestSummary } from "./summary.ts"
export {
  DEFAULT_LOGS_DIR,
  DEFAULT_MAX_REPORT_BYTES,
  type VerifiableTask,
  type VerifyOptions,
  verifyEpisode,
} from "./verify.ts"
export { resultFromOutcome, taskFromWire } from "./wire.ts"

const positive = (flags: FlagValues, name: string, env: string, fallback: number): number =>
  flagInt(flags, name, env, fallback, 1)

export const verifierFlagsHelp = `  --task-root DIR              task store for tests sent as FilesRef.dir: <DIR>/<task_set>/<dir> (T1_TASK_ROOT)
  --default-timeout-sec S      for tasks with verifier_timeout_sec 0 (default 600)
  --max-report-mb N            largest pytest report or reward file read back (default 8)`

/** `t1 actor verifier`: runs tasks' tests in finished episodes' sandboxes and scores them. */
export const verifierActor: HostedActor = {
  summary:
    "copies a task's tests into a finished episode's sandbox, runs them, replies per-test results and the dense reward",
  flags: {
    "task-root": { type: "string" },
    "default-timeout-sec": { type: "string" },
    "max-report-mb": { type: "string" },
  },
  flagsHelp: verifierFlagsHelp,
  run: ({ subjects, concurrency, shutdownGraceMs }, flags) => {
    const taskRoot = flagText(flags, "task-root", "T1_TASK_ROOT")
    return runVerifier({
      subjects,
      concurrency,
      shutdownGraceMs,
      defaultTimeoutSec: positive(
        flags,
        "default-timeout-sec",
        "T1_VERIFIER_DEFAULT_TIMEOUT_SEC",
        600,
      ),
      verify: {
        maxReportBytes:
          positive(flags, "max-report-mb", "T1_VERIFIER_MAX_REPORT_MB", 8) * 1024 * 1024,
      },
      ...(taskRoot === undefined ? {} : { taskRoot }),
    })
  },
}

// The surface other folders use.
export { shellQuote } from "./shell.ts"
