#!/usr/bin/env python3
"""Regenerate detect_golden.json: the answers of ticketflow's quality-gate
detection over a corpus of inputs, for peal's Go tests to match.

Usage (from the repository root):

    python3 state/testdata/gen_detect_golden.py > state/testdata/detect_golden.json
    python3 state/testdata/gen_detect_golden.py --ticketflow DIR   # check only

The detection is reimplemented here from its description in
docs/retry-state.md; the patterns themselves are read from that file (the
block marked detection-patterns), so the description, this script and the
golden file cannot drift apart. Only Python's standard library is needed.
With --ticketflow DIR, the script imports ticketflow's tf.retry_state from
the checkout DIR and checks that it answers every case as this script does;
nothing of ticketflow is copied here.
"""

import argparse
import json
import random
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NAMES = ["Critical", "Major", "Minor", "Warnings", "Suggestions"]  # the severities tf counts

# int() refuses more than 4300 digits by default; a count of any size is
# meant, so the limit is lifted.
if hasattr(sys, "set_int_max_str_digits"):
    sys.set_int_max_str_digits(0)


def load_patterns(doc):
    """The detection-patterns block of doc: name -> (pattern, flags)."""
    text = doc.read_text(encoding="utf-8")
    block = re.search(r"^```text detection-patterns\n(.*?)^```", text, re.S | re.M)
    if not block:
        sys.exit(f"no detection-patterns block in {doc}")
    patterns = {}
    for line in block.group(1).splitlines():
        name, flags, pattern = line.split(None, 2)
        value = 0
        for flag in flags.split(","):
            if flag != "-":
                value |= getattr(re, flag)
        patterns[name] = (pattern, value)
    return patterns


class Detection:
    """The detection as docs/retry-state.md describes it."""

    def __init__(self, patterns):
        self.p = patterns

    def search(self, name, text, severity=None):
        pattern, flags = self.p[name]
        if severity is not None:
            pattern = pattern.replace("{severity}", re.escape(severity))
        return re.search(pattern, text, flags)

    def counts(self, text):
        out = {}
        for sev in NAMES:
            m = self.search("severity-stat", text, sev)
            out[sev] = int(m.group(1)) if m else 0
        return out

    def report(self, close_summary, review, fail_on):
        """(peal's report, ticketflow's close status word) for one case."""
        report = {"blocked": False, "source": "", "counts": {}, "close_status": "unknown"}
        tf_status = "unknown"
        cs = newlines(close_summary)
        if cs is not None:
            if self.search("blocked-status", cs):
                counts = self.counts(cs)
                report.update(blocked=True, source="close-summary.md", counts=counts, close_status="blocked")
                return report, "blocked"
            m = self.search("success-status", cs)
            if m:
                tf_status = m.group(1).lower()
                # peal names the word that matched; lower() turns CLOſED into cloſed.
                report["close_status"] = "complete" if len(m.group(1)) == len("COMPLETE") else "closed"
        rv = newlines(review)
        if rv is not None and fail_on:
            counts, blocked = {}, False
            for sev in fail_on:
                heading = self.search("review-section", rv, sev)
                if not heading:
                    continue
                rest = rv[heading.end():]
                nxt = self.search("next-heading", rest)
                section = rest[: nxt.start()] if nxt else rest
                stat = self.search("severity-stat", rv, sev)
                counts[sev] = int(stat.group(1)) if stat else (1 if self.search("list-item", section) else 0)
                blocked = blocked or counts[sev] > 0
            if blocked:
                report.update(blocked=True, source="review.md", counts=counts)
        return report, tf_status


def newlines(text):
    """Universal newlines, as Path.read_text applies them."""
    if text is None:
        return None
    return text.replace("\r\n", "\n").replace("\r", "\n")


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
    ("review failOn repeated", None, REVIEW, ["Major", "Major", "Critical"]),
    ("review headings like patterns", None, "## Critical|Major\n- x\n\n## Major.\n- y\n\n## (Minor)\n- z\n", ["Critical", "Major", "Minor"]),
    ("review long s in heading", None, "## \u017fuggestions\n- x\n", ["Suggestions"]),
    ("review dotted capital i in heading", None, "## M\u0130NOR\n- x\n", ["Minor"]),
    ("review kelvin sign in stat", None, "## Warnings\nWARNINGS: 0\n\n## Critical\n- x\n", ["Warnings", "Critical"]),
    ("review all five", None, "## Critical\n## Major\n- a\n## Minor\nMinor: 2\n## Warnings (w)\n- b\n## Suggestions: 3 of them\n", ["Critical", "Major", "Minor", "Warnings", "Suggestions"]),
    ("review nbsp heading", None, "##\u00a0Critical\u3000(must fix)\n-\u2003x\n", ["Critical"]),
    ("review dotless i heading", None, "## Cr\u0131t\u0131cal\n- x\n", ["Critical"]),
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
SEVERITY_WORDS = ["Critical", "CRITICAL", "Cr\u0131tical", "CR\u0130TICAL", "Major", "Minor", "Warnings",
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
            parts.append("##" + sp() + bold + rng.choice(SEVERITY_WORDS) + bold + paren + count + items + "\n")
        else:
            lines = []
            for _ in range(rng.randint(1, 5)):
                bold = rng.choice(["", "**"])
                lines.append(rng.choice(["", "- ", "* ", "x"]) + bold + rng.choice(SEVERITY_WORDS) + bold + sp() + ":" + sp()
                             + rng.choice(NUMBERS))
            parts.append(rng.choice(["\n", "\r\n"]).join(lines) + "\n")
    return rng.choice(["", "\n"]).join(parts)


def random_cases(n, seed):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        cs = None if rng.random() < 0.2 else random_text(rng)
        rv = None if rng.random() < 0.2 else random_text(rng)
        fo = rng.sample(NAMES, rng.randint(0, 3))
        out.append((f"random {i}", cs, rv, fo))
    return out


def ticketflow_report(tf, close_summary, review, fail_on):
    """ticketflow's own answer, from its functions on real files."""
    with tempfile.TemporaryDirectory() as d:
        for name, text in (("close-summary.md", close_summary), ("review.md", review)):
            if text is not None:
                # bytes, so that read_text does its own newline translation
                Path(d, name).write_bytes(text.encode("utf-8"))
        blocked = tf.detect_quality_gate_blocked(Path(d), fail_on)
        close = tf.detect_close_status(Path(d) / "close-summary.md")
    return {
        "blocked": blocked is not None,
        "source": blocked.source if blocked else "",
        "counts": blocked.counts if blocked else {},
        "close_status": close.status,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ticketflow", metavar="DIR", help="check ticketflow's code in DIR against this script; print no golden file")
    args = ap.parse_args()
    detect = Detection(load_patterns(ROOT / "docs" / "retry-state.md"))
    corpus = CASES + random_cases(300, 20260210)
    if args.ticketflow:
        sys.path.insert(0, args.ticketflow)
        import tf.retry_state as tf  # noqa: E402 (a checkout named on the command line)

        differ = 0
        for name, cs, rv, fo in corpus:
            mine, tf_status = detect.report(cs, rv, fo)
            theirs = ticketflow_report(tf, cs, rv, fo)
            expected = dict(mine, close_status=tf_status if mine["close_status"] != "blocked" else "blocked")
            if theirs != expected:
                differ += 1
                print(f"{name}: ticketflow {theirs}, this script {expected}")
        print(f"{len(corpus) - differ} of {len(corpus)} cases agree with ticketflow")
        sys.exit(1 if differ else 0)
    cases = []
    for name, cs, rv, fo in corpus:
        want, tf_status = detect.report(cs, rv, fo)
        case = {"name": name, "close_summary": cs, "review": rv, "fail_on": fo, "want": want}
        if tf_status not in ("unknown", "blocked") and tf_status != want["close_status"]:
            case["deviation"] = f"ticketflow says {tf_status!r}: peal names the word that matched instead of lower-casing it"
        cases.append(case)
    json.dump({"generator": "state/testdata/gen_detect_golden.py", "python": sys.version.split()[0], "cases": cases},
              sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
