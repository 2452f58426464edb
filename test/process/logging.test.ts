import { spawnSync } from 'node:child_process';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logging/index.js';

// Logs are JSON lines for machines, and readable text for a person at a terminal; redaction either way.

function capture() {
  let out = '';
  const destination = new Writable({
    write(chunk, _enc, done) {
      out += chunk.toString();
      done();
    },
  });
  return { destination, text: () => out };
}

describe('the logger', () => {
  it('writes readable text when asked (a terminal), with secrets redacted', () => {
    const c = capture();
    const logger = createLogger({ destination: c.destination, pretty: true });
    logger.info({ apiKey: 'key-should-not-show-91', subscriberId: 42 }, 'sync succeeded');
    const text = c.text();
    expect(text).toContain('sync succeeded');
    expect(text).toContain('INFO');
    expect(text.trimStart().startsWith('{')).toBe(false);
    expect(text).toContain('[redacted]');
    expect(text).not.toContain('key-should-not-show-91');
  });

  it('writes one JSON object per line otherwise', () => {
    const c = capture();
    createLogger({ destination: c.destination }).info({ subscriberId: 42 }, 'sync succeeded');
    expect(JSON.parse(c.text())).toMatchObject({ msg: 'sync succeeded', subscriberId: 42, level: 30 });
  });

  it.skipIf(spawnSync('script', ['--version']).status !== 0)(
    'picks text on a real terminal (a pty from script(1)) and JSON on a pipe',
    () => {
      const program = `import('${new URL('../../dist/src/logging/index.js', import.meta.url).pathname}').then(({ createLogger }) => createLogger().info({ n: 1 }, 'hello there'))`;
      const onPty = spawnSync('script', ['-qec', `${process.execPath} -e "${program}"`, '/dev/null'], {
        encoding: 'utf8',
      });
      expect(onPty.stdout).toContain('hello there');
      expect(onPty.stdout).not.toContain('"msg":"hello there"');
      const onPipe = spawnSync(process.execPath, ['-e', program], { encoding: 'utf8' });
      expect(onPipe.stderr).toContain('"msg":"hello there"');
    },
  );
});
