/**
 * Rotary position embedding in Hugging Face's `rotate_half` convention (Llama, Qwen3): pair i of a
 * head is (i, i + headDim/2), turned by pos · theta^(−2i/headDim). Tables are built once per
 * (head width, theta, length) and shared by every cache and training pass.
 */
export class Rope {
  readonly cos: Float64Array
  readonly sin: Float64Array

  constructor(
    readonly headDim: number,
    readonly theta: number,
    readonly maxLen: number,
  ) {
    const half = headDim / 2
    this.cos = new Float64Array(maxLen * half)
    this.sin = new Float64Array(maxLen * half)
    for (let pos = 0; pos < maxLen; pos++) {
      for (let i = 0; i < half; i++) {
        const angle = pos * theta ** ((-2 * i) / headDim)
        this.cos[pos * half + i] = Math.cos(angle)
        this.sin[pos * half + i] = Math.sin(angle)
      }
    }
  }

  /** Rotates the heads of one row (width nHeads·headDim) in place at `pos`; `sign` −1 un-rotates. */
  apply(
    row: Float32Array | Float64Array,
    offset: number,
    nHeads: number,
    pos: number,
    sign: 1 | -1,
  ): void {
    const half = this.headDim / 2
    const t = pos * half
    for (let h = 0; h < nHeads; h++) {
      const base = offset + h * this.headDim
      for (let i = 0; i < half; i++) {
        const c = this.cos[t + i] as number
        const s = sign * (this.sin[t + i] as number)
        const a = row[base + i] as number
        const b = row[base + half + i] as number
        row[base + i] = a * c - b * s
        row[base + half + i] = a * s + b * c
      }
    }
  }
}
