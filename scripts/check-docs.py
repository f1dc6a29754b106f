#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks the documentation (README.md and docs/*.md):
  - every relative link resolves: its file exists and its #anchor is a
    heading of that file (GitHub's anchors: lower case, punctuation
    dropped, spaces as hyphens);
  - the table of options in docs/configuration.md (between its begin/end
    markers) is the one made from `httpdcnode --list-options`, which prints
    src/options.c's table, the same rows --help is made from: the two never
    drift;
  - every counter of GET /stats, every metric family of GET /metrics and
    each of its reason labels, as `httpdcnode --list-counters` lists them,
    is in docs/operations.md: a counter as `name` in its Counters section
    (before Metrics), a family as `name` (without httpdcnode_) in its
    Metrics section, a label's reason as `reason` on its family's row.
  scripts/check-docs.py [--fix]   (--fix writes the table in again; make docs)
The binary is $HTTPDCNODE_BIN, else ./httpdcnode. Ends with one line.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = "docs/configuration.md"
BEGIN = "<!-- begin: ./httpdcnode --list-options -->\n"
END = "<!-- end: ./httpdcnode --list-options -->"


def anchors(path):
    out, seen, fence = set(), {}, False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            fence = not fence
            continue
        m = None if fence else re.match(r"^#{1,6} (.*)", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def links(path):
    text, fence = [], False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            fence = not fence
        elif not fence:
            text.append(line)
    return re.findall(r"\]\(([^)\s]+)\)", "".join(text))


def check_links(files):
    bad = 0
    for f in files:
        for link in links(f):
            if re.match(r"^[a-z]+:", link):      # http:, https:, mailto:
                continue
            target, _, anchor = link.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(f), target)) if target else f
            if not os.path.exists(dest):
                print(f"check-docs: {f}: {link}: no such file")
                bad += 1
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                print(f"check-docs: {f}: {link}: no such heading in {os.path.relpath(dest)}")
                bad += 1
    return bad


def cell(text):
    """Markdown table cell: | escaped, < and * not taken as HTML or emphasis."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace("*", "\\*")


def options_table(listed):
    """`--list-options` (option<TAB>default<TAB>text a line) as a Markdown table."""
    rows = ["| Option | Default | What |", "|---|---|---|"]
    for line in listed.splitlines():
        option, default, text = line.split("\t")
        rows.append(f"| `{option}` | {cell(default)} | {cell(text)} |")
    return "\n".join(rows) + "\n"


def check_help(fix):
    binary = os.environ.get("HTTPDCNODE_BIN", "./httpdcnode")
    try:
        help_text = options_table(subprocess.run([binary, "--list-options"], capture_output=True,
                                                 text=True, check=True).stdout)
    except (OSError, subprocess.CalledProcessError, ValueError) as e:
        print(f"check-docs: cannot run {binary} --list-options: {e}")
        return 1
    doc = open(CONFIG, encoding="utf-8").read()
    i, j = doc.find(BEGIN), doc.find(END)
    if i < 0 or j < i:
        print(f"check-docs: {CONFIG}: no --list-options markers")
        return 1
    if doc[i + len(BEGIN):j] == help_text:
        return 0
    if fix:
        open(CONFIG, "w", encoding="utf-8").write(doc[:i + len(BEGIN)] + help_text + doc[j:])
        print(f"check-docs: {CONFIG}: the options' table written in again")
        return 0
    print(f"check-docs: {CONFIG}: the options' table differs from `{binary} --list-options` "
          "(make docs, or scripts/check-docs.py --fix)")
    return 1


OPERATIONS = "docs/operations.md"


def section(text, title, next_title):
    i = text.find(title)
    j = text.find(next_title, i + 1) if i >= 0 else -1
    return text[i:j] if i >= 0 and j > i else None


def check_counters():
    binary = os.environ.get("HTTPDCNODE_BIN", "./httpdcnode")
    try:
        listed = subprocess.run([binary, "--list-counters"], capture_output=True, text=True,
                                check=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"check-docs: cannot run {binary} --list-counters: {e}")
        return 1
    doc = open(OPERATIONS, encoding="utf-8").read()
    counters = section(doc, "\n## Counters\n", "\n### Metrics\n")
    metrics = section(doc, "\n### Metrics\n", "\n### ")
    if counters is None or metrics is None:
        print(f"check-docs: {OPERATIONS}: no Counters or Metrics section")
        return 1
    bad = 0
    for line in listed:
        kind, name, *rest = line.split()
        if kind == "counter" and f"`{name}`" not in counters:
            print(f"check-docs: {OPERATIONS}: counter {name} is not in its Counters section")
            bad += 1
        family = name.removeprefix("httpdcnode_")
        if kind == "metric" and f"`{family}`" not in metrics and f"`{family}{{" not in metrics:
            print(f"check-docs: {OPERATIONS}: metric {name} is not in its Metrics section")
            bad += 1
        if kind == "label":
            reason = rest[0].removeprefix("reason=")
            rows = [r for r in metrics.splitlines() if f"`{family}{{reason}}`" in r]
            if not rows or f"`{reason}`" not in rows[0]:
                print(f"check-docs: {OPERATIONS}: reason {reason} of {name} is not on its row "
                      f"(`{family}{{reason}}`) of the Metrics section")
                bad += 1
    return bad


def main():
    os.chdir(ROOT)
    files = ["README.md"] + sorted(os.path.join("docs", f) for f in os.listdir("docs")
                                   if f.endswith(".md"))
    bad = check_links(files) + check_help("--fix" in sys.argv[1:]) + check_counters()
    status = "passed" if bad == 0 else "FAILED"
    print(f"check-docs: {status}: {len(files)} files, {bad} problems")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
