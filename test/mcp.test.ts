/**
 * The MCP endpoint, spoken to by the official SDK's `Client` over its Streamable HTTP transport, against a
 * real `trellis serve` on the test store (SQLite, or PostgreSQL with TRELLIS_TEST_STORE=postgres): the protocol
 * revision, the HTTP-level answers (401 with WWW-Authenticate, 403, 405, 406, a bad message), the tools each token's
 * scopes list, each tool's answer and each of its error answers (the REST route's status and code), a trigger
 * followed by getWorkflowRun to a finished run, cancel and retry, the activity entries (the REST call's, marked
 * "via MCP" with the token), a token revoked in the middle of a session, one API budget shared with REST, and the
 * 403s of a deactivated user and of the SSO rule.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js'
import { systemClock } from '../src/lib/clock.ts'
import { updateProject } from '../src/db/projects.ts'
import { revokeToken } from '../src/modules/tokens/service.ts'
import { setUserDisabled } from '../src/modules/users/service.ts'
import { bearer, processEnv, queryAll, runNow, type ServeProcess, startServe, testApp, type TestEnv, testEnv, until } from './helpers.ts'
import { acmeDocument, acmeProject, applyAcme, ordersWorkflow, projectId, tokenFor, userId, UUID } from './support/acme.ts'
import { HIGH_API_BUDGETS } from './support/api-fixture.ts'

const receiver = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: () => new Response('no', { status: 500 }) })
afterAll(() => receiver.stop(true))

const ALL_TOOLS = [
  'listNotes', 'createNote', 'addNoteMessage', 'listActivityLogs', 'listAdminLogs',
  'listWorkflows', 'triggerWorkflow', 'getWorkflowRun', 'cancelWorkflowRun', 'retryWorkflowRun',
  'listTasks', 'getTask', 'decideTask', 'listRecords', 'getRecord', 'updateRecord',
]
const RUN_TOOLS = ['listWorkflows', 'triggerWorkflow', 'getWorkflowRun', 'cancelWorkflowRun', 'retryWorkflowRun']
const PRODUCTION = '/v1/project/Acme/environment/production'

/** Acme with these tests' workflows (Support's orders in production) and a Billing one in staging. */
async function seededEnv(settings: Record<string, string> = {}): Promise<TestEnv> {
  const env = testEnv(settings)
  const document = acmeDocument()
  const acme = acmeProject(document)
  for (const id of ['o-1', 'o-2', 'o-3', 'o-4', 'o-5', 'o-6']) acme.records!.push({ environment: 'production', collection: 'orders', id, data: {} })
  acme.workflows!.push(
    ordersWorkflow('Quick', [{ type: 'update', name: 'touch', set: { quick: 'yes' } }]),
    ordersWorkflow('Hold', [{ type: 'wait', name: 'hold', seconds: 600 }]),
    ordersWorkflow('Failing', [{ type: 'http', name: 'tell', method: 'POST', url: `http://127.0.0.1:${receiver.port}/fail`, retries: 0 }]),
    ordersWorkflow('Billing check', [{ type: 'load', name: 'read' }], { team: 'Billing', environment: 'staging' }),
    ordersWorkflow('Refund', [
      {
        type: 'task', name: 'approve', title: 'Refund {{record.id}}?', assignees: { teams: ['Billing'] }, approvals: 2,
        form: { type: 'object', properties: { amount: { type: 'number', minimum: 0, maximum: 500 } }, required: ['amount'] },
      },
      { type: 'update', name: 'stamp', set: { refunded: '{{tasks.approve.input.amount}}' } },
    ]),
  )
  await applyAcme({ store: env.store, clock: systemClock, secret: env.secret, baseUrl: env.config.baseUrl }, document)
  return env
}

/** An SDK client connected to `url` with this token (initialize and notifications/initialized done). */
async function connect(url: string, token: string): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const client = new Client({ name: 'trellis-test', version: '1.0.0' })
  const transport = new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: bearer(token) } })
  await client.connect(transport)
  return { client, transport }
}

type ToolAnswer = { isError?: boolean; structuredContent?: Record<string, any>; content: { type: string; text?: string }[] }

/** A tool's success answer (structured content, the same JSON as text). */
async function answer(client: Client, name: string, args: Record<string, unknown>): Promise<Record<string, any>> {
  const result = (await client.callTool({ name, arguments: args })) as ToolAnswer
  if (result.isError) throw new Error(`${name} failed: ${result.content[0]?.text}`)
  expect(JSON.parse(result.content[0]!.text!)).toEqual(result.structuredContent!)
  return result.structuredContent!
}

/** A tool's error answer: the REST error body with its HTTP status. */
async function refusal(client: Client, name: string, args: Record<string, unknown>): Promise<{ httpStatus: number; error: string; code: string; message: string } & Record<string, any>> {
  const result = (await client.callTool({ name, arguments: args })) as ToolAnswer
  expect(result.isError).toBe(true)
  expect(result.structuredContent).toBeUndefined()
  const body = JSON.parse(result.content[0]!.text!)
  expect(typeof body.error).toBe('string')
  expect(typeof body.message).toBe('string')
  return body
}

describe('the MCP endpoint through a real server', () => {
  let env: TestEnv
  let server: ServeProcess
  const tokens = {} as Record<'alice' | 'bob' | 'dave' | 'bobNotes' | 'aliceNotes' | 'aliceLogs' | 'aliceAdminLogs' | 'revoked' | 'bobTasks' | 'carolTasks' | 'daveTasks' | 'daveTasksRead' | 'daveRecords' | 'bobRecordsRead', string>
  let aliceName = ''
  let daveTasksName = ''
  let aliceClient: Client

  beforeAll(async () => {
    env = await seededEnv()
    const alice = await tokenFor(env.store, systemClock, 'alice', ['all'], { name: 'agent' })
    tokens.alice = alice.value
    aliceName = `token "agent" (${alice.token.prefix}…)`
    tokens.bob = (await tokenFor(env.store, systemClock, 'bob', ['workflows:trigger'])).value
    tokens.bobNotes = (await tokenFor(env.store, systemClock, 'bob', ['notes:read'])).value
    tokens.dave = (await tokenFor(env.store, systemClock, 'dave', ['workflows:trigger'])).value
    tokens.aliceNotes = (await tokenFor(env.store, systemClock, 'alice', ['notes:read'])).value
    tokens.aliceLogs = (await tokenFor(env.store, systemClock, 'alice', ['activity_logs:read'])).value
    tokens.aliceAdminLogs = (await tokenFor(env.store, systemClock, 'alice', ['admin_logs:read'])).value
    tokens.bobTasks = (await tokenFor(env.store, systemClock, 'bob', ['tasks:read', 'tasks:write'])).value
    tokens.carolTasks = (await tokenFor(env.store, systemClock, 'carol', ['tasks:read', 'tasks:write'])).value
    const daveTasks = await tokenFor(env.store, systemClock, 'dave', ['tasks:read', 'tasks:write'], { name: 'dave-agent' })
    tokens.daveTasks = daveTasks.value
    daveTasksName = `token "dave-agent" (${daveTasks.token.prefix}…)`
    tokens.daveTasksRead = (await tokenFor(env.store, systemClock, 'dave', ['tasks:read'])).value
    tokens.daveRecords = (await tokenFor(env.store, systemClock, 'dave', ['records:read', 'records:write'])).value
    tokens.bobRecordsRead = (await tokenFor(env.store, systemClock, 'bob', ['records:read'])).value
    server = await startServe({ dataDir: env.dataDir, cwd: env.dataDir, env: { ...processEnv(env), ...HIGH_API_BUDGETS, TRELLIS_LOG_LEVEL: 'warn', TRELLIS_HTTP_ALLOW: '127.0.0.1' }, timeoutMs: 20_000 })
    aliceClient = (await connect(server.url, tokens.alice)).client
  }, 60_000)

  afterAll(async () => {
    await aliceClient?.close()
    await server?.stop()
    env?.cleanup()
  })

  const post = (headers: Record<string, string>, body: unknown) =>
    fetch(`${server.url}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers }, body: JSON.stringify(body) })
  const rest = (path: string, token: string, init: RequestInit = {}) => fetch(`${server.url}${path}`, { ...init, headers: { ...bearer(token), 'content-type': 'application/json', ...init.headers } })

  test('speaks the current protocol revision, statelessly, as the Trellis server', async () => {
    const { client, transport } = await connect(server.url, tokens.alice)
    expect(transport.protocolVersion).toBe(LATEST_PROTOCOL_VERSION)
    expect(transport.sessionId).toBeUndefined()
    expect(client.getServerVersion()?.name).toBe('trellis')
    expect(client.getServerCapabilities()?.tools).toBeDefined()
    expect(client.getInstructions()).toContain('Acme')
    await client.close()
  })

  test('HTTP-level answers: 401 with WWW-Authenticate, 405 for GET and DELETE, 406 unless JSON is accepted, 400 for a bad message, 202 for a notification', async () => {
    const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 't', version: '1' } } }
    for (const headers of [{} as Record<string, string>, { authorization: 'Bearer trl_nope' }, { authorization: 'Basic abc' }]) {
      const response = await post(headers, initialize)
      expect(response.status).toBe(401)
      expect(response.headers.get('www-authenticate')).toBe('Bearer')
      expect(await response.json()).toMatchObject({ error: 'Unauthorized', code: 'unauthorized' })
    }
    await expect(connect(server.url, 'trl_nope')).rejects.toThrow(/"unauthorized"/)

    const ok = await post(bearer(tokens.alice), initialize)
    expect(ok.status).toBe(200)
    expect(ok.headers.get('mcp-session-id')).toBeNull()
    expect(ok.headers.get('x-ratelimit-limit')).toBe(HIGH_API_BUDGETS.TRELLIS_API_RATE_PER_MIN)
    expect(((await ok.json()) as any).result.protocolVersion).toBe(LATEST_PROTOCOL_VERSION)

    for (const method of ['GET', 'DELETE']) {
      const response = await fetch(`${server.url}/mcp`, { method, headers: { ...bearer(tokens.alice), accept: 'text/event-stream' } })
      expect(response.status).toBe(405)
      expect(response.headers.get('allow')).toContain('POST')
      expect(await response.json()).toMatchObject({ code: 'method_not_allowed' })
    }

    // Answers are always JSON: a client that accepts JSON is served (the transport itself asks for both JSON and SSE).
    expect((await post({ ...bearer(tokens.alice), accept: 'application/json' }, initialize)).status).toBe(200)
    const notAcceptable = await post({ ...bearer(tokens.alice), accept: 'text/html' }, initialize)
    expect(notAcceptable.status).toBe(406)
    expect(await notAcceptable.json()).toMatchObject({ error: 'Not Acceptable', code: 'not_acceptable' })

    const bad = await post(bearer(tokens.alice), { jsonrpc: '1.0', id: 1, method: 'initialize' })
    expect(bad.status).toBe(400)
    expect(await bad.json()).toMatchObject({ code: 'validation_failed', message: expect.stringContaining("'jsonrpc'") })
    const unknownField = await post(bearer(tokens.alice), { jsonrpc: '2.0', id: 1, method: 'tools/list', extra: 1 })
    expect(unknownField.status).toBe(400)

    const notification = await post(bearer(tokens.alice), { jsonrpc: '2.0', method: 'notifications/initialized' })
    expect(notification.status).toBe(202)
    expect(await notification.text()).toBe('')

    const unknownMethod = await post(bearer(tokens.alice), { jsonrpc: '2.0', id: 7, method: 'no/such' })
    expect(unknownMethod.status).toBe(200)
    expect(((await unknownMethod.json()) as any).error.code).toBe(-32601)
  })

  test('tools/list shows each token the tools its scopes allow, with input and output schemas', async () => {
    const listed = async (token: string) => {
      const { client } = await connect(server.url, token)
      const { tools } = await client.listTools()
      await client.close()
      return tools
    }
    const all = await listed(tokens.alice)
    expect(all.map((t) => t.name)).toEqual(ALL_TOOLS)
    for (const tool of all) {
      expect(tool.inputSchema.type).toBe('object')
      expect(tool.outputSchema?.type).toBe('object')
      expect(tool.description!.length).toBeGreaterThan(20)
    }
    expect(all.find((t) => t.name === 'listNotes')!.inputSchema.properties).toHaveProperty(['createdAt.lt'])
    expect(all.find((t) => t.name === 'triggerWorkflow')!.inputSchema.required).toEqual(['environment', 'team', 'workflow', 'recordId'])
    expect((await listed(tokens.bob)).map((t) => t.name)).toEqual(RUN_TOOLS)
    expect((await listed(tokens.bobNotes)).map((t) => t.name)).toEqual(['listNotes', 'getWorkflowRun'])
    expect((await listed(tokens.aliceLogs)).map((t) => t.name)).toEqual(['listActivityLogs', 'getWorkflowRun'])
    expect((await listed(tokens.aliceAdminLogs)).map((t) => t.name)).toEqual(['listAdminLogs', 'getWorkflowRun'])
    expect((await listed(tokens.daveTasksRead)).map((t) => t.name)).toEqual(['getWorkflowRun', 'listTasks', 'getTask'])
    expect((await listed(tokens.daveTasks)).map((t) => t.name)).toEqual(['getWorkflowRun', 'listTasks', 'getTask', 'decideTask'])
    expect((await listed(tokens.bobRecordsRead)).map((t) => t.name)).toEqual(['getWorkflowRun', 'listRecords', 'getRecord'])
  })

  test('a tool the token lacks the scope for is a 403 insufficient_scope; a role the route asks is checked too; an unknown tool is a protocol error', async () => {
    const { client } = await connect(server.url, tokens.bob)
    expect(await refusal(client, 'listNotes', { environment: 'production' })).toMatchObject({ httpStatus: 403, code: 'insufficient_scope' })
    expect(await refusal(client, 'createNote', { environment: 'production' })).toMatchObject({ httpStatus: 403, code: 'insufficient_scope' })
    await expect(client.callTool({ name: 'dropTables', arguments: {} })).rejects.toThrow(/Unknown tool/)
    await client.close()
    // bob is an editor: the notes routes need the admin role.
    const notes = (await connect(server.url, tokens.bobNotes)).client
    expect(await refusal(notes, 'listNotes', { environment: 'production' })).toMatchObject({ httpStatus: 403, code: 'insufficient_role' })
    await notes.close()
  })

  test('arguments named like Object.prototype members are unknown fields; arguments that are not an object, and an unknown tool, are invalid params (-32602), said once', async () => {
    for (const name of ['constructor', 'toString', '__proto__', 'hasOwnProperty', 'valueOf']) {
      // Raw JSON text: `__proto__` is an own key of the arguments, as JSON.parse makes it.
      const args = JSON.parse(`{"environment":"production",${JSON.stringify(name)}:"x"}`) as Record<string, unknown>
      expect(await refusal(aliceClient, 'listNotes', args)).toMatchObject({ httpStatus: 400, code: 'validation_failed', details: [{ field: name, message: 'unknown field' }] })
      expect(await refusal(aliceClient, 'listAdminLogs', JSON.parse(`{${JSON.stringify(name)}:"x"}`))).toMatchObject({ httpStatus: 400, details: [{ field: name, message: 'unknown field' }] })
      expect(await refusal(aliceClient, 'listWorkflows', JSON.parse(`{${JSON.stringify(name)}:"x"}`))).toMatchObject({ httpStatus: 400, code: 'validation_failed' })
    }
    const call = async (id: number, params: unknown) => {
      const response = await post(bearer(tokens.alice), { jsonrpc: '2.0', id, method: 'tools/call', params })
      expect(response.status).toBe(200)
      return (await response.json()) as { id: number; error?: { code: number; message: string }; result?: unknown }
    }
    for (const [id, args] of [[11, 'str'], [12, 7], [13, ['environment']], [14, null]] as const) {
      const answer = await call(id, { name: 'listWorkflows', arguments: args })
      expect(answer).toMatchObject({ id, error: { code: -32602, message: expect.stringContaining('arguments') } })
      expect(answer.result).toBeUndefined()
    }
    expect(await call(15, { arguments: {} })).toMatchObject({ error: { code: -32602, message: expect.stringContaining('name') } })
    const unknown = await call(16, { name: 'dropTables', arguments: {} })
    expect(unknown.error).toEqual({ code: -32602, message: 'Unknown tool: dropTables' })
    // The SDK's client puts the prefix in front of the server's message: once.
    const thrown = await aliceClient.callTool({ name: 'dropTables', arguments: {} }).catch((error: Error) => error)
    expect((thrown as Error).message).toBe('MCP error -32602: Unknown tool: dropTables')
  })

  test('createNote, addNoteMessage and listNotes: the REST answers, and each error answer', async () => {
    const created = await answer(aliceClient, 'createNote', { environment: 'production', teamName: 'Support', collectionName: 'orders', recordId: 'o-1', title: 'From an agent', content: '<p>hi<script>x</script></p>' })
    expect(created).toMatchObject({ object: 'note', title: 'From an agent', recordId: 'o-1', team: { name: 'Support' }, messages: [{ content: '<p>hi</p>' }] })
    const replied = await answer(aliceClient, 'addNoteMessage', { environment: 'production', noteId: created.id, content: '<p>again</p>' })
    expect(replied.messages.map((m: { content: string }) => m.content)).toEqual(['<p>hi</p>', '<p>again</p>'])
    // The same note as the REST route shows it.
    expect(await (await rest(`${PRODUCTION}/notes/${created.id}`, tokens.alice)).json()).toEqual(replied)

    expect(await refusal(aliceClient, 'createNote', { environment: 'production', teamName: 'Nobody', collectionName: 'orders', recordId: 'o-1', title: 't', content: 'c' }))
      .toMatchObject({ httpStatus: 400, code: 'validation_failed', details: [{ field: 'teamName' }] })
    expect(await refusal(aliceClient, 'createNote', { environment: 'production', teamName: 'Support', collectionName: 'orders', recordId: 'o-1', content: 'c' }))
      .toMatchObject({ httpStatus: 400, code: 'validation_failed', message: expect.stringContaining("'title'") })
    expect(await refusal(aliceClient, 'createNote', { environment: 'production', teamName: 'Support', collectionName: 'orders', recordId: 'o-1', title: 't\u0000', content: 'c' }))
      .toMatchObject({ httpStatus: 400, code: 'validation_failed', details: [{ field: 'title' }] })
    expect(await refusal(aliceClient, 'createNote', { environment: 'nowhere', teamName: 'Support', collectionName: 'orders', recordId: 'o-1', title: 't', content: 'c' }))
      .toMatchObject({ httpStatus: 404, code: 'not_found' })
    expect(await refusal(aliceClient, 'createNote', { environment: 'production', teamName: 'Support', collectionName: 'orders', recordId: 'o-1', title: 't', content: 'c', extra: 1 }))
      .toMatchObject({ httpStatus: 400, details: [{ field: 'extra', message: 'unknown field' }] })
    expect(await refusal(aliceClient, 'addNoteMessage', { environment: 'production', noteId: 999_999, content: 'c' })).toMatchObject({ httpStatus: 404, code: 'not_found' })
    expect(await refusal(aliceClient, 'addNoteMessage', { environment: 'production', noteId: 0, content: 'c' })).toMatchObject({ httpStatus: 400, details: [{ field: 'noteId' }] })

    const second = await answer(aliceClient, 'createNote', { environment: 'production', teamName: 'Support', collectionName: 'orders', recordId: 'o-2', title: 'Second', content: 'c' })
    const first = await answer(aliceClient, 'listNotes', { environment: 'production', limit: 1 })
    expect(first).toMatchObject({ hasMore: true, parameters: { projectName: 'Acme', environmentName: 'production', limit: 1 } })
    expect(first.data.map((n: { id: number }) => n.id)).toEqual([second.id])
    const next = await answer(aliceClient, 'listNotes', { environment: 'production', limit: 1, 'createdAt.lt': first.data[0].createdAt })
    expect(next.data.map((n: { id: number }) => n.id)).toEqual([created.id])
    // The same page as REST's.
    expect(await (await rest(`${PRODUCTION}/notes?limit=1&recordId=o-2`, tokens.alice)).json()).toEqual(await answer(aliceClient, 'listNotes', { environment: 'production', limit: 1, recordId: 'o-2' }))
    expect(await refusal(aliceClient, 'listNotes', { environment: 'production', limit: 0 })).toMatchObject({ httpStatus: 400, code: 'invalid_parameter', message: expect.stringContaining("'limit'") })
    expect(await refusal(aliceClient, 'listNotes', { environment: 'production', 'createdAt.lt': 'yesterday' })).toMatchObject({ httpStatus: 400, code: 'invalid_parameter' })
    expect(await refusal(aliceClient, 'listNotes', { environment: 'production', userId: { id: 1 } })).toMatchObject({ httpStatus: 400, details: [{ field: 'userId' }] })
    expect(await refusal(aliceClient, 'listNotes', { environment: 'production', colour: 'red' })).toMatchObject({ httpStatus: 400, details: [{ field: 'colour', message: 'unknown field' }] })
    expect(await refusal(aliceClient, 'listNotes', {})).toMatchObject({ httpStatus: 400, details: [{ field: 'environment' }] })
    expect(await refusal(aliceClient, 'listNotes', { environment: 'nowhere' })).toMatchObject({ httpStatus: 404 })
  })

  test('listActivityLogs and listAdminLogs: the REST pages, and their error answers; each MCP write is the REST entry marked via MCP', async () => {
    const note = await answer(aliceClient, 'createNote', { environment: 'staging', teamName: 'Support', collectionName: 'orders', recordId: 'audit-1', title: 'Audited', content: 'c' })
    await answer(aliceClient, 'addNoteMessage', { environment: 'staging', noteId: note.id, content: 'more' })
    // The same two calls through REST, with the same token.
    const restNote = (await (await rest('/v1/project/Acme/environment/staging/notes', tokens.alice, { method: 'POST', body: JSON.stringify({ teamName: 'Support', collectionName: 'orders', recordId: 'audit-2', title: 'Audited', content: 'c' }) })).json()) as { id: number }
    await rest(`/v1/project/Acme/environment/staging/notes/${restNote.id}/messages`, tokens.alice, { method: 'POST', body: JSON.stringify({ content: 'more' }) })

    const page = await answer(aliceClient, 'listActivityLogs', { environment: 'staging', limit: 4 })
    expect(await (await rest('/v1/project/Acme/environment/staging/activity-logs?limit=4', tokens.alice)).json()).toEqual(page)
    const [restMessage, restCreate, mcpMessage, mcpCreate] = page.data
    const comparable = ({ id, createdAt, recordIds, label, ...entry }: Record<string, unknown>) => entry
    expect(comparable(mcpCreate)).toEqual(comparable(restCreate))
    expect(comparable(mcpMessage)).toEqual(comparable(restMessage))
    expect(mcpCreate).toMatchObject({ action: 'createNote', type: 'write', recordIds: ['audit-1'], label: `created note "Audited" · via MCP · ${aliceName}` })
    expect(restCreate).toMatchObject({ action: 'createNote', recordIds: ['audit-2'], label: `created note "Audited" · ${aliceName}` })
    expect(mcpMessage.label).toBe(`added a message to note "Audited" · via MCP · ${aliceName}`)

    const filtered = await answer(aliceClient, 'listActivityLogs', { environment: 'staging', action: 'createNote', recordId: 'audit-1' })
    expect(filtered.data.map((e: { id: string }) => e.id)).toEqual([mcpCreate.id])
    expect(await refusal(aliceClient, 'listActivityLogs', { environment: 'staging', action: 'explode' })).toMatchObject({ httpStatus: 400, code: 'invalid_parameter' })
    expect(await refusal(aliceClient, 'listActivityLogs', { environment: 'staging', extensions: 'maybe' })).toMatchObject({ httpStatus: 400, code: 'invalid_parameter' })

    const admin = await answer(aliceClient, 'listAdminLogs', { limit: 2 })
    expect(admin).toMatchObject({ parameters: { projectName: 'Acme', limit: 2 } })
    expect(await (await rest('/v1/project/Acme/admin-logs?limit=2', tokens.alice)).json()).toEqual(admin)
    expect(await refusal(aliceClient, 'listAdminLogs', { type: 'nonsense' })).toMatchObject({ httpStatus: 400, code: 'invalid_parameter' })
    expect(await refusal(aliceClient, 'listAdminLogs', { environment: 'production' })).toMatchObject({ httpStatus: 400, details: [{ field: 'environment', message: 'unknown field' }] })
  })

  test('listWorkflows: the workflows whose team the token\'s user can reach', async () => {
    const all = await answer(aliceClient, 'listWorkflows', {})
    expect(all.workflows.map((w: { environment: string; team: string; name: string }) => `${w.environment}/${w.team}/${w.name}`)).toContain('staging/Billing/Billing check')
    expect(all.workflows.find((w: { name: string }) => w.name === 'Quick')).toEqual({ name: 'Quick', environment: 'production', team: 'Support', collection: 'orders', published: true })
    const production = await answer(aliceClient, 'listWorkflows', { environment: 'production' })
    expect(production.workflows.every((w: { environment: string }) => w.environment === 'production')).toBe(true)
    const dave = (await connect(server.url, tokens.dave)).client // Billing only, not an admin
    const reachable = await answer(dave, 'listWorkflows', {})
    expect(reachable.workflows.length).toBeGreaterThan(0)
    expect(reachable.workflows.every((w: { team: string }) => w.team === 'Billing')).toBe(true)
    expect(await refusal(dave, 'listWorkflows', { environment: 7 })).toMatchObject({ httpStatus: 400, details: [{ field: 'environment' }] })
    await dave.close()
  })

  test('triggerWorkflow → getWorkflowRun to a finished run; the 409, the idempotency key, 404, 403 and bad arguments', async () => {
    const { client } = await connect(server.url, tokens.bob)
    const started = await answer(client, 'triggerWorkflow', { environment: 'production', team: 'Support', workflow: 'Quick', recordId: 'o-1' })
    expect(started).toEqual({ runId: expect.stringMatching(UUID), replayed: false })
    const finished = await until('the run finishes', async () => {
      const run = await answer(client, 'getWorkflowRun', { runId: started.runId })
      return run.status === 'succeeded' ? run : null
    }, 15_000)
    expect(finished).toMatchObject({ object: 'workflow-run', id: started.runId, trigger: 'manual', recordId: 'o-1', user: { username: 'bob' }, steps: [{ name: 'touch', status: 'succeeded' }] })
    expect(await (await rest(`/v1/workflow-runs/${started.runId}`, tokens.bob)).json()).toEqual(await answer(client, 'getWorkflowRun', { runId: started.runId }))

    const held = await answer(client, 'triggerWorkflow', { environment: 'production', team: 'Support', workflow: 'Hold', recordId: 'o-2', idempotencyKey: 'hold-o-2' })
    expect(await refusal(client, 'triggerWorkflow', { environment: 'production', team: 'Support', workflow: 'Hold', recordId: 'o-2' }))
      .toMatchObject({ httpStatus: 409, error: 'Conflict', code: 'run_in_progress', runId: held.runId })
    expect(await answer(client, 'triggerWorkflow', { environment: 'production', team: 'Support', workflow: 'Hold', recordId: 'o-2', idempotencyKey: 'hold-o-2' })).toEqual({ runId: held.runId, replayed: true })
    expect(await refusal(client, 'triggerWorkflow', { environment: 'production', team: 'Support', workflow: 'Hold', recordId: 'o-3', idempotencyKey: 'hold-o-2' }))
      .toMatchObject({ httpStatus: 422, code: 'idempotency_key_reused' })
    expect(await refusal(client, 'triggerWorkflow', { environment: 'production', team: 'Support', workflow: 'Nope', recordId: 'o-3' })).toMatchObject({ httpStatus: 404 })
    expect(await refusal(client, 'triggerWorkflow', { environment: 'nowhere', team: 'Support', workflow: 'Quick', recordId: 'o-3' })).toMatchObject({ httpStatus: 404 })
    expect(await refusal(client, 'triggerWorkflow', { environment: 'production', team: 'Support', workflow: 'Quick' })).toMatchObject({ httpStatus: 400, details: [{ field: 'recordId' }] })
    expect(await refusal(client, 'triggerWorkflow', { environment: 'production', team: 'Support', workflow: 'Quick', recordId: 'o-3', idempotencyKey: 'é' }))
      .toMatchObject({ httpStatus: 400, details: [{ field: 'idempotencyKey' }] })
    expect(await refusal(client, 'getWorkflowRun', { runId: 'not-a-uuid' })).toMatchObject({ httpStatus: 400, details: [{ field: 'runId' }] })
    expect(await refusal(client, 'getWorkflowRun', { runId: '0190f2a8-7b3c-7def-8123-456789abcdef' })).toMatchObject({ httpStatus: 404 })
    await client.close()

    // dave (Billing) cannot reach Support's workflow, nor see bob's run.
    const dave = (await connect(server.url, tokens.dave)).client
    expect(await refusal(dave, 'triggerWorkflow', { environment: 'production', team: 'Support', workflow: 'Quick', recordId: 'o-3' })).toMatchObject({ httpStatus: 403, code: 'rendering_forbidden' })
    expect(await refusal(dave, 'getWorkflowRun', { runId: held.runId })).toMatchObject({ httpStatus: 404 })
    expect(await refusal(dave, 'cancelWorkflowRun', { runId: held.runId })).toMatchObject({ httpStatus: 404 })
    await dave.close()
 }, 30_000)

  test('cancelWorkflowRun and retryWorkflowRun, with their 409s; their entries are the REST ones marked via MCP', async () => {
    const { client } = await connect(server.url, tokens.alice)
    const held = await answer(client, 'triggerWorkflow', { environment: 'production', team: 'Support', workflow: 'Hold', recordId: 'o-4' })
    expect(await refusal(client, 'retryWorkflowRun', { runId: held.runId })).toMatchObject({ httpStatus: 409, code: 'run_not_retryable' })
    await until('the run parks on its wait', async () => (await answer(client, 'getWorkflowRun', { runId: held.runId })).status === 'waiting', 15_000)
    const cancelled = await answer(client, 'cancelWorkflowRun', { runId: held.runId })
    expect(cancelled).toMatchObject({ id: held.runId, status: 'cancelled' })
    expect(await refusal(client, 'cancelWorkflowRun', { runId: held.runId })).toMatchObject({ httpStatus: 409, code: 'run_finished' })
    const retried = await answer(client, 'retryWorkflowRun', { runId: held.runId })
    expect(retried).toEqual({ runId: expect.stringMatching(UUID), retryOf: held.runId })
    expect(await refusal(client, 'retryWorkflowRun', { runId: held.runId })).toMatchObject({ httpStatus: 409, code: 'already_retried', runId: retried.runId })
    // The wait was recorded when the run parked: its retry resumes after it, with nothing left to do.
    await until('the retry finishes', async () => (await answer(client, 'getWorkflowRun', { runId: retried.runId })).status === 'succeeded', 15_000)

    const failed = await answer(client, 'triggerWorkflow', { environment: 'production', team: 'Support', workflow: 'Failing', recordId: 'o-5' })
    await until('the run fails', async () => (await answer(client, 'getWorkflowRun', { runId: failed.runId })).status === 'failed', 15_000)
    expect(await answer(client, 'getWorkflowRun', { runId: failed.runId })).toMatchObject({ status: 'failed', error: { code: expect.any(String) }, steps: [{ name: 'tell', status: 'failed' }] })

    const entries = (await answer(client, 'listActivityLogs', { environment: 'production', recordId: 'o-4', extensions: true })).data as Record<string, any>[]
    // The retry's completion is the executor's entry, not the call's (no mark); before them, the record's creation by trellis apply.
    expect(entries.slice(0, 4).map((e) => [e.action, e.label])).toEqual([
      ['completeWorkflow', `workflow run succeeded · ${aliceName}`],
      ['retryWorkflow', `retry of run ${held.runId} · via MCP · ${aliceName}`],
      ['abortWorkflow', `workflow run cancelled · via MCP · ${aliceName}`],
      ['triggerWorkflow', `triggered manually · via MCP · ${aliceName}`],
    ])
    expect(entries[3]!.workflow).toEqual({ object: 'workflow', name: 'Hold', runId: held.runId })
    await client.close()
  }, 45_000)

  test('listTasks, getTask and decideTask: the REST answers, the same rules (visibility, requester, form, one decision each, quorum), entries marked via MCP', async () => {
    const started = await answer(aliceClient, 'triggerWorkflow', { environment: 'production', team: 'Support', workflow: 'Refund', recordId: 'o-6' })
    await until('the run waits on its task', async () => (await answer(aliceClient, 'getWorkflowRun', { runId: started.runId })).status === 'waiting', 15_000)
    const dave = (await connect(server.url, tokens.daveTasks)).client
    const inbox = await answer(dave, 'listTasks', { environment: 'production', assignee: 'me' })
    expect(await (await rest(`${PRODUCTION}/tasks?assignee=me`, tokens.daveTasks)).json()).toEqual(inbox)
    expect(inbox.data).toHaveLength(1)
    const taskId = inbox.data[0].id as string
    expect(inbox.data[0]).toMatchObject({ object: 'task', status: 'open', run: { id: started.runId }, recordId: 'o-6', approvalsRequired: 2, approvals: 0 })
    expect(await answer(dave, 'getTask', { taskId })).toEqual((await (await rest(`/v1/tasks/${taskId}`, tokens.daveTasks)).json()) as Record<string, any>)
    expect(await refusal(dave, 'listTasks', { environment: 'production', status: 'pending' })).toMatchObject({ httpStatus: 400, code: 'invalid_parameter' })
    expect(await refusal(dave, 'listTasks', {})).toMatchObject({ httpStatus: 400, details: [{ field: 'environment' }] })
    expect(await refusal(dave, 'getTask', { taskId: 'nope' })).toMatchObject({ httpStatus: 400, details: [{ field: 'taskId' }] })

    // bob is neither an assignee nor the requester: he does not see it. alice (an admin) asked: she may not decide it.
    const bob = (await connect(server.url, tokens.bobTasks)).client
    expect(await answer(bob, 'listTasks', { environment: 'production' })).toMatchObject({ data: [] })
    expect(await refusal(bob, 'getTask', { taskId })).toMatchObject({ httpStatus: 404, code: 'not_found' })
    expect(await refusal(bob, 'decideTask', { taskId, decision: 'approve', input: { amount: 1 } })).toMatchObject({ httpStatus: 404, code: 'not_found' })
    await bob.close()
    expect(await refusal(aliceClient, 'decideTask', { taskId, decision: 'approve', input: { amount: 1 } })).toMatchObject({ httpStatus: 403, code: 'requester_cannot_decide' })
    const readOnly = (await connect(server.url, tokens.daveTasksRead)).client
    expect(await refusal(readOnly, 'decideTask', { taskId, decision: 'approve', input: { amount: 1 } })).toMatchObject({ httpStatus: 403, code: 'insufficient_scope' })
    await readOnly.close()

    // The form refuses a value, naming the field; a bad body is refused before anything is decided.
    expect(await refusal(dave, 'decideTask', { taskId, decision: 'approve', input: { amount: 900 } }))
      .toMatchObject({ httpStatus: 422, code: 'invalid_input', details: [{ field: '/amount' }] })
    expect(await refusal(dave, 'decideTask', { taskId, decision: 'approve' })).toMatchObject({ httpStatus: 422, code: 'invalid_input' })
    expect(await refusal(dave, 'decideTask', { taskId, decision: 'maybe' })).toMatchObject({ httpStatus: 400, details: [{ field: 'decision' }] })

    const first = await answer(dave, 'decideTask', { taskId, decision: 'approve', input: { amount: 20 }, comment: 'ok by me', idempotencyKey: 'dave-o-6' })
    expect(first).toMatchObject({ id: taskId, status: 'open', approvals: 1, decisions: [{ user: { username: 'dave' }, decision: 'approve', comment: 'ok by me', input: { amount: 20 } }] })
    expect(await answer(dave, 'decideTask', { taskId, decision: 'approve', input: { amount: 20 }, comment: 'ok by me', idempotencyKey: 'dave-o-6' })).toEqual(first)
    expect(await refusal(dave, 'decideTask', { taskId, decision: 'reject' })).toMatchObject({ httpStatus: 409, code: 'already_decided' })
    const carol = (await connect(server.url, tokens.carolTasks)).client
    const closed = await answer(carol, 'decideTask', { taskId, decision: 'approve', input: { amount: 15 } })
    expect(closed).toMatchObject({ status: 'approved', approvals: 2, closedAt: expect.any(String) })
    expect(await answer(dave, 'listTasks', { environment: 'production', assignee: 'me' })).toMatchObject({ data: [] })
    await carol.close()
    await dave.close()
    await until('the run goes on and succeeds', async () => (await answer(aliceClient, 'getWorkflowRun', { runId: started.runId })).status === 'succeeded', 15_000)

    const entries = (await answer(aliceClient, 'listActivityLogs', { environment: 'production', recordId: 'o-6', extensions: true })).data as Record<string, any>[]
    const decisions = entries.filter((e) => ['approveApproval', 'closeTask'].includes(e.action)).map((e) => [e.action, e.label])
    expect(decisions).toEqual([
      ['closeTask', expect.stringMatching(/^task "approve" approved: the last approval by carol@example\.com · via MCP · token /)],
      ['approveApproval', expect.stringMatching(/^approved task "approve" · via MCP · token /)],
      ['approveApproval', `approved task "approve": ok by me · via MCP · ${daveTasksName}`],
    ])
  }, 45_000)

  test('listRecords, getRecord and updateRecord: the REST answers and rules (If-Match, a read-only team, scopes), the entry marked via MCP', async () => {
    const ORDERS = `${PRODUCTION}/collection/orders/records`
    const page = await answer(aliceClient, 'listRecords', { environment: 'production', collection: 'orders', limit: 2, sort: 'createdAt' })
    expect(await (await rest(`${ORDERS}?limit=2&sort=createdAt`, tokens.alice)).json()).toEqual(page)
    const next = await answer(aliceClient, 'listRecords', { environment: 'production', collection: 'orders', limit: 2, sort: 'createdAt', cursor: page.nextCursor })
    expect(next.data[0].id).not.toBe(page.data[1].id)
    expect(await refusal(aliceClient, 'listRecords', { environment: 'production', collection: 'orders', filters: { 'status.eq': 'paid' } })).toMatchObject({ httpStatus: 400, code: 'invalid_parameter' })

    const read = await rest(`${ORDERS}/o-1`, tokens.alice)
    const record = await answer(aliceClient, 'getRecord', { environment: 'production', collection: 'orders', recordId: 'o-1' })
    expect(record).toEqual({ ...((await read.json()) as object), etag: read.headers.get('etag') })
    expect(await refusal(aliceClient, 'getRecord', { environment: 'production', collection: 'orders', recordId: 'nope' })).toMatchObject({ httpStatus: 404 })

    const changed = await answer(aliceClient, 'updateRecord', { environment: 'production', collection: 'orders', recordId: 'o-1', data: { note: 'mcp' }, ifMatch: record.etag })
    const after = await rest(`${ORDERS}/o-1`, tokens.alice)
    expect(changed).toEqual({ ...((await after.json()) as object), etag: after.headers.get('etag') })
    expect(changed.data.note).toBe('mcp')
    const stale = await refusal(aliceClient, 'updateRecord', { environment: 'production', collection: 'orders', recordId: 'o-1', data: { note: 'late' }, ifMatch: record.etag })
    expect(stale).toMatchObject({ httpStatus: 412, code: 'precondition_failed' })
    const [entry] = ((await (await rest(`${PRODUCTION}/activity-logs?recordId=o-1&type=write`, tokens.alice)).json()) as { data: Record<string, any>[] }).data
    expect(entry).toMatchObject({ action: 'update', label: `updated via the records API: note (none) → "mcp" · via MCP · ${aliceName}` })

    // dave's team (Billing) may read orders, not change them; a token without records:write may not call the tool.
    const { client: dave } = await connect(server.url, tokens.daveRecords)
    expect((await answer(dave, 'getRecord', { environment: 'production', collection: 'orders', recordId: 'o-1' })).id).toBe('o-1')
    expect(await refusal(dave, 'updateRecord', { environment: 'production', collection: 'orders', recordId: 'o-1', data: { note: 'x' } })).toMatchObject({ httpStatus: 403, code: 'forbidden' })
    await dave.close()
    const { client: reader } = await connect(server.url, tokens.bobRecordsRead)
    expect(await refusal(reader, 'updateRecord', { environment: 'production', collection: 'orders', recordId: 'o-1', data: { note: 'x' } })).toMatchObject({ httpStatus: 403, code: 'insufficient_scope' })
    expect(await refusal(reader, 'updateRecord', { environment: 'production', collection: 'orders', recordId: 'o-1', data: 'x' })).toMatchObject({ httpStatus: 403 })
    await reader.close()
    expect(await refusal(aliceClient, 'updateRecord', { environment: 'production', collection: 'orders', recordId: 'o-1', data: 'x' })).toMatchObject({ httpStatus: 400, details: [{ field: 'data' }] })
  })

  test('a token revoked in the middle of a session is refused at its next call', async () => {
    const revoked = await tokenFor(env.store, systemClock, 'alice', ['all'])
    const { client } = await connect(server.url, revoked.value)
    expect((await client.listTools()).tools.length).toBe(ALL_TOOLS.length)
    await answer(client, 'listWorkflows', {})
    expect(await runNow(env.store, revokeToken(systemClock, revoked.token, null))).toBe(true)
    await expect(client.callTool({ name: 'listWorkflows', arguments: {} })).rejects.toThrow(/"unauthorized".*Token has been revoked/)
    await expect(client.listTools()).rejects.toThrow(/"unauthorized"/)
  })
})

describe('the MCP endpoint in an app with small budgets', () => {
  let env: TestEnv
  let served: ReturnType<typeof Bun.serve>

  beforeAll(async () => {
    env = await seededEnv({ TRELLIS_API_RATE_PER_MIN: '6', TRELLIS_API_RATE_PER_HOUR: '1000', TRELLIS_API_RATE_PER_DAY: '1000' })
    const app = testApp(env)
    served = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: (request) => app.handle(request) })
  })
  afterAll(async () => {
    await served?.stop(true)
    env?.cleanup()
  })

  test('every POST counts against the token\'s one API budget, shared with its REST calls; over it, a tool call is the tool\'s 429 error, any other message an HTTP 429', async () => {
    const url = `http://127.0.0.1:${served.port}`
    const { value } = await tokenFor(env.store, env.clock, 'alice', ['all'])
    const { client } = await connect(url, value) // initialize, notifications/initialized: 2
    await client.listTools() // 3
    expect((await fetch(`${url}${PRODUCTION}/notes`, { headers: bearer(value) })).status).toBe(200) // 4
    await answer(client, 'listWorkflows', {}) // 5
    const last = await fetch(`${url}${PRODUCTION}/notes`, { headers: bearer(value) }) // 6
    expect(last.headers.get('x-ratelimit-remaining')).toBe('0')
    // Over the budget: a tool call is answered with the REST 429 as the tool's error (the agent reads it and waits)…
    for (const [name, args] of [['listWorkflows', {}], ['triggerWorkflow', { environment: 'production', team: 'Support', workflow: 'Quick', recordId: 'o-1' }]] as const) {
      const result = (await client.callTool({ name, arguments: args })) as ToolAnswer
      expect(result.isError).toBe(true)
      expect(JSON.parse(result.content[0]!.text!)).toEqual({
        httpStatus: 429,
        error: 'Too Many Requests',
        code: 'rate_limited',
        message: expect.stringContaining('API rate limit exceeded for this token'),
        retry_after: expect.any(Number),
      })
    }
    const raw = await fetch(`${url}/mcp`, {
      method: 'POST',
      headers: { ...bearer(value), 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'listWorkflows', arguments: {} } }),
    })
    expect(raw.status).toBe(200)
    expect(Number(raw.headers.get('retry-after'))).toBeGreaterThan(0)
    expect(raw.headers.get('x-ratelimit-remaining')).toBe('0')
    expect(((await raw.json()) as any).id).toBe(9)
    // … nothing was started meanwhile; every other message is the REST answer, an HTTP 429.
    expect(queryAll(env.store, 'SELECT id FROM runs')).toEqual([])
    await expect(client.listTools()).rejects.toThrow(/"rate_limited"/)
    const refused = await fetch(`${url}/mcp`, {
      method: 'POST',
      headers: { ...bearer(value), 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    })
    expect(refused.status).toBe(429)
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0)
    expect(await refused.json()).toMatchObject({ error: 'Too Many Requests', code: 'rate_limited', retry_after: expect.any(Number) })
    expect((await fetch(`${url}${PRODUCTION}/notes`, { headers: bearer(value) })).status).toBe(429)
  })

  test('a deactivated user\'s token, and on an SSO project a token not made in an SSO session: 403 at the HTTP level, as REST', async () => {
    const url = `http://127.0.0.1:${served.port}`
    const carol = (await tokenFor(env.store, env.clock, 'carol', ['all'])).value
    const { client } = await connect(url, carol)
    await runNow(env.store, setUserDisabled(env.clock, userId(env.store, 'carol'), true))
    await expect(client.listTools()).rejects.toThrow(/"user_deactivated"/)
    const dave = (await tokenFor(env.store, env.clock, 'dave', ['workflows:trigger'])).value
    await runNow(env.store, updateProject(projectId(env.store, 'Acme'), { sso: true }))
    await expect(connect(url, dave)).rejects.toThrow(/"sso_required"/)
  })
})
