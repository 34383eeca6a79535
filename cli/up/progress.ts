/**
 * A one-line progress bar on stderr (redrawn in place on a terminal, one line per 10% elsewhere).
 * Work past `total` raises it (an RL update's further waves of episodes).
 */
export const progressBar = (label: string, expected: number) => {
  const tty = process.stderr.isTTY === true
  let lastDecile = -1
  let total = expected
  const draw = (done: number, note = "", last = false) => {
    total = Math.max(total, done)
    const width = 24
    const filled = total > 0 ? Math.round((done / total) * width) : width
    const line = `${label.padEnd(18)} [${"#".repeat(filled)}${".".repeat(width - filled)}] ${done}/${total}${note ? `  ${note}` : ""}`
    if (tty) process.stderr.write(`\r${line}\x1b[K`)
    else {
      const decile = total > 0 ? Math.floor((done / total) * 10) : 10
      // The last line always: it carries the note (the update's result).
      if (decile !== lastDecile || last) {
        lastDecile = decile
        process.stderr.write(`${line}\n`)
      }
    }
  }
  draw(0)
  return {
    update: draw,
    done: (note = "") => {
      draw(total, note, true)
      if (tty) process.stderr.write("\n")
    },
  }
}
