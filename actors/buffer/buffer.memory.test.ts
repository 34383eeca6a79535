import { MemoryBusLive } from "../../services/bus/index.ts"
import { bufferContract } from "./buffer.contract.ts"

bufferContract("in-memory bus", () => MemoryBusLive())
