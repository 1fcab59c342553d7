/** The notes API's request and answer schemas; the answers are the compatibility document's `listNotes` shapes. */
import { t } from 'elysia'
import { EnvironmentPageParameters, pageSchema } from '../../http/list-schema.ts'
import { IdParam } from '../../http/params.ts'
import { Integer, IsoDateTimeMicros, renderedAnswer } from '../../http/schemas.ts'
import { CollectionRef, EnvironmentRef, TeamRef, UserObject } from '../directory/model.ts'

const Html = t.String({ minLength: 1, maxLength: 65_536, description: 'HTML, sanitised on write' })
/** The notes list's date filters (`createdAt.lt=…`, `updatedAt.gte=…`…). */
export const NOTE_DATE_FIELDS = ['createdAt', 'updatedAt', 'archivedAt'] as const

export const NoteTitle = t.String({ minLength: 1, maxLength: 500 })

/** The note id: an integer from 1 to MAX_ID, checked as the string it arrives as (see IdParam). */
export const NoteParams = t.Object({
  projectName: t.String(),
  environmentName: t.String(),
  id: IdParam,
})

export const CreateNoteBody = t.Object({
  recordId: t.String({ minLength: 1, maxLength: 1024 }),
  collectionName: t.String({ minLength: 1, maxLength: 200 }),
  teamName: t.String({ minLength: 1, maxLength: 200 }),
  title: NoteTitle,
  content: Html,
})

export const AddMessageBody = t.Object({ content: Html })

export const UpdateNoteBody = t.Object({ title: t.Optional(NoteTitle), archived: t.Optional(t.Boolean()) }, { minProperties: 1 })

export const NoteMessage = t.Object(
  {
    object: t.Literal('note-message'),
    content: t.String({ description: 'The message HTML' }),
    createdAt: IsoDateTimeMicros,
    user: UserObject,
  },
  { $id: 'NoteMessage' },
)

export const Note = renderedAnswer(
  t.Object(
    {
      object: t.Literal('note'),
      id: Integer(),
      title: t.String(),
      recordId: t.String(),
      createdAt: IsoDateTimeMicros,
      updatedAt: t.String({ format: 'date-time', description: 'Last change of the note, or its last message (UTC, six fraction digits)', examples: ['2026-11-21T12:00:00.000123Z'] }),
      archivedAt: t.Optional(IsoDateTimeMicros),
      user: UserObject,
      environment: EnvironmentRef,
      team: TeamRef,
      collection: t.Optional(CollectionRef),
      messages: t.Array(NoteMessage),
    },
    { $id: 'Note' },
  ),
)

export const NotePage = renderedAnswer(pageSchema(Note, EnvironmentPageParameters, 'A page of notes, newest first'))
