import { connectionShort } from "../../domain/Auth.js"
import type { WaitEdge } from "../../domain/Waits.js"
import type { Html } from "./Html.js"
import { html } from "./Html.js"

/**
 * What the portal says in words rather than in JSON: counts with their noun, connections by name and
 * short id, a wait's predicate as a sentence. Rendering only: nothing here reads the graph.
 */

/** `1 post`, `2 posts` (a noun that takes `s`, or its plural given). */
export const plural = (n: number, noun: string, nouns = `${noun}s`) => `${n} ${n === 1 ? noun : nouns}`

const UUID = /\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/gi

/** Every full connection id (a UUID) a value holds, at any depth. */
export const uuidsIn = (value: unknown): ReadonlyArray<string> =>
  typeof value === "string"
    ? [...value.matchAll(UUID)].map((m) => m[0].toLowerCase())
    : Array.isArray(value)
    ? value.flatMap(uuidsIn)
    : value !== null && typeof value === "object"
    ? Object.values(value).flatMap(uuidsIn)
    : []

/** A text with each full id in it said as the connection's name and short id (`reviewer 1a2b3c4d`), or the short id alone. */
export const shortened = (text: string, names: ReadonlyMap<string, string>) =>
  text.replace(UUID, (id) => {
    const name = names.get(id.toLowerCase())
    return name === undefined ? connectionShort(id) : `${name} ${connectionShort(id)}`
  })

/** A connection as the portal names it: its name, then its short id. */
export const agent = (name: string | undefined, id: string) =>
  name === undefined ? html`<code>${connectionShort(id)}</code>` : html`<strong>${name}</strong> <code>${connectionShort(id)}</code>`

const str = (v: unknown) => (typeof v === "string" ? v : undefined)
const num = (v: unknown) => (typeof v === "number" ? v : undefined)

/**
 * A wait's predicate in words, e.g. "a closeout post in arc:build-42 from reviewer 1a2b3c4d after #12",
 * "arc:build-42 reaches #40". `names` names the connections a predicate holds by id (the awaited one
 * is known from the edge). A kind this page does not know is said as its type and fields, ids shortened.
 */
export const predicateInWords = (edge: WaitEdge, names: ReadonlyMap<string, string>): Html => {
  const p = edge.predicate
  const nameOf = (id: string) => (id === edge.on.connection_id ? edge.on.agent_name : names.get(id))
  const channel = str(p.channel)
  switch (p.type) {
    case "post_exists": {
      const from = str(p.from) ?? edge.on.connection_id
      const after = num(p.after_seq)
      const kind = str(p.kind)
      return html`a ${kind ? `${kind} ` : ""}post in <code>${channel ?? "?"}</code> from ${agent(nameOf(from), from)}${
        after !== undefined && after > 0 ? ` after #${after}` : ""
      }`
    }
    case "seq_reached":
      return html`<code>${channel ?? "?"}</code> reaches #${num(p.seq) ?? "?"}`
    case "lease_free":
      return html`<code>${str(p.resource) ?? "?"}</code> is free${str(p.project) ? ` (project ${str(p.project)})` : ""}`
    default:
      return html`${String(p.type ?? "predicate")}: ${
        shortened(
          Object.entries(p).filter(([k]) => k !== "type").map(([k, v]) => `${k} ${typeof v === "string" ? v : JSON.stringify(v)}`).join(", "),
          new Map([...names, [edge.on.connection_id, edge.on.agent_name]])
        )
      }`
  }
}
