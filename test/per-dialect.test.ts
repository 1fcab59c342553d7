/**
 * Every storage operation is written once for both stores (src/db/query.ts), but for the few each store runs its own
 * way: plans (src/db/op.ts `plan`), each one value holding SQLite's half, PostgreSQL's half and why they differ,
 * declared beside the op that runs it. This test loads every file of src/db, takes the plans they declared (the
 * registry `plan` fills as each module loads), checks that the source declares exactly those (`const name =
 * plan({ … why: '…' })`, read from the files), prints each with its reason, and holds their number to at most 15.
 * A plan missing a half does not compile (the `@ts-expect-error`s below fail `npm run typecheck` the day such a plan
 * compiles), nor does `plan` accept one at run time.
 */
import { expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { declaredPlans, plan } from '../src/db/op.ts'
import type { Db } from '../src/db/dialect.ts'
import { repoRoot, sourceFiles } from './helpers.ts'

const MOST = 15

/** Every file of src/db but the workers' entry points (each runs as a worker of its own, and declares no plan). */
const DB_FILES = sourceFiles(join(repoRoot, 'src/db')).filter((file) => !file.endsWith('-worker.ts'))
for (const file of DB_FILES) await import(file)
const loaded = [...declaredPlans]

/** A plan as the source declares it: where, its name, its reason. */
interface PlanInSource {
  file: string
  name: string
  why: string
}

/** A declaration `const name = plan({` at a line's start … its first `why: '…'` (a string literal: the reason is read, never computed). */
const PLAN_START = /^(?:export )?const (\w+) = plan\(\{/gm
const WHY = /\bwhy: (['"`])((?:\\.|(?!\1)[^\\])*)\1/

function plansIn(file: string): PlanInSource[] {
  const text = readFileSync(file, 'utf8')
  return [...text.matchAll(PLAN_START)].map((match) => {
    const why = WHY.exec(text.slice(match.index))
    if (!why) throw new Error(`${relative(repoRoot, file)}: plan ${match[1]} has no literal why`)
    return { file: relative(repoRoot, file), name: match[1]!, why: why[2]!.replace(/\\(.)/g, '$1') }
  })
}

const inSource = sourceFiles(join(repoRoot, 'src')).flatMap(plansIn)

test('it loads the files of src/db and sees their plans', () => {
  expect(DB_FILES.length).toBeGreaterThan(40)
  expect(inSource.map((p) => p.name)).toContain('insertQueuedRun')
})

test(`at most ${MOST} storage operations are plans (per dialect), each declared in src/db with its reason`, () => {
  console.log(`${inSource.length} per-dialect operations (plans: src/db/op.ts):\n${inSource.map((p) => `  - ${p.name} (${p.file}): ${p.why}`).join('\n')}`)
  expect(inSource.length).toBeLessThanOrEqual(MOST)
  expect(inSource.filter((p) => !p.file.startsWith('src/db/'))).toEqual([])
  // Each reason says why this one cannot be written once.
  for (const p of inSource) expect({ plan: p.name, why: p.why.length > 30 }).toEqual({ plan: p.name, why: true })
  expect(new Set(inSource.map((p) => p.name)).size).toBe(inSource.length)
})

test('the plans the modules declared at load are exactly those of the source', () => {
  expect(loaded.map((p) => p.why).sort()).toEqual(inSource.map((p) => p.why).sort())
  for (const p of loaded) expect([typeof p.sqlite, typeof p.postgres]).toEqual(['function', 'function'])
})

test("only src/db/op.ts makes a plan's call: every plan is made by `plan`, and counted", () => {
  const making = sourceFiles(join(repoRoot, 'src'))
    .filter((file) => /kind: 'plan'/.test(readFileSync(file, 'utf8')))
    .map((file) => relative(repoRoot, file))
  expect(making).toEqual(['src/db/op.ts'])
})

// ── A plan missing a half does not compile ────────────────────────────────────

const sqliteHalf = (_db: Db, id: number): number => id

/** Never called but by the test below: `plan` refuses it before it could count it. */
function planWithoutPostgres() {
  // @ts-expect-error: a plan without its PostgreSQL half does not compile
  return plan({ sqlite: sqliteHalf, why: 'a plan missing its PostgreSQL half, which must not compile' })
}

/** Never called: its halves disagree, which must not compile. */
export function planOfDisagreeingHalves() {
  return plan({
    sqlite: sqliteHalf,
    // @ts-expect-error: PostgreSQL's half must answer what SQLite's does
    postgres: async (_db, id) => String(id),
    why: 'a plan whose PostgreSQL half answers a string where SQLite answers a number',
  })
}

/** Never called: a plan without its SQLite half, which must not compile either. */
export function planWithoutSqlite() {
  // @ts-expect-error: a plan without its SQLite half does not compile
  return plan({ postgres: async (_db, id: number) => id, why: 'a plan missing its SQLite half, which must not compile' })
}

test('a plan missing a half does not compile (npm run typecheck checks the expected errors above), nor does plan() take it', () => {
  const before = declaredPlans.length
  expect(planWithoutPostgres).toThrow('a plan needs both halves')
  expect(declaredPlans.length).toBe(before)
})
