/**
 * Console: the instance administrators' pages (people, projects), a project's settings page for whoever may manage
 * it (its admins, instance administrators), and the invitation page. Every form calls the management API
 * (/v1/instance/…, /v1/projects, /v1/project/{p}/…) with the session, so the rules, validation and admin log
 * entries are the API's — and the CLI's and apply's, which call the same services.
 */
import { Elysia } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { PERMISSION_LEVEL_RIGHTS, PERMISSION_LEVELS, type PermissionLevel } from '../../lib/access.ts'
import { html, type Html, path, scrollingTable } from '../../console/html.ts'
import { requireInstanceAdmin, requireProjectManager } from '../auth/service.ts'
import { asHttpError } from '../../http/errors.ts'
import { toIso } from '../../lib/time.ts'
import { renderAdminLogs } from '../admin-logs/service.ts'
import { instanceUserView } from '../directory/users.ts'
import { projectCollections, projectLayout } from '../records/service.ts'
import { invitedUser } from '../users/invitations.ts'
import { listUsers } from '../users/service.ts'
import { listProjects, projectPeople } from '../directory/projects.ts'
import { instanceLogIds } from '../admin-logs/instance.ts'
import type { AdminLogResource } from '../admin-logs/service.ts'
import { ALLOW_LIST_STALE_MS, outboundAllowView } from '../instance/outbound-allow.ts'
import { ALLOW_LIST_PAGE } from '../../lib/outbound/policy.ts'
import type { ConsoleUser } from './access.ts'
import { adminTable } from './logs.ts'
import { htmlResponse, layout } from '../../console/page.ts'
import { consolePage, projectPath, when } from './page.ts'
import { type Op } from '../../db/op.ts'
import { read } from '../../db/read.ts'
import { describeSmtpServer } from '../../lib/mail.ts'
import { recentMailFailures } from '../mail/service.ts'

const asCaller = (user: ConsoleUser) => ({ user, viaSso: user.viaSso, tokenProjectId: null, token: null })
const apiProject = (project: string, ...rest: string[]) => path('v1', 'project', project, ...rest)
const ADMIN_CRUMBS = [{ label: 'Projects', href: '/' }]

/** The once-shown link panel of the invitation forms: e-mailed too when the instance sends mail. */
const invitationPanel = (mailed: boolean) => html`<div id="invitation-once" class="once" hidden><p><strong>${
  mailed ? 'This link was e-mailed to the person. It is also shown here only once (to hand it over another way): it works once, for 7 days.' : 'Send this link to the person: it is shown only once, works once, for 7 days.'
}</strong></p>
<p><code class="value" id="invitation-value"></code> <button type="button" data-copy="#invitation-value">Copy</button></p>
<p><a href="/admin/users">Done</a></p></div>`

/** The instance's mail, for its administrators: where it goes (never the SMTP user or password), and what was given up on. */
function* mailSection(deps: AppDeps): Op<Html> {
  const mail = deps.config.mail
  if (mail === null) return html`<h2>E-mail</h2><p class="muted">No SMTP server is configured (TRELLIS_SMTP_URL): Trellis sends no mail, invitation links are only shown here, and the inbox is the only channel for tasks.</p>`
  const failed = yield* recentMailFailures()
  return html`<h2>E-mail</h2><p>Sent through <code>${describeSmtpServer(mail.smtpUrl)}</code> from <code>${mail.from}</code>.</p>
${failed.length === 0 ? html`<p class="muted">No message failed in the last 30 days.</p>` : scrollingTable(html`<table class="mail-failures"><caption>Messages given up on</caption><thead><tr><th>When</th><th>To</th><th>Kind</th><th>Attempts</th><th>Last error</th></tr></thead><tbody>
${failed.map((m) => html`<tr><td>${when(m.finishedAt === null ? null : toIso(m.finishedAt))}</td><td>${m.recipient}</td><td>${m.kind}</td><td>${m.attempts}</td><td>${m.lastError ?? ''}</td></tr>`)}
</tbody></table>`)}`
}

/** A form that PUTs a user's whole state with one field changed (the API takes all three). */
function userStateForm(u: ReturnType<typeof instanceUserView>, change: Partial<{ instanceAdmin: boolean; deactivated: boolean }>, label: string, done: string, confirm?: string): Html {
  const state = { instanceAdmin: u.instanceAdmin, deactivated: u.deactivated, ...change }
  return html`<form class="inline" data-api data-method="PUT" action="/v1/instance/users/${u.id}" data-done="${done}"${confirm ? html` data-confirm="${confirm}"` : ''}>
<input type="hidden" name="username" value="${u.username}"><input type="hidden" name="instanceAdmin" data-type="boolean" value="${String(state.instanceAdmin)}"><input type="hidden" name="deactivated" data-type="boolean" value="${String(state.deactivated)}">
<button type="submit">${label}</button><span class="form-error" role="alert"></span></form>`
}

function* instanceLog(resource?: AdminLogResource): Op<Html> {
  return adminTable(yield* renderAdminLogs((yield* instanceLogIds(50, resource))))
}

/** The outbound allow-list page's body: the list in effect, its form (read-only while TRELLIS_HTTP_ALLOW sets it), its changes. */
function* outboundBody(deps: AppDeps): Op<Html> {
  const view = yield* outboundAllowView(deps.config)
  const lines = (entries: string[]) => (entries.length === 0 ? html`<p class="muted">None: only public addresses are reached.</p>` : html`<ul class="allow-entries">${entries.map((e) => html`<li><code>${e}</code></li>`)}</ul>`)
  const list = view.setByEnvironment
    ? html`<p class="notice" id="allow-from-environment">Set by <code>TRELLIS_HTTP_ALLOW</code> in the server's environment: that list is in effect on this instance and cannot be changed here. Change the variable and restart the server, or unset it to keep the list here.</p>
<h2>In effect</h2>${lines(view.entries)}
${view.storedEntries.length > 0 ? html`<h2>Kept here, not in use</h2>${lines(view.storedEntries)}` : ''}`
    : html`<form id="outbound-allow" data-api data-method="PUT" action="/v1/instance/outbound-allow" data-done="Outbound allow-list saved.">
<label>Hosts, addresses and ranges, one per line <textarea name="entries" data-type="lines" rows="8" cols="40" spellcheck="false" autocapitalize="off" aria-describedby="allow-help">${view.entries.join('\n')}</textarea></label>
<p class="muted" id="allow-help">A host name (<code>hooks.internal</code>: opened whatever it resolves to), an address (<code>127.0.0.1</code>, <code>::1</code>) or a CIDR range (<code>10.1.0.0/16</code>). In effect at once, no restart; other instances sharing the database follow within ${ALLOW_LIST_STALE_MS / 1000} seconds.</p>
<p class="form-error" role="alert"></p>
<button type="submit">Save</button>
</form>`
  return html`<p>Workflows' <code>http</code> steps and completion callbacks reach public addresses only: loopback, private, link-local and other special-purpose addresses are refused unless this list opens them — a service on this host or your network, for instance.</p>
${list}
<h2>Changes</h2>
<div id="outbound-log" data-refresh>${yield* instanceLog('outbound-allow')}</div>`
}

export function adminPages(deps: AppDeps) {
  return new Elysia({ name: 'console-admin', detail: { hide: true } })
    .get(
      '/admin/users',
      consolePage(deps, async ({ user }) => {
        requireInstanceAdmin(asCaller(user))
        const people = (await read(deps.store, listUsers())).map(instanceUserView)
        return layout({
          title: 'People',
          user,
          crumbs: ADMIN_CRUMBS,
          body: html`<p>Everyone who can sign in to this instance. <a href="/admin/projects">Projects →</a> <a href="${ALLOW_LIST_PAGE}">Outbound allow-list →</a></p>
<h2>Add a person</h2>
<form id="new-user" data-api action="/v1/instance/users" data-show="#invitation-once" data-show-field="invitation.url" data-done="Person added.">
<label>Email <input name="email" type="email" required maxlength="320"></label>
<label>Name <input name="username" required maxlength="100"></label>
<label>Password <input name="password" type="password" data-optional minlength="12" maxlength="1024" autocomplete="new-password"> <span class="muted">(empty: an invitation link is made instead, to send them)</span></label>
<label>Instance administrator <select name="instanceAdmin" data-type="boolean"><option value="false">no</option><option value="true">yes</option></select></label>
<p class="form-error" role="alert"></p>
<button type="submit">Add</button>
</form>
${invitationPanel(deps.mail !== null)}
<h2>People</h2>
<div id="people-list" data-refresh>${scrollingTable(html`<table class="people"><thead><tr><th>Email</th><th>Name</th><th>Instance admin</th><th>State</th><th>Created</th><th>Actions</th></tr></thead><tbody>
${people.map(
  (u) => html`<tr data-email="${u.email}"><td>${u.email}</td><td>${u.username}</td><td>${u.instanceAdmin ? 'yes' : 'no'}</td>
<td>${u.deactivated ? 'deactivated' : u.hasPassword ? 'active' : 'invited (no password yet)'}</td><td>${when(u.createdAt)}</td>
<td>${
    u.instanceAdmin
      ? userStateForm(u, { instanceAdmin: false }, 'Revoke instance admin', `${u.email} is no longer an instance administrator.`, `Revoke instance administration from ${u.email}? They can no longer manage people and projects.`)
      : userStateForm(u, { instanceAdmin: true }, 'Make instance admin', `${u.email} is now an instance administrator.`)
  }
${
  u.deactivated
    ? userStateForm(u, { deactivated: false }, 'Reactivate', `${u.email} reactivated.`)
    : userStateForm(u, { deactivated: true }, 'Deactivate', `${u.email} deactivated.`, `Deactivate ${u.email}? Their sessions end and their tokens are refused.`)
}
${u.deactivated ? '' : html`<form class="inline" data-api action="/v1/instance/users/${u.id}/invitation" data-show="#invitation-once" data-show-field="url" data-confirm="Make a new invitation link for ${u.email}? Any earlier link stops working." data-done="New invitation link made for ${u.email}: send it below."><button type="submit">New invitation link</button><span class="form-error" role="alert"></span></form>`}</td></tr>`,
)}
</tbody></table>`, { rowActions: true })}</div>
<h2>Instance admin log</h2>
<p class="muted">People, invitations and instance settings (each project's own changes are in its admin log).</p>
<div id="instance-log" data-refresh>${(await read(deps.store, instanceLog()))}</div>
${(await read(deps.store, mailSection(deps)))}`,
        })
      }),
    )
    .get(
      ALLOW_LIST_PAGE,
      consolePage(deps, async ({ user }) => {
        requireInstanceAdmin(asCaller(user))
        return layout({ title: 'Outbound allow-list', user, crumbs: ADMIN_CRUMBS, body: await read(deps.store, outboundBody(deps)) })
      }),
    )
    .get(
      '/admin/projects',
      consolePage(deps, async ({ user }) => {
        requireInstanceAdmin(asCaller(user))
        const all = await read(deps.store, listProjects())
        return layout({
          title: 'All projects',
          user,
          crumbs: ADMIN_CRUMBS,
          body: html`<h2>Create a project</h2>
<form id="new-project" data-api action="/v1/projects" data-next="/p/{name}/settings" data-done="Project created: add its environments, teams and collections here.">
<label>Name <input name="name" required maxlength="200"></label>
<p class="muted">You become its first admin.</p>
<p class="form-error" role="alert"></p>
<button type="submit">Create</button>
</form>
<h2>Projects</h2>
${all.length === 0 ? html`<p class="muted">No project yet.</p>` : scrollingTable(html`<table><thead><tr><th>Project</th><th>SSO</th><th>Created</th><th>Actions</th></tr></thead><tbody>
${all.map((p) => html`<tr><td>${p.name}</td><td>${p.sso ? 'on' : 'off'}</td><td>${when(toIso(p.createdAt))}</td><td><a href="${projectPath(p.name, 'settings')}">Settings</a> · <a href="${projectPath(p.name)}">Open</a></td></tr>`)}
</tbody></table>`, { rowActions: true })}
<p><a href="/admin/users">People →</a></p>`,
        })
      }),
    )
    .get(
      '/p/:project/settings',
      consolePage(deps, async ({ user, params }) => {
        const project = await read(deps.store, requireProjectManager(asCaller(user), params.project!))
        return layout({
          title: `Settings · ${project.name}`,
          user,
          crumbs: [{ label: 'Projects', href: '/' }, { label: project.name, href: projectPath(project.name) }],
          body: (await read(deps.store, settingsBody(project, user.isInstanceAdmin, deps.config.oidc !== null))),
        })
      }),
    )
    .get('/invite', async ({ request }) => {
      const token = new URL(request.url).searchParams.get('token') ?? ''
      try {
        const { user } = await read(deps.store, invitedUser(deps.clock, token))
        return htmlResponse(
          layout({
            title: 'Welcome to Trellis',
            body: html`<p>Choose a password for <strong>${user.email}</strong>; you are then signed in.</p>
<form id="accept-invitation" data-api action="/auth/invitation" data-next="/" data-done="Password set: you are signed in.">
<input type="hidden" name="token" value="${token}">
<label>Password (at least 12 characters) <input name="password" type="password" autocomplete="new-password" required minlength="12" maxlength="1024"></label>
<p class="form-error" role="alert"></p>
<button type="submit">Set password and sign in</button>
</form>`,
          }),
        )
      } catch (caught) {
        const error = asHttpError(caught)
        if (!error) throw caught
        return htmlResponse(layout({ title: 'Invitation not valid', body: html`<p class="error">${error.message}</p><p><a href="/login">Sign in</a></p>` }), error.status)
      }
    })
}

const capitalized = (word: string) => word.charAt(0).toUpperCase() + word.slice(1)

/** A table of one kind of part with an add form and a rename form per row (and `more`: a link of the row's own). */
function partSection(projectName: string, kind: { title: string; one: string; path: string; field: string }, names: string[], more?: (name: string) => Html): Html {
  return html`<h2>${kind.title}</h2>
${scrollingTable(html`<table><tbody>${names.map(
    (name) => html`<tr><td>${name}</td><td><form class="inline" data-api data-method="PATCH" action="${apiProject(projectName, kind.path, name)}" data-done="${capitalized(kind.one)} ${name} renamed.">
<input name="${kind.field}" value="${name}" required maxlength="200" aria-label="New name of ${name}"> <button type="submit">Rename</button><span class="form-error" role="alert"></span></form></td>${more ? html`<td>${more(name)}</td>` : ''}</tr>`,
  )}</tbody></table>`)}
<form class="add-${kind.path}" data-api action="${apiProject(projectName, kind.path)}" data-done="${capitalized(kind.one)} added.">
<label>New ${kind.one} <input name="${kind.field}" required maxlength="200"></label> <button type="submit">Add</button>
<span class="form-error" role="alert"></span></form>`
}

/** `ssoConfigured`: the instance has an identity provider; without one what turning SSO on does is not said (no one could sign in with it). */
function* settingsBody(project: { id: number; name: string; sso: boolean }, instanceAdmin: boolean, ssoConfigured: boolean): Op<Html> {
  const { environments, teams } = yield* projectLayout(project.id)
  const collections = yield* projectCollections(project.id)
  const people = yield* projectPeople(project.id)
  const everyone = (yield* listUsers()).filter((u) => u.disabledAt === null && !people.some((p) => p.id === u.id))
  const name = project.name
  const roleSelect = (role: PermissionLevel | null) =>
    html`<select name="role" aria-label="Permission level" aria-describedby="permission-levels">${PERMISSION_LEVELS.map((r) => html`<option${r === role ? html` selected` : ''}>${r}</option>`)}</select>`
  return html`<p><a href="${projectPath(name, 'admin-log')}">Admin log</a> · <a href="${projectPath(name, 'api-access')}">API access</a>${instanceAdmin ? html` · <a href="/admin/projects">All projects</a>` : ''}</p>
<h2>Project</h2>
<form id="project-settings" data-api data-method="PUT" action="${apiProject(name, 'settings')}" data-next="/p/{name}/settings" data-done="Project settings saved.">
<label>Name <input name="projectName" value="${name}" required maxlength="200"></label>
<label>Single sign-on <select name="sso" data-type="boolean"><option value="false"${project.sso ? '' : html` selected`}>off</option><option value="true"${project.sso ? html` selected` : ''}>on</option></select></label>
${ssoConfigured ? html`<p class="warning" id="sso-warning">Turning SSO <strong>on</strong>: from the next request every token of this project that was not generated in an SSO session is refused (403 sso_required), and password sessions can no longer open the project — yours included, unless you signed in with SSO. The tokens are not deleted: turning SSO off again makes them work again.</p>` : ''}
<p class="warning">Renaming changes the project's name in API paths and apply files (an apply file naming the old name would create a new project); tokens, members and webhook URLs stay.</p>
<p class="form-error" role="alert"></p>
<button type="submit">Save</button>
</form>
${partSection(name, { title: 'Environments', one: 'environment', path: 'environments', field: 'environmentName' }, environments.map((e) => e.name))}
${partSection(name, { title: 'Teams', one: 'team', path: 'teams', field: 'teamName' }, teams.map((t) => t.name))}
${partSection(name, { title: 'Collections', one: 'collection', path: 'collections', field: 'collectionName' }, collections.map((c) => c.name), (c) => html`<a href="${projectPath(name, 'settings', 'collections', c)}">Schema of ${c}</a>`)}
<h2>Members</h2>
<dl id="permission-levels" class="levels">${PERMISSION_LEVELS.map((level) => html`<dt>${level}</dt><dd>${PERMISSION_LEVEL_RIGHTS[level]}</dd>`)}</dl>
${scrollingTable(html`<table class="members"><thead><tr><th>Email</th><th>Permission level</th><th>Teams</th><th>Actions</th></tr></thead><tbody>
${people.map(
  (p) => html`<tr data-email="${p.email}"><td>${p.email}</td>
<td><form class="inline" data-api data-method="PUT" action="${apiProject(name, 'members', String(p.id))}" data-done="Permission level of ${p.email} set.">${roleSelect(p.role)} <button type="submit">Set</button><span class="form-error" role="alert"></span></form></td>
<td>${p.teams.map((t) => html`<form class="inline" data-api data-method="DELETE" action="${apiProject(name, 'teams', t, 'members', String(p.id))}" data-confirm="Remove ${p.email} from team ${t}?" data-done="${p.email} removed from team ${t}.">${t} <button type="submit" title="Remove from ${t}" aria-label="Remove ${p.email} from team ${t}">×</button><span class="form-error" role="alert"></span></form> `)}
${teams.some((t) => !p.teams.includes(t.name)) ? html`<form class="inline add-to-team" data-api data-method="PUT" action="${apiProject(name, 'teams')}/{teamName}/members/${p.id}" data-done="${p.email} added to the team."><select data-path="teamName" aria-label="Team">${teams.filter((t) => !p.teams.includes(t.name)).map((t) => html`<option>${t.name}</option>`)}</select> <button type="submit">Add to team</button><span class="form-error" role="alert"></span></form>` : ''}</td>
<td><form class="inline" data-api data-method="DELETE" action="${apiProject(name, 'members', String(p.id))}" data-confirm="Remove ${p.email} from ${name}? They leave its teams too." data-done="${p.email} removed from ${name}."><button type="submit" class="danger">Remove</button><span class="form-error" role="alert"></span></form></td></tr>`,
)}
</tbody></table>`, { rowActions: true })}
${everyone.length === 0 ? html`<p class="muted">Everyone active is a member.${instanceAdmin ? html` <a href="/admin/users">Add a person</a> first.` : ''}</p>` : html`<form id="add-member" data-api data-method="PUT" action="${apiProject(name, 'members')}/{userId}" data-done="Member added.">
<label>Person <select data-path="userId">${everyone.map((u) => html`<option value="${u.id}">${u.email}</option>`)}</select></label>
<label>Permission level ${roleSelect('user')}</label>
<p class="form-error" role="alert"></p>
<button type="submit">Add member</button></form>`}`
}
