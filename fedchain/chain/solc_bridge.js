#!/usr/bin/env node
// A `solc` command-line stand-in over the npm `solc` package (the official
// compiler built to WebAssembly), for machines where no native solc can be
// installed. It implements only what FedChain's callers use of the real CLI:
//
//   solc --version                         prints "Version: 0.8.N+commit.HASH"
//   solc --standard-json [--base-path D] [--include-path D]...
//                                          reads standard JSON on stdin, writes it on stdout
//
// Imports resolve against --base-path, every --include-path, the working
// directory, and node_modules beside this project. --allow-paths is accepted
// and ignored (the WebAssembly compiler reads files only through the resolver).
'use strict';
const fs = require('fs');
const path = require('path');

const projectRoot = path.resolve(__dirname, '..', '..');
let solc;
try {
  solc = require(path.join(projectRoot, 'node_modules', 'solc'));
} catch (err) {
  process.stderr.write('solc bridge: the npm package "solc" is not installed; run `make setup` (npm ci) first\n');
  process.exit(2);
}

const args = process.argv.slice(2);
if (args.includes('--version')) {
  process.stdout.write('solc, the solidity compiler commandline interface\nVersion: ' + solc.version() + '\n');
  process.exit(0);
}
if (!args.includes('--standard-json')) {
  process.stderr.write('solc bridge: only --version and --standard-json are supported\n');
  process.exit(2);
}

const roots = [];
for (let i = 0; i < args.length; i += 1) {
  if ((args[i] === '--base-path' || args[i] === '--include-path') && i + 1 < args.length) {
    roots.push(path.resolve(args[i + 1]));
    i += 1;
  }
}
roots.push(process.cwd(), path.join(process.cwd(), 'node_modules'), projectRoot, path.join(projectRoot, 'node_modules'));

function findImports(importPath) {
  for (const root of roots) {
    const candidate = path.resolve(root, importPath);
    if (fs.existsSync(candidate)) {
      return { contents: fs.readFileSync(candidate, 'utf8') };
    }
  }
  return { error: 'File not found: ' + importPath + ' (searched ' + roots.join(', ') + ')' };
}

const input = fs.readFileSync(0, 'utf8');
const output = solc.compile(input, { import: findImports });
// Write synchronously until every byte is out: a pipe may take a large JSON
// document in several pieces, and a non-blocking one may ask us to retry.
const buffer = Buffer.from(output, 'utf8');
let written = 0;
while (written < buffer.length) {
  try {
    written += fs.writeSync(1, buffer, written, buffer.length - written);
  } catch (err) {
    if (err.code !== 'EAGAIN') throw err;
  }
}
