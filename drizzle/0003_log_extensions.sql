ALTER TABLE `activity_logs` ADD `extension` integer DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE `admin_logs` ADD `extension` integer DEFAULT false NOT NULL;--> statement-breakpoint
-- Backfill (hand-written): an entry is an extension when the compatibility document's enums cannot describe it
-- (DESIGN "Wire compatibility"). The append-only triggers are lifted for this one UPDATE and restored as they were.
DROP TRIGGER `activity_logs_append_only`;--> statement-breakpoint
UPDATE `activity_logs` SET `extension` = 1 WHERE `action` NOT IN ('create', 'read', 'update', 'delete', 'action', 'search', 'filter', 'listRelatedData', 'describeCollection', 'index', 'select', 'dashboard', 'workspace', 'export', 'createNote', 'openNote', 'deleteNote', 'createMessage', 'createApproval', 'approveApproval', 'rejectApproval', 'ignoreApprovalWarning', 'markApprovalAsFailed', 'startProcessingInboxTask', 'completeInboxTask', 'cancelInboxTask', 'cancelInboxTaskNotTreated', 'autoCancelInboxTask', 'assignUserToInboxTask', 'unassignUserFromInboxTask', 'sendApprovalBackInReview', 'triggerWorkflow', 'abortWorkflow', 'completeWorkflow', 'selectWorkflowOption', 'completeWorkflowStep', 'reviseWorkflowStep', 'resumeWorkflow');--> statement-breakpoint
CREATE TRIGGER `activity_logs_append_only` BEFORE UPDATE ON `activity_logs`
BEGIN
  SELECT RAISE(ABORT, 'activity log entries are append-only');
END;--> statement-breakpoint
DROP TRIGGER `admin_logs_append_only`;--> statement-breakpoint
UPDATE `admin_logs` SET `extension` = 1 WHERE `resource` NOT IN ('user-project', 'role', 'team', 'environment') OR `initiator` NOT IN ('administrator', 'identityProvider', 'forestAdmin');--> statement-breakpoint
CREATE TRIGGER `admin_logs_append_only` BEFORE UPDATE ON `admin_logs`
BEGIN
  SELECT RAISE(ABORT, 'admin log entries are append-only');
END;--> statement-breakpoint
CREATE INDEX `activity_logs_env_documented_idx` ON `activity_logs` (`environment_id`,`id`) WHERE extension = 0;--> statement-breakpoint
CREATE INDEX `admin_logs_project_documented_idx` ON `admin_logs` (`project_id`,`id`) WHERE extension = 0;
