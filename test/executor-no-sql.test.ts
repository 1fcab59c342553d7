/**
 * The executor asks the queue (src/db/queue.ts) and the services; it holds no SQL and knows no driver
 * (docs/workflows.md "Executor"). This reads every file under src/executor and fails on a Drizzle or bun:sqlite import, a
 * table import, a query builder call or an SQL keyword.
 */
import { describe, expect, test } from 'bun:test'
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { repoRoot } from './helpers.ts'

const executorDir = join(repoRoot, 'src/executor')
const sources = readdirSync(executorDir, { recursive: true, encoding: 'utf8' })
  .filter((file) => file.endsWith('.ts'))
  .map((file) => join(executorDir, file))

const FORBIDDEN: [string, RegExp][] = [
  ['a Drizzle or bun:sqlite import', /(from|import\()\s*['"](drizzle-orm[^'"]*|bun:sqlite)['"]/],
  ['a table import (src/db/schema.ts)', /from\s*['"][./]*db\/schema(\.ts)?['"]/],
  ['a query builder or driver call', /\.(select|insert|update|where|innerJoin|leftJoin|returning|onConflictDoNothing|prepare|query|transaction)\(/],
  ['an SQL template', /\bsql`|sql\.(raw|placeholder)\(/],
  ['an SQL keyword', /\b(SELECT|INSERT|UPDATE|DELETE|REPLACE|UPSERT|PRAGMA|BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RETURNING|WHERE|JOIN|VALUES)\b/],
]

describe('the executor holds no SQL', () => {
  test('it has sources to check', () => {
    expect(sources.map((file) => relative(repoRoot, file))).toContain('src/executor/executor.ts')
    expect(sources.some((file) => file.includes('/steps/'))).toBe(true)
  })

  for (const file of sources) {
    test(relative(repoRoot, file), () => {
      const found: string[] = []
      readFileSync(file, 'utf8')
        .split('\n')
        .forEach((line, index) => {
          for (const [what, pattern] of FORBIDDEN) if (pattern.test(line)) found.push(`${index + 1}: ${what}: ${line.trim()}`)
        })
      expect(found).toEqual([])
    })
  }

  test('the patterns catch what they are for', () => {
    const caught = (line: string) => FORBIDDEN.filter(([, pattern]) => pattern.test(line)).map(([what]) => what)
    expect(caught("import { eq } from 'drizzle-orm'")).toContain('a Drizzle or bun:sqlite import')
    expect(caught("import type { Database } from 'bun:sqlite'")).toContain('a Drizzle or bun:sqlite import')
    expect(caught("import { runs } from '../db/schema.ts'")).toContain('a table import (src/db/schema.ts)')
    expect(caught('tx.update(runs).set({ status }).run()')).toContain('a query builder or driver call')
    expect(caught('db.select().from(runs)')).toContain('a query builder or driver call')
    expect(caught('tx.transaction((savepoint) => fn(savepoint))')).toContain('a query builder or driver call')
    expect(caught("sqlite.prepare('SELECT 1')")).toContain('an SQL keyword')
    expect(caught('const next = sql`${sql.placeholder("next")}`')).toContain('an SQL template')
    // Plain code is not flagged.
    expect(caught('this.cancelled.delete(run.id)')).toEqual([])
    expect(caught("const path = /^[a-z]+:\\/\\//i.exec(rendered)?.[1] ?? ''")).toEqual([])
    expect(caught('/** Sets fields of the record (templated values) as the run\'s user, with an `update` activity entry. */')).toEqual([])
  })
})
