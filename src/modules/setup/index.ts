/** GET /setup (the page) and POST /setup (create the first admin). */
import { Elysia, t } from 'elysia'
import setupPageText from '../../console/setup.html' with { type: 'text' }
import type { AppDeps } from '../../app.ts'
import { errorResponses } from '../../http/errors.ts'
import { UserObject } from '../users/model.ts'
import { createFirstAdmin } from './service.ts'

// Bun's types describe .html imports as bundles; with { type: 'text' } it is the file's text.
const setupPage = setupPageText as unknown as string

export function setupModule(deps: AppDeps) {
  return new Elysia({ name: 'setup', tags: ['setup'] })
    .get('/setup', () => new Response(setupPage, { headers: { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' } }), {
      detail: {
        operationId: 'setupPage',
        summary: 'The first-start page (open the link `serve` prints)',
        responses: { 200: { description: 'The page', content: { 'text/html': { schema: { type: 'string' } } } } },
      },
    })
    .post(
      '/setup',
      async ({ body, set }) => {
        const user = await createFirstAdmin(deps.store, deps.clock, deps.setupGate, body)
        set.status = 201
        return { user }
      },
      {
        body: t.Object({
          token: t.String({ maxLength: 200 }),
          email: t.String({ maxLength: 320 }),
          username: t.String({ maxLength: 100 }),
          password: t.String({ maxLength: 1024 }),
        }),
        response: { 201: t.Object({ user: UserObject }), ...errorResponses(403, 409) },
        detail: { operationId: 'createFirstAdmin', summary: 'Create the first administrator with the one-time token (works once)' },
      },
    )
}
