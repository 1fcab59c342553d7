/**
 * SQLite's runner of ops (../op.ts): each call runs at once on the connection, by its kind — a query written once
 * through SQLite's dialect (./dialect.ts `runQuery`), a plan's SQLite half, a savepoint, a cached lookup of this
 * connection (./lookup-cache.ts). PostgreSQL's runner (../postgres/op-runner.ts) answers the same kinds its way.
 */
import type { Db } from '../dialect.ts'
import type { Call, Op } from '../op.ts'
import { runQuery } from './dialect.ts'
import { cachedLookup } from './lookup-cache.ts'
import { inSavepoint } from './savepoint.ts'

/**
 * Drives `work` on a SQLite connection, synchronously: every call runs at once; a call that throws is thrown into
 * the op (its `try` may handle it), and whatever the op throws goes on to the caller (whose transaction rolls back).
 */
export function runOp<T>(db: Db, work: Op<T>): T {
  let step = work.next()
  while (!step.done) {
    let result: unknown
    try {
      result = runCall(db, step.value)
    } catch (error) {
      step = work.throw(error)
      continue
    }
    step = work.next(result)
  }
  return step.value
}

function runCall(db: Db, call: Call): unknown {
  switch (call.kind) {
    case 'query':
      return runQuery(db, call.query)
    case 'plan':
      return call.plan.sqlite(db, ...(call.args as never[]))
    case 'savepoint':
      // SAVEPOINT / RELEASE / ROLLBACK TO, prepared once per connection. One name serves nested savepoints too:
      // SQLite releases or rolls back to the innermost of that name.
      return inSavepoint(db, (savepoint) => runOp(savepoint, call.body()))
    case 'cached':
      // `work` run on this connection only when the cache has no fresh answer.
      return cachedLookup(db, call.lookup, call.key, () => runOp(db, call.work))
  }
}
