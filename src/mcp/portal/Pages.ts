import type { Effect } from "effect"
import type { ApprovalInfo } from "../../domain/Approvals.js"
import type { ChannelSummary, PostRow } from "../../domain/Coordination.js"
import { BEACON_CHANNEL } from "../../domain/Coordination.js"
import type { DocumentHit, FactRow } from "../../domain/Knowledge.js"
import type { LedgerDiff, LedgerStatus } from "../../domain/Ledger.js"
import type { FleetView } from "../../domain/Portal.js"
import type { TargetReceipt } from "../../domain/Receipts.js"
import type { WaitGraphResult } from "../../domain/Waits.js"
import { WAIT_CHANNEL } from "../../domain/Waits.js"
import type { ApprovalCursor, ApprovalInFull, ApprovalSummary, PendingPage } from "../../services/approvals/OwnerView.js"
import type { Knowledge } from "../../services/Knowledge.js"
import type { DocumentCursor } from "../../services/knowledge/DocumentList.js"
import type { Ledger, VerifyReport } from "../../services/Ledger.js"
import type { ClientConfig } from "../ClientConfigs.js"
import { waitGraphSvg } from "./Graph.js"
import { Html, html, json } from "./Html.js"
import { agent, plural, predicateInWords } from "./Words.js"

/** What the pages render, as the services return it. */
type ResultOf<F extends (...args: any) => Effect.Effect<any, any, any>> = Effect.Effect.Success<ReturnType<F>>
export type WorkListing = ResultOf<Ledger["listWork"]>[number]
export type ChainEvent = ResultOf<Ledger["events"]>[number]
export type Mutation = ResultOf<Knowledge["mutations"]>[number]
export type DocumentPage = ResultOf<Knowledge["recentDocuments"]>

/** The six pages of the contract and Notifications, in nav order: [path, visible name]. */
export const NAV = [
  ["/portal", "Fleet"],
  ["/portal/approvals", "Approvals"],
  ["/portal/channels", "Channels"],
  ["/portal/waits", "Waits"],
  ["/portal/ledger", "Ledger"],
  ["/portal/knowledge", "Knowledge"],
  ["/portal/notifications", "Notifications"]
] as const
export type PageName = (typeof NAV)[number][1]

export interface Frame {
  readonly csrf: string
  readonly page: PageName
  readonly notice?: string | undefined
  readonly error?: string | undefined
  /** a session opened by an approve link: it sees one approval, so no navigation is offered */
  readonly scoped?: boolean | undefined
}

/** A POST form with the CSRF token: every state change is one of these (a real `<button>` named by its verb). */
export const form = (csrf: string, action: string, button: string, fields: Html | string = "", label?: string) =>
  html`<form method="post" action="${action}" class="inline">${
    new Html(typeof fields === "string" ? fields : fields.text)
  }<input type="hidden" name="_csrf" value="${csrf}"><button type="submit"${
    label ? new Html(` aria-describedby="${label}"`) : ""
  }>${button}</button></form>`

/** The frame of every page: skip link, nav, notice, the live region (`data-live` names the events that refresh it). */
export const layoutPage = (frame: Frame, live: ReadonlyArray<string>, body: Html, extra: Html = html``) =>
  html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${frame.page} · Sophia</title><link rel="stylesheet" href="/portal/assets/portal.css">
<script src="/portal/assets/portal.js" defer></script></head>
<body><a class="skip" href="#main">Skip to content</a>
<header><span class="brand">Sophia</span>${
    frame.scoped === true ? "" : html`<nav aria-label="Portal"><ul>${
      NAV.map(([href, name]) =>
        html`<li><a href="${href}"${name === frame.page ? new Html(" aria-current=\"page\"") : ""}>${name}</a></li>`
      )
    }</ul></nav>`
  }${form(frame.csrf, "/portal/logout", "Log out")}<span class="live-state" aria-live="polite" id="live-state"></span></header>
<main id="main" tabindex="-1"><h1>${frame.page}</h1>
${frame.notice ? html`<p class="notice" role="status">${frame.notice}</p>` : ""}
${frame.error ? html`<p class="error" role="alert">${frame.error}</p>` : ""}
${extra}
<div id="live" data-live="${live.join(" ")}">${body}</div>
</main></body></html>`

export const since = (iso: string | null | undefined) => (iso ? html`<time datetime="${iso}">${iso.replace("T", " ").slice(0, 19)}</time>` : "never")

// ------------------------------------------------------------------ Fleet

export const fleetBody = (csrf: string, view: FleetView) => {
  const live = view.connections.filter((r) => r.connection.revoked_at === null)
  const revoked = view.connections.filter((r) => r.connection.revoked_at !== null)
  return html`<section aria-labelledby="fleet-h"><h2 id="fleet-h">Connections (${live.length} live)</h2>
<div class="scroll"><table><thead><tr><th scope="col">Agent</th><th scope="col">Id</th><th scope="col">User</th><th scope="col">Profile</th><th scope="col">Scope</th><th scope="col">Last seen</th><th scope="col">Unread</th><th scope="col">Open waits</th><th scope="col">Claimed work</th><th scope="col">Actions</th></tr></thead><tbody>
${
    live.map(({ connection: c, ...r }) =>
      html`<tr data-connection="${c.connection_id}"><th scope="row">${c.name}</th><td><code>${c.connection_short}</code></td><td>${c.user_name}</td>
<td><span class="badge profile-${r.is_portal ? "portal" : c.profile}">${r.is_portal ? "portal" : c.profile}</span>${
        c.allow_elicitation && !r.is_portal
          ? html` <span class="badge elicitation" title="its own MCP client may approve its plain writes by elicitation">client approves writes</span>`
          : ""
      }</td>
<td>${c.entity_scope.length === 0 ? "all" : c.entity_scope.join(", ")}</td><td>${since(c.last_seen_at)}</td>
<td>${r.unread}</td><td>${r.open_waits}</td><td>${
        r.claimed.length === 0 ? "—" : r.claimed.map((w) => html`<a href="/portal/ledger?work=${encodeURIComponent(w.work_id)}">${w.work_id}</a> `)
      }</td>
<td class="actions">${
        r.is_portal ? html`<span class="muted">this portal</span>` : html`${
          form(
            csrf,
            `/portal/connections/${c.connection_id}/rename`,
            "Rename",
            html`<label class="sr" for="rn-${c.connection_id}">New name for ${c.name}</label><input id="rn-${c.connection_id}" name="name" required maxlength="64" value="${c.name}">`
          )
        }${form(csrf, `/portal/connections/${c.connection_id}/revoke`, "Revoke")}`
      }</td></tr>`
    )
  }</tbody></table></div></section>
${
    revoked.length === 0 ? "" : html`<details><summary>${revoked.length} revoked</summary><ul>${
      revoked.slice(0, 100).map(({ connection: c }) => html`<li>${c.name} <code>${c.connection_short}</code> revoked ${since(c.revoked_at)}</li>`)
    }</ul></details>`
  }`
}

export const createForm = (csrf: string) =>
  html`<section aria-labelledby="create-h" class="card"><h2 id="create-h">New connection</h2>
<form method="post" action="/portal/connections" class="grid">
<label for="cc-name">Name</label><input id="cc-name" name="name" required maxlength="64" autocomplete="off">
<label for="cc-profile">Profile</label><select id="cc-profile" name="profile"><option value="observer">observer</option><option value="assistant" selected>assistant</option><option value="full">full</option></select>
<label for="cc-scope">Scope (entity ids, comma-separated; empty = all)</label><input id="cc-scope" name="scope" autocomplete="off">
<span class="check"><input type="checkbox" id="cc-backlog" name="backlog" value="1"><label for="cc-backlog">Start with the channels' history unread (default: caught up; posts to it still count)</label></span>
<span class="check"><input type="checkbox" id="cc-elicit" name="allow_elicitation" value="1"><label for="cc-elicit">Let its own MCP client approve its plain writes by elicitation (default: you decide each; elevated tools always need you)</label></span>
<input type="hidden" name="_csrf" value="${csrf}"><button type="submit">Create connection</button></form></section>`

/**
 * A new connection: its bearer, shown once, and the client entries that start this Sophia with it (absolute
 * commands, from `ClientConfigs`), each as Claude Code's one line and as the `mcpServers` entry others take.
 */
export const mintedBody = (minted: { connection_id: string; name: string; profile: string; bearer: string }, configs: ReadonlyArray<ClientConfig>) =>
  html`<section class="card minted" aria-labelledby="minted-h"><h2 id="minted-h">Connection “${minted.name}” created (${minted.profile})</h2>
<p>Its bearer is shown once, now. Store it:</p><p><code id="bearer" class="bearer">${minted.bearer}</code></p>${
    configs.map((c, i) =>
      html`<section class="client-config" aria-labelledby="cfg-${i}"><h3 id="cfg-${i}">${c.title}</h3>
<p>Claude Code:</p><pre>${c.command}</pre><p>Any other MCP client (<code>mcpServers</code> entry):</p><pre>${json(c.json)}</pre></section>`
    )
  }</section>`

// ------------------------------------------------------------------ Approvals

/** Where a page of the approvals listing starts, as its link carries it: `<created_at>~<approval_id>`. */
export const approvalCursorParam = (c: ApprovalCursor) => `${c.created_at}~${c.approval_id}`
export const approvalCursorOf = (param: string | null): ApprovalCursor | undefined => {
  const m = param === null ? null : /^(\d{4}-\d\d-\d\dT[0-9:.]+Z)~(.{1,200})$/.exec(param)
  return m ? { created_at: m[1], approval_id: m[2] } : undefined
}

const approvalHref = (id: string) => `/portal/approvals?approval=${encodeURIComponent(id)}`

/** The arguments' JSON pretty-printed (as stored, should it not parse). */
const prettyArgs = (text: string) => {
  try {
    return json(JSON.parse(text))
  } catch {
    return text
  }
}

/**
 * An approval's arguments as a listing shows them: all of them, or — past the head the listing carries — the
 * head and a link to the approval with every character (the owner approves only what it has read).
 */
const argsShown = (a: ApprovalSummary | ApprovalInFull) =>
  "args" in a
    ? html`<pre class="args" aria-label="arguments">${json(a.args)}</pre>`
    : a.args_whole
    ? html`<pre class="args" aria-label="arguments">${prettyArgs(a.args_head)}</pre>`
    : html`<pre class="args" aria-label="arguments, start">${a.args_head}…</pre><p><a href="${approvalHref(a.approval_id)}">Read all ${
      plural(a.args_chars, "character")
    } of the arguments</a> (to approve)</p>`

const approvalRow = (csrf: string, a: ApprovalSummary | ApprovalInFull) => {
  const decided = a.status !== "pending"
  const whole = "args" in a || a.args_whole
  return html`<article class="approval card" data-approval="${a.approval_id}" aria-labelledby="ap-${a.approval_id}">
<h3 id="ap-${a.approval_id}"><code>${a.tool}</code> <span class="badge access-${a.access}">${a.access}</span>${
    decided ? html` <span class="badge status-${a.status}">${a.status}</span>` : ""
  }</h3>
<p>by <strong>${a.connection_name}</strong> <code>${a.connection_id.slice(0, 8)}</code> (${a.user_name}) · asked ${since(a.created_at)}${
    decided && a.decided_at ? html` · decided ${since(a.decided_at)} via ${a.decided_via ?? ""}` : ""
  }</p>
${argsShown(a)}
${
    decided ? "" : html`<div class="actions">${whole ? form(csrf, `/portal/approvals/${a.approval_id}/approve`, "Approve") : ""}${
      form(csrf, `/portal/approvals/${a.approval_id}/deny`, "Deny")
    }</div>`
  }</article>`
}

/** The links to the pages around this one: newer (or the newest) above, older below. */
const approvalsPager = (page: PendingPage) =>
  page.newer === null && page.older === null ? "" : html`<nav class="pager" aria-label="Pending approvals">${
    page.newer === "newest"
      ? html`<a href="/portal/approvals">Newest approvals</a> `
      : page.newer !== null
      ? html`<a href="/portal/approvals?after=${encodeURIComponent(approvalCursorParam(page.newer))}" rel="prev">Newer approvals</a> `
      : ""
  }${page.older === null ? "" : html`<a href="/portal/approvals?before=${encodeURIComponent(approvalCursorParam(page.older))}" rel="next">Older approvals</a>`}</nav>`

/** Pending approvals a page at a time, newest first (each with the head of its arguments), and the most recently decided. */
export const approvalsBody = (csrf: string, page: PendingPage, recent: ReadonlyArray<ApprovalSummary>) =>
  html`<section aria-labelledby="pending-h"><h2 id="pending-h">Pending (${page.total})</h2>${
    page.total === 0
      ? html`<p class="muted">Nothing waits for your decision.</p>`
      : html`<p class="muted">${page.items.length === page.total ? "newest first" : `${page.items.length} of ${page.total} shown, newest first`}</p>${
        page.items.length === 0 ? html`<p class="muted">None on this page.</p>` : page.items.map((a) => approvalRow(csrf, a))
      }${approvalsPager(page)}`
  }</section>
<section aria-labelledby="recent-h"><h2 id="recent-h">Recently decided</h2>${
    recent.length === 0 ? html`<p class="muted">None yet.</p>` : recent.map((a) => approvalRow(csrf, a))
  }</section>`

/** One approval with every character of its arguments (`undefined`: no such approval). */
export const approvalBody = (csrf: string, id: string, approval: ApprovalInFull | undefined, scoped = false) =>
  html`${scoped ? "" : html`<p><a href="/portal/approvals">All pending approvals</a></p>`}${
    approval === undefined ? html`<p class="error" role="alert">No approval ${id}.</p>` : approvalRow(csrf, approval)
  }`

// ------------------------------------------------------------------ Channels

/**
 * The channel a Channels page opens on when none is asked: the most recently active conversation — open,
 * and neither the heartbeats' nor the waits' (the Waits page shows those) — else the most recent of any
 * (`channels` come most recent first).
 */
export const openingChannel = (channels: ReadonlyArray<ChannelSummary>): string | undefined =>
  (channels.find((c) => !c.archived && c.channel !== BEACON_CHANNEL && c.channel !== WAIT_CHANNEL) ?? channels[0])?.channel

/** A targeted post's receipt: read by its target (when, how), or not yet. */
const receiptOf = (r: TargetReceipt | undefined) =>
  r === undefined ? "" : r.read_at === null
    ? html` <span class="receipt muted">· not read yet</span>`
    : html` <span class="receipt">· read ${since(r.read_at)}${r.via !== null ? ` via ${r.via}` : ""}</span>`

const postItem = (p: PostRow, receipt: TargetReceipt | undefined) =>
  html`<li class="post kind-${p.kind}"><div class="meta"><span class="seq">#${p.channel_seq}</span> <span class="badge">${p.kind}</span> <strong>${p.agent_name}</strong> <code>${p.connection_short}</code> ${
    since(p.created_at)
  }${p.to ? html` → ${p.to_agent_name ?? p.to}${receiptOf(receipt)}` : ""}</div><div class="body">${p.body}</div></li>`

/**
 * Every channel (with its post count, archived ones marked) and one channel's conversation: the one asked
 * for, or (`latest`) the most recently active, said as such; each targeted post with its receipt.
 */
export const channelsBody = (
  channels: ReadonlyArray<ChannelSummary>,
  selected: string | undefined,
  posts: ReadonlyArray<PostRow>,
  latest = false,
  receipts: ReadonlyMap<string, TargetReceipt> = new Map()
) =>
  html`<div class="split"><section aria-labelledby="ch-h"><h2 id="ch-h">All channels (${channels.length})</h2>${
    channels.length === 0 ? html`<p class="muted">No posts yet: a channel appears with its first post.</p>` : ""
  }<ul class="list">${
    channels.map((c) =>
      html`<li><a href="/portal/channels?channel=${encodeURIComponent(c.channel)}"${
        c.channel === selected ? new Html(" aria-current=\"true\"") : ""
      }>${c.channel}</a> <span class="muted">${plural(c.last_seq, "post")} · last ${since(c.last_post_at)}</span>${
        c.archived ? html` <span class="badge archived">archived</span>` : ""
      }</li>`
    )
  }</ul></section>
<section aria-labelledby="posts-h"><h2 id="posts-h">${selected ?? "No channel yet"}${
    latest && selected !== undefined ? html` <span class="muted">(most recent activity)</span>` : ""
  }</h2>${
    selected === undefined ? "" : posts.length === 0 ? html`<p class="muted">No posts.</p>` : html`<ol class="posts">${posts.map((p) => postItem(p, receipts.get(p.post_id)))}</ol>`
  }</section></div>`

// ------------------------------------------------------------------ Waits

/** The graph's drawing: each cycle by its connections (the repeated first one dropped), orphaned waits by why. */
const drawing = (graph: WaitGraphResult) =>
  waitGraphSvg({
    edges: graph.edges,
    cycles: graph.cycles.map((c) => c.slice(0, -1).map((r) => r.connection_id)),
    orphanedWaits: new Map(graph.orphaned.waits.map((o) => [o.wait_id, o.why] as const))
  })

/** A wait's id as the portal shows it: the first 8 characters after `wait-`. */
const waitShort = (waitId: string) => waitId.replace(/^wait-/, "").slice(0, 8)

/** One open wait: who waits on whom, until what (in words; the exact JSON folded below), why, until when. */
const waitRow = (e: WaitGraphResult["edges"][number], orphan: string | undefined, names: ReadonlyMap<string, string>) =>
  html`<tr data-wait="${waitShort(e.wait_id)}"${orphan ? new Html(" class=\"orphan\"") : ""}><td><code>${waitShort(e.wait_id)}</code></td><td>${
    agent(e.waiter.agent_name, e.waiter.connection_id)
  }</td><td>${agent(e.on.agent_name, e.on.connection_id)}</td><td class="predicate"><span class="words">${predicateInWords(e, names)}</span><details><summary>exact JSON</summary><pre>${
    json({ wait_id: e.wait_id, predicate: e.predicate })
  }</pre></details></td><td>${e.reason}</td><td>${since(e.expires_at)}</td><td>${orphan ?? ""}</td></tr>`

/** The wait graph, its cycles and orphans, and every open wait (`names`: the connections predicates name by id). */
export const waitsBody = (graph: WaitGraphResult, names: ReadonlyMap<string, string> = new Map()) =>
  html`<section aria-labelledby="graph-h"><h2 id="graph-h">Wait graph (${plural(graph.edges.length, "open wait")})</h2>
<p class="legend"><span class="key key-edge"></span> waits on <span class="key key-cycle"></span> cycle <span class="key key-orphan"></span> orphaned (awaited agent revoked or silent)</p>
${graph.edges.length === 0 ? html`<p class="muted">No open waits.</p>` : html`<div class="scroll graph">${new Html(drawing(graph))}</div>`}
${
    graph.cycles.length === 0 ? "" : html`<h3>Cycles</h3><ul>${
      graph.cycles.map((c) => html`<li class="cycle">${c.map((r) => r.agent_name).join(" → ")}</li>`)
    }</ul>`
  }
${
    graph.orphaned.work.length === 0 ? "" : html`<h3>Orphaned work (claimant revoked or silent)</h3><ul>${
      graph.orphaned.work.map((w) =>
        html`<li class="orphan"><a href="/portal/ledger?work=${encodeURIComponent(w.work_id)}">${w.work_id}</a> ${w.title} · claimant ${
          agent(names.get(w.connection_id), w.connection_id)
        } ${w.reason} since ${since(w.since)}</li>`
      )
    }</ul>`
  }
<h3>Waits</h3><div class="scroll"><table><thead><tr><th scope="col">Wait</th><th scope="col">Waiter</th><th scope="col">Waits on</th><th scope="col">Until</th><th scope="col">Reason</th><th scope="col">Expires</th><th scope="col">Orphan</th></tr></thead><tbody>${
    graph.edges.map((e) => waitRow(e, graph.orphaned.waits.find((o) => o.wait_id === e.wait_id)?.why, names))
  }</tbody></table></div></section>`

// ------------------------------------------------------------------ Ledger

export const evidenceBadge = (e: string) => html`<span class="badge evidence-${e}">${e}</span>`

export const ledgerListBody = (items: ReadonlyArray<WorkListing>, names: ReadonlyMap<string, string>) =>
  html`<section aria-labelledby="items-h"><h2 id="items-h">Work items (${items.length})</h2><div class="scroll"><table><thead><tr><th scope="col">Work</th><th scope="col">Title</th><th scope="col">Status</th><th scope="col">Claimant</th><th scope="col">Seq</th><th scope="col">Head</th><th scope="col">Updated</th></tr></thead><tbody>${
    items.map((w) =>
      html`<tr><th scope="row"><a href="/portal/ledger?work=${encodeURIComponent(w.work_id)}">${w.work_id}</a></th><td>${w.title}</td><td><span class="badge status-${w.status}">${w.status}</span></td><td>${
        w.claimant ? names.get(w.claimant) ?? w.claimant.slice(0, 8) : "—"
      }</td><td>${w.seq}</td><td><code class="hash">${w.head.slice(0, 12)}</code></td><td>${since(w.updated_at)}</td></tr>`
    )
  }</tbody></table></div></section>`

export const verifyResult = (report: VerifyReport) =>
  report.first_break === null
    ? html`<p class="notice" role="status" id="verify-result">Ledger verified: ${plural(report.work_items, "work item")}, ${plural(report.events, "event")}, every hash and state recomputed — no break.</p>`
    : html`<p class="error" role="alert" id="verify-result">Ledger broken: ${report.first_break.work_id} seq ${report.first_break.seq}: ${report.first_break.reason}</p>`

export const ledgerItemBody = (
  status: LedgerStatus,
  events: ReadonlyArray<ChainEvent>,
  diff: LedgerDiff | undefined,
  names: ReadonlyMap<string, string>,
  from?: string,
  to?: string
) => {
  const nameOf = (id: string | null) => (id ? names.get(id) ?? id.slice(0, 8) : "—")
  const heads = events.map((e) => e.hash)
  const headOptions = (selected: string | undefined) =>
    heads.map((h, i) => html`<option value="${h}"${h === selected ? new Html(" selected") : ""}>seq ${events[i].seq} · ${h.slice(0, 12)}</option>`)
  return html`<p><a href="/portal/ledger">← all work items</a></p>
<section aria-labelledby="item-h" class="card"><h2 id="item-h">${status.work_id}: ${status.settled.title}</h2>
<div class="split"><div><h3>Settled</h3><dl><dt>Status</dt><dd>${status.settled.status}${status.settled.resolution ? ` (${status.settled.resolution})` : ""}</dd>
<dt>Claimant</dt><dd>${nameOf(status.settled.claimant)}</dd><dt>Head</dt><dd><code class="hash">${status.settled.head}</code> (seq ${status.settled.seq})</dd></dl>
<table><thead><tr><th scope="col">Field</th><th scope="col">Value</th><th scope="col">Evidence</th><th scope="col">Set by</th><th scope="col">Seq</th></tr></thead><tbody>${
    Object.entries(status.settled.fields).map(([k, f]) =>
      html`<tr><th scope="row">${k}</th><td><code>${JSON.stringify(f.value)}</code></td><td>${evidenceBadge(f.evidence)}</td><td>${nameOf(f.set_by)}</td><td>${f.seq}</td></tr>`
    )
  }</tbody></table></div>
<div><h3>Observed now</h3><dl><dt>At</dt><dd>${since(status.observed.observed_at)}</dd><dt>Claimant</dt><dd>${
    status.observed.claimant
      ? html`${status.observed.claimant.agent_name || status.observed.claimant.connection_short} · last seen ${since(status.observed.claimant.last_seen_at)}${
        status.observed.claimant.revoked ? html` <span class="badge revoked">revoked</span>` : ""
      }`
      : "—"
  }</dd><dt>Pending reviews</dt><dd>${status.observed.pending_reviews.length}</dd></dl></div></div></section>
<section aria-labelledby="chain-h"><h2 id="chain-h">Chain (${plural(events.length, "event")})</h2><div class="scroll"><table class="chain"><thead><tr><th scope="col">Seq</th><th scope="col">Type</th><th scope="col">Data</th><th scope="col">Evidence</th><th scope="col">Actor</th><th scope="col">Parent</th><th scope="col">Hash</th></tr></thead><tbody>${
    events.map((e) =>
      html`<tr><td>${e.seq}</td><td>${e.type}</td><td><code>${JSON.stringify(e.data)}</code></td><td>${evidenceBadge(e.evidence)}</td><td>${
        nameOf(e.actor)
      }</td><td><code class="hash">${e.parent ? e.parent.slice(0, 12) : "∅"}</code></td><td><code class="hash" title="${e.hash}">${e.hash.slice(0, 12)}</code></td></tr>`
    )
  }</tbody></table></div></section>
<section aria-labelledby="diff-h" class="card"><h2 id="diff-h">Diff between two heads</h2>
<form method="get" action="/portal/ledger" class="grid"><input type="hidden" name="work" value="${status.work_id}">
<label for="diff-from">From</label><select id="diff-from" name="from">${headOptions(from ?? heads[0])}</select>
<label for="diff-to">To</label><select id="diff-to" name="to">${headOptions(to ?? heads[heads.length - 1])}</select>
<button type="submit">Show diff</button></form>${
    diff === undefined ? "" : html`<div id="diff"><p>seq ${diff.from.seq} → ${diff.to.seq}: ${plural(diff.events, "event")}; status ${diff.status.before} → ${diff.status.after}; claimant ${
      nameOf(diff.claimant.before)
    } → ${nameOf(diff.claimant.after)}</p><table><thead><tr><th scope="col">Field</th><th scope="col">Before</th><th scope="col">After</th></tr></thead><tbody>${
      diff.changes.map((c) =>
        html`<tr><th scope="row">${c.field}</th><td>${c.before ? html`<code>${JSON.stringify(c.before.value)}</code> ${evidenceBadge(c.before.evidence)}` : "—"}</td><td>${
          c.after ? html`<code>${JSON.stringify(c.after.value)}</code> ${evidenceBadge(c.after.evidence)}` : "—"
        }</td></tr>`
      )
    }</tbody></table></div>`
  }</section>`
}

// ------------------------------------------------------------------ Knowledge

/** The documents' search (outside the live region: a refresh keeps what is typed). */
export const knowledgeSearchForm = (query: string) =>
  html`<form method="get" action="/portal/knowledge" role="search" class="grid"><label for="kq">Search documents</label><input id="kq" name="q" value="${query}"><button type="submit">Search</button></form>`

/** Where the listing's next page starts, as the link carries it: `<created_at>~<document_id>`. */
export const documentsCursorParam = (c: DocumentCursor) => `${c.created_at}~${c.document_id}`
export const documentsCursorOf = (param: string | null): DocumentCursor | undefined => {
  const m = param === null ? null : /^(\d{4}-\d\d-\d\dT[0-9:.]+Z)~(.{1,200})$/.exec(param)
  return m ? { created_at: m[1], document_id: m[2] } : undefined
}

/** What the Documents section shows: the hits of a search, or (no query) a page of the newest documents. */
export type DocumentsShown =
  | { readonly _tag: "Search"; readonly query: string; readonly hits: ReadonlyArray<DocumentHit> }
  | { readonly _tag: "Newest"; readonly total: number; readonly page: DocumentPage; readonly paged: boolean }

const documentItem = (title: string, id: string, uri: string | null, created: string, text: string, size?: number) =>
  html`<li><strong>${title}</strong> <code>${id}</code>${uri ? html` · ${uri}` : ""} · ${since(created)}${
    size === undefined ? "" : html` · <span class="muted">${plural(size, "character")}</span>`
  }<br><span class="muted">${text}</span></li>`

const documentsSection = (shown: DocumentsShown) => {
  if (shown._tag === "Search") {
    return html`<h2 id="docs-h">Documents matching “${shown.query}”</h2>${
      shown.hits.length === 0 ? html`<p class="muted">No document matches.</p>` : html`<ul class="list">${
        shown.hits.map((d) => documentItem(d.title, d.document_id, d.uri, d.created_at, d.snippet))
      }</ul>`
    }<p><a href="/portal/knowledge">All documents, newest first</a></p>`
  }
  const { items, next } = shown.page
  return html`<h2 id="docs-h">Documents (${shown.total}), newest first</h2>${
    items.length === 0 ? html`<p class="muted">${shown.paged ? "No older documents." : "No documents yet."}</p>` : html`<ul class="list">${
      items.map((d) => documentItem(d.title, d.document_id, d.uri, d.created_at, d.body_chars > d.excerpt.length ? `${d.excerpt.trimEnd()}…` : d.excerpt, d.body_chars))
    }</ul>`
  }<p class="pager">${shown.paged ? html`<a href="/portal/knowledge">Newest documents</a> ` : ""}${
    next === null ? "" : html`<a href="/portal/knowledge?before=${encodeURIComponent(documentsCursorParam(next))}" rel="next">Older documents</a>`
  }</p>`
}

export const knowledgeBody = (
  csrf: string,
  documents: DocumentsShown,
  facts: ReadonlyArray<FactRow>,
  journal: ReadonlyArray<Mutation>,
  names: ReadonlyMap<string, string>
) =>
  html`<section aria-labelledby="docs-h">${documentsSection(documents)}</section>
<section aria-labelledby="facts-h"><h2 id="facts-h">Facts (${facts.length})</h2><div class="scroll"><table><thead><tr><th scope="col">Subject</th><th scope="col">Predicate</th><th scope="col">Object</th><th scope="col">Origin</th><th scope="col">Sources</th></tr></thead><tbody>${
    facts.map((f) =>
      html`<tr><td>${f.subject}</td><td>${f.predicate}</td><td>${f.object}</td><td>${f.origin}</td><td>${
        f.sources.length === 0 ? "—" : f.sources.map((s) => html`<span class="src">${s.title}${s.uri ? ` (${s.uri})` : ""}</span> `)
      }</td></tr>`
    )
  }</tbody></table></div></section>
<section aria-labelledby="journal-h"><h2 id="journal-h">Mutation journal</h2><div class="scroll"><table><thead><tr><th scope="col">Mutation</th><th scope="col">Tool</th><th scope="col">By</th><th scope="col">At</th><th scope="col">Changes</th><th scope="col">Actions</th></tr></thead><tbody>${
    journal.map((m) =>
      html`<tr data-mutation="${m.id}"><th scope="row"><code>${m.id.slice(0, 12)}</code></th><td>${m.tool}</td><td>${names.get(m.connection_id) ?? m.connection_id.slice(0, 8)}</td><td>${
        since(m.created_at)
      }</td><td>${m.changes.map((c) => `${c.kind} ${c.before === null ? "added" : c.after === null ? "removed" : "changed"}`).join(", ")}</td><td>${
        m.reverted_by !== null ? html`<span class="muted">reverted</span>` : m.reverts !== null ? html`<span class="muted">a revert</span>` :
          form(csrf, `/portal/knowledge/mutations/${encodeURIComponent(m.id)}/revert`, "Revert")
      }</td></tr>`
    )
  }</tbody></table></div></section>`

export const messagePage = (title: string, message: string) =>
  html`<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${title} · Sophia</title><link rel="stylesheet" href="/portal/assets/portal.css"></head><body><main id="main"><h1>${title}</h1><p>${message}</p></main></body></html>`
