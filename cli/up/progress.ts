/** A one-line progress bar on stderr (redrawn in place on a terminal, one line per 10% elsewhere). */
export const progressBar = (label: string, total: number) => {
  const tty = process.stderr.isTTY === true
  let lastDecile = -1
  const draw = (done: number, note = "") => {
    const width = 24
    const filled = total > 0 ? Math.round((done / total) * width) : width
    const line = `${label.padEnd(18)} [${"#".repeat(filled)}${".".repeat(width - filled)}] ${done}/${total}${note ? `  ${note}` : ""}`
    if (tty) process.stderr.write(`\r${line}\x1b[K`)
    else {
      const decile = total > 0 ? Math.floor((done / total) * 10) : 10
      if (decile !== lastDecile) {
        lastDecile = decile
        process.stderr.write(`${line}\n`)
      }
    }
  }
  draw(0)
  return {
    update: draw,
    done: (note = "") => {
      draw(total, note)
      if (tty) process.stderr.write("\n")
    },
  }
}
