/**
 * The owner's portal in a real browser: Debian's chromium driven headless by playwright-core against a real
 * `sophia serve` process over a SQLite file. Agents are real bearers calling the REST path; the owner only
 * clicks. Mandatory on CI (`.ci/run` installs chromium); skipped elsewhere only when chromium is absent.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core"
import { ROOT, SOPHIA, sophia, tempDb } from "../support/Cli.js"
import { type Daemon, startDaemon } from "../support/Daemon.js"

const CHROMIUM = "/usr/bin/chromium"
const ON_CI = process.env.CI !== undefined && process.env.CI !== "" && process.env.CI !== "false"
const HAVE_CHROMIUM = fs.existsSync(CHROMIUM)
const SHOTS = path.join(ROOT, "docs/screenshots")
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i

const suite = HAVE_CHROMIUM || ON_CI ? describe : describe.skip
const T = 90_000

suite("the owner's portal in chromium", () => {
  let db: string
  let daemon: Daemon
  let browser: Browser
  let owner: BrowserContext
  let page: Page
  let firstLink: string
  const bearers: Record<string, string> = {}
  const ids: Record<string, string> = {}

  const rest = async (bearer: string, tool: string, args: unknown = {}) => {
    const r = await fetch(`${daemon.baseUrl}/api/tools/${tool}`, {
      method: "POST",
      headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
      body: JSON.stringify(args)
    })
    return { status: r.status, body: (await r.json()) as any }
  }
  const mint = (name: string, profile: string) => {
    const r = sophia(["connection", "create", "--name", name, "--profile", profile, "--db", db])
    assert.strictEqual(r.status, 0, r.stderr)
    const minted = JSON.parse(r.stdout.trim().split("\n").pop()!)
    bearers[name] = minted.bearer
    ids[name] = minted.connection_id
    return bearers[name]
  }
  const live = (p: Page) => p.locator("#live-state[data-state=live]").waitFor({ timeout: 15_000 })
  const shot = (p: Page, name: string) => p.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true })

  beforeAll(async () => {
    fs.mkdirSync(SHOTS, { recursive: true })
    db = tempDb()
    // an ungated client's call is refused at once with its approval id (the wave-2 default)
    daemon = await startDaemon(db, { SOPHIA_APPROVAL_WAIT_MS: "0" })
    const link = /(http:\/\/\S+\/portal\/login\?token=\S+)/.exec(daemon.stdout())
    assert.isNotNull(link, `the first start prints a portal login link:\n${daemon.stdout()}`)
    firstLink = link![1]
    mint("scribe", "assistant")
    mint("builder", "full")
    mint("doomed", "full")
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync"
      ]
    })
    owner = await browser.newContext({ viewport: { width: 1280, height: 800 } })
    page = await owner.newPage()
  }, 180_000)

  afterAll(async () => {
    await browser?.close()
    await daemon?.kill("SIGTERM")
  })

  it("the login link works once, sets an HttpOnly SameSite=Strict cookie on /portal, and a second use is refused", async () => {
    const response = await page.goto(firstLink)
    assert.strictEqual(new URL(page.url()).pathname, "/portal")
    assert.strictEqual(response!.status(), 200)
    await page.getByRole("heading", { name: "Fleet", level: 1 }).waitFor()
    const cookies = await owner.cookies()
    const cookie = cookies.find((c) => c.name === "sophia_portal")!
    assert.isDefined(cookie)
    assert.strictEqual(cookie.httpOnly, true)
    assert.strictEqual(cookie.sameSite, "Strict")
    assert.strictEqual(cookie.path, "/portal")
    assert.strictEqual(await page.evaluate(() => (globalThis as any).document.cookie.includes("sophia_portal")), false)
    for (const name of ["Fleet", "Approvals", "Channels", "Waits", "Ledger", "Knowledge"]) {
      assert.isTrue(await page.getByRole("link", { name, exact: true }).isVisible(), name)
    }
    // the same link again, from another browser: refused, no cookie
    const other = await browser.newContext()
    const again = await (await other.newPage()).goto(firstLink)
    assert.strictEqual(again!.status(), 401)
    assert.match(await again!.text(), /already used/)
    assert.deepStrictEqual((await other.cookies()).filter((c) => c.name === "sophia_portal"), [])
    // `sophia portal` mints a new one-time link, printed as its last line
    const cli = sophia(["portal", "--db", db, "--port", new URL(daemon.baseUrl).port])
    assert.strictEqual(cli.status, 0, cli.stderr)
    const last = cli.stdout.trim().split("\n").pop()!
    assert.match(last, /^http:\/\/127\.0\.0\.1:\d+\/portal\/login\?token=spl_[A-Za-z0-9_-]+$/)
    const otherPage = await other.newPage()
    await otherPage.goto(last)
    assert.strictEqual(new URL(otherPage.url()).pathname, "/portal")
    await other.close()
    await shot(page, "fleet")
  })

  it("an assistant's write appears on Approvals without a reload, is approved there, and runs once on the agent's retry", async () => {
    await page.goto(`${daemon.baseUrl}/portal/approvals`)
    await live(page)
    await page.evaluate(() => ((globalThis as any).__sameDocument = true))
    const args = { title: "Portal design notes", body: "server-rendered pages, SSE for live updates" }
    const refused = await rest(bearers.scribe, "sophia.add_document", args)
    assert.strictEqual(refused.body.error.code, "approval_required")
    const id: string = refused.body.error.approval_id
    const started = Date.now()
    const card = page.locator(`[data-approval="${id}"]`)
    await card.waitFor({ timeout: 10_000 })
    const elapsed = Date.now() - started
    assert.strictEqual(await page.evaluate(() => (globalThis as any).__sameDocument), true, "no reload")
    // the tool, the caller and the exact arguments
    assert.include(await card.textContent(), "sophia.add_document")
    assert.include(await card.textContent(), "scribe")
    assert.deepStrictEqual(JSON.parse((await card.locator("pre.args").textContent())!), args)
    console.log(`approval shown live after ${elapsed} ms`)
    await shot(page, "approvals")
    await card.getByRole("button", { name: "Approve" }).click()
    await page.getByRole("status").filter({ hasText: "approved" }).waitFor()
    const first = await rest(bearers.scribe, "sophia.add_document", { ...args, approval_id: id })
    assert.strictEqual(first.status, 200, JSON.stringify(first.body))
    const second = await rest(bearers.scribe, "sophia.add_document", { ...args, approval_id: id })
    assert.strictEqual(second.body.document_id, first.body.document_id, "a retry replays the one execution")
    const found = await rest(bearers.builder, "sophia.search_documents", { query: "Portal design notes" })
    assert.strictEqual(found.body.items.filter((d: any) => d.title === args.title).length, 1)
    // the decided approval is listed as executed
    await page.reload()
    assert.include(await page.locator(`[data-approval="${id}"]`).textContent(), "executed")
  })

  it("a denial in the portal refuses the agent's retry", async () => {
    await page.goto(`${daemon.baseUrl}/portal/approvals`)
    await live(page)
    const args = { title: "Delete everything", body: "no" }
    const refused = await rest(bearers.scribe, "sophia.add_document", args)
    const id: string = refused.body.error.approval_id
    const card = page.locator(`[data-approval="${id}"]`)
    await card.waitFor({ timeout: 10_000 })
    await card.getByRole("button", { name: "Deny" }).click()
    await page.getByRole("status").filter({ hasText: "denied" }).waitFor()
    const retry = await rest(bearers.scribe, "sophia.add_document", { ...args, approval_id: id })
    assert.strictEqual(retry.body.error.code, "approval_denied")
    const found = await rest(bearers.builder, "sophia.search_documents", { query: "Delete everything" })
    assert.deepStrictEqual(found.body.items, [])
  })

  it("an elevated call is approved in the portal and runs on the retry", async () => {
    await page.goto(`${daemon.baseUrl}/portal/approvals`)
    await live(page)
    const args = { subject: "sophia", predicate: "has", object: "a portal" }
    const refused = await rest(bearers.builder, "sophia.remember_fact", args)
    assert.strictEqual(refused.body.error.code, "owner_approval_required")
    const id: string = refused.body.error.approval_id
    const card = page.locator(`[data-approval="${id}"]`)
    await card.waitFor({ timeout: 10_000 })
    assert.include(await card.textContent(), "elevated")
    await card.getByRole("button", { name: "Approve" }).click()
    await page.getByRole("status").filter({ hasText: "approved" }).waitFor()
    const retry = await rest(bearers.builder, "sophia.remember_fact", { ...args, approval_id: id })
    assert.strictEqual(retry.status, 200, JSON.stringify(retry.body))
    assert.isString(retry.body.fact_id)
    const facts = await rest(bearers.builder, "sophia.query_knowledge", { subject: "sophia" })
    assert.deepStrictEqual(facts.body.facts.map((f: any) => f.object), ["a portal"])
  })

  it("Revoke on Fleet makes that agent's next call fail with 401", async () => {
    assert.strictEqual((await rest(bearers.doomed, "sophia.orient")).status, 200)
    await page.goto(`${daemon.baseUrl}/portal`)
    const row = page.getByRole("row").filter({ has: page.getByRole("rowheader", { name: "doomed", exact: true }) })
    await row.getByRole("button", { name: "Revoke" }).click()
    await page.getByRole("status").filter({ hasText: "revoked doomed" }).waitFor()
    const after = await rest(bearers.doomed, "sophia.orient")
    assert.strictEqual(after.status, 401)
    assert.deepStrictEqual([after.body.error.code, after.body.error.reason], ["unauthenticated", "unknown_or_revoked"])
    assert.strictEqual(await page.getByRole("rowheader", { name: "doomed", exact: true }).count(), 0)
  })

  it("Create connection shows a bearer once, and that bearer works", async () => {
    await page.goto(`${daemon.baseUrl}/portal`)
    await page.getByLabel("Name", { exact: true }).fill("newbie")
    await page.getByLabel("Profile").selectOption("full")
    // caught up unless asked: the history box is there, unticked; so is the elicitation allowance (the owner decides)
    assert.isFalse(await page.getByLabel(/history unread/).isChecked())
    assert.isFalse(await page.getByLabel(/approve its plain writes by elicitation/).isChecked())
    await page.getByRole("button", { name: "Create connection" }).click()
    const bearer = (await page.locator("#bearer").textContent())!.trim()
    assert.match(bearer, /^sph_/)
    // the client entries start this Sophia: this Node on the package's bin, absolute, on this database; never npx
    const minted = (await page.locator(".minted").textContent())!
    assert.notInclude(minted, "npx")
    assert.include(minted, `claude mcp add --transport http sophia ${daemon.baseUrl}/mcp --header "Authorization: Bearer ${bearer}"`)
    assert.include(minted, `--env SOPHIA_BEARER=${bearer} -- ${process.execPath} ${SOPHIA} stdio --db ${db}`)
    const stdio = JSON.parse((await page.locator(".client-config").nth(1).locator("pre").nth(1).textContent())!)
    assert.deepStrictEqual(stdio.mcpServers.sophia, { command: process.execPath, args: [SOPHIA, "stdio", "--db", db], env: { SOPHIA_BEARER: bearer } })
    assert.isTrue(path.isAbsolute(SOPHIA) && path.isAbsolute(db))
    const orient = await rest(bearer, "sophia.orient")
    assert.strictEqual(orient.status, 200)
    assert.strictEqual(orient.body.name, "newbie")
    // shown once: a fresh load of Fleet lists the connection, never its bearer
    await page.goto(`${daemon.baseUrl}/portal`)
    assert.notInclude(await page.content(), bearer)
    assert.strictEqual(await page.getByRole("rowheader", { name: "newbie", exact: true }).count(), 1)
    // a rename from the same page
    const row = page.getByRole("row").filter({ has: page.getByRole("rowheader", { name: "newbie", exact: true }) })
    await row.getByLabel("New name for newbie").fill("veteran")
    await row.getByRole("button", { name: "Rename" }).click()
    await page.getByRole("status").filter({ hasText: "renamed to veteran" }).waitFor()
    const renamed = await rest(bearer, "sophia.orient")
    assert.strictEqual(renamed.body.name, "veteran")
  })

  it("the wait graph is drawn with both agents' names", async () => {
    await page.goto(`${daemon.baseUrl}/portal/waits`)
    await live(page)
    const wait = await rest(bearers.builder, "sophia.declare_wait", {
      on: "scribe",
      predicate: { type: "post_exists", channel: "arc:docs", kind: "closeout" },
      reason: "needs the design notes closed out"
    })
    assert.strictEqual(wait.status, 200, JSON.stringify(wait.body))
    // the new wait arrives live
    const svg = page.locator("svg.wait-graph")
    await svg.waitFor({ timeout: 10_000 })
    const labels = await svg.locator("text").allTextContents()
    assert.includeMembers(labels, ["builder", "scribe"])
    assert.strictEqual(await svg.locator("path.edge").count(), 1)
    // the predicate in words, with the agent's name and short id; the full ids only in the folded exact form
    const row = page.locator(`tr[data-wait="${(wait.body.wait_id as string).replace(/^wait-/, "").slice(0, 8)}"]`)
    const words = (await row.locator(".words").innerText()).replace(/\s+/g, " ")
    assert.strictEqual(words, `a closeout post in arc:docs from scribe ${ids.scribe.slice(0, 8)}`)
    assert.notMatch(await page.locator("#live").innerText(), UUID)
    await shot(page, "waits")
    const exact = row.locator("details")
    assert.isFalse(await exact.locator("pre").isVisible())
    await exact.getByText("exact JSON").click()
    assert.include(await exact.locator("pre").innerText(), `"from": "${ids.scribe}"`)
  })

  it("a ledger item is listed, its chain shown, and Verify ledger recomputes it", async () => {
    const appended = await rest(bearers.builder, "sophia.ledger_append", {
      work_id: "portal-1",
      expected_head: null,
      events: [{ type: "opened", title: "Build the portal" }, { type: "claimed" }, { type: "asserted", field: "tests", value: "green" }]
    })
    assert.strictEqual(appended.status, 200, JSON.stringify(appended.body))
    await page.goto(`${daemon.baseUrl}/portal/ledger`)
    const item = page.getByRole("row").filter({ has: page.getByRole("link", { name: "portal-1" }) })
    assert.include(await item.textContent(), "builder")
    assert.include(await item.textContent(), "Build the portal")
    await page.getByRole("button", { name: "Verify ledger" }).click()
    const verdict = page.locator("#verify-result")
    await verdict.waitFor()
    assert.match((await verdict.textContent())!, /Ledger verified: 1 work item, 3 events/)
    await page.getByRole("link", { name: "portal-1" }).click()
    await page.getByRole("heading", { name: /portal-1: Build the portal/ }).waitFor()
    assert.include(await page.locator("table.chain").textContent(), appended.body.head.slice(0, 12))
    assert.isTrue(await page.locator(".evidence-asserted").first().isVisible())
    await page.getByRole("button", { name: "Show diff" }).click()
    await page.locator("#diff").waitFor()
    assert.include(await page.locator("#diff").textContent(), "tests")
    await shot(page, "ledger")
  })

  it("Channels opens on the latest conversation with its posts, each count in its plural", async () => {
    for (const body of ["portal build started", "portal build green"]) {
      const posted = await rest(bearers.builder, "sophia.coordination_post", { channel: "arc:portal-1", kind: "status", body })
      assert.strictEqual(posted.status, 200, JSON.stringify(posted.body))
    }
    const once = await rest(bearers.scribe, "sophia.coordination_post", { channel: "general", kind: "status", body: "hello" })
    assert.strictEqual(once.status, 200, JSON.stringify(once.body))
    await page.goto(`${daemon.baseUrl}/portal/channels`)
    await page.getByRole("heading", { name: /general \(most recent activity\)/ }).waitFor()
    assert.include(await page.locator(".posts").innerText(), "hello")
    const list = await page.locator("#ch-h + ul, #ch-h ~ ul").first().innerText()
    assert.match(list, /general\s+1 post ·/)
    assert.match(list, /arc:portal-1\s+2 posts ·/)
    assert.notMatch(list, /\b1 posts\b/)
    await page.getByRole("link", { name: "arc:portal-1" }).click()
    await page.getByRole("heading", { name: "arc:portal-1", exact: true }).waitFor()
    assert.include(await page.locator(".posts").innerText(), "portal build green")
  })

  it("Knowledge lists the documents without a search, newest first", async () => {
    await page.goto(`${daemon.baseUrl}/portal/knowledge`)
    const docs = page.locator("section[aria-labelledby=docs-h]")
    await docs.getByRole("heading", { name: /Documents \(\d+\), newest first/ }).waitFor()
    assert.include(await docs.innerText(), "Portal design notes")
    await page.getByLabel("Search documents").fill("design")
    await page.getByRole("button", { name: "Search" }).click()
    await docs.getByRole("heading", { name: "Documents matching “design”" }).waitFor()
    assert.include(await docs.innerText(), "Portal design notes")
    await docs.getByRole("link", { name: "All documents, newest first" }).click()
    await docs.getByRole("heading", { name: /newest first/ }).waitFor()
  })

  it("at phone width Channels, Waits and Knowledge do not overflow", async () => {
    const phone = await owner.newPage()
    await phone.setViewportSize({ width: 390, height: 844 })
    for (const p of ["channels", "waits", "knowledge"]) {
      await phone.goto(`${daemon.baseUrl}/portal/${p}`)
      assert.isAtMost(await phone.evaluate(() => (globalThis as any).document.documentElement.scrollWidth), 391, p)
    }
    await phone.close()
  })

  it("a state-changing POST without the CSRF token, or without Origin, is refused with 403", async () => {
    await page.goto(`${daemon.baseUrl}/portal`)
    const builderId = await page.getByRole("row").filter({ has: page.getByRole("rowheader", { name: "builder", exact: true }) })
      .getAttribute("data-connection")
    const status = await page.evaluate(async (id) => {
      const r = await fetch(`/portal/connections/${id}/revoke`, { method: "POST", body: new URLSearchParams({}) })
      return r.status
    }, builderId)
    assert.strictEqual(status, 403)
    // the right token but no Origin (not a browser form): 403 too
    const csrf = await page.locator("input[name=_csrf]").first().inputValue()
    const cookie = (await owner.cookies()).find((c) => c.name === "sophia_portal")!.value
    const noOrigin = await fetch(`${daemon.baseUrl}/portal/connections/${builderId}/revoke`, {
      method: "POST",
      headers: { cookie: `sophia_portal=${cookie}`, "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ _csrf: csrf })
    })
    assert.strictEqual(noOrigin.status, 403)
    assert.strictEqual((await rest(bearers.builder, "sophia.orient")).status, 200, "builder was not revoked")
  })

  it("the portal cookie opens neither /mcp nor REST, and a bearer opens nothing under /portal", async () => {
    const cookie = (await owner.cookies()).find((c) => c.name === "sophia_portal")!.value
    const mcp = await fetch(`${daemon.baseUrl}/mcp`, {
      method: "POST",
      headers: { cookie: `sophia_portal=${cookie}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "t", version: "1" } }
      })
    })
    assert.strictEqual(mcp.status, 401)
    const restCall = await fetch(`${daemon.baseUrl}/api/tools/sophia.orient`, {
      method: "POST",
      headers: { cookie: `sophia_portal=${cookie}`, "content-type": "application/json" },
      body: "{}"
    })
    assert.strictEqual(restCall.status, 401)
    for (const headers of [{ authorization: `Bearer ${bearers.builder}` } as Record<string, string>, { authorization: `Bearer ${bearers.builder}`, cookie: `sophia_portal=${cookie}` }]) {
      const r = await fetch(`${daemon.baseUrl}/portal`, { headers })
      assert.strictEqual(r.status, 401)
      assert.notInclude(await r.text(), "Connections")
    }
  })

  it("at phone width the page does not overflow, and an approval is decided with the keyboard alone", async () => {
    const phone = await owner.newPage()
    await phone.setViewportSize({ width: 390, height: 844 })
    await phone.goto(`${daemon.baseUrl}/portal/approvals`)
    await live(phone)
    const refused = await rest(bearers.scribe, "sophia.add_document", { title: "Keyboard only", body: "tab, tab, enter" })
    const id: string = refused.body.error.approval_id
    await phone.locator(`[data-approval="${id}"]`).waitFor({ timeout: 10_000 })
    assert.isAtMost(await phone.evaluate(() => (globalThis as any).document.documentElement.scrollWidth), 391)
    let reached = false
    for (let i = 0; i < 40 && !reached; i++) {
      await phone.keyboard.press("Tab")
      reached = await phone.evaluate((approval) => {
        const el = (globalThis as any).document.activeElement
        return el?.tagName === "BUTTON" && el.textContent === "Approve" && el.closest("[data-approval]")?.getAttribute("data-approval") === approval
      }, id)
    }
    assert.isTrue(reached, "Tab reaches the Approve button")
    await phone.keyboard.press("Enter")
    await phone.getByRole("status").filter({ hasText: "approved" }).waitFor()
    const retry = await rest(bearers.scribe, "sophia.add_document", { title: "Keyboard only", body: "tab, tab, enter", approval_id: id })
    assert.strictEqual(retry.status, 200, JSON.stringify(retry.body))
    await phone.close()
  })

  it("Approvals is paged: 50 newest first, the rest behind Older approvals; a long argument is read whole before Approve", async () => {
    for (const name of ["flood-a", "flood-b"]) {
      mint(name, "assistant")
      for (let i = 0; i < 30; i++) {
        const refused = await rest(bearers[name], "sophia.add_document", { title: `${name} ${i}`, body: i === 0 ? "long ".repeat(1_000) : "short" })
        assert.strictEqual(refused.body.error.code, "approval_required")
      }
    }
    await page.goto(`${daemon.baseUrl}/portal/approvals`)
    const pending = page.locator("section[aria-labelledby=pending-h] [data-approval]")
    assert.strictEqual(await pending.count(), 50)
    assert.include(await page.locator("#pending-h").innerText(), "Pending (60)")
    assert.include(await pending.first().innerText(), "flood-b 29")
    await page.getByRole("link", { name: "Older approvals" }).click()
    // (a count does not wait: wait for the older page itself, which alone links back to newer ones)
    await page.waitForURL(/[?&]before=/)
    await page.getByRole("link", { name: /^(Newer|Newest) approvals$/ }).waitFor()
    assert.strictEqual(await pending.count(), 10)
    const long = pending.filter({ hasText: "flood-a 0" })
    assert.strictEqual(await long.getByRole("button", { name: "Approve" }).count(), 0)
    await long.getByRole("link", { name: /characters of the arguments/ }).click()
    await page.waitForURL(/[?&]approval=/)
    assert.include(await page.locator("[data-approval] pre").innerText(), "long long")
    assert.strictEqual(await page.getByRole("button", { name: "Approve" }).count(), 1)
    await page.getByRole("link", { name: "All pending approvals" }).click()
    await page.getByRole("link", { name: "Older approvals" }).waitFor()
    assert.strictEqual(await pending.count(), 50)
  })

  it("a connection created with the elicitation box ticked is marked on Fleet", async () => {
    await page.goto(`${daemon.baseUrl}/portal`)
    await page.getByLabel("Name", { exact: true }).fill("trusted")
    await page.getByLabel(/approve its plain writes by elicitation/).check()
    await page.getByRole("button", { name: "Create connection" }).click()
    await page.getByRole("status").filter({ hasText: "its own client may approve its plain writes" }).waitFor()
    await page.goto(`${daemon.baseUrl}/portal`)
    const row = (name: string) => page.getByRole("row").filter({ has: page.getByRole("rowheader", { name, exact: true }) })
    assert.include(await row("trusted").innerText(), "client approves writes")
    assert.notInclude(await row("scribe").innerText(), "client approves writes")
  })

  it("Log out ends the session", async () => {
    await page.goto(`${daemon.baseUrl}/portal`)
    await page.getByRole("button", { name: "Log out" }).click()
    const r = await page.goto(`${daemon.baseUrl}/portal`)
    assert.strictEqual(r!.status(), 401)
  })
})
