/**
 * Issue 16 item 1 for notes, activity logs, admin logs and health: their services ask `src/db/` by name
 * (`pageNoteIds`, `insertActivityLog`, `deleteLogBatch`…) and hold no query of their own. Each file is read and
 * every offending line printed: an import of drizzle-orm, bun:sqlite, the schema's tables or the query-building
 * helpers of src/db, a Drizzle query-builder call, the raw connection (`.sqlite`), or SQL text.
 */
import { describe, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { repoRoot } from './helpers.ts'

const FILES = [
  'src/modules/notes/service.ts',
  'src/modules/activity-logs/service.ts',
  'src/modules/admin-logs/service.ts',
  'src/modules/admin-logs/instance.ts',
  'src/modules/admin-logs/retention.ts',
  'src/modules/health/index.ts',
]

const RULES: [string, RegExp][] = [
  ['imports drizzle-orm', /from\s+['"]drizzle-orm(\/[^'"]*)?['"]/],
  ['imports bun:sqlite', /from\s+['"]bun:sqlite['"]/],
  ['imports the schema tables', /from\s+['"][./]*\/db\/schema(\.ts)?['"]/],
  ['imports a query-building helper of src/db', /from\s+['"][./]*\/db\/(prepared|pages|monotonic)(\.ts)?['"]/],
  // A query starts on the handle (`db.select(`, `tx.insert(`…) and chains (`.from(`, `).where(`…).
  ['builds a Drizzle query', /\b(db|tx|\w+Db)\s*\.\s*(select|selectDistinct|insert|update|delete|run|all|get|values|query|prepare)\(|(^\s*|\))\.(from|where|innerJoin|leftJoin|set|values|returning|orderBy|groupBy|limit|prepare)\(/],
  ['uses the raw connection', /\.sqlite\b|\$client\b|connectionOf\(/],
  ['writes SQL', /\bsql`|\b(SELECT\s+[\w*]|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|PRAGMA\s)/],
]

/** `file:line: rule: text` for every line of `text` that breaks a rule (comments included: SQL there misleads too). */
function offences(file: string, text: string): string[] {
  return text.split('\n').flatMap((line, i) =>
    RULES.filter(([, pattern]) => pattern.test(line)).map(([rule]) => `${file}:${i + 1}: ${rule}: ${line.trim()}`),
  )
}

describe('storage face: notes, activity logs, admin logs, health', () => {
  test('the checks catch each kind of offence', () => {
    const sample = [
      "import { eq } from 'drizzle-orm'",
      "import type { Database } from 'bun:sqlite'",
      "import { notes } from '../../db/schema.ts'",
      "import { prepared } from '../../db/prepared.ts'",
      'db.select().from(notes).where(eq(notes.id, id)).get()',
      'deleteLogBatch(store.sqlite, table, cutoff, BATCH)',
      "tx.run(sql`DELETE FROM notes`)",
      "const q = 'SELECT id FROM notes'",
    ].join('\n')
    expect(offences('sample.ts', sample).map((o) => o.split(':')[1])).toEqual(['1', '2', '3', '4', '5', '6', '7', '7', '8'])
    expect(offences('clean.ts', "import { pageNoteIds } from '../../db/notes.ts'\nreturn pageNoteIds(db, environmentId, filters, dates, limit)")).toEqual([])
  })

  test('the services hold no query, no SQL and no raw connection', () => {
    const found = FILES.flatMap((file) => offences(file, readFileSync(join(repoRoot, file), 'utf8')))
    if (found.length > 0) console.error(`queries outside src/db:\n${found.join('\n')}`)
    expect(found).toEqual([])
  })
})
