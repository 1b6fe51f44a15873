import type { NotificationInfo, TargetInfo } from "../../domain/Notifications.js"
import { NOTIFY_EVENTS, NOTIFY_FORMATS } from "../../domain/Notifications.js"
import type { Html } from "./Html.js"
import { html } from "./Html.js"
import { form, since } from "./Pages.js"

/**
 * The portal's Notifications page (docs/architecture.md, "Notifications"): the owner's targets with `Test` and
 * `Remove`, the form that adds one, the dead letters with `Retry`, the newest notifications. Rendering only: the
 * rows are the Notifications service's (Regions), each button one service call (Actions).
 */

/** The add form (above the live region, so a refresh never drops what is being typed). */
export const addTargetForm = (csrf: string): Html =>
  html`<section aria-labelledby="notify-add-h" class="card"><h2 id="notify-add-h">New target</h2>
<form method="post" action="/portal/notifications" class="grid">
<label for="nt-url">URL (a webhook: Slack incoming webhook, ntfy topic, your own receiver)</label><input id="nt-url" name="url" type="url" required maxlength="2048" autocomplete="off">
<fieldset><legend>Events</legend>${
    NOTIFY_EVENTS.map((e) =>
      html`<span class="check"><input type="checkbox" id="nt-ev-${e}" name="events" value="${e}"${
        e === "approval_requested" ? html` checked` : ""
      }><label for="nt-ev-${e}">${e}</label></span>`
    )
  }</fieldset>
<label for="nt-format">Format</label><select id="nt-format" name="format">${NOTIFY_FORMATS.map((f) => html`<option value="${f}">${f}</option>`)}</select>
<label for="nt-secret">Signing secret (optional: each POST then carries Sophia-Signature)</label><input id="nt-secret" name="secret" type="password" maxlength="256" autocomplete="off">
<input type="hidden" name="_csrf" value="${csrf}"><button type="submit">Add target</button></form></section>`

const targetsTable = (csrf: string, targets: ReadonlyArray<TargetInfo>) =>
  html`<section aria-labelledby="notify-targets-h"><h2 id="notify-targets-h">Targets (${targets.length})</h2>${
    targets.length === 0
      ? html`<p class="muted">No target: nothing reaches you outside this portal.</p>`
      : html`<div class="scroll"><table><thead><tr><th scope="col">URL</th><th scope="col">Events</th><th scope="col">Format</th><th scope="col">Signed</th><th scope="col">Added</th><th scope="col">Actions</th></tr></thead><tbody>${
        targets.map((t) =>
          html`<tr data-target="${t.id}"><td><code>${t.url}</code></td><td>${t.events.join(", ")}</td><td>${t.format}</td><td>${
            t.signed ? "yes" : "no"
          }</td><td>${since(t.created_at)}</td><td class="actions">${form(csrf, `/portal/notifications/${t.id}/test`, "Test")}${
            form(csrf, `/portal/notifications/${t.id}/remove`, "Remove")
          }</td></tr>`
        )
      }</tbody></table></div>`
  }</section>`

const row = (n: NotificationInfo, action: Html | string) =>
  html`<tr data-notification="${n.id}"><td>${n.event}</td><td>${n.summary}</td><td><span class="badge status-${n.status}">${n.status}</span></td><td>${n.attempts}</td><td>${
    n.last_error ?? "—"
  }</td><td>${since(n.created_at)}</td>${action === "" ? "" : html`<td class="actions">${action}</td>`}</tr>`

const head = (actions: boolean) =>
  html`<thead><tr><th scope="col">Event</th><th scope="col">Summary</th><th scope="col">Status</th><th scope="col">Attempts</th><th scope="col">Last error</th><th scope="col">Queued</th>${
    actions ? html`<th scope="col">Actions</th>` : ""
  }</tr></thead>`

/** The page's region: targets, dead letters with `Retry`, the newest notifications. */
export const notificationsBody = (
  csrf: string,
  targets: ReadonlyArray<TargetInfo>,
  listed: { readonly recent: ReadonlyArray<NotificationInfo>; readonly dead: ReadonlyArray<NotificationInfo> }
): Html =>
  html`${targetsTable(csrf, targets)}<section aria-labelledby="notify-dead-h"><h2 id="notify-dead-h">Dead letters (${listed.dead.length})</h2>${
    listed.dead.length === 0
      ? html`<p class="muted">None: every notification was delivered or is still being tried.</p>`
      : html`<div class="scroll"><table>${head(true)}<tbody>${
        listed.dead.map((n) => row(n, form(csrf, `/portal/notifications/dead/${n.id}/retry`, "Retry")))
      }</tbody></table></div>`
  }</section><section aria-labelledby="notify-recent-h"><h2 id="notify-recent-h">Recent notifications</h2>${
    listed.recent.length === 0
      ? html`<p class="muted">None yet.</p>`
      : html`<div class="scroll"><table>${head(false)}<tbody>${listed.recent.map((n) => row(n, ""))}</tbody></table></div>`
  }</section>`
