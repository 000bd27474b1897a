#!/usr/bin/env python3
"""Checks mpitron's layering: kernels -> (autograd, comm) -> nn -> app.

Every C++/CUDA file under SRC may include its own layer and the layers below it only, and
<mpi.h> only from comm and above (docs/architecture.md). Inside nn and app the subfolders are
layered too (SUBLAYERS): a file may include its own subfolder and the subfolders of a lower
rank, never one of the same rank beside it or one above. Quoted includes are resolved against
SRC, then against the including file's folder. Prints one line per violation, "<file>:<line>:
<layer> includes <path> (<layer>)" or "... <layer>/<sub> includes <path> (<layer>/<sub>)", and
exits 1 when there is any, else 0.

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
# The rank of each part of a layered layer: its subfolders, "" for the files at its root, and
# root files named on their own. A part not listed is an error, so a new folder is placed here.
SUBLAYERS = {
    "nn": {"": 0, "layers": 1, "parallel": 1, "optim": 1, "data": 1, "checkpoint": 1,
           "models": 2, "train": 3},
    "app": {"common": 0, "report": 1, "validate": 2, "train": 2, "bench": 2, "model": 2,
            "data": 2, "": 3},
}
SUFFIXES = {".h", ".hpp", ".cpp", ".cu", ".cuh"}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def layer_of(path, src):
    """The layer (first folder under src) of an existing file, or None outside src."""
    try:
        return path.resolve().relative_to(src).parts[0]
    except ValueError:
        return None


def part_of(path, src):
    """(layer, part) of a file under src: part is its subfolder, or its name or "" at the root."""
    parts = path.resolve().relative_to(src).parts
    table = SUBLAYERS.get(parts[0], {})
    if len(parts) > 2:
        return parts[0], parts[1]
    return parts[0], parts[1] if parts[1] in table else ""


def sublayer_violation(file, target, src):
    """A message when `file` may not include `target` of the same layered layer, else None."""
    layer, own = part_of(file, src)
    table = SUBLAYERS.get(layer)
    if table is None:
        return None
    _, other = part_of(target, src)
    for part in (own, other):
        if part not in table:
            return f"{layer}/{part} is not in check_layers.py's SUBLAYERS"
    if other == own or table[other] < table[own]:
        return None
    return f"{layer}/{own} includes {target.relative_to(src)} ({layer}/{other})"


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
                    elif target == own:
                        message = sublayer_violation(file, candidate.resolve(), src)
                        if message:
                            yield f"{where}: {message}"
                    break


def main():
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(sys.argv) == 2 else 2
    src = pathlib.Path(sys.argv[1])
    if not all((src / layer).is_dir() for layer in ALLOWED):
        print(f"check_layers: error: {src} is not a source tree (it needs the folders "
              f"{', '.join(ALLOWED)})", file=sys.stderr)
        return 2
    found = list(violations(src))
    for line in found:
        print(line)
    print(f"check_layers: {len(found)} layering violation(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
