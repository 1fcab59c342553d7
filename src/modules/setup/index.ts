/** GET /setup (the page) and POST /setup (create the first admin). */
import { Elysia, t } from 'elysia'
import setupCss from '../../console/assets/setup.css' with { type: 'text' }
import setupJs from '../../console/assets/setup.js' with { type: 'text' }
import setupPageText from '../../console/setup.html' with { type: 'text' }
import type { AppDeps } from '../../deps.ts'
import { pageAsset, pageResponse } from '../../console/html.ts'
import { textResponseDetail } from '../../http/openapi.ts'
import { errorResponses } from '../../http/errors.ts'
import { UserObject } from '../directory/model.ts'
import { createFirstAdmin } from './service.ts'

// Bun's types describe .html imports as bundles; with { type: 'text' } it is the file's text.
const setupPage = setupPageText as unknown as string
/** A link that no longer opens the form (used, from an earlier start, mistyped) says so before anyone fills it in. */
const unusableLinkPage = setupPage.replace(
  /<!-- page -->[\s\S]*<!-- \/page -->/,
  '<h1>This setup link does not work</h1>\n<p class="error" role="alert">It was used already, or it is not the link this server printed ' +
    'when it last started (each start prints a new one while Trellis has no users).</p>\n<p><a href="/login">Sign in to the console</a></p>',
)

export function setupModule(deps: AppDeps) {
  const css = pageAsset(setupCss, 'text/css', 'The first-start page’s style sheet')
  const js = pageAsset(setupJs, 'text/javascript', 'The first-start page’s form')
  return new Elysia({ name: 'setup', tags: ['setup'] })
    // A page, not an API answer: a link that does not work is said on the page (200), never as a JSON error.
    .get('/setup', ({ query }) => pageResponse(deps.setupGate?.matches(String(query.token ?? '')) ? setupPage : unusableLinkPage), {
      detail: {
        operationId: 'setupPage',
        summary: 'The first-start page (open the link `serve` prints); a used or unknown link opens a page saying so, with no form',
        ...textResponseDetail('text/html', 'The page'),
      },
    })
    .get('/setup/setup.css', css.handle, { detail: { operationId: 'setupPageStyles', summary: 'The first-start page’s styles', ...css.detail } })
    .get('/setup/setup.js', js.handle, { detail: { operationId: 'setupPageScript', summary: 'The first-start page’s script', ...js.detail } })
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
