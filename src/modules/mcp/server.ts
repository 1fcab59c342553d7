/**
 * The SDK's side of `POST /mcp` (./index.ts, which keeps the HTTP side: the request's `Accept`, the transport's
 * refusals and a failed tool's error body): a server and a transport made for one POST. Imported at the first POST,
 * not at start: the SDK, the schema libraries it brings (zod, ajv) and the tool table held megabytes of an idle
 * server's memory (docs/performance.md, "Idle memory").
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js'
import {
  CallToolRequestSchema,
  type CallToolResult,
  ErrorCode,
  InitializeRequestSchema,
  isJSONRPCRequest,
  type JSONRPCErrorResponse,
  type JSONRPCMessage,
  ListToolsRequestSchema,
  PingRequestSchema,
} from '@modelcontextprotocol/sdk/types.js'
import pkg from '../../../package.json' with { type: 'json' }
import type { AppDeps } from '../../deps.ts'
import { hasScope } from '../../lib/access.ts'
import type { TokenIdentity } from '../../lib/callers.ts'
import { authorizeToken } from '../auth/service.ts'
import { TOOL_ANSWERS } from './model.ts'
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

/** A schema of the SDK's, as far as checking a request with it goes. */
interface RequestSchema {
  safeParse(value: unknown): { success: boolean; error?: { issues: { path: PropertyKey[]; message: string }[] } }
}

/** The requests this server answers, each with the SDK's schema (its params checked). */
const REQUEST_SCHEMAS = new Map<string, RequestSchema>([
  ['initialize', InitializeRequestSchema],
  ['ping', PingRequestSchema],
  ['tools/list', ListToolsRequestSchema],
  ['tools/call', CallToolRequestSchema],
])

/**
 * A JSON-RPC error answer: its message said once. (The SDK's McpError puts "MCP error <code>: " in its message, and
 * the client's puts it there again.)
 */
function protocolError(code: ErrorCode, message: string): Error & { code: ErrorCode } {
  return Object.assign(new Error(message), { code })
}

/** The -32602 (invalid params) answer to a request whose params its method's schema refuses, naming what is wrong; else null. */
function invalidParamsAnswer(message: JSONRPCMessage): JSONRPCErrorResponse | null {
  if (!isJSONRPCRequest(message)) return null
  const issue = REQUEST_SCHEMAS.get(message.method)?.safeParse(message).error?.issues[0]
  if (!issue) return null
  return { jsonrpc: '2.0', id: message.id, error: { code: ErrorCode.InvalidParams, message: `Invalid params: ${issue.path.join('.')}: ${issue.message}` } }
}

/**
 * Answers a request whose params its method's schema refuses with -32602 itself: the SDK throws its schema's error
 * without a code, which would go out as -32603 (internal error). Wraps the transport's delivery, so that its own checks
 * of the POST (Accept, content type, protocol version) come first.
 */
function refuseInvalidParams(transport: WebStandardStreamableHTTPServerTransport): void {
  const deliver = transport.onmessage!
  transport.onmessage = (message, extra) => {
    const refusal = invalidParamsAnswer(message)
    if (refusal === null) return deliver(message, extra)
    void transport.send(refusal)
  }
}

/**
 * The arguments of the POST's `tools/call` as sent: the SDK's parsed copy leaves out a `__proto__` key, which must be
 * refused as any unknown argument is. The params fit the SDK's schema (`refuseInvalidParams`): an object, or absent.
 */
const sentArguments = (message: unknown): Record<string, unknown> => (message as { params: { arguments?: Record<string, unknown> } }).params.arguments ?? {}

/**
 * One POST's server: the tools the token's scopes reach, each call checked and made as the REST route makes it; a call
 * that throws is answered with `failed(error, tool)`. `message` is the POST's JSON-RPC message.
 */
function mcpServer(deps: AppDeps, identity: TokenIdentity, message: unknown, failed: (error: unknown, tool: string) => CallToolResult): Server {
  const server = new Server(
    { name: 'trellis', title: 'Trellis', version: pkg.version },
    {
      capabilities: { tools: {} },
      instructions:
        `Trellis project "${identity.projectName}": read notes and logs, start, follow and cancel workflow runs, and decide the tasks waiting for you, as the user of this token ` +
        '(its scopes decide which tools are listed). Tool errors carry the REST API\'s status, code and message.',
    },
  )
  const visible = (tool: Tool<unknown>) => tool.need === undefined || hasScope(identity.scopes, tool.need.scope)
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: TOOLS.filter(visible).map((tool) => DESCRIBED.get(tool)!) }))
  server.setRequestHandler(CallToolRequestSchema, async ({ params }): Promise<CallToolResult> => {
    const tool = TOOLS.find((candidate) => candidate.name === params.name)
    if (!tool) throw protocolError(ErrorCode.InvalidParams, `Unknown tool: ${params.name}`)
    try {
      // The route's own checks, in its order: the scope and role (403), then the arguments (400), then the call.
      if (tool.need) authorizeToken(identity, identity.projectName, tool.need)
      const answer = (await tool.call({ deps, identity }, tool.args.parse(sentArguments(message)))) as Record<string, unknown>
      return { content: [{ type: 'text', text: JSON.stringify(answer) }], structuredContent: answer }
    } catch (error) {
      return failed(error, tool.name)
    }
  })
  return server
}

/**
 * The transport's answer to one POST's JSON-RPC message (its body already parsed and checked) from the token's own
 * server; a failed tool call is answered with `failed(error, tool)`.
 */
export async function transportAnswer(
  deps: AppDeps,
  identity: TokenIdentity,
  request: Request,
  body: unknown,
  failed: (error: unknown, tool: string) => CallToolResult,
): Promise<Response> {
  const server = mcpServer(deps, identity, body, failed)
  const transport = new WebStandardStreamableHTTPServerTransport({ enableJsonResponse: true })
  await server.connect(transport)
  refuseInvalidParams(transport)
  try {
    return await transport.handleRequest(request, { parsedBody: body })
  } finally {
    await server.close()
  }
}
