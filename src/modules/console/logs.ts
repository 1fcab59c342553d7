/**
 * Console: an environment's activity log and notes, a project's admin log (project admins, like the API). Lists
 * take the API's filters from the query string, through the same parsers, and page with `createdAt.lt`. They show
 * every entry, Trellis's extensions included (the API lists those only with `extensions=true`).
 */
import { Elysia } from 'elysia'
import type { Answer } from '../../db/op.ts'
import type { AppDeps } from '../../deps.ts'
import { html, type Html, trustedHtml, scrollingTable } from '../../console/html.ts'
import { page, parseDateFilters, parseRecordFilters } from '../../http/list.ts'
import { ACTIVITY_DATE_FIELDS, parseActivityFilters } from '../activity-logs/query.ts'
import { listActivityLogIds, renderActivityLogs } from '../activity-logs/service.ts'
import { ADMIN_LOG_DATE_FIELDS, parseAdminLogFilters } from '../admin-logs/query.ts'
import { listAdminLogIds, renderAdminLogs } from '../admin-logs/service.ts'
import { NOTE_DATE_FIELDS } from '../notes/model.ts'
import { listNoteIds, renderNotes } from '../notes/service.ts'
import { adminEnvironment, adminProject } from './access.ts'
import { actorWithoutUser, adminLogValue } from './log-values.ts'
import { layout } from '../../console/page.ts'
import { type ConsoleRequest, consolePage, olderLink, projectPath, when } from './page.ts'
import { recordLink } from './links.ts'
import { read, readListed } from '../../db/read.ts'

const PER_PAGE = 50

type ActivityLogView = Answer<ReturnType<typeof renderActivityLogs>>[number]
type AdminLogView = Answer<ReturnType<typeof renderAdminLogs>>[number]
type NoteView = Answer<ReturnType<typeof renderNotes>>[number]

/** Where a list's entries are (project, environment): their record ids link to the records, opened as each entry's team. */
interface ListPlace {
  project: string
  environment: string
}

/** A record id of an entry as a link to the record, seen as the entry's team (as text without a collection). */
function entryRecord(at: ListPlace | undefined, entry: { team: { name: string }; collection?: { name: string } | null }, recordId: string): Html {
  const place = at && entry.collection ? { ...at, team: entry.team.name, collection: entry.collection.name } : undefined
  return recordLink(place, recordId)
}

export function activityTable(entries: ActivityLogView[], options: { record: boolean; at?: ListPlace } = { record: true }): Html {
  if (entries.length === 0) return html`<p class="muted">No entries.</p>`
  return scrollingTable(html`<table class="activity"><thead><tr><th>When (UTC)</th><th>Who</th><th>Team</th><th>Type</th><th>Action</th><th>What</th>${options.record ? html`<th>Records</th>` : ''}<th>Run</th></tr></thead><tbody>
${entries.map(
  (e) => html`<tr><td>${when(e.createdAt)}</td><td>${e.user.email}</td><td>${e.team.name}</td><td>${e.type}</td><td>${e.action}</td><td>${e.label ?? ''}${e.collection ? html` <span class="muted">(${e.collection.name})</span>` : ''}</td>
${options.record ? html`<td class="records">${e.recordIds.map((id, i) => html`${i > 0 ? ', ' : ''}${entryRecord(options.at, e, id)}`)}</td>` : ''}<td>${e.workflow ? html`<a href="/runs/${encodeURIComponent(e.workflow.runId)}">${e.workflow.name}</a>${e.workflow.stepName ? html` <span class="muted">${e.workflow.stepName}</span>` : ''}` : ''}</td></tr>`,
)}
</tbody></table>`)
}

/** Admin log entries (a project's, or the instance-wide ones on the people page). */
export function adminTable(entries: AdminLogView[]): Html {
  if (entries.length === 0) return html`<p class="muted">No entries.</p>`
  return scrollingTable(html`<table class="admin-log"><thead><tr><th>When (UTC)</th><th>Who</th><th>Initiator</th><th>Type</th><th>Resource</th><th>Before</th><th>After</th></tr></thead><tbody>
${entries.map(
  (e) => html`<tr><td>${when(e.createdAt)}</td><td>${e.user ? e.user.email : actorWithoutUser(e.initiator)}</td><td>${e.initiator}</td><td>${e.type}</td><td>${e.resource}</td><td>${adminLogValue(e.previousValue)}</td><td>${adminLogValue(e.newValue)}</td></tr>`,
)}
</tbody></table>`)
}

/** Notes with their threads; with `actions` (a rendering's path), each gets a Reply box (opened on demand) and archive / unarchive. */
export function notesList(notes: NoteView[], actions?: string, at?: ListPlace): Html {
  if (notes.length === 0) return html`<p class="muted">No notes.</p>`
  return html`${notes.map(
    (n) => html`<article class="note" data-note="${n.id}"><h3>${n.title}${n.archivedAt ? html` <span class="muted">(archived)</span>` : ''}</h3>
<p class="muted">${n.user.email} · ${n.team.name} · record ${entryRecord(at, n, n.recordId)}${n.collection ? ` in ${n.collection.name}` : ''} · ${when(n.createdAt)}</p>
${n.messages.map((m) => html`<div class="message"><p class="muted">${m.user.email} · ${when(m.createdAt)}</p>${trustedHtml(m.content)}</div>`)}
${
  actions
    ? html`<details class="reply"><summary>Reply</summary><form data-api action="${actions}/notes/${n.id}/messages" data-done="Message added."><label>Message <textarea name="text" rows="2" required maxlength="10000"></textarea></label><button type="submit">Add message</button> <span class="form-error" role="alert"></span></form></details>
<form class="inline" data-api data-method="PATCH" action="${actions}/notes/${n.id}" data-done="Note ${n.archivedAt ? 'unarchived' : 'archived'}."><input type="hidden" name="archived" data-type="boolean" value="${n.archivedAt ? 'false' : 'true'}"><button type="submit">${n.archivedAt ? 'Unarchive' : 'Archive'}</button> <span class="form-error" role="alert"></span></form>`
    : ''
}
</article>`,
  )}`
}

/**
 * One list page of entries in createdAt order (activity, notes, admin log): a filter form over the API's query
 * parameters, the rows of one page, and the "Older" link.
 */
async function timeListPage<Item extends { createdAt: string }>(
  request: ConsoleRequest,
  spec: { title: string; project: string; filters: [name: string, label: string][]; ids: number[]; render: (ids: number[]) => Promise<Item[]>; show: (items: Item[]) => Html },
): Promise<Html> {
  const result = await page(spec.ids, PER_PAGE, spec.render, {})
  const { query, url } = request
  return layout({
    title: spec.title,
    user: request.user,
    crumbs: [{ label: 'Projects', href: '/' }, { label: spec.project, href: projectPath(spec.project) }],
    body: html`<form method="get" class="filters">${spec.filters.map(([name, label]) => html`<label class="check">${label} <input name="${name}" value="${query[name] ?? ''}"></label>`)}<button type="submit">Filter</button></form>
${spec.show(result.data)}${olderLink(url, result.hasMore, result.data.at(-1)?.createdAt)}`,
  })
}

export function logPages(deps: AppDeps) {
  return new Elysia({ name: 'console-logs', detail: { hide: true } })
    .get(
      '/p/:project/e/:environment/activity',
      consolePage(deps, async (request) => {
        const filters = parseActivityFilters(request.query, { extensions: true })
        const { project, environment } = await read(deps.store, adminEnvironment(request.user, request.params.project!, request.params.environment!))
        return timeListPage(request, {
          title: `Activity log · ${environment.name}`,
          project: project.name,
          filters: [['recordId', 'Record'], ['userEmail', 'User email'], ['action', 'Action'], ['type', 'Type']],
          ids: (await readListed(deps.store, 'activity_logs', listActivityLogIds(project.id, environment.id, filters, parseDateFilters(request.query, ACTIVITY_DATE_FIELDS), PER_PAGE))),
          render: (ids) => read(deps.store, renderActivityLogs(ids)),
          show: (entries) => activityTable(entries, { record: true, at: { project: project.name, environment: environment.name } }),
        })
      }),
    )
    .get(
      '/p/:project/e/:environment/notes',
      consolePage(deps, async (request) => {
        const filters = parseRecordFilters(request.query)
        const { project, environment } = await read(deps.store, adminEnvironment(request.user, request.params.project!, request.params.environment!))
        return timeListPage(request, {
          title: `Notes · ${environment.name}`,
          project: project.name,
          filters: [['recordId', 'Record'], ['teamName', 'Team']],
          ids: (await readListed(deps.store, 'notes', listNoteIds(project.id, environment.id, filters, parseDateFilters(request.query, NOTE_DATE_FIELDS), PER_PAGE))),
          render: (ids) => read(deps.store, renderNotes(ids)),
          show: (notes) => notesList(notes, undefined, { project: project.name, environment: environment.name }),
        })
      }),
    )
    .get(
      '/p/:project/admin-log',
      consolePage(deps, async (request) => {
        const filters = parseAdminLogFilters(request.query, { extensions: true })
        const project = await read(deps.store, adminProject(request.user, request.params.project!))
        return timeListPage(request, {
          title: `Admin log · ${project.name}`,
          project: project.name,
          filters: [['resource', 'Resource'], ['type', 'Type'], ['userEmail', 'User email']],
          ids: (await read(deps.store, listAdminLogIds(project.id, filters, parseDateFilters(request.query, ADMIN_LOG_DATE_FIELDS), PER_PAGE))),
          render: (ids) => read(deps.store, renderAdminLogs(ids)),
          show: adminTable,
        })
      }),
    )
}
