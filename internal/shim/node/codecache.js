'use strict';
// codecache.js: run once by dal-exec when it installs the shim (node
// codecache.js, in this directory): writes the V8 code cache of every shim
// file dal-register.js loads into .v8/<node version>-<arch>/<file>.cache,
// which the installer then lists in its manifest. Compiled as
// dal-register.js compiles them (the CommonJS wrapper); V8 rejects a cache
// made by another version or with other flags, and the file is then
// compiled as usual.

const fs = require('fs');
const path = require('path');
const vm = require('vm');
const { wrap } = require('module');

const dir = __dirname;
const out = path.join(dir, '.v8', `${process.version}-${process.arch}`);
fs.mkdirSync(out, { recursive: true });
for (const name of fs.readdirSync(dir).sort()) {
  if (!name.endsWith('.js') || name === 'dal-register.js' || name === 'codecache.js') continue;
  const filename = path.join(dir, name);
  const script = new vm.Script(wrap(fs.readFileSync(filename, 'utf8')), { filename });
  fs.writeFileSync(path.join(out, `${name}.cache`), script.createCachedData());
}
