-- The functions on the write path and the lists' pass read by index whatever the size of the table when their plans
-- were made. A connection keeps a function's generic plan until the table's next ANALYZE: made on a table of a few
-- rows, where a whole-table scan is cheapest, it would scan the whole table at every call once the table has grown —
-- a run's queueing read every run of the environment for its newest time until autovacuum came round. With seq
-- scans off inside these functions their plans walk the indexes made for them, at any size.
ALTER FUNCTION trellis_queue_run(text, int8, int8, int8, text, int8, int8, text, int8, int8, text, int8, text, text) SET enable_seqscan = off;
--> statement-breakpoint
ALTER FUNCTION trellis_chain_activity(int8, int8) SET enable_seqscan = off;
--> statement-breakpoint
ALTER FUNCTION trellis_date_notes(int8, int8) SET enable_seqscan = off;
--> statement-breakpoint
ALTER FUNCTION trellis_date_runs(int8, int8) SET enable_seqscan = off;
--> statement-breakpoint
ALTER FUNCTION trellis_date_tasks(int8, int8) SET enable_seqscan = off;
