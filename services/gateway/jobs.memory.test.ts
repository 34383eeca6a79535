import { MemoryBusLive } from "../bus/index.ts"
import { jobStoreContract } from "./jobs.contract.ts"

jobStoreContract("memory", () => MemoryBusLive())
