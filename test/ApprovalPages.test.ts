/** The owner's view of approvals on SQLite (the same suite runs on Postgres: test/postgres/ApprovalPages.test.ts). */
import { approvalPagesSuite } from "./support/ApprovalPagesSuite.js"

approvalPagesSuite()
