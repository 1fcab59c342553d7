/**
 * The PostgreSQL runner of ops (src/db/op.ts). Each call an op yields runs here by its kind, awaited in turn: a query
 * written once through PostgreSQL's dialect (./dialect.ts), a plan's PostgreSQL half, a savepoint, a cached lookup.
 * So the service code that built the op — its rules, its 409s — runs unchanged. A write runs in one `BEGIN … COMMIT`
 * on one pooled connection; a read runs its calls on the pool, each statement its own snapshot (as a request's reads
 * on SQLite).
 */
import type { Call, Op } from '../op.ts'
import { StorageUnavailableError, storageFull } from '../../lib/storage-unavailable.ts'
import { runQueryOnPostgres } from './dialect.ts'
import { cachedLookupOnPostgres } from './lookup-cache.ts'
import { answerBeforeCommit, answeredSince, channelsToNotify, checksBeforeCommit, dropSentSince, firstUnansweredFailure, forgetListLocks, nextSavepointName, runEventsAppended, sentMark, trackListLocks } from './monotonic.ts'
import { clientOf, type PgDb } from './client.ts'

/** How often a write that lost a serialization race or a deadlock runs again from scratch before it gives up. */
const RETRIES = 5

/**
 * SQLSTATEs after which the whole transaction may simply run again: serialization failure, deadlock, and a unique
 * violation the op did not handle — another transaction committed the row this one checked for and did not see
 * (publishing the same new workflow, creating the same user, at once). Run again, the op's check finds that row
 * and answers as SQLite's single writer would have: the existing row used, or the service's own 409.
 */
const RETRYABLE = new Set(['40001', '40P01', '23505'])

/**
 * SQLSTATE classes of a server that cannot serve now (connection, resources, shutdown). Of class 53, a full disk
 * (`53100` disk_full) is `storage_full` instead, as SQLite's: out of memory (`53200`), too many connections (`53300`)
 * and a configuration limit (`53400`) are the server's state, not its disk's.
 */
const UNAVAILABLE = ['08', '53', '57P']
const DISK_FULL = '53100'

/**
 * The op `body` makes, in one transaction on the pool `db`: all of it commits, or (it threw) none of it. Runs again
 * after a deadlock. `committed` hears, once it committed, of the environments whose run events it appended and of
 * the channels its commit should wake (./notify.ts).
 *
 * Statements the op sent without awaiting them (`sent` queries, a savepoint's RELEASE) are not waited for before the
 * COMMIT, only their checks are: the COMMIT goes right behind them, and a write that holds an environment's lock
 * waits for one answer at its end instead of one per statement. When one of them failed, PostgreSQL turned the
 * COMMIT into a ROLLBACK: the write fails with that statement's error (what the retry below and the caller judge).
 */
export async function writeOnPostgres<T>(db: PgDb, body: () => Op<T>, committed: (announced: Committed) => void): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    let handle: PgDb | undefined
    try {
      const transaction = (tx: PgDb) => {
        handle = tx
        trackListLocks(tx)
        return runOpOnPostgres(tx, body()).then(async (answer) => {
          await checksBeforeCommit(tx)
          return answer
        })
      }
      let answer: T
      try {
        answer = await db.transaction(transaction)
      } catch (error) {
        throw (await firstUnansweredFailure(handle)) ?? error
      }
      const failed = await firstUnansweredFailure(handle)
      if (failed !== undefined) throw failed // not reached: a failed statement makes the COMMIT fail
      committed({ runEvents: runEventsAppended(handle!), channels: channelsToNotify(handle!) })
      return answer
    } catch (error) {
      if (attempt < RETRIES && RETRYABLE.has(sqlStateOf(error) ?? '')) continue
      throw postgresFaultOf(error) ?? error
    }
  }
}

/** What a committed write announces: the environments whose run events it appended, the channels to wake. */
export interface Committed {
  runEvents: number[]
  channels: string[]
}

/** A request's read on the pool `db`. */
export async function readOnPostgres<T>(db: PgDb, work: Op<T>): Promise<T> {
  try {
    return await runOpOnPostgres(db, work)
  } catch (error) {
    throw postgresFaultOf(error) ?? error
  }
}

/** `work` over one consistent snapshot (REPEATABLE READ, read only): the CLI's reads. */
export function snapshotOnPostgres<T>(db: PgDb, work: Op<T>): Promise<T> {
  return db.transaction((tx) => runOpOnPostgres(tx, work), { isolationLevel: 'repeatable read', accessMode: 'read only' })
}

/** Drives `work` on `db`: each call awaited in turn; a failing call is thrown into the op, as SQLite's runner does. */
export async function runOpOnPostgres<T>(db: PgDb, work: Op<T>): Promise<T> {
  let step = work.next()
  while (!step.done) {
    let result: unknown
    try {
      result = await runCall(db, step.value)
    } catch (error) {
      step = work.throw(error)
      continue
    }
    step = work.next(result)
  }
  return step.value
}

/** One call, by its kind (../op.ts `Call`). */
function runCall(db: PgDb, call: Call): Promise<unknown> {
  switch (call.kind) {
    case 'query':
      return runQueryOnPostgres(db, call.query)
    case 'plan':
      return call.plan.postgres(db, ...(call.args as never[]))
    case 'savepoint':
      return savepointOnPostgres(db, call.body)
    case 'cached':
      return cachedOnPostgres(db, call.lookup, call.key, call.work)
  }
}

/**
 * PostgreSQL's savepoint (../op.ts `savepoint`): `body` after a SAVEPOINT, rolled back to it alone when it throws —
 * and with it the list locks taken inside (./monotonic.ts), so the transaction forgets what it knew of them.
 *
 * In a write's transaction the SAVEPOINT and the RELEASE are sent without waiting for their answers: the connection
 * runs its statements in the order sent, so the body's first statement queues behind the SAVEPOINT, and the next
 * statement after the body behind the RELEASE. A step group (src/executor) makes a savepoint per step, often under
 * its environment's lock: each answer not waited for is one less pass through the event loop while other writers
 * wait. The statements the body sent without waiting (`sent` queries) are waited for at its end, so that their failure
 * fails the savepoint, not the write. A failed SAVEPOINT or RELEASE (a broken connection) still fails the transaction:
 * the statements behind it fail, and the write reads every RELEASE's answer with its COMMIT's (`writeOnPostgres`). Outside one (no tracking): a
 * nested transaction of the driver, each answer awaited.
 */
export async function savepointOnPostgres<T>(db: PgDb, body: () => Op<T>): Promise<T> {
  const name = nextSavepointName(db)
  if (name === null) return db.transaction((savepoint) => runOpOnPostgres(savepoint, body()))
  const client = clientOf(db)
  const opened = sent(client.unsafe(`SAVEPOINT ${name}`))
  const mark = sentMark(db)
  try {
    const answer = await runOpOnPostgres(db, body())
    await opened
    // What the body sent without waiting is judged here: its failure is the savepoint's, as the op expects.
    await answeredSince(db, mark)
    void answerBeforeCommit(db, client.unsafe(`RELEASE SAVEPOINT ${name}`).execute() as Promise<unknown[]>)
    return answer
  } catch (error) {
    await opened.catch(() => {})
    await client.unsafe(`ROLLBACK TO SAVEPOINT ${name}`)
    forgetListLocks(db)
    // A statement the body sent without awaiting it failed first: the error the body saw only followed from it.
    throw (await dropSentSince(db, mark)) ?? error
  }
}

/** A statement sent now; its answer awaited later (a rejection unobserved meanwhile is not reported as unhandled). */
function sent(query: { execute(): Promise<unknown> }): Promise<unknown> {
  const answer = query.execute()
  answer.catch(() => {})
  return answer
}

/** A cached lookup (../lookup-cache.ts `cached`): this instance's cache, exact across instances (./lookup-cache.ts). */
function cachedOnPostgres<V>(db: PgDb, kind: string, key: string | number, work: Op<V | undefined>): Promise<V | undefined> {
  return cachedLookupOnPostgres(db, kind, key, () => runOpOnPostgres(db, work))
}

/** The SQLSTATE of a PostgreSQL error, when it is one. */
export function sqlStateOf(error: unknown): string | null {
  const e = driverErrorOf(error) as { errno?: unknown } | null
  return typeof e?.errno === 'string' && /^[0-9A-Z]{5}$/.test(e.errno) ? e.errno : null
}

/** The driver's own error (Drizzle wraps it as the `cause` of a DrizzleQueryError). */
export function driverErrorOf(error: unknown): unknown {
  let e = error
  while (e instanceof Error && e.cause !== undefined && !(e as { errno?: unknown }).errno) e = e.cause
  return e
}

/** A driver error that means the database cannot serve now, as the 503 it is; else null. */
export function postgresFaultOf(error: unknown): StorageUnavailableError | null {
  if (error instanceof StorageUnavailableError) return error
  const state = sqlStateOf(error)
  if (state === DISK_FULL) return storageFull()
  const code = (driverErrorOf(error) as { code?: unknown } | null)?.code
  const lostConnection = typeof code === 'string' && /^ERR_POSTGRES_(CONNECTION|IDLE_TIMEOUT|LIFETIME|CONNECTION_TIMEOUT|CONNECTION_CLOSED)/.test(code)
  if (lostConnection || (state !== null && UNAVAILABLE.some((prefix) => state.startsWith(prefix)))) {
    return new StorageUnavailableError('database_unavailable', 'The database server cannot be reached or cannot serve now', 1)
  }
  return null
}
