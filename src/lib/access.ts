/** The names of rights: token scopes and project roles (the words every layer checks against). */

export const SCOPES = ['activity_logs:read', 'admin_logs:read', 'notes:read', 'notes:write', 'all', 'workflows:trigger', 'tasks:read', 'tasks:write', 'records:read', 'records:write'] as const
export type Scope = (typeof SCOPES)[number]

export const PERMISSION_LEVELS = ['admin', 'developer', 'editor', 'user', 'manager'] as const
export type PermissionLevel = (typeof PERMISSION_LEVELS)[number]

const TEAM_MEMBER_RIGHTS = 'works in the teams they belong to: opens the records each collection’s team permissions allow, starts those teams’ workflows, sees their own runs; no administration'

/** What each level may do, in words (the console shows it where a level is chosen; docs/administration.md). */
export const PERMISSION_LEVEL_RIGHTS: Record<PermissionLevel, string> = {
  admin: 'manages the project (settings, environments, teams, collections, members, workflows, every token), opens every team and collection, reads the activity and admin logs; the notes and logs API needs this level',
  developer: TEAM_MEMBER_RIGHTS,
  editor: TEAM_MEMBER_RIGHTS,
  user: TEAM_MEMBER_RIGHTS,
  manager: TEAM_MEMBER_RIGHTS,
}

/** `all` implies every scope. */
export function hasScope(granted: readonly string[], needed: Scope): boolean {
  return granted.includes('all') || granted.includes(needed)
}
