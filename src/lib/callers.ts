/**
 * What a caller is (the shapes of a token identity and an account caller), the Bearer header, and the face of the one
 * auth decision (`CallerAuth`), which the auth module implements (src/modules/auth/service.ts) and the
 * composition root hands to the auth plugin. No lookup happens here.
 */
import type { PermissionLevel, Scope } from './access.ts'
import type { HttpError } from './errors.ts'

export interface TokenIdentity {
  tokenId: number
  userId: number
  user: { id: number; email: string; username: string; disabledAt: number | null }
  projectId: number
  projectName: string
  projectSso: boolean
  scopes: string[]
  createdWithSso: boolean
  /** The user's permission level in the token's project now, or null when no longer a member. */
  role: PermissionLevel | null
}

/** A token's call (`CallerAuth.tokenCaller`): who, and the 429 of its rate limit when held rather than thrown. */
export interface TokenCall {
  identity: TokenIdentity
  overBudget: HttpError | null
}

/** What a project-scoped route requires. */
export interface ProjectNeed {
  scope: Scope
  role?: PermissionLevel
}

export interface AccountCaller {
  user: { id: number; email: string; username: string; isInstanceAdmin: boolean }
  /** Logged in through SSO (tokens created now get `createdWithSso`). */
  viaSso: boolean
  /** Set when the caller is a Bearer token: management is confined to that token's project. */
  tokenProjectId: number | null
  token: TokenIdentity | null
}

/**
 * Where a call reaches a project's data, as its path says: the project it names (`:projectName`, the console's
 * `:project`), or the run or task the project is found from (`:runId`, `:taskId`). Raw: read before the path is validated.
 */
export interface ProjectPlace {
  projectName?: string
  runId?: string
  taskId?: string
}

/** The auth decision as the routes' plugin calls it; each method throws the 401/403/429 it decides. */
export interface CallerAuth {
  /** Public API (Bearer token only), DESIGN §4's order; the rate-limit headers go into `headers`. */
  projectCaller(request: Request, headers: Record<string, unknown>, projectName: string, need: ProjectNeed): Promise<TokenIdentity>
  /**
   * A Bearer token alone, naming no project (the MCP endpoint: a tool acts in the token's project): the token (401),
   * its API rate limit (429), its user active and the SSO rule (403); each tool checks its scope. With
   * `holdOverBudget`, a call over the budget is counted and decided as any, but its 429 is handed back
   * (`overBudget`) for the caller to answer its own way — an MCP tool call, as the tool's error.
   */
  tokenCaller(request: Request, headers: Record<string, unknown>, holdOverBudget: boolean): Promise<TokenCall>
  /**
   * A console session, or any live token of an active user (confined to its project); either way past the project
   * access decision for the project its path reaches (`place`), before the route reads its input.
   */
  userCaller(request: Request, headers: Record<string, unknown>, place: ProjectPlace): Promise<AccountCaller>
  /**
   * `userCaller`'s decision taken again, as of now, for a call that is still open (an event stream): not counted
   * against the token's rate limit again.
   */
  confirmCaller(request: Request, place: ProjectPlace): Promise<AccountCaller>
  /** Management: a session, or a token with `all` whose user is an admin of its project. */
  accountCaller(request: Request, headers: Record<string, unknown>, place: ProjectPlace): Promise<AccountCaller>
  /** 403 cross_origin for a session change coming from another site. */
  refuseCrossOrigin(request: Request): void
}

/** `Authorization: Bearer <value>`, scheme case-insensitive; null when missing or not a Bearer header. */
export function bearerValue(authorization: string | null | undefined): string | null {
  if (!authorization) return null
  const match = /^bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization)
  return match?.[1] ?? null
}
