/** The identity provider an apply file sets (`sso:` — issuer, client id, auto-create; never the secret). */
import type { StoredSso } from '../../config.ts'
import { deleteInstanceSetting, readInstanceSetting, writeInstanceSetting } from '../../db/sessions.ts'
import type { Clock } from '../../lib/clock.ts'
import type { Op } from '../../db/op.ts'

const SSO = 'sso'

export function* readStoredSso(): Op<StoredSso | null> {
  const value = yield* readInstanceSetting(SSO)
  return value === undefined ? null : (JSON.parse(value) as StoredSso)
}

/** Stores (or, with null, removes) the settings; says what changed. Call in a write transaction. */
export function* storeSso(clock: Clock, settings: StoredSso | null): Op<'created' | 'updated' | 'removed' | 'unchanged'> {
  const before = yield* readStoredSso()
  if (settings === null) {
    if (!before) return 'unchanged'
    yield* deleteInstanceSetting(SSO)
    return 'removed'
  }
  const value = JSON.stringify({ issuer: settings.issuer, clientId: settings.clientId, autoCreate: settings.autoCreate ?? false })
  if (before && JSON.stringify({ ...before, autoCreate: before.autoCreate ?? false }) === value) return 'unchanged'
  yield* writeInstanceSetting(SSO, value, clock.now())
  return before ? 'updated' : 'created'
}
