-- Runs' created_at in epoch µs, as notes and log entries: the runs list pages by it (README "Workflows, webhooks and runs").
UPDATE `runs` SET `created_at` = `created_at` * 1000;
