/** The identity provider an apply file sets (`sso:` — issuer, client id, auto-create; never the secret). */
import type { StoredSso } from '../../config.ts'
import type { Db } from '../../db/open.ts'
import { deleteInstanceSetting, readInstanceSetting, writeInstanceSetting } from '../../db/sessions.ts'
import type { Clock } from '../../lib/clock.ts'

const SSO = 'sso'

export function readStoredSso(db: Db): StoredSso | null {
  const value = readInstanceSetting(db, SSO)
  return value === undefined ? null : (JSON.parse(value) as StoredSso)
}

/** Stores (or, with null, removes) the settings; says what changed. Call in a write transaction. */
export function storeSso(db: Db, clock: Clock, settings: StoredSso | null): 'created' | 'updated' | 'removed' | 'unchanged' {
  const before = readStoredSso(db)
  if (settings === null) {
    if (!before) return 'unchanged'
    deleteInstanceSetting(db, SSO)
    return 'removed'
  }
  const value = JSON.stringify({ issuer: settings.issuer, clientId: settings.clientId, autoCreate: settings.autoCreate ?? false })
  if (before && JSON.stringify({ ...before, autoCreate: before.autoCreate ?? false }) === value) return 'unchanged'
  writeInstanceSetting(db, SSO, value, clock.now())
  return before ? 'updated' : 'created'
}
