import { parseArgs } from "node:util"

/** A mistake in how the command was called: printed with the usage, exit code 2. */
export class UsageError extends Error {
  constructor(
    message: string,
    readonly usage: string,
  ) {
    super(message)
  }
}

type OptionSpec = Record<string, { readonly type: "string" | "boolean"; readonly short?: string }>

export const parseFlags = <O extends OptionSpec>(
  args: ReadonlyArray<string>,
  options: O,
  usage: string,
) => {
  try {
    return parseArgs({ args: [...args], options, strict: true, allowPositionals: true })
  } catch (cause) {
    throw new UsageError(cause instanceof Error ? cause.message : String(cause), usage)
  }
}

export const intFlag = (
  name: string,
  raw: string | undefined,
  fallback: number,
  usage: string,
  min = 0,
): number => {
  if (raw === undefined) return fallback
  if (!/^\d+$/.test(raw) || Number(raw) < min) {
    throw new UsageError(
      `--${name} must be an integer >= ${min}, got ${JSON.stringify(raw)}`,
      usage,
    )
  }
  return Number(raw)
}

export const choiceFlag = <C extends string>(
  name: string,
  raw: string | undefined,
  choices: ReadonlyArray<C>,
  fallback: C,
  usage: string,
): C => {
  if (raw === undefined) return fallback
  const hit = choices.find((c) => c === raw)
  if (hit === undefined) {
    throw new UsageError(
      `--${name} must be one of ${choices.join(", ")}, got ${JSON.stringify(raw)}`,
      usage,
    )
  }
  return hit
}
