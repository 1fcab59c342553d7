/** The names of rights: token scopes and project roles (the words every layer checks against). */

export const SCOPES = ['activity_logs:read', 'admin_logs:read', 'notes:read', 'notes:write', 'all', 'workflows:trigger'] as const
export type Scope = (typeof SCOPES)[number]

export const PERMISSION_LEVELS = ['admin', 'developer', 'editor', 'user', 'manager'] as const
export type PermissionLevel = (typeof PERMISSION_LEVELS)[number]

/** `all` implies every scope. */
export function hasScope(granted: readonly string[], needed: Scope): boolean {
  return granted.includes('all') || granted.includes(needed)
}
