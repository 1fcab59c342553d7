/** Savepoints: part of a transaction that can fail alone (a step of a run, one write of a group commit). */
import type { Db } from '../dialect.ts'
import { forgetListTimes } from '../monotonic.ts'
import { connectionOf, statementOn } from './prepared.ts'

/** SAVEPOINT, RELEASE and ROLLBACK TO, each prepared once per connection (a run's every step takes a savepoint). */
const savepointStatement = (tx: Db, verb: 'SAVEPOINT' | 'RELEASE' | 'ROLLBACK TO') => statementOn(tx, `savepoint.${verb}`, `${verb} part`)

/**
 * Runs `fn` in a savepoint of the transaction `tx`: when it throws, its writes alone roll back and its error goes
 * on unchanged, the rest of the transaction stays. When SQLite has already ended the whole transaction (it may, on
 * a full disk), there is nothing to roll back to: the error goes on as it is, for the caller to end the batch.
 */
export function inSavepoint<T>(tx: Db, fn: (savepoint: Db) => T): T {
  savepointStatement(tx, 'SAVEPOINT').run()
  try {
    const result = fn(tx)
    savepointStatement(tx, 'RELEASE').run()
    return result
  } catch (error) {
    if (connectionOf(tx).inTransaction) {
      savepointStatement(tx, 'ROLLBACK TO').run()
      savepointStatement(tx, 'RELEASE').run()
      forgetListTimes(tx)
    }
    throw error
  }
}
