/**
 * The SDK's side of `POST /mcp` (./index.ts): a server and a transport made for one POST. Imported at the first POST,
 * not at start: the SDK and the schema libraries it brings (zod, ajv) were a fifth of an idle server's memory
 * (docs/performance.md, "Idle memory").
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js'
import { CallToolRequestSchema, type CallToolResult, ErrorCode, ListToolsRequestSchema, McpError } from '@modelcontextprotocol/sdk/types.js'
import pkg from '../../../package.json' with { type: 'json' }
import type { AppDeps } from '../../deps.ts'
import { asHttpError, errorBody, jsonResponse } from '../../http/errors.ts'
import { hasScope } from '../../lib/access.ts'
import type { TokenIdentity } from '../../lib/callers.ts'
import { authorizeToken } from '../auth/service.ts'
import { TOOL_ANSWERS, toolError } from './model.ts'
import { plainSchema, type Tool, TOOLS } from './tools.ts'

/** What tools/list shows of each tool, made once (the schemas do not change). */
const DESCRIBED = new Map(
  TOOLS.map((tool) => [
    tool,
    {
      name: tool.name,
      title: tool.title,
      description: tool.description,
      inputSchema: tool.args.schema as { type: 'object' },
      outputSchema: plainSchema(TOOL_ANSWERS[tool.name]) as { type: 'object' },
    },
  ]),
)

/** One POST's server: the tools the token's scopes reach, each call checked and made as the REST route makes it. */
function mcpServer(deps: AppDeps, identity: TokenIdentity): Server {
  const server = new Server(
    { name: 'trellis', title: 'Trellis', version: pkg.version },
    {
      capabilities: { tools: {} },
      instructions:
        `Trellis project "${identity.projectName}": read notes and logs, and start, follow and cancel workflow runs, as the user of this token ` +
        '(its scopes decide which tools are listed). Tool errors carry the REST API\'s status, code and message.',
    },
  )
  const visible = (tool: Tool<unknown>) => tool.need === undefined || hasScope(identity.scopes, tool.need.scope)
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: TOOLS.filter(visible).map((tool) => DESCRIBED.get(tool)!) }))
  server.setRequestHandler(CallToolRequestSchema, async ({ params }): Promise<CallToolResult> => {
    const tool = TOOLS.find((candidate) => candidate.name === params.name)
    if (!tool) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${params.name}`)
    try {
      // The route's own checks, in its order: the scope and role (403), then the arguments (400), then the call.
      if (tool.need) authorizeToken(identity, identity.projectName, tool.need)
      const answer = (await tool.call({ deps, identity }, tool.args.parse(params.arguments ?? {}))) as Record<string, unknown>
      return { content: [{ type: 'text', text: JSON.stringify(answer) }], structuredContent: answer }
    } catch (error) {
      const known = asHttpError(error)
      if (known) return toolError(known.status, known.toBody())
      deps.logger.error('MCP tool failed', { tool: tool.name, error: error instanceof Error ? (error.stack ?? error.message) : String(error) })
      return toolError(500, errorBody(500, 'internal_error', 'Internal server error'))
    }
  })
  return server
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

/** Answers one POST's JSON-RPC message (its body already parsed and checked) as the token's own server. */
export async function answerMcp(deps: AppDeps, identity: TokenIdentity, request: Request, body: unknown): Promise<Response> {
  const server = mcpServer(deps, identity)
  const transport = new WebStandardStreamableHTTPServerTransport({ enableJsonResponse: true })
  await server.connect(transport)
  try {
    return await trellisAnswer(await transport.handleRequest(acceptingJson(request), { parsedBody: body }))
  } finally {
    await server.close()
  }
}
