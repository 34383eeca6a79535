// Entry of a gradient worker thread (model/moe/parallel.ts): loads the TypeScript sources through
// tsx, as cli/bin/t1.js does, then serves jobs (gradWorker.ts).
import { register } from "tsx/esm/api"

register()
await import("./gradWorker.ts")
