/** The names of rights: token scopes and project roles (the words every layer checks against). */

export const SCOPES = ['activity_logs:read', 'admin_logs:read', 'notes:read', 'notes:write', 'all', 'workflows:trigger', 'tasks:read', 'tasks:write', 'records:read', 'records:write'] as const
export type Scope = (typeof SCOPES)[number]

export const PERMISSION_LEVELS = ['admin', 'developer', 'editor', 'user', 'manager'] as const
export type PermissionLevel = (typeof PERMISSION_LEVELS)[number]

/** What every level but admin grants in Trellis: the four differ in name (the compatibility document's), not in rights. */
const TEAM_MEMBER_RIGHTS = 'opens the records their teams’ collection permissions allow, starts those teams’ workflows, sees their own runs and the tasks assigned to them or their teams; no administration'

/**
 * What each level may do, in words (the console shows it where a level is chosen; docs/administration.md). Each says
 * whom the level is meant for — the compatibility document's meaning of the name — and then what Trellis grants.
 */
export const PERMISSION_LEVEL_RIGHTS: Record<PermissionLevel, string> = {
  admin: 'manages the project (settings, environments, teams, collections, members, workflows, every token), opens every team and collection, reads the activity and admin logs; the notes and logs API needs this level',
  developer: `for those who build on the project (workflows, integrations); in Trellis the rights of a team member: ${TEAM_MEMBER_RIGHTS} — publishing workflows needs admin`,
  editor: `for those who keep the records up to date; ${TEAM_MEMBER_RIGHTS} — what they may change is set per team by each collection's permissions`,
  user: `the everyday level for those who work in a team; ${TEAM_MEMBER_RIGHTS}`,
  manager: `for those who lead a team; in Trellis the rights of a team member: ${TEAM_MEMBER_RIGHTS} — adding members and changing teams need admin`,
}

/** `all` implies every scope. */
export function hasScope(granted: readonly string[], needed: Scope): boolean {
  return granted.includes('all') || granted.includes(needed)
}
