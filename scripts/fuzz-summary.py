"""Summary of a schemathesis run for scripts/fuzz.sh: counts, then one line per distinct failure
(check, operation, request, status) with a curl that reproduces it. Exit 1 if anything failed.

usage: fuzz-summary.py REPORT_DIR SCHEMATHESIS_EXIT_CODE SEED
"""

import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

report_dir, st_code, seed = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]

# A failure block in the JUnit text: "1. Test Case ID: x", "- ST101 Server error" lines, an optional
# "[500] Reason:" with the body in backticks, then "Reproduce with:" and the curl line.
CASE = re.compile(r"^\d+\. Test Case ID: \S+", re.M)
CHECK = re.compile(r"^- (ST\d+) (.+)$", re.M)
STATUS = re.compile(r"^\[(\d{3})\] [^\n]*:\s*\n\s*\n\s*`(.*?)`\s*$", re.M | re.S)
CURL = re.compile(r"^\s*(curl .+)$", re.M)


def request_of(curl: str) -> str:
    method = re.search(r"-X (\S+)", curl)
    url = re.search(r"(https?://\S+?)(?:'|\s|$)", curl)
    path = re.sub(r"^https?://[^/]+", "", url.group(1)) if url else "?"
    return f"{method.group(1) if method else 'GET'} {path}"


def short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


distinct: dict[tuple[str, str, str, str], dict[str, str]] = {}
junit = report_dir / "junit.xml"
if junit.exists():
    for case in ET.parse(junit).getroot().iter("testcase"):
        operation = case.get("name", "?")
        for node in list(case.findall("failure")) + list(case.findall("error")):
            text = node.text or node.get("message") or ""
            blocks = CASE.split(text)[1:] or [text]
            for block in blocks:
                checks = CHECK.findall(block) or [(node.tag.upper(), short(node.get("message") or text, 80))]
                status = STATUS.search(block)
                curl = CURL.search(block)
                request = request_of(curl.group(1)) if curl else operation
                for code, title in checks:
                    key = (code, operation, request.split("?")[0], status.group(1) if status else "-")
                    distinct.setdefault(
                        key,
                        {
                            "title": title.strip(),
                            "curl": curl.group(1).strip() if curl else "(no request: see the full output)",
                            "body": short(status.group(2)) if status else "",
                        },
                    )

report = {}
report_file = report_dir / "report.json"
if report_file.exists():
    report = json.loads(report_file.read_text())
ops = report.get("operations", {})
cases = report.get("test_cases", {})

print("\n==== fuzz summary ====")
if distinct:
    print(f"{len(distinct)} distinct failures (check, operation, request, status):")
    for (code, operation, request, status), info in sorted(distinct.items()):
        print(f"\n  {code} {info['title']} | {operation} | {request} | {status}")
        if info["body"]:
            print(f"    response: {info['body']}")
        curl = info["curl"]
        print(f"    {curl if len(curl) <= 400 else curl[:400] + ' …(cut; whole in junit.xml)'}")
    print()
print(
    f"operations: {ops.get('tested', '?')} tested of {ops.get('selected', '?')} selected ({ops.get('total', '?')} in the schema); "
    f"examples: {cases.get('generated', '?')}; failures: {cases.get('unique_failures', len(distinct))} unique"
    f" in {cases.get('with_failures', '?')} test cases; errors: {len(report.get('errors', [])) if report else '?'}; seed: {seed}"
)
if st_code in (124, 130, 137) or report.get("stop_reason", "completed") != "completed":
    print("schemathesis did not finish within FUZZ_MAX_TIME and was stopped: the counts above are partial.")
elif not report:
    print(f"schemathesis exited with {st_code} and wrote no report: see the full output.")
ok = st_code == 0 and not distinct and report.get("exit_code", 1) == 0
print("result: " + ("PASS" if ok else "FAIL"))
sys.exit(0 if ok else 1)
