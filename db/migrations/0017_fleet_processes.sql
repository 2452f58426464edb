CREATE TABLE "fleet_processes" (
	"id" text PRIMARY KEY NOT NULL,
	"role" text NOT NULL,
	"host" text NOT NULL,
	"pid" integer NOT NULL,
	"version" text NOT NULL,
	"known_migration" text NOT NULL,
	"key_ids" text[] DEFAULT '{}'::text[] NOT NULL,
	"concurrency" integer,
	"settings" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"started_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_beat_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE INDEX "fleet_processes_last_beat_idx" ON "fleet_processes" USING btree ("last_beat_at");