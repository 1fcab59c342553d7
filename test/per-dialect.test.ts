/**
 * Every storage operation is written once for both stores (src/db/query.ts), but for the few
 * PostgreSQL runs its own way, kept side by side in src/db/postgres/per-dialect.ts, each with its reason. This test
 * prints them and holds their number to at most 15 (docs/architecture.md "Architecture" lists them too).
 */
import { expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { PER_DIALECT } from '../src/db/postgres/per-dialect.ts'
import { TWINS } from '../src/db/postgres/twins.ts'
import { runQuery } from '../src/db/query.ts'
import { repoRoot } from './helpers.ts'

const MOST = 15

test(`at most ${MOST} storage operations are per dialect, each named with its reason`, () => {
  const listed = PER_DIALECT.map((pair) => `${pair.sqlite.name}: ${pair.reason}`)
  console.log(`${listed.length} per-dialect operations (src/db/postgres/per-dialect.ts):\n${listed.map((line) => `  - ${line}`).join('\n')}`)
  expect(listed.length).toBeLessThanOrEqual(MOST)
  // Each reason says why this one cannot be written once.
  for (const pair of PER_DIALECT) expect(pair.reason.length).toBeGreaterThan(30)
  expect(new Set(PER_DIALECT.map((pair) => pair.sqlite)).size).toBe(PER_DIALECT.length)
})

test('the PostgreSQL runner knows the queries written once and the per-dialect operations, nothing else', () => {
  expect([...TWINS.keys()]).toEqual([runQuery, ...PER_DIALECT.map((pair) => pair.sqlite)])
})

test('every SQLite version says it has a PostgreSQL twin in per-dialect.ts', () => {
  // The SQLite side stays beside the op that yields it; its doc names where PostgreSQL's is.
  const sources = new Map<string, string>()
  const missing = PER_DIALECT.map((pair) => pair.sqlite.name).filter((name) => {
    const file = ['rule-locks', 'monotonic', 'activity-logs', 'notes', 'queue', 'callbacks', 'run-events'].find((module) => {
      const text = sources.get(module) ?? readFileSync(join(repoRoot, 'src/db', `${module}.ts`), 'utf8')
      sources.set(module, text)
      return new RegExp(`export function ${name}\\(`).test(text)
    })
    return file === undefined || !/per-dialect/i.test(sources.get(file)!.split(`export function ${name}(`)[0]!.split('\n').slice(-8).join('\n'))
  })
  expect(missing).toEqual([])
})
