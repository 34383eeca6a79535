import { mkdir, writeFile } from "node:fs/promises"
import { join } from "node:path"
import { lineChartPng, lineChartSvg, type Series } from "./png.ts"

export interface EvalSummary {
  readonly episodes: number
  readonly resolvedRate: number
  readonly rewardMean: number
  readonly testsPassed: number
  readonly testsTotal: number
  /** Episodes and resolved ones per ladder rung ("0" for tasks outside the ladder). */
  readonly rungs?: Readonly<
    Record<string, { readonly episodes: number; readonly resolved: number }>
  >
}

export interface RoundSummary {
  readonly round: number
  readonly version: number
  readonly rewardMean: number
  readonly resolvedRate: number
  readonly trainInferDiff: number
  readonly mismatchK3: number
  readonly policyLoss: number
  readonly valueLoss: number
  readonly explainedVariance: number
  readonly clipfrac: number
  readonly approxKl: number
  readonly seconds: number
}

export interface UpReport {
  readonly before: EvalSummary
  readonly after: EvalSummary
  readonly rounds: ReadonlyArray<RoundSummary>
  readonly sftLosses: ReadonlyArray<number>
  readonly golden: number
  readonly seconds: number
  readonly driver: string
  /** Tasks of the held-out families (the ladder's OOD set), when there are any. */
  readonly oodBefore?: EvalSummary
  readonly oodAfter?: EvalSummary
  /** What the tasks were: the ladder and its seed, or the train directory. */
  readonly tasks: string
  readonly trainTasks: number
  readonly evalTasks: number
}

const pct = (x: number) => `${(100 * x).toFixed(1)}%`

/** The summary table printed at the end of `t1 up`. */
export const summaryTable = (r: UpReport): string => {
  const rows: Array<[string, string, string]> = [
    ["", "before RL", "after RL"],
    ["resolved rate (eval)", pct(r.before.resolvedRate), pct(r.after.resolvedRate)],
    ["mean reward (tests passed)", r.before.rewardMean.toFixed(2), r.after.rewardMean.toFixed(2)],
    [
      "tests passed / total",
      `${r.before.testsPassed}/${r.before.testsTotal}`,
      `${r.after.testsPassed}/${r.after.testsTotal}`,
    ],
    ["eval episodes", String(r.before.episodes), String(r.after.episodes)],
  ]
  const rungs = Object.keys(r.before.rungs ?? {})
    .filter((k) => k !== "0")
    .sort()
  for (const k of rungs) {
    const rate = (e: EvalSummary) => {
      const x = e.rungs?.[k]
      return x === undefined || x.episodes === 0 ? "-" : pct(x.resolved / x.episodes)
    }
    rows.push([`  rung ${k}`, rate(r.before), rate(r.after)])
  }
  if (r.oodBefore && r.oodAfter)
    rows.push([
      "resolved (held-out families)",
      pct(r.oodBefore.resolvedRate),
      pct(r.oodAfter.resolvedRate),
    ])
  const gain = (r.after.resolvedRate - r.before.resolvedRate) * 100
  const w = [28, 12, 12]
  const fmt = (cells: ReadonlyArray<string>) => cells.map((c, i) => c.padEnd(w[i] ?? 10)).join("  ")
  const last = r.rounds.at(-1)
  return [
    fmt(rows[0] as [string, string, string]),
    ...rows.slice(1).map(fmt),
    `gain: ${gain >= 0 ? "+" : ""}${gain.toFixed(1)} points resolved on ${r.evalTasks} held-out tasks (${r.tasks}; ${r.trainTasks} train tasks)`,
    "",
    `RL: ${r.rounds.length} updates, train reward ${r.rounds.map((x) => x.rewardMean.toFixed(2)).join(" → ")}`,
    last
      ? `alignment (last update): train_infer_logprob_abs_diff ${last.trainInferDiff.toExponential(2)}, mismatch k3 ${last.mismatchK3.toExponential(2)}`
      : "",
    `SFT warm start: ${r.golden} golden trajectories, loss ${r.sftLosses[0]?.toFixed(2) ?? "-"} → ${r.sftLosses.at(-1)?.toFixed(2) ?? "-"}`,
    `total ${(r.seconds / 60).toFixed(1)} min (sandboxes: ${r.driver})`,
  ].join("\n")
}

/** Writes report.html (inline SVG charts), the PNG charts and summary.json into `dir`. */
export const writeReport = async (dir: string, r: UpReport): Promise<string> => {
  await mkdir(dir, { recursive: true })
  const reward: Series[] = [
    {
      name: "mean reward (train)",
      points: r.rounds.map((x) => [x.round, x.rewardMean] as const),
      color: [31, 119, 180],
    },
    {
      name: "resolved rate (train)",
      points: r.rounds.map((x) => [x.round, x.resolvedRate] as const),
      color: [44, 160, 44],
    },
  ]
  const alignment: Series[] = [
    {
      name: "|Δ log p| learner vs sampler",
      points: r.rounds.map((x) => [x.round, x.trainInferDiff] as const),
      color: [214, 39, 40],
    },
    {
      name: "mismatch k3",
      points: r.rounds.map((x) => [x.round, x.mismatchK3] as const),
      color: [148, 103, 189],
    },
  ]
  const sft: Series[] = [
    {
      name: "SFT loss",
      points: r.sftLosses.map((l, i) => [i + 1, l] as const),
      color: [255, 127, 14],
    },
  ]
  await writeFile(join(dir, "reward.png"), lineChartPng(reward))
  await writeFile(join(dir, "alignment.png"), lineChartPng(alignment))
  await writeFile(join(dir, "sft-loss.png"), lineChartPng(sft))
  await writeFile(join(dir, "summary.json"), `${JSON.stringify(r, null, 2)}\n`)
  const rows = r.rounds
    .map(
      (x) =>
        `<tr><td>${x.round}</td><td>${x.version}</td><td>${x.rewardMean.toFixed(3)}</td><td>${pct(x.resolvedRate)}</td><td>${x.trainInferDiff.toExponential(2)}</td><td>${x.mismatchK3.toExponential(2)}</td><td>${x.policyLoss.toFixed(4)}</td><td>${x.valueLoss.toFixed(4)}</td><td>${x.explainedVariance.toFixed(3)}</td><td>${x.clipfrac.toFixed(3)}</td><td>${x.approxKl.toFixed(4)}</td><td>${x.seconds.toFixed(1)}</td></tr>`,
    )
    .join("\n")
  const html = `<!doctype html><html><head><meta charset="utf-8"><title>t1 up report</title>
<style>body{font-family:sans-serif;max-width:960px;margin:2em auto}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}</style></head><body>
<h1>t1 up</h1>
<h2>Resolved rate before and after RL (held-out eval tasks)</h2>
<table><tr><th></th><th>before</th><th>after</th></tr>
<tr><td>resolved rate</td><td>${pct(r.before.resolvedRate)}</td><td>${pct(r.after.resolvedRate)}</td></tr>
<tr><td>mean reward</td><td>${r.before.rewardMean.toFixed(2)}</td><td>${r.after.rewardMean.toFixed(2)}</td></tr>
<tr><td>tests passed</td><td>${r.before.testsPassed}/${r.before.testsTotal}</td><td>${r.after.testsPassed}/${r.after.testsTotal}</td></tr>
${r.oodBefore && r.oodAfter ? `<tr><td>resolved (held-out families)</td><td>${pct(r.oodBefore.resolvedRate)}</td><td>${pct(r.oodAfter.resolvedRate)}</td></tr>` : ""}</table>
<p>${r.tasks}: ${r.trainTasks} train tasks, ${r.evalTasks} held-out tasks; gain ${((r.after.resolvedRate - r.before.resolvedRate) * 100).toFixed(1)} points.</p>
<h2>Reward curve</h2>${lineChartSvg("train reward per update", reward)}
<h2>Alignment</h2>${lineChartSvg("learner vs sampler log-prob difference", alignment)}
<h2>SFT warm start</h2>${lineChartSvg("SFT loss", sft)}
<h2>Updates</h2><table><tr><th>update</th><th>version</th><th>reward</th><th>resolved</th><th>|Δ log p|</th><th>k3</th><th>policy loss</th><th>value loss</th><th>expl. var.</th><th>clipfrac</th><th>approx KL</th><th>s</th></tr>
${rows}</table>
<p>Total ${(r.seconds / 60).toFixed(1)} min; sandboxes on the ${r.driver} driver; ${r.golden} golden trajectories for the warm start.</p>
</body></html>`
  const path = join(dir, "report.html")
  await writeFile(path, html)
  return path
}
