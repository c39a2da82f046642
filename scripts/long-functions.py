#!/usr/bin/env python3
"""Lists C++ functions longer than a limit (the architecture rule: no
function in any C++ folder (include, lib, tools, runtime, bench) over
about 80 lines except a kernel dispatch switch).

A small brace scanner, not a parser: it skips comments, strings and
character literals, and calls a brace a function body when the text
before it, outside any other function, ends in a parameter list (with
optional qualifiers, a trailing return type or a constructor's member
initialisers). Good enough for this codebase's style, which clang-format
keeps regular.

  scripts/long-functions.py [--limit N] [--allow FILE] PATH...

Exits 1 when a function over the limit is not in the allow file (lines
`path:function`, `#` comments), so CI can hold the rule.
"""
import argparse
import os
import re
import sys

SOURCE_SUFFIXES = (".cpp", ".h", ".cu", ".cuh")
NOT_FUNCTION = re.compile(
    r"^\s*(?:template\s*<.*>\s*)?(namespace|class|struct|union|enum|extern)\b")


def strip(text):
    """Blanks comments, strings and char literals, keeping newlines."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * (j - i - 2) + c if j - i >= 2 else c)
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def function_name(header):
    """The qualified name before the parameter list of `header`."""
    depth, k = 0, len(header) - 1
    # Skip member initialisers: `) : a(x), b(y)` -> cut at the `:` that
    # follows the parameter list's `)`.
    m = re.search(r"\)\s*(?:const\s*)?:(?!:)", header)
    if m:
        header = header[: m.start() + 1]
    k = header.rfind(")")
    while k >= 0:
        if header[k] == ")":
            depth += 1
        elif header[k] == "(":
            depth -= 1
            if depth == 0:
                break
        k -= 1
    m = re.search(r"([~\w:<>]+|operator\s*\S+)\s*$", header[:k])
    return m.group(1) if m else "?"


def drop_preprocessor(text):
    """Blanks preprocessor lines (with their continuations): a macro's
    body is not a function, and its lines end in no `;`."""
    lines, continued = text.split("\n"), False
    for i, line in enumerate(lines):
        if continued or line.lstrip().startswith("#"):
            continued = line.endswith("\\")
            lines[i] = ""
    return "\n".join(lines)


def functions(path):
    text = drop_preprocessor(
        strip(open(path, encoding="utf-8", errors="replace").read()))
    stack = []  # (kind, start line, name)
    last = 0  # where the current statement's text starts
    line = 1
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
        elif c == "{":
            header = text[last:i]
            inside_function = any(kind == "f" for kind, _, _ in stack)
            kind = "o"
            if not inside_function and not NOT_FUNCTION.match(header) and \
                    re.search(r"\)\s*(const|override|final|noexcept|"
                              r"->\s*[\w:<>&*, ]+|[\w\s:(),{}<>.&*\[\]]*)\s*$",
                              header) and "(" in header and \
                    not re.search(r"=\s*$", header):
                kind = "f"
            start = line - header.count("\n") + (len(header) - len(header.lstrip())) \
                and line - header.lstrip().count("\n")
            stack.append((kind, start, function_name(header) if kind == "f" else ""))
            last = i + 1
        elif c == "}":
            if stack:
                kind, start, name = stack.pop()
                if kind == "f":
                    yield name, start, line
            last = i + 1
        elif c == ";":
            last = i + 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--limit", type=int, default=80)
    parser.add_argument("--allow", help="file of path:function exceptions")
    args = parser.parse_args()
    allowed = []
    if args.allow:
        for entry in open(args.allow):
            entry = entry.split("#")[0].strip()
            if entry:
                allowed.append(tuple(entry.split(":", 1)))  # names hold ::
    files = []
    for path in args.paths:
        if os.path.isdir(path):
            for root, _, names in os.walk(path):
                files += [os.path.join(root, n) for n in names
                          if n.endswith(SOURCE_SUFFIXES)]
        else:
            files.append(path)
    failures = 0
    for path in sorted(files):
        for name, start, end in functions(path):
            lines = end - start + 1
            if lines <= args.limit:
                continue
            ok = any(path.endswith(p) and name == n for p, n in allowed)
            tag = "allowed" if ok else "TOO LONG"
            failures += not ok
            print(f"{tag}: {path}:{start}: {name} ({lines} lines)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
