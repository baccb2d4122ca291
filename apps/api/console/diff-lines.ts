// A unified diff (the builder's diffVersions patch) as lines the Workflows page can mark: added and
// removed lines keep their +/- sign and get a word for screen readers, so colour is never the only cue.
export type DiffLineKind = 'added' | 'removed' | 'context' | 'hunk';

export interface DiffLine {
  kind: DiffLineKind;
  /** The line without its leading sign. */
  text: string;
}

export function diffLines(patch: string): DiffLine[] {
  const out: DiffLine[] = [];
  let inHunk = false;
  for (const line of patch.split('\n')) {
    if (line.startsWith('@@')) {
      inHunk = true;
      out.push({ kind: 'hunk', text: line });
    } else if (!inHunk) {
      continue; // the Index/===/---/+++ header names the two versions, which the page already says
    } else if (line.startsWith('+')) out.push({ kind: 'added', text: line.slice(1) });
    else if (line.startsWith('-')) out.push({ kind: 'removed', text: line.slice(1) });
    else if (line.startsWith(' ')) out.push({ kind: 'context', text: line.slice(1) });
    // "\ No newline at end of file" and the final empty line carry nothing to show
  }
  return out;
}
