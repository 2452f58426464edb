import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { buildProgram } from '../../src/cli/program.js';
import { CONFIG_VARIABLES } from '../../src/config/index.js';
import { isOtelVariable, tracingWanted } from '../../src/tracing/index.js';

// No Docker engine runs here, so the stack is checked by reading it: every cards-sync service
// runs a real command with real flags, and every variable it sets is one cards-sync reads.

interface Service {
  image?: string;
  build?: unknown;
  command?: string[];
  environment?: Record<string, string>;
  profiles?: string[];
  depends_on?: Record<string, { condition: string }>;
  secrets?: string[];
  volumes?: string[];
  ports?: string[];
}

const compose = parse(readFileSync(new URL('../../docker-compose.yml', import.meta.url), 'utf8'), {
  merge: true,
}) as {
  services: Record<string, Service>;
  secrets: Record<string, { file: string }>;
};
// The demo's override file, merged as compose merges it (maps key by key).
const demo = parse(readFileSync(new URL('../../docker-compose.demo.yml', import.meta.url), 'utf8')) as {
  services: Record<string, Service>;
};
const ours = [...Object.entries(compose.services), ['mock-api', demo.services['mock-api']!] as const].filter(
  ([, s]) => s.image === 'cards-sync:local',
);
const program = buildProgram({ env: {}, out: () => {}, err: () => {} }, { exitCode: 0 });

function findCommand(name: string): Command | undefined {
  return program.commands.find((c) => c.name() === name);
}

describe('docker-compose.yml', () => {
  it('has postgres, redis, a one-shot migrate, a worker, the admin server and monitoring', () => {
    expect(Object.keys(compose.services).sort()).toEqual([
      'admin',
      'grafana',
      'migrate',
      'postgres',
      'prometheus',
      'redis',
      'worker',
    ]);
    expect(compose.services.prometheus!.profiles).toEqual(['monitoring']);
    expect(compose.services.grafana!.profiles).toEqual(['monitoring']);
    expect(compose.services.worker!.depends_on?.migrate?.condition).toBe('service_completed_successfully');
    expect(ours.map(([name]) => name).sort()).toEqual(['admin', 'migrate', 'mock-api', 'worker']);
  });

  it('runs Redis with noeviction and AOF', () => {
    const command = (compose.services.redis!.command ?? []).join(' ');
    expect(command).toContain('--maxmemory-policy noeviction');
    expect(command).toContain('--appendonly yes');
  });

  it.each(ours)('service %s runs a real cards-sync command with real flags', (_name, service) => {
    const [command, ...args] = service.command ?? [];
    const cmd = findCommand(command!);
    expect(cmd, `unknown command ${command}`).toBeDefined();
    const flags = new Set(cmd!.options.flatMap((o) => [o.long, o.short].filter(Boolean)));
    for (const arg of args.filter((a) => a.startsWith('-')))
      expect(flags, `${command} ${arg}`).toContain(arg);
  });

  it.each(ours)('service %s sets only variables cards-sync reads', (_name, service) => {
    for (const name of Object.keys(service.environment ?? {})) {
      if (!isOtelVariable(name)) expect(CONFIG_VARIABLES as string[], name).toContain(name);
    }
  });

  it('points the worker at the API .env names, with no default to guess, and the key as a file secret', () => {
    for (const name of ['worker', 'admin']) {
      expect(compose.services[name]!.environment!.CARDS_API_BASE_URL).toMatch(/^\$\{CARDS_API_BASE_URL:-\}$/);
    }
    const env = compose.services.worker!.environment!;
    expect(env.CARDS_API_KEY_FILE).toBe('/run/secrets/cards_api_key');
    expect(compose.services.worker!.secrets).toContain('cards_api_key');
    expect(compose.secrets.cards_api_key!.file).toBe('./secrets/cards_api_key');
  });

  it('a worker started without CARDS_API_BASE_URL (what compose passes when .env has none) exits 2 and names it', () => {
    const r = spawnSync(
      process.execPath,
      [new URL('../../bin/cards-sync.js', import.meta.url).pathname, 'worker', '--admin'],
      {
        env: { PATH: process.env.PATH ?? '', CARDS_API_BASE_URL: '', CARDS_API_KEY: 'k', ADMIN_PORT: '0' },
        encoding: 'utf8',
        timeout: 30_000,
      },
    );
    expect(r.status, r.stderr).toBe(2);
    expect(r.stderr).toContain('CARDS_API_BASE_URL is not set');
  });

  it('the demo override adds the mock API and points the worker and the admin server at it', () => {
    const mock = demo.services['mock-api']!;
    expect(mock.command?.slice(0, 1)).toEqual(['mock-api']);
    const port = mock.command![mock.command!.indexOf('--port') + 1];
    expect(mock.secrets).toEqual(['cards_api_key']);
    for (const name of ['worker', 'admin']) {
      const merged = { ...compose.services[name]!.environment, ...demo.services[name]!.environment };
      expect(merged.CARDS_API_BASE_URL).toBe(`http://mock-api:${port}`);
      expect(merged.CARDS_API_KEY_FILE).toBe(mock.environment!.CARDS_API_KEY_FILE);
    }
    expect(Object.keys(demo.services.worker!.depends_on ?? {})).toEqual(['mock-api', 'otel-collector']);
    // Only the services it adds or points elsewhere: nothing else of the stack changes.
    expect(Object.keys(demo.services).sort()).toEqual([
      'admin',
      'jaeger',
      'mock-api',
      'otel-collector',
      'worker',
    ]);
  });

  it('the demo traces: worker and admin export OTLP to the Collector, which sends it on to Jaeger', () => {
    for (const name of ['worker', 'admin']) {
      const env = { ...compose.services[name]!.environment, ...demo.services[name]!.environment };
      expect(tracingWanted(env)).toBe(true);
      expect(env.OTEL_EXPORTER_OTLP_ENDPOINT).toBe('http://otel-collector:4318');
      // The stack without the demo file does not trace.
      expect(tracingWanted(compose.services[name]!.environment ?? {})).toBe(false);
    }
    const collector = demo.services['otel-collector']!;
    const mount = collector.volumes!.find((v) => v.startsWith('./deploy/otel-collector/config.yaml:'))!;
    expect(collector.command).toEqual([`--config=${mount.split(':')[1]}`]);
    const config = parse(
      readFileSync(new URL('../../deploy/otel-collector/config.yaml', import.meta.url), 'utf8'),
    );
    expect(config.receivers.otlp.protocols.http.endpoint).toBe('0.0.0.0:4318');
    expect(config.service.pipelines.traces).toEqual({
      receivers: ['otlp'],
      processors: ['batch'],
      exporters: ['otlp/jaeger'],
    });
    expect(config.exporters['otlp/jaeger'].endpoint).toBe('jaeger:4317');
    expect(demo.services.jaeger!.ports).toEqual(['127.0.0.1:16686:16686']);
  });

  it('gives every cards-sync process the key ring as a file secret, the database from .env, and time to finish its jobs', () => {
    for (const name of ['worker', 'admin']) {
      const service = compose.services[name]!;
      expect(service.environment!.CARD_TOKEN_KEYS_FILE).toBe('/run/secrets/card_token_keys');
      expect(service.secrets).toContain('card_token_keys');
      expect(service.environment!.DATABASE_URL).toMatch(
        /^\$\{DATABASE_URL:-postgres:\/\/.+@postgres:5432\/cards_sync\}$/,
      );
    }
    expect(compose.services.migrate!.environment!.DATABASE_URL).toBe(
      compose.services.worker!.environment!.DATABASE_URL,
    );
    expect(compose.secrets.card_token_keys!.file).toBe('./secrets/card_token_keys');
    // Healthy while its own admin server answers /healthz on the port it is given.
    const health = (compose.services.worker as { healthcheck?: { test: string[] } }).healthcheck;
    expect(health?.test.join(' ')).toContain(
      `http://127.0.0.1:${compose.services.worker!.environment!.ADMIN_PORT}/healthz`,
    );
    expect(compose.services.worker!.command).toEqual(['worker', '--admin']);
    // Docker's default 10 s would cut the worker's 30 s shutdown deadline short.
    const grace = (compose.services.worker as { stop_grace_period?: string }).stop_grace_period;
    expect(Number(/^(\d+)s$/.exec(grace ?? '')?.[1])).toBeGreaterThan(30);
  });
});

describe('docker compose --profile monitoring', () => {
  const root = new URL('../../', import.meta.url).pathname;
  // `./host/path:/container/path[:ro]` → [host path, container path]
  const mounts = (service: Service) =>
    (service.volumes ?? [])
      .filter((v) => v.startsWith('./'))
      .map((v) => v.split(':').slice(0, 2) as [string, string]);
  const inContainer = (service: Service, path: string) => {
    const mount = mounts(service).find(([, target]) => path === target || path.startsWith(`${target}/`));
    expect(mount, `nothing mounted at ${path}`).toBeDefined();
    return join(root, mount![0], path.slice(mount![1].length));
  };

  it('Prometheus loads the committed config, which loads the alerting rules and scrapes every worker and the admin', () => {
    const prometheus = compose.services.prometheus!;
    const configPath = /--config\.file=(\S+)/.exec((prometheus.command ?? []).join(' '))![1]!;
    const config = parse(readFileSync(inContainer(prometheus, configPath), 'utf8')) as {
      rule_files: string[];
      scrape_configs: {
        dns_sd_configs?: { names: string[]; port: number }[];
        static_configs?: { targets: string[] }[];
      }[];
    };
    for (const file of config.rule_files) {
      expect(existsSync(inContainer(prometheus, join(configPath, '..', file))), file).toBe(true);
    }
    const targets = config.scrape_configs.flatMap((c) => [
      ...(c.dns_sd_configs ?? []).flatMap((d) => d.names.map((n) => `${n}:${d.port}`)),
      ...(c.static_configs ?? []).flatMap((s) => s.targets),
    ]);
    expect(targets.sort()).toEqual(['admin:3000', 'worker:3000']);
    // …and those are where the two serve /metrics.
    expect(compose.services.worker!.environment!.ADMIN_PORT).toBe('3000');
    expect(compose.services.worker!.command).toContain('--admin');
    expect(compose.services.admin!.command).toEqual(expect.arrayContaining(['--port', '3000']));
  });

  it('Grafana has that Prometheus as its data source and the committed dashboard loaded', () => {
    const grafana = compose.services.grafana!;
    const datasources = parse(
      readFileSync(inContainer(grafana, '/etc/grafana/provisioning/datasources/prometheus.yml'), 'utf8'),
    ) as { datasources: { type: string; url: string; isDefault: boolean }[] };
    expect(datasources.datasources).toEqual([
      expect.objectContaining({ type: 'prometheus', url: 'http://prometheus:9090', isDefault: true }),
    ]);
    const providers = parse(
      readFileSync(inContainer(grafana, '/etc/grafana/provisioning/dashboards/cards-sync.yml'), 'utf8'),
    ) as { providers: { options: { path: string } }[] };
    const dashboardDir = providers.providers[0]!.options.path;
    const dashboard = JSON.parse(
      readFileSync(inContainer(grafana, `${dashboardDir}/cards-sync-dashboard.json`), 'utf8'),
    ) as { uid: string };
    expect(dashboard.uid).toBe('cards-sync');
  });
});

describe('Dockerfile', () => {
  const dockerfile = readFileSync(new URL('../../Dockerfile', import.meta.url), 'utf8');
  it('builds in one stage and runs the CLI with production dependencies in another', () => {
    expect(dockerfile.match(/^FROM /gm)?.length).toBe(2);
    expect(dockerfile).toContain('npm ci --omit=dev');
    expect(dockerfile).toContain('ENTRYPOINT ["node", "bin/cards-sync.js"]');
    expect(dockerfile).toContain('COPY db/migrations ./db/migrations');
    const [, defaultCommand] = /^CMD \["(\w[\w-]*)"/m.exec(dockerfile) ?? [];
    expect(findCommand(defaultCommand!)).toBeDefined();
  });

  it('ships the product only: no bench/ in its build, and no module of it needs a development dependency', () => {
    expect(dockerfile).not.toMatch(/\bbench\b/);
    const build = JSON.parse(readFileSync(new URL('../../tsconfig.build.json', import.meta.url), 'utf8')) as {
      include: string[];
    };
    expect(build.include.sort()).toEqual(['db', 'jobs', 'src']);
    const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      dependencies: Record<string, string>;
      devDependencies: Record<string, string>;
    };
    // Every package a shipped module loads at run time (type-only imports are erased) is installed
    // by the runtime stage's `npm ci --omit=dev`.
    const needs = new Map<string, string>();
    for (const folder of build.include) {
      for (const file of readdirSync(new URL(`../../${folder}/`, import.meta.url), { recursive: true })) {
        if (!String(file).endsWith('.ts')) continue;
        const text = readFileSync(new URL(`../../${folder}/${file}`, import.meta.url), 'utf8');
        for (const [, spec] of text.matchAll(/^(?:import|export)(?! type\b)[^'";]*?from '([^'.][^']*)'/gm)) {
          if (spec!.startsWith('node:')) continue;
          const name = spec!.startsWith('@') ? spec!.split('/').slice(0, 2).join('/') : spec!.split('/')[0]!;
          needs.set(name, `${folder}/${file}`);
        }
        for (const [, spec] of text.matchAll(/\bimport\('([^'.][^']*)'\)/g)) {
          if (spec!.startsWith('node:')) continue;
          const name = spec!.startsWith('@') ? spec!.split('/').slice(0, 2).join('/') : spec!.split('/')[0]!;
          needs.set(name, `${folder}/${file}`);
        }
      }
    }
    // The demo's Docker fallback loads testcontainers only when asked, and goes without it where it
    // is not installed (src/demo/containers.ts).
    const optional = new Set(['testcontainers', '@testcontainers/postgresql', '@testcontainers/redis']);
    const missing = [...needs].filter(
      ([name]) => manifest.dependencies[name] === undefined && !optional.has(name),
    );
    expect(missing).toEqual([]);
  });

  it('runs the Node major that .nvmrc pins and package.json requires, in both stages', () => {
    const pinned = readFileSync(new URL('../../.nvmrc', import.meta.url), 'utf8').trim();
    const major = /^v?(\d+)\./.exec(pinned)?.[1];
    expect(major).toBeDefined();
    const images = [...dockerfile.matchAll(/^FROM (\S+)/gm)].map(([, image]) => image);
    expect(images).toEqual([`node:${major}-bookworm-slim`, `node:${major}-bookworm-slim`]);
    const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      engines: { node: string };
    };
    expect(manifest.engines.node).toBe(`>=${major}`);
  });
});
