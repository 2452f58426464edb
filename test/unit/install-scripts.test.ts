import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

// The install-script policy (docs/security.md, "Install scripts"): every dependency in the lockfile
// that ships an install script is named in package.json's `allowScripts`, allowed or denied, so
// that `npm ci` warns of none and npm's coming enforcement changes nothing unreviewed.

const root = new URL('../../', import.meta.url);
const pkg = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as {
  allowScripts?: Record<string, boolean>;
};
const lock = JSON.parse(readFileSync(new URL('package-lock.json', root), 'utf8')) as {
  packages: Record<string, { hasInstallScript?: boolean }>;
};

describe('install scripts', () => {
  it('every dependency with an install script is allowed or denied in allowScripts', () => {
    const withScripts = new Set(
      Object.entries(lock.packages)
        .filter(([path, p]) => path !== '' && p.hasInstallScript === true)
        .map(([path]) => path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length)),
    );
    expect(withScripts.size).toBeGreaterThan(0);
    const policy = pkg.allowScripts ?? {};
    const named = new Set(Object.keys(policy).map((k) => k.replace(/(?<=.)@[^@]*$/, '')));
    expect([...withScripts].filter((name) => !named.has(name))).toEqual([]);
    // Denied: what no product or test path runs (testcontainers' SSH, without Docker here; the
    // protobuf CLI's version check).
    expect(policy).toMatchObject({ 'cpu-features': false, ssh2: false, protobufjs: false });
  });
});
