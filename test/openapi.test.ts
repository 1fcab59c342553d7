/**
 * /openapi.json is a valid OpenAPI 3.1 document (checked with @seriousme/openapi-schema-validator) that lists
 * every route the app registers, with each method, its statuses and their schemas; /docs serves the reference
 * from the binary, with nothing fetched from elsewhere.
 */
import { Validator } from '@seriousme/openapi-schema-validator'
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { pathTemplate } from '../src/http/openapi.ts'
import { request, testApp, type TestEnv, testEnv } from './helpers.ts'
import { type Json, operationsOf } from './support/openapi-requests.ts'


let env: TestEnv
let app: ReturnType<typeof testApp>
let doc: Json

beforeAll(async () => {
  env = testEnv()
  app = testApp(env)
  const response = await app.handle(request('/openapi.json'))
  expect(response.status).toBe(200)
  expect(response.headers.get('content-type')).toStartWith('application/json')
  doc = (await response.json()) as Json
})
afterAll(() => env.cleanup())

const operations = () => operationsOf(doc)

describe('/openapi.json', () => {
  test('is a valid OpenAPI 3.1 document', async () => {
    expect(doc.openapi).toStartWith('3.1.')
    const result = await new Validator().validate(doc)
    expect(result.errors ?? []).toEqual([])
    expect(result.valid).toBe(true)
  })

  test('every route the app registers is in it, with each of its methods — but the console\'s HTML pages', () => {
    const isHidden = (route: (typeof app.routes)[number]) => (route.hooks as { detail?: { hide?: boolean } }).detail?.hide === true
    const api = app.routes.filter((route) => !isHidden(route))
    expect(api.length).toBeGreaterThan(30)
    const missing = api
      .filter((route) => !doc.paths[pathTemplate(route.path)]?.[route.method.toLowerCase()])
      .map((route) => `${route.method} ${route.path}`)
    expect(missing).toEqual([])
    const documented = operations().length
    expect(documented).toBe(api.length)
    // Hidden: only the console (its pages, its assets, and its note actions under /p/ and /tasks/), never an API path.
    const hidden = app.routes.filter(isHidden).map((route) => `${route.method} ${route.path}`)
    expect(hidden.length).toBeGreaterThan(10)
    for (const route of hidden) expect(route).toMatch(/^(GET \/(|login|account|invite|search|inbox|admin\/.+|console\/.+|p\/.+|runs\/.+|tasks\/:taskId)|(POST|PATCH) \/(p\/.+|tasks\/:taskId\/notes.*))$/)
    expect(Object.keys(doc.paths).some((path) => path === '/' || path.startsWith('/p/'))).toBe(false)
  })

  test('every operation has an id, one known tag, a success answer and the shared error body for every error status', () => {
    const tags = new Set((doc.tags as { name: string }[]).map((tag) => tag.name))
    const ids = new Set<string>()
    for (const { path, method, operation } of operations()) {
      const where = `${method.toUpperCase()} ${path}`
      expect(typeof operation.operationId, where).toBe('string')
      expect(ids.has(operation.operationId), `${where}: duplicate operationId`).toBe(false)
      ids.add(operation.operationId)
      expect(operation.tags?.length, where).toBe(1)
      expect(tags.has(operation.tags[0]), where).toBe(true)
      const statuses = Object.keys(operation.responses)
      expect(statuses.some((status) => /^2\d\d$/.test(status)), where).toBe(true)
      expect(statuses, where).toContain('500')
      expect(statuses, where).toContain('503')
      for (const status of statuses) {
        const response = operation.responses[status]
        expect(typeof response.description, `${where} ${status}`).toBe('string')
        if (Number(status) >= 400) {
          expect(response.content?.['application/json']?.schema, `${where} ${status}`).toEqual({ $ref: '#/components/schemas/Error' })
        } else if (status !== '204' && !(where === 'POST /mcp' && status === '202')) {
          expect(Object.keys(response.content ?? {}).length, `${where} ${status} has a body schema`).toBe(1)
        } else {
          // 204, and the MCP endpoint's 202 for a notification (the protocol's Streamable HTTP transport: "with no body").
          expect(response.content, `${where} ${status} has no body`).toBeUndefined()
        }
      }
      // Bodies are JSON only, with their schema, but a records import's CSV.
      if (operation.requestBody) expect(Object.keys(operation.requestBody.content), where).toEqual([operation.operationId === 'importRecords' ? 'text/csv' : 'application/json'])
    }
  })

  test('the error body is defined once; shared shapes are components', () => {
    const schemas = doc.components.schemas as Record<string, Json>
    expect(schemas.Error!.required).toEqual(['error', 'code', 'message'])
    expect(Object.keys(schemas.Error!.properties)).toEqual(expect.arrayContaining(['error', 'code', 'message', 'details']))
    for (const name of ['User', 'Note', 'ActivityLog', 'AdminLog', 'Run', 'Token', 'WebhookSettings']) expect(schemas[name], name).toBeDefined()
    // No inline copy anywhere: every use is a $ref.
    expect(JSON.stringify(doc.paths)).not.toContain('"$id"')
  })

  test('security: Bearer tokens and the session cookie; the public API takes tokens only, management both', () => {
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' })
    expect(doc.components.securitySchemes.sessionCookie).toMatchObject({ type: 'apiKey', in: 'cookie', name: 'trellis_session' })
    const notes = doc.paths['/v1/project/{projectName}/environment/{environmentName}/notes'].get
    expect(notes.security).toEqual([{ bearerAuth: [] }])
    expect(Object.keys(notes.responses)).toEqual(expect.arrayContaining(['200', '400', '401', '403', '404', '429']))
    expect(doc.paths['/v1/account/tokens'].post.security).toEqual([{ bearerAuth: [] }, { sessionCookie: [] }])
    expect(doc.paths['/healthz'].get.security).toBeUndefined()
  })

  test('the webhook is a path template with its body, token and every status of its checks', () => {
    const hook = doc.paths['/v1/hooks/{token}'].post
    expect(hook.parameters).toEqual([
      expect.objectContaining({ name: 'token', in: 'path', required: true }),
      expect.objectContaining({ name: 'Idempotency-Key', in: 'header', required: false }),
    ])
    expect(hook.security).toEqual([{ bearerAuth: [] }])
    expect(hook.requestBody.content['application/json'].schema.required).toEqual(['record_id'])
    expect(Object.keys(hook.responses)).toEqual(['202', '400', '401', '403', '404', '409', '413', '422', '429', '500', '503'])
    expect(hook.responses['202'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/RunAccepted' })
  })

  test('both run starts document the Idempotency-Key header, the Idempotent-Replayed answer header and the 422', () => {
    const starts = [doc.paths['/v1/hooks/{token}'].post, doc.paths['/v1/project/{projectName}/environment/{environmentName}/workflow-runs'].post]
    for (const start of starts) {
      const key = (start.parameters as Json[]).find((p) => p.in === 'header')
      expect(key).toMatchObject({ name: 'Idempotency-Key', required: false, schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x20-\\x7e]+$' } })
      expect(start.responses['202'].headers).toEqual({ 'Idempotent-Replayed': expect.objectContaining({ schema: { type: 'string', enum: ['true'] } }) })
      expect(start.responses['202'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/RunAccepted' })
      expect(start.responses['422'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/Error' })
      expect(start.responses['409']).toBeDefined()
    }
  })

  test('the compatibility operations keep their ids; list routes document limit, filters and date operators', () => {
    const byId = new Map(operations().map((o) => [o.operation.operationId, o]))
    expect(byId.get('listNotes')?.path).toBe('/v1/project/{projectName}/environment/{environmentName}/notes')
    expect(byId.get('listActivityLogs')?.path).toBe('/v1/project/{projectName}/environment/{environmentName}/activity-logs')
    expect(byId.get('listAdminLogs')?.path).toBe('/v1/project/{projectName}/admin-logs')
    const names = (byId.get('listNotes')!.operation.parameters as Json[]).map((p) => `${p.in}:${p.name}`)
    expect(names).toEqual(
      expect.arrayContaining(['path:projectName', 'path:environmentName', 'query:limit', 'query:userEmail', 'query:createdAt.lt', 'query:archivedAt.gte']),
    )
    const page = byId.get('listNotes')!.operation.responses['200'].content['application/json'].schema
    expect(page.required).toEqual(['hasMore', 'data', 'parameters'])
    expect(page.properties.data.items).toEqual({ $ref: '#/components/schemas/Note' })
  })

  test('the server is the base URL; the document is the same on every call', async () => {
    expect(doc.servers).toEqual([{ url: 'http://trellis.test' }])
    const again = await (await app.handle(request('/openapi.json'))).json()
    expect(again).toEqual(doc)
  })
})

describe('/docs', () => {
  test('the reference page and its files come from the binary; the page loads nothing from elsewhere', async () => {
    const page = await app.handle(request('/docs'))
    expect(page.status).toBe(200)
    expect(page.headers.get('content-type')).toStartWith('text/html')
    const html = await page.text()
    expect(html).toContain('/docs/swagger-ui-bundle.js')
    expect(html).toContain('/docs/docs.js')
    expect(html).not.toMatch(/(src|href)="(https?:)?\/\//)
    expect(await (await app.handle(request('/docs/docs.js'))).text()).toContain("url: '/openapi.json'")

    const script = await app.handle(request('/docs/swagger-ui-bundle.js'))
    expect(script.status).toBe(200)
    expect(script.headers.get('content-type')).toStartWith('text/javascript')
    expect((await script.text()).length).toBeGreaterThan(500_000)
    const css = await app.handle(request('/docs/swagger-ui.css'))
    expect(css.headers.get('content-type')).toStartWith('text/css')
    expect((await css.text()).length).toBeGreaterThan(50_000)
  })
})
