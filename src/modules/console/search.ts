/**
 * Console search: a collection's records by id and by a field's value (the collection page's form), and the header's
 * search box, `/search?q=` — projects, records (by id), workflows and people, each only as far as the signed-in
 * person may see them through the pages themselves: member projects (every project for instance administrators),
 * records of the collections a team they can open may read, those teams' workflows, and people where a page
 * lists them (instance administrators: everyone; a project's admins: its members). Bounded: a query of at least
 * MIN_QUERY characters, at most RESULTS_PER_KIND results of each kind; record ids listed are logged as the
 * collection page logs them (`index`).
 */
import { Elysia } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { html, type Html } from '../../console/html.ts'
import { layout } from '../../console/page.ts'
import { invalidParameter, MAX_FILTER_LENGTH, MAX_NAME_LENGTH, parseStringParameter, type Query } from '../../http/list.ts'
import { unstorableTextProblem } from '../../lib/storable-text.ts'
import { canReachRendering, collectionAccess, listProjects, projectPeople, projectsOf } from '../directory/projects.ts'
import { findMatchingRecordIds, logRecordView, projectCollections, projectLayout, type RecordSearch, renderingWorkflows } from '../records/service.ts'
import { userProjectValue } from '../members/service.ts'
import { listUsers } from '../users/service.ts'
import { type ConsoleUser, openableProject } from './access.ts'
import { recordPath } from './links.ts'
import { consolePage, projectPath, renderingPath } from './page.ts'
import { type Op } from '../../db/op.ts'
import { read } from '../../db/read.ts'
import { write } from '../../db/write.ts'

export const MIN_QUERY = 2
export const MAX_QUERY = MAX_NAME_LENGTH
export const RESULTS_PER_KIND = 10

/** A search text from the query string: at most `max` characters, storable (no U+0000, no lone surrogate). */
function searchText(query: Query, name: string, max: number): string | undefined {
  const value = parseStringParameter(query, name, max)
  const problem = value === undefined ? null : unstorableTextProblem(value)
  if (problem) throw invalidParameter(name, problem)
  return value
}

/** A collection page's search: `q` (a part of the id), `field` and `value` (a top-level field equal to the value); undefined: none. */
export function parseRecordSearch(query: Query): RecordSearch | undefined {
  const idContains = searchText(query, 'q', MAX_QUERY)
  const field = searchText(query, 'field', MAX_NAME_LENGTH)
  const value = searchText(query, 'value', MAX_FILTER_LENGTH)
  if (field !== undefined && value === undefined) throw invalidParameter('value', 'is required with field')
  if (value !== undefined && field === undefined) throw invalidParameter('field', 'is required with value')
  if (idContains === undefined && field === undefined) return undefined
  return { ...(idContains === undefined ? {} : { idContains }), ...(field === undefined ? {} : { field: { name: field, value: value! } }) }
}

/** The collection page's search form, filled with the search shown. */
export function recordSearchForm(query: Query): Html {
  return html`<form method="get" class="filters" id="record-search" role="search"><label class="check">Id contains <input name="q" value="${query.q ?? ''}" maxlength="${MAX_QUERY}"></label>
<label class="check">Field <input name="field" value="${query.field ?? ''}" maxlength="${MAX_NAME_LENGTH}" size="10"></label> <label class="check">equals <input name="value" value="${query.value ?? ''}" maxlength="${MAX_FILTER_LENGTH}" size="12"></label>
<button type="submit">Search</button></form>`
}

const contains = (text: string, part: string) => text.toLowerCase().includes(part.toLowerCase())

interface Found {
  href?: string
  label: string
  detail: string
}

interface Results {
  projects: Found[]
  records: Found[]
  workflows: Found[]
  people: Found[]
}

/**
 * Every project the user is a member of and may open now (an SSO project only in an SSO session), with its
 * environments and the teams the user can open (their own first).
 */
function* reachableProjects(user: ConsoleUser) {
  const out = []
  for (const { name } of yield* projectsOf(user.id)) {
    const opened = yield* openableProject(user, name)
    if (opened === null) continue
    const { project, isAdmin } = opened
    const { environments, teams } = yield* projectLayout(project.id)
    const reachable = []
    for (const team of teams) if (yield* canReachRendering({ userId: user.id, projectId: project.id, teamId: team.id })) reachable.push(team)
    // Their own teams first: a record found is linked as the first team that may read it.
    const own = new Set((yield* userProjectValue(project.id, user.id)).teams.map((t) => t.name))
    reachable.sort((a, b) => Number(own.has(b.name)) - Number(own.has(a.name)))
    out.push({ project, isAdmin, environments, teams: reachable })
  }
  return out
}

/** A collection in an environment that a team the user can open may read: where records found are linked and logged. */
interface ReadablePlace {
  environmentId: number
  collectionId: number
  teamId: number
  place: { project: string; environment: string; team: string; collection: string }
}

/** What `q` finds that the user may see (at most RESULTS_PER_KIND of each kind), records aside: those are looked for in `places`. */
function* searchVisible(user: ConsoleUser, q: string): Op<{ results: Results; places: ReadablePlace[] }> {
  const results: Results = { projects: [], records: [], workflows: [], people: [] }
  const full = (list: Found[]) => list.length >= RESULTS_PER_KIND
  const projects = yield* reachableProjects(user)
  const memberOf = new Set(projects.map((p) => p.project.id))
  for (const p of projects) if (contains(p.project.name, q) && !full(results.projects)) results.projects.push({ href: projectPath(p.project.name), label: p.project.name, detail: p.isAdmin ? 'admin' : 'member' })
  if (user.isInstanceAdmin) {
    for (const p of yield* listProjects()) {
      if (!memberOf.has(p.id) && contains(p.name, q) && !full(results.projects)) results.projects.push({ href: projectPath(p.name, 'settings'), label: p.name, detail: 'settings (you are not a member)' })
    }
  }

  // Records and workflows: through each team the user can open, the collections it may read.
  const places: ReadablePlace[] = []
  for (const { project, isAdmin, environments, teams } of projects) {
    const collections = yield* projectCollections(project.id)
    for (const team of teams) {
      const readable = []
      for (const c of collections) if ((yield* collectionAccess({ userId: user.id, projectId: project.id, teamId: team.id, collectionId: c.id })).read) readable.push(c)
      for (const environment of environments) {
        for (const c of readable) {
          // One team per collection and environment is enough to link a record.
          if (!places.some((x) => x.environmentId === environment.id && x.collectionId === c.id)) {
            places.push({ environmentId: environment.id, collectionId: c.id, teamId: team.id, place: { project: project.name, environment: environment.name, team: team.name, collection: c.name } })
          }
        }
        if (full(results.workflows)) continue
        for (const w of yield* renderingWorkflows(environment.id, team.id)) {
          if (!contains(w.name, q) || full(results.workflows)) continue
          const href = isAdmin ? renderingPath(project.name, environment.name, team.name, 'w', w.name) : `${renderingPath(project.name, environment.name, team.name)}#workflows`
          results.workflows.push({ href, label: w.name, detail: `${project.name} · ${environment.name} · ${team.name} · on ${w.collectionName}` })
        }
      }
    }
  }
  // People, where a page lists them: everyone for instance administrators, a project's members for its admins.
  const seen = new Set<number>()
  const person = (id: number, email: string, detail: string, href: string) => {
    if (seen.has(id) || full(results.people)) return
    seen.add(id)
    results.people.push({ href, label: email, detail })
  }
  if (user.isInstanceAdmin) {
    for (const u of yield* listUsers()) if (contains(u.email, q) || contains(u.username, q)) person(u.id, u.email, u.username, '/admin/users')
  }
  for (const { project, isAdmin } of projects) {
    if (!isAdmin) continue
    for (const m of yield* projectPeople(project.id)) if (contains(m.email, q)) person(m.id, m.email, `${m.role} of ${project.name}`, projectPath(project.name, 'settings'))
  }
  return { results, places }
}

/** The records whose id contains `q` in `places` (at most RESULTS_PER_KIND), logged as listed (`index`) in the same transaction. */
function* findRecordsIn(deps: AppDeps, user: ConsoleUser, places: ReadablePlace[], q: string): Op<Found[]> {
  if (places.length === 0) return []
  const found = yield* findMatchingRecordIds(places, q, RESULTS_PER_KIND)
  for (const at of places) {
    const shown = found.filter((r) => r.environmentId === at.environmentId && r.collectionId === at.collectionId).map((r) => r.recordKey)
    yield* logRecordView(deps.clock, { environmentId: at.environmentId, collectionId: at.collectionId, userId: user.id, teamId: at.teamId, action: 'index', recordIds: shown })
  }
  return found.map((r) => {
    const { place } = places.find((x) => x.environmentId === r.environmentId && x.collectionId === r.collectionId)!
    return { href: recordPath(place, r.recordKey), label: r.recordKey, detail: `${place.collection} · ${place.project} · ${place.environment}` }
  })
}

function section(title: string, id: string, found: Found[]): Html {
  return html`<h2>${title}</h2>
${found.length === 0 ? html`<p class="muted">None found.</p>` : html`<ul class="search-results" id="${id}">${found.map((f) => html`<li>${f.href ? html`<a href="${f.href}">${f.label}</a>` : f.label} <span class="muted">${f.detail}</span></li>`)}</ul>`}`
}

export function searchPages(deps: AppDeps) {
  return new Elysia({ name: 'console-search', detail: { hide: true } }).get(
    '/search',
    consolePage(deps, async ({ user, query }) => {
      const q = searchText(query, 'q', MAX_QUERY)?.trim()
      if (q !== undefined && q.length < MIN_QUERY) throw invalidParameter('q', `must be at least ${MIN_QUERY} characters`)
      let results: Results | null = null
      if (q !== undefined) {
        const visible = await read(deps.store, searchVisible(user, q))
        // Only the records' read and its log entries in a write: a short transaction.
        results = { ...visible.results, records: await write(deps.store, () => findRecordsIn(deps, user, visible.places, q)) }
      }
      return layout({
        title: q === undefined ? 'Search' : `Search: ${q}`,
        user,
        crumbs: [{ label: 'Projects', href: '/' }, { label: 'Search' }],
        body: html`<form method="get" action="/search" class="filters" role="search"><label class="check">Find <input name="q" value="${q ?? ''}" minlength="${MIN_QUERY}" maxlength="${MAX_QUERY}" required></label> <button type="submit">Search</button></form>
<p class="muted">Projects, records (by id), workflows and people you may see; at most ${RESULTS_PER_KIND} of each. To search a collection's records by a field's value, open the collection.</p>
${results ? html`${section('Projects', 'found-projects', results.projects)}${section('Records', 'found-records', results.records)}${section('Workflows', 'found-workflows', results.workflows)}${section('People', 'found-people', results.people)}` : ''}`,
      })
    }),
  )
}
