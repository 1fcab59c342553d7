/**
 * `POST /mcp`: a Model Context Protocol server (Streamable HTTP transport, the official SDK) whose tools are the public
 * API's operations (./tools.ts), for AI agents with an application token. Stateless: every POST is authenticated
 * anew (the `tokenCall` macro: 401 with `WWW-Authenticate: Bearer`, 403 for a deactivated user or the SSO rule) and
 * counted against the token's one API budget — over it, a tool call gets the 429 as its tool error, any other message
 * the HTTP 429 — then answered by a server and transport made
 * for it alone — no session to keep, so any instance behind a load balancer answers any call, and a revocation
 * applies to the very next call. GET and DELETE (a stream, a session to end) have nothing to serve: 405.
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { Elysia } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { authPlugin } from '../../http/auth-plugin.ts'
import { asHttpError, errorBody, errorResponses, jsonResponse } from '../../http/errors.ts'
import { McpAnswer, McpMessage, toolError } from './model.ts'

/** A `tools/call` request: over the token's budget, answered with the tool's error rather than an HTTP 429. */
function isToolCall(body: unknown): body is { id: string | number; method: 'tools/call' } {
  const message = body as { method?: unknown; id?: unknown } | null
  return typeof message === 'object' && message !== null && message.method === 'tools/call' && (typeof message.id === 'string' || typeof message.id === 'number')
}

/** What the transport refuses itself (406 without `Accept` of both JSON and SSE, 400 a bad protocol version…): the one error body. */
const TRANSPORT_CODES: Record<number, string> = { 400: 'invalid_mcp_request', 406: 'not_acceptable', 415: 'unsupported_media_type' }

/**
 * The transport asks a POST to accept both JSON and an event stream; this server only ever answers JSON, so a call
 * that accepts JSON (or anything: no `Accept`, `*\/*`) is served as if it said both. Any other is the transport's 406.
 */
function acceptingJson(request: Request): Request {
  const accept = request.headers.get('accept')
  if (accept !== null && !/application\/(json|\*)|\*\/\*/i.test(accept)) return request
  const headers = new Headers(request.headers)
  headers.set('accept', 'application/json, text/event-stream')
  return new Request(request.url, { method: request.method, headers })
}

async function trellisAnswer(response: Response): Promise<Response> {
  if (response.status < 400) return response
  const refused = (await response.json().catch(() => ({}))) as { error?: { message?: string } }
  const status = response.status
  return jsonResponse(status, errorBody(status, TRANSPORT_CODES[status] ?? 'invalid_mcp_request', refused.error?.message ?? 'The MCP transport refused the request'))
}

/** A tool call that threw, as the agent reads it: a 4xx (or 503) with the REST body, anything else a logged 500. */
function toolFailure(deps: AppDeps, error: unknown, tool: string): CallToolResult {
  const known = asHttpError(error)
  if (known) return toolError(known.status, known.toBody())
  deps.logger.error('MCP tool failed', { tool, error: error instanceof Error ? (error.stack ?? error.message) : String(error) })
  return toolError(500, errorBody(500, 'internal_error', 'Internal server error'))
}

export function mcpModule(deps: AppDeps) {
  return new Elysia({ name: 'mcp', tags: ['mcp'] })
    .use(authPlugin(deps))
    .post(
      '/mcp',
      async ({ request, body, identity, overBudget, set }) => {
        if (overBudget) {
          // The same 429 as REST's (its Retry-After and X-RateLimit headers kept), where the agent reads it: the tool's answer.
          if (!isToolCall(body)) throw overBudget
          Object.assign(set.headers, overBudget.headers)
          return jsonResponse(200, { jsonrpc: '2.0', id: body.id, result: toolError(429, overBudget.toBody()) })
        }
        // The SDK's side loads here, at the first POST (./server.ts).
        const { transportAnswer } = await import('./server.ts')
        return trellisAnswer(await transportAnswer(deps, identity, acceptingJson(request), body, (error, tool) => toolFailure(deps, error, tool)))
      },
      {
        tokenCall: { holdsOverBudget: isToolCall },
        body: McpMessage,
        response: { 200: McpAnswer, ...errorResponses(406) },
        detail: {
          operationId: 'mcp',
          summary: 'Model Context Protocol (Streamable HTTP, stateless): tools for AI agents, within the token\'s scopes',
          description:
            'One JSON-RPC message per POST (initialize, notifications/initialized, tools/list, tools/call…), always answered as JSON ' +
            '(an `Accept` that excludes application/json is 406). A notification is answered 202 with no body. Every POST is ' +
            'authenticated and counted against the token\'s API rate limit like a REST call; tools/list shows only the tools the ' +
            'token\'s scopes allow. Stateless: no Mcp-Session-Id, no GET stream. docs/mcp.md lists the tools.',
          responses: { 202: { description: 'A notification, accepted (no body)' } },
        },
      },
    )
}
