/**
 * The audit trail's routes (docs/audit.md): `GET /v1/audit/public-key` (no authentication: the key checkpoints are
 * verified with, as a JWK) and `GET /v1/project/{p}/audit/export` (project admins: the signed export of one log, JSON
 * Lines, streamed page by page).
 */
import { Elysia, t } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { authPlugin } from '../../http/auth-plugin.ts'
import { errorResponses } from '../../http/errors.ts'
import { invalidParameter, queryOf } from '../../http/list.ts'
import { textResponseDetail } from '../../http/openapi.ts'
import { read } from '../../db/read.ts'
import { auditSigningKey } from '../../lib/audit-key.ts'
import { requireProjectAdmin } from '../auth/service.ts'
import { ExportOptionError, exportLines, exportScope } from './export.ts'

export const AuditPublicKey = t.Object(
  {
    kty: t.Literal('OKP'),
    crv: t.Literal('Ed25519'),
    x: t.String({ description: 'The raw public key, base64url' }),
    kid: t.String({ description: 'The key id every checkpoint names: the first 16 hex digits of SHA-256 of the raw key' }),
  },
  { $id: 'AuditPublicKey', additionalProperties: false },
)

const EXPORT_PARAMETERS = [
  { name: 'log', in: 'query', required: false, schema: { type: 'string', enum: ['activity', 'admin'] }, description: 'Which log: an environment\'s activity log (the default when `environment` is given), or the project\'s admin log (the default without it)' },
  { name: 'environment', in: 'query', required: false, schema: { type: 'string' }, description: 'The environment (required for `log=activity`, refused for `admin`)' },
  { name: 'from', in: 'query', required: false, schema: { type: 'string', format: 'date-time' }, description: 'Entries created at or after this time' },
  { name: 'to', in: 'query', required: false, schema: { type: 'string', format: 'date-time' }, description: 'Entries created before this time' },
] as const

export function auditModule(deps: AppDeps) {
  const key = auditSigningKey(deps.secret)
  return new Elysia({ name: 'audit', tags: ['audit'] })
    .use(authPlugin(deps))
    .get('/v1/audit/public-key', () => key.publicJwk, {
      response: { 200: AuditPublicKey },
      detail: { operationId: 'getAuditPublicKey', summary: 'The Ed25519 public key (JWK) the audit trail\'s checkpoints and exports are signed with', security: [] },
    })
    .get(
      '/v1/project/:projectName/audit/export',
      async ({ params, request, caller }) => {
        const query = queryOf(request)
        const scope = await read(deps.store, (function* () {
          yield* requireProjectAdmin(caller, params.projectName)
          try {
            return yield* exportScope(params.projectName, { log: query.log, environment: query.environment, from: query.from, to: query.to })
          } catch (error) {
            if (error instanceof ExportOptionError) throw invalidParameter(error.option, error.rule)
            throw error
          }
        })())
        const lines = exportLines(deps.store, key, scope, () => deps.clock.now())
        const encoder = new TextEncoder()
        const body = new ReadableStream<Uint8Array>({
          async pull(controller) {
            const next = await lines.next()
            if (next.done) controller.close()
            else controller.enqueue(encoder.encode(`${next.value}\n`))
          },
          async cancel() {
            await lines.return(undefined)
          },
        })
        const name = `${scope.project}-${scope.environment ?? 'admin'}-${scope.chain.log}.jsonl`.replace(/[^\w.-]+/g, '_')
        return new Response(body, { headers: { 'content-type': 'application/x-ndjson; charset=utf-8', 'content-disposition': `attachment; filename="${name}"` } })
      },
      {
        accountCall: true,
        response: { ...errorResponses(400, 404) },
        detail: {
          operationId: 'exportAuditLog',
          summary: 'A log\'s signed export (JSON Lines: header, entries with their positions and hashes, the checkpoints covering them), for `trellis audit verify --export` (project admins)',
          parameters: EXPORT_PARAMETERS as never,
          ...textResponseDetail('application/x-ndjson', 'The export, one JSON object per line'),
        },
      },
    )
}
