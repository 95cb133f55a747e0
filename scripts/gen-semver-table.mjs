#!/usr/bin/env node
// Writes tests/data/npm-semver-table.jsonl: what npm's own `semver` package
// (node-semver) says about a corpus of version ranges, so src/semver_range.rs
// can be checked against it offline (its test `agrees_with_the_npm_semver_table`).
//
//   node scripts/gen-semver-table.mjs [output-file]
//
// It installs the pinned semver version below from the npm registry into a
// temporary directory, so the table always comes from the real package.
// Rerun it after changing the corpus or the pinned version, and commit the
// output. The corpus is deterministic: the same script writes the same file.
//
// Format: the first line is {"generator", "semver", "versions"}; each further
// line is [range, valid, satisfies] where `valid` is
// `semver.validRange(range) !== null` and `satisfies` has one character per
// entry of `versions`: "1" when `semver.satisfies(version, range)`, else "0".

import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const SEMVER_VERSION = '7.8.6';
const RANDOM_RANGES = 2000;
const STRUCTURED_RANGES = 2500;

// Ranges written by hand: every operator, partial versions, hyphen ranges,
// alternatives, npm's oddities, numbers at JavaScript's limits, whitespace
// that is and is not JavaScript whitespace.
const RANGES = [
  '', '*', 'x', 'X', '1', '1.x', '1.2', '1.2.x', '1.2.*', '1.*', '1.x.x', '*.*.*',
  '1.2.3', '=1.2.3', 'v1.2.3', '=v1.2.3', ' 1.2.3 ', '==1.2.3', 'vv1.2.3', '01.2.3',
  '1.02.3', '1.2.03', '>1.2.3', '>=1.2.3', '<1.2.3', '<=1.2.3', '> 1.2.3', '>= 1.2.3',
  '<  1.2.3', '>=\t1.2.3', '>1', '>1.2', '<1', '<1.2', '<=1', '<=1.2', '>=1', '>=1.2',
  '=1', '=1.2', '>*', '<*', '>=*', '<=*', '=*', '~1', '~1.2', '~1.2.3', '~0.2.3',
  '~0.0.3', '~1.2.3-beta.2', '~>1.2', '~> 1.2.3', '~ 1.2.3', '~*', '~1.x', '~1.2.x', '^1',
  '^1.2', '^1.2.3', '^0', '^0.2', '^0.2.3', '^0.0.3', '^0.0', '^0.x', '^0.0.x', '^1.x',
  '^1.2.x', '^1.2.3-beta.2', '^0.0.3-beta', '^0.2.3-rc.1', '^ 1.2.3', '^*', '^v1.2.3',
  '^1.x.3', '1.2.3 - 2.3.4', '1.2 - 2.3.4', '1.2.3 - 2.3', '1.2.3 - 2', '1 - 2', '* - 2',
  '1.2.3 - *', '1.2.3-beta - 2.3.4-rc.1', 'v1.2.3 - v2.3.4', '1.2.3 -2.3.4',
  '1.2.3- 2.3.4', '=1.2.3 - 2', '1.2.3 - 2.3.4 || 3 - 4', '>=1.2.3 <2.0.0', '>=1.2.3 <2',
  '>1.0.0 <=1.5.0 || >=2.0.0', '1.2.3 || 2.x', '^1.2.3 || ^2', '1.2.7 || >=1.2.9 <2.0.0',
  '<0.0.0-0', '<0.0.0-0 || 1.2.3', '* || 1.2.3-beta', '>=1.0.0-beta <1.0.0 || *',
  '>=1.0.0-beta <1.0.0 || 2.x', '||', '1.2.3 ||', '|| 1.2.3', '1.2.3 | 2', '1.2.3 ||| 2',
  '>=1.2.3-alpha.1 <1.2.3', '1.2.3-alpha', '1.2.3-alpha.1', '1.2.3+build.5',
  '^1.2.3+build', '1.2.3-beta+build', '>=1.2.3+b', '1.2+build', '1.x.3', 'x.1',
  '1.2.x-beta', '~1.2.x-beta', '1.2.3-01', '1.2.3-', '1.2.3+', '1.2.3.4', '1.2.', 'a',
  'latest', '1.2.3*', '**', '> = 1.2.3', '<  =1.2.3', '1.2.3-v = 4',
  '9007199254740991.0.0', '9007199254740992.0.0', '^9007199254740991',
  '^9007199254740990', '~0.9007199254740991', '1.x.99999999999999999999999',
  '~1.x.99999999999999999999999', '\u00a01.2.3', '1.2.3\u3000|| 2', '^1.2.3\n',
  '>=1.2.3\t<2', '1.2.3 2.3.4', '>=2 <1', '<=1.2.3 >=1.2.3', '!1.2.3', '1.2.3 >', '>',
  '<', '=', '~', '^', '~>', '-1.2.3', '1.2.3 - ', 'v', 'vx', 'V1.2.3', '==1.2', '>==1.2',
  '~=1.2', '^=1.2.3', '< 1.2.3 > 1.0.0', '1.0.0 - 1.0.0', '~1.2.3 ^1.2.4', '^0.0.0',
  '^0.0.0-0', '~0', '>=0.0.0-0', '1.2.3-alpha.1 || 1.2.3-alpha.2', '<=2.3.4-rc.1',
  '>2.0.0-0', '2.0.0-alpha - 2.0.0', '1.2.3+b1 - 2.3.4+b2', '^1.2.3-0', '~2.3.4-rc',
  'x.x.x', '1.X', '1.2.X', '>= 1.2.3 < 2.0.0 || = 3.0.0', '~> 1', '~>', '^ ', '~ ',
  '\ufeff1.2.3', '1.2.3\u2028', '\u00851.2.3', '1.2.3\r\n', '\v^1', '\f~1.2',
  '1.2.3-a.b.c.d.e.f', '1.2.3-0.0', '1.2.3-00', '1.2.3-a-b', '1.2.3-a..b', '1.2.3+a..b',
  '^1.2.3-beta.0 || ~2.3.4-alpha', '>= 1 < 2 || >= 3 < 4 || 5.x', `${'1'.repeat(16)}.0.0`,
  `1.2.3-${'a'.repeat(250)}`, `1.2.3+${'b'.repeat(260)}`, `>=${'9'.repeat(300)}`,
];

// Versions every range is matched against: releases around the ranges'
// bounds, prereleases (which only match a comparator on the same tuple),
// build metadata (ignored), and a number close to 2^53.
const VERSIONS = [
  '0.0.0', '0.0.0-0', '0.0.1', '0.0.3', '0.0.4', '0.1.0', '0.2.3', '0.2.9', '0.3.0',
  '1.0.0', '1.0.0-beta', '1.0.0-rc.1', '1.2.2', '1.2.3', '1.2.3-0', '1.2.3-alpha',
  '1.2.3-alpha.1', '1.2.3-alpha.2', '1.2.3-beta.0', '1.2.3-beta.2', '1.2.3-beta.10',
  '1.2.3+build.1', '1.2.4', '1.2.4-alpha', '1.2.9', '1.3.0', '1.3.0-0', '1.5.0', '1.9.9',
  '2.0.0', '2.0.0-0', '2.0.0-alpha', '2.3.4', '2.3.4-rc.1', '2.3.5', '2.4.0', '3.0.0',
  '3.0.0-0', '3.5.0', '4.5.6', '5.0.0', '9007199254740990.1.0', '10.0.0',
];

// Fragments of the grammar, glued at random to reach corners nobody would
// list by hand.
const PIECES = [
  '1', '2', '0', '3', '10', '.', '.', '.', 'x', '*', '-', ' ', ' ', '^', '~', '>', '<',
  '=', 'v', '||', 'beta', '-rc.1', '+b', ' - ', '1.2.3', '0.2', 'X', '>=', '<=', '\t',
  '-0', '.x', '2.3.4', '~>', '01', '9007199254740991', '-alpha.1', ' || ',
];

/** xorshift64: small and deterministic, so the corpus never changes by itself. */
function rng(seed) {
  let state = seed;
  const mask = (1n << 64n) - 1n;
  return (n) => {
    state ^= (state << 13n) & mask;
    state ^= state >> 7n;
    state ^= (state << 17n) & mask;
    return Number(state % BigInt(n));
  };
}

function randomRanges(count) {
  const next = rng(0x2545f4914f6cdd1dn);
  const out = [];
  for (let i = 0; i < count; i++) {
    let s = '';
    const pieces = 1 + next(10);
    for (let j = 0; j < pieces; j++) s += PIECES[next(PIECES.length)];
    out.push(s);
  }
  return out;
}

/** Ranges built from the grammar's parts, so most of them are valid. */
function structuredRanges(count) {
  const next = rng(0x9e3779b97f4a7c15n);
  const pick = (items) => items[next(items.length)];
  const number = () => pick(['0', '0', '1', '1', '2', '3', '10', 'x', '*', 'X']);
  const pre = () => pick(['', '', '', '-0', '-alpha', '-alpha.1', '-beta.2', '-rc.1']);
  const partial = () => {
    const parts = 1 + next(3);
    let v = pick(['', '', '', 'v', '=']) + number();
    for (let i = 1; i < parts; i++) v += '.' + number();
    return parts === 3 ? v + pre() : v;
  };
  const op = () => pick(['', '', '>', '>=', '<', '<=', '=', '^', '~', '~>']);
  const space = () => pick(['', ' ', ' ', '  ', '\t']);
  const comparator = () => op() + space() + partial();
  const set = () => {
    if (next(5) === 0) return partial() + ' - ' + partial();
    const n = 1 + next(3);
    const cs = [];
    for (let i = 0; i < n; i++) cs.push(comparator());
    return cs.join(pick([' ', ' ', '  ']));
  };
  const out = [];
  for (let i = 0; i < count; i++) {
    const n = 1 + next(3);
    const sets = [];
    for (let j = 0; j < n; j++) sets.push(set());
    out.push(sets.join(pick([' || ', '||', ' ||  '])));
  }
  return out;
}

function installSemver() {
  const dir = mkdtempSync(join(tmpdir(), 'loopx-semver-table-'));
  execFileSync(
    'npm',
    ['install', '--prefix', dir, '--no-save', '--no-package-lock', '--no-audit',
      '--no-fund', '--loglevel=error', `semver@${SEMVER_VERSION}`],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  return dir;
}

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const outFile = process.argv[2] ?? join(root, 'tests/data/npm-semver-table.jsonl');
const dir = installSemver();
try {
  const semver = createRequire(join(dir, 'index.js'))('semver');
  const pkg = createRequire(join(dir, 'index.js'))('semver/package.json');
  if (pkg.version !== SEMVER_VERSION) {
    throw new Error(`installed semver ${pkg.version}, wanted ${SEMVER_VERSION}`);
  }
  const seen = new Set();
  const lines = [
    JSON.stringify({
      generator: 'scripts/gen-semver-table.mjs',
      semver: pkg.version,
      versions: VERSIONS,
    }),
  ];
  for (const range of [
    ...RANGES,
    ...randomRanges(RANDOM_RANGES),
    ...structuredRanges(STRUCTURED_RANGES),
  ]) {
    if (seen.has(range)) continue;
    seen.add(range);
    const valid = semver.validRange(range) !== null;
    const bits = VERSIONS.map((v) => (semver.satisfies(v, range) ? '1' : '0')).join('');
    lines.push(JSON.stringify([range, valid, bits]));
  }
  writeFileSync(outFile, lines.join('\n') + '\n');
  process.stderr.write(`wrote ${lines.length - 1} ranges x ${VERSIONS.length} versions to ${outFile}\n`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
