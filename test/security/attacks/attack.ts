/** One forgery attack: what the agent does after its honest work, and what t1 may still count. */
export interface Attack {
  readonly name: string
  /** Shell commands the agent runs after its honest work. */
  readonly script: string
  /** Files put into the sandbox before the script (path → bytes). */
  readonly files?: () => Readonly<Record<string, Uint8Array>>
  /** The task attacked: "answers" (out<i>.txt files, the default) or "release" (a module). */
  readonly task?: "answers" | "release"
  /**
   * Set for the attacks written against a verifier that seals the sandbox and plants canaries:
   * t1 holds when it scores at most this many passes (the honest work's, fewer when the attack
   * destroyed some of it), or calls the outcome forged (reward 0) or unverifiable. Unset: t1
   * must score exactly the honest 2 of 5, every test by name.
   */
  readonly honestAtMost?: number
  /**
   * The attack is one the canaries catch wherever they run, the sandbox's own programs included:
   * its positive control is a forged outcome rather than 5 of 5.
   */
  readonly caughtByCanaries?: boolean
}
