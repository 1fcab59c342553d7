/**
 * The layers point one way (docs/architecture.md "Architecture"): the import graph of src/ — every relative import, type-only
 * ones included — has no circle; `src/http/` imports neither `src/db/` nor `src/modules/`; a module's routes files
 * (its `index.ts`, and any file that builds an Elysia instance, like the console's pages) are imported only by the
 * composition root or by files of their own module: modules talk through services. One level up, folders: no two
 * feature folders of `src/modules/` import each other, directly or through others, nor do two top-level folders of
 * `src/`; and the HTTP layer stays out of the services: no file of `src/executor/`, and no file of a module but its
 * HTTP face (routes files, `model.ts` / `*-model.ts` schemas, `query.ts` parsers; the console module, which is
 * pages), imports `src/http/`. Code outside `src/db/` never knows which store it has: it neither imports a
 * dialect's own code nor names a store kind.
 *
 * Inside `src/db/` (docs/architecture.md "The layers of src/db"): every file is of the engine, of a domain, or of
 * one of the two dialect folders (`sqlite/`, `postgres/`), which hold the same core files; a dialect folder imports
 * the engine and the dialect folders, never a domain file; the engine imports no domain file; and no file of `src/`
 * asks which kind of store it has but the two store classes (`sqlite/store.ts`, `postgres/store.ts`).
 */
import { describe, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { repoRoot, sourceFiles } from './helpers.ts'

const SRC = join(repoRoot, 'src')

const transpiler = new Bun.Transpiler({ loader: 'ts' })
/** `import … from`, `export … from`, `import type … from`: the transpiler drops type-only imports, so read them too. */
const STATIC_FROM = /^\s*(?:import|export)\b[^'"`;]*?\bfrom\s*['"]([^'"]+)['"]/gm

/** Each src file (relative to the repo) → the src files it imports. */
const routesFiles = new Set<string>()

function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>()
  for (const file of sourceFiles(SRC)) {
    const text = readFileSync(file, 'utf8')
    if (file.endsWith('/index.ts') || /\bnew Elysia\(/.test(text)) routesFiles.add(relative(repoRoot, file))
    const specifiers = new Set(transpiler.scanImports(text.replace(/^#!.*/, '')).map((i) => i.path))
    for (const match of text.matchAll(STATIC_FROM)) specifiers.add(match[1]!)
    const targets = [...specifiers]
      .filter((s) => s.startsWith('.'))
      .map((s) => relative(repoRoot, resolve(dirname(file), s)))
      .filter((path) => path.startsWith('src/') && /\.tsx?$/.test(path))
    graph.set(relative(repoRoot, file), [...new Set(targets)].sort())
  }
  return graph
}

/** Every import circle (each as the path that closes it), found by depth-first search. */
function cycles(graph: Map<string, string[]>): string[][] {
  const found: string[][] = []
  const state = new Map<string, 'open' | 'done'>()
  const stack: string[] = []
  const visit = (file: string) => {
    state.set(file, 'open')
    stack.push(file)
    for (const next of graph.get(file) ?? []) {
      if (state.get(next) === 'open') found.push([...stack.slice(stack.indexOf(next)), next])
      else if (!state.has(next)) visit(next)
    }
    stack.pop()
    state.set(file, 'done')
  }
  for (const file of [...graph.keys()].sort()) if (!state.has(file)) visit(file)
  return found
}

const graph = importGraph()
const edges = [...graph].flatMap(([from, targets]) => targets.map((to) => ({ from, to })))
const show = (list: { from: string; to: string }[]) => list.map(({ from, to }) => `${from} → ${to}`)
/** A store kind named: compared (`.kind === 'postgres'`), either store's own type, or the SQLite-only guard. */
const STORE_KIND = /\.kind\s*[!=]==?\s*['"](sqlite|postgres)['"]|\b(SqliteStore|PgStore|sqliteOnly)\b/
const moduleOf = (path: string) => /^src\/modules\/([^/]+)\//.exec(path)?.[1]

describe('import graph of src/', () => {
  test('it sees the files and their imports', () => {
    expect(graph.size).toBeGreaterThan(100)
    expect(graph.get('src/app.ts')).toContain('src/modules/notes/index.ts')
  })

  test('has no import circle', () => {
    const found = cycles(graph).map((cycle) => cycle.join(' → '))
    if (found.length > 0) console.error(`import circles:\n${found.join('\n')}`)
    expect(found).toEqual([])
  })

  test('src/http/ imports neither src/db/ nor src/modules/', () => {
    const wrong = show(edges.filter(({ from, to }) => from.startsWith('src/http/') && /^src\/(db|modules)\//.test(to)))
    if (wrong.length > 0) console.error(`http/ reaching past its layer:\n${wrong.join('\n')}`)
    expect(wrong).toEqual([])
  })

  test('the lowest layers import only themselves and lib/: lib/ → lib/; db/ → db/, lib/; http/ → http/, lib/', () => {
    const allowed: Record<string, RegExp> = { 'src/lib/': /^src\/lib\//, 'src/db/': /^src\/(db|lib)\//, 'src/http/': /^src\/(http|lib)\// }
    const wrong = show(edges.filter(({ from, to }) => Object.entries(allowed).some(([layer, targets]) => from.startsWith(layer) && !targets.test(to))))
    if (wrong.length > 0) console.error(`a lower layer importing a higher one:\n${wrong.join('\n')}`)
    expect(wrong).toEqual([])
  })

  test('it sees the routes files', () => {
    expect(routesFiles).toContain('src/modules/notes/index.ts')
    expect(routesFiles).toContain('src/modules/console/home.ts')
    expect(routesFiles).not.toContain('src/modules/notes/service.ts')
  })

  test("no module imports another module's routes file (its index.ts, or a file that builds an Elysia instance)", () => {
    const wrong = show(edges.filter(({ from, to }) => moduleOf(from) !== undefined && routesFiles.has(to) && moduleOf(to) !== undefined && moduleOf(from) !== moduleOf(to)))
    if (wrong.length > 0) console.error(`modules importing another module's routes:\n${wrong.join('\n')}`)
    expect(wrong).toEqual([])
  })

  test('outside src/db/ no file imports src/db/postgres/ or names a store kind (the store decides: docs/architecture.md "Architecture")', () => {
    const dialect = edges.filter(({ from, to }) => !from.startsWith('src/db/') && to.startsWith('src/db/postgres/'))
    const naming = sourceFiles(SRC)
      .map((file) => relative(repoRoot, file))
      .filter((file) => !file.startsWith('src/db/'))
      .flatMap((file) =>
        readFileSync(join(repoRoot, file), 'utf8')
          .split('\n')
          .flatMap((line, i) => (STORE_KIND.test(line) ? [`${file}:${i + 1}: ${line.trim()}`] : [])),
      )
    const wrong = [...show(dialect), ...naming]
    if (wrong.length > 0) console.error(`code outside src/db/ that knows which store it has:\n${wrong.join('\n')}`)
    expect(wrong).toEqual([])
  })
})

/** The graph of `folderOf`'s folders: folder A → folder B when a file of A imports a file of B (A ≠ B), with those imports. */
function folderGraph(folderOf: (path: string) => string | undefined): { graph: Map<string, string[]>; via: Map<string, string[]> } {
  const graph = new Map<string, string[]>()
  const via = new Map<string, string[]>()
  for (const { from, to } of edges) {
    const a = folderOf(from)
    const b = folderOf(to)
    if (a === undefined || b === undefined || a === b) continue
    if (!graph.has(a)) graph.set(a, [])
    if (!graph.get(a)!.includes(b)) graph.get(a)!.push(b)
    via.set(`${a} → ${b}`, [...(via.get(`${a} → ${b}`) ?? []), `${from} → ${to}`])
  }
  for (const targets of graph.values()) targets.sort()
  return { graph, via }
}

/** Each folder circle, with the imports that close each of its steps. */
function folderCircles(folderOf: (path: string) => string | undefined): string[] {
  const { graph, via } = folderGraph(folderOf)
  return cycles(graph).map((circle) => {
    const steps = circle.slice(1).map((to, i) => `  ${circle[i]} → ${to}: ${via.get(`${circle[i]} → ${to}`)![0]}`)
    return `${circle.join(' → ')}\n${steps.join('\n')}`
  })
}

const topFolderOf = (path: string) => /^src\/([^/]+)\//.exec(path)?.[1]

describe('folders of src/', () => {
  test('it sees the feature folders and the top-level folders', () => {
    expect(new Set(edges.map(({ from }) => moduleOf(from)))).toContain('auth')
    expect(new Set(edges.map(({ from }) => topFolderOf(from)))).toContain('executor')
  })

  test('no import circle between the feature folders of src/modules/', () => {
    const found = folderCircles(moduleOf)
    if (found.length > 0) console.error(`circles between feature folders:\n${found.join('\n')}`)
    expect(found).toEqual([])
  })

  test('no import circle between the top-level folders of src/', () => {
    const found = folderCircles(topFolderOf)
    if (found.length > 0) console.error(`circles between top-level folders:\n${found.join('\n')}`)
    expect(found).toEqual([])
  })

  test("services and the executor import nothing from src/http/ (only a module's HTTP face does)", () => {
    const httpFace = (path: string) =>
      routesFiles.has(path) || /\/(model|[a-z-]+-model|query)\.ts$/.test(path) || moduleOf(path) === 'console'
    const wrong = show(
      edges.filter(({ from, to }) => to.startsWith('src/http/') && (from.startsWith('src/executor/') || (moduleOf(from) !== undefined && !httpFace(from)))),
    )
    if (wrong.length > 0) console.error(`services reaching the HTTP layer:\n${wrong.join('\n')}`)
    expect(wrong).toEqual([])
  })
})

// ── The layers of src/db ──────────────────────────────────────────────────────

/**
 * The engine: what every operation is built and run with, whichever the store — the `Store` interface and the op
 * face over it (read, write), the op and its plans, the queries and their dialect context, pages, the schema and
 * its embedded-migration module, connecting, the lists' times, the rules' locks, the cached lookups' op, the
 * run-event commit announcements, the copy between stores, a lock on a file.
 */
const ENGINE = [
  'chain-upgrade', 'connect', 'dialect', 'file-lock', 'lookup-cache', 'migrations-module', 'monotonic', 'op', 'pages', 'query', 'read', 'rule-locks',
  'run-event-commits', 'schema', 'sqlite-to-postgres', 'store', 'tables', 'write',
].map((name) => `src/db/${name}.ts`)
/** The domains: one file per kind of stored thing, its queries written once and its plans. */
const DOMAINS = [
  'activity-logs', 'admin-logs', 'apply', 'auth-queries', 'callbacks', 'claims', 'idempotency-keys', 'leased-queue', 'log-chain', 'chain-pages', 'audit', 'mail', 'maintenance',
  'members', 'notes', 'projects', 'queue', 'records', 'run-events', 'runs', 'schedules', 'sessions', 'sso-identities', 'tasks', 'tokens', 'users',
  'webhooks', 'workflow-events', 'workflow-health', 'workflows',
].map((name) => `src/db/${name}.ts`)
const DIALECTS = ['sqlite', 'postgres'] as const
const isDialect = (path: string) => /^src\/db\/(postgres|sqlite)\//.test(path)
/** The two store classes: the only files that may ask which kind a store is (neither needs to). */
const STORE_CLASSES = DIALECTS.map((dialect) => `src/db/${dialect}/store.ts`)
/** What each dialect folder has, under the same name: its store, runner of ops, dialect, statements, lookup cache, migrations. */
const SYMMETRIC = ['store', 'op-runner', 'dialect', 'prepared', 'lookup-cache', 'migrate', 'migrations.generated']

/** A store's kind asked: `store.kind` read, or compared (`.kind === 'postgres'`, `'sqlite' !== x.kind`), or SQLite's old guard. */
const KIND_TEST = /\bstores?\.kind\b|\.kind\s*[!=]==?\s*['"](sqlite|postgres)['"]|['"](sqlite|postgres)['"]\s*[!=]==?\s*[\w.]+\.kind\b|\bsqliteOnly\(/

/** `file:line: text` for each line of `text` (of `file`) that asks a store's kind; comments aside. */
function kindTests(file: string, text = readFileSync(join(repoRoot, file), 'utf8')): string[] {
  return text
    .split('\n')
    .flatMap((line, i) => (KIND_TEST.test(line) && !/^\s*(\*|\/\/|\/\*)/.test(line) ? [`${file}:${i + 1}: ${line.trim()}`] : []))
}

/** The edges of `list` from a dialect folder to a domain file. */
const dialectToDomain = (list: { from: string; to: string }[]) => list.filter(({ from, to }) => isDialect(from) && DOMAINS.includes(to))

describe('layers of src/db', () => {
  const dbFiles = [...graph.keys()].filter((file) => file.startsWith('src/db/'))

  test('every file of src/db is of the engine, a domain or a dialect folder', () => {
    const unplaced = dbFiles.filter((file) => !isDialect(file) && !ENGINE.includes(file) && !DOMAINS.includes(file))
    const gone = [...ENGINE, ...DOMAINS].filter((file) => !graph.has(file))
    expect({ unplaced, gone }).toEqual({ unplaced: [], gone: [] })
    expect(ENGINE.filter((file) => DOMAINS.includes(file))).toEqual([])
  })

  test('the two dialect folders are symmetric: each has its store, runner, dialect, statements, lookup cache and migrations', () => {
    const missing = DIALECTS.flatMap((dialect) => SYMMETRIC.map((name) => `src/db/${dialect}/${name}.ts`)).filter((file) => !graph.has(file))
    expect(missing).toEqual([])
  })

  test('it sees the plans reach into a dialect folder, and the dialect folders into the engine', () => {
    expect(graph.get('src/db/queue.ts')).toContain('src/db/postgres/client.ts')
    expect(graph.get('src/db/postgres/op-runner.ts')).toContain('src/db/op.ts')
    expect(graph.get('src/db/sqlite/store.ts')).toContain('src/db/store.ts')
    expect(graph.get('src/db/postgres/store.ts')).toContain('src/db/store.ts')
  })

  test('no file of a dialect folder imports a domain file (only the engine, the dialect folders, lib/)', () => {
    // The rule itself, on an edge that breaks it.
    expect(dialectToDomain([{ from: 'src/db/postgres/store.ts', to: 'src/db/queue.ts' }])).not.toEqual([])
    const wrong = show(dialectToDomain(edges))
    if (wrong.length > 0) console.error(`a dialect folder reaching a domain:\n${wrong.join('\n')}`)
    expect(wrong).toEqual([])
  })

  test('no engine file imports a domain file', () => {
    const wrong = show(edges.filter(({ from, to }) => ENGINE.includes(from) && DOMAINS.includes(to)))
    if (wrong.length > 0) console.error(`the engine reaching a domain:\n${wrong.join('\n')}`)
    expect(wrong).toEqual([])
  })

  test('no file of src/ asks which kind of store it has, but the store classes: each store answers for itself', () => {
    const asks = ["if (store.kind === 'postgres') return", "store.kind !== 'sqlite' ? a : b", "'sqlite' === deps.store.kind", 'const kind = store.kind', 'sqliteOnly(store, what)']
    for (const line of asks) expect(kindTests('x.ts', line)).not.toEqual([])
    expect(kindTests('x.ts', "switch (call.kind) {\n  // store.kind decided it once\nif (l.kind === 'same')")).toEqual([])
    const wrong = sourceFiles(SRC)
      .map((file) => relative(repoRoot, file))
      .filter((file) => !STORE_CLASSES.includes(file))
      .flatMap((file) => kindTests(file))
    if (wrong.length > 0) console.error(`store kinds asked outside the store classes:\n${wrong.join('\n')}`)
    expect(wrong).toEqual([])
  })
})
