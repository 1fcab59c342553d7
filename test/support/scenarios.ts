/**
 * API scenario tables: one row per request and the status (and error code, named field, body part, headers) it must
 * get, run by one runner. A module's file keeps its own `send` (the one that validates bodies against the
 * compatibility document where the module has one) and hands it to `scenarios`.
 */
import { expect, test } from 'bun:test'
import { request } from '../helpers.ts'
import type { ErrorObject } from './compat-schema.ts'

/** A response as the tests read it: status, headers and the parsed JSON body. */
export interface Sent<T = unknown> {
  status: number
  headers: Headers
  body: T
}

/** A request through the app as the tests read its answer: never a 5xx, the body parsed (an empty one as `{}`). */
export async function sendTo(app: { handle(r: Request): Promise<Response> }, req: Request): Promise<Sent<Record<string, unknown>>> {
  const response = await app.handle(req)
  const text = await response.text()
  expect(response.status, text).toBeLessThan(500)
  return { status: response.status, headers: response.headers, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} }
}

/**
 * A 4xx body of DESIGN §5 whose `code` is `code`, with an `error` and a non-empty `message`; when `field` is given,
 * the message names it quoted (so that `id` is not found inside "Invalid") and so do the details when there are any.
 */
export function expectError(sent: Sent<unknown>, status: number, code: string, field?: string): ErrorObject & Record<string, unknown> {
  const body = sent.body as ErrorObject & Record<string, unknown>
  expect({ status: sent.status, code: body?.code }).toEqual({ status, code })
  expect(typeof body.error).toBe('string')
  expect(body.message.length).toBeGreaterThan(0)
  if (field !== undefined) {
    expect(body.message).toContain(`'${field}'`)
    if (body.details) expect(body.details.map((d) => d.field)).toContain(field)
  }
  return body
}

/**
 * DESIGN §5 on a raw Response: JSON, a string `error`, `code` and non-empty `message`, the status and (when given)
 * the code; beyond those three keys only `details` (validation) and `retry_after` (429) — exactly `extras` when given.
 */
export async function expectErrorResponse(response: Response, status: number, code?: string, extras?: string[]): Promise<ErrorObject> {
  const text = await response.text()
  expect({ status: response.status, text }).toMatchObject({ status })
  expect(response.headers.get('content-type')).toStartWith('application/json')
  const body = JSON.parse(text) as ErrorObject
  expect(typeof body.error).toBe('string')
  expect(typeof body.code).toBe('string')
  expect(typeof body.message).toBe('string')
  expect(body.message.length).toBeGreaterThan(0)
  if (code !== undefined) expect(body.code).toBe(code)
  const beyond = Object.keys(body).filter((k) => !['error', 'code', 'message'].includes(k))
  if (extras !== undefined) expect(beyond).toEqual(extras)
  else expect(beyond.filter((k) => !['details', 'retry_after'].includes(k))).toEqual([])
  return body
}

export interface ScenarioRequest {
  method?: string
  path: string
  headers?: Record<string, string>
  /** Sent as JSON. */
  body?: unknown
  /** Sent as it is instead (with the row's headers: give the content-type). */
  raw?: string
}

export interface Scenario {
  name: string
  /** A function when the request needs values that exist only once the fixture is built (tokens, ids, sessions). */
  request: ScenarioRequest | (() => ScenarioRequest | Promise<ScenarioRequest>)
  status: number
  /** The DESIGN §5 error code: the body is checked with `expectError`; `null`: the body carries no `code`. */
  code?: string | null
  /** The field or parameter the error must name (with `code`). */
  field?: string
  /** A part of the body that must match (`toMatchObject`). */
  body?: Record<string, unknown>
  /** Response headers that must have these values (`null`: absent). */
  headers?: Record<string, string | null>
  /** What the original test said of the body that a part match cannot (a message built from the details, …). */
  check?: (body: ErrorObject) => void
}

/** One test per row: sends the row's request with `send` and checks status, code and field, body part and headers. */
export function scenarios<R extends Scenario>(rows: readonly R[], send: (req: Request, row: R) => Promise<Sent<unknown>>): void {
  test.each(rows.map((row) => [row.name, row] as const))('%s', async (_, row) => {
    const spec = typeof row.request === 'function' ? await row.request() : row.request
    const init = spec.raw === undefined ? { json: spec.body } : { body: spec.raw }
    const sent = await send(request(spec.path, { method: spec.method ?? 'GET', headers: spec.headers, ...init }), row)
    if (typeof row.code === 'string') expectError(sent, row.status, row.code, row.field)
    else expect({ status: sent.status, body: sent.body }).toMatchObject({ status: row.status })
    if (row.code === null) expect((sent.body as { code?: unknown } | null)?.code ?? null).toBeNull()
    if (row.body !== undefined) expect(sent.body).toMatchObject(row.body)
    if (row.headers !== undefined) {
      for (const [name, value] of Object.entries(row.headers)) expect({ name, value: sent.headers.get(name) }).toEqual({ name, value })
    }
    row.check?.(sent.body as ErrorObject)
  })
}

/** `limit` values every list refuses (1–100 in plain decimal digits only). */
export const BAD_LIMITS = ['0', '101', '-1', 'abc', '1.5', '1e1', '+5', '0x10', '1000000000000000000000', ' ']

/**
 * A row for a query the API must refuse: 400 invalid_parameter naming `name`. `at` gives the request for a query
 * (called when the row runs); the query is `name=value` unless `query` says otherwise, `note` adds to the row's name.
 */
export function badParameter(
  at: (query: Record<string, string> | string) => ScenarioRequest,
  name: string,
  value: string,
  query: Record<string, string> | string = { [name]: value },
  note = '',
): Scenario {
  const shown = value.length > 40 ? `${value.slice(0, 20)}…(${value.length} characters)` : value
  return { name: `${name}=${JSON.stringify(shown)}${note} → 400 invalid_parameter naming ${name}`, request: () => at(query), status: 400, code: 'invalid_parameter', field: name }
}
