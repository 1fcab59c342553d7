/**
 * Console: the inbox (the tasks waiting for the signed-in person, live) and a task's page — the record's data and its
 * notes thread, the run, the deadline, earlier decisions, and the form rendered from its JSON Schema with Approve /
 * Reject. The decision is the API's (`POST /v1/tasks/{id}/decisions` with the session), so its rules, errors (a 422
 * `invalid_input` beside its field) and activity entries are the same as a script's. A task's notes are its team's
 * notes on its record: whoever sees the task may discuss it there (session-only JSON actions under `/tasks/{id}`).
 */
import { Elysia, t } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { html, type Html, path, scrollingTable } from '../../console/html.ts'
import { layout } from '../../console/page.ts'
import { read, readListed } from '../../db/read.ts'
import { write } from '../../db/write.ts'
import { type InboxFilters, type InboxScope, isAssignee, loadTasksToRender, pageInboxTaskIds, type TaskToRender } from '../../db/tasks.ts'
import { authPlugin } from '../../http/auth-plugin.ts'
import { errorResponses } from '../../http/errors.ts'
import { MAX_NAME_LENGTH, parseEnumParameter, parseStringParameter } from '../../http/list.ts'
import { IdParam } from '../../http/params.ts'
import type { AccountCaller } from '../../lib/callers.ts'
import { FORM_FORMATS } from '../../lib/form-schema.ts'
import { textToNoteHtml } from '../../lib/html.ts'
import { notFound } from '../../lib/errors.ts'
import { inIdOrder } from '../../lib/id-order.ts'
import { ACTIVE_RUN_STATUSES } from '../../lib/run-statuses.ts'
import { toIsoMicros, toIsoOrNull } from '../../lib/time.ts'
import { isAdminOf, projectsOf } from '../directory/projects.ts'
import { NoteTitle, UpdateNoteBody } from '../notes/model.ts'
import { addMessage, createNote, findNote, listNoteIds, renderNotes, updateNote } from '../notes/service.ts'
import { findRecord, logRecordView, projectLayout } from '../records/service.ts'
import { visibleTask } from '../tasks/service.ts'
import { asCaller, type ConsoleUser, openableProject } from './access.ts'
import { placeCrumbs, recordLink, runPath, workflowPlaces } from './links.ts'
import { notesList } from './logs.ts'
import { nonBlank, NoteText, person } from './notes.ts'
import type { Op } from '../../db/op.ts'
import { consolePage, when } from './page.ts'
import { environmentEventsPath } from './runs.ts'

const PER_PAGE = 50
/** The environments' streams an inbox follows at most; beyond them it reads itself again every few seconds. */
const MAX_INBOX_STREAMS = 5
const SCOPES = ['mine', 'teams', 'all'] as const satisfies readonly InboxScope[]

export const taskPath = (taskId: string) => path('tasks', taskId)

const status = (s: string) => html`<span class="status-${s}">${s}</span>`
const isActive = (s: string) => (ACTIVE_RUN_STATUSES as readonly string[]).includes(s)
const isOverdue = (task: Pick<TaskToRender, 'status' | 'dueAt'>, now: number) => task.status === 'open' && task.dueAt !== null && task.dueAt < now

/** The deadline, flagged once past while the task is open. */
function deadline(task: TaskToRender, now: number): Html {
  if (task.dueAt === null) return html`<span class="muted">none</span>`
  return html`${when(toIsoOrNull(task.dueAt))}${isOverdue(task, now) ? html` <span class="badge">overdue</span>` : ''}`
}

/** A list of tasks (the inbox, a record's): each linked to its page, with its workflow, record, deadline and state. */
export function tasksTable(tasks: TaskToRender[], now: number, withRecord = true): Html {
  return scrollingTable(html`<table class="tasks"><thead><tr><th>Task</th><th>Workflow</th>${withRecord ? html`<th>Record</th>` : ''}<th>Where</th><th>Due (UTC)</th><th>Status</th><th>Opened (UTC)</th></tr></thead><tbody>
${tasks.map(
  (k) => html`<tr data-task-id="${k.id}"><td><a class="task-link" href="${taskPath(k.id)}">${k.title}</a></td><td>${k.workflowName} <span class="muted">· ${k.step}</span></td>${withRecord ? html`<td class="mono">${k.recordId}</td>` : ''}<td>${k.project} · ${k.environment} · ${k.team}</td><td>${deadline(k, now)}</td><td>${status(k.status)} <span class="muted">${approvalsOf(k)}/${k.approvalsRequired}</span>${k.escalated ? html` <span class="badge">escalated</span>` : ''}</td><td>${when(toIsoMicros(k.createdAt))}</td></tr>`,
)}
</tbody></table>`)
}

const approvalsOf = (task: TaskToRender) => task.decisions.filter((d) => d.decision === 'approve').length

/** Without SMTP the inbox is the only place a task reaches anyone: the page says so. */
const noMailNotice = (deps: AppDeps) =>
  deps.mail === null ? html`<p class="muted" id="inbox-mail">This instance sends no e-mail (no SMTP server is configured): this inbox is the only place tasks reach you.</p>` : ''

// ── The task's form ───────────────────────────────────────────────────────────

interface FormProperty {
  type?: string
  title?: string
  description?: string
  enum?: string[]
  format?: string
  minLength?: number
  maxLength?: number
  minimum?: number
  maximum?: number
}

/** The input type a string `format` is typed in (the others are text, checked by the API). */
const FORMAT_INPUTS: Partial<Record<(typeof FORM_FORMATS)[number], string>> = { email: 'email', date: 'date', uri: 'url' }

/**
 * One field of a task's form from its schema (the documented subset): an enum a select, a boolean a checkbox, a number
 * a number input with its bounds, a string a text input with its length and format; `title` the label, `description` a
 * hint. The values go into the decision's `input` (data-in); the API's 422 names each field as a JSON pointer, which
 * console.js puts beside the field.
 */
function formField(name: string, property: FormProperty, required: boolean, index: number): Html {
  const label = property.title ?? name
  const hintId = `hint-${index}`
  const hint = property.description ? html`<span class="hint" id="${hintId}">${property.description}</span>` : ''
  const described = property.description ? html` aria-describedby="${hintId}"` : ''
  const req = required ? html` required` : ''
  const marker = required ? html` <span class="muted">(required)</span>` : ''
  if (property.type === 'boolean') {
    return html`<label class="check"><input type="checkbox" name="${name}" data-in="input"${described}> ${label}</label>${hint}`
  }
  let control: Html
  if (property.type === 'string' && property.enum) {
    control = html`<select name="${name}" data-in="input" data-optional${req}${described}><option value="">—</option>${property.enum.map((value) => html`<option>${value}</option>`)}</select>`
  } else if (property.type === 'number' || property.type === 'integer') {
    const bounds = html`${property.minimum === undefined ? '' : html` min="${property.minimum}"`}${property.maximum === undefined ? '' : html` max="${property.maximum}"`}`
    control = html`<input type="number" name="${name}" data-in="input" data-type="number" step="${property.type === 'integer' ? '1' : 'any'}"${bounds}${req}${described}>`
  } else {
    const type = FORMAT_INPUTS[property.format as (typeof FORM_FORMATS)[number]] ?? 'text'
    const lengths = html`${property.minLength === undefined ? '' : html` minlength="${property.minLength}"`}${property.maxLength === undefined ? '' : html` maxlength="${property.maxLength}"`}`
    const placeholder = property.format && type === 'text' ? html` placeholder="${property.format}"` : ''
    control = html`<input type="${type}" name="${name}" data-in="input" data-optional${lengths}${placeholder}${req}${described}>`
  }
  return html`<label>${label}${marker} ${control}</label>${hint}`
}

/**
 * Approve / Reject with a comment, and the form's fields. `novalidate`: the API's check is the one every caller
 * meets, and its message stands beside the field. Reject sends no form values (a rejection needs none).
 */
function decisionForm(task: TaskToRender): Html {
  const schema = task.form === null ? null : (JSON.parse(task.form) as { title?: string; description?: string; properties?: Record<string, FormProperty>; required?: string[] })
  const required = new Set(schema?.required ?? [])
  const fields = Object.entries(schema?.properties ?? {}).map(([name, property], i) => formField(name, property, required.has(name), i))
  return html`<form id="decide" class="decide" novalidate data-api action="${path('v1', 'tasks', task.id, 'decisions')}" data-stay="${taskPath(task.id)}?live=1" data-done="Decision recorded.">
${schema?.title ? html`<h3>${schema.title}</h3>` : ''}${schema?.description ? html`<p class="muted">${schema.description}</p>` : ''}
${fields}
<label>Comment <textarea name="comment" rows="2" maxlength="10000" data-optional></textarea></label>
<p class="form-error" role="alert"></p>
<p class="buttons"><button type="submit" name="decision" value="approve">Approve</button> <button type="submit" name="decision" value="reject" data-omit="input" class="danger">Reject</button></p>
</form>`
}

/** Why the person cannot decide the task now, or null when they can. */
function* whyNotDecide(task: TaskToRender & { requesterId: number; allowRequester: boolean; projectId: number }, user: ConsoleUser): Op<string | null> {
  const mine = task.decisions.find((d) => d.user.id === user.id)
  if (mine) return `You ${mine.decision === 'approve' ? 'approved' : 'rejected'} this task.`
  if (task.status !== 'open') return `This task is ${task.status}.`
  if (task.requesterId === user.id && !task.allowRequester) return 'The run this task belongs to is yours: someone else decides it.'
  if (!(yield* isAdminOf(user.id, task.projectId)) && !(yield* isAssignee(task.id, user.id))) return 'You are not an assignee of this task.'
  return null
}

// ── Pages ─────────────────────────────────────────────────────────────────────

/** The inbox's filters from the query: 400 naming a bad one. */
function inboxFilters(query: Record<string, string | undefined>, now: number): InboxFilters {
  return {
    scope: parseEnumParameter(query, 'show', SCOPES) ?? 'mine',
    workflowName: parseStringParameter(query, 'workflow', MAX_NAME_LENGTH),
    overdueAt: parseEnumParameter(query, 'overdue', ['true'] as const) ? now : undefined,
    before: parseStringParameter(query, 'before', 64),
  }
}

/**
 * The run-events streams of the environments of the projects the person may open: each carries the task events of
 * the tasks they see there (every one in a project they administer; else those assigned to them or their teams, and
 * their own runs'), so together they carry every change of the inbox while there are at most MAX_INBOX_STREAMS.
 */
function* inboxStreams(user: ConsoleUser): Op<{ streams: string[]; complete: boolean }> {
  const streams: string[] = []
  for (const membership of yield* projectsOf(user.id)) {
    const opened = yield* openableProject(user, membership.name)
    if (!opened) continue
    const { environments } = yield* projectLayout(opened.project.id)
    for (const environment of environments) streams.push(environmentEventsPath(opened.project.name, environment.name))
  }
  return { streams: streams.slice(0, MAX_INBOX_STREAMS), complete: streams.length <= MAX_INBOX_STREAMS }
}

export function taskPages(deps: AppDeps) {
  return new Elysia({ name: 'console-tasks', detail: { hide: true } })
    .get(
      '/inbox',
      consolePage(deps, async ({ user, query, url }) => {
        const now = deps.clock.now()
        const filters = inboxFilters(query, now)
        const ids = await readListed(deps.store, 'tasks', pageInboxTaskIds(user.id, user.viaSso, filters, PER_PAGE))
        const page = ids.slice(0, PER_PAGE)
        // In the list's order, (createdAt, id): the next page starts below the last one shown.
        const shown = inIdOrder(page, await read(deps.store, loadTasksToRender(page)), (task) => task.id)
        const admin = (await read(deps.store, projectsOf(user.id))).some((p) => p.role === 'admin')
        const { streams, complete } = await read(deps.store, inboxStreams(user))
        const older = new URL(url)
        older.searchParams.set('before', shown.at(-1)?.id ?? '')
        const option = (value: string, label: string) => html`<option value="${value}"${(query.show ?? 'mine') === value ? html` selected` : ''}>${label}</option>`
        const empty = filters.scope === 'mine' ? 'Nothing waits for you.' : 'No open task here.'
        return layout({
          title: 'Inbox',
          user,
          crumbs: [{ label: 'Projects', href: '/' }],
          body: html`${noMailNotice(deps)}
<form method="get" class="filters"><label class="check">Show <select name="show">${option('mine', 'waiting for me')}${option('teams', 'my teams')}${admin ? option('all', 'all (projects I administer)') : ''}</select></label>
<label class="check">Workflow <input name="workflow" value="${query.workflow ?? ''}" maxlength="${MAX_NAME_LENGTH}"></label>
<label class="check"><input type="checkbox" name="overdue" value="true"${query.overdue === 'true' ? html` checked` : ''}> overdue only</label><button type="submit">Filter</button></form>
<div id="inbox" data-refresh data-live-inbox="${JSON.stringify(streams)}"${complete ? '' : html` data-poll`}>${shown.length === 0 ? html`<p class="muted">${empty}</p>` : tasksTable(shown, now)}</div>
${ids.length > PER_PAGE ? html`<p class="pager"><a href="${older.pathname + older.search}">Older →</a></p>` : ''}`,
        })
      }),
    )
    .get(
      '/tasks/:taskId',
      consolePage(deps, async ({ user, params, query }) => {
        // `?live=1`: the page's live parts only (no record data, so no read to log), for live.js to read again.
        const live = query.live === '1'
        if (!live) await deps.store.awaitListed('notes') // the record's notes, as listed
        const { found, task, whyNot, record, notes } = await write(deps.store, function* () {
          const found = yield* visibleTask(asCaller(user), params.taskId!)
          const [task] = yield* loadTasksToRender([found.task.id])
          if (!task) throw notFound(`Task ${params.taskId} not found`)
          const whyNot = yield* whyNotDecide({ ...task, ...found.task, projectId: found.projectId }, user)
          if (live || found.task.collectionId === null) return { found, task, whyNot, record: undefined, notes: [] }
          const scope = { environmentId: found.task.environmentId, collectionId: found.task.collectionId }
          const record = yield* findRecord(scope, found.task.recordId)
          if (record) yield* logRecordView(deps.clock, { ...scope, userId: user.id, teamId: found.task.teamId, action: 'read', recordIds: [record.recordKey] })
          const noteIds = yield* listNoteIds(found.projectId, found.task.environmentId, { recordId: found.task.recordId, teamName: task.team, collectionName: task.collection ?? '' }, [], 20)
          return { found, task, whyNot, record, notes: yield* renderNotes(noteIds.slice(0, 20)) }
        })
        const now = deps.clock.now()
        const isAdmin = await read(deps.store, isAdminOf(user.id, found.projectId))
        const seesRun = isAdmin || task.runUserId === user.id
        const place = (await read(deps.store, workflowPlaces([found.task.workflowId]))).get(found.task.workflowId)
        const runLine = html`<p id="task-run" data-refresh>Run ${seesRun ? html`<a class="mono run-link" href="${runPath(task.runId)}" title="${task.runId}">${task.runId.slice(0, 8)}</a>` : html`<span class="mono" title="${task.runId}">${task.runId.slice(0, 8)}</span>`} of ${task.workflowName} v${task.version}: <span data-run-status="${task.runStatus}">${status(task.runStatus)}</span>${seesRun ? '' : html` <span class="muted">(its page is for the person who started it and project admins)</span>`}</p>`
        const facts = html`<div id="task-state" data-refresh>${scrollingTable(html`<table class="task-facts"><tbody>
<tr><th>Status</th><td id="task-status">${status(task.status)} <span class="muted">${approvalsOf(task)} of ${task.approvalsRequired} approval${task.approvalsRequired === 1 ? '' : 's'}</span></td></tr>
<tr><th>Record</th><td>${recordLink(place, task.recordId)}${task.collection ? html` <span class="muted">in</span> ${task.collection}` : ''}</td></tr>
<tr><th>Where</th><td>${task.project} · ${task.environment} · ${task.team}</td></tr>
<tr><th>Deadline</th><td>${deadline(task, now)}</td></tr>
<tr><th>Escalated</th><td>${task.escalated ? html`<span class="badge">escalated</span>` : 'no'}</td></tr>
<tr><th>Assignees</th><td>${[...task.teams.map((name) => `team ${name}`), ...task.users.map((u) => u.email)].join(', ') || html`<span class="muted">project admins</span>`}</td></tr>
<tr><th>Opened</th><td>${when(toIsoMicros(task.createdAt))}${task.closedAt === null ? '' : html` · closed ${when(toIsoOrNull(task.closedAt))}`}</td></tr>
</tbody></table>`)}
<h2>Decisions</h2>
${task.decisions.length === 0 ? html`<p class="muted">No decision yet.</p>` : scrollingTable(html`<table class="decisions"><thead><tr><th>Who</th><th>Decision</th><th>Comment</th><th>Input</th><th>When (UTC)</th></tr></thead><tbody>
${task.decisions.map((d) => html`<tr><td>${d.user.email}</td><td>${d.decision === 'approve' ? 'approved' : 'rejected'}</td><td>${d.comment ?? ''}</td><td class="mono">${d.input ?? ''}</td><td>${when(toIsoMicros(d.createdAt))}</td></tr>`)}
</tbody></table>`)}</div>`
        // While the person may still decide, the live parts leave the form out: a refresh never wipes what they typed.
        const decide = whyNot === null ? (live ? '' : html`<div id="task-decide" data-refresh><h2>Decide</h2>${decisionForm(task)}</div>`) : html`<div id="task-decide" data-refresh><p class="muted">${whyNot}</p></div>`
        const notesPath = path('tasks', task.id)
        const recordPart = live
          ? ''
          : html`<h2 id="record">Record</h2>
${record ? html`<pre class="mono" id="record-data">${JSON.stringify(JSON.parse(record.data), null, 2)}</pre>` : html`<p class="muted">The record ${task.recordId} is no longer there.</p>`}
<h2 id="notes">Notes</h2>
${notesList(notes, notesPath)}
<form id="new-note" data-done="Note added." data-api action="${notesPath}/notes">
<h3>New note</h3>
<label>Title <input name="title" required maxlength="500"></label>
<label>Message <textarea name="text" rows="3" required maxlength="10000"></textarea></label>
<p class="form-error" role="alert"></p>
<button type="submit">Add note</button></form>`
        // Followed on the run's stream by those who may read the run; other deciders' environment stream carries the
        // task's events (not the run's), so once the task closed their page polls until the run ends.
        const events = seesRun
          ? html` data-run-events="${path('v1', 'workflow-runs', task.runId, 'events')}"`
          : task.status === 'open'
            ? html` data-task-events="${environmentEventsPath(task.project, task.environment, task.recordId)}" data-task-id="${task.id}"`
            : ''
        const liveAttributes = isActive(task.runStatus) || task.status === 'open' ? html` data-live-task="${taskPath(task.id)}?live=1"${events}` : ''
        return layout({
          title: task.title,
          user,
          crumbs: [{ label: 'Inbox', href: '/inbox' }, ...(place ? placeCrumbs({ ...place, record: task.recordId }).slice(1) : []), { label: `task ${task.id.slice(0, 8)}` }],
          body: html`<div id="task"${liveAttributes}>${runLine}${facts}${decide}</div>${recordPart}`,
        })
      }),
    )
    .use(taskNoteActions(deps))
}

// ── The task's notes ──────────────────────────────────────────────────────────

/** The task the person sees (404 otherwise), as the place of its notes: its team's, on its record. */
function* taskPlace(caller: AccountCaller, taskId: string) {
  const { task } = yield* visibleTask(asCaller(person(caller)), taskId)
  if (task.collectionId === null) throw notFound(`The record of task ${taskId} is no longer there`)
  return { environmentId: task.environmentId, collectionId: task.collectionId, teamId: task.teamId, recordId: task.recordId }
}

/** One of the task's notes (its team's, on its record); 404 otherwise. */
function* taskNote(caller: AccountCaller, taskId: string, id: number) {
  const place = yield* taskPlace(caller, taskId)
  const note = yield* findNote(place.environmentId, id)
  if (!note || note.teamId !== place.teamId || note.collectionId !== place.collectionId || note.recordId !== place.recordId) throw notFound(`Note ${id} not found`)
  return note
}

function taskNoteActions(deps: AppDeps) {
  const actor = (caller: AccountCaller) => ({ userId: caller.user.id, tokenId: null })
  const TaskParams = { taskId: t.String({ format: 'uuid' }) }
  return new Elysia({ name: 'console-task-notes', detail: { hide: true } })
    .use(authPlugin(deps))
    .post(
      '/tasks/:taskId/notes',
      async ({ params, body, caller, set }) => {
        const title = nonBlank('title', body.title)
        const text = nonBlank('text', body.text)
        const id = await write(deps.store, function* () {
          const place = yield* taskPlace(caller, params.taskId)
          if (!(yield* findRecord(place, place.recordId))) throw notFound(`Record ${place.recordId} not found`)
          return (yield* createNote(deps.clock, { ...place, title, content: textToNoteHtml(text) }, actor(caller))).id
        })
        set.status = 201
        return { id }
      },
      {
        userCall: true,
        params: t.Object(TaskParams),
        body: t.Object({ title: NoteTitle, text: NoteText }),
        response: { 201: t.Object({ id: t.Integer() }), ...errorResponses(400, 404) },
      },
    )
    .post(
      '/tasks/:taskId/notes/:id/messages',
      async ({ params, body, caller, set }) => {
        const text = nonBlank('text', body.text)
        await write(deps.store, function* () {
          return yield* addMessage(deps.clock, yield* taskNote(caller, params.taskId, Number(params.id)), textToNoteHtml(text), actor(caller))
        })
        set.status = 201
        return { id: Number(params.id) }
      },
      {
        userCall: true,
        params: t.Object({ ...TaskParams, id: IdParam }),
        body: t.Object({ text: NoteText }),
        response: { 201: t.Object({ id: t.Integer() }), ...errorResponses(400, 404) },
      },
    )
    .patch(
      '/tasks/:taskId/notes/:id',
      async ({ params, body, caller }) => {
        const patch = { ...body, ...(body.title === undefined ? {} : { title: nonBlank('title', body.title) }) }
        await write(deps.store, function* () {
          return yield* updateNote(deps.clock, yield* taskNote(caller, params.taskId, Number(params.id)), patch, actor(caller))
        })
        return { id: Number(params.id) }
      },
      {
        userCall: true,
        params: t.Object({ ...TaskParams, id: IdParam }),
        body: UpdateNoteBody,
        response: { 200: t.Object({ id: t.Integer() }), ...errorResponses(400, 404) },
      },
    )
}
