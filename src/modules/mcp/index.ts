/**
 * `POST /mcp`: a Model Context Protocol server (Streamable HTTP transport, the official SDK) whose tools are the public
 * API's operations (./tools.ts), for AI agents with an application token. Stateless: every POST is authenticated
 * anew (the `tokenCall` macro: 401 with `WWW-Authenticate: Bearer`, 403 for a deactivated user or the SSO rule) and
 * counted against the token's one API budget — over it, a tool call gets the 429 as its tool error, any other message
 * the HTTP 429 — then answered by a server and transport made
 * for it alone — no session to keep, so any instance behind a load balancer answers any call, and a revocation
 * applies to the very next call. GET and DELETE (a stream, a session to end) have nothing to serve: 405.
 */
import { Elysia } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { authPlugin } from '../../http/auth-plugin.ts'
import { errorResponses, jsonResponse } from '../../http/errors.ts'
import { McpAnswer, McpMessage, toolError } from './model.ts'

/** A `tools/call` request: over the token's budget, answered with the tool's error rather than an HTTP 429. */
function isToolCall(body: unknown): body is { id: string | number; method: 'tools/call' } {
  const message = body as { method?: unknown; id?: unknown } | null
  return typeof message === 'object' && message !== null && message.method === 'tools/call' && (typeof message.id === 'string' || typeof message.id === 'number')
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
        const { answerMcp } = await import('./server.ts')
        return answerMcp(deps, identity, request, body)
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
