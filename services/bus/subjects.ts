/** NATS subject matching: `*` matches one token, `>` (last) matches one or more. */
export const subjectMatches = (pattern: string, subject: string): boolean => {
  if (pattern === subject) return true
  const p = pattern.split(".")
  const s = subject.split(".")
  for (let i = 0; i < p.length; i++) {
    const token = p[i]
    if (token === ">") return s.length > i
    if (i >= s.length) return false
    if (token !== "*" && token !== s[i]) return false
  }
  return p.length === s.length
}

/**
 * The low-cardinality family of a subject for metric labels: ids in subjects
 * (`t1.sandbox.<id>.exec`, `t1.traj.<job>`) would explode series counts.
 */
export const subjectFamily = (subject: string): string => {
  // Replies: `_INBOX.<id>`, or `_INBOX_<role>.<id>` with a per-role inbox prefix.
  if (subject.startsWith("_INBOX")) return subject.split(".")[0] as string
  return subject.split(".").slice(0, 2).join(".")
}

/** Why a subject is not valid (undefined when it is); publishers may not use wildcards. */
export const subjectProblem = (subject: string, wildcards: boolean): string | undefined => {
  if (subject.length === 0) return "empty"
  if (/\s/.test(subject)) return "contains whitespace"
  const tokens = subject.split(".")
  for (const [i, token] of tokens.entries()) {
    if (token.length === 0) return "empty token"
    if (token === "*" || token === ">") {
      if (!wildcards) return "wildcards are not allowed here"
      if (token === ">" && i !== tokens.length - 1) return "'>' must be the last token"
    }
  }
  return undefined
}
