#!/usr/bin/env node
// The `sophia` command: runs the TypeScript entry through tsx's loader (no build step to forget).
import { register } from "tsx/esm/api"
register()
await import("../src/main.ts")
