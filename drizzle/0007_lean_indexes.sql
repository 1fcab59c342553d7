DROP INDEX `activity_logs_env_user_idx`;--> statement-breakpoint
DROP INDEX `activity_logs_env_team_idx`;--> statement-breakpoint
DROP INDEX `activity_logs_env_collection_idx`;--> statement-breakpoint
DROP INDEX `activity_logs_env_action_idx`;--> statement-breakpoint
DROP INDEX `activity_logs_env_type_idx`;--> statement-breakpoint
DROP INDEX `runs_env_created_idx`;--> statement-breakpoint
DROP INDEX `runs_env_workflow_idx`;--> statement-breakpoint
DROP INDEX `runs_env_status_idx`;