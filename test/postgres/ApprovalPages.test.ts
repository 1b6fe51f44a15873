/** The owner's view of approvals on Postgres (the same suite as test/ApprovalPages.test.ts on SQLite). */
import { approvalPagesSuite } from "../support/ApprovalPagesSuite.js"

approvalPagesSuite()
