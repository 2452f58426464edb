import { readdirSync, readFileSync } from 'node:fs';
import { PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import type { Command } from 'commander';
import { Deployment } from 'kubernetes-models/apps/v1';
import { Job } from 'kubernetes-models/batch/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ConfigMap, Namespace, Secret, Service } from 'kubernetes-models/v1';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { buildProgram } from '../../src/cli/program.js';
import { CONFIG_VARIABLES } from '../../src/config/index.js';
import { isOtelVariable, tracingWanted } from '../../src/tracing/index.js';

// deploy/kubernetes. No cluster runs here, so the manifests are checked by reading them:
// every file is in the kustomization, every cards-sync container runs a real command with real
// flags and sets only variables cards-sync reads, every secret key it uses is in the Secret, the
// probes hit the admin server's health routes on the port it is given, the grace period outlasts
// the shutdown deadline, the PodDisruptionBudget selects the workers, and the PrometheusRule holds
// exactly the committed alerting rules. Each object is validated against the Kubernetes API's
// schema and the PrometheusRule CRD's (kubernetes-models: required fields, types, enums; it
// does not refuse unknown fields). A real cluster would add: `kubectl apply -k --dry-run=server`
// (unknown fields, admission), a rollout, and a drain under load.

interface Container {
  name: string;
  image: string;
  args?: string[];
  env?: { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }[];
  envFrom?: { configMapRef?: { name: string } }[];
  ports?: { name: string; containerPort: number }[];
  readinessProbe?: { httpGet: { path: string; port: string } };
  livenessProbe?: { httpGet: { path: string; port: string } };
  volumeMounts?: { name: string; mountPath: string }[];
}
interface PodSpec {
  containers: Container[];
  terminationGracePeriodSeconds?: number;
  restartPolicy?: string;
  volumes?: { name: string; secret?: { secretName: string; items: { key: string; path: string }[] } }[];
}
interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  data?: Record<string, string>;
  stringData?: Record<string, string>;
  spec?: {
    template?: { metadata: { labels: Record<string, string> }; spec: PodSpec };
    selector?: { matchLabels: Record<string, string> };
    groups?: unknown;
    strategy?: { type: string; rollingUpdate?: { maxUnavailable: number } };
    maxUnavailable?: number;
  };
}

const dir = new URL('../../deploy/kubernetes/', import.meta.url);
const files = readdirSync(dir).filter((f) => f.endsWith('.yaml'));
const read = (file: string) => parse(readFileSync(new URL(file, dir), 'utf8'));
const kustomization = read('kustomization.yaml') as { resources: string[]; namespace: string };
const manifests = kustomization.resources.map((f) => read(f) as Manifest);
const byKind = (kind: string, name: string) => {
  const found = manifests.find((m) => m.kind === kind && m.metadata.name === name);
  expect(found, `${kind} ${name}`).toBeDefined();
  return found!;
};
const program = buildProgram({ env: {}, out: () => {}, err: () => {} }, { exitCode: 0 });
const command = (name: string): Command | undefined => program.commands.find((c) => c.name() === name);
const workloads = manifests.filter((m) => m.spec?.template);
const containers = workloads.flatMap((m) => m.spec!.template!.spec.containers.map((c) => [m, c] as const));

describe('deploy/kubernetes', () => {
  it('lists every manifest in its kustomization, each a named object of a known kind', () => {
    expect([...kustomization.resources].sort()).toEqual(
      files.filter((f) => f !== 'kustomization.yaml').sort(),
    );
    expect(manifests.map((m) => m.kind).sort()).toEqual([
      'ConfigMap',
      'Deployment',
      'Deployment',
      'Job',
      'Namespace',
      'PodDisruptionBudget',
      'PrometheusRule',
      'Secret',
      'Service',
      'Service',
    ]);
    for (const m of manifests) {
      expect(m.apiVersion, m.metadata.name).toMatch(
        /^(v1|apps\/v1|batch\/v1|policy\/v1|monitoring\.coreos\.com\/v1)$/,
      );
      expect(m.metadata.name).toMatch(/^[a-z0-9-]+$/);
    }
    expect(byKind('Namespace', kustomization.namespace)).toBeDefined();
  });

  // Each model checks its object against the API's JSON schema and throws naming the field.
  const MODELS: Record<string, new (data: never) => { validate(): void }> = {
    'v1/Namespace': Namespace,
    'v1/ConfigMap': ConfigMap,
    'v1/Secret': Secret,
    'v1/Service': Service,
    'apps/v1/Deployment': Deployment,
    'batch/v1/Job': Job,
    'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
    'monitoring.coreos.com/v1/PrometheusRule': PrometheusRule,
  };
  it.each(manifests.map((m) => [`${m.kind} ${m.metadata.name}`, m] as const))(
    '%s is valid by the Kubernetes API schema',
    (_name, m) => {
      const Model = MODELS[`${m.apiVersion}/${m.kind}`];
      expect(Model, `${m.apiVersion} ${m.kind}`).toBeDefined();
      expect(() => new Model!(m as never).validate()).not.toThrow();
    },
  );

  it('the schema check has teeth: a grace period as text, a Deployment without a selector', () => {
    const worker = byKind('Deployment', 'cards-sync-worker');
    const spec = worker.spec!;
    const asText = {
      ...spec,
      template: { ...spec.template!, spec: { ...spec.template!.spec, terminationGracePeriodSeconds: '45' } },
    };
    expect(() => new Deployment({ ...worker, spec: asText } as never).validate()).toThrow(
      /terminationGracePeriodSeconds must be integer/,
    );
    const { selector: _selector, ...noSelector } = spec;
    expect(() => new Deployment({ ...worker, spec: noSelector } as never).validate()).toThrow(/selector/);
  });

  it.each(containers.map(([m, c]) => [`${m.metadata.name}/${c.name}`, c] as const))(
    '%s runs a real cards-sync command with real flags, and sets only variables cards-sync reads',
    (_name, c) => {
      const [name, ...args] = c.args ?? [];
      const cmd = command(name!);
      expect(cmd, `unknown command ${name}`).toBeDefined();
      const flags = new Set(cmd!.options.flatMap((o) => [o.long, o.short].filter(Boolean)));
      for (const arg of args.filter((a) => a.startsWith('-'))) expect(flags, `${name} ${arg}`).toContain(arg);
      // cards-sync's own variables, and the OpenTelemetry SDK's standard ones.
      const known = (name: string) => CONFIG_VARIABLES.includes(name as never) || isOtelVariable(name);
      for (const e of c.env ?? []) expect(known(e.name), e.name).toBe(true);
      for (const ref of c.envFrom ?? []) {
        const config = byKind('ConfigMap', ref.configMapRef!.name);
        for (const key of Object.keys(config.data ?? {})) expect(known(key), key).toBe(true);
      }
    },
  );

  it('shows the tracing variables, and traces nothing until an OTLP endpoint is set', () => {
    const config = byKind('ConfigMap', 'cards-sync');
    expect(config.data).toMatchObject({
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.1',
    });
    for (const [m, c] of containers) {
      if (m.kind !== 'Deployment') continue;
      const env = Object.fromEntries((c.env ?? []).map((e) => [e.name, e.value ?? '']));
      expect(env.OTEL_SERVICE_NAME, m.metadata.name).toBe(m.metadata.name);
      expect(tracingWanted({ ...config.data, ...env })).toBe(false);
      expect(tracingWanted({ ...config.data, ...env, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' })).toBe(
        true,
      );
    }
  });

  it('takes every secret it uses from the Secret, as files where a *_FILE variable reads them', () => {
    const secret = byKind('Secret', 'cards-sync');
    const keys = Object.keys(secret.stringData ?? {});
    // A template: no real value is committed.
    for (const value of Object.values(secret.stringData ?? {})) expect(value).toBe('REPLACE_ME');
    for (const m of workloads) {
      const pod = m.spec!.template!.spec;
      for (const c of pod.containers) {
        for (const e of c.env ?? []) {
          const ref = e.valueFrom?.secretKeyRef;
          if (ref) expect(keys, `${m.metadata.name} ${e.name}`).toContain(ref.key);
          if (e.name.endsWith('_FILE')) {
            // The file is a key of the mounted secret volume.
            const mount = c.volumeMounts?.find((v) => e.value!.startsWith(`${v.mountPath}/`));
            expect(mount, `${m.metadata.name} ${e.name}`).toBeDefined();
            const volume = pod.volumes?.find((v) => v.name === mount!.name);
            const path = e.value!.slice(mount!.mountPath.length + 1);
            const item = volume?.secret?.items.find((i) => i.path === path);
            expect(item, `${m.metadata.name} ${e.name}`).toBeDefined();
            expect(keys).toContain(item!.key);
          }
        }
      }
    }
  });

  it('runs migrate --wait as a Job that does not restart forever', () => {
    const job = byKind('Job', 'cards-sync-migrate');
    const pod = job.spec!.template!.spec;
    expect(pod.containers[0]!.args).toEqual(['migrate', '--wait', '10m']);
    expect(pod.restartPolicy).toBe('Never');
  });

  it('rolls the workers one at a time, probes the health routes, and outlasts their shutdown deadline', () => {
    const worker = byKind('Deployment', 'cards-sync-worker');
    const pod = worker.spec!.template!.spec;
    const c = pod.containers[0]!;
    expect(c.args!.slice(0, 2)).toEqual(['worker', '--admin']);
    const port = c.env!.find((e) => e.name === 'ADMIN_PORT')!.value;
    expect(c.ports).toContainEqual({ name: 'admin', containerPort: Number(port) });
    expect(c.env!.find((e) => e.name === 'ADMIN_HOST')!.value).toBe('0.0.0.0');
    expect(c.readinessProbe!.httpGet).toEqual({ path: '/readyz', port: 'admin' });
    expect(c.livenessProbe!.httpGet).toEqual({ path: '/healthz', port: 'admin' });
    const deadline = Number(c.args![c.args!.indexOf('--shutdown-timeout') + 1]);
    expect(pod.terminationGracePeriodSeconds! * 1000).toBeGreaterThan(deadline);
    expect(worker.spec!.strategy).toEqual({
      type: 'RollingUpdate',
      rollingUpdate: { maxUnavailable: 0, maxSurge: 1 },
    });
    const pdb = byKind('PodDisruptionBudget', 'cards-sync-worker');
    expect(pdb.spec!.selector!.matchLabels).toEqual(worker.spec!.template!.metadata.labels);
    expect(worker.spec!.selector!.matchLabels).toEqual(worker.spec!.template!.metadata.labels);
  });

  it('carries exactly the committed alerting rules as a PrometheusRule', () => {
    const rule = byKind('PrometheusRule', 'cards-sync');
    const committed = parse(
      readFileSync(new URL('../../deploy/prometheus/cards-sync-rules.yml', import.meta.url), 'utf8'),
    );
    expect(rule.spec!.groups).toEqual(committed.groups);
  });
});
