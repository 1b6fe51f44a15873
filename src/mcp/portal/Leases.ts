import type { LeaseRow } from "../../domain/Leases.js"
import type { Html } from "./Html.js"
import { html } from "./Html.js"
import { form, since } from "./Pages.js"
import { agent, plural } from "./Words.js"

/**
 * Leases as the portal shows them: on the Fleet page every active lease with its holder and a `Release`
 * button for the owner (`POST /portal/leases/<id>/release`), and on a work item's page the leases taken for
 * it. Rendering only: the rows are `Leases`' (through the read model or the ledger page's region).
 */

const resourcesOf = (l: LeaseRow) => l.resources.map((r) => html`<code>${r}</code> `)

const holderOf = (l: LeaseRow) =>
  html`${agent(l.agent_name, l.connection_id)}${
    l.orphaned === undefined ? "" : html` <span class="badge orphan" title="another connection may take it over">${l.orphaned.reason}</span>`
  }`

/** The Fleet page's leases: every active lease of the fleet, each with `Release`. */
export const fleetLeases = (csrf: string, leases: ReadonlyArray<LeaseRow>): Html =>
  html`<section aria-labelledby="leases-h"><h2 id="leases-h">Leases (${leases.length} active)</h2>${
    leases.length === 0 ? html`<p class="muted">No agent holds a file or a slot.</p>` : html`<div class="scroll"><table><thead><tr><th scope="col">Holder</th><th scope="col">Resources</th><th scope="col">Mode</th><th scope="col">Project</th><th scope="col">Reason</th><th scope="col">Work</th><th scope="col">Expires</th><th scope="col">Actions</th></tr></thead><tbody>${
      leases.map((l) =>
        html`<tr data-lease="${l.lease_id}"><td>${holderOf(l)}</td><td>${resourcesOf(l)}</td><td>${l.mode}</td><td>${l.project}</td><td>${l.reason}</td><td>${
          l.work_id === null ? "—" : html`<a href="/portal/ledger?work=${encodeURIComponent(l.work_id)}">${l.work_id}</a>`
        }</td><td>${since(l.expires_at)}</td><td class="actions">${
          form(csrf, `/portal/leases/${encodeURIComponent(l.lease_id)}/release`, "Release")
        }</td></tr>`
      )
    }</tbody></table></div>`
  }</section>`

/** A work item's leases (its ledger page). */
export const workLeases = (leases: ReadonlyArray<LeaseRow>): Html =>
  html`<section aria-labelledby="work-leases-h"><h2 id="work-leases-h">Leases (${plural(leases.length, "lease")} held for it)</h2>${
    leases.length === 0 ? html`<p class="muted">No lease is held for this item.</p>` : html`<ul>${
      leases.map((l) => html`<li>${resourcesOf(l)} ${l.mode}, held by ${holderOf(l)} until ${since(l.expires_at)}: ${l.reason}</li>`)
    }</ul>`
  }</section>`
