/** The twin harness itself: one fresh database per block, ops on both stores answer alike. */
import { describe, expect, test } from 'bun:test'
import { recoverExpiredRuns } from '../src/db/queue.ts'
import { bothStores, postgresOrSkip } from './support/both-stores.ts'

describe.skipIf(!postgresOrSkip('twins harness'))('twin harness', () => {
  const stores = bothStores()
  test('an op runs on both stores and answers alike', async () => {
    const [sqlite, postgres] = await stores.both(() => recoverExpiredRuns(Date.UTC(2026, 10, 23)))
    expect(postgres).toEqual(sqlite)
  })
})
