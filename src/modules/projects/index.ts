/**
 * Project management: a project's name and SSO, its environments, teams and collections, its members (permission
 * level, teams) and its records. For the project's admins and instance administrators (requireProjectManager); a
 * token with the `all` scope of an admin works within its project. A record's `PUT` also lets a member write through a
 * team of theirs that may edit the collection (the console's record forms). Every change goes through the services `trellis
 * apply` uses, with the same validation and admin log entries.
 */
import { Elysia, t } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { read } from '../../db/read.ts'
import { write } from '../../db/write.ts'
import { authPlugin } from '../../http/auth-plugin.ts'
import { callerProjectRole, requireProjectManager } from '../auth/service.ts'
import { errorResponses } from '../../http/errors.ts'
import { conflict, forbidden, notFound } from '../../lib/errors.ts'
import { addTeamMember, removeProjectMember, removeTeamMember, setProjectMember, userProjectValue } from '../members/service.ts'
import { requireUser } from '../users/service.ts'
import { nonConformingRecords, readCollectionSchema, setCollectionFields, upsertRecord } from '../records/service.ts'
import { IF_MATCH } from '../records/model.ts'
import { addProjectPart, renameProject, renameProjectPart, setProjectSso } from './structure.ts'
import { collectionWriter, findTeam, requireCollection, requireEnvironment, roleIn } from '../directory/projects.ts'
import { CollectionParams, CollectionSchemaBody, CollectionSchemaChange, CollectionSchemaView, MemberBody, MemberParams, Membership, NamedPart, PartName, ProjectSettingsBody, ProjectView, PutRecordBody, RecordParams, SavedRecord, TeamMemberParams } from './admin-model.ts'
import { withArticle } from '../../lib/words.ts'

/** The body field of each kind's add and rename routes is its path parameter's name: `{ "teamName": "Billing" }`. */
const PARTS = [
  { part: 'environment', path: 'environments', param: 'environmentName' },
  { part: 'team', path: 'teams', param: 'teamName' },
  { part: 'collection', path: 'collections', param: 'collectionName' },
] as const


function* requireTeam(projectId: number, name: string) {
  const team = yield* findTeam(projectId, name)
  if (!team) throw notFound(`Team ${name} not found`)
  return team
}

/** Add and rename routes of one kind of part (environments, teams, collections). */
function partRoutes(deps: AppDeps, spec: (typeof PARTS)[number]) {
  const base = `/v1/project/:projectName/${spec.path}`
  const body = t.Object({ [spec.param]: PartName })
  const newName = (value: Record<string, string>) => value[spec.param] ?? ''
  return new Elysia({ name: `project-${spec.path}`, tags: ['project-administration'] })
    .use(authPlugin(deps))
    .post(
      base,
      async ({ params, body: fields, caller, set }) => {
        const body = fields as Record<string, string>
        await write(deps.store, function* () {
          const project = yield* requireProjectManager(caller, params.projectName)
          yield* addProjectPart(deps.clock, spec.part, { projectId: project.id, name: newName(body), actorId: caller.user.id, field: spec.param })
        })
        set.status = 201
        return { name: newName(body) }
      },
      {
        accountCall: true,
        params: t.Object({ projectName: t.String() }),
        body,
        response: { 201: NamedPart, ...errorResponses(400, 404, 409) },
        detail: { operationId: `add${capital(spec.part)}`, summary: `Add ${withArticle(spec.part)} to a project (project admins, instance administrators)` },
      },
    )
    .patch(
      `${base}/:${spec.param}`,
      async ({ params, body: fields, caller }) => {
        const body = fields as Record<string, string>
        const path = params as Record<string, string>
        await write(deps.store, function* () {
          const project = yield* requireProjectManager(caller, path.projectName ?? '')
          const name = path[spec.param] ?? ''
          yield* renameProjectPart(deps.clock, spec.part, { projectId: project.id, name, newName: newName(body), actorId: caller.user.id, field: spec.param })
        })
        return { name: newName(body) }
      },
      {
        accountCall: true,
        params: t.Object({ projectName: t.String(), [spec.param]: t.String() }),
        body,
        response: { 200: NamedPart, ...errorResponses(400, 404, 409) },
        detail: { operationId: `rename${capital(spec.part)}`, summary: `Rename ${withArticle(spec.part)}: ids stay, so webhook URLs and history keep working` },
      },
    )
}

const capital = (word: string) => word[0]!.toUpperCase() + word.slice(1)

export function projectAdminModule(deps: AppDeps) {
  const tags = ['project-administration']
  return new Elysia({ name: 'project-admin', tags })
    .use(authPlugin(deps))
    .use(partRoutes(deps, PARTS[0]))
    .use(partRoutes(deps, PARTS[1]))
    .use(partRoutes(deps, PARTS[2]))
    .put(
      '/v1/project/:projectName/settings',
      async ({ params, body, caller }) => {
        return write(deps.store, function* () {
          const project = yield* requireProjectManager(caller, params.projectName)
          yield* setProjectSso(deps.clock, project, body.sso, caller.user.id)
          yield* renameProject(deps.clock, { ...project, sso: body.sso }, body.projectName, caller.user.id, 'projectName')
          return { name: body.projectName, sso: body.sso }
        })
      },
      {
        accountCall: true,
        body: ProjectSettingsBody,
        response: { 200: ProjectView, ...errorResponses(400, 404, 409) },
        detail: {
          operationId: 'setProjectSettings',
          summary: 'Rename a project or turn SSO on or off (docs/sso.md "Single sign-on": non-SSO tokens are refused while it is on)',
        },
      },
    )
    .put(
      '/v1/project/:projectName/teams/:teamName/members/:userId',
      async ({ params, caller }) =>
        write(deps.store, function* () {
          const project = yield* requireProjectManager(caller, params.projectName)
          const team = yield* requireTeam(project.id, params.teamName)
          const user = yield* requireUser(params.userId)
          if ((yield* roleIn(project.id, user.id)) === null) throw conflict('not_a_member', `${user.email} is not a member of ${project.name}: add them to the project first`)
          yield* addTeamMember(deps.clock, { projectId: project.id, teamId: team.id, userId: user.id, actorId: caller.user.id })
          return yield* userProjectValue(project.id, user.id)
        }),
      {
        accountCall: true,
        params: TeamMemberParams,
        response: { 200: Membership, ...errorResponses(400, 404, 409) },
        detail: { operationId: 'addTeamMember', summary: 'Put a member of the project in one of its teams' },
      },
    )
    .delete(
      '/v1/project/:projectName/teams/:teamName/members/:userId',
      async ({ params, caller, set }) => {
        await write(deps.store, function* () {
          const project = yield* requireProjectManager(caller, params.projectName)
          const team = yield* requireTeam(project.id, params.teamName)
          const user = yield* requireUser(params.userId)
          if (!(yield* removeTeamMember(deps.clock, { projectId: project.id, teamId: team.id, userId: user.id, actorId: caller.user.id }))) {
            throw notFound(`${user.email} is not in team ${team.name}`)
          }
        })
        set.status = 204
      },
      {
        accountCall: true,
        params: TeamMemberParams,
        response: { 204: t.Void(), ...errorResponses(400, 404) },
        detail: { operationId: 'removeTeamMember', summary: 'Take a user out of one of the project’s teams' },
      },
    )
    .put(
      '/v1/project/:projectName/members/:userId',
      async ({ params, body, caller }) =>
        write(deps.store, function* () {
          const project = yield* requireProjectManager(caller, params.projectName)
          const user = yield* requireUser(params.userId)
          yield* setProjectMember(deps.clock, { projectId: project.id, userId: user.id, role: body.role, actorId: caller.user.id })
          return yield* userProjectValue(project.id, user.id)
        }),
      {
        accountCall: true,
        params: MemberParams,
        body: MemberBody,
        response: { 200: Membership, ...errorResponses(400, 404, 409) },
        detail: { operationId: 'setProjectMember', summary: "Add a user to a project or change their permission level (never demotes the last admin: 409)" },
      },
    )
    .delete(
      '/v1/project/:projectName/members/:userId',
      async ({ params, caller, set }) => {
        await write(deps.store, function* () {
          const project = yield* requireProjectManager(caller, params.projectName)
          const user = yield* requireUser(params.userId)
          if (!(yield* removeProjectMember(deps.clock, { projectId: project.id, userId: user.id, actorId: caller.user.id }))) {
            throw notFound(`${user.email} is not a member of ${project.name}`)
          }
        })
        set.status = 204
      },
      {
        accountCall: true,
        params: MemberParams,
        response: { 204: t.Void(), ...errorResponses(400, 404, 409) },
        detail: { operationId: 'removeProjectMember', summary: 'Remove a user from a project and its teams (never the last admin: 409)' },
      },
    )
    .put(
      '/v1/project/:projectName/environment/:environmentName/collection/:collectionName/records/:recordId',
      async ({ params, body, caller, request, set }) => {
        const saved = await write(deps.store, function* () {
          const { manager } = yield* callerProjectRole(caller, params.projectName)
          const { project, environment } = yield* requireEnvironment(params.projectName, params.environmentName)
          const collection = yield* requireCollection(project.id, params.collectionName)
          const team = yield* requireTeam(project.id, body.teamName)
          // A member who is no admin writes through a team of theirs that may edit the collection (the console's forms).
          if (!manager && !(yield* collectionWriter({ userId: caller.user.id, projectId: project.id, collectionId: collection.id, teamName: team.name }))) {
            throw forbidden(`Team ${team.name} may not change records of ${collection.name}, or you are not its member`)
          }
          return yield* upsertRecord(deps.clock, {
            environmentId: environment.id, collectionId: collection.id, recordKey: params.recordId, data: body.data,
            userId: caller.user.id, teamId: team.id, via: 'in the console or the management API',
            ifMatch: request.headers.get('if-match'),
          })
        })
        set.status = saved.outcome === 'created' ? 201 : 200
        set.headers.etag = saved.etag
        return { id: params.recordId, data: saved.data, outcome: saved.outcome }
      },
      {
        accountCall: true,
        params: RecordParams,
        body: PutRecordBody,
        response: { 200: SavedRecord, 201: SavedRecord, ...errorResponses(400, 403, 404, 409, 412, 422) },
        detail: {
          operationId: 'putRecord',
          summary:
            "Create or replace a record's data (a JSON object); its activity entry names the team given (project admins, and members of that team when it may edit the collection)",
          description:
            "With a collection schema (docs/records.md), absent fields that have a default take it, and the data must conform: " +
            '422 `invalid_record` with `details: [{field, message}]`, each field a JSON pointer (`/total`); nothing is written. ' +
            'With `If-Match`, only if the record is unchanged since that `ETag` (412 `precondition_failed`); 409 `conflict` for the id of a deleted record.',
          ...IF_MATCH,
        },
      },
    )
    .get(
      '/v1/project/:projectName/collections/:collectionName/schema',
      async ({ params, caller }) =>
        read(deps.store, (function* () {
          const project = yield* requireProjectManager(caller, params.projectName)
          const collection = yield* requireCollection(project.id, params.collectionName)
          return yield* readCollectionSchema(project.id, collection.id)
        })()),
      {
        accountCall: true,
        params: CollectionParams,
        response: { 200: CollectionSchemaView, ...errorResponses(400, 404) },
        detail: { operationId: 'getCollectionSchema', summary: "A collection's schema (no fields: untyped records) (project admins)" },
      },
    )
    .put(
      '/v1/project/:projectName/collections/:collectionName/schema',
      async ({ params, body, caller }) =>
        write(deps.store, function* () {
          const project = yield* requireProjectManager(caller, params.projectName)
          const collection = yield* requireCollection(project.id, params.collectionName)
          yield* setCollectionFields(deps.clock, { projectId: project.id, collectionId: collection.id, collectionName: collection.name, fields: body.fields, actorId: caller.user.id })
          return { ...(yield* readCollectionSchema(project.id, collection.id)), nonConforming: yield* nonConformingRecords(project.id, collection.id) }
        }),
      {
        accountCall: true,
        params: CollectionParams,
        body: CollectionSchemaBody,
        response: { 200: CollectionSchemaChange, ...errorResponses(400, 404) },
        detail: {
          operationId: 'setCollectionSchema',
          summary: "Set a collection's schema (`{\"fields\": []}`: untyped); reports the existing records it refuses, which stay unchanged (project admins)",
        },
      },
    )
}
