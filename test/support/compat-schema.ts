/**
 * The wire-compatibility document (DESIGN intro, "Wire compatibility") as ajv validators.
 *
 * The OpenAPI file is a verbatim copy of `spec/forest-public-api-openapi.json` kept in the repo at
 * `test/fixtures/` (CI runs on a clean clone where the shared spec folder is absent).
 *
 * What this does to a COPY of each response schema before compiling it:
 * - inlines every `$ref: '#/components/schemas/…'` (the document has no recursive schemas);
 * - drops the OpenAPI 3.0 boolean `exclusiveMinimum` / `exclusiveMaximum` (DESIGN: its `limit` text says
 *   "between 1 and 100", so 1 is valid);
 *
 * Nothing else is relaxed: DESIGN's other quirk (admin-log `environment` requires `codeCustomizationVersion`) is met
 * by Trellis sending 0, and Trellis's extension values (DESIGN §7) are never added to an enum — bodies without
 * `extensions=true` must validate against the document as published.
 * ajv runs with `strict: false` so OpenAPI annotations (`example`, …) are ignored.
 */
import Ajv, { type ValidateFunction } from 'ajv'
import addFormats from 'ajv-formats'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'

export const COMPAT_DOCUMENT_PATH = join(import.meta.dir, '..', 'fixtures', 'forest-public-api-openapi.json')

type Json = null | boolean | number | string | Json[] | { [key: string]: Json }
type JsonObject = { [key: string]: Json }

interface OpenApiDocument {
  paths: Record<string, Record<string, { operationId?: string; responses?: Record<string, { content?: Record<string, { schema?: JsonObject }> }> }>>
  components?: { schemas?: Record<string, JsonObject> }
}

let documentCache: OpenApiDocument | undefined

export function compatDocument(): OpenApiDocument {
  documentCache ??= JSON.parse(readFileSync(COMPAT_DOCUMENT_PATH, 'utf8')) as OpenApiDocument
  return documentCache
}

/** `'200'`, `'429'`, `'4XX'`, `'5XX'`, or a numeric status (400 → `'4XX'` when there is no exact key). */
/** Trellis's error body as the tests read it (DESIGN §5): the document's `code` + `message`, and `error`. */
export interface ErrorObject {
  error: string
  code: string
  message: string
  details?: { field: string; message: string }[]
  retry_after?: number
}

export type ResponseStatus = number | string

export interface SchemaOptions {
  /** A JSON pointer to a sub-schema to validate instead of the whole body, e.g. `/properties/data/items`. */
  at?: string
}

function operation(operationId: string) {
  for (const methods of Object.values(compatDocument().paths)) {
    for (const op of Object.values(methods)) if (op.operationId === operationId) return op
  }
  throw new Error(`no operation ${operationId} in the compatibility document`)
}

function responseKey(responses: Record<string, unknown>, status: ResponseStatus): string {
  const exact = String(status)
  if (exact in responses) return exact
  if (typeof status === 'number') {
    const range = `${String(status)[0]}XX`
    if (range in responses) return range
  }
  throw new Error(`no response ${exact} (have ${Object.keys(responses).join(', ')})`)
}

const clone = <T>(value: T): T => structuredClone(value)

/** Deep copy with local `$ref`s replaced by copies of their targets and boolean exclusive bounds dropped. */
function normalise(node: Json, components: Record<string, JsonObject>, seen: string[] = []): Json {
  if (Array.isArray(node)) return node.map((item) => normalise(item, components, seen))
  if (node === null || typeof node !== 'object') return node
  const ref = node.$ref
  if (typeof ref === 'string') {
    const prefix = '#/components/schemas/'
    if (!ref.startsWith(prefix)) throw new Error(`unsupported $ref ${ref}`)
    const name = decodePointerToken(ref.slice(prefix.length))
    const target = components[name]
    if (!target) throw new Error(`dangling $ref ${ref}`)
    if (seen.includes(name)) throw new Error(`recursive $ref ${ref} is not supported`)
    return normalise(clone(target), components, [...seen, name])
  }
  const out: JsonObject = {}
  for (const [key, value] of Object.entries(node)) {
    if ((key === 'exclusiveMinimum' || key === 'exclusiveMaximum') && typeof value === 'boolean') continue
    out[key] = normalise(value, components, seen)
  }
  return out
}

function decodePointerToken(token: string): string {
  return token.replace(/~1/g, '/').replace(/~0/g, '~')
}

function resolvePointer(root: Json, pointer: string): Json {
  if (pointer === '' || pointer === '/') return root
  if (!pointer.startsWith('/')) throw new Error(`JSON pointer must start with '/': ${pointer}`)
  let node: Json = root
  for (const raw of pointer.slice(1).split('/')) {
    const token = decodePointerToken(raw)
    if (node === null || typeof node !== 'object' || !(token in node)) throw new Error(`JSON pointer ${pointer} does not resolve (at ${token})`)
    node = Array.isArray(node) ? node[Number(token)]! : node[token]!
  }
  return node
}

/** The response schema of an operation, normalised (a fresh copy every call: safe to mutate). */
export function schemaFor(operationId: string, status: ResponseStatus, options: SchemaOptions = {}): JsonObject {
  const op = operation(operationId)
  const responses = op.responses ?? {}
  const response = responses[responseKey(responses, status)]
  const schema = response?.content?.['application/json']?.schema
  if (!schema) throw new Error(`${operationId} ${status}: no application/json schema`)
  const components = compatDocument().components?.schemas ?? {}
  const normalised = normalise(clone(schema), components) as JsonObject
  if (options.at === undefined) return normalised
  const sub = resolvePointer(normalised, options.at)
  if (sub === null || typeof sub !== 'object' || Array.isArray(sub)) throw new Error(`${options.at} is not a schema`)
  return sub
}

let ajvInstance: Ajv | undefined

function ajv(): Ajv {
  if (!ajvInstance) {
    ajvInstance = new Ajv({ strict: false, allErrors: true, validateFormats: true })
    addFormats(ajvInstance)
  }
  return ajvInstance
}

const validators = new Map<string, ValidateFunction>()

/** An ajv validate function for one response of one operation (cached per operation/status/options). */
export function validatorFor(operationId: string, status: ResponseStatus, options: SchemaOptions = {}): ValidateFunction {
  const key = JSON.stringify([operationId, String(status), options.at ?? ''])
  let validate = validators.get(key)
  if (!validate) {
    validate = ajv().compile(schemaFor(operationId, status, options))
    validators.set(key, validate)
  }
  return validate
}

/** Human-readable ajv errors (for assertion messages). */
export function describeErrors(validate: ValidateFunction): string {
  return ajv().errorsText(validate.errors, { separator: '\n' })
}

/** Throws with every schema error when `body` does not validate; returns `body` for chaining. */
export function assertValid<T>(validate: ValidateFunction, body: T, label = 'body'): T {
  if (!validate(body)) throw new Error(`${label} does not match the compatibility schema:\n${describeErrors(validate)}\n${JSON.stringify(body, null, 2).slice(0, 4000)}`)
  return body
}

/**
 * DESIGN §7's extension values: what Trellis records that the document's enums lack, per operation and field.
 * They may appear only in answers to `extensions=true`; the test-side statement of docs/api.md's list.
 */
export const EXTENSION_VALUES: Record<'listActivityLogs' | 'listAdminLogs', Record<string, readonly string[]>> = {
  listActivityLogs: { action: ['updateNote', 'archiveNote', 'unarchiveNote', 'failWorkflow', 'retryWorkflow', 'closeTask'] },
  listAdminLogs: {
    resource: ['user', 'api-token', 'workflow', 'workflow-webhook', 'workflow-callback', 'workflow-schedule', 'workflow-events', 'log-retention', 'project', 'collection', 'invitation', 'outbound-allow'],
    initiator: ['system'],
  },
}

/**
 * DESIGN §15's extension fields, on every entry of a page asked for with `extensions=true`: the entry's link in its
 * hash chain (docs/audit.md), each checked for its shape.
 */
export const EXTENSION_FIELDS: Record<string, (value: unknown) => boolean> = {
  chain: (value) => {
    const link = value as { position?: unknown; hash?: unknown } | null
    return (
      typeof link === 'object' && link !== null && Object.keys(link).sort().join() === 'hash,position' &&
      Number.isInteger(link.position) && (link.position as number) >= 1 && typeof link.hash === 'string' && /^[0-9a-f]{64}$/.test(link.hash)
    )
  },
}

/**
 * A page asked for with `extensions=true`, validated against the UNMODIFIED document: every error must be an
 * `enum` error on an entry's extension field (`/data/3/action`) holding one of that field's DESIGN §7 values, or an
 * extension field (`chain`: `EXTENSION_FIELDS`) of the right shape. Anything else (another field, another value, a shape error in an extension entry) fails. Returns how many
 * entries are extensions.
 */
export function assertValidWithExtensions(operationId: keyof typeof EXTENSION_VALUES, body: unknown, label = 'body'): number {
  const validate = validatorFor(operationId, 200)
  if (validate(body)) return 0
  const data = (body as { data?: Record<string, unknown>[] }).data ?? []
  const extensionEntries = new Set<number>()
  const unexplained = (validate.errors ?? []).filter((error) => {
    const entry = /^\/data\/(\d+)$/.exec(error.instancePath)
    if (error.keyword === 'additionalProperties' && entry) {
      const field = (error.params as { additionalProperty: string }).additionalProperty
      return !(field in EXTENSION_FIELDS && EXTENSION_FIELDS[field]!(data[Number(entry[1])]?.[field]))
    }
    const match = /^\/data\/(\d+)\/(\w+)$/.exec(error.instancePath)
    if (error.keyword !== 'enum' || !match) return true
    const allowed = EXTENSION_VALUES[operationId][match[2]!]
    const value = data[Number(match[1])]?.[match[2]!]
    if (!allowed || typeof value !== 'string' || !allowed.includes(value)) return true
    extensionEntries.add(Number(match[1]))
    return false
  })
  if (unexplained.length > 0) {
    throw new Error(`${label} (extensions=true) does not match the compatibility schema beyond DESIGN §7's extensions:\n${ajv().errorsText(unexplained, { separator: '\n' })}\n${JSON.stringify(body, null, 2).slice(0, 4000)}`)
  }
  return extensionEntries.size
}
