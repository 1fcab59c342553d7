/** The user columns a list's rendered entry shows (the compatibility document's user object is built from them). */
import { users } from './schema.ts'

export const userColumns = { id: users.id, username: users.username, email: users.email }
