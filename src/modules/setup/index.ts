/** GET /setup (the page) and POST /setup (create the first admin). */
import { Elysia, t } from 'elysia'
import setupPageText from '../../console/setup.html' with { type: 'text' }
import type { AppDeps } from '../../app.ts'
import { createFirstAdmin } from './service.ts'

// Bun's types describe .html imports as bundles; with { type: 'text' } it is the file's text.
const setupPage = setupPageText as unknown as string

export function setupModule(deps: AppDeps) {
  return new Elysia({ name: 'setup' })
    .get('/setup', () => new Response(setupPage, { headers: { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' } }))
    .post(
      '/setup',
      ({ body, set }) => {
        set.status = 201
        return { user: createFirstAdmin(deps.store, deps.clock, deps.setupGate, body) }
      },
      {
        body: t.Object({
          token: t.String({ maxLength: 200 }),
          email: t.String({ maxLength: 320 }),
          username: t.String({ maxLength: 100 }),
          password: t.String({ maxLength: 1024 }),
        }),
      },
    )
}
