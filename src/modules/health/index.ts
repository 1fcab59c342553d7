/** /healthz (the process answers) and /readyz (the database answers and every migration is applied). */
import { Elysia } from 'elysia'
import type { AppDeps } from '../../app.ts'
import { pendingMigrations } from '../../db/migrate.ts'
import { jsonResponse, errorBody } from '../../http/errors.ts'

export function healthModule(deps: AppDeps) {
  return new Elysia({ name: 'health' })
    .get('/healthz', () => ({ status: 'ok' }))
    .get('/readyz', () => {
      try {
        const pending = pendingMigrations(deps.store.sqlite)
        if (pending.length > 0) {
          return jsonResponse(503, errorBody(503, 'not_ready', `Pending migrations: ${pending.join(', ')}`))
        }
        return { status: 'ready' }
      } catch (error) {
        return jsonResponse(503, errorBody(503, 'not_ready', `Database unavailable: ${(error as Error).message}`))
      }
    })
}
