/**
 * Group commit (src/db/sqlite/group-commit.ts): the writes of one event-loop turn share one IMMEDIATE transaction, a savepoint
 * each; one write's failure is its own; every caller is answered after the COMMIT; a locked database is waited out
 * by the whole batch. Real SQLite files, real concurrency, a real second process holding the lock.
 */
import { Database } from 'bun:sqlite'
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { Db } from '../src/db/dialect.ts'
import { EXECUTOR_COMMIT_BUDGET_MS, GROUP_COMMIT_BUDGET_MS, GROUP_COMMIT_LIMIT } from '../src/db/sqlite/group-commit.ts'
import { connectionOf } from '../src/db/sqlite/prepared.ts'
import { write, writeInShare } from '../src/db/write.ts'
import { StorageUnavailableError } from '../src/lib/storage-unavailable.ts'
import { onSqlite, SQLITE_ONLY, sqliteOnlyDescribe, type SqliteTestEnv, sqliteTestEnv } from './helpers.ts'

let env: SqliteTestEnv

beforeAll(() => {
  env = sqliteTestEnv()
  env.store.sqlite.run('CREATE TABLE scratch (name TEXT PRIMARY KEY)')
})
afterAll(() => env.cleanup())

const insertName = (db: Db, name: string) => connectionOf(db).prepare('INSERT INTO scratch (name) VALUES (?)').run(name).changes
const names = (db: Database = env.store.sqlite) => (db.prepare('SELECT name FROM scratch ORDER BY name').all() as { name: string }[]).map((r) => r.name)

/** A write of one row, answering its name. */
const writeName = (name: string) =>
  write(env.store, function* () {
    yield* onSqlite(insertName, name)
    return name
  })

/** A write that inserts a row, then fails: its row must not stay. */
const failingWrite = (name: string) =>
  write(env.store, function* () {
    yield* onSqlite(insertName, name)
    throw new Error(`refused ${name}`)
  })

sqliteOnlyDescribe(SQLITE_ONLY.groupCommit, 'group commit', () => {
  test('the writes of one turn commit in one transaction, each answered with its own value', async () => {
    // Warm (statements prepared, code compiled): cold, 40 writes can pass the commit's time budget.
    await Promise.all(Array.from({ length: 40 }, (_, i) => writeName(`warm-${i}`)))
    // A collection first: a file run before this one in the process (a large heap) can pause the turn past the budget.
    Bun.gc(true)
    const before = { ...env.store.committed }
    const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => writeName(`turn-${String(i).padStart(2, '0')}`)))
    expect(answers).toEqual(Array.from({ length: 40 }, (_, i) => `turn-${String(i).padStart(2, '0')}`))
    expect(env.store.committed.transactions - before.transactions).toBe(1)
    expect(env.store.committed.writes - before.writes).toBe(40)
    expect(names().filter((n) => n.startsWith('turn-'))).toHaveLength(40)
  })

  test('one write failing in a batch rolls back its own changes only, and only its caller hears of it', async () => {
    const outcomes = await Promise.allSettled([writeName('mixed-a'), failingWrite('mixed-b'), writeName('mixed-c')])
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled'])
    expect(((outcomes[1] as PromiseRejectedResult).reason as Error).message).toBe('refused mixed-b')
    expect(names().filter((n) => n.startsWith('mixed-'))).toEqual(['mixed-a', 'mixed-c'])
  })

  test('a constraint violation is its write\'s own failure (the unique index decides, as for a 409)', async () => {
    const outcomes = await Promise.allSettled([writeName('twice'), writeName('twice'), writeName('once')])
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled'])
    expect(names().filter((n) => n === 'twice' || n === 'once')).toEqual(['once', 'twice'])
  })

  test('a caller is answered only once its write is on disk: another connection already sees it', async () => {
    const other = new Database(env.store.path, { readonly: true })
    try {
      const seen = await Promise.all(
        Array.from({ length: 5 }, (_, i) => writeName(`durable-${i}`).then((name) => names(other).includes(name))),
      )
      expect(seen).toEqual([true, true, true, true, true])
    } finally {
      other.close()
    }
  })

  test('more writes than one transaction takes are split, none lost', async () => {
    const before = env.store.committed.transactions
    const n = GROUP_COMMIT_LIMIT + 10
    await Promise.all(Array.from({ length: n }, (_, i) => writeName(`many-${i}`)))
    expect(names().filter((n) => n.startsWith('many-'))).toHaveLength(n)
    // At most GROUP_COMMIT_LIMIT a transaction; the time budget may split them further on a slow machine.
    expect(env.store.committed.transactions - before).toBeGreaterThanOrEqual(2)
  })

  test('a batch stops at its time budget: the writes past it commit in the next transaction, in order, none lost', async () => {
    const before = env.store.committed.transactions
    const slowName = (name: string) =>
      write(env.store, function* () {
        yield* onSqlite(insertName, name)
        yield* onSqlite(() => Bun.sleepSync(1)) // a write's own work, 1 ms
        return name
      })
    const n = 4 * GROUP_COMMIT_BUDGET_MS
    const order: string[] = []
    await Promise.all(Array.from({ length: n }, (_, i) => slowName(`slow-${String(i).padStart(2, '0')}`).then((name) => order.push(name))))
    expect(order).toEqual(Array.from({ length: n }, (_, i) => `slow-${String(i).padStart(2, '0')}`))
    expect(names().filter((name) => name.startsWith('slow-'))).toHaveLength(n)
    // About GROUP_COMMIT_BUDGET_MS writes a transaction (each 1 ms): never all of them in one.
    const transactions = env.store.committed.transactions - before
    expect(transactions).toBeGreaterThanOrEqual(3)
    expect(transactions).toBeLessThanOrEqual(n)
  })

  test("the executor's writes while no request waits (share unbounded) take the longer budget: the groups reaching their writes together commit together", async () => {
    const before = env.store.committed.transactions
    const groupWrite = (name: string) =>
      writeInShare(env.store, function* () {
        yield* onSqlite(insertName, name)
        yield* onSqlite(() => Bun.sleepSync(1)) // a step group's own work on a large database, 1–2 ms
        return name
      }, Number.POSITIVE_INFINITY)
    // Eight workers' groups, 1 ms each: far past GROUP_COMMIT_BUDGET_MS (three commits), within EXECUTOR_COMMIT_BUDGET_MS.
    expect(8 * 1).toBeGreaterThan(2 * GROUP_COMMIT_BUDGET_MS)
    expect(8 * 1.2).toBeLessThan(EXECUTOR_COMMIT_BUDGET_MS)
    await Promise.all(Array.from({ length: 8 }, (_, i) => groupWrite(`group-${i}`)))
    expect(names().filter((name) => name.startsWith('group-'))).toHaveLength(8)
    // One commit; two when a pause of the process (a busy CI machine) spends the budget.
    expect(env.store.committed.transactions - before).toBeLessThanOrEqual(2)
  })

  test("the executor's writes stop at their share of a commit; the others of the batch go on; none is lost", async () => {
    /** One write of `kind`, 1 ms of its own work, answering the transaction it committed in. */
    const timedWrite = (kind: 'executor' | 'other', name: string) => {
      const body = function* () {
        yield* onSqlite(insertName, name)
        yield* onSqlite(() => Bun.sleepSync(1))
        return env.store.committed.transactions
      }
      return kind === 'executor' ? writeInShare(env.store, body, 1) : write(env.store, body)
    }
    // Queued in one turn, alternated: the executor's share (1 ms) takes one of its writes a commit.
    const writes = Array.from({ length: 6 }, (_, i) => timedWrite(i % 2 === 0 ? 'executor' : 'other', `share-${i}`))
    const committedIn = await Promise.all(writes)
    expect(names().filter((name) => name.startsWith('share-'))).toHaveLength(6)
    const executorCommits = committedIn.filter((_, i) => i % 2 === 0)
    expect(new Set(executorCommits).size).toBe(3)
    // The others' writes are not held back behind the executor's put off: the first two of them commit no later than
    // the executor's second write, which the first commit puts off (not compared with the first commit, nor further:
    // a pause of the process spends a commit's budget, and a commit always runs at least one write, however long).
    expect(committedIn[1]).toBeLessThanOrEqual(committedIn[2]!)
    expect(committedIn[3]).toBeLessThanOrEqual(committedIn[2]!)
  })
})

sqliteOnlyDescribe(SQLITE_ONLY.writeLock, 'group commit while another process holds the write lock', () => {
  /** Another process takes the write lock and holds it for `ms`. */
  async function holdLock(ms: number) {
    const holder = Bun.spawn(
      [
        process.execPath,
        '-e',
        `const { Database } = require('bun:sqlite')
         const db = new Database(${JSON.stringify(env.store.path)})
         db.run('BEGIN IMMEDIATE')
         console.log('locked')
         Bun.sleepSync(${ms})
         db.run('ROLLBACK')`,
      ],
      { stdout: 'pipe', stderr: 'inherit' },
    )
    const first = await holder.stdout.getReader().read()
    expect(new TextDecoder().decode(first.value)).toContain('locked')
    return holder
  }

  test('the batch waits for the lock asynchronously and commits whole once it is free', async () => {
    env.store.keepEventLoopFree(3000)
    const holder = await holdLock(400)
    try {
      const started = performance.now()
      let ticks = 0
      const ticker = setInterval(() => ticks++, 20)
      const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => writeName(`locked-${i}`)))
      clearInterval(ticker)
      expect(answers).toHaveLength(10)
      expect(performance.now() - started).toBeGreaterThan(300)
      // The event loop kept turning while the batch waited.
      expect(ticks).toBeGreaterThan(5)
      expect(names().filter((n) => n.startsWith('locked-'))).toHaveLength(10)
    } finally {
      await holder.exited
    }
  })

  test('a write whose wait runs out is refused with database_busy and writes nothing', async () => {
    env.store.keepEventLoopFree(100)
    const holder = await holdLock(800)
    try {
      const outcomes = await Promise.allSettled(Array.from({ length: 3 }, (_, i) => writeName(`gave-up-${i}`)))
      for (const outcome of outcomes) {
        expect(outcome.status).toBe('rejected')
        const reason = (outcome as PromiseRejectedResult).reason
        expect(reason).toBeInstanceOf(StorageUnavailableError)
        expect((reason as StorageUnavailableError).code).toBe('database_busy')
      }
    } finally {
      await holder.exited
      env.store.keepEventLoopFree(3000)
    }
    expect(names().filter((n) => n.startsWith('gave-up-'))).toEqual([])
  })
})
