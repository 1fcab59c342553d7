/**
 * Issue 16 item 1, for records, workflows, webhooks, runs and apply: their services name what they need from
 * storage (src/db/records.ts, workflows.ts, webhooks.ts, runs.ts, apply.ts) and hold no query of their own —
 * no drizzle-orm or bun:sqlite import, no schema table, no raw connection, no query-builder call.
 */
import { describe, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { repoRoot } from './helpers.ts'

const FILES = [
  'src/modules/records/service.ts',
  'src/modules/workflows/service.ts',
  'src/modules/webhooks/service.ts',
  'src/modules/runs/service.ts',
  'src/modules/apply/service.ts',
  'src/modules/apply/validate.ts',
]

const FORBIDDEN: [string, RegExp][] = [
  ['drizzle-orm import', /from\s+['"]drizzle-orm/],
  ['bun:sqlite import', /from\s+['"]bun:sqlite['"]/],
  ['schema table import', /from\s+['"][./]*db\/schema(\.ts)?['"]/],
  ['raw connection', /\.sqlite\b|\$client|connectionOf\(/],
  ['query builder call', /\b(db|tx)\s*\.\s*(select|insert|update|delete|run|all|get|values|transaction)\s*\(/],
  ['raw SQL', /\bsql`|\b(SELECT|INSERT INTO|UPDATE|DELETE FROM)\s+\w/],
]

/** `file:line: kind: text` for every forbidden line of a service file. */
function offences(file: string): string[] {
  const lines = readFileSync(join(repoRoot, file), 'utf8').split('\n')
  return lines.flatMap((line, i) =>
    FORBIDDEN.filter(([, pattern]) => pattern.test(line)).map(([kind]) => `${file}:${i + 1}: ${kind}: ${line.trim()}`),
  )
}

describe('storage behind one face: records, workflows, webhooks, runs, apply', () => {
  for (const file of FILES) {
    test(`${file} asks src/db by name and holds no query`, () => {
      const found = offences(file)
      if (found.length > 0) console.error(found.join('\n'))
      expect(found).toEqual([])
    })
  }

  test('the check sees a query when there is one', () => {
    const sample = ["import { eq } from 'drizzle-orm'", 'const row = this.db.select().from(users).get()', "import { users } from '../../db/schema.ts'"]
    const hits = sample.filter((line) => FORBIDDEN.some(([, pattern]) => pattern.test(line)))
    expect(hits).toEqual(sample)
  })
})
