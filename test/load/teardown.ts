/**
 * Everything the load test starts registers how to stop it here; `run` stops it all, last started
 * first, once, whether the run ended, failed or was interrupted by a signal. A step that fails is
 * reported and the others still run.
 */
export class Teardown {
  private readonly steps: Array<{ readonly what: string; readonly step: () => Promise<void> }> = []
  private running: Promise<ReadonlyArray<string>> | undefined

  constructor(
    private readonly log: (line: string) => void = () => {},
    private readonly timeoutMs = 60_000,
  ) {}

  add(what: string, step: () => Promise<void> | void): void {
    this.steps.push({ what, step: async () => step() })
  }

  /** Runs every step (LIFO); resolves with one message per step that failed or timed out. */
  run(): Promise<ReadonlyArray<string>> {
    this.running ??= (async () => {
      const failures: string[] = []
      for (let next = this.steps.pop(); next !== undefined; next = this.steps.pop()) {
        const { what, step } = next
        let timer: NodeJS.Timeout | undefined
        const late = new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`no end in ${this.timeoutMs} ms`)),
            this.timeoutMs,
          )
        })
        const began = performance.now()
        try {
          await Promise.race([step(), late])
          this.log(`  stopped ${what} (${Math.round(performance.now() - began)} ms)`)
        } catch (e) {
          failures.push(`${what}: ${e instanceof Error ? e.message : String(e)}`)
        } finally {
          clearTimeout(timer)
        }
      }
      return failures
    })()
    return this.running
  }
}
