/**
 * Issue 16 item 1 for the people domains (users, invitations, sessions, SSO settings, members, tokens, projects):
 * their services name what they need from storage (src/db/users.ts, sessions.ts, members.ts, tokens.ts,
 * projects.ts, auth-queries.ts) and hold no query of their own — no drizzle-orm, no bun:sqlite, no schema table,
 * no raw connection, no query builder call, no SQL text.
 */
import { describe, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { repoRoot } from './helpers.ts'

const FILES = [
  'src/modules/users/service.ts',
  'src/modules/users/invitations.ts',
  'src/modules/users/view.ts',
  'src/modules/auth/sessions.ts',
  'src/modules/auth/oidc-settings.ts',
  'src/modules/members/service.ts',
  'src/modules/tokens/service.ts',
  'src/modules/projects/service.ts',
  'src/modules/projects/structure.ts',
  'src/modules/projects/admin-model.ts',
]

const FORBIDDEN: [string, RegExp][] = [
  ['imports drizzle-orm', /from\s+['"]drizzle-orm(?:\/[^'"]*)?['"]/],
  ['imports bun:sqlite', /from\s+['"]bun:sqlite['"]/],
  ['imports the schema (tables)', /from\s+['"][./]*\/?db\/schema(?:\.ts)?['"]/],
  ['imports prepared statements', /from\s+['"][./]*\/?db\/prepared(?:\.ts)?['"]/],
  ['uses the raw connection', /\.sqlite\b|\$client|connectionOf\(/],
  ['calls the query builder', /\bdb\s*\.\s*(?:select|selectDistinct|insert|update|delete|run|all|get|values|query|\$count)\b|\.from\(|\.innerJoin\(|\.leftJoin\(|\.returning\(|\.onConflictDo\w*\(/],
  ['writes SQL', /\bsql\s*`|\b(?:SELECT|INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+[\w"*(]/],
]

function offences(file: string): string[] {
  const lines = readFileSync(join(repoRoot, file), 'utf8').split('\n')
  return lines.flatMap((line, i) =>
    FORBIDDEN.filter(([, pattern]) => pattern.test(line)).map(([what]) => `${file}:${i + 1} ${what}: ${line.trim()}`),
  )
}

describe('people services go through src/db', () => {
  test.each(FILES)('%s holds no query', (file) => {
    const found = offences(file)
    if (found.length > 0) console.error(found.join('\n'))
    expect(found).toEqual([])
  })

  test('the check sees a query when there is one', () => {
    const sample = [
      "import { eq } from 'drizzle-orm'",
      "import { users } from '../../db/schema.ts'",
      'db.select().from(users).where(eq(users.id, 1)).get()',
      'store.sqlite.prepare(`SELECT 1`)',
    ]
    const hits = sample.filter((line) => FORBIDDEN.some(([, pattern]) => pattern.test(line)))
    expect(hits).toEqual(sample)
  })
})
