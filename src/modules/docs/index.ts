/**
 * The API reference: /openapi.json (built once from the routes, see src/http/openapi.ts) and /docs, Swagger UI
 * served from the binary — its files are imported as text and embedded, nothing is fetched from elsewhere.
 */
import { type DocumentDecoration, Elysia } from 'elysia'
import swaggerBundle from 'swagger-ui-dist/swagger-ui-bundle.js' with { type: 'text' }
import swaggerCss from 'swagger-ui-dist/swagger-ui.css' with { type: 'text' }
import docsPageText from '../../console/docs.html' with { type: 'text' }
import type { AppDeps } from '../../app.ts'
import { buildOpenApiDocument } from '../../http/openapi.ts'

// Bun's types describe .html imports as bundles; with { type: 'text' } it is the file's text.
const docsPage = docsPageText as unknown as string

function asset(text: string, type: string, description: string): { handle: () => Response; detail: DocumentDecoration } {
  return {
    handle: () => new Response(text, { headers: { 'content-type': type, 'cache-control': 'public, max-age=3600' } }),
    detail: { description, responses: { 200: { description, content: { [type.split(';')[0]!]: { schema: { type: 'string' } } } } } },
  }
}

export function docsModule(deps: AppDeps) {
  let document: string | undefined
  const css = asset(swaggerCss, 'text/css; charset=utf-8', 'Swagger UI’s style sheet (for /docs)')
  const bundle = asset(swaggerBundle, 'text/javascript; charset=utf-8', 'Swagger UI (for /docs)')
  const page = asset(docsPage, 'text/html; charset=utf-8', 'The API reference page')

  const plugin: Elysia<''> = new Elysia({ name: 'docs', tags: ['operations'] })
  return plugin
    .get(
      '/openapi.json',
      () => {
        // The routes are all registered before the first request: build once.
        document ??= JSON.stringify(buildOpenApiDocument(plugin, deps.config))
        return new Response(document, { headers: { 'content-type': 'application/json; charset=utf-8' } })
      },
      {
        detail: {
          operationId: 'openapi',
          summary: 'This document (OpenAPI 3.1)',
          responses: { 200: { description: 'The OpenAPI document', content: { 'application/json': { schema: { type: 'object' } } } } },
        },
      },
    )
    .get('/docs', page.handle, { detail: { operationId: 'docs', summary: 'The API reference (Swagger UI over /openapi.json)', ...page.detail } })
    .get('/docs/swagger-ui.css', css.handle, { detail: { operationId: 'docsStyles', summary: 'Swagger UI styles', ...css.detail } })
    .get('/docs/swagger-ui-bundle.js', bundle.handle, { detail: { operationId: 'docsScript', summary: 'Swagger UI script', ...bundle.detail } })
}
