/** The portal's reads and words on SQLite (the same suite runs on Postgres: test/postgres/PortalReads.test.ts). */
import { portalReadsSuite } from "./support/PortalReadsSuite.js"

portalReadsSuite()
