/** Savepoints: part of a transaction that can fail alone (a step of a run, one write of a group commit). */
import type { Db } from './open.ts'
import { connectionOf } from './prepared.ts'

/**
 * Runs `fn` in a savepoint of the transaction `tx`: when it throws, its writes alone roll back and its error goes
 * on unchanged, the rest of the transaction stays. When SQLite has already ended the whole transaction (it may, on
 * a full disk), there is nothing to roll back to: the error goes on as it is, for the caller to end the batch.
 */
export function inSavepoint<T>(tx: Db, fn: (savepoint: Db) => T): T {
  const connection = connectionOf(tx)
  connection.run('SAVEPOINT part')
  try {
    const result = fn(tx)
    connection.run('RELEASE part')
    return result
  } catch (error) {
    if (connection.inTransaction) {
      connection.run('ROLLBACK TO part')
      connection.run('RELEASE part')
    }
    throw error
  }
}
