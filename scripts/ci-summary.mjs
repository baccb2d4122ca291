// Prints the closing line of a CI run from the JSON reports of its vitest passes:
//   node scripts/ci-summary.mjs <report.json> [<report.json> …]
// One line per pass, then `tests: N passed, N failed, N skipped` summed over every pass, as the last
// line (the plain form CI tooling reads). Exits 1 when a report is missing or unreadable, when a pass
// ran no test, or when any test failed: a green run must have run the suite.
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error('ci-summary: no report given');
  process.exit(1);
}

const total = { passed: 0, failed: 0, skipped: 0 };
let ok = true;
for (const file of files) {
  let report;
  try {
    report = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    console.error(`ci-summary: cannot read ${file}: ${err.message}`);
    ok = false;
    continue;
  }
  const passed = report.numPassedTests ?? 0;
  const failed = report.numFailedTests ?? 0;
  const skipped = (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0);
  const suites = report.numTotalTestSuites ?? report.testResults?.length ?? 0;
  // A file that failed to load has no test counted as failed: count its suite.
  const brokenFiles = report.numFailedTestSuites ?? 0;
  console.log(`pass ${basename(file, '.json')} (${suites} suites, ${brokenFiles} failed): ${passed} passed, ${failed} failed, ${skipped} skipped`);
  if (passed + failed === 0 || failed > 0 || brokenFiles > 0 || report.success === false) ok = false;
  total.passed += passed;
  total.failed += failed;
  total.skipped += skipped;
}
console.log(`tests: ${total.passed} passed, ${total.failed} failed, ${total.skipped} skipped`);
process.exit(ok ? 0 : 1);
