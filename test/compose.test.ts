import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { buildProgram } from '../src/cli.js';
import { CONFIG_VARIABLES } from '../src/config.js';

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
}

const compose = parse(readFileSync(new URL('../docker-compose.yml', import.meta.url), 'utf8'), {
  merge: true,
}) as {
  services: Record<string, Service>;
  secrets: Record<string, { file: string }>;
};
const ours = Object.entries(compose.services).filter(([, s]) => s.image === 'cards-sync:local');
const program = buildProgram({ env: {}, out: () => {}, err: () => {} }, { exitCode: 0 });

function findCommand(name: string): Command | undefined {
  return program.commands.find((c) => c.name() === name);
}

describe('docker-compose.yml', () => {
  it('has postgres, redis, a one-shot migrate, a worker, the admin server and a demo mock API', () => {
    expect(Object.keys(compose.services).sort()).toEqual([
      'admin',
      'migrate',
      'mock-api',
      'postgres',
      'redis',
      'worker',
    ]);
    expect(compose.services['mock-api']!.profiles).toEqual(['demo']);
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
      expect(CONFIG_VARIABLES as string[], name).toContain(name);
    }
  });

  it('points the worker at the mock API unless told otherwise, with the key as a file secret', () => {
    const env = compose.services.worker!.environment!;
    expect(env.CARDS_API_BASE_URL).toContain('http://mock-api:4010');
    expect(env.CARDS_API_KEY_FILE).toBe('/run/secrets/cards_api_key');
    expect(compose.services.worker!.secrets).toContain('cards_api_key');
    expect(compose.secrets.cards_api_key!.file).toBe('./secrets/cards_api_key');
  });
});

describe('Dockerfile', () => {
  const dockerfile = readFileSync(new URL('../Dockerfile', import.meta.url), 'utf8');
  it('builds in one stage and runs the CLI with production dependencies in another', () => {
    expect(dockerfile.match(/^FROM /gm)?.length).toBe(2);
    expect(dockerfile).toContain('npm ci --omit=dev');
    expect(dockerfile).toContain('ENTRYPOINT ["node", "bin/cards-sync.js"]');
    expect(dockerfile).toContain('COPY db/migrations ./db/migrations');
    const [, defaultCommand] = /^CMD \["(\w[\w-]*)"/m.exec(dockerfile) ?? [];
    expect(findCommand(defaultCommand!)).toBeDefined();
  });
});
