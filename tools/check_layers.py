#!/usr/bin/env python3
"""Checks mpitron's layering: kernels -> (autograd, comm) -> nn -> app.

Every C++/CUDA file under SRC may include its own layer and the layers below it only, and
<mpi.h> only from comm and above (DESIGN.md). Quoted includes are resolved against SRC, then
against the including file's folder. Prints one line per violation, "<file>:<line>: <layer>
includes <path> (<layer>)", and exits 1 when there is any, else 0.

Usage: check_layers.py SRC
"""
import pathlib
import re
import sys

# The layers each layer may include.
ALLOWED = {
    "kernels": {"kernels"},
    "autograd": {"kernels", "autograd"},
    "comm": {"kernels", "comm"},
    "nn": {"kernels", "autograd", "comm", "nn"},
    "app": {"kernels", "autograd", "comm", "nn", "app"},
}
MPI_LAYERS = {"comm", "nn", "app"}
SUFFIXES = {".h", ".hpp", ".cpp", ".cu", ".cuh"}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def layer_of(path, src):
    """The layer (first folder under src) of an existing file, or None outside src."""
    try:
        return path.resolve().relative_to(src).parts[0]
    except ValueError:
        return None


def violations(src):
    src = src.resolve()
    for file in sorted(p for p in src.rglob("*") if p.suffix in SUFFIXES):
        own = layer_of(file, src)
        if own not in ALLOWED:
            continue
        for number, line in enumerate(file.read_text(errors="replace").splitlines(), 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            bracket, name = match.groups()
            where = f"{file.relative_to(src)}:{number}"
            if bracket == "<":
                if name == "mpi.h" and own not in MPI_LAYERS:
                    yield f"{where}: {own} includes <mpi.h> (only comm, nn and app may)"
                continue
            for candidate in (src / name, file.parent / name):
                if candidate.exists():
                    target = layer_of(candidate, src)
                    if target in ALLOWED and target not in ALLOWED[own]:
                        yield f"{where}: {own} includes {name} ({target})"
                    break


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    found = list(violations(pathlib.Path(sys.argv[1])))
    for line in found:
        print(line)
    print(f"check_layers: {len(found)} layering violation(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
