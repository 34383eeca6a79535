import { Effect, Stream } from "effect"
const N = 200_000
async function* gen() { for (let i = 0; i < N; i++) yield i }
const t0 = performance.now()
let s = 0
for await (const x of gen()) s += x
const t1 = performance.now()
await Effect.runPromise(Stream.runForEach(Stream.fromAsyncIterable(gen(), String), (x) => Effect.sync(() => { s += x })))
const t2 = performance.now()
await Effect.runPromise(Stream.runForEach(Stream.fromAsyncIterable(gen(), String), (x) => Effect.andThen(Effect.sync(() => { s += x }), Effect.sync(() => { s -= 0 }))))
const t3 = performance.now()
console.log(`for-await ${((t1 - t0) * 1000 / N).toFixed(2)} µs/el, stream ${((t2 - t1) * 1000 / N).toFixed(2)} µs/el, stream+andThen ${((t3 - t2) * 1000 / N).toFixed(2)} µs/el`)
