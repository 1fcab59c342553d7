/**
 * The web console (DESIGN §12), served from the binary: server-rendered pages that read through the same
 * services and access rules as the API, and a small script whose forms call the management API with the
 * session cookie. No CDN, no inline script (strict CSP). Not part of /openapi.json.
 */
import { Elysia } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { assetHandler } from '../../console/html.ts'
import consoleCss from '../../console/assets/console.css' with { type: 'text' }
import consoleJs from '../../console/assets/console.js' with { type: 'text' }
import builderJs from '../../console/assets/builder.js' with { type: 'text' }
import editorCss from '../../console/assets/editor.css' with { type: 'text' }
import editorJs from '../../console/assets/editor.js' with { type: 'text' }
import liveJs from '../../console/assets/live.js' with { type: 'text' }
import recordsImportJs from '../../console/assets/records-import.js' with { type: 'text' }
import { accountPages } from './account.ts'
import { adminPages } from './admin.ts'
import { healthPages } from './health.ts'
import { homePages } from './home.ts'
import { logPages } from './logs.ts'
import { notePages } from './notes.ts'
import { recordPages } from './records.ts'
import { recordImportPages } from './records-import.ts'
import { runPages } from './runs.ts'
import { schemaEditorPages } from './schema-editor.ts'
import { searchPages } from './search.ts'
import { taskPages } from './tasks.ts'
import { workflowPages } from './workflows.ts'

export function consoleModule(deps: AppDeps) {
  return new Elysia({ name: 'console', detail: { hide: true } })
    .get('/console/console.css', assetHandler(consoleCss, 'text/css'))
    .get('/console/console.js', assetHandler(consoleJs, 'text/javascript'))
    .get('/console/builder.js', assetHandler(builderJs, 'text/javascript'))
    .get('/console/editor.css', assetHandler(editorCss, 'text/css'))
    .get('/console/editor.js', assetHandler(editorJs, 'text/javascript'))
    .get('/console/live.js', assetHandler(liveJs, 'text/javascript'))
    .get('/console/records-import.js', assetHandler(recordsImportJs, 'text/javascript'))
    .use(homePages(deps))
    .use(accountPages(deps))
    .use(adminPages(deps))
    .use(schemaEditorPages(deps))
    .use(recordPages(deps))
    .use(recordImportPages(deps))
    .use(workflowPages(deps))
    .use(healthPages(deps))
    .use(runPages(deps))
    .use(logPages(deps))
    .use(notePages(deps))
    .use(searchPages(deps))
    .use(taskPages(deps))
}
