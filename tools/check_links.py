#!/usr/bin/env python3
"""The documentation's link guard: every relative link in README.md and docs/*.md must resolve.

    python3 tools/check_links.py [ROOT]

ROOT (default: the repository this script lives in) holds README.md and docs/. A markdown link
`[text](target)`, an image `![alt](target)` or a reference definition `[name]: target` is
checked when its target is relative: the file or folder part must exist, relative to the file
that holds the link, and stay inside ROOT; an `#anchor` (alone, or after a .md file) must be one
of that file's headings in GitHub's spelling (lower case, punctuation dropped, spaces as
hyphens, `-1`, `-2`, ... on repeats). http(s), mailto and other scheme links are not checked.
Links inside fenced or indented code blocks and inline code are not links.

Prints one line per broken link (`docs/x.md:12: ...`) and `check_links: N broken link(s)`, exit
1; exit 0 when all resolve. Standard library only. ctest runs it as `docs_links`.
"""

import os
import re
import sys

INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
INLINE_CODE = re.compile(r"(`+)(?:.+?)\1")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def documents(root):
    """README.md and docs/*.md (sorted), as paths relative to root."""
    found = []
    if os.path.isfile(os.path.join(root, "README.md")):
        found.append("README.md")
    docs = os.path.join(root, "docs")
    if os.path.isdir(docs):
        found += sorted("docs/" + name for name in os.listdir(docs) if name.endswith(".md"))
    return found


def prose_lines(text):
    """(line number, line) of the lines outside code blocks, inline code blanked out."""
    fence = None
    previous_blank = True
    in_indented_code = False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if fence:
            if stripped.startswith(fence):
                fence = None
            previous_blank = False
            continue
        match = re.match(r"^\s{0,3}(`{3,}|~{3,})", line)
        if match:
            fence = match.group(1)[0] * len(match.group(1))
            continue
        if not stripped:
            previous_blank = True
            continue
        indented = line.startswith("    ") or line.startswith("\t")
        in_indented_code = indented and (previous_blank or in_indented_code)
        previous_blank = False
        if in_indented_code:
            continue
        yield number, INLINE_CODE.sub(lambda m: " " * len(m.group(0)), line)


def slug(heading):
    """GitHub's anchor for a heading text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path, cache):
    """The anchors of the headings of a markdown file (outside code blocks)."""
    if path not in cache:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        seen = {}
        result = set()
        for _, line in prose_lines_keep_code_spans(text):
            match = HEADING.match(line)
            if not match:
                continue
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            result.add(base if count == 0 else f"{base}-{count}")
        cache[path] = result
    return cache[path]


def prose_lines_keep_code_spans(text):
    """Like prose_lines, but with inline code kept (a heading's `code` is part of its anchor)."""
    lines = text.splitlines()
    for number, _ in prose_lines(text):
        yield number, lines[number - 1]


def targets(text):
    """(line number, target) of every link in a document's prose."""
    for number, line in prose_lines(text):
        for match in INLINE_LINK.finditer(line):
            yield number, match.group(1)
        match = REFERENCE_DEFINITION.match(line)
        if match:
            yield number, match.group(1)


def check(root):
    """Lines describing each broken link of root's documents."""
    root = os.path.realpath(root)
    problems = []
    cache = {}
    for document in documents(root):
        path = os.path.join(root, document)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for number, target in targets(text):
            where = f"{document}:{number}:"
            if SCHEME.match(target) or target.startswith("//"):
                continue  # http(s), mailto, ...: not checked
            file_part, _, anchor = target.partition("#")
            file_part = file_part.split("?", 1)[0]
            if file_part:
                resolved = os.path.realpath(os.path.join(os.path.dirname(path), file_part))
                if resolved != root and not resolved.startswith(root + os.sep):
                    problems.append(f"{where} '{target}' points outside the repository")
                    continue
                if not os.path.exists(resolved):
                    problems.append(f"{where} '{target}': no such file or folder")
                    continue
            else:
                resolved = path
            if anchor and resolved.endswith(".md") and os.path.isfile(resolved):
                if anchor.lower() not in anchors(resolved, cache):
                    shown = os.path.relpath(resolved, root)
                    problems.append(f"{where} '{target}': no heading '#{anchor}' in {shown}")
    return problems


def main(argv):
    if len(argv) > 2 or (len(argv) == 2 and argv[1] in ("-h", "--help")):
        print(__doc__.strip(), file=sys.stderr if len(argv) > 2 else sys.stdout)
        return 2 if len(argv) > 2 else 0
    root = argv[1] if len(argv) == 2 else os.path.join(os.path.dirname(__file__), "..")
    if not os.path.isdir(root):
        print(f"check_links: error: {root} is not a folder", file=sys.stderr)
        return 2
    problems = check(root)
    for line in problems:
        print(line)
    if problems:
        print(f"check_links: {len(problems)} broken link(s)")
        return 1
    print(f"check_links: every relative link of {len(documents(root))} documents resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
