#!/usr/bin/env node
// Runs the TypeScript sources directly: there is no build step to forget.
import { register } from "tsx/esm/api"

register()
const { main } = await import("../main.ts")
await main(process.argv.slice(2))
