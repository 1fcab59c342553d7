/**
 * Where the console's pages are, as links: a run, a record (its id is user-typed: every segment is encoded, so `/`,
 * spaces and `%` stay in the id), a workflow; the place of each run's workflow, read once for a whole list; and the
 * breadcrumbs that name the path to a page (Projects › project › environment · team › collection › record).
 */
import { html, type Html, path } from '../../console/html.ts'
import type { Crumb } from '../../console/page.ts'
import type { Op } from '../../db/op.ts'
import { workflowPlacesById } from '../workflows/service.ts'
import { projectPath, renderingPath } from './page.ts'
import { ALLOW_LIST_PAGE } from '../../lib/outbound/policy.ts'

/** A workflow's place by names: a record of its collection is at `recordPath(place, id)`. */
export interface WorkflowPlace {
  project: string
  environment: string
  team: string
  collection: string
}

export const runPath = (runId: string) => path('runs', runId)

export const collectionPath = (p: WorkflowPlace, ...rest: string[]) => renderingPath(p.project, p.environment, p.team, 'c', p.collection, ...rest)

export const recordPath = (p: WorkflowPlace, recordId: string) => collectionPath(p, 'r', recordId)

/** A run id as a link (shortened to its first 8 characters; the title holds all of it). */
export const runLink = (runId: string, label = runId.slice(0, 8)): Html => html`<a class="mono run-link" href="${runPath(runId)}" title="${runId}">${label}</a>`

/** A record id as a link to its page, when its place is known; as text otherwise. */
export function recordLink(place: WorkflowPlace | undefined, recordId: string): Html {
  return place ? html`<a class="mono record-link" href="${recordPath(place, recordId)}">${recordId}</a>` : html`<span class="mono">${recordId}</span>`
}

/** An error message, with a link to the outbound allow-list after it when it is a refused destination (it names the page). */
export function withAllowListLink(message: string): Html {
  return message.includes(ALLOW_LIST_PAGE) ? html`${message} <a class="allow-list-link" href="${ALLOW_LIST_PAGE}">Open the outbound allow-list</a>` : html`${message}`
}

/** The places of workflows by workflow id: these ones (a list's runs'), or every one of an environment. */
export function* workflowPlaces(which: number[] | { environmentId: number }): Op<Map<number, WorkflowPlace & { name: string }>> {
  if (Array.isArray(which) && which.length === 0) return new Map()
  const found = yield* workflowPlacesById(Array.isArray(which) ? { ids: [...new Set(which)] } : which)
  return new Map(found.map((p) => [p.id, p]))
}

/** The breadcrumbs down to a rendering (environment · team), a collection and a record, as far as given. */
export function placeCrumbs(p: { project: string; environment?: string; team?: string; collection?: string; record?: string }, ...more: Crumb[]): Crumb[] {
  const crumbs: Crumb[] = [{ label: 'Projects', href: '/' }, { label: p.project, href: projectPath(p.project) }]
  if (p.environment !== undefined && p.team !== undefined) {
    crumbs.push({ label: `${p.environment} · ${p.team}`, href: renderingPath(p.project, p.environment, p.team) })
    const place = { project: p.project, environment: p.environment, team: p.team, collection: p.collection ?? '' }
    if (p.collection !== undefined) crumbs.push({ label: p.collection, href: collectionPath(place) })
    if (p.collection !== undefined && p.record !== undefined) crumbs.push({ label: p.record, href: recordPath(place, p.record) })
  }
  return [...crumbs, ...more]
}
