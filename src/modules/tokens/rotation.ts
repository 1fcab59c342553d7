/**
 * The spec's token rotation advice (§8: "production every 90 days, development every 180 days") — advice, never
 * enforced: the console shows each token's age and flags the ones past it. A token is held to the production advice
 * when its project has a production environment (a name starting with "prod", any case): a project token reaches
 * every environment of its project, so one production environment is enough. The days are settings
 * (TRELLIS_TOKEN_ROTATION_DAYS_PRODUCTION, TRELLIS_TOKEN_ROTATION_DAYS_DEVELOPMENT).
 */
import { listProjectParts } from '../../db/records.ts'
import type { Op } from '../../db/op.ts'

export interface RotationAdvice {
  productionDays: number
  developmentDays: number
}

const DAY_MS = 86_400_000

export const isProductionEnvironment = (name: string) => /^prod/i.test(name)

/** Whole days from `iso` to `now` (0 on the day itself; never negative). */
export const daysSince = (iso: string, now: number) => Math.max(0, Math.floor((now - Date.parse(iso)) / DAY_MS))

export interface TokenAge {
  days: number
  /** Days since its last use; null: never used. */
  lastUsedDays: number | null
  production: boolean
  adviceDays: number
  /** Older than the advice for its kind of project. */
  overdue: boolean
}

export function tokenAge(token: { createdAt: string; lastUsedAt: string | null }, now: number, production: boolean, advice: RotationAdvice): TokenAge {
  const days = daysSince(token.createdAt, now)
  const adviceDays = production ? advice.productionDays : advice.developmentDays
  return { days, lastUsedDays: token.lastUsedAt === null ? null : daysSince(token.lastUsedAt, now), production, adviceDays, overdue: days > adviceDays }
}

/** Which of these projects have a production environment. */
export function* productionProjects(projectIds: Iterable<number>): Op<Set<number>> {
  const production = new Set<number>()
  for (const id of new Set(projectIds)) {
    if ((yield* listProjectParts('environment', id)).some((e) => isProductionEnvironment(e.name))) production.add(id)
  }
  return production
}
