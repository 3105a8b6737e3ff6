#!/usr/bin/env python3
"""Regenerate detect_golden.json: tf's own detection answers for a corpus.

Usage: python3 gen_detect_golden.py RETRY_STATE_SPEC.md > detect_golden.json

The detection functions are not copied here: they are taken from the
```python blocks of the retry-state spec and executed as they stand, so the
answers are the spec's, not a re-implementation's. Only development needs
Python; the Go tests read the JSON this prints.
"""

import json
import os
import random
import re
import sys
import tempfile
from pathlib import Path


def load_spec_functions(spec_path):
    text = Path(spec_path).read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    env = {}
    exec("import re\nfrom pathlib import Path\n" + "\n".join(blocks), env)
    return env


# Python 3.11 refuses int() of more than 4300 digits; peal reports any size,
# so the limit is lifted to get the value the spec's code means.
if hasattr(sys, "set_int_max_str_digits"):
    sys.set_int_max_str_digits(0)

BLOCKED = "## Status\n**BLOCKED**\n\n## Summary Statistics\n- Critical: 2\n- Major: 1\n- Minor: 0\n- Warnings: 3\n- Suggestions: 4\n"
CLOSED = "## Status\n**CLOSED**\n\n## Summary Statistics\n- Critical: 0\n- Major: 0\n- Minor: 1\n- Warnings: 0\n- Suggestions: 2\n"
REVIEW = "# Review\n\n## Critical (must fix)\n- src/a.go:1 nil map write\n\n## Major (should fix)\n\n## Minor (nice to fix)\n- naming\n\n## Summary Statistics\n- Critical: 1\n- Major: 0\n- Minor: 1\n"

# (name, close-summary.md or None, review.md or None, failOn)
CASES = [
    ("tf example blocked", BLOCKED, None, ["Critical", "Major"]),
    ("tf example closed", CLOSED, None, ["Critical", "Major"]),
    ("complete", "## Status\nCOMPLETE\n", None, []),
    ("complete at end of file", "## Status\nCOMPLETE", None, []),
    ("completed is not complete", "## Status\nCOMPLETED\n", None, []),
    ("no files", None, None, ["Critical"]),
    ("empty close summary", "", None, ["Critical"]),
    ("lower case status", "## status\nblocked\n- critical: 3\n", None, []),
    ("mixed case", "## STATUS\n**Blocked**\nMAJOR: 5\n", None, []),
    ("list marker dash", "## Status\n- BLOCKED\n", None, []),
    ("list marker star bold", "## Status\n* **BLOCKED**\n", None, []),
    ("blank line before status word", "## Status\n\n  **BLOCKED**\n", None, []),
    ("no space after hashes", "##Status\nBLOCKED\n", None, []),
    ("level three heading", "### Status\nBLOCKED\n", None, []),
    ("status on heading line", "## Status: BLOCKED\n", None, []),
    ("blocked at end without newline", "## Status\nBLOCKED", None, []),
    ("blocked then newline at end", "## Status\nBLOCKED\n", None, []),
    ("bold blocked at end", "## Status\n**BLOCKED**", None, []),
    ("blocked followed by letter", "## Status\nBLOCKEDX\n", None, []),
    ("blocked followed by dot", "## Status\nBLOCKED.\n", None, []),
    ("blocked followed by words", "## Status\n**Blocked** - quality gate\n", None, []),
    ("crlf blocked", BLOCKED.replace("\n", "\r\n"), None, []),
    ("crlf closed", CLOSED.replace("\n", "\r\n"), None, []),
    ("lone cr", "## Status\r**BLOCKED**\r- Critical: 6\r", None, []),
    ("cr cr lf", "## Status\r\r\nBLOCKED\r\n", None, []),
    ("bom", "\ufeff## Status\nBLOCKED\n", None, []),
    ("blocked and closed both", "## Status\n**CLOSED**\n\n## Status\n**BLOCKED**\n- Major: 1\n", None, []),
    ("closed then blocked in prose", "## Status\n**CLOSED**\n\n## Notes\nBLOCKED earlier\n", None, []),
    ("counts in prose", "## Status\nBLOCKED\n\nWe saw Critical: 3 problems and the Major : 4 ones, Minor:\n5.\n", None, []),
    ("bold counts with issues", "## Status\nBLOCKED\n- **Critical**: 0 issues\n- **Major**: 7 issues\n", None, []),
    ("count glued to a word", "## Status\nBLOCKED\nNonCritical: 9\nCritical: 1\n", None, []),
    ("first count wins", "## Status\nBLOCKED\nCritical: 1\nCritical: 2\n", None, []),
    ("counts missing", "## Status\nBLOCKED\n", None, []),
    ("leading zeros", "## Status\nBLOCKED\n- Critical: 000\n- Major: 0042\n", None, []),
    ("huge count", "## Status\nBLOCKED\n- Critical: 123456789012345678901234567890\n- Major: 9223372036854775808\n", None, []),
    ("count beyond python's digit limit", "## Status\nBLOCKED\n- Critical: 1" + "0" * 5000 + "\n", None, []),
    ("arabic indic digits", "## Status\nBLOCKED\n- Critical: \u0663\n- Major: \u0661\u0660\n", None, []),
    ("fullwidth and devanagari digits", "## Status\nBLOCKED\n- Critical: \uff10\uff17\n- Minor: \u0967\u0968\n", None, []),
    ("mixed script digits", "## Status\nBLOCKED\n- Critical: 1\u0662\U0001d7d13\n", None, []),
    ("superscript is not a digit", "## Status\nBLOCKED\n- Critical: \u00b2\n- Major: 2\u00b2\n", None, []),
    ("nbsp and em space", "##\u00a0Status\u2003\n\u3000**BLOCKED**\u2028- Critical:\u00a04\n", None, []),
    ("vertical tab and file separators", "##\x0bStatus\x1c\n\x1d\x1e\x1fBLOCKED\x0b", None, []),
    ("next line and ogham space", "##\x85Status\u1680\n\u2000-\u200aBLOCKED\u202f\u205fMajor:\u20093\n", None, []),
    ("line separator after status is not a newline", "## Status\u2028BLOCKED\n", None, []),
    ("zero width space is not whitespace", "## Status\n\u200bBLOCKED\n", None, []),
    ("unicode space before count", "## Status\nBLOCKED\n\u3000Critical: 5\n\x85Major: 6\n", None, []),
    ("long s in status", "## \u017ftatus\nBLOCKED\n", None, []),
    ("kelvin sign in blocked", "## Status\nBLOC\u212aED\n", None, []),
    ("dotless i in critical", "## Status\nBLOCKED\n- Cr\u0131t\u0131cal: 4\n", None, []),
    ("dotted capital i in critical", "## Status\nBLOCKED\n- CR\u0130T\u0130CAL: 5\n", None, []),
    ("long s in suggestions", "## Status\nBLOCKED\n- \u017fugge\u017ftion\u017f: 8\n", None, []),
    ("long s in closed", "## Status\n**CLO\u017fED**\n", None, []),
    ("turkish i in minor", "## Status\nBLOCKED\n- M\u0130NOR: 2\n- m\u0131nor: 3\n", None, []),
    # review.md fallback
    ("review items and stats", None, REVIEW, ["Critical", "Major"]),
    ("review with closed summary", CLOSED, REVIEW, ["Critical", "Major"]),
    ("review with unknown summary", "# Close\nnothing here\n", REVIEW, ["Critical"]),
    ("review empty failOn", None, REVIEW, []),
    ("review failOn lower case", None, REVIEW, ["critical", "major"]),
    ("review failOn duplicate spellings", None, REVIEW, ["Major", "major", "Critical", "CRITICAL"]),
    ("review only major", None, REVIEW, ["Major"]),
    ("review items without stats", None, "## Critical\n- a\n- b\n\n## Major\n", ["Critical", "Major"]),
    ("review section without items", None, "## Critical\n\n## Major\n- x\n", ["Critical"]),
    ("review stat zero overrides items", None, "Critical: 0\n\n## Critical\n- a real finding\n", ["Critical"]),
    ("review heading with count", None, "## Critical: 3 found\n", ["Critical"]),
    ("review bold heading with count", None, "## **Critical**: 0 issues\n- x\n", ["Critical"]),
    ("review heading with parentheses", None, "## Critical (must fix)\n- x\n", ["Critical"]),
    ("review heading with text after parentheses", None, "## Critical (must fix) now\n- x\n", ["Critical"]),
    ("review heading unclosed parenthesis", None, "## Critical (must\n- x\n", ["Critical"]),
    ("review heading parentheses over lines", None, "## Critical (must\nfix)\n- x\n", ["Critical"]),
    ("review heading no space", None, "##Critical\n- x\n", ["Critical"]),
    ("review heading level three", None, "### Critical\n- x\n", ["Critical"]),
    ("review dash without space", None, "## Critical\n-x\n", ["Critical"]),
    ("review indented item", None, "## Critical\n  - x\n", ["Critical"]),
    ("review item in next section only", None, "## Critical\n\n## Notes\n- x\n", ["Critical"]),
    ("review item after deeper heading", None, "## Critical\n### Sub\n- x\n", ["Critical"]),
    ("review heading at end of file", None, "intro\n## Critical", ["Critical"]),
    ("review first line heading", None, "## Critical\n- x", ["Critical"]),
    ("review item at end without newline", None, "## Critical\n-", ["Critical"]),
    ("review item tab", None, "## Critical\n-\tx\n", ["Critical"]),
    ("review item unicode space", None, "## Critical\n-\u00a0x\n", ["Critical"]),
    ("review crlf", None, REVIEW.replace("\n", "\r\n"), ["Critical", "Major"]),
    ("review counts in prose", None, "## Major\nThere is Major: 12 to fix.\n", ["Major"]),
    ("review huge count", None, "## Critical\nCritical: 98765432109876543210\n", ["Critical"]),
    ("review unicode digits", None, "## Critical\nCritical: \u0665\n", ["Critical"]),
    ("review failOn with regex metacharacters", None, "## C++ (high)\n- x\n\n## a.b\n- y\n\n## Major|Minor\n- z\n", ["C++ (high)", "a.b", "axb", "Major|Minor", "Major"]),
    ("review failOn with brackets and backslash", None, "## [x]\\y\n- x\n", ["[x]\\y", "x"]),
    ("review failOn empty string", None, "## \n- x\n\n## Critical\n", [""]),
    ("review failOn empty string with stat", None, "## \n- x\nsomething: 0\n", [""]),
    ("review failOn unicode case", None, "## \u03c3\u03a3\u03c2 findings\n## \u03a3\u03c3\u03c3\n- x\n", ["\u03c3\u03c3\u03c3"]),
    ("review failOn sharp s", None, "## \u1e9e\n- x\n\n## SS\n- y\n", ["\u00df"]),
    ("review failOn kelvin", None, "## kilo\n- x\n", ["\u212aILO"]),
    ("review failOn dotted i", None, "## iNFO\n- x\n", ["\u0130nfo"]),
    ("review failOn dotless i", None, "## INFO\n- x\n", ["\u0131nfo"]),
    ("review failOn micro sign", None, "## \u03bcs\n- x\n", ["\u00b5S"]),
    ("review failOn titlecase digraph", None, "## \u01c4x\n- x\n", ["\u01c5X"]),
    ("review nbsp heading", None, "##\u00a0Critical\u3000(must fix)\n-\u2003x\n", ["Critical"]),
    ("review dotless i heading", None, "## Cr\u0131t\u0131cal\n- x\n", ["critical"]),
    ("review stats only", None, "## Summary\n- Critical: 2\n", ["Critical"]),
    ("review blocked close summary wins", BLOCKED, "## Major\n- x\n", ["Major"]),
]

FRAGMENTS = [
    "## ", "##", "#", "Status", "status", "\u017ftatus", "\n", "\n", "\n", "\r\n", "\r", " ", "  ", "\t",
    "\u00a0", "\u2003", "\x85", "\x0b", "\u2028", "**", "*", "-", "- ", "BLOCKED", "blocked", "CLOSED",
    "COMPLETE", "Closed", "CLO\u017fED", "BLOC\u212aED", "Critical", "CRITICAL", "Cr\u0131tical", "CR\u0130TICAL",
    "Major", "Minor", "Warnings", "Suggestions", ":", ": ", " : ", "0", "1", "7", "00", "42",
    "\u0663", "\uff19", "123456789012345678901234", "(must fix)", "(", ")", "x", "issues", "\u200b",
]


SPACES = ["", " ", "  ", "\t", "\u00a0", "\u2003", "\x85", "\x0b", "\u3000", "\n", "\r\n"]
NUMBERS = ["0", "1", "7", "00", "42", "\u0663", "\uff19", "123456789012345678901234", "-1", ""]
WORDS = ["BLOCKED", "blocked", "CLOSED", "COMPLETE", "Closed", "CLO\u017fED", "BLOC\u212aED", "BLOCKEDX", "DONE"]
SEVERITIES = ["Critical", "CRITICAL", "Cr\u0131tical", "CR\u0130TICAL", "Major", "Minor", "Warnings",
              "Suggestions", "\u017fuggestions", "Other"]


def random_text(rng):
    """Mostly tf-shaped documents with random variations, some pure noise."""
    if rng.random() < 0.2:
        return "".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(0, 24)))
    sp = lambda: rng.choice(SPACES)
    parts = []
    for _ in range(rng.randint(1, 4)):
        kind = rng.random()
        if kind < 0.35:
            bold = rng.choice(["", "**"])
            parts.append("#" * rng.randint(1, 3) + sp() + rng.choice(["Status", "status", "\u017ftatus", "Summary"]) + sp()
                         + rng.choice(["\n", "\r\n", "\r", ""]) + sp() + rng.choice(["", "-", "*", "- "]) + sp()
                         + bold + rng.choice(WORDS) + bold + rng.choice(["", "\n", " ", ".", " - gate"]))
        elif kind < 0.7:
            bold = rng.choice(["", "**"])
            paren = rng.choice(["", " (must fix)", "(x)", " (open", " ()"])
            count = rng.choice(["", ": " + rng.choice(NUMBERS) + rng.choice(["", " issues"])])
            items = "".join(rng.choice(["\n- item", "\n-item", "\n  - item", "\n-\titem", "\n\n- item", "\ntext"])
                            for _ in range(rng.randint(0, 2)))
            parts.append("##" + sp() + bold + rng.choice(SEVERITIES) + bold + paren + count + items + "\n")
        else:
            lines = []
            for _ in range(rng.randint(1, 5)):
                bold = rng.choice(["", "**"])
                lines.append(rng.choice(["", "- ", "* ", "x"]) + bold + rng.choice(SEVERITIES) + bold + sp() + ":" + sp()
                             + rng.choice(NUMBERS))
            parts.append(rng.choice(["\n", "\r\n"]).join(lines) + "\n")
    return rng.choice(["", "\n"]).join(parts)


def random_cases(n, seed):
    rng = random.Random(seed)
    fail_on_pool = ["Critical", "major", "Minor", "Cr\u0131tical", "", "Warnings (x)", "\u017fuggestions", "Other"]
    out = []
    for i in range(n):
        cs = None if rng.random() < 0.2 else random_text(rng)
        rv = None if rng.random() < 0.2 else random_text(rng)
        fo = rng.sample(fail_on_pool, rng.randint(0, 3))
        out.append((f"random {i}", cs, rv, fo))
    return out


def python_report(fns, close_summary, review, fail_on):
    with tempfile.TemporaryDirectory() as d:
        for name, text in (("close-summary.md", close_summary), ("review.md", review)):
            if text is not None:
                # bytes, so that read_text does its own newline translation
                Path(d, name).write_bytes(text.encode("utf-8"))
        blocked = fns["detect_quality_gate_blocked"](Path(d), fail_on)
        close = fns["detect_close_status"](Path(d) / "close-summary.md")
    return {
        "blocked": blocked is not None,
        "source": blocked["source"] if blocked else "",
        "counts": blocked["counts"] if blocked else {},
        "close_status": close["status"],
    }


def peal_expectation(report):
    """Where peal deliberately differs from the spec's Python, and why."""
    status = report["close_status"]
    if status not in ("closed", "complete", "blocked", "unknown"):
        # Python lower-cases the matched word; "CLOſED" stays "cloſed".
        fixed = dict(report, close_status="complete" if len(status) == 8 else "closed")
        return fixed, "close status named by the word that matched, not lower-cased"
    return report, None


def main():
    fns = load_spec_functions(sys.argv[1])
    cases = []
    for name, cs, rv, fo in CASES + random_cases(300, 20260210):
        py = python_report(fns, cs, rv, fo)
        want, why = peal_expectation(py)
        case = {"name": name, "close_summary": cs, "review": rv, "fail_on": fo, "want": want}
        if why:
            case["python"] = py
            case["deviation"] = why
        cases.append(case)
    json.dump({"generator": "gen_detect_golden.py", "python": sys.version.split()[0], "cases": cases},
              sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
