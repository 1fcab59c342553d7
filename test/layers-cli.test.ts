/**
 * The CLI's layer rule (STYLE "A layout that shows the architecture"): src/cli/ calls services and the
 * storage face's own operations (src/db: open, migrate, backup, checkpoint, transactions); it holds no SQL, imports
 * neither Drizzle, the driver nor the schema, and never reaches for the raw connection (`store.sqlite`, `store.db`).
 */
import { afterAll, describe, expect, test } from 'bun:test'
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { sql } from 'drizzle-orm'
import type { Db } from '../src/db/dialect.ts'
import { databasePath } from '../src/db/sqlite/open.ts'
import { openMigrated } from '../src/db/sqlite/store.ts'
import { onSqlite, repoRoot, tempDir } from './helpers.ts'

const CLI_DIR = join(repoRoot, 'src/cli')

/** Checked on the line as written: what a CLI file may not import, nor say as SQL (even inside a string). */
const RAW_RULES: [string, RegExp][] = [
  ['imports Drizzle', /(from|import|require)\s*\(?\s*['"]drizzle-orm[^'"]*['"]/],
  ['imports the driver', /(from|import|require)\s*\(?\s*['"]bun:sqlite['"]/],
  ['imports the schema', /(from|import|require)\s*\(?\s*['"][^'"]*db\/schema(\.ts)?['"]/],
  ['SQL', /\b(SELECT|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s+(TABLE|INDEX)|ALTER\s+TABLE|PRAGMA|VACUUM|BEGIN\s+(IMMEDIATE|DEFERRED|TRANSACTION)|COMMIT)\b/],
  ['SQL template', /\bsql`/],
]

/** Checked on the code alone (strings and comments removed, so `trellis.db` in a help text is no connection). */
const CODE_RULES: [string, RegExp][] = [
  ['raw connection', /\.(sqlite|db)\b/],
  ['driver or query-builder call', /\.(prepare|query|transaction|select|selectDistinct|insert|update|delete)\(/],
  ['statement run', /\.(all|get|values|run)\(\s*\)/],
]

function codeOf(line: string): string {
  return line
    .replace(/\/\/.*$/, '')
    .replace(/'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"/g, "''")
    .replace(/`(?:[^`\\$]|\\.)*`/g, "''")
}

/** Each offending line of `text` as `file:line: rule: text`. */
export function layerOffences(file: string, text: string): string[] {
  const offences: string[] = []
  let inBlockComment = false
  text.split('\n').forEach((line, i) => {
    const where = `${file}:${i + 1}`
    for (const [rule, pattern] of RAW_RULES) if (pattern.test(line)) offences.push(`${where}: ${rule}: ${line.trim()}`)
    // Doc comments explain, they do not run: only code is held to the connection rules.
    const trimmed = line.trim()
    if (inBlockComment || trimmed.startsWith('/*')) {
      inBlockComment = !trimmed.includes('*/')
      return
    }
    const code = codeOf(line)
    for (const [rule, pattern] of CODE_RULES) if (pattern.test(code)) offences.push(`${where}: ${rule}: ${trimmed}`)
  })
  return offences
}

describe('src/cli reaches the database only through services and src/db', () => {
  test('no CLI file imports Drizzle, bun:sqlite or the schema, holds SQL, or touches the raw connection', () => {
    const files = readdirSync(CLI_DIR, { recursive: true, encoding: 'utf8' }).filter((name) => name.endsWith('.ts'))
    expect(files.length).toBeGreaterThanOrEqual(9)
    const offences = files.flatMap((name) => layerOffences(relative(repoRoot, join(CLI_DIR, name)), readFileSync(join(CLI_DIR, name), 'utf8')))
    // The failure message lists every offending line.
    expect(offences).toEqual([])
  })

  test('the rules catch each way of reaching past the layer, and leave plain CLI code alone', () => {
    const bad = [
      "import { eq } from 'drizzle-orm'",
      "import { Database } from 'bun:sqlite'",
      "import { projects } from '../db/schema.ts'",
      'const project = tx.select().from(projects).where(eq(projects.name, name)).get()',
      'backupInto(store.sqlite, partial)',
      'const count = countUsers(store.db)',
      "const row = connection.prepare('SELECT 1').all()",
      'db.insert(users).values(row).run()',
      "connection.run('DELETE FROM users WHERE id = ?', [id])",
      'const rows = sql`select 1`',
    ]
    const offending = bad.filter((line) => layerOffences('sample.ts', line).length === 0)
    expect(offending).toEqual([])
    const fine = [
      "data: settingFlag('data', 'DIR', 'data directory: trellis.db, secret, base-url'),",
      'const [drained] = await Promise.all([requestsDone, stopped])',
      'const match = /^(\\d+)\\s*([dh]?)$/i.exec(text.trim())',
      'const value = inWriteTransaction(configFrom(parsed), (tx) => createToken(tx, systemClock, input).value)',
      '/** Never copy the .db file: see backupInto. */',
      "io.out(`${email} is now ${role} in ${projectName}`)",
    ]
    expect(fine.flatMap((line) => layerOffences('sample.ts', line))).toEqual([])
  })
})

describe('readTransaction (the CLI\'s reads, e.g. token list): one snapshot, no lock', () => {
  const dir = tempDir('trellis-layers-cli-')
  afterAll(() => dir.cleanup())

  test('reads at once while another process holds the write lock, and sees neither its uncommitted rows nor later commits', async () => {
    const store = openMigrated(dir.path)
    const migrationsNamed = (db: Db, name: string) =>
      (db.all(sql`SELECT count(*) AS n FROM trellis_migrations WHERE name = ${name}`) as { n: number }[])[0]!.n
    // Another process takes the write lock, writes a row, holds the lock 1.5 s, then commits.
    const writer = Bun.spawn(
      [
        process.execPath,
        '-e',
        `const { Database } = require('bun:sqlite')
         const db = new Database(${JSON.stringify(databasePath(dir.path))})
         db.run('BEGIN IMMEDIATE')
         db.run("INSERT INTO trellis_migrations (name, applied_at) VALUES ('zz_locked', 1)")
         console.log('locked')
         Bun.sleepSync(1500)
         db.run('COMMIT')`,
      ],
      { stdout: 'pipe', stderr: 'inherit' },
    )
    try {
      const reader = writer.stdout.getReader()
      const first = await reader.read()
      expect(new TextDecoder().decode(first.value)).toContain('locked')
      const started = performance.now()
      const seen = store.readTransaction(
        (function* () {
          const before = yield* onSqlite(migrationsNamed, 'zz_locked')
          Bun.sleepSync(2000) // the writer commits meanwhile
          return { before, after: yield* onSqlite(migrationsNamed, 'zz_locked') }
        })(),
      )
      const waitedMs = performance.now() - started
      expect(seen).toEqual({ before: 0, after: 0 })
      // It did not wait for the lock (the CLI's connection would wait up to 5 s for one): 2 s of its own sleep, no more.
      expect(waitedMs).toBeLessThan(3000)
      expect(await writer.exited).toBe(0)
      // A new snapshot sees the commit.
      expect(store.readTransaction(onSqlite(migrationsNamed, 'zz_locked'))).toBe(1)
    } finally {
      writer.kill()
      store.close()
    }
  }, 20_000)
})
