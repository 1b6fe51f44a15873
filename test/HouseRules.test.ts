/**
 * The house rules of docs/architecture.md, checked over the source itself: the sizes of files and
 * functions, the store seam services stand on, and that no service hands another SQL (its exports and
 * its methods' results are effects and values, never a statement or a fragment to embed).
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import ts from "typescript"

const root = path.join(__dirname, "..")
const src = path.join(root, "src")
const files = (dir: string): Array<string> =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => e.isDirectory() ? files(path.join(dir, e.name)) : [path.join(dir, e.name)])
const sources = files(src).filter((f) => /\.(ts|mjs)$/.test(f))
const services = files(path.join(src, "services")).filter((f) => f.endsWith(".ts"))
/** The store seam: what services may know of the store beyond `SqlClient` (statements, locking, full text). */
const seam = path.join(src, "services", "store") + path.sep
const rel = (f: string) => path.relative(src, f)
/** A file's code without its comments (comments may name a lock, a dialect or a span style: only code counts). */
const codeOf = (f: string) => fs.readFileSync(f, "utf8").replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:])\/\/.*$/gm, "$1")

describe("the house rules", () => {
  it("no file under src/ is over 500 lines", () => {
    const long = sources.map((f) => [rel(f), fs.readFileSync(f, "utf8").split("\n").length] as const).filter(([, n]) => n > 500)
    assert.deepStrictEqual(long, [])
  })

  it("no function under src/ is over 150 lines", () => {
    const long: Array<string> = []
    for (const f of sources.filter((f) => f.endsWith(".ts"))) {
      const file = ts.createSourceFile(f, fs.readFileSync(f, "utf8"), ts.ScriptTarget.ES2022, true)
      const visit = (node: ts.Node) => {
        if (ts.isFunctionLike(node) && (node as ts.FunctionLikeDeclaration).body !== undefined) {
          const start = file.getLineAndCharacterOfPosition(node.getStart(file)).line
          const end = file.getLineAndCharacterOfPosition(node.getEnd()).line
          if (end - start + 1 > 150) long.push(`${rel(f)}:${start + 1} (${end - start + 1} lines)`)
        }
        ts.forEachChild(node, visit)
      }
      visit(file)
    }
    assert.deepStrictEqual(long, [])
  })

  it("services stand on the store seam only: no layer, no driver, no connection internals, no dialect branch outside src/services/store", () => {
    const offenders: Array<string> = []
    for (const f of services.filter((f) => !f.startsWith(seam))) {
      const text = codeOf(f)
      const imports = [...text.matchAll(/from\s+["']([^"']+)["']/g)].map((m) => m[1])
      for (const spec of imports) {
        if (/(^|\/)layers\/|^better-sqlite3$|^pg$|^@effect\/sql-|^@effect\/sql\/(SqlConnection|internal)/.test(spec)) offenders.push(`${rel(f)} imports ${spec}`)
      }
      if (/onDialect(OrElse)?\s*\(/.test(text)) offenders.push(`${rel(f)} branches on the dialect`)
      if (/\bFOR\s+(UPDATE|SHARE)\b|pg_advisory/.test(text)) offenders.push(`${rel(f)} writes a lock inline`)
    }
    assert.deepStrictEqual(offenders, [])
  })

  it("one span style: a named span is `spanned` (services/Spans.ts); only the Dispatcher opens the call's root span itself", () => {
    const spans = path.join(src, "services", "Spans.ts")
    const dispatch = path.join(src, "mcp", "Dispatch.ts")
    const offenders = sources.filter((f) => f.endsWith(".ts") && f !== spans)
      .filter((f) => {
        const text = codeOf(f)
        return /Effect\.fn\(\s*["'`]|Effect\.withSpan\(|\.pipe\(\s*Effect\.withSpan/.test(text) || (f !== dispatch && /Effect\.useSpan\(/.test(text))
      })
      .map(rel)
    assert.deepStrictEqual(offenders, [])
  })

  it("no service exports SQL: no export of src/services, and no method of a service, gives a statement or a fragment", { timeout: 240_000 }, () => {
    const config = ts.parseJsonConfigFileContent(JSON.parse(fs.readFileSync(path.join(root, "tsconfig.json"), "utf8")), ts.sys, root)
    const program = ts.createProgram(services, { ...config.options, noEmit: true })
    const checker = program.getTypeChecker()
    // a statement and a fragment both carry their `segments`: that is what makes them embeddable in another
    const isSql = (type: ts.Type): boolean =>
      (type.isUnion() ? type.types : [type]).some((t) => t.getProperty("segments") !== undefined && t.getProperty("compile") !== undefined ||
        t.getProperty("segments") !== undefined && t.getProperty("raw") === undefined && checker.typeToString(t).includes("Fragment"))
    const givesSql = (type: ts.Type): boolean =>
      isSql(type) || type.getCallSignatures().some((signature) => isSql(signature.getReturnType()))
    const offenders: Array<string> = []
    for (const f of services.filter((f) => !f.startsWith(seam))) {
      const file = program.getSourceFile(f)
      const module = file && checker.getSymbolAtLocation(file)
      if (module === undefined) continue
      for (const exported of checker.getExportsOfModule(module)) {
        const declaration = exported.declarations?.[0]
        if (declaration === undefined || ts.isTypeAliasDeclaration(declaration) || ts.isInterfaceDeclaration(declaration)) continue
        const type = checker.getTypeOfSymbolAtLocation(exported, declaration)
        if (givesSql(type)) offenders.push(`${rel(f)}: ${exported.name}`)
        if (!ts.isClassDeclaration(declaration)) continue
        // a service class: its instance's methods (Effect.Service), or the service type of a Context.Tag
        const instance = checker.getDeclaredTypeOfSymbol(exported)
        const serviceType = instance.getProperty("Service")
        const shapes = [instance, ...(serviceType ? [checker.getTypeOfSymbolAtLocation(serviceType, declaration)] : [])]
        for (const shape of shapes) {
          for (const method of shape.getProperties()) {
            if (givesSql(checker.getTypeOfSymbolAtLocation(method, declaration))) offenders.push(`${rel(f)}: ${exported.name}.${method.name}`)
          }
        }
      }
    }
    assert.deepStrictEqual(offenders, [])
  })

  it("the house is described inside the repository: docs/architecture.md names every service and every domain event, and nothing cites the design card it does not carry", () => {
    const doc = fs.readFileSync(path.join(root, "docs", "architecture.md"), "utf8")
    const serviceFiles = fs.readdirSync(path.join(src, "services")).filter((f) => f.endsWith(".ts") && f !== "Spans.ts")
    const unnamed = serviceFiles.filter((f) => !doc.includes(`\`${f}\``))
    const events = [...fs.readFileSync(path.join(src, "domain", "Events.ts"), "utf8").matchAll(/export class (\w+) extends Schema\.TaggedClass/g)].map((m) => m[1])
    assert.isAbove(events.length, 0)
    const unlisted = events.filter((e) => !doc.includes(`| \`${e}\` |`))
    const citing = [...sources, ...files(path.join(root, "test"))].filter((f) => /\.(ts|mjs)$/.test(f))
      .filter((f) => /\bDESIGN(\.md)?\b/.test(fs.readFileSync(f, "utf8"))).map((f) => path.relative(root, f))
    assert.deepStrictEqual({ unnamed, unlisted, citing }, { unnamed: [], unlisted: [], citing: [] })
  })
})
