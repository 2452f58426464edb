// The layers of cards-sync, as rules `npm run lint` checks (dependency-cruiser). Dependencies point
// one way: entry points (src/cli, src/admin, src/demo, and src/status, what they show) → the work
// (jobs/) → the domain (the rest of src/) → storage (db/) (docs/architecture.md). A rule that
// breaks fails the lint with its name.
//
// Paths are written by layer and folder, so that moving a concept's files keeps them right: when a
// folder moves, change its pattern here.

/** The bottom layer: all SQL, the schema, the card shapes and the outbox. */
const DB = '^db/';
/** The domain and its surfaces. */
const SRC = '^src/';
/** BullMQ: the sync queue and worker, the refresh. */
const JOBS = '^jobs/';
/** The pure freshness policy. */
const FRESHNESS = '^src/freshness/';
/** The one folder that knows OpenTelemetry. */
const TRACING = '^src/tracing/';
/**
 * What src/ may import jobs/ from: the entry points, which start workers and read queues, and
 * src/status/, what `status` and the admin overview both show of what they read.
 */
const SRC_ENTRY_POINTS = ['^src/cli/', '^src/admin/', '^src/demo/', '^src/status/'];
/**
 * A file of the product, with its folder captured as $1: `src/sync` for src/sync/x.ts. A file at
 * the top of a layer (src/index.ts, db/client.ts, jobs/redis.ts) or in bin/ captures its own path,
 * which no module lies below.
 */
const PRODUCT_FILE_IN_FOLDER = '^((src|db|jobs|bin)/[^/]+)(/|$)';
/**
 * A folder's front files: index.ts, what the folder offers to the rest of the code, and parse.ts,
 * where a folder has one: its parsers and names alone, for what must load little (a command's
 * flags, read while `--help` is printed).
 */
// How little parse.ts loads is held by test/process/cli-start.test.ts, which counts what `--help`
// loads: a rule here would see type-only imports (tsPreCompilationDeps) as loads.
const FRONT_FILE = '^(src|db|jobs)/[^/]+/(index|parse)[.]ts$';
/** The runtime of the database drivers: a module that imports it (not only its types) talks SQL. */
const DATABASE_RUNTIME = 'node_modules/(pg|pg-[^/]+|drizzle-orm)/';

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'No import circle anywhere: move what both modules need into a third one both import.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'db-is-the-bottom',
      comment:
        'db/ imports nothing from src/ or jobs/, not even types: what it needs of a policy or of tracing comes in as a plain value or function.',
      severity: 'error',
      from: { path: DB },
      to: { path: [SRC, JOBS] },
    },
    {
      name: 'sql-only-in-db',
      comment:
        "All SQL is in db/: outside it, import pg's or drizzle-orm's types only (import type), and call db/ for the statements.",
      severity: 'error',
      from: { path: [SRC, JOBS, '^bin/'] },
      to: { path: DATABASE_RUNTIME, dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'freshness-is-pure',
      comment:
        'The freshness policy imports no queue, no table and no database: db/, jobs/, pg, bullmq, ioredis, drizzle-orm (its clock reads are checked by test/contracts/layers.test.ts).',
      severity: 'error',
      from: { path: FRESHNESS },
      to: {
        path: [DB, JOBS, 'node_modules/(pg|bullmq|ioredis|drizzle-orm)/'],
      },
    },
    {
      name: 'freshness-imports-only-itself',
      comment: 'The freshness policy is a leaf of src/: it imports nothing else of the product.',
      severity: 'error',
      from: { path: FRESHNESS },
      to: { path: ['^(src|db|jobs|bench|bin|test)/'], pathNot: FRESHNESS },
    },
    {
      name: 'only-tracing-knows-opentelemetry',
      comment: 'OpenTelemetry (and its loaders) is imported only in src/tracing/; the rest calls its facade.',
      severity: 'error',
      from: { pathNot: TRACING },
      to: { path: 'node_modules/(@opentelemetry/|bullmq-otel/|import-in-the-middle/)' },
    },
    {
      name: 'src-uses-jobs-only-from-entry-points',
      comment:
        'The domain (src/) does not import the queues (jobs/); only the entry points that start or read them do.',
      severity: 'error',
      from: { path: SRC, pathNot: SRC_ENTRY_POINTS },
      to: { path: JOBS },
    },
    {
      name: 'work-does-not-import-entry-points',
      comment:
        'The work (jobs/: queues, workers, the refresh, webhook delivery, upkeep) is started by the entry points (src/cli, src/admin, src/demo, and src/status, what they show) and imports none of them: the arrows run entry points -> work -> domain -> storage (docs/architecture.md).',
      severity: 'error',
      from: { path: JOBS },
      to: { path: SRC_ENTRY_POINTS },
    },
    {
      name: 'status-queries-nothing',
      comment:
        "src/status/ says what the entry points have read (status, the admin overview): it takes db/ for its shapes only (import type) and talks to neither Redis nor a queue nor Postgres; the reading is the entry points' (docs/architecture.md).",
      severity: 'error',
      from: { path: '^src/status/' },
      to: {
        path: [DB, '^jobs/redis[.]ts$', 'node_modules/(bullmq|ioredis|pg|drizzle-orm)/'],
        dependencyTypesNot: ['type-only'],
      },
    },
    {
      name: 'enter-a-folder-by-its-front-file',
      comment:
        "A folder of src/, db/ or jobs/ is entered by its front file (index.ts), which says what it offers; the rest is the folder's own business. Within a folder, modules import each other directly. Tests and benchmarks may reach inside, for what the front file does not offer (docs/architecture.md).",
      severity: 'error',
      from: { path: PRODUCT_FILE_IN_FOLDER },
      to: { path: '^(src|db|jobs)/[^/]+/', pathNot: ['^$1/', FRONT_FILE] },
    },
    {
      name: 'product-does-not-import-bench-or-test',
      comment: 'src/, db/ and jobs/ are shipped: they import neither the benchmarks nor the tests.',
      severity: 'error',
      from: { path: [SRC, DB, JOBS] },
      to: { path: '^(bench|test)/' },
    },
    {
      name: 'bench-enters-the-simulator-by-its-front-file',
      comment:
        'The benchmarks take the freshness simulator from test/support/freshness-sim/index.ts, what it offers, and nothing else of test/ (docs/benchmarks.md).',
      severity: 'error',
      from: { path: '^bench/' },
      to: { path: '^test/', pathNot: '^test/support/freshness-sim/index[.]ts$' },
    },
    {
      name: 'the-simulator-stands-alone',
      comment:
        'The freshness simulator (test/support/freshness-sim/), which the tests and the benchmarks both run, imports neither the benchmarks nor the rest of test/: the product and itself only.',
      severity: 'error',
      from: { path: '^test/support/freshness-sim/' },
      to: { path: '^(bench|test)/', pathNot: '^test/support/freshness-sim/' },
    },
    {
      name: 'no-unresolvable',
      comment: 'Every import resolves (a moved file left a stale path).',
      severity: 'error',
      from: {},
      // bin/cards-sync.js loads the build (dist/), which need not exist when the lint runs.
      to: { couldNotResolve: true, pathNot: '^[.][.]/dist/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // Type-only imports are dependencies too: a layer that names another's types depends on it.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    // The sources import `./x.js`, which is `./x.ts` before the build.
    enhancedResolveOptions: {
      extensions: ['.ts', '.js', '.mjs', '.cjs', '.d.ts'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      exportsFields: ['exports'],
    },
  },
};
