/** Building the bash scripts of a task (setup.sh, solve.sh): quoting and file creation. */

/** Single-quotes a string for bash. */
export const shellQuote = (text: string): string =>
  /^[A-Za-z0-9_./:=@%+,-]+$/.test(text) ? text : `'${text.replaceAll("'", `'\\''`)}'`

export interface FileSpec {
  /** Relative to the workdir. */
  readonly path: string
  readonly content: string
  /** Octal mode, e.g. "644"; left to the umask when absent. */
  readonly mode?: string
  /** A date `touch -d` understands, e.g. "2020-01-02 03:04:05". */
  readonly mtime?: string
}

const DELIMITER = "T1_EOF"

/** One command that writes `content` to `path` exactly (trailing newline or not). */
export const writeFileCommand = (path: string, content: string): string => {
  const lines = content.split("\n")
  const heredocSafe = content.endsWith("\n") && !lines.includes(DELIMITER)
  if (heredocSafe) return `cat > ${shellQuote(path)} <<'${DELIMITER}'\n${content}${DELIMITER}`
  return `printf '%s' ${shellQuote(content)} > ${shellQuote(path)}`
}

const parentOf = (path: string): string | undefined => {
  const at = path.lastIndexOf("/")
  return at <= 0 ? undefined : path.slice(0, at)
}

/** Commands that create the files (parents first), then set modes and times. */
export const createFiles = (files: ReadonlyArray<FileSpec>): Array<string> => {
  const parents = [...new Set(files.map((f) => parentOf(f.path)).filter((p) => p !== undefined))]
  const out: Array<string> = []
  if (parents.length > 0) out.push(`mkdir -p ${parents.map(shellQuote).join(" ")}`)
  for (const file of files) out.push(writeFileCommand(file.path, file.content))
  for (const file of files)
    if (file.mode !== undefined) out.push(`chmod ${file.mode} ${shellQuote(file.path)}`)
  for (const file of files)
    if (file.mtime !== undefined)
      out.push(`touch -d ${shellQuote(file.mtime)} ${shellQuote(file.path)}`)
  return out
}

/** A complete bash script: strict mode, then the given commands. */
export const bashScript = (commands: ReadonlyArray<string>): string =>
  `#!/usr/bin/env bash\nset -euo pipefail\n${commands.join("\n")}\n`
