import { busContract } from "./bus.contract.ts"
import { MemoryBusLive } from "./memory.ts"

busContract("in-memory", () => MemoryBusLive())
