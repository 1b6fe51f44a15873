/** The portal's reads and words on Postgres (the same suite as test/PortalReads.test.ts on SQLite). */
import { portalReadsSuite } from "../support/PortalReadsSuite.js"

portalReadsSuite()
