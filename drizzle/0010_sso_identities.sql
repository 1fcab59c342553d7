CREATE TABLE `sso_identities` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`issuer` text NOT NULL,
	`subject` text NOT NULL,
	`user_id` integer NOT NULL,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `sso_identities_issuer_subject_unique` ON `sso_identities` (`issuer`,`subject`);--> statement-breakpoint
CREATE UNIQUE INDEX `sso_identities_user_issuer_unique` ON `sso_identities` (`user_id`,`issuer`);