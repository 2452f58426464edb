import { registerHooks } from 'node:module';

// Node 24's ESM resolver (26's too) reads the package.json of a module's package for each module
// it resolves, to learn its format, and parses that file's `exports` anew each time. drizzle-orm's
// exports map is 130 KB and the CLI loads about 100 of its files: that parsing made `cards-sync
// --help` take 2.2 s and 260 MB at its peak, against 0.6 s and 97 MB with this hook. Its files
// import each other by relative paths ending in `.js`, all ES modules (its package.json says
// `"type": "module"`, and no folder of it has a package.json of its own), so those are resolved
// here directly; every other import goes to Node's resolver as before.

const DRIZZLE_FILES = '/node_modules/drizzle-orm/';

/** Resolves drizzle-orm's relative imports of its own files without Node's package lookup. Called once, first. */
export function resolveDrizzleFilesDirectly(): void {
  registerHooks({
    resolve(specifier, context, nextResolve) {
      const parent = context.parentURL;
      if (
        parent?.startsWith('file:') &&
        parent.includes(DRIZZLE_FILES) &&
        (specifier.startsWith('./') || specifier.startsWith('../')) &&
        specifier.endsWith('.js')
      ) {
        return { url: new URL(specifier, parent).href, format: 'module', shortCircuit: true };
      }
      return nextResolve(specifier, context);
    },
  });
}
