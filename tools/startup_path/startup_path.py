#!/usr/bin/env python3
"""The path a command's start-up takes through src/app and src/nn, from a call trace.

Reads a trace that tools/startup_path/trace_calls.cpp wrote (the process's memory map, then every
function's entry and return, in order), names each function and its source file with addr2line,
and keeps the calls from the first function matching --start up to (not including) the first
matching --end. Of those it keeps the functions defined in src/app and src/nn, except
default, copy and move constructors, destructors and operators other than a call (a struct's
members set up, copied or torn down, a comparison: no step of the path), names each by its file
without the extension (a header and its .cpp are one file), and collapses repeats in a row: the
path. It prints the path, then

    files F          distinct files on the path
    climbs C         steps on the path from an nn file to an app file
    app entries ...  how often the path enters each app file, most first

and the same three for the path without nn's leaf calls (an nn function that calls no other
function of app or nn: an accessor, a parser, a size rule, a word's plural), which return at
once like a library's: the descents into nn and the climbs back that remain are the path's own.

Usage: startup_path.py TRACE --start REGEX --end REGEX [--src SRC]
"""
import argparse
import bisect
import collections
import pathlib
import re
import subprocess
import sys


def read_trace(path):
    maps, calls = [], []
    for line in pathlib.Path(path).read_text().splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "map":
            fields = rest.split()
            if len(fields) >= 6 and fields[5].startswith("/"):
                start, end = (int(x, 16) for x in fields[0].split("-"))
                maps.append((start, end, int(fields[2], 16), fields[5]))
        elif kind in ("call", "return"):
            calls.append((kind == "call", int(rest, 16)))
    return sorted(maps), calls


def symbolize(maps, calls):
    """{address: (function, source file)} for every distinct address."""
    bases = {}
    for start, _, offset, obj in maps:
        if offset == 0:
            bases.setdefault(obj, start)
    starts = [m[0] for m in maps]
    by_object = collections.defaultdict(set)
    for address in {a for _, a in calls}:
        i = bisect.bisect_right(starts, address) - 1
        if i >= 0 and address < maps[i][1] and maps[i][3] in bases:
            by_object[maps[i][3]].add(address)
    names = {}
    for obj, addresses in by_object.items():
        ordered = sorted(addresses)
        text = subprocess.run(
            ["addr2line", "-f", "-C", "-e", obj] + [hex(a - bases[obj]) for a in ordered],
            check=True, capture_output=True, text=True).stdout.splitlines()
        for address, function, where in zip(ordered, text[0::2], text[1::2]):
            names[address] = (function, where.rsplit(":", 1)[0])
    return names


SPECIAL = re.compile(
    r"(?:^|::)(\w+)::(?:~\1\(|\1\((?:\)|(?:mpitron::\w+::)*\1(?: const&|&&)\)))"
    r"|::operator(?!\(\))[^(]*\(")


def is_special(function):
    """A default, copy or move constructor, a destructor, or an operator other than operator()
    (a lambda's body is one)."""
    return bool(SPECIAL.search(function.split(" [")[0]))


def unit_of(source, src):
    try:
        relative = pathlib.Path(source).resolve().relative_to(src)
    except ValueError:
        return None
    if relative.parts[0] not in ("app", "nn"):
        return None
    return str(relative.with_suffix(""))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--start", required=True)
    parser.add_argument("--end", required=True)
    parser.add_argument("--src", default=str(pathlib.Path(__file__).resolve().parents[2] / "src"))
    args = parser.parse_args()
    maps, calls = read_trace(args.trace)
    names = symbolize(maps, calls)
    start, end = re.compile(args.start), re.compile(args.end)
    src = pathlib.Path(args.src).resolve()
    # The kept calls in order, each [unit, is_leaf]; a kept call stops being a leaf when a kept
    # call starts inside it.
    kept, stack, started = [], [], False
    for is_call, address in calls:
        function, source = names.get(address, ("?", "?"))
        if not started:
            started = is_call and bool(start.search(function))
            if not started:
                continue
        elif is_call and end.search(function):
            break
        if not is_call:
            if stack:
                stack.pop()
            continue
        unit = None if is_special(function) else unit_of(source, src)
        if unit is not None:
            for entry in reversed(stack):
                if entry is not None:
                    entry[1] = False
                    break
            kept.append([unit, True])
        stack.append(kept[-1] if unit is not None else None)
    if not started:
        sys.exit(f"startup_path: no call matches --start {args.start}")
    path = collapsed(unit for unit, _ in kept)
    for unit in path:
        print(unit)
    summarize(path, "")
    summarize(collapsed(u for u, leaf in kept if not (leaf and u.startswith("nn"))),
              " without nn's leaf calls")


def collapsed(units):
    """The units with repeats in a row taken out."""
    path = []
    for unit in units:
        if not path or path[-1] != unit:
            path.append(unit)
    return path


def summarize(path, suffix):
    climbs = sum(1 for a, b in zip(path, path[1:]) if a.startswith("nn") and b.startswith("app"))
    entries = collections.Counter(u for u in path if u.startswith("app"))
    print(f"files {len(set(path))}{suffix}")
    print(f"climbs {climbs}{suffix}")
    print(f"app entries{suffix} " + ", ".join(f"{u} {n}" for u, n in entries.most_common()))


if __name__ == "__main__":
    main()
