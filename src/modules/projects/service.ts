/** Looking up projects and environments by their case-sensitive names (404 `not_found` after authentication). */
import { and, eq } from 'drizzle-orm'
import type { Db } from '../../db/open.ts'
import { collections, environments, projects, teams } from '../../db/schema.ts'
import { notFound } from '../../http/errors.ts'

export type Project = typeof projects.$inferSelect
export type Environment = typeof environments.$inferSelect

export function requireProject(db: Db, name: string): Project {
  const project = db.select().from(projects).where(eq(projects.name, name)).get()
  if (!project) throw notFound(`Project ${name} not found`)
  return project
}

export function requireEnvironment(db: Db, projectName: string, environmentName: string): { project: Project; environment: Environment } {
  const project = requireProject(db, projectName)
  const environment = db
    .select()
    .from(environments)
    .where(and(eq(environments.projectId, project.id), eq(environments.name, environmentName)))
    .get()
  if (!environment) throw notFound(`Environment ${environmentName} not found in project ${projectName}`)
  return { project, environment }
}

export function findTeam(db: Db, projectId: number, name: string) {
  return db.select().from(teams).where(and(eq(teams.projectId, projectId), eq(teams.name, name))).get()
}

export function findCollection(db: Db, projectId: number, name: string) {
  return db.select().from(collections).where(and(eq(collections.projectId, projectId), eq(collections.name, name))).get()
}
