CREATE TABLE "saved_card_changes" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "saved_card_changes_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"card_id" bigint NOT NULL,
	"subscriber_id" bigint NOT NULL,
	"change" text NOT NULL,
	"changed_fields" text[],
	"sync_run_id" bigint,
	"changed_at" timestamp with time zone NOT NULL,
	CONSTRAINT "saved_card_changes_change_valid" CHECK ("saved_card_changes"."change" in ('added', 'updated', 'removed', 'restored'))
);
--> statement-breakpoint
CREATE TABLE "saved_cards" (
	"id" bigint PRIMARY KEY NOT NULL,
	"subscriber_id" bigint NOT NULL,
	"card_token" text NOT NULL,
	"bin_number" text NOT NULL,
	"card_family" text NOT NULL,
	"card_bank_code" bigint NOT NULL,
	"card_bank_name" text NOT NULL,
	"company_id" bigint NOT NULL,
	"create_date" timestamp with time zone NOT NULL,
	"first_seen_at" timestamp with time zone NOT NULL,
	"last_seen_at" timestamp with time zone NOT NULL,
	"updated_at" timestamp with time zone NOT NULL,
	"removed_at" timestamp with time zone,
	CONSTRAINT "saved_cards_bin_number_masked" CHECK ("saved_cards"."bin_number" ~ '^[0-9]{4}-[xX*]{4}-[xX*]{4}-[0-9]{4}$')
);
--> statement-breakpoint
CREATE TABLE "subscribers" (
	"subscriber_id" bigint PRIMARY KEY NOT NULL,
	"email" text,
	"last_synced_at" timestamp with time zone,
	"last_success_at" timestamp with time zone,
	"last_status" text,
	"last_error" text,
	"consecutive_failures" integer DEFAULT 0 NOT NULL,
	"active_cards" integer DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE TABLE "sync_runs" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "sync_runs_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"subscriber_id" bigint,
	"email" text,
	"trigger" text NOT NULL,
	"job_id" text,
	"refresh_run_id" bigint,
	"started_at" timestamp with time zone NOT NULL,
	"finished_at" timestamp with time zone NOT NULL,
	"status" text NOT NULL,
	"cards_seen" integer DEFAULT 0 NOT NULL,
	"inserted" integer DEFAULT 0 NOT NULL,
	"updated" integer DEFAULT 0 NOT NULL,
	"unchanged" integer DEFAULT 0 NOT NULL,
	"removed" integer DEFAULT 0 NOT NULL,
	"restored" integer DEFAULT 0 NOT NULL,
	"error_code" text,
	"error_message" text,
	CONSTRAINT "sync_runs_trigger_valid" CHECK ("sync_runs"."trigger" in ('manual', 'nightly', 'api', 'cli')),
	CONSTRAINT "sync_runs_status_valid" CHECK ("sync_runs"."status" in ('succeeded', 'not_found', 'invalid_response', 'failed', 'auth_rejected', 'rate_limited'))
);
--> statement-breakpoint
CREATE INDEX "saved_card_changes_card_id_idx" ON "saved_card_changes" USING btree ("card_id");--> statement-breakpoint
CREATE INDEX "saved_card_changes_subscriber_changed_idx" ON "saved_card_changes" USING btree ("subscriber_id","changed_at");--> statement-breakpoint
CREATE INDEX "saved_card_changes_changed_at_idx" ON "saved_card_changes" USING btree ("changed_at");--> statement-breakpoint
CREATE INDEX "saved_card_changes_sync_run_id_idx" ON "saved_card_changes" USING btree ("sync_run_id");--> statement-breakpoint
CREATE INDEX "saved_cards_subscriber_id_idx" ON "saved_cards" USING btree ("subscriber_id");--> statement-breakpoint
CREATE INDEX "saved_cards_active_subscriber_idx" ON "saved_cards" USING btree ("subscriber_id") WHERE "saved_cards"."removed_at" is null;--> statement-breakpoint
CREATE INDEX "saved_cards_card_bank_code_idx" ON "saved_cards" USING btree ("card_bank_code");--> statement-breakpoint
CREATE INDEX "saved_cards_company_id_idx" ON "saved_cards" USING btree ("company_id");--> statement-breakpoint
CREATE INDEX "saved_cards_create_date_idx" ON "saved_cards" USING btree ("create_date");--> statement-breakpoint
CREATE UNIQUE INDEX "subscribers_email_lower_idx" ON "subscribers" USING btree (lower("email"));--> statement-breakpoint
CREATE INDEX "subscribers_last_success_at_idx" ON "subscribers" USING btree ("last_success_at");--> statement-breakpoint
CREATE INDEX "sync_runs_subscriber_started_idx" ON "sync_runs" USING btree ("subscriber_id","started_at");--> statement-breakpoint
CREATE INDEX "sync_runs_started_at_idx" ON "sync_runs" USING btree ("started_at");--> statement-breakpoint
CREATE INDEX "sync_runs_refresh_run_id_idx" ON "sync_runs" USING btree ("refresh_run_id");