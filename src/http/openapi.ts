/**
 * The OpenAPI 3.1 document (/openapi.json), generated from the routes' own schemas by @elysiajs/openapi's
 * `toOpenAPISchema`, then completed here in one pass:
 * - the responses every route shares: 500, 503 (`database_busy`, `storage_full`, `storage_read_only`, `database_unavailable`: docs/operations.md "Storage faults"), and 400/413/415 from the body rules (src/http/body.ts) on routes
 *   that take a body; those documented by hooks (`detail.responses`: the auth macros' 401/403/429), which the
 *   generator drops once a route has its own `response` schemas, and the headers of a status it answers itself (the
 *   run starts' `Idempotent-Replayed`); reason phrases as descriptions; no content for 204;
 * - request bodies as JSON only, from the route's body schema;
 * - documented query and header parameters (`detail.parameters`, e.g. the list filters, `Idempotency-Key`) next to
 *   the path parameters;
 * - every schema carrying a `$id` (the error body, the user object, notes, runs…) moved once into
 *   `components/schemas` and referenced from where it is used;
 * - info, the server (the base URL), tags, and the two security schemes the auth plugin's macros name.
 */
import { toOpenAPISchema, unwrapSchema } from '@elysiajs/openapi/openapi'
import type { AnyElysia, DocumentDecoration } from 'elysia'
import pkg from '../../package.json' with { type: 'json' }
import { RAW_BODY_PATHS } from './body.ts'
import { ErrorBodySchema } from './errors.ts'
import { reasonPhrase } from '../lib/errors.ts'
import { UNCHECKED_ANSWER } from './schemas.ts'
import { SESSION_COOKIE } from '../lib/session-cookie.ts'
import { DOCUMENTED_AS } from './params.ts'

export const OPENAPI_VERSION = '3.1.1'

/** Security requirements for routes (the auth plugin's macros set them). */
type Security = NonNullable<DocumentDecoration['security']>
export const BEARER: Security = [{ bearerAuth: [] }]
export const BEARER_OR_SESSION: Security = [{ bearerAuth: [] }, { sessionCookie: [] }]

/** One tag per module, in the order the reference shows them. */
export const TAGS = [
  { name: 'notes', description: 'Notes on records and their message threads (public API; admin role).' },
  { name: 'activity-logs', description: 'What happened to records, per environment (public API; admin role).' },
  { name: 'admin-logs', description: 'Changes to a project’s configuration (public API; admin role).' },
  { name: 'audit', description: 'The tamper-evident audit trail: the public key its checkpoints are signed with, and a log’s signed export (docs/audit.md).' },
  { name: 'webhooks', description: 'Starting a workflow run through its signed webhook URL, and the trigger settings.' },
  { name: 'runs', description: 'Workflow runs: read, cancel, retry, start by hand, list.' },
  { name: 'tasks', description: 'Tasks of task steps: the people a run asks to approve or reject, with a form; listing, reading and deciding them.' },
  { name: 'records', description: "A collection's records in an environment: listing them with typed filters, sorting and cursor paging; reading one with its ETag." },
  { name: 'callbacks', description: 'Completion callbacks: a workflow’s signed endpoints (project admins), and a run’s deliveries with their attempts.' },
  { name: 'workflows', description: 'Publishing workflow definitions.' },
  { name: 'mcp', description: 'The Model Context Protocol endpoint: the public API as tools for AI agents, with the same tokens, scopes and activity log (docs/mcp.md).' },
  { name: 'tokens', description: 'Application tokens: your own, and a project’s for its admins.' },
  { name: 'instance-administration', description: 'People (users, invitations, instance administrators) and new projects: instance administrators’ console session.' },
  { name: 'project-administration', description: 'A project’s name, SSO, environments, teams, collections, members and records: its admins and instance administrators.' },
  { name: 'auth', description: 'Console sessions (cookie) and who the caller is.' },
  { name: 'setup', description: 'First start: the one-time page that creates the first administrator.' },
  { name: 'operations', description: 'Health, readiness, Prometheus metrics and this reference.' },
]

const SECURITY_SCHEMES = {
  bearerAuth: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'trl_…',
    description:
      'An application token (`trl_` and 43 characters), shown once at creation. It belongs to one user and one project and carries scopes.',
  },
  sessionCookie: {
    type: 'apiKey',
    in: 'cookie',
    name: SESSION_COOKIE,
    description: 'The console session set by `POST /auth/login` (HttpOnly, SameSite=Lax, 7 days).',
  },
}

const description = (maxBodyBytes: number) =>
  [
    'Trellis: back-office collaboration and workflows in one executable.',
    '',
    'Errors are always `{"error", "code", "message", "details"?}` (schema `Error`); a 400 names the field or parameter and its rule.',
    'The public API (`/v1/project/…` notes and logs) takes a Bearer token and answers with `X-RateLimit-*` headers; management',
    'routes also accept the console session. Lists share one envelope `{hasMore, data, parameters}`, newest first; page with',
    `\`createdAt.lt\`. Request bodies are JSON of at most ${maxBodyBytes} bytes on this instance (413 beyond).`,
  ].join('\n')

type Json = Record<string, unknown>
type Route = AnyElysia['routes'][number]

const ERROR_REF = { $ref: '#/components/schemas/Error' }

/** The document of `app`'s routes (of the whole app: a plugin sees its root's routes once used). */
export function buildOpenApiDocument(app: AnyElysia, config: { baseUrl: string; maxBodyBytes: number }): Json {
  // Protected in the types, public at run time: the generator itself reads the routes this way.
  const routes = (app as unknown as { getGlobalRoutes(): Route[] }).getGlobalRoutes()
  const generated = toOpenAPISchema(app, { staticFile: false }, undefined, undefined, OPENAPI_VERSION)
  // A deep copy: the generator hands back pieces of the live TypeBox schemas that the validators use. The mark that
  // spares a rendered answer Elysia's check is the server's business, not the document's.
  const paths = JSON.parse(JSON.stringify(generated.paths), (key, value: unknown) => (key === UNCHECKED_ANSWER ? undefined : value)) as Record<string, Record<string, Json>>
  for (const route of routes) {
    const operation = paths[pathTemplate(route.path)]?.[route.method.toLowerCase()]
    if (operation) completeOperation(operation, route)
  }
  const schemas: Record<string, Json> = {}
  const hoisted = hoistSchemas(paths, schemas) as Json
  // Referenced by the responses added above even when no route declared an error itself.
  schemas.Error ??= (({ $id: _id, ...schema }) => schema)(JSON.parse(JSON.stringify(ErrorBodySchema)) as Json)
  return {
    openapi: OPENAPI_VERSION,
    info: { title: 'Trellis API', version: pkg.version, description: description(config.maxBodyBytes) },
    servers: [{ url: config.baseUrl }],
    tags: TAGS,
    paths: hoisted,
    components: {
      schemas: Object.fromEntries(Object.entries(schemas).sort(([a], [b]) => a.localeCompare(b))),
      securitySchemes: SECURITY_SCHEMES,
    },
  }
}

/** `/v1/hooks/:token` → `/v1/hooks/{token}` */
export function pathTemplate(path: string): string {
  return path.replace(/:([^/]+)/g, '{$1}')
}

function errorResponse(status: number) {
  return { description: reasonPhrase(status), content: { 'application/json': { schema: ERROR_REF } } }
}

/**
 * OpenAPI response objects for statuses answered by hooks rather than by the handler (the auth macros): they
 * are documented through `detail.responses`, which the completion below merges with the route's own.
 */
export function errorResponseDocs(...statuses: number[]): NonNullable<DocumentDecoration['responses']> {
  return Object.fromEntries(statuses.map((status) => [String(status), errorResponse(status)]))
}

function completeOperation(operation: Json, route: Route): void {
  // Path values are strings on the wire: a parameter that holds an integer shows the integer (DOCUMENTED_AS).
  const derived = ((operation.parameters ?? []) as Json[]).map((p) => {
    const schema = p.schema as Json | undefined
    return schema?.[DOCUMENTED_AS] ? { ...p, schema: schema[DOCUMENTED_AS] } : p
  })
  // Query parameters documented on the route: the generator keeps only those it derives from schemas.
  const documented = (route.hooks?.detail?.parameters ?? []) as Json[]
  const parameters = [...derived.filter((p) => !documented.some((d) => d.name === p.name && d.in === p.in)), ...JSON.parse(JSON.stringify(documented))]
  if (parameters.length > 0) operation.parameters = parameters

  // JSON only (the body rules refuse anything else). The generator leaves `content` empty when the app has
  // its own parser, which ours is: describe the route's body schema here.
  const body = operation.requestBody as { content?: Record<string, unknown> } | undefined
  // A body of another type (a records import's CSV) is documented by its route as it is.
  const otherMedia = body?.content !== undefined && Object.keys(body.content).some((type) => type !== 'application/json')
  if (body && !otherMedia) {
    const media = body.content?.['application/json'] ?? (route.hooks?.body ? { schema: unwrapSchema(route.hooks.body, undefined, 'input', OPENAPI_VERSION) } : undefined)
    if (media) {
      const copy = JSON.parse(JSON.stringify(media)) as { schema: Json }
      // A validated body refuses fields it does not name (createApp: `normalize: false`), unless it says otherwise.
      if (route.hooks?.body && copy.schema.type === 'object') copy.schema.additionalProperties ??= false
      body.content = { 'application/json': copy }
    }
  }

  const responses = (operation.responses ?? {}) as Record<string, Json>
  for (const [status, response] of Object.entries(route.hooks?.detail?.responses ?? {})) {
    const documented = JSON.parse(JSON.stringify(response)) as Json
    // A status the route's own schemas answer keeps their body; the hook adds what they cannot say (its headers).
    responses[status] = responses[status] ? { ...responses[status], ...(documented.headers ? { headers: documented.headers } : {}) } : documented
  }
  for (const [status, response] of Object.entries(responses)) {
    const content = response.content as Json | undefined
    // The generator renders t.Void() as `content: {type: 'void'}`; an empty answer has no content.
    if (content && typeof content.type === 'string') delete response.content
    if (typeof response.description !== 'string' || response.description.startsWith('Response for status')) {
      response.description = reasonPhrase(Number(status))
    }
  }
  if (body) {
    responses[400] ??= errorResponse(400)
    responses[413] ??= errorResponse(413)
    if (!RAW_BODY_PATHS.some((prefix) => route.path.startsWith(prefix))) responses[415] ??= errorResponse(415)
  }
  responses[500] ??= errorResponse(500)
  responses[503] ??= errorResponse(503)
  operation.responses = Object.fromEntries(Object.entries(responses).sort(([a], [b]) => a.localeCompare(b)))
}

/** Replaces every schema that has a `$id` with a `$ref`, keeping one copy of each in `schemas`. */
function hoistSchemas(node: unknown, schemas: Record<string, Json>): unknown {
  if (Array.isArray(node)) return node.map((item) => hoistSchemas(item, schemas))
  if (node === null || typeof node !== 'object') return node
  const { $id, ...rest } = node as Json
  const copy = Object.fromEntries(Object.entries(rest).map(([key, value]) => [key, hoistSchemas(value, schemas)]))
  if (typeof $id !== 'string') return copy
  const known = schemas[$id]
  if (known && JSON.stringify(known) !== JSON.stringify(copy)) throw new Error(`two different schemas are named ${$id}`)
  schemas[$id] = copy
  return { $ref: `#/components/schemas/${$id}` }
}

/** How a page, or one of its script or style files, is documented: a 200 with text of that type. */
export function textResponseDetail(type: string, description: string): DocumentDecoration {
  return { description, responses: { 200: { description, content: { [type]: { schema: { type: 'string' } } } } } }
}
