import { execFile } from 'node:child_process';
import { mkdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

const ROOT = join(__dirname, '..', '..');
const LOCK = join(ROOT, 'node_modules', '.cache', 'redflow-pack.lock');
const STALE_MS = 180_000;
const run = promisify(execFile);

/**
 * `npm run build` then `npm pack` into `destination`; resolves with the tarball's path. The build
 * empties dist/ first, so the package specs (run in parallel by jest) take turns: a lock directory
 * (mkdir is atomic) is held from the build to the end of the pack. A lock older than three minutes
 * was left by a killed run and is taken over.
 */
export async function buildAndPack(destination: string): Promise<string> {
  mkdirSync(join(LOCK, '..'), { recursive: true });
  for (;;) {
    try {
      mkdirSync(LOCK);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      try {
        if (Date.now() - statSync(LOCK).mtimeMs > STALE_MS) rmSync(LOCK, { recursive: true, force: true });
      } catch {
        // Released meanwhile: try again.
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
  try {
    await run('npm', ['run', 'build'], { cwd: ROOT });
    const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', destination], { cwd: ROOT });
    const packed = JSON.parse(stdout) as Array<{ filename: string }>;
    return join(destination, packed[0].filename);
  } finally {
    rmSync(LOCK, { recursive: true, force: true });
  }
}
