/**
 * The served /openapi.json says what the server does. For every operation of the document — read from it, not
 * listed here — the test sends requests made from the document itself to the real app over a real database:
 * - valid ones (json-schema-faker, seeded: only the required fields, then every field), with path parameters,
 *   body fields and query values that name real things of the Acme fixture where the document's names say so;
 * - one per rule the document states (wrong type, missing required field, over a maximum, under a minimum, not
 *   in the enum, unknown field where none is allowed, bad format) for every path parameter, query parameter
 *   and body field, kept only when ajv agrees the request breaks the document;
 * - bodies with each string field at its documented maximum, filled with characters JSON escapes to six bytes.
 * Every answer must have a documented status and a body that validates against the documented schema for that
 * status, never 5xx; every broken rule must be a 400 that names the field in plain words; no maximum may be
 * refused by the body limit. The document itself must declare integers as integers and type every body field.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { request, testApp, testEnv, type TestEnv } from './helpers.ts'
import { fixtureValue, HIGH_API_BUDGETS, seedApiFixture } from './support/api-fixture.ts'
import { atMaximum, bodySchemaOf as bodySchemaOfDoc, deref, type Json, mutations, type Operation, operationsOf, parametersOf, schemaValidator, valueGenerators } from './support/openapi-requests.ts'

let env: TestEnv
let app: ReturnType<typeof testApp>
let doc: Json
let bearer: string
let instanceCookie: string
const known: Record<string, string> = {}
const compile = schemaValidator()
const valid = (schema: Json, value: unknown) => compile(schema)(value) as boolean

const TYPEBOX_WORDING = /Expected|union value|'undefined'|should be one of|Property '/

beforeAll(async () => {
  env = testEnv(HIGH_API_BUDGETS)
  const fixture = await seedApiFixture(env)
  app = fixture.app
  bearer = fixture.bearer
  instanceCookie = fixture.cookie
  Object.assign(known, fixture.known)
  doc = (await (await app.handle(request('/openapi.json'))).json()) as Json
  const put = await app.handle(request(`${RECORDS}/${DELETED_RECORD}`, { method: 'PUT', headers: { authorization: bearer }, json: { teamName: 'Support', data: {} } }))
  expect(put.status).toBe(201)
})

/** The record the deletion deletes and the restore brings back, so that every other record operation finds its own. */
const RECORDS = '/v1/project/Acme/environment/production/collection/orders/records'
const DELETED_RECORD = 'conformance_deleted'
const RECORD_PATH = '/v1/project/{projectName}/environment/{environmentName}/collection/{collectionName}/records/{recordId}'
const PATH_VALUES: Record<string, Record<string, string>> = {
  [`DELETE ${RECORD_PATH}`]: { recordId: DELETED_RECORD },
  [`POST ${RECORD_PATH}/restore`]: { recordId: DELETED_RECORD },
}
afterAll(() => env.cleanup())

const operations = (): Operation[] => operationsOf(doc)
const bodySchemaOf = (operation: Json): Json | undefined => bodySchemaOfDoc(doc, operation)

/** The value a path parameter takes: a real one by its name (an `id` by the collection before it). */
function pathValue(path: string, name: string): string {
  const value = fixtureValue(known, path, name)
  if (value === undefined) throw new Error(`no known value for path parameter ${name} of ${path}`)
  return value
}

/** Switches kept as the fixture has them (SSO on would refuse the test's token for every later call). */
const knownFlags: Record<string, boolean> = { sso: false, deactivated: false, instanceAdmin: false }

/** Names that do not exist yet, for the operations that create one (the first valid call creates it, later ones 409). */
const NEW_NAMES: Record<string, Json> = {
  'POST /v1/instance/users': { email: 'conformance@example.com' },
  'POST /v1/project/{projectName}/environments': { environmentName: 'conformance' },
  'POST /v1/project/{projectName}/teams': { teamName: 'conformance' },
  'POST /v1/project/{projectName}/collections': { collectionName: 'conformance' },
  // A field list the schema's own rules accept (what a select or relation field needs is beyond its JSON schema).
  'PUT /v1/project/{projectName}/collections/{collectionName}/schema': { fields: [{ name: 'conformance', type: 'text' }] },
  // Events the schema-less `orders` takes: `fields` only on recordUpdated, no `where` (filters need a schema).
  'PUT /v1/project/{projectName}/environment/{environmentName}/team/{teamName}/workflows/{workflowName}/events': { on: [{ event: 'recordUpdated', fields: ['status'] }], where: {} },
  // A definition on the fixture's collection (its nested `collection` is not a top-level field the known names fill in).
  'POST /v1/project/{projectName}/environment/{environmentName}/team/{teamName}/workflows/{workflowName}/dry-run': { definition: { collection: 'orders', steps: [{ type: 'load' }] } },
}

/** Real names (and switches) where the body has fields of those names (top level); the rest as generated. */
function withKnownFields(schema: Json, value: unknown): unknown {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return value
  const properties = (schema.properties ?? {}) as Record<string, Json>
  return Object.fromEntries(
    Object.entries(value).map(([key, v]) => {
      if (key in known && properties[key]?.type === 'string') return [key, known[key]]
      if (key in knownFlags && properties[key]?.type === 'boolean') return [key, knownFlags[key]]
      return [key, v]
    }),
  )
}

interface Call {
  path?: Record<string, string>
  query?: Record<string, string>
  body?: unknown
}

async function send({ path, method, operation }: Operation, call: Call): Promise<{ response: Response; text: string }> {
  const pathParams = { ...Object.fromEntries(parametersOf(operation, 'path').map((p) => [p.name, pathValue(path, p.name)])), ...PATH_VALUES[`${method.toUpperCase()} ${path}`] }
  const url = path.replace(/\{([^}]+)\}/g, (_, name: string) => encodeURIComponent({ ...pathParams, ...call.path }[name]!))
  const query = new URLSearchParams(call.query ?? {}).toString()
  // Instance administration is for an instance administrator's session; everything else for the token.
  const headers: Record<string, string> = /^\/v1\/(instance\/|projects$)/.test(path) ? { cookie: instanceCookie } : { authorization: bearer }
  const init: RequestInit & { json?: unknown } = { method: method.toUpperCase(), headers }
  if (call.body !== undefined) init.json = call.body
  // A records import's body is CSV (its only body that is not JSON): a header and one record.
  const csv = Object.keys(operation.requestBody?.content ?? {}).includes('text/csv')
  if (csv) Object.assign(init, { body: 'id\nconformance_1\n', headers: { ...headers, 'content-type': 'text/csv' } })
  const response = await app.handle(request(query ? `${url}?${query}` : url, init))
  return { response, text: response.headers.get('content-type')?.startsWith('text/event-stream') ? await streamStart(response) : await response.text() }
}

/** An event stream's first 100 ms (it may never end), then the client goes away. */
async function streamStart(response: Response): Promise<string> {
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  let text = ''
  const until = performance.now() + 100
  for (let left = 100; left > 0; left = until - performance.now()) {
    const chunk = await Promise.race([reader.read(), Bun.sleep(left).then(() => null)])
    if (chunk === null || chunk.done) break
    text += decoder.decode(chunk.value, { stream: true })
  }
  await reader.cancel()
  return text
}

/** The answer matches the document: a documented status, never 5xx, and the documented body for it. */
function expectDocumented(op: Operation, label: string, response: Response, text: string): void {
  const where = `${op.method.toUpperCase()} ${op.path} (${label}) → ${response.status}: ${text.slice(0, 300)}`
  expect(response.status, where).toBeLessThan(500)
  const documented = op.operation.responses[String(response.status)] as Json | undefined
  expect(documented, `${where}: status not documented`).toBeDefined()
  const content = documented!.content as Record<string, Json> | undefined
  if (!content) {
    expect(text, `${where}: documented without a body`).toBe('')
    return
  }
  const [mediaType, { schema }] = Object.entries(content)[0]!
  expect(response.headers.get('content-type') ?? '', where).toStartWith(mediaType)
  if (mediaType !== 'application/json') return
  const validate = compile(deref(schema, doc.components.schemas))
  const body = JSON.parse(text) as unknown
  expect(validate(body) ? [] : validate.errors, where).toEqual([])
}

/** A broken rule is a 400 naming the field, in plain words. */
function expectRefused(op: Operation, label: string, field: string, response: Response, text: string): void {
  expectDocumented(op, label, response, text)
  const where = `${op.method.toUpperCase()} ${op.path} (${label}) → ${response.status}: ${text.slice(0, 300)}`
  expect(response.status, where).toBe(400)
  const body = JSON.parse(text) as { message: string; details?: { field: string; message: string }[] }
  // The field itself, or the field holding it (a list refused for one of its items).
  const names = (named: string) => field === named || field.startsWith(`${named}.`) || field.startsWith(`${named}[`)
  const named = body.details?.some((d) => names(d.field)) || names(/Invalid [a-z ]+ '([^']+)'/.exec(body.message)?.[1] ?? '') || body.message.includes(`'${field}'`)
  expect(named, `${where}: does not name ${field}`).toBe(true)
  for (const message of [body.message, ...(body.details ?? []).map((d) => d.message)]) expect(message, where).not.toMatch(TYPEBOX_WORDING)
}

describe('the document declares what the server accepts', () => {
  test('integers are integers: no "string or integer" with a default of 0, no id typed as a string', () => {
    const offenders: string[] = []
    const walk = (node: unknown, at: string) => {
      if (Array.isArray(node)) return node.forEach((item, i) => walk(item, `${at}/${i}`))
      if (node === null || typeof node !== 'object') return
      const schema = node as Json
      if (schema.type === 'string' && (schema.format === 'integer' || schema.format === 'numeric')) offenders.push(at)
      for (const [key, value] of Object.entries(schema)) walk(value, `${at}/${key}`)
    }
    walk(doc.paths, '')
    expect(offenders).toEqual([])
    const ids = operations().flatMap(({ operation }) => ((operation.parameters ?? []) as Json[]).filter((p) => /^(id|userId)$/.test(p.name)))
    expect(ids.length).toBeGreaterThan(5)
    for (const id of ids) expect(id.schema).toEqual({ type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER })
  })

  test('every request body field has a type, and every object says which fields it requires', () => {
    const untyped: string[] = []
    const walk = (schema: Json, at: string) => {
      if (Array.isArray(schema.anyOf)) return (schema.anyOf as Json[]).forEach((member, i) => walk(member, `${at}|${i}`))
      if (schema.type === undefined && schema.const === undefined) untyped.push(at)
      for (const [name, property] of Object.entries((schema.properties ?? {}) as Record<string, Json>)) walk(property, `${at}.${name}`)
      if (schema.type === 'object' && schema.properties && !Array.isArray(schema.required) && Object.keys(schema.properties).length > 0) {
        // Every field optional is a statement too: then the object sets a minimum of fields, or none is needed.
        if (schema.minProperties === undefined && at.split('.').length === 1) untyped.push(`${at} (no required list)`)
      }
      if (schema.type === 'array' && schema.items && Object.keys(schema.items).length > 0) walk(schema.items, `${at}[]`)
    }
    for (const op of operations()) {
      const schema = bodySchemaOf(op.operation)
      if (!schema) continue
      walk(schema, `${op.method.toUpperCase()} ${op.path}`)
      // Whether other fields are refused (400 unknown field) or ignored is stated, not left to a default.
      if (typeof schema.additionalProperties !== 'boolean') untyped.push(`${op.method.toUpperCase()} ${op.path} (additionalProperties unstated)`)
    }
    expect(untyped).toEqual([])
  })
})

describe('every operation answers as documented', () => {
  const generate = valueGenerators(13)

  test('valid requests, then each documented rule broken, then each maximum reached', async () => {
    const reached2xx = new Set<string>()
    let sent = 0
    for (const op of operations()) {
      const started = performance.now()
      const label = `${op.method.toUpperCase()} ${op.path}`
      const bodySchema = bodySchemaOf(op.operation)
      const queryParameters = parametersOf(op.operation, 'query')

      // Valid: required fields only, then every field (and every query parameter).
      const bodies = bodySchema
        ? [generate.minimal(bodySchema), generate.full(bodySchema)].map((body) => ({ ...(withKnownFields(bodySchema, body) as Json), ...NEW_NAMES[label] }))
        : [undefined]
      for (const [index, body] of bodies.entries()) {
        if (bodySchema) expect(valid(bodySchema, body), `${label}: generated body ${JSON.stringify(body).slice(0, 200)}`).toBe(true)
        const query = index === 0 ? {} : Object.fromEntries(queryParameters.map((p) => [p.name, String(generate.full(p.schema))]))
        const { response, text } = await send(op, { body, query })
        sent++
        expectDocumented(op, `valid #${index}`, response, text)
        if (response.status < 300) reached2xx.add(label)
      }
      const base = bodies[bodies.length - 1]

      // Path and query parameters: each rule broken (the values travel as text).
      for (const where of ['path', 'query'] as const) {
        for (const parameter of parametersOf(op.operation, where)) {
          const sample = where === 'path' ? Number.isNaN(Number(pathValue(op.path, parameter.name))) ? pathValue(op.path, parameter.name) : Number(pathValue(op.path, parameter.name)) : generate.full(parameter.schema)
          for (const mutation of mutations(parameter.schema, sample, valid)) {
            const text = String(mutation.value)
            if (valid(parameter.schema, text) || (parameter.schema.type === 'integer' && valid(parameter.schema, Number(text)) && /^\d+$/.test(text))) continue
            if (where === 'path' && text === '') continue // an empty segment is another route
            const call: Call = { body: base, [where]: { [parameter.name]: text } }
            const { response, text: answer } = await send(op, call)
            sent++
            expectRefused(op, `${where} ${parameter.name}: ${mutation.rule}`, parameter.name, response, answer)
          }
        }
      }

      if (!bodySchema) continue
      // Body: each rule broken, kept when the document agrees it is broken. The required fields on the minimal
      // body; each optional field on the minimal body plus that field alone (two optional fields may exclude
      // each other, like a token's `scopes` and `preset`).
      const minimal = bodies[0] as Json
      const optional = Object.keys(base as Json).filter((name) => !(name in minimal))
      const broken = [
        ...mutations(bodySchema, minimal, valid),
        ...optional.flatMap((name) =>
          mutations(bodySchema, { ...minimal, [name]: (base as Json)[name] }, valid).filter((m) => m.field === name || m.field.startsWith(`${name}.`) || m.field.startsWith(`${name}[`)),
        ),
      ]
      for (const mutation of broken) {
        if (valid(bodySchema, mutation.value)) continue
        const { response, text } = await send(op, { body: mutation.value })
        sent++
        expectRefused(op, `body ${mutation.field}: ${mutation.rule}`, mutation.field || 'body', response, text)
      }
      // Body: each string at its maximum fits within the body limit.
      for (const maximum of atMaximum(bodySchema, base)) {
        const { response, text } = await send(op, { body: maximum.value })
        sent++
        expect(response.status, `${label}: ${maximum.field} at its maximum → ${text.slice(0, 200)}`).not.toBe(413)
        expectDocumented(op, `${maximum.field} at its maximum`, response, text)
      }
      if (process.env.TIMING) console.log(label, Math.round(performance.now() - started))
    }
    expect(sent).toBeGreaterThan(300)
    // Every operation succeeded at least once, but the first-start page's POST (the instance is set up already).
    const never = operations()
      .map((op) => `${op.method.toUpperCase()} ${op.path}`)
      .filter((label) => !reached2xx.has(label))
    expect(never).toEqual(['POST /setup'])
  }, 120_000)
})
