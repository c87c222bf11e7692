#!/usr/bin/env python3
"""Files over 500 lines and functions over 60 lines in Sources/, against the list of those still allowed.

    source_sizes.py            print every file and function over its limit, longest first
    source_sizes.py --check    exit 1 when one is over its limit and not in scripts/source-sizes.allowed, or longer
                               than the list allows, or listed but no longer over (remove it: the list only shrinks)
    source_sizes.py --measure FILE...
                               print each file's lines and each of its functions' lines, as the limits count them

A function is a `func`, `init`, `deinit` or `subscript` with a body; its length runs from its declaration's first
line to its closing brace. Strings, comments and interpolations are read as such, so a brace inside them counts for
nothing. The list names each by its file and name (`Sources/X/Y.swift decide 249`), not by line: lines move.
"""

import os
import re
import sys

FILE_LIMIT = 500
FUNCTION_LIMIT = 60
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
ALLOWED = os.path.join(ROOT, "scripts", "source-sizes.allowed")
DECLARATION = re.compile(r"\b(func\s+(`?[\w]+`?|[^\s(<]+)|init[?!]?|deinit|subscript)\s*[(<{]?")


def code_lines(text):
    """Each line with its string contents and comments blanked out (interpolations kept as code)."""
    out, line = [], []
    # A stack of what is open: "code" (with its paren depth inside an interpolation), '"', '"""', "/*".
    stack = [["code", 0]]
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        top = stack[-1]
        if c == "\n":
            out.append("".join(line))
            line = []
            if top[0] == '"':  # an unterminated single-line string ends with its line
                stack.pop()
            i += 1
            continue
        if top[0] == "code":
            if text.startswith("//", i):
                while i < n and text[i] != "\n":
                    i += 1
                continue
            if text.startswith("/*", i):
                stack.append(["/*", 0])
                i += 2
                continue
            if text.startswith('"""', i):
                stack.append(['"""', 0])
                line.append('"')
                i += 3
                continue
            if c == '"':
                stack.append(['"', 0])
                line.append('"')
                i += 1
                continue
            if len(stack) > 1 and c == "(":
                top[1] += 1
            elif len(stack) > 1 and c == ")":
                if top[1] == 0:  # the interpolation ends: back into its string
                    stack.pop()
                    i += 1
                    continue
                top[1] -= 1
            line.append(c)
            i += 1
        elif top[0] == "/*":
            if text.startswith("*/", i):
                stack.pop()
                i += 2
            else:
                i += 1
        else:  # inside a string
            if c == "\\" and text.startswith("\\(", i):
                stack.append(["code", 0])
                i += 2
            elif c == "\\":
                # An escape, skipped whole; but a backslash ending a line of a multi-line string (which continues it)
                # leaves the newline to end a line of the file.
                i += 1 if text.startswith("\\\n", i) else 2
            elif top[0] == '"""' and text.startswith('"""', i):
                stack.pop()
                line.append('"')
                i += 3
            elif top[0] == '"' and c == '"':
                stack.pop()
                line.append('"')
                i += 1
            else:
                i += 1
    out.append("".join(line))
    return out


def functions(lines):
    """(name, first line, length) of every function with a body."""
    found = []
    for start, line in enumerate(lines):
        match = DECLARATION.search(line)
        if not match or re.search(r"\bprotocol\b", line):
            continue
        name = match.group(2) or match.group(1).split()[0]
        # The signature runs until the parentheses close; then a `{` opens the body, or the declaration has none.
        depth, opened, body, end = 0, False, None, None
        for index in range(start, min(start + 40, len(lines))):
            text = lines[index][match.start():] if index == start else lines[index]
            for position, c in enumerate(text):
                if c in "([":
                    depth += 1
                elif c in ")]":
                    depth -= 1
                elif c == "{" and depth == 0:
                    body = (index, position + (match.start() if index == start else 0))
                    break
            if body:
                break
            stripped = lines[index + 1].strip() if index + 1 < len(lines) else ""
            continues = depth > 0 or stripped.startswith(("->", "throws", "async", "where", "{", "rethrows"))
            if not continues:
                break
        if not body:
            continue
        depth = 0
        for index in range(body[0], len(lines)):
            text = lines[index][body[1]:] if index == body[0] else lines[index]
            depth += text.count("{") - text.count("}")
            if depth <= 0:
                end = index
                break
        if end is not None:
            found.append((name, start + 1, end - start + 1))
    return found


def measure():
    """{(path, name): length} of every file and function over its limit; files are named `-`."""
    over = {}
    for directory, _, files in os.walk(os.path.join(ROOT, "Sources")):
        for file in sorted(files):
            if not file.endswith(".swift"):
                continue
            path = os.path.relpath(os.path.join(directory, file), ROOT)
            text = open(os.path.join(ROOT, path), encoding="utf-8").read()
            lines = code_lines(text)
            if len(lines) - (1 if text.endswith("\n") else 0) > FILE_LIMIT:
                over[(path, "-")] = len(lines) - (1 if text.endswith("\n") else 0)
            for name, _, length in functions(lines):
                if length > FUNCTION_LIMIT:
                    key = (path, name)
                    over[key] = max(length, over.get(key, 0))
    return over


def allowed():
    """{(path, name): ceiling} from the list; `#` starts a comment."""
    entries = {}
    for line in open(ALLOWED, encoding="utf-8"):
        line = line.split("#", 1)[0].strip()
        if line:
            path, name, ceiling = line.split()
            entries[(path, name)] = int(ceiling)
    return entries


def measure_files(paths):
    """`path lines` for each file, then `path name lines` for each of its functions."""
    for path in paths:
        text = open(path, encoding="utf-8").read()
        lines = code_lines(text)
        print(f"{path} {len(lines) - (1 if text.endswith(chr(10)) else 0)}")
        for name, _, length in functions(lines):
            print(f"{path} {name} {length}")


def main():
    if sys.argv[1:2] == ["--measure"]:
        measure_files(sys.argv[2:])
        return 0
    over = measure()
    if "--check" not in sys.argv[1:]:
        for (path, name), length in sorted(over.items(), key=lambda item: -item[1]):
            print(f"{path} {name} {length}")
        return 0
    listed = allowed()
    problems = []
    for (path, name), length in sorted(over.items()):
        ceiling = listed.get((path, name))
        what = f"{path} ({length} lines)" if name == "-" else f"{path}: {name} ({length} lines)"
        limit = FILE_LIMIT if name == "-" else FUNCTION_LIMIT
        if ceiling is None:
            problems.append(f"{what} is over {limit} lines; split it")
        elif length > ceiling:
            problems.append(f"{what} grew past the {ceiling} lines scripts/source-sizes.allowed allows; split it")
    for (path, name), ceiling in sorted(listed.items()):
        if (path, name) not in over:
            problems.append(f"{path} {name} is within its limit now: remove it from scripts/source-sizes.allowed")
        elif over[(path, name)] < ceiling:
            problems.append(
                f"{path} {name} is {over[(path, name)]} lines now: lower its ceiling in scripts/source-sizes.allowed")
    for problem in problems:
        print("source-sizes: " + problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
