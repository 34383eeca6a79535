import { deflateSync } from "node:zlib"
import { crc32 } from "@node-rs/crc32"

export interface Series {
  readonly name: string
  readonly points: ReadonlyArray<readonly [number, number]>
  /** RGB. */
  readonly color: readonly [number, number, number]
}

const chunk = (type: string, data: Uint8Array): Buffer => {
  const head = Buffer.alloc(8)
  head.writeUInt32BE(data.length, 0)
  head.write(type, 4, "ascii")
  const crc = Buffer.alloc(4)
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])) >>> 0, 0)
  return Buffer.concat([head, data, crc])
}

/** A line chart as a PNG (RGB, no text): axes, light grid, one polyline per series. */
export const lineChartPng = (series: ReadonlyArray<Series>, width = 640, height = 320): Buffer => {
  const pixels = Buffer.alloc(width * height * 3, 255)
  const set = (x: number, y: number, [r, g, b]: readonly [number, number, number]) => {
    if (x < 0 || y < 0 || x >= width || y >= height) return
    const o = (y * width + x) * 3
    pixels[o] = r
    pixels[o + 1] = g
    pixels[o + 2] = b
  }
  const line = (
    x0: number,
    y0: number,
    x1: number,
    y1: number,
    color: readonly [number, number, number],
  ) => {
    const steps = Math.max(Math.abs(x1 - x0), Math.abs(y1 - y0), 1)
    for (let i = 0; i <= steps; i++) {
      const x = Math.round(x0 + ((x1 - x0) * i) / steps)
      const y = Math.round(y0 + ((y1 - y0) * i) / steps)
      set(x, y, color)
      set(x, y + 1, color)
    }
  }
  const all = series.flatMap((s) => s.points)
  const xs = all.map((p) => p[0])
  const ys = all.map((p) => p[1])
  const [x0, x1] = [Math.min(0, ...xs), Math.max(1, ...xs)]
  const [y0, y1] = [Math.min(0, ...ys), Math.max(1e-9, ...ys)]
  const m = 30
  const px = (x: number) => m + ((x - x0) / (x1 - x0 || 1)) * (width - 2 * m)
  const py = (y: number) => height - m - ((y - y0) / (y1 - y0 || 1)) * (height - 2 * m)
  for (let i = 0; i <= 4; i++) {
    const y = m + (i * (height - 2 * m)) / 4
    line(m, y, width - m, y, [225, 225, 225])
  }
  line(m, height - m, width - m, height - m, [0, 0, 0])
  line(m, m, m, height - m, [0, 0, 0])
  for (const s of series) {
    for (let i = 1; i < s.points.length; i++) {
      const a = s.points[i - 1] as readonly [number, number]
      const b = s.points[i] as readonly [number, number]
      line(px(a[0]), py(a[1]), px(b[0]), py(b[1]), s.color)
    }
    for (const p of s.points)
      for (let d = -2; d <= 2; d++)
        for (let e = -2; e <= 2; e++)
          set(Math.round(px(p[0])) + d, Math.round(py(p[1])) + e, s.color)
  }
  const raw = Buffer.alloc((width * 3 + 1) * height)
  for (let y = 0; y < height; y++)
    pixels.copy(raw, y * (width * 3 + 1) + 1, y * width * 3, (y + 1) * width * 3)
  const ihdr = Buffer.alloc(13)
  ihdr.writeUInt32BE(width, 0)
  ihdr.writeUInt32BE(height, 4)
  ihdr[8] = 8
  ihdr[9] = 2
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk("IHDR", ihdr),
    chunk("IDAT", deflateSync(raw)),
    chunk("IEND", new Uint8Array(0)),
  ])
}

/** The same chart as inline SVG, with labels, for the HTML report. */
export const lineChartSvg = (
  title: string,
  series: ReadonlyArray<Series>,
  width = 640,
  height = 320,
): string => {
  const all = series.flatMap((s) => s.points)
  const xs = all.map((p) => p[0])
  const ys = all.map((p) => p[1])
  const [x0, x1] = [Math.min(0, ...xs), Math.max(1, ...xs)]
  const [y0, y1] = [Math.min(0, ...ys), Math.max(1e-9, ...ys)]
  const m = 40
  const px = (x: number) => (m + ((x - x0) / (x1 - x0 || 1)) * (width - 2 * m)).toFixed(1)
  const py = (y: number) => (height - m - ((y - y0) / (y1 - y0 || 1)) * (height - 2 * m)).toFixed(1)
  const rgb = (c: readonly [number, number, number]) => `rgb(${c.join(",")})`
  const lines = series
    .map(
      (s, i) =>
        `<polyline fill="none" stroke="${rgb(s.color)}" stroke-width="2" points="${s.points.map((p) => `${px(p[0])},${py(p[1])}`).join(" ")}"/>` +
        s.points
          .map((p) => `<circle cx="${px(p[0])}" cy="${py(p[1])}" r="3" fill="${rgb(s.color)}"/>`)
          .join("") +
        `<text x="${width - m - 150}" y="${m + 14 * i}" fill="${rgb(s.color)}" font-size="12">${s.name}</text>`,
    )
    .join("")
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif">
<text x="${m}" y="20" font-size="14">${title}</text>
<line x1="${m}" y1="${height - m}" x2="${width - m}" y2="${height - m}" stroke="black"/><line x1="${m}" y1="${m}" x2="${m}" y2="${height - m}" stroke="black"/>
<text x="4" y="${m}" font-size="11">${y1.toPrecision(3)}</text><text x="4" y="${height - m}" font-size="11">${y0.toPrecision(3)}</text>
<text x="${m}" y="${height - m + 16}" font-size="11">${x0}</text><text x="${width - m - 20}" y="${height - m + 16}" font-size="11">${x1}</text>
${lines}</svg>`
}
