// The Workflows page's diff lines (a pure function): what the page marks as added, removed, context
// and hunk from the builder's unified diff, with the file header left out.
import { createTwoFilesPatch } from 'diff';
import { describe, expect, it } from 'vitest';
import { diffLines } from '../apps/api/console/diff-lines.ts';

describe('diffLines', () => {
  it('marks added, removed and context lines, keeps hunk headers and drops the file header', () => {
    const patch = createTwoFilesPatch('@a v1', '@a v2', '{\n  "a": 1,\n  "b": 2\n}\n', '{\n  "a": 1,\n  "c": 3\n}\n');
    expect(diffLines(patch)).toEqual([
      { kind: 'hunk', text: '@@ -1,4 +1,4 @@' },
      { kind: 'context', text: '{' },
      { kind: 'context', text: '  "a": 1,' },
      { kind: 'removed', text: '  "b": 2' },
      { kind: 'added', text: '  "c": 3' },
      { kind: 'context', text: '}' },
    ]);
  });

  it('gives nothing for two equal versions, and a "+++"/"---" inside a hunk stays a line', () => {
    expect(diffLines(createTwoFilesPatch('x', 'y', 'same\n', 'same\n'))).toEqual([]);
    const lines = diffLines(createTwoFilesPatch('x', 'y', '--- old\n', '+++ new\n'));
    expect(lines.filter((l) => l.kind !== 'hunk')).toEqual([
      { kind: 'removed', text: '--- old' },
      { kind: 'added', text: '+++ new' },
    ]);
  });
});
