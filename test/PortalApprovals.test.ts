/**
 * The portal stays light and shows who may approve what, over HTTP against a served daemon: the Approvals
 * page with 600 pending approvals of one assistant (12 MB of arguments) is one bounded page, live fragment
 * included; the live check (the approvals' stamp) reads an index only, never a row of `approvals` — so
 * never an argument; the Fleet page shows a connection's elicitation allowance and `Create connection`
 * sets it.
 */
import { SqlClient } from "@effect/sql"
import type { Connection } from "@effect/sql/SqlConnection"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Option } from "effect"
import { makeCore } from "../src/layers/App.js"
import { runMigrations } from "../src/layers/Migrations.js"
import { sqliteClient } from "../src/layers/Sql.js"
import * as Http from "../src/mcp/Http.js"
import { PortalRoutesLive } from "../src/mcp/portal/Routes.js"
import { PENDING_PAGE } from "../src/services/approvals/OwnerView.js"
import { Approvals } from "../src/services/Approvals.js"
import { Auth } from "../src/services/Auth.js"
import { Portal } from "../src/services/Portal.js"
import { DirectConnection } from "../src/services/store/Statements.js"
import { ask, ManyPending } from "./support/ApprovalPagesSuite.js"
import { tempDb } from "./support/Cli.js"
import { connect } from "./support/Fixtures.js"

const Served = Http.layer({ host: "127.0.0.1", port: 0, naming: "underscore" }).pipe(
  Layer.provideMerge(PortalRoutesLive),
  Layer.provideMerge(ManyPending)
)

/** A portal session over HTTP: its cookie, a GET with it, and a page's CSRF token. */
const session = Effect.gen(function*() {
  const http = yield* Http.HttpServer
  const { token } = yield* (yield* Portal).mintLogin()
  const r = yield* Effect.promise(() => fetch(`${http.baseUrl}/portal/login?token=${token}`, { redirect: "manual" }))
  const cookie = `sophia_portal=${/sophia_portal=([^;]+)/.exec(r.headers.get("set-cookie") ?? "")![1]}`
  const get = (path: string, headers: Record<string, string> = {}) =>
    Effect.promise(async () => {
      const res = await fetch(`${http.baseUrl}${path}`, { headers: { cookie, ...headers }, redirect: "manual" })
      return { status: res.status, text: await res.text() }
    })
  const post = (path: string, fields: Record<string, string>) =>
    Effect.promise(async () => {
      const res = await fetch(`${http.baseUrl}${path}`, {
        method: "POST",
        redirect: "manual",
        headers: { cookie, origin: http.baseUrl, "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams(fields)
      })
      return { status: res.status, text: await res.text() }
    })
  const csrf = Effect.map(get("/portal"), (page) => /name="_csrf" value="([^"]+)"/.exec(page.text)![1])
  return { base: http.baseUrl, get, post, csrf }
})

describe("the Approvals page with 600 pending approvals", () => {
  it.live("one page of 50, newest first, in a few hundred KB (against 12 MB of arguments), its live fragment as light", () =>
    Effect.gen(function*() {
      const { caller } = yield* connect("flood", "assistant")
      const body = "z".repeat(20_000)
      const ids: Array<string> = []
      for (let i = 0; i < 600; i++) ids.push(yield* ask(caller, `doc ${i}`, body))
      const { get } = yield* session
      const page = yield* get("/portal/approvals")
      assert.strictEqual(page.status, 200)
      assert.include(page.text, "Pending (600)")
      assert.strictEqual(page.text.match(/data-approval="/g)?.length, PENDING_PAGE)
      assert.isBelow(Buffer.byteLength(page.text), 300_000)
      // the newest first, each with the head of its arguments and a link to all of them
      assert.include(page.text, `data-approval="${ids[599]}"`)
      assert.notInclude(page.text, `data-approval="${ids[0]}"`)
      assert.notInclude(page.text, body)
      assert.include(page.text, `href="/portal/approvals?approval=${ids[599]}"`)
      const fragment = yield* get("/portal/approvals", { "x-portal-live": "1" })
      assert.strictEqual(fragment.text.match(/data-approval="/g)?.length, PENDING_PAGE)
      assert.isBelow(Buffer.byteLength(fragment.text), 300_000)
      // the whole arguments, one approval at a time
      const one = yield* get(`/portal/approvals?approval=${ids[0]}`)
      assert.include(one.text, body)
      assert.include(one.text, ">Approve</button>")
    }).pipe(Effect.provide(Served)), 120_000)
})

/** Every statement text run on the store's direct connection (single statements outside a transaction). */
const recorded: Array<string> = []
const recording = (connection: Connection): Connection =>
  new Proxy(connection, {
    get: (target, key, receiver) => {
      const value = Reflect.get(target, key, receiver)
      if (typeof value !== "function") return value
      if (key !== "execute" && key !== "executeValues" && key !== "executeRaw") return value.bind(target)
      return (...args: Array<unknown>) => {
        recorded.push(args[0] as string)
        return value.apply(target, args)
      }
    }
  })

/** A SQLite file whose direct connection records what it runs. */
const RecordingStore = Layer.effectDiscard(runMigrations).pipe(
  Layer.provideMerge(sqliteClient({ filename: tempDb() }).pipe(
    Layer.map((context) => Context.add(context, DirectConnection, recording(Context.unsafeGet(context, DirectConnection))))
  )),
  Layer.orDie
)

describe("the portal's live check", () => {
  it.live("reads the approvals' stamp from an index alone: no row of approvals, so no argument, is read", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const approvals = yield* Approvals
      const { caller } = yield* connect("flood", "assistant")
      for (let i = 0; i < 20; i++) yield* ask(caller, `doc ${i}`, "w".repeat(50_000))
      recorded.length = 0
      const stamp = yield* approvals.stamp()
      assert.isNotEmpty(recorded, "the stamp ran on the direct connection")
      assert.include(stamp, "pending:20")
      const plans = yield* Effect.forEach(recorded, (text) =>
        Effect.map(sql.unsafe<{ detail: string }>(`EXPLAIN QUERY PLAN ${text}`), (rows) => rows.map((r) => r.detail)))
      const onApprovals = plans.flat().filter((d) => /\bapprovals\b/.test(d))
      assert.isNotEmpty(onApprovals)
      for (const step of onApprovals) assert.match(step, /USING COVERING INDEX/, `reads rows of approvals: ${step}`)
    }).pipe(Effect.provide(makeCore(RecordingStore))))
})

describe("the elicitation allowance on the Fleet page", () => {
  it.live("shown on a connection minted with it; Create connection sets it only with its box ticked", () =>
    Effect.gen(function*() {
      const auth = yield* Auth
      const { caller: plain } = yield* connect("plain", "assistant")
      yield* auth.createConnection({ name: "trusted", profile: "assistant", allowElicitation: true })
      const { get, post, csrf } = yield* session
      const fleet = yield* get("/portal")
      const row = (text: string, name: string) => text.split("<tr ").find((r) => r.includes(`<th scope="row">${name}</th>`)) ?? ""
      assert.include(row(fleet.text, "trusted"), "client approves writes")
      assert.notInclude(row(fleet.text, "plain"), "client approves writes")
      assert.include(fleet.text, `<input type="checkbox" id="cc-elicit" name="allow_elicitation" value="1">`)
      const token = yield* csrf
      const ticked = yield* post("/portal/connections", { _csrf: token, name: "ticked", profile: "assistant", scope: "", allow_elicitation: "1" })
      assert.strictEqual(ticked.status, 200)
      assert.include(ticked.text, "its own client may approve its plain writes")
      yield* post("/portal/connections", { _csrf: token, name: "unticked", profile: "assistant", scope: "" })
      const listed = new Map((yield* auth.list()).map((c) => [c.name, c.allow_elicitation]))
      assert.strictEqual(listed.get("ticked"), true)
      assert.strictEqual(listed.get("unticked"), false)
      assert.strictEqual(listed.get("plain"), false)
      assert.isFalse(Option.getOrThrow(yield* auth.get(plain.connectionId)).allow_elicitation)
      assert.include(row((yield* get("/portal")).text, "ticked"), "client approves writes")
    }).pipe(Effect.provide(Served)))
})
