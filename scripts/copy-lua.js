// Copies the Lua scripts next to the compiled script loader in dist/.
const { cpSync, mkdirSync, readdirSync } = require('node:fs');
const { join } = require('node:path');

const from = join(__dirname, '..', 'lib', 'core', 'scripts');
const to = join(__dirname, '..', 'dist', 'core', 'scripts');
mkdirSync(to, { recursive: true });
for (const file of readdirSync(from)) if (file.endsWith('.lua')) cpSync(join(from, file), join(to, file));
