import { MemoryBusLive } from "../../services/bus/index.ts"
import { coordinatorContract } from "./coordinator.contract.ts"

coordinatorContract("in-memory bus", () => MemoryBusLive())
