/** The identity provider an apply file sets (`sso:` — issuer, client id, auto-create; never the secret). */
import { eq } from 'drizzle-orm'
import type { StoredSso } from '../../config.ts'
import type { Db } from '../../db/open.ts'
import { instanceSettings } from '../../db/schema.ts'
import type { Clock } from '../../lib/clock.ts'

const SSO = 'sso'

export function readStoredSso(db: Db): StoredSso | null {
  const row = db.select({ value: instanceSettings.value }).from(instanceSettings).where(eq(instanceSettings.name, SSO)).get()
  return row ? (JSON.parse(row.value) as StoredSso) : null
}

/** Stores (or, with null, removes) the settings; says what changed. Call in a write transaction. */
export function storeSso(db: Db, clock: Clock, settings: StoredSso | null): 'created' | 'updated' | 'removed' | 'unchanged' {
  const before = readStoredSso(db)
  if (settings === null) {
    if (!before) return 'unchanged'
    db.delete(instanceSettings).where(eq(instanceSettings.name, SSO)).run()
    return 'removed'
  }
  const value = JSON.stringify({ issuer: settings.issuer, clientId: settings.clientId, autoCreate: settings.autoCreate ?? false })
  if (before && JSON.stringify({ ...before, autoCreate: before.autoCreate ?? false }) === value) return 'unchanged'
  db.insert(instanceSettings)
    .values({ name: SSO, value, updatedAt: clock.now() })
    .onConflictDoUpdate({ target: instanceSettings.name, set: { value, updatedAt: clock.now() } })
    .run()
  return before ? 'updated' : 'created'
}
