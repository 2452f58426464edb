-- No e-mail address where the reporting role can read it (issue 25). Job ids now name an e-mail
-- by a keyed hash (jobs/job-ids.ts) and error excerpts mask addresses (src/redact.ts); rows
-- written by earlier releases are brought in line here: an address in a job id becomes
-- `redacted`, one in an error message `[e-mail]`. One pass over the rows that hold an `@`.
UPDATE sync_runs SET job_id = regexp_replace(job_id, '^email:.*:([^:]*)$', 'email:redacted:\1')
  WHERE job_id LIKE 'email:%@%';
--> statement-breakpoint
UPDATE sync_runs
  SET error_message = regexp_replace(error_message,
    '[^[:space:]@<>"''`,;:()[\]{}]+@[^[:space:]@<>"''`,;:()[\]{}]+\.[^[:space:]@<>"''`,;:()[\]{}]+',
    '[e-mail]', 'g')
  WHERE error_message LIKE '%@%';
--> statement-breakpoint
UPDATE subscribers
  SET last_error = regexp_replace(last_error,
    '[^[:space:]@<>"''`,;:()[\]{}]+@[^[:space:]@<>"''`,;:()[\]{}]+\.[^[:space:]@<>"''`,;:()[\]{}]+',
    '[e-mail]', 'g')
  WHERE last_error LIKE '%@%';
