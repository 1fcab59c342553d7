/**
 * The API reference: /openapi.json (built once from the routes, see src/http/openapi.ts) and /docs, Swagger UI
 * served from the binary — its files are imported as text and embedded, nothing is fetched from elsewhere.
 */
import { Elysia } from 'elysia'
import swaggerBundle from 'swagger-ui-dist/swagger-ui-bundle.js' with { type: 'text' }
import swaggerCss from 'swagger-ui-dist/swagger-ui.css' with { type: 'text' }
import docsCss from '../../console/assets/docs.css' with { type: 'text' }
import docsJs from '../../console/assets/docs.js' with { type: 'text' }
import docsPageText from '../../console/docs.html' with { type: 'text' }
import type { AppDeps } from '../../deps.ts'
import { pageAsset, pageResponse } from '../../console/html.ts'
import { buildOpenApiDocument, textResponseDetail } from '../../http/openapi.ts'

// Bun's types describe .html imports as bundles; with { type: 'text' } it is the file's text.
const docsPage = docsPageText as unknown as string

export function docsModule(deps: AppDeps) {
  let document: string | undefined
  // Swagger UI's own files change only with the binary; the page and its small script are checked each time.
  const css = pageAsset(swaggerCss, 'text/css', 'Swagger UI’s style sheet (for /docs)', 'public, max-age=3600')
  const bundle = pageAsset(swaggerBundle, 'text/javascript', 'Swagger UI (for /docs)', 'public, max-age=3600')
  const pageCss = pageAsset(docsCss, 'text/css', 'The API reference page’s style sheet')
  const pageJs = pageAsset(docsJs, 'text/javascript', 'Starts Swagger UI over /openapi.json')

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
    .get('/docs', () => pageResponse(docsPage), {
      detail: { operationId: 'docs', summary: 'The API reference (Swagger UI over /openapi.json)', ...textResponseDetail('text/html', 'The API reference page') },
    })
    .get('/docs/swagger-ui.css', css.handle, { detail: { operationId: 'docsStyles', summary: 'Swagger UI styles', ...css.detail } })
    .get('/docs/swagger-ui-bundle.js', bundle.handle, { detail: { operationId: 'docsScript', summary: 'Swagger UI script', ...bundle.detail } })
    .get('/docs/docs.css', pageCss.handle, { detail: { operationId: 'docsPageStyles', summary: 'The reference page’s styles', ...pageCss.detail } })
    .get('/docs/docs.js', pageJs.handle, { detail: { operationId: 'docsPageScript', summary: 'The reference page’s script', ...pageJs.detail } })
}
