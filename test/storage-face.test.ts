/**
 * The storage face. Every query lives under `src/db/`; code outside it asks `src/db` by name
 * (`pageNoteIds`, `insertActivityLog`, `findTriggerTarget`…) and never imports drizzle-orm, bun:sqlite, the schema's
 * tables or src/db's query-building helpers, never builds a Drizzle query, never holds the raw connection and writes
 * no SQL. Every file of src/ outside src/db is read and each offending line printed (`file:line: rule: text`).
 */
import { describe, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { repoRoot, sourceFiles } from './helpers.ts'

const OUTSIDE_DB = sourceFiles(join(repoRoot, 'src'))
  .map((path) => relative(repoRoot, path))
  .filter((path) => !path.startsWith('src/db/'))

const RULES: [string, RegExp][] = [
  ['imports drizzle-orm', /from\s+['"]drizzle-orm(\/[^'"]*)?['"]/],
  ['imports bun:sqlite', /from\s+['"]bun:sqlite['"]/],
  ['imports the schema tables', /from\s+['"][./]*\/db\/schema(\.ts)?['"]/],
  ['imports a query-building helper of src/db', /from\s+['"][./]*\/db\/(prepared|pages|monotonic)(\.ts)?['"]/],
  // A query starts on the handle (`db.select(`, `tx.insert(`…) and chains (`.from(`, `).where(`…).
  ['builds a Drizzle query', /\b(db|tx|\w+Db)\s*\.\s*(select|selectDistinct|insert|update|delete|run|all|get|values|query|prepare)\(|(^\s*|\))\.(from|where|innerJoin|leftJoin|set|returning|orderBy|groupBy|prepare)\(/],
  ['uses the raw connection', /\.sqlite\b|\$client\b/],
  ['writes SQL', /\bsql`|\b(SELECT\s+[\w*]+\s+FROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|PRAGMA\s+\w)/],
]

/** `file:line: rule: text` for every line that breaks a rule. */
function offences(file: string, text: string): string[] {
  return text.split('\n').flatMap((line, i) =>
    RULES.filter(([, pattern]) => pattern.test(line)).map(([rule]) => `${file}:${i + 1}: ${rule}: ${line.trim()}`),
  )
}

describe('storage face: no query outside src/db', () => {
  test('the checks catch each kind of offence', () => {
    const bad = [
      "import { eq } from 'drizzle-orm'",
      "import { Database } from 'bun:sqlite'",
      "import { notes } from '../../db/schema.ts'",
      "import { prepared } from '../../db/prepared.ts'",
      'const row = db.select().from(notes).get()',
      '  .where(eq(notes.id, id))',
      'store.sqlite.run(x)',
      'const q = sql`select 1`',
      "run('DELETE FROM notes')",
    ]
    for (const line of bad) expect(offences('x.ts', line)).not.toEqual([])
    const fine = ["import type { Store } from '../../db/store.ts'", 'const rows = await Promise.all(items)', 'return { sqliteFile: path }']
    for (const line of fine) expect(offences('x.ts', line)).toEqual([])
  })

  test('it reads every source file outside src/db', () => {
    expect(OUTSIDE_DB.length).toBeGreaterThan(100)
    expect(OUTSIDE_DB).toContain('src/modules/notes/service.ts')
    expect(OUTSIDE_DB).toContain('src/executor/executor.ts')
  })

  test('no file outside src/db touches the database but through src/db', () => {
    const found = OUTSIDE_DB.flatMap((file) => offences(file, readFileSync(join(repoRoot, file), 'utf8')))
    if (found.length > 0) console.error(`queries outside src/db:\n${found.join('\n')}`)
    expect(found).toEqual([])
  })
})
