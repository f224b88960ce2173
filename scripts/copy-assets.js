// Copies the Lua scripts and the dashboard's assets next to the compiled code in dist/.
const { cpSync, mkdirSync, readdirSync } = require('node:fs');
const { join } = require('node:path');

for (const [dir, ext] of [
  [['core', 'store', 'scripts'], '.lua'],
  [['core', 'store', 'scripts', 'includes'], '.lua'],
  [['dashboard', 'assets'], ''],
]) {
  const from = join(__dirname, '..', 'lib', ...dir);
  const to = join(__dirname, '..', 'dist', ...dir);
  mkdirSync(to, { recursive: true });
  for (const file of readdirSync(from)) if (file.endsWith(ext)) cpSync(join(from, file), join(to, file));
}
