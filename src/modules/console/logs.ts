/**
 * Console: an environment's activity log and notes, a project's admin log (project admins, like the API). Lists
 * take the API's filters from the query string, through the same parsers, and page with `createdAt.lt`.
 */
import { Elysia } from 'elysia'
import type { AppDeps } from '../../app.ts'
import { html, type Html, trustedHtml } from '../../console/html.ts'
import { page } from '../../http/list.ts'
import { listActivityLogIds, parseActivityFilters, renderActivityLogs } from '../activity-logs/service.ts'
import { listAdminLogIds, parseAdminLogFilters, renderAdminLogs } from '../admin-logs/service.ts'
import { listNoteIds, renderNotes } from '../notes/service.ts'
import { parseRecordFilters } from '../../http/list.ts'
import { adminEnvironment, adminProject } from './access.ts'
import { consolePage, layout, olderLink, projectPath, when } from './page.ts'

const PER_PAGE = 50

type ActivityLogView = ReturnType<typeof renderActivityLogs>[number]
type AdminLogView = ReturnType<typeof renderAdminLogs>[number]
type NoteView = ReturnType<typeof renderNotes>[number]

export function activityTable(entries: ActivityLogView[], options: { record: boolean } = { record: true }): Html {
  if (entries.length === 0) return html`<p class="muted">No entries.</p>`
  return html`<table class="activity"><thead><tr><th>When (UTC)</th><th>Who</th><th>Team</th><th>Type</th><th>Action</th><th>What</th>${options.record ? html`<th>Records</th>` : ''}<th>Run</th></tr></thead><tbody>
${entries.map(
  (e) => html`<tr><td>${when(e.createdAt)}</td><td>${e.user.email}</td><td>${e.team.name}</td><td>${e.type}</td><td>${e.action}</td><td>${e.label ?? ''}${e.collection ? html` <span class="muted">(${e.collection.name})</span>` : ''}</td>
${options.record ? html`<td class="mono">${e.recordIds.join(', ')}</td>` : ''}<td>${e.workflow ? html`<a href="/runs/${encodeURIComponent(e.workflow.runId)}">${e.workflow.name}</a>${e.workflow.stepName ? html` <span class="muted">${e.workflow.stepName}</span>` : ''}` : ''}</td></tr>`,
)}
</tbody></table>`
}

function value(v: unknown): Html | string {
  return v === undefined ? '' : html`<code>${JSON.stringify(v)}</code>`
}

function adminTable(entries: AdminLogView[]): Html {
  if (entries.length === 0) return html`<p class="muted">No entries.</p>`
  return html`<table class="admin-log"><thead><tr><th>When (UTC)</th><th>Who</th><th>Initiator</th><th>Type</th><th>Resource</th><th>Before</th><th>After</th></tr></thead><tbody>
${entries.map(
  (e) => html`<tr><td>${when(e.createdAt)}</td><td>${e.user ? e.user.email : html`<span class="muted">CLI / system</span>`}</td><td>${e.initiator}</td><td>${e.type}</td><td>${e.resource}</td><td>${value(e.previousValue)}</td><td>${value(e.newValue)}</td></tr>`,
)}
</tbody></table>`
}

export function notesList(notes: NoteView[]): Html {
  if (notes.length === 0) return html`<p class="muted">No notes.</p>`
  return html`${notes.map(
    (n) => html`<article class="note"><h3>${n.title}${n.archivedAt ? html` <span class="muted">(archived)</span>` : ''}</h3>
<p class="muted">${n.user.email} · ${n.team.name} · record <span class="mono">${n.recordId}</span>${n.collection ? ` in ${n.collection.name}` : ''} · ${when(n.createdAt)}</p>
${n.messages.map((m) => html`<div class="message"><p class="muted">${m.user.email} · ${when(m.createdAt)}</p>${trustedHtml(m.content)}</div>`)}
</article>`,
  )}`
}

/** A filter form that keeps the page's own query parameters as inputs. */
function filterForm(fields: { name: string; label: string; value?: string }[]): Html {
  return html`<form method="get" class="filters">${fields.map((f) => html`<label class="check">${f.label} <input name="${f.name}" value="${f.value ?? ''}"></label>`)}<button type="submit">Filter</button></form>`
}

export function logPages(deps: AppDeps) {
  const { db } = deps.store
  const crumbs = (project: string) => [{ label: 'Projects', href: '/' }, { label: project, href: projectPath(project) }]
  return new Elysia({ name: 'console-logs', detail: { hide: true } })
    .get(
      '/p/:project/e/:environment/activity',
      consolePage(deps, ({ user, params, query, url }) => {
        const filters = parseActivityFilters(query)
        const { project, environment } = adminEnvironment(db, user, params.project!, params.environment!)
        const result = page(listActivityLogIds(db, project.id, environment.id, filters, query, PER_PAGE), PER_PAGE, (ids) => renderActivityLogs(db, ids), {})
        return layout({
          title: `Activity log · ${environment.name}`,
          user,
          crumbs: crumbs(project.name),
          body: html`${filterForm([
            { name: 'recordId', label: 'Record', value: query.recordId },
            { name: 'userEmail', label: 'User email', value: query.userEmail },
            { name: 'action', label: 'Action', value: query.action },
            { name: 'type', label: 'Type', value: query.type },
          ])}
${activityTable(result.data)}${olderLink(url, result.hasMore, result.data.at(-1)?.createdAt)}`,
        })
      }),
    )
    .get(
      '/p/:project/e/:environment/notes',
      consolePage(deps, ({ user, params, query, url }) => {
        const filters = parseRecordFilters(query)
        const { project, environment } = adminEnvironment(db, user, params.project!, params.environment!)
        const result = page(listNoteIds(db, project.id, environment.id, filters, query, PER_PAGE), PER_PAGE, (ids) => renderNotes(db, ids), {})
        return layout({
          title: `Notes · ${environment.name}`,
          user,
          crumbs: crumbs(project.name),
          body: html`${filterForm([
            { name: 'recordId', label: 'Record', value: query.recordId },
            { name: 'teamName', label: 'Team', value: query.teamName },
          ])}
${notesList(result.data)}${olderLink(url, result.hasMore, result.data.at(-1)?.createdAt)}`,
        })
      }),
    )
    .get(
      '/p/:project/admin-log',
      consolePage(deps, ({ user, params, query, url }) => {
        const filters = parseAdminLogFilters(query)
        const project = adminProject(db, user, params.project!)
        const result = page(listAdminLogIds(db, project.id, filters, query, PER_PAGE), PER_PAGE, (ids) => renderAdminLogs(db, ids), {})
        return layout({
          title: `Admin log · ${project.name}`,
          user,
          crumbs: crumbs(project.name),
          body: html`${filterForm([
            { name: 'resource', label: 'Resource', value: query.resource },
            { name: 'type', label: 'Type', value: query.type },
            { name: 'userEmail', label: 'User email', value: query.userEmail },
          ])}
${adminTable(result.data)}${olderLink(url, result.hasMore, result.data.at(-1)?.createdAt)}`,
        })
      }),
    )
}
