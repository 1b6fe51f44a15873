/**
 * Notifications in a real browser (docs/architecture.md, "Notifications"): Debian's chromium driven headless by
 * playwright-core against a real `sophia serve` process over a SQLite file, local HTTP receivers as the targets.
 * The owner adds a target on the Notifications page and tests it; an agent's gated call reaches the receiver
 * within 2 s, signed; its `links.approve`, opened in a browser that never logged in, shows that approval and
 * nothing else, and approves it; the link used twice is refused; a target that keeps failing leaves a dead
 * letter, which `Retry` delivers; `Remove` removes a target. Skipped only where chromium is absent (not on CI).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { type Browser, chromium, type Page } from "playwright-core"
import { ROOT, sophia, tempDb } from "../support/Cli.js"
import { type Daemon, startDaemon } from "../support/Daemon.js"
import { type Receiver, startReceiver, verifySignature } from "../support/Receiver.js"

const CHROMIUM = "/usr/bin/chromium"
const ON_CI = process.env.CI !== undefined && process.env.CI !== "" && process.env.CI !== "false"
const suite = fs.existsSync(CHROMIUM) || ON_CI ? describe : describe.skip
const SHOTS = path.join(ROOT, "docs/screenshots")

suite("notifications in chromium", () => {
  let db: string
  let daemon: Daemon
  let browser: Browser
  let page: Page
  let ok: Receiver
  let failing: Receiver
  let scribe: string
  let approveLink = ""
  let approvalId = ""

  const rest = async (bearer: string, tool: string, args: unknown = {}) => {
    const r = await fetch(`${daemon.baseUrl}/api/tools/${tool}`, {
      method: "POST",
      headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
      body: JSON.stringify(args)
    })
    return { status: r.status, body: (await r.json()) as any }
  }
  const targetRow = (url: string) => page.locator("tr[data-target]").filter({ hasText: url })
  const addTarget = async (url: string, secret?: string) => {
    await page.getByLabel(/^URL/).fill(url)
    if (secret !== undefined) await page.getByLabel(/^Signing secret/).fill(secret)
    await page.getByRole("button", { name: "Add target" }).click()
    await page.getByRole("status").filter({ hasText: `added ${url}` }).waitFor()
  }

  beforeAll(async () => {
    db = tempDb()
    // the first retry after 20 ms (1 s in production): a dead letter within seconds
    daemon = await startDaemon(db, { SOPHIA_APPROVAL_WAIT_MS: "0", SOPHIA_NOTIFY_BACKOFF_MS: "20" })
    ok = await startReceiver()
    failing = await startReceiver(() => 500)
    const minted = sophia(["connection", "create", "--name", "scribe", "--profile", "assistant", "--db", db])
    assert.strictEqual(minted.status, 0, minted.stderr)
    scribe = JSON.parse(minted.stdout.trim().split("\n").pop()!).bearer
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-sync"]
    })
    page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage()
    const link = /(http:\/\/\S+\/portal\/login\?token=\S+)/.exec(daemon.stdout())![1]
    await page.goto(link)
  }, 180_000)

  afterAll(async () => {
    await browser?.close()
    await daemon?.kill("SIGTERM")
    await ok?.close()
    await failing?.close()
  })

  it("the owner adds a target on the Notifications page and Test reaches it", { timeout: 60_000 }, async () => {
    await page.getByRole("link", { name: "Notifications", exact: true }).click()
    await page.getByRole("heading", { name: "Notifications", level: 1 }).waitFor()
    await addTarget(ok.url, "whsec_browser")
    assert.include(await targetRow(ok.url).textContent(), "approval_requested")
    await targetRow(ok.url).getByRole("button", { name: "Test" }).click()
    await page.getByRole("status").filter({ hasText: "test notification" }).waitFor()
    const [test] = await ok.waitFor(1)
    assert.strictEqual(test.headers["sophia-event"], "test")
    assert.isTrue(await verifySignature("whsec_browser", test.headers["sophia-signature"] as string, test.body))
  })

  it("a gated call reaches the receiver within 2 s, signed, with links.approve", { timeout: 60_000 }, async () => {
    const refused = await rest(scribe, "sophia.add_document", { title: "From the phone", body: "approve me" })
    const calledAt = Date.now()
    assert.strictEqual(refused.body.error.code, "approval_required")
    approvalId = refused.body.error.approval_id
    const heard = await ok.waitFor(2)
    const got = heard[1]
    assert.isBelow(got.at - calledAt, 2000)
    assert.strictEqual(got.headers["sophia-event"], "approval_requested")
    assert.isTrue(await verifySignature("whsec_browser", got.headers["sophia-signature"] as string, got.body))
    approveLink = JSON.parse(got.body).links.approve
    assert.match(approveLink, new RegExp(`^${daemon.baseUrl}/portal/approve/${approvalId}\\?token=spa_`))
  })

  it("links.approve opens that approval, and nothing else, in a browser that never logged in; Approve decides it", { timeout: 60_000 }, async () => {
    const phone = await browser.newContext({ viewport: { width: 390, height: 844 } })
    const p = await phone.newPage()
    await p.goto(approveLink)
    const at = new URL(p.url())
    assert.strictEqual(at.pathname, "/portal/approvals")
    assert.strictEqual(at.searchParams.get("approval"), approvalId)
    const card = p.locator(`[data-approval="${approvalId}"]`)
    await card.waitFor()
    assert.include(await card.textContent(), "sophia.add_document")
    assert.strictEqual(await p.getByRole("navigation", { name: "Portal" }).count(), 0, "no navigation")
    assert.strictEqual(await p.getByRole("link", { name: "All pending approvals" }).count(), 0)
    await p.screenshot({ path: path.join(SHOTS, "approve-link.png"), fullPage: true })
    // nothing else opens
    for (const other of ["/portal", "/portal/approvals", "/portal/notifications", "/portal/approvals?approval=apr-other", "/portal/channels"]) {
      const r = await p.goto(daemon.baseUrl + other)
      assert.strictEqual(r!.status(), 403, other)
    }
    await p.goto(`${daemon.baseUrl}/portal/approvals?approval=${approvalId}`)
    await p.locator(`[data-approval="${approvalId}"]`).getByRole("button", { name: "Approve" }).click()
    await p.getByRole("status").filter({ hasText: "approved" }).waitFor()
    assert.strictEqual(new URL(p.url()).searchParams.get("approval"), approvalId)
    const run = await rest(scribe, "sophia.add_document", { title: "From the phone", body: "approve me", approval_id: approvalId })
    assert.strictEqual(run.status, 200, JSON.stringify(run.body))
    await phone.close()
  })

  it("the approve link used a second time is refused", { timeout: 60_000 }, async () => {
    const other = await browser.newContext()
    const p = await other.newPage()
    const r = await p.goto(approveLink)
    assert.strictEqual(r!.status(), 401)
    assert.match(await r!.text(), /already used/)
    assert.deepStrictEqual((await other.cookies()).filter((c) => c.name === "sophia_portal"), [])
    await other.close()
  })

  it("with the owner's session the link goes straight to the approval and spends nothing", { timeout: 60_000 }, async () => {
    const refused = await rest(scribe, "sophia.add_document", { title: "Owner at the desk", body: "b" })
    const id: string = refused.body.error.approval_id
    const heard = await ok.waitFor(3)
    const link = JSON.parse(heard.find((r) => r.body.includes(id))!.body).links.approve as string
    await page.goto(link)
    assert.strictEqual(new URL(page.url()).searchParams.get("approval"), id)
    assert.isTrue(await page.getByRole("navigation", { name: "Portal" }).isVisible(), "the owner's own session, whole")
    // the token is still good for a browser without a session
    const other = await browser.newContext()
    const p = await other.newPage()
    await p.goto(link)
    assert.strictEqual(new URL(p.url()).searchParams.get("approval"), id)
    await p.locator(`[data-approval="${id}"]`).waitFor()
    await other.close()
  })

  it("a target that keeps failing leaves a dead letter; Retry delivers it; Remove removes the target", { timeout: 90_000 }, async () => {
    await page.goto(`${daemon.baseUrl}/portal/notifications`)
    await addTarget(failing.url)
    await targetRow(failing.url).getByRole("button", { name: "Test" }).click()
    await page.getByRole("status").filter({ hasText: "test notification" }).waitFor()
    await failing.waitFor(8, 30_000)
    let dead = page.locator("tr[data-notification]").filter({ has: page.getByRole("button", { name: "Retry" }) })
    for (let i = 0; i < 40 && (await dead.count()) === 0; i++) {
      await new Promise((r) => setTimeout(r, 250))
      await page.reload()
      dead = page.locator("tr[data-notification]").filter({ has: page.getByRole("button", { name: "Retry" }) })
    }
    assert.strictEqual(await dead.count(), 1)
    assert.include(await dead.textContent(), "HTTP 500")
    await page.screenshot({ path: path.join(SHOTS, "notifications.png"), fullPage: true })
    const id = await dead.getAttribute("data-notification")
    failing.answer = () => 200
    await dead.getByRole("button", { name: "Retry" }).click()
    await page.getByRole("status").filter({ hasText: "retrying" }).waitFor()
    const received = await failing.waitFor(9, 10_000)
    assert.strictEqual(received[8].headers["sophia-delivery"], id)
    await page.reload()
    assert.strictEqual(await page.locator("tr[data-notification]").filter({ has: page.getByRole("button", { name: "Retry" }) }).count(), 0)
    await targetRow(failing.url).getByRole("button", { name: "Remove" }).click()
    await page.getByRole("status").filter({ hasText: `removed ${failing.url}` }).waitFor()
    assert.strictEqual(await targetRow(failing.url).count(), 0)
    assert.strictEqual(await targetRow(ok.url).count(), 1)
  })
})
